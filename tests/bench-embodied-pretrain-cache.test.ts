// bench embodied's pretraining cache (bench/cells/embodied/pretrain-cache.ts) at the quick sizes: the first setup of a
// (task, seed) pretrains and writes it, the next reads it back; what it reads is the pretraining bit for bit (every
// policy and world-model parameter, the normalization, the context, the sim data and the demonstrations), and the
// start and a trained variant's cell from it equal those from the setup that pretrained. A cached file that does not
// fit, a marker that does not parse or was written for other options is refused, naming the folder to delete; a cache
// that cannot be written is reported and the run goes on; the key moves with every option and the scale.
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { plan } from '../bench/embodied.js';
import { SeedSetup, trainVariant, type CellOptions, type StartCell, type VariantCell } from '../bench/cells/embodied.js';
import { loadPretrained, pretrainCacheRoot, pretrainCached, pretrainDir, pretrainKey, savePretrained, type PretrainSpec } from '../bench/cells/embodied/pretrain-cache.js';
import { DEFAULT_PRETRAIN, pretrain, type Pretrained } from '../wmrl/sim-setup.js';

const root = mkdtempSync(join(tmpdir(), 'embodied-pretrain-'));
const before = process.env.EMBODIED_SETUP_CACHE;
process.env.EMBODIED_SETUP_CACHE = join(root, 'cache');
afterAll(() => {
  if (before === undefined) delete process.env.EMBODIED_SETUP_CACHE;
  else process.env.EMBODIED_SETUP_CACHE = before;
  rmSync(root, { recursive: true, force: true });
});

const o: CellOptions = { ...plan({ quick: true, all: false, progress: () => {} }).cell, updates: 2, prompts: 1, groupSize: 2, evalEvery: 1 };
const spec: PretrainSpec = { ...DEFAULT_PRETRAIN, ...o.pretrain, task: 'reach', seed: 0, commandHistory: o.commandHistory };

/** The names of the arrays of `a` and `b` whose bytes differ (or that one of them lacks). */
function differing(a: Record<string, Float32Array | undefined>, b: Record<string, Float32Array | undefined>): string[] {
  const bytes = (x: Float32Array) => Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].filter((k) => {
    const x = a[k], y = b[k];
    return !x || !y || !bytes(x).equals(bytes(y));
  });
}
const arrays = (x: object) => Object.fromEntries(Object.entries(x).filter(([, v]) => v instanceof Float32Array)) as Record<string, Float32Array>;
const policyParams = (p: Pretrained) => Object.fromEntries(p.policy.paramNames().map((n) => [n, p.policy.store.get(n).data]));
const modelParams = (p: Pretrained) => Object.fromEntries(p.model.store.names().map((n) => [n, p.model.store.get(n).data]));
/** A cell without what depends on the machine's speed. */
const comparable = (c: StartCell | VariantCell) => {
  if (!('computeSeconds' in c)) return c;
  const { computeSeconds: _c, imagineSeconds: _i, ...rest } = c;
  return rest;
};

