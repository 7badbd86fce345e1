// bench vla's cells (bench/cells/vla.ts) at quick sizes: a task's setup — the clone and its latent face, the world
// model, the diagnostics — is written once and read back by the next process of the same code, whole or from its two
// parts; an arm's cell from the cached setup equals the one from the setup that was just built, whichever arms ran
// before it in the process (every arm starts from the same parameters); WMRL's cell keeps its corrections per update
// and sparse only spends exactly the robot episodes it is given; a cached VLA that does not fit, or a measurement file
// that does not parse, is refused, naming it; a cache that cannot be written is reported and the run goes on.
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { writeTensorFile } from '../nn/index.js';
import { JobRunner, cellOptions, setupCacheRoot, setupKey, type ArmCell, type Job, type RlCell, type SetupCell } from '../bench/cells/vla.js';

const root = mkdtempSync(join(tmpdir(), 'vla-cells-'));
const before = process.env.VLA_SETUP_CACHE;
process.env.VLA_SETUP_CACHE = root;
afterAll(() => {
  if (before === undefined) delete process.env.VLA_SETUP_CACHE;
  else process.env.VLA_SETUP_CACHE = before;
  rmSync(root, { recursive: true, force: true });
});

const options = cellOptions({ quick: true, split: 'train' });
const setupJob: Job = { kind: 'setup', task: 'reach', options };
const arm = (a: ArmCell['arm'], robotEpisodes?: number): Job => ({ kind: 'arm', task: 'reach', options, arm: a, seed: 0, ...(robotEpisodes === undefined ? {} : { robotEpisodes }) });
/** A cell without what depends on the machine's speed. */
const comparable = (c: ArmCell) => {
  const { cellSeconds: _w, cpuSeconds: _c, ...rest } = c;
  if ('computeSeconds' in rest) {
    const { computeSeconds: _t, ...r } = rest;
    return r;
  }
  return rest;
};

