// bench embodied's pretraining cache: a (task, seed)'s pretraining (wmrl/sim-setup.ts pretrain: the behaviour-cloned
// policy, the world model, the sim data and the demonstrations) is deterministic in its options and code, so the first
// process that pretrains it writes it whole to disk and every later one reads it back instead of pretraining again.
// What it reads is exactly what pretraining gave, parameter for parameter: a cell trained from it is the same cell.
import { createHash } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readTensorFile, writeTensorFile, type ParamValue } from '../../../nn/index.js';
import { GaussianPolicy, type ResolvedPolicyConfig } from '../../../policies/gaussian.js';
import { pretrain, type PretrainDemos, type PretrainOptions, type Pretrained } from '../../../wmrl/sim-setup.js';
import { EnsembleModel, type Transitions } from '../../../worldmodel/index.js';
import { hashSources, setupCache, toJson } from '../../lib/setup-cache.js';

const WHO = 'bench embodied';
const { writeCached, readJson, loadCached } = setupCache(WHO);

/** What a pretraining is cached by: its options, without the progress callback (which computes nothing). */
export type PretrainSpec = Omit<PretrainOptions, 'onProgress' | 'fit'>;

/**
 * The cache's folder (`EMBODIED_SETUP_CACHE`, default bench/.cache/embodied-setup, git-ignored): one subfolder per task,
 * seed, scale and pretrainKey. A pretraining is an intermediate, not a result: cells are cached under the computation
 * key, which hashes this code too.
 */
export const pretrainCacheRoot = () => process.env.EMBODIED_SETUP_CACHE || fileURLToPath(new URL('../../.cache/embodied-setup', import.meta.url));

/** The files whose presence says a cached pretraining is whole (written last, before its folder is renamed into place), and its parts. */
const FILES = { marker: 'pretrained.json', policy: 'policy.safetensors', model: 'model.safetensors', data: 'data.safetensors' } as const;

/** The options as the key and the marker hold them: every option by name, sorted. */
const optionsJson = (o: PretrainSpec) => JSON.stringify(o, Object.keys(o).sort());

let sources: string | null = null;
/**
 * What a pretraining depends on, hashed: every file under common/, nn/, sim/, policies/ and worldmodel/ (all that
 * wmrl/sim-setup.ts pretrain imports), wmrl/sim-setup.ts, this cache's code and package-lock.json, the options, the
 * scale, and Node's major version and the CPU architecture. The files are hashed once per process: the code that runs
 * is the code loaded then.
 */
export function pretrainKey(o: PretrainSpec, quick: boolean): string {
  if (sources === null) {
    const h = createHash('sha256');
    hashSources(h, ['common', 'nn', 'sim', 'policies', 'worldmodel'], ['wmrl/sim-setup.ts', 'bench/lib/setup-cache.ts', 'bench/cells/embodied/pretrain-cache.ts', 'package-lock.json']);
    sources = h.digest('hex');
  }
  const node = process.versions.node.split('.')[0];
  return createHash('sha256').update(sources).update(JSON.stringify({ options: optionsJson(o), quick, node, arch: process.arch })).digest('hex').slice(0, 24);
}

/** The folder of a (task, seed)'s cached pretraining. */
export const pretrainDir = (o: PretrainSpec, quick: boolean) => join(pretrainCacheRoot(), `${o.task}-seed${o.seed}-${quick ? 'quick' : 'full'}-${pretrainKey(o, quick)}`);

/** Whether a pretraining is cached whole (the setup then pretrains nothing). */
export const pretrainCached = (o: PretrainSpec, quick: boolean) => existsSync(join(pretrainDir(o, quick), FILES.marker));

/** What the marker holds beside the three parameter files. */
interface Saved {
  options: string;
  bcLoss: number;
  wmValLoss: number;
}

const SIM_COLUMNS = ['obs', 'action', 'nextObs', 'reward', 'success', 'weight', 'rewardKnown', 'history', 'context'] as const;
const DEMO_COLUMNS = ['obs', 'label', 'executed', 'reward', 'nextObs', 'terminal'] as const satisfies ReadonlyArray<keyof PretrainDemos>;
const column = (data: Float32Array): ParamValue => ({ shape: [data.length], data });

