// A strict reader of the small XML files a ROS 2 package holds (launch files, package.xml): elements, attributes,
// text, comments, the XML declaration and processing instructions. Anything not well-formed — an unclosed or
// mismatched tag, an unquoted or repeated attribute, `--` inside a comment, a stray `<` or `&` — is an error naming
// the line.

export interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: XmlElement[];
  /** The element's own text, entities decoded, trimmed. */
  text: string;
  line: number;
}

const ENTITIES: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };
const NAME = /^[A-Za-z_][\w.:-]*/;

function decode(s: string, line: number): string {
  return s.replace(/&([^;\s]*);?/g, (m, e: string) => {
    if (!m.endsWith(';')) throw new Error(`line ${line}: a bare '&' (write &amp;)`);
    if (e.startsWith('#x')) return String.fromCodePoint(parseInt(e.slice(2), 16));
    if (e.startsWith('#')) return String.fromCodePoint(parseInt(e.slice(1), 10));
    const v = ENTITIES[e];
    if (v === undefined) throw new Error(`line ${line}: unknown entity &${e};`);
    return v;
  });
}

export function parseXml(text: string): XmlElement {
  let i = 0;
  const lineAt = (k: number) => text.slice(0, k).split('\n').length;
  const fail = (why: string): never => {
    throw new Error(`line ${lineAt(i)}: ${why}`);
  };
  const stack: XmlElement[] = [];
  let root: XmlElement | undefined;
  while (i < text.length) {
    if (text.startsWith('<!--', i)) {
      const end = text.indexOf('-->', i + 4);
      if (end < 0) fail('an unclosed comment');
      if (text.slice(i + 4, end).includes('--')) fail("'--' inside a comment");
      i = end + 3;
    } else if (text.startsWith('<?', i)) {
      const end = text.indexOf('?>', i);
      if (end < 0) fail('an unclosed processing instruction');
      if (root || stack.length) fail('a processing instruction after the root element started');
      i = end + 2;
    } else if (text.startsWith('</', i)) {
      const m = NAME.exec(text.slice(i + 2));
      const close = text.indexOf('>', i);
      if (!m || close < 0 || text.slice(i + 2 + m[0].length, close).trim() !== '') fail('a malformed end tag');
      const open = stack.pop();
      if (!open) fail(`</${m![0]}> closes nothing`);
      if (open!.name !== m![0]) fail(`</${m![0]}> closes <${open!.name}> (line ${open!.line})`);
      open!.text = open!.text.trim();
      i = close + 1;
    } else if (text[i] === '<') {
      const start = i;
      const m = NAME.exec(text.slice(i + 1));
      if (!m) fail("a '<' that starts no tag");
      const el: XmlElement = { name: m![0], attrs: {}, children: [], text: '', line: lineAt(start) };
      i += 1 + m![0].length;
      for (;;) {
        const ws = /^\s*/.exec(text.slice(i))![0];
        i += ws.length;
        if (text.startsWith('/>', i) || text[i] === '>') break;
        if (!ws) fail(`<${el.name}>: attributes must be separated by white space`);
        const a = /^([A-Za-z_][\w.:-]*)\s*=\s*(?:"([^"<]*)"|'([^'<]*)')/.exec(text.slice(i));
        if (!a) fail(`<${el.name}>: a malformed attribute (name="value")`);
        if (Object.hasOwn(el.attrs, a![1]!)) fail(`<${el.name}>: attribute ${a![1]} given twice`);
        el.attrs[a![1]!] = decode(a![2] ?? a![3]!, lineAt(i));
        i += a![0].length;
      }
      const selfClosing = text.startsWith('/>', i);
      i += selfClosing ? 2 : 1;
      if (stack.length) stack.at(-1)!.children.push(el);
      else if (root) fail(`a second root element <${el.name}>`);
      else root = el;
      if (!selfClosing) stack.push(el);
    } else {
      const next = text.indexOf('<', i);
      const chunk = text.slice(i, next < 0 ? text.length : next);
      if (stack.length) stack.at(-1)!.text += decode(chunk, lineAt(i));
      else if (chunk.trim()) fail('text outside the root element');
      i = next < 0 ? text.length : next;
    }
  }
  if (stack.length) throw new Error(`line ${stack.at(-1)!.line}: <${stack.at(-1)!.name}> is never closed`);
  if (!root) throw new Error('no root element');
  return root;
}
