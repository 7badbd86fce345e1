// The evidence protocol (bench/lib/protocol.ts, bench/lib/ledger.ts): splits that overlap are refused, the run key
// moves with the code a benchmark imports and its options and with nothing else, a test cell is evaluated once per
// run key (a second look is refused unless asked for, and then recorded), and `--check` vouches for a report only
// under this code's key.
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Ledger } from '../bench/lib/ledger.js';
import { CellCache, checkCommitted, defineSplits, evaluateCell, fromJson, importClosure, protocolKeys, protocolRun, ProtocolError, runKey, runKeySources, toJson, variantKey } from '../bench/lib/protocol.js';
import { keyLines } from '../bench/lib/report.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'bench-protocol-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('splits', () => {
  it('accepts disjoint splits and tells which split an item is in, combinations by value', () => {
    const s = defineSplits('b', {
      seeds: { train: [0, 1], validation: [2], test: [3, 4] },
      targets: { train: [{ task: 'reach', target: [0, 1] }], validation: [], test: [{ target: [1, 1], task: 'reach' }] },
    });
    expect(s.splitOf('seeds', 1)).toBe('train');
    expect(s.splitOf('seeds', 4)).toBe('test');
    expect(s.splitOf('seeds', 9)).toBeNull();
    // Field order does not make another item.
    expect(s.splitOf('targets', { target: [0, 1], task: 'reach' })).toBe('train');
    expect(s.splitOf('targets', { task: 'reach', target: [1, 1] })).toBe('test');
  });

  it('refuses an item in two splits, an item twice in one, and an empty test split, naming them', () => {
    expect(() => defineSplits('vla', { seeds: { train: [0, 1], validation: [2], test: [1] } })).toThrow(/bench vla: seeds: 1 is in both train and test; train, validation and test must be disjoint/);
    expect(() => defineSplits('vla', { combos: { train: [['reach', 'red']], validation: [['reach', 'red']], test: [['push', 'red']] } })).toThrow(/combos: \["reach","red"\] is in both train and validation/);
    expect(() => defineSplits('vla', { seeds: { train: [], validation: [3, 3], test: [4] } })).toThrow(/3 is listed twice in validation/);
    expect(() => defineSplits('vla', { seeds: { train: [0], validation: [1], test: [] } })).toThrow(/the test split is empty/);
    expect(() => defineSplits('vla', { seeds: { train: [0], validation: [1], test: [2] } }).splitOf('states' as 'seeds', 0)).toThrow(/no split of 'states' is declared/);
  });
});

