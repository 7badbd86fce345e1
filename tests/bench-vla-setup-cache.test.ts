// bench vla's setup cache (bench/vla.ts taskSetup): a task's setup — the clone and its latent face, the world model,
// the clone's evaluations — is written once and read back by the next run of the same code. Checks: a run from the
// cache gives exactly what the run that built it gave (every row, curve, agreement and measurement; not the timings);
// so does a run from its two parts (the clone, the fitted world model) alone; the key names the task and the scale;
// a cached VLA that does not fit, or a measurement file that does not parse, is refused, naming it; a cache that cannot
// be written is reported and the run goes on.
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { writeTensorFile } from '../nn/index.js';
import { runTask, setupCacheRoot, setupKey, type TaskResult } from '../bench/vla.js';

const root = mkdtempSync(join(tmpdir(), 'vla-setup-cache-'));
const before = process.env.VLA_SETUP_CACHE;
process.env.VLA_SETUP_CACHE = root;
afterAll(() => {
  if (before === undefined) delete process.env.VLA_SETUP_CACHE;
  else process.env.VLA_SETUP_CACHE = before;
  rmSync(root, { recursive: true, force: true });
});

/** A result without what depends on the machine's speed. */
const comparable = (r: TaskResult) => {
  const { latency: _l, computeSeconds: _c, ...rest } = r;
  return rest;
};

describe('bench vla: the setup cache', () => {
  it('a run from the cached setup, or from its two cached parts, gives exactly what the run that built it gave', async () => {
    expect(setupCacheRoot()).toBe(root);
    const labels: string[][] = [[], []];
    const built = await runTask('reach', true, (_d, l) => labels[0]!.push(l), 0);
    const key = `reach-quick-${setupKey('reach', true)}`, dir = join(root, key);
    expect(readdirSync(dir).sort()).toEqual(['measured.json', 'vla.safetensors']);
    // Its two parts beside it, and nothing half-written.
    expect(readdirSync(root).sort()).toEqual([key, `${key}.clone`, `${key}.model`]);
    expect(readdirSync(join(root, `${key}.clone`)).sort()).toEqual(['clone.json', 'vla.safetensors']);
    expect(readdirSync(join(root, `${key}.model`)).sort()).toEqual(['model.json', 'model.safetensors']);
    const read = await runTask('reach', true, (_d, l) => labels[1]!.push(l), 0);
    expect(labels[0]!.some((l) => l.includes('behaviour cloning'))).toBe(true);
    expect(labels[1]!.some((l) => l.includes('behaviour cloning'))).toBe(false);
    expect(labels[1]!.some((l) => l.startsWith(`reach: setup read from ${dir}`))).toBe(true);
    // The whole setup holds the clone with its face; its world model is the model's part (one copy of it cached).
    expect(labels[1]!.some((l) => l.startsWith(`reach: the world model read from ${dir}.model`))).toBe(true);
    // Floats compared exactly: the world model's validation loss, the face's errors, the rows' returns and curves.
    expect(JSON.stringify(comparable(read))).toBe(JSON.stringify(comparable(built)));
    expect(Number.isFinite(read.wmValLoss) && Number.isFinite(read.latent.valMse) && Number.isFinite(read.eval.wmrl.heldOutStates.return)).toBe(true);
    // From the two parts alone (as a `--task` run's rows read them after building them side by side): the clone and
    // the fitted model read back, the evaluations and the face built again, the whole setup cached again.
    rmSync(dir, { recursive: true });
    const fromParts: string[] = [];
    const rebuilt = await runTask('reach', true, (_d, l) => fromParts.push(l), 0);
    expect(fromParts.some((l) => l.startsWith(`reach: the clone read from ${dir}.clone`))).toBe(true);
    expect(fromParts.some((l) => l.startsWith(`reach: the world model read from ${dir}.model`))).toBe(true);
    expect(fromParts.some((l) => l.includes('latent face, epoch'))).toBe(true);
    expect(JSON.stringify(comparable(rebuilt))).toBe(JSON.stringify(comparable(built)));
    expect(readdirSync(dir).sort()).toEqual(['measured.json', 'vla.safetensors']);
  }, 240_000);

  it('a cache it cannot write is reported on stderr, naming the folder, and the run goes on', async () => {
    const file = join(root, 'not-a-folder');
    writeFileSync(file, 'x');
    process.env.VLA_SETUP_CACHE = join(file, 'cache');
    const errors = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      const r = await runTask('reach', true, () => {}, 0);
      expect(Number.isFinite(r.eval.wmrl.heldOutStates.success)).toBe(true);
      const said = errors.mock.calls.map((c) => String(c[0]));
      expect(said.some((m) => m.startsWith(`vla bench: the setup was not cached in ${join(file, 'cache')}`))).toBe(true);
    } finally {
      errors.mockRestore();
      process.env.VLA_SETUP_CACHE = root;
    }
  }, 120_000);

  it('keys a setup by task and scale, the same key every time', () => {
    const k = setupKey('reach', true);
    expect(k).toMatch(/^[0-9a-f]{24}$/);
    expect(setupKey('reach', true)).toBe(k);
    expect(new Set([k, setupKey('push', true), setupKey('reach', false)]).size).toBe(3);
  });

  it('refuses a cached VLA that is not this VLA, naming the file and the parameters', async () => {
    const dir = join(root, `reach-quick-${setupKey('reach', true)}`);
    expect(existsSync(join(dir, 'vla.safetensors'))).toBe(true);
    writeTensorFile(join(dir, 'vla.safetensors'), [['other.weight', { shape: [2, 2], data: new Float32Array(4) }]]);
    await expect(runTask('reach', true, () => {}, 0)).rejects.toThrow(/the cached .*vla\.safetensors does not fit this run: .*does not match this model \(missing: \[vla\..*unexpected: \[other\.weight\]\); delete .* to build it afresh/);
    // A measurement file that does not parse: refused, naming it.
    writeFileSync(join(dir, 'measured.json'), '{"bc": ');
    await expect(runTask('reach', true, () => {}, 0)).rejects.toThrow(/the cached .*measured\.json does not parse .*; delete .* to build it afresh/);
  }, 120_000);
});