describe('bench vla: the cells and the setup cache', () => {
  const key = `reach-quick-${setupKey('reach', options)}`;
  const dir = join(root, key);
  let setup: SetupCell;
  const built: Partial<Record<ArmCell['arm'], ArmCell>> = {};

  it('builds the setup once and computes every arm from it, WMRL with its corrections per update and sparse only on its robot episodes', async () => {
    expect(setupCacheRoot()).toBe(root);
    const runner = new JobRunner();
    const labels: string[] = [];
    try {
      setup = (await runner.run(setupJob, (l) => labels.push(l))) as SetupCell;
      expect(labels.some((l) => l.includes('behaviour cloning'))).toBe(true);
      expect(readdirSync(dir).sort()).toEqual(['measured.json', 'vla.safetensors']);
      expect(readdirSync(root).sort()).toEqual([key, `${key}.clone`, `${key}.model`]);
      expect(Number.isFinite(setup.wmValLoss) && Number.isFinite(setup.latent.valMse)).toBe(true);
      for (const a of ['bc', 'dense_only', 'wmrl'] as const) built[a] = (await runner.run(arm(a), () => {})) as ArmCell;
      const w = built.wmrl as RlCell;
      built.sparse_only = (await runner.run(arm('sparse_only', w.robotEpisodes), () => {})) as ArmCell;
      const s = built.sparse_only as RlCell;
      for (const c of Object.values(built)) {
        expect(c.states).toHaveLength(options.eval.episodes);
        expect(c.combinations).toHaveLength(options.eval.episodes);
      }
      expect(w.updates).toBe(options.updates.reach);
      for (const xs of [w.anchorWeight, w.calibrated, w.biasReduction, w.imaginedWeight, w.realGroups, w.groups]) expect(xs).toHaveLength(w.updates);
      expect(w.robotEpisodes).toBeGreaterThan(0);
      expect(w.wmrl!.identified.context).toHaveLength(4);
      expect(s.robotEpisodes).toBe(w.robotEpisodes);
      expect(s.anchorWeight).toBeNull();
      expect((built.dense_only as RlCell).robotEpisodes).toBe(0);
      // the clone and WMRL's VLA again with shuffled instructions: outcomes, chance outcomes (each at most the outcome of
      // the same state with its own instruction), the task's three instructions; the other arms none
      for (const c of [built.bc!, w]) {
        const z = c.shuffled!;
        expect(z.outcomes).toHaveLength(options.eval.episodes);
        expect(z.choices).toBe(3);
        z.chance.forEach((x, i) => expect(x).toBeLessThanOrEqual(c.states[i]!));
      }
      expect(s.shuffled).toBeNull();
      expect((built.dense_only as RlCell).shuffled).toBeNull();
      await expect(runner.run(arm('sparse_only'), () => {})).rejects.toThrow("sparse only spends WMRL's robot episodes at its seed, and none were given");
    } finally {
      await runner.release();
    }
  }, 400_000);

  it('gives the same setup and the same cells from the cache, whole or from its two parts, whichever arm ran first', async () => {
    const runner = new JobRunner();
    const labels: string[] = [];
    try {
      expect(await runner.run(setupJob, (l) => labels.push(l))).toEqual(setup);
      expect(labels.some((l) => l.includes('behaviour cloning'))).toBe(false);
      expect(labels.some((l) => l.startsWith(`reach: setup read from ${dir}`))).toBe(true);
      // The whole setup holds the clone with its face; its world model is the model's part.
      expect(labels.some((l) => l.startsWith(`reach: the world model read from ${dir}.model`))).toBe(true);
      // Another order than the first process's: dense only before the clone's own evaluation.
      for (const a of ['dense_only', 'bc'] as const) expect(comparable((await runner.run(arm(a), () => {})) as ArmCell)).toEqual(comparable(built[a]!));
    } finally {
      await runner.release();
    }
    // From the two parts alone: the clone and the fitted model read back, the face and diagnostics built again.
    rmSync(dir, { recursive: true });
    const fromParts = new JobRunner();
    const partLabels: string[] = [];
    try {
      expect(await fromParts.run(setupJob, (l) => partLabels.push(l))).toEqual(setup);
      expect(partLabels.some((l) => l.startsWith(`reach: the clone read from ${dir}.clone`))).toBe(true);
      expect(partLabels.some((l) => l.includes('latent face, epoch'))).toBe(true);
      expect(comparable((await fromParts.run(arm('bc'), () => {})) as ArmCell)).toEqual(comparable(built.bc!));
      expect(readdirSync(dir).sort()).toEqual(['measured.json', 'vla.safetensors']);
    } finally {
      await fromParts.release();
    }
  }, 400_000);

  it('refuses a cached VLA that is not this VLA, and a measurement file that does not parse, naming them', async () => {
    expect(existsSync(join(dir, 'vla.safetensors'))).toBe(true);
    writeTensorFile(join(dir, 'vla.safetensors'), [['other.weight', { shape: [2, 2], data: new Float32Array(4) }]]);
    const runner = new JobRunner();
    await expect(runner.run(setupJob, () => {})).rejects.toThrow(/the cached .*vla\.safetensors does not fit this run: .*does not match this model \(missing: \[vla\..*unexpected: \[other\.weight\]\); delete .* to build it afresh/);
    writeFileSync(join(dir, 'measured.json'), '{"bcLoss": ');
    await expect(runner.run(setupJob, () => {})).rejects.toThrow(/the cached .*measured\.json does not parse .*; delete .* to build it afresh/);
  }, 200_000);

  it('reports a cache it cannot write on stderr, naming the folder, and goes on', async () => {
    const file = join(root, 'not-a-folder');
    writeFileSync(file, 'x');
    process.env.VLA_SETUP_CACHE = join(file, 'cache');
    const errors = vi.spyOn(console, 'error').mockImplementation(() => {});
    const runner = new JobRunner();
    try {
      const c = (await runner.run(setupJob, () => {})) as SetupCell;
      expect(c.bcLoss).toBe(setup.bcLoss);
      const said = errors.mock.calls.map((x) => String(x[0]));
      expect(said.some((m) => m.startsWith(`vla bench: the setup was not cached in ${join(file, 'cache')}`))).toBe(true);
    } finally {
      await runner.release();
      errors.mockRestore();
      process.env.VLA_SETUP_CACHE = root;
    }
  }, 200_000);
});