describe('run key', () => {
  /** A small repository: bench/x.ts imports ../lib/a.js, which imports ./b.js; c.ts is imported by no one. */
  function repo(): string {
    const root = join(dir, 'repo');
    for (const d of ['bench', 'lib', 'progs']) mkdirSync(join(root, d), { recursive: true });
    writeFileSync(join(root, 'bench/x.ts'), "import { a } from '../lib/a.js';\nexport const x = a;\n");
    writeFileSync(join(root, 'lib/a.ts'), "export { b as a } from './b.js';\nimport 'node:fs';\n");
    writeFileSync(join(root, 'lib/b.ts'), 'export const b = 1;\n');
    writeFileSync(join(root, 'lib/c.ts'), 'export const c = 1;\n');
    writeFileSync(join(root, 'progs/run.ts'), 'export const r = 1;\n');
    writeFileSync(join(root, 'package-lock.json'), '{}\n');
    return root;
  }

  it('hashes the entry, what it imports transitively, the folders named and package-lock.json', () => {
    const root = repo();
    expect(importClosure('bench/x.ts', root)).toEqual(['bench/x.ts', 'lib/a.ts', 'lib/b.ts']);
    expect(runKeySources({ entry: 'bench/x.ts', dirs: ['progs'], root })).toEqual(['bench/x.ts', 'lib/a.ts', 'lib/b.ts', 'package-lock.json', 'progs/run.ts']);
  });

  it('moves with an imported file, a named folder, package-lock.json and the options, and with nothing else', () => {
    const root = repo();
    const key = (options: unknown = { seeds: [1, 2], n: 3 }) => runKey({ entry: 'bench/x.ts', dirs: ['progs'], options, root });
    const k0 = key();
    expect(k0).toMatch(/^[0-9a-f]{24}$/);
    expect(key({ n: 3, seeds: [1, 2] })).toBe(k0); // option order is not an option
    writeFileSync(join(root, 'lib/c.ts'), 'export const c = 2;\n'); // imported by no one
    expect(key()).toBe(k0);
    expect(key({ seeds: [1, 2], n: 4 })).not.toBe(k0);
    for (const [file, text] of [['lib/b.ts', 'export const b = 2;\n'], ['progs/run.ts', 'export const r = 2;\n'], ['package-lock.json', '{ }\n']] as const) {
      const before = readFileSync(join(root, file), 'utf8');
      writeFileSync(join(root, file), text);
      expect(key(), file).not.toBe(k0);
      writeFileSync(join(root, file), before);
      expect(key(), file).toBe(k0);
    }
  });

  it('refuses an import that resolves to no file, and a folder outside the repository', () => {
    const root = repo();
    expect(() => runKey({ entry: 'bench/x.ts', dirs: ['../etc'], root })).toThrow(/folder '..\/etc' must be a path inside the repository/);
    expect(() => runKey({ entry: 'bench/x.ts', files: ['lib/gone.ts'], root })).toThrow(/file 'lib\/gone.ts' does not exist/);
    writeFileSync(join(root, 'lib/b.ts'), "import { z } from './gone.js';\nexport const b = z;\n");
    expect(() => runKey({ entry: 'bench/x.ts', root })).toThrow(/lib\/b.ts imports '.\/gone.js', which resolves to no file/);
  });

  it('splits the computation key from the report key: an edit of the report alone keeps the cells', () => {
    const root = repo();
    // bench/x.ts (the report) imports lib/a.ts (the cells' code), which imports lib/b.ts.
    const keys = (cellOptions: unknown = { n: 3 }, reportOptions: unknown = { seeds: [1, 2] }) =>
      protocolKeys({ compute: { entry: 'lib/a.ts', options: cellOptions, root }, report: { entry: 'bench/x.ts', options: reportOptions, root } });
    const k0 = keys();
    expect(k0.compute).toMatch(/^[0-9a-f]{24}$/);
    expect(k0.report).not.toBe(k0.compute);
    writeFileSync(join(root, 'bench/x.ts'), "import { a } from '../lib/a.js';\nexport const x = a; // reworded\n");
    const reworded = keys();
    expect(reworded.compute).toBe(k0.compute);
    expect(reworded.report).not.toBe(k0.report);
    // More seeds in the report: the same cells.
    expect(keys({ n: 3 }, { seeds: [1, 2, 3] })).toMatchObject({ compute: k0.compute });
    expect(keys({ n: 3 }, { seeds: [1, 2, 3] }).report).not.toBe(reworded.report);
    // The cells' code or options: both keys move.
    const cellsMoved = keys({ n: 4 });
    expect(cellsMoved.compute).not.toBe(k0.compute);
    expect(cellsMoved.report).not.toBe(reworded.report);
    writeFileSync(join(root, 'lib/b.ts'), 'export const b = 2;\n');
    expect(keys().compute).not.toBe(k0.compute);
    expect(keys().report).not.toBe(reworded.report);
    // Cells that import the report's file would void themselves on every rewording: refused.
    writeFileSync(join(root, 'lib/b.ts'), "import '../bench/x.js';\nexport const b = 1;\n");
    expect(() => keys()).toThrow(/the cells' code \(lib\/a.ts\) imports the report's file bench\/x.ts/);
  });

  /** Per-variant keys: bench/r.ts (the report) imports cells/v-a.ts and cells/v-b.ts, each a variant's glue importing cells/setup.ts and its own trainer t/a.ts or t/b.ts. */
  function variantRepo(): string {
    const root = join(dir, 'vrepo');
    for (const d of ['bench', 'cells', 't']) mkdirSync(join(root, d), { recursive: true });
    writeFileSync(join(root, 'cells/setup.ts'), 'export const pretrain = 1;\n');
    for (const v of ['a', 'b', 'c']) {
      writeFileSync(join(root, `t/${v}.ts`), `export const train${v} = 1;\n`);
      writeFileSync(join(root, `cells/v-${v}.ts`), `import { pretrain } from './setup.js';\nimport { train${v} } from '../t/${v}.js';\nexport const run = pretrain + train${v};\n`);
    }
    writeFileSync(join(root, 'bench/r.ts'), "import '../cells/v-a.js';\nimport '../cells/v-b.js';\nimport '../cells/v-c.js';\n");
    writeFileSync(join(root, 'package-lock.json'), '{}\n');
    return root;
  }

  it('keys each variant by the shared setup and its own code and options: adding or editing one keeps the others', () => {
    const root = variantRepo();
    const spec = (names: string[], lr: Record<string, number> = {}) => protocolKeys({
      compute: { entry: 'cells/setup.ts', options: { updates: 3 }, root },
      variants: Object.fromEntries(names.map((n) => [n, { entry: `cells/v-${n}.ts`, options: { lr: lr[n] ?? 1e-3 } }])),
      report: { entry: 'bench/r.ts', options: { seeds: [1] }, root },
    });
    const two = spec(['a', 'b']);
    expect(Object.keys(two.variants!)).toEqual(['a', 'b']);
    expect(two.variants!.a).not.toBe(two.variants!.b);
    expect(two.variants!.a).not.toBe(two.compute);
    // Adding a variant: the others keep their keys; the report, which covers every cell it uses, moves.
    const three = spec(['a', 'b', 'c']);
    expect(three.compute).toBe(two.compute);
    expect(three.variants!.a).toBe(two.variants!.a);
    expect(three.variants!.b).toBe(two.variants!.b);
    expect(three.report).not.toBe(two.report);
    // Editing one variant's trainer moves its key alone.
    writeFileSync(join(root, 't/a.ts'), 'export const traina = 2;\n');
    const edited = spec(['a', 'b', 'c']);
    expect(edited.variants!.a).not.toBe(three.variants!.a);
    expect({ compute: edited.compute, b: edited.variants!.b, c: edited.variants!.c }).toEqual({ compute: three.compute, b: three.variants!.b, c: three.variants!.c });
    expect(edited.report).not.toBe(three.report);
    // A variant's options (its grid point) move its key alone; the shared setup moves every key.
    const lr = spec(['a', 'b', 'c'], { b: 3e-4 });
    expect([lr.variants!.a, lr.variants!.b !== edited.variants!.b, lr.variants!.c]).toEqual([edited.variants!.a, true, edited.variants!.c]);
    writeFileSync(join(root, 'cells/setup.ts'), 'export const pretrain = 2;\n');
    const shared = spec(['a', 'b', 'c']);
    for (const k of [shared.compute, ...Object.values(shared.variants!)]) expect([edited.compute, ...Object.values(edited.variants!)]).not.toContain(k);
    // A variant without a key of its own (the setup's own cell) is kept under the shared key.
    expect(variantKey(shared, 'bc')).toBe(shared.compute);
    expect(variantKey(shared, 'a')).toBe(shared.variants!.a);
  });

  it("refuses per-variant keys where the shared setup imports a variant's code, or one variant another's", () => {
    const root = variantRepo();
    const keys = () => protocolKeys({ compute: { entry: 'cells/setup.ts', root }, variants: { a: { entry: 'cells/v-a.ts' }, b: { entry: 'cells/v-b.ts' } }, report: { entry: 'bench/r.ts', root } });
    expect(() => keys()).not.toThrow();
    writeFileSync(join(root, 't/a.ts'), "import '../cells/v-b.js';\nexport const traina = 1;\n");
    expect(() => keys()).toThrow(/variant a's code \(cells\/v-a.ts\) imports variant b's cells\/v-b.ts/);
    writeFileSync(join(root, 't/a.ts'), 'export const traina = 1;\n');
    writeFileSync(join(root, 'cells/setup.ts'), "import './v-a.js';\nexport const pretrain = 1;\n");
    expect(() => keys()).toThrow(/the shared setup \(cells\/setup.ts\) imports variant a's code cells\/v-a.ts/);
  });

  it("keeps the autoresearch bench's report code out of its computation key", () => {
    const cells = runKeySources({ entry: 'bench/cells/autoresearch.ts', dirs: ['autoresearch'] });
    for (const f of ['bench/cells/autoresearch.ts', 'bench/lib/research-baselines.ts', 'recipes/autoresearch.ts', 'autoresearch/train_wmrl.ts']) expect(cells).toContain(f);
    for (const f of ['bench/autoresearch.ts', 'bench/lib/report.ts', 'bench/lib/stats.ts', 'bench/lib/protocol.ts']) expect(cells).not.toContain(f);
  });

  it("covers the autoresearch bench's own code: its file, the protocol library, the recipe and the trainers", () => {
    const files = runKeySources({ entry: 'bench/autoresearch.ts', dirs: ['autoresearch'] });
    for (const f of ['bench/autoresearch.ts', 'bench/lib/protocol.ts', 'bench/lib/stats.ts', 'recipes/autoresearch.ts', 'autoresearch/train_wmrl.ts', 'autoresearch/sandbox-runner.ts', 'wmrl/corrector.ts', 'nn/rng.ts']) expect(files).toContain(f);
    expect(files).not.toContain('bench/vla.ts');
  });
});

describe('cells, the cache and the test-split ledger', () => {
  const splits = defineSplits('demo', { seeds: { train: [0], validation: [1, 2], test: [10, 11] } });
  const setup = (key = 'k1', relook = false) => protocolRun(splits, key, { cacheRoot: join(dir, 'cache'), ledger: new Ledger(join(dir, 'ledger.jsonl')), relook });
  const counting = () => {
    const calls = { n: 0 };
    return { calls, compute: async () => ({ score: 0.5 + calls.n++, never: Number.POSITIVE_INFINITY }) };
  };
  const summarize = (v: { score: number }) => ({ score: v.score });
  const cell = (seed: number, split: 'train' | 'validation' | 'test' = 'test') => ({ task: 't', variant: 'wmrl', seed, split, episodes: 5 });

  it('evaluates a test cell once per run key: cached after, recorded in the ledger once', async () => {
    const run = setup();
    const { calls, compute } = counting();
    const first = await evaluateCell(run, cell(10), compute, summarize);
    expect(first).toEqual({ value: { score: 0.5, never: Number.POSITIVE_INFINITY }, cached: false });
    const again = await evaluateCell(run, cell(10), compute, summarize);
    expect(again.cached).toBe(true);
    expect(again.value.never).toBe(Number.POSITIVE_INFINITY); // Infinity survives the cache
    expect(calls.n).toBe(1);
    const entries = run.ledger.entries();
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ bench: 'demo', task: 't', variant: 'wmrl', seed: 10, computeKey: 'k1', episodes: 5, result: { score: 0.5 } });
    expect(entries[0]!.relook).toBeUndefined();
  });

  it('refuses a second look at a test cell whose cached result is gone, unless asked for, and records that one', async () => {
    const { calls, compute } = counting();
    await evaluateCell(setup(), cell(10), compute, summarize);
    rmSync(join(dir, 'cache'), { recursive: true });
    const refused = evaluateCell(setup(), cell(10), compute, summarize);
    await expect(refused).rejects.toThrow(ProtocolError);
    await expect(evaluateCell(setup(), cell(10), compute, summarize)).rejects.toThrow(/seed 10 was evaluated under computation key k1 on .* a second look at the test set is refused.*--relook/);
    expect(calls.n).toBe(1);
    const relooked = await evaluateCell(setup('k1', true), cell(10), compute, summarize);
    expect(relooked).toMatchObject({ cached: false, value: { score: 1.5 } });
    const entries = new Ledger(join(dir, 'ledger.jsonl')).entries();
    expect(entries.map((e) => [e.computeKey, e.relook ?? false])).toEqual([['k1', false], ['k1', true]]);
  });

  it('evaluates the test cell afresh under a new run key, appended beside the old one', async () => {
    const { calls, compute } = counting();
    await evaluateCell(setup('k1'), cell(11), compute, summarize);
    const fresh = await evaluateCell(setup('k2'), cell(11), compute, summarize);
    expect(fresh.cached).toBe(false);
    expect(calls.n).toBe(2);
    expect(new Ledger(join(dir, 'ledger.jsonl')).entries().map((e) => e.computeKey)).toEqual(['k1', 'k2']);
  });

  it("caches and records each variant's cells under its own key: a variant whose key moved is computed again, the others are reused", async () => {
    const keyed = (a: string) => protocolRun(splits, { compute: 'shared', variants: { wmrl: a, ppo: 'p1' } }, { cacheRoot: join(dir, 'cache'), ledger: new Ledger(join(dir, 'ledger.jsonl')) });
    const { calls, compute } = counting();
    const at = (variant: string) => ({ ...cell(10), variant });
    for (const v of ['wmrl', 'ppo', 'bc']) await evaluateCell(keyed('w1'), at(v), compute, summarize);
    expect(calls.n).toBe(3);
    expect(new Ledger(join(dir, 'ledger.jsonl')).entries().map((e) => [e.variant, e.computeKey])).toEqual([['wmrl', 'w1'], ['ppo', 'p1'], ['bc', 'shared']]);
    // wmrl's code changed: its cell is computed again under its new key; ppo's and the start's are reused.
    const outs = [];
    for (const v of ['wmrl', 'ppo', 'bc']) outs.push((await evaluateCell(keyed('w2'), at(v), compute, summarize)).cached);
    expect(outs).toEqual([false, true, true]);
    expect(calls.n).toBe(4);
    expect(new Ledger(join(dir, 'ledger.jsonl')).entries().map((e) => e.computeKey)).toEqual(['w1', 'p1', 'shared', 'w2']);
  });

  it('keeps validation and train cells out of the ledger, and refuses a seed of another split', async () => {
    const run = setup();
    const { calls, compute } = counting();
    await evaluateCell(run, cell(1, 'validation'), compute, summarize);
    await evaluateCell(run, cell(0, 'train'), compute, summarize);
    expect((await evaluateCell(run, cell(1, 'validation'), compute, summarize)).cached).toBe(true);
    expect(calls.n).toBe(2);
    expect(run.ledger.entries()).toEqual([]);
    await expect(evaluateCell(run, cell(1, 'test'), compute, summarize)).rejects.toThrow(/seeds 1 is a validation item, not test/);
    await expect(evaluateCell(run, cell(99, 'test'), compute, summarize)).rejects.toThrow(/seeds 99 is in no split, not test/);
  });

  it('records a cached test result the ledger lacks, so every result a report uses is in it', async () => {
    const { compute } = counting();
    await evaluateCell(setup(), cell(10), compute, summarize);
    rmSync(join(dir, 'ledger.jsonl'));
    expect((await evaluateCell(setup(), cell(10), compute, summarize)).cached).toBe(true);
    expect(new Ledger(join(dir, 'ledger.jsonl')).entries()).toHaveLength(1);
  });

  it('refuses a torn or malformed ledger and a cache file that does not parse, naming the file', async () => {
    const path = join(dir, 'ledger.jsonl');
    const ledger = new Ledger(path);
    const entry = { date: '2026-12-02T00:00:00.000Z', bench: 'demo', task: 't', variant: 'v', seed: 10, computeKey: 'k', episodes: 3, result: { x: 1 } };
    ledger.append(entry);
    expect(() => ledger.append({ ...entry, result: { x: Number.NaN } })).toThrow(/result.x is NaN/);
    appendFileSync(path, '{"bench": "demo"');
    expect(() => ledger.entries()).toThrow(new RegExp(`${path}:2: not JSON`));
    expect(() => ledger.append(entry)).toThrow(/does not end in a newline/);
    writeFileSync(path, JSON.stringify({ ...entry, episodes: 0 }) + '\n');
    expect(() => ledger.entries()).toThrow(/:1: not a ledger entry \(episodes must be a positive integer\)/);
    const cache = new CellCache('demo', 'k', join(dir, 'cache'));
    const c = { task: 't', variant: 'v', seed: 1, split: 'validation' as const };
    mkdirSync(join(dir, 'cache/demo/k/validation/t/v'), { recursive: true });
    writeFileSync(cache.path(c), 'not json');
    expect(() => cache.get(c)).toThrow(/seed-1.json: not a cached cell/);
    expect(() => cache.path({ ...c, task: '../x' })).toThrow(/task '..\/x' may hold only/);
  });

  it('keeps NaN and infinities through its JSON', () => {
    expect(fromJson<number[]>(toJson([Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 1]))).toEqual([Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 1]);
  });
});

