// Composes two ONNX models into one (as onnx.compose.merge_models does): the first model's outputs feed
// the second's inputs of the same name, one graph results. Used to ship a frozen external backbone and the
// head trained on its features as a single deployable file.
//
// The first model is copied as it is (nodes, initializers, local functions, subgraphs untouched); every
// name of the second (values, initializers, nodes) gets `prefix`, except its graph inputs and outputs, so
// the two cannot collide — the first model must not use the prefix or the second's input/output names
// itself. The composed graph's inputs are the first model's plus the second's unconnected ones; its
// outputs are the second's. Both must import the same default-domain opset (operator semantics change
// between versions, so mixing them is not a rename); other domains are merged.
import { ProtoWriter, readFields, type ProtoField } from './protobuf.js';

const text = (b: Uint8Array) => new TextDecoder().decode(b);
const bytesOf = (f: ProtoField) => f.value as Uint8Array;
const strings = (fs: ProtoField[], n: number) => fs.filter((f) => f.field === n).map((f) => text(bytesOf(f)));

// Field numbers of onnx.proto3.
const MODEL = { ir: 1, graph: 7, opset: 8, doc: 6, metadata: 14, functions: 25 };
const GRAPH = { node: 1, name: 2, initializer: 5, doc: 10, input: 11, output: 12, valueInfo: 13, quant: 14, sparse: 15 };
const NODE = { input: 1, output: 2, name: 3, attribute: 5 };
const ATTR = { g: 6, graphs: 11 };

/** Writes one field back as it was read. */
function copy(w: ProtoWriter, f: ProtoField): void {
  if (f.wire === 0) w.int(f.field, f.value as bigint);
  else if (f.wire === 2) w.bytes(f.field, bytesOf(f));
  else if (f.wire === 5) w.float(f.field, new DataView(bytesOf(f).buffer, bytesOf(f).byteOffset, 4).getFloat32(0, true));
  else throw new Error(`compose: cannot rewrite a fixed64 field (${f.field})`);
}

/** A message with the string fields `fields` passed through `rename`. */
function renamed(b: Uint8Array, fields: readonly number[], rename: (s: string) => string): (w: ProtoWriter) => void {
  return (w) => {
    for (const f of readFields(b)) {
      if (f.wire === 2 && fields.includes(f.field)) w.string(f.field, rename(text(bytesOf(f))));
      else copy(w, f);
    }
  };
}

/** Every value and node name a graph uses (nodes, initializers, inputs, outputs, value_info), subgraphs included. */
function namesOf(graph: Uint8Array, out = new Set<string>()): Set<string> {
  const gf = readFields(graph);
  for (const f of gf) {
    if (f.field === GRAPH.node) {
      const nf = readFields(bytesOf(f));
      for (const s of [...strings(nf, NODE.input), ...strings(nf, NODE.output), ...strings(nf, NODE.name)]) if (s) out.add(s);
      for (const a of nf.filter((x) => x.field === NODE.attribute)) {
        for (const af of readFields(bytesOf(a))) if (af.field === ATTR.g || af.field === ATTR.graphs) namesOf(bytesOf(af), out);
      }
    } else if (f.field === GRAPH.initializer) {
      for (const s of strings(readFields(bytesOf(f)), 8)) out.add(s);
    } else if (f.field === GRAPH.input || f.field === GRAPH.output || f.field === GRAPH.valueInfo) {
      for (const s of strings(readFields(bytesOf(f)), 1)) out.add(s);
    }
  }
  return out;
}

const valueName = (b: Uint8Array) => strings(readFields(b), 1)[0] ?? '';

function opsets(model: ProtoField[]): Map<string, bigint> {
  const m = new Map<string, bigint>();
  for (const f of model.filter((x) => x.field === MODEL.opset)) {
    const of = readFields(bytesOf(f));
    const domain = strings(of, 1)[0] ?? '';
    m.set(domain === 'ai.onnx' ? '' : domain, (of.find((x) => x.field === 2)?.value as bigint | undefined) ?? 0n);
  }
  return m;
}

export interface ComposeOptions {
  /** Prefix of the second model's internal names (default 'head/'). */
  prefix?: string;
  /** metadata_props of the composed model (default: the second model's). */
  metadata?: Readonly<Record<string, string>>;
  graphName?: string;
  docString?: string;
}

/**
 * `first` then `second`, joined where an output of `first` and an input of `second` share a name
 * (at least one must). Returns the serialized composed model.
 */