describe('bench embodied: the pretraining cache (reach, seed 0, the quick pretraining)', () => {
  let fresh: SeedSetup, loaded: SeedSetup, direct: Pretrained, read: Pretrained;
  const heard: string[][] = [[], []];
  const dir = () => pretrainDir(spec, true);

  beforeAll(async () => {
    expect(pretrainCacheRoot()).toBe(join(root, 'cache'));
    expect(pretrainCached(spec, true)).toBe(false);
    fresh = await SeedSetup.create('reach', 0, o, (l) => heard[0]!.push(l));
    direct = await pretrain(spec);
    read = loadPretrained(dir(), spec)!;
    loaded = await SeedSetup.create('reach@gap', 0, o, (l) => heard[1]!.push(l));
  }, 300_000);

  it('pretrains and caches the first setup, and reads the next from the cache, saying which', () => {
    expect(heard).toEqual([['pretraining (behaviour cloning, world model)'], ['pretraining (cached)']]);
    expect(pretrainCached(spec, true)).toBe(true);
    expect(dir().startsWith(join(root, 'cache', 'reach-seed0-quick-'))).toBe(true);
  });

  it('reads back the pretraining bit for bit: parameters, normalization, context, sim data, demonstrations, losses', async () => {
    expect(read).not.toBeNull();
    expect(read.policy.config).toEqual(direct.policy.config);
    expect(read.policy.paramNames()).toEqual(direct.policy.paramNames());
    expect(differing(policyParams(read), policyParams(direct))).toEqual([]);
    expect(read.model.store.names()).toEqual(direct.model.store.names());
    expect(differing(modelParams(read), modelParams(direct))).toEqual([]);
    const { rewardMean: rm, rewardStd: rs, ...nr } = read.model.normalizer, { rewardMean: dm, rewardStd: ds, ...nd } = direct.model.normalizer;
    expect(differing(nr, nd)).toEqual([]);
    expect([rm, rs]).toEqual([dm, ds]);
    // A refit renormalizes a model that was never normalized: the read one must count as normalized, as the fitted one does.
    expect((read.model as unknown as { normalized: boolean }).normalized).toBe(true);
    expect(read.model.contextDim).toBeGreaterThan(0);
    expect(differing({ context: read.model.context }, { context: direct.model.context })).toEqual([]);
    for (const k of ['dObs', 'dAct', 'members', 'hidden', 'rewardHidden', 'actionHistory', 'commandHistory'] as const) expect(read.model[k]).toEqual(direct.model[k]);
    expect(read.model.config.contextNames).toEqual(direct.model.config.contextNames);
    expect(read.model.config.obsNames).toEqual(direct.model.config.obsNames);
    expect(read.model.derived).toEqual(direct.model.derived);
    expect(Object.keys(read.simData)).toEqual(Object.keys(direct.simData));
    expect([read.simData.dObs, read.simData.dAct]).toEqual([direct.simData.dObs, direct.simData.dAct]);
    expect(differing(arrays(read.simData), arrays(direct.simData))).toEqual([]);
    expect(Object.keys(read.demos).sort()).toEqual(Object.keys(direct.demos).sort());
    expect(differing(arrays(read.demos), arrays(direct.demos))).toEqual([]);
    expect(read.demos.reward.length).toBeGreaterThan(0);
    expect(Object.is(read.bcLoss, direct.bcLoss) && Object.is(read.wmValLoss, direct.wmValLoss)).toBe(true);
    // The read world model predicts as the fitted one does (its own context, the first rows of the sim data).
    const n = 16, { dObs, dAct } = direct.simData, h = direct.model.actionHistory * dAct;
    const rows = (t: Pretrained) => t.model.predict(t.simData.obs.slice(0, n * dObs), t.simData.action.slice(0, n * dAct), t.simData.history!.slice(0, n * h));
    expect(differing(arrays(await rows(read)), arrays(await rows(direct)))).toEqual([]);
  });

  it('gives the start and a trained cell from the cached pretraining equal to those from the one just pretrained', async () => {
    expect(await loaded.start()).toEqual(await fresh.start());
    const a = await trainVariant(fresh, 'standard', o.prompts, 'quick'), b = await trainVariant(loaded, 'standard', o.prompts, 'quick');
    expect(comparable(b)).toEqual(comparable(a));
    const w = await trainVariant(fresh, 'pure_wm', o.prompts, 'quick'), v = await trainVariant(loaded, 'pure_wm', o.prompts, 'quick');
    expect(v.imaginedTransitions).toBeGreaterThan(0);
    expect(comparable(v)).toEqual(comparable(w));
  }, 300_000);

  it('refuses a cached file that does not fit, a marker that does not parse or names other options, naming the folder', async () => {
    const copy = (name: string) => {
      const d = join(root, name);
      cpSync(dir(), d, { recursive: true });
      return d;
    };
    const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    const model = copy('model');
    writeFileSync(join(model, 'model.safetensors'), 'not a tensor file');
    expect(() => loadPretrained(model, spec)).toThrow(new RegExp(`bench embodied: the cached ${esc(model)}/model\\.safetensors does not fit this run: .*; delete ${esc(model)} to build it afresh`));
    const policy = copy('policy');
    cpSync(join(policy, 'model.safetensors'), join(policy, 'policy.safetensors'));
    expect(() => loadPretrained(policy, spec)).toThrow(new RegExp(`the cached ${esc(policy)}/policy\\.safetensors does not fit this run: not a cached policy .*; delete ${esc(policy)} to build it afresh`));
    const data = copy('data');
    writeFileSync(join(data, 'data.safetensors'), Buffer.alloc(4));
    expect(() => loadPretrained(data, spec)).toThrow(new RegExp(`the cached ${esc(data)}/data\\.safetensors does not fit this run: .*; delete ${esc(data)} to build it afresh`));
    const marker = copy('marker');
    writeFileSync(join(marker, 'pretrained.json'), '{"options": ');
    expect(() => loadPretrained(marker, spec)).toThrow(new RegExp(`the cached ${esc(marker)}/pretrained\\.json does not parse .*; delete ${esc(marker)} to build it afresh`));
    // A folder of another pretraining (here: other behaviour-cloning epochs) is refused, whatever its name says.
    expect(() => loadPretrained(dir(), { ...spec, bcEpochs: spec.bcEpochs + 1 })).toThrow(new RegExp(`the cached pretraining in ${esc(dir())} was pretrained with the options .*"bcEpochs":${spec.bcEpochs}.*, this run's are .*"bcEpochs":${spec.bcEpochs + 1}.*; delete ${esc(dir())} to pretrain afresh`));
    // A setup that finds a cache that does not fit stops there, naming the folder.
    const other = join(root, 'other-cache');
    cpSync(join(root, 'cache'), other, { recursive: true });
    process.env.EMBODIED_SETUP_CACHE = other;
    try {
      writeFileSync(join(pretrainDir(spec, true), 'model.safetensors'), 'not a tensor file');
      await expect(SeedSetup.create('reach', 0, o)).rejects.toThrow(new RegExp(`delete ${esc(pretrainDir(spec, true))} to build it afresh`));
    } finally {
      process.env.EMBODIED_SETUP_CACHE = join(root, 'cache');
    }
  });

  it('reports a cache it cannot write on stderr, naming the folder, and leaves nothing behind', () => {
    const file = join(root, 'a-file');
    writeFileSync(file, '');
    const said: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((m: string) => void said.push(m));
    try {
      savePretrained(join(file, 'cache', 'x'), spec, direct);
    } finally {
      spy.mockRestore();
    }
    expect(said).toHaveLength(1);
    expect(said[0]!.startsWith(`bench embodied: the setup was not cached in ${join(file, 'cache', 'x')} (`)).toBe(true);
    expect(loadPretrained(join(file, 'cache', 'x'), spec)).toBeNull();
  });

  it('keys a pretraining by every option, the task, the seed and the scale, not by the options\' order', () => {
    const k = pretrainKey(spec, true);
    expect(pretrainKey(Object.fromEntries(Object.entries(spec).reverse()) as PretrainSpec, true)).toBe(k);
    const others = [pretrainKey(spec, false), pretrainKey({ ...spec, seed: 1 }, true), pretrainKey({ ...spec, task: 'push' }, true), pretrainKey({ ...spec, wmEpochs: spec.wmEpochs + 1 }, true), pretrainKey({ ...spec, commandHistory: 0 }, true), pretrainKey({ ...spec, wmHidden: [64, 32] }, true)];
    expect(new Set([k, ...others]).size).toBe(others.length + 1);
  });

  afterAll(async () => {
    for (const p of [direct, read]) {
      await p?.policy.release();
      await p?.model.release();
    }
  });
});