describe('--check', () => {
  const write = (key: string | null, result: string | null) =>
    writeFileSync(join(dir, 'demo.md'), ['# Demo', '', 'Reproduce: `npm run bench -- demo`', '', ...(key ? [...keyLines({ compute: 'c0ffee', report: key }), ''] : []), 'text', '', '```', ...(result ? [result] : []), '```', ''].join('\n'));

  it('prints the committed RESULT line only under the same run key, and otherwise names both keys and the command', () => {
    write('abc123', 'RESULT demo x=1');
    expect(checkCommitted('demo', 'abc123', 'npm run bench -- demo', dir)).toMatchObject({ ok: true, message: 'RESULT demo x=1', committedKey: 'abc123' });
    const stale = checkCommitted('demo', 'def456', 'npm run bench -- demo', dir);
    expect(stale.ok).toBe(false);
    expect(stale.message).toContain('was run by other code (its report key abc123; this code\'s def456)');
    expect(stale.message).toContain('re-run `npm run bench -- demo`');
    write(null, 'RESULT demo x=1');
    expect(checkCommitted('demo', 'def456', 'cmd', dir).message).toContain('carries no report key');
    write('abc123', null);
    expect(checkCommitted('demo', 'abc123', 'cmd', dir)).toMatchObject({ ok: false });
    expect(checkCommitted('other', 'abc123', 'cmd', dir).message).toContain('no committed report');
  });
});