/** Writes `pre` into `dir` whole, or reports on stderr why it could not and leaves no folder of it. */
export function savePretrained(dir: string, o: PretrainSpec, pre: Pretrained): void {
  writeCached(dir, FILES.marker, (part) => {
    const { policy, model, simData, demos } = pre;
    policy.store.save(join(part, FILES.policy), { kind: 'bench.embodied.policy', name: policy.name, config: JSON.stringify(policy.config) });
    model.save(join(part, FILES.model));
    // The sim data's optional columns are kept in the order the pretraining gave them, present where it gave them.
    const sim = SIM_COLUMNS.filter((c) => simData[c] !== undefined);
    const order = Object.keys(simData).filter((k) => k !== 'dObs' && k !== 'dAct');
    if (order.some((k) => !(sim as readonly string[]).includes(k))) throw new Error(`the sim data carries a column this cache does not know (${order.join(', ')})`);
    const tensors: Array<[string, ParamValue]> = [...order.map((c): [string, ParamValue] => [`simData.${c}`, column(simData[c as (typeof SIM_COLUMNS)[number]]!)]), ...DEMO_COLUMNS.map((c): [string, ParamValue] => [`demos.${c}`, column(demos[c])])];
    writeTensorFile(join(part, FILES.data), tensors, { simData: JSON.stringify({ dObs: simData.dObs, dAct: simData.dAct, columns: order }) });
    writeFileSync(join(part, FILES.marker), toJson({ options: optionsJson(o), bcLoss: pre.bcLoss, wmValLoss: pre.wmValLoss } satisfies Saved));
  });
}

/** The policy of a cached policy file: its config from the file's metadata, its parameters loaded into it. */
function readPolicy(path: string): GaussianPolicy {
  const { metadata } = readTensorFile(path);
  if (metadata.kind !== 'bench.embodied.policy' || !metadata.config || !metadata.name) throw new Error(`not a cached policy (metadata kind '${metadata.kind}')`);
  const policy = new GaussianPolicy(JSON.parse(metadata.config) as ResolvedPolicyConfig, metadata.name);
  policy.store.load(path);
  return policy;
}

/** The sim data and demonstrations of a cached data file, each column as it was written. */
function readData(path: string): { simData: Transitions; demos: PretrainDemos } {
  const { tensors, metadata } = readTensorFile(path);
  const get = (name: string) => {
    const t = tensors.get(name);
    if (!t) throw new Error(`no column '${name}'`);
    return t.data;
  };
  const head = JSON.parse(metadata.simData ?? 'null') as { dObs: number; dAct: number; columns: string[] } | null;
  if (!head) throw new Error('no sim data header');
  const simData = { dObs: head.dObs, dAct: head.dAct, ...Object.fromEntries(head.columns.map((c) => [c, get(`simData.${c}`)])) } as unknown as Transitions;
  const demos = Object.fromEntries(DEMO_COLUMNS.map((c) => [c, get(`demos.${c}`)])) as unknown as PretrainDemos;
  return { simData, demos };
}

/**
 * The pretraining cached in `dir`, or null where there is none. Refused, naming the folder to delete: a marker that
 * does not parse or holds other options than `o`, a file that does not load, parts whose shapes disagree with `o` or
 * with each other.
 */
export function loadPretrained(dir: string, o: PretrainSpec): Pretrained | null {
  const saved = readJson<Saved>(join(dir, FILES.marker));
  if (!saved) return null;
  const refuse = (why: string) => new Error(`${WHO}: the cached pretraining in ${dir} ${why}; delete ${dir} to pretrain afresh`);
  if (saved.options !== optionsJson(o)) throw refuse(`was pretrained with the options ${saved.options}, this run's are ${optionsJson(o)}`);
  const policy = loadCached(join(dir, FILES.policy), readPolicy);
  const { simData, demos } = loadCached(join(dir, FILES.data), readData);
  const model = loadCached(join(dir, FILES.model), (f) => EnsembleModel.load(f));
  const got = { policyHidden: policy.config.hidden, members: model.members, wmHidden: model.hidden, actionHistory: model.actionHistory, commandHistory: model.commandHistory, context: model.contextDim > 0 };
  const want = { policyHidden: o.policyHidden, members: o.wmMembers, wmHidden: o.wmHidden, actionHistory: o.wmActionHistory, commandHistory: o.commandHistory ?? 0, context: o.wmRandomize > 0 };
  if (JSON.stringify(got) !== JSON.stringify(want)) throw refuse(`holds a policy and world model of ${JSON.stringify(got)}, this run pretrains ${JSON.stringify(want)}`);
  const dims = [policy.obsDim, model.dObs, simData.dObs, demos.obs.length / Math.max(1, demos.reward.length)];
  if (new Set(dims).size !== 1) throw refuse(`holds parts of different observation sizes (policy, world model, sim data, demonstrations: ${dims.join(', ')})`);
  return { policy, demos, model, simData, bcLoss: saved.bcLoss, wmValLoss: saved.wmValLoss };
}

/**
 * A (task, seed)'s pretraining: read from the cache where it is there (`progress` says 'pretraining (cached)'), else
 * pretrained (`progress` says so) and cached.
 */
export async function cachedPretrain(o: PretrainSpec, quick: boolean, progress: (label: string) => void): Promise<Pretrained> {
  const dir = pretrainDir(o, quick);
  if (existsSync(join(dir, FILES.marker))) {
    progress('pretraining (cached)');
    const pre = loadPretrained(dir, o);
    if (pre) return pre;
  }
  progress('pretraining (behaviour cloning, world model)');
  const pre = await pretrain(o);
  savePretrained(dir, o, pre);
  return pre;
}