export function composeModels(first: Uint8Array, second: Uint8Array, opts: ComposeOptions = {}): Uint8Array {
  const prefix = opts.prefix ?? 'head/';
  const m1 = readFields(first), m2 = readFields(second);
  const g1b = m1.find((f) => f.field === MODEL.graph), g2b = m2.find((f) => f.field === MODEL.graph);
  if (!g1b || !g2b) throw new Error('compose: a model has no graph');
  const g1 = readFields(bytesOf(g1b)), g2 = readFields(bytesOf(g2b));
  const o1 = opsets(m1), o2 = opsets(m2);
  const v1 = o1.get('') ?? 0n, v2 = o2.get('') ?? 0n;
  if (v1 !== v2) throw new Error(`compose: the first model imports opset ${v1}, the second ${v2}; convert the first to opset ${v2} (onnx.version_converter) before composing`);
  for (const [d, v] of o2) if (o1.has(d) && o1.get(d) !== v) throw new Error(`compose: domain '${d}' is imported at version ${o1.get(d)} and ${v}`);

  const out1 = g1.filter((f) => f.field === GRAPH.output).map((f) => bytesOf(f));
  const in2 = g2.filter((f) => f.field === GRAPH.input).map((f) => bytesOf(f));
  const outNames1 = new Set(out1.map(valueName));
  const joined = new Set(in2.map(valueName).filter((n) => outNames1.has(n)));
  if (!joined.size) throw new Error(`compose: no output of the first model (${[...outNames1].join(', ')}) is an input of the second (${in2.map(valueName).join(', ')})`);
  const keep = new Set([...in2.map(valueName), ...g2.filter((f) => f.field === GRAPH.output).map((f) => valueName(bytesOf(f)))]);
  const used = namesOf(bytesOf(g1b));
  const clash = [...used].find((n) => n.startsWith(prefix) || (keep.has(n) && !joined.has(n)));
  if (clash !== undefined) {
    throw new Error(`compose: the first model uses the name '${clash}', which ${clash.startsWith(prefix) ? `starts with the second model's prefix '${prefix}'` : "is an input or output of the second model"}`);
  }
  const rename = (s: string) => (s === '' || keep.has(s) ? s : prefix + s);

  const g = new ProtoWriter();
  // nodes: the first model's as they are, then the second's renamed (a valid topological order)
  for (const f of g1.filter((x) => x.field === GRAPH.node)) g.bytes(GRAPH.node, bytesOf(f));
  for (const f of g2.filter((x) => x.field === GRAPH.node)) {
    for (const nf of readFields(bytesOf(f))) {
      if (nf.field === NODE.attribute && readFields(bytesOf(nf)).some((a) => a.field === ATTR.g || a.field === ATTR.graphs)) {
        throw new Error('compose: the second model has subgraphs (If, Loop, Scan); only the first may');
      }
    }
    g.message(GRAPH.node, renamed(bytesOf(f), [NODE.input, NODE.output, NODE.name], rename));
  }
  g.string(GRAPH.name, opts.graphName ?? text(bytesOf(g2.find((x) => x.field === GRAPH.name) ?? { field: 0, wire: 2, value: new TextEncoder().encode('composed') })));
  for (const f of g1.filter((x) => x.field === GRAPH.initializer)) g.bytes(GRAPH.initializer, bytesOf(f));
  for (const f of g2.filter((x) => x.field === GRAPH.initializer)) g.message(GRAPH.initializer, renamed(bytesOf(f), [8], rename));
  for (const f of g1.filter((x) => x.field === GRAPH.sparse)) g.bytes(GRAPH.sparse, bytesOf(f));
  if (g2.some((x) => x.field === GRAPH.sparse)) throw new Error('compose: the second model has sparse initializers');
  if (opts.docString) g.string(GRAPH.doc, opts.docString);
  for (const f of g1.filter((x) => x.field === GRAPH.input)) g.bytes(GRAPH.input, bytesOf(f));
  for (const b of in2) if (!joined.has(valueName(b))) g.bytes(GRAPH.input, b);
  for (const f of g2.filter((x) => x.field === GRAPH.output)) g.bytes(GRAPH.output, bytesOf(f));
  // the joined values keep their declared type and shape as value_info
  for (const b of out1) if (joined.has(valueName(b))) g.bytes(GRAPH.valueInfo, b);
  for (const f of g1.filter((x) => x.field === GRAPH.valueInfo)) g.bytes(GRAPH.valueInfo, bytesOf(f));
  for (const f of g2.filter((x) => x.field === GRAPH.valueInfo)) g.message(GRAPH.valueInfo, renamed(bytesOf(f), [1], rename));
  for (const f of g1.filter((x) => x.field === GRAPH.quant)) g.bytes(GRAPH.quant, bytesOf(f));

  const m = new ProtoWriter();
  const ir = (fs: ProtoField[]) => (fs.find((x) => x.field === MODEL.ir)?.value as bigint | undefined) ?? 0n;
  m.int(MODEL.ir, ir(m1) > ir(m2) ? ir(m1) : ir(m2));
  m.string(2, 'wmrl-bridge');
  m.string(3, '0.1.0');
  const doc = opts.docString ?? strings(m2, MODEL.doc)[0];
  if (doc) m.string(MODEL.doc, doc);
  m.bytes(MODEL.graph, g.finish());
  for (const [domain, version] of new Map([...o1, ...o2])) m.message(MODEL.opset, (op) => op.string(1, domain).int(2, version));
  const metadata = opts.metadata ?? Object.fromEntries(m2.filter((x) => x.field === MODEL.metadata).map((x) => {
    const ef = readFields(bytesOf(x));
    return [strings(ef, 1)[0] ?? '', strings(ef, 2)[0] ?? ''];
  }));
  for (const [k, v] of Object.entries(metadata)) m.message(MODEL.metadata, (e) => e.string(1, k).string(2, v));
  for (const f of m1.filter((x) => x.field === MODEL.functions)) m.bytes(MODEL.functions, bytesOf(f));
  if (m2.some((x) => x.field === MODEL.functions)) throw new Error('compose: the second model has local functions');
  return m.finish();
}
