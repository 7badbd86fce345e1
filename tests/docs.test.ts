// The documentation stays true: README.md stays short, every command the CLI knows and every /api route the
// service serves is documented in README.md or docs/, and every relative link in them resolves (file and heading).
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type Service } from '../server/service.js';

const ROOT = resolve(import.meta.dirname, '..');
const README = join(ROOT, 'README.md');
const DOC_FILES = [README, ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join(ROOT, 'docs', f))];
const docs = new Map(DOC_FILES.map((f) => [f, readFileSync(f, 'utf8')]));
const allText = [...docs.values()].join('\n');
const run = promisify(execFile);
const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The command names under "Commands:" in commander's help. */
function commandsOf(help: string): string[] {
  const section = help.split(/^Commands:$/m)[1] ?? '';
  return [...section.matchAll(/^ {2}([a-z][\w-]*)/gm)].map((m) => m[1]!);
}
async function help(...args: string[]): Promise<string> {
  const { stdout } = await run(join(ROOT, 'node_modules/.bin/tsx'), [join(ROOT, 'bin/wmrl.ts'), ...args, '--help'], { cwd: ROOT, timeout: 30_000 });
  return stdout;
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fence = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fence = !fence;
    const m = !fence && /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const base = m[1]!.trim().toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

describe('docs', () => {
  it('README.md is at most 350 lines', () => {
    expect(docs.get(README)!.split('\n').length).toBeLessThanOrEqual(350);
  });

  it('every wmrl command and episodes subcommand appears in README.md or docs/', async () => {
    const [top, episodes] = await Promise.all([help(), help('episodes')]);
    const verbs = commandsOf(top);
    const subs = commandsOf(episodes).filter((c) => c !== 'help');
    expect(verbs).toContain('serve'); // the help was parsed
    expect(subs).toContain('export-lerobot');
    // A command is documented where a code span starts with it (`drive ...`, `npm start -- drive`, `wmrl drive`).
    const missing = verbs.filter((v) => !new RegExp(`\`(?:npm start -- |npx tsx bin/wmrl\\.ts |wmrl )?${escape(v)}(?=[\\s\`\\\\|\\[])`).test(allText));
    // A subcommand: a code span starting with `episodes` that names it between spaces or |.
    missing.push(...subs.filter((s) => !new RegExp(`\`(?:npm start -- |wmrl )?episodes [^\`\\n]*?(?<=[ |])${escape(s)}(?=[\\s\`\\\\|\\[])`).test(allText)).map((s) => `episodes ${s}`));
    expect(missing, 'commands `wmrl --help` lists that README.md and docs/*.md never show').toEqual([]);
  }, 30_000);

  describe('every /api route of the service appears in README.md or docs/', () => {
    const dir = mkdtempSync(join(tmpdir(), 'wmrl-docs-'));
    let svc: Service;
    beforeAll(async () => {
      svc = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: null });
    }, 30_000);
    afterAll(async () => {
      await svc?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('documents each route path, :params as written in the docs', async () => {
      const doc = (await svc.app.inject({ url: '/docs/json' })).json<{ paths: Record<string, unknown> }>();
      const routes = new Set(Object.keys(doc.paths).map((p) => p.replace(/\{\*\}/g, '*').replace(/\{(\w+)\}/g, ':$1').replace(/(.)\/$/, '$1')));
      // Routes the OpenAPI document leaves out (the WebSocket stream): fastify's own route tree.
      const stack: string[] = [];
      for (const line of svc.app.printRoutes({ commonPrefix: false }).split('\n')) {
        const m = /^([│ ]*)[├└]── (\S+) \(/.exec(line);
        if (!m) continue;
        const depth = m[1]!.length / 4;
        stack.length = depth;
        stack.push(m[2]!);
        const path = stack.join('').replace(/\/\//g, '/').replace(/(.)\/$/, '$1');
        if (!path.includes('*')) routes.add(path);
      }
      const api = [...routes].filter((p) => p.startsWith('/api/'));
      expect(api).toContain('/api/stream');
      expect(api).toContain('/api/runs/:id/stop');
      // The path as written, not as the prefix of a longer one; a wildcard is written `<file>` or `*`.
      const missing = api.filter((p) => {
        const pattern = p.split('*').map(escape).join('(?:\\*|<[^>\\s]+>)');
        return !new RegExp(`${pattern}(?![\\w/:<*-])`).test(allText);
      });
      expect(missing, 'routes the service serves that README.md and docs/*.md never name').toEqual([]);
    });
  });

  it('every relative link in README.md and docs/*.md points to an existing file (and heading)', () => {
    const broken: string[] = [];
    for (const [file, text] of docs) {
      const prose = text.replace(/^```[\s\S]*?^```/gm, '');
      for (const m of prose.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/i.test(target)) continue; // http:, https:, mailto:
        const [path, anchor] = target.split('#') as [string, string | undefined];
        const abs = path === '' ? file : resolve(dirname(file), decodeURI(path));
        const where = `${file.slice(ROOT.length + 1)}: ${target}`;
        if (!existsSync(abs)) broken.push(`${where} (no such file)`);
        else if (anchor && statSync(abs).isFile() && abs.endsWith('.md')) {
          const text2 = docs.get(abs) ?? readFileSync(abs, 'utf8');
          if (!anchorsOf(text2).has(anchor)) broken.push(`${where} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});
