// The cells of `bench vla`. Per task, its setup — the VLA behaviour-cloned on the gap robot, the world model, the latent
// face and their diagnostics — is built from train items alone and cached, the same for every RL seed and split; at
// one (task, RL seed), the clone is measured on the split's evaluation (held-out start states and held-out
// (instruction, target region) combinations), and each RL arm post-trains its head from the clone on the gap robot
// with the recipe's per-task settings (recipes/vla.ts) and is measured on the same start states; the clone and WMRL's
// VLA again with shuffled instructions. The cells' code and
// options make the bench's computation key (bench/lib/protocol.ts protocolKeys), so nothing here imports the report's
// code (bench/vla.ts, stats, report).
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cloneWithDagger } from '../../policies/dagger.js';
import { chanceOutcomes, evaluateOn, type EvalResult } from '../../policies/demos.js';
import { LatentVla, type LatentDistillReport } from '../../policies/latent-vla.js';
import type { VlaPolicy } from '../../policies/vla.js';
import {
  COMMAND_HISTORY, LATENCY, RL_LOG_STD, S, VLA_CLONE, VLA_HIDDEN, VLA_TASKS, cloneOnGap, distillFace, distillStates, gapRobot, makeVla, trainVlaRl, vlaPrompts, vlaRecipe, vlaScale, vlaSplit,
  type VlaTask,
} from '../../recipes/vla.js';
import { SceneTwin, makeEnv, type Combination, type Env, type EvaluationSplit } from '../../sim/index.js';
import { SplitPrompts } from '../../wmrl/embodied.js';
import { DEFAULT_PRETRAIN, SimPrompts, pretrainWorldModel } from '../../wmrl/sim-setup.js';
import { DEFAULT_WMRL } from '../../wmrl/train_wmrl.js';
import { EnsembleModel, type Transitions } from '../../worldmodel/index.js';
import {
  AGREEMENT_STEPS, agreementGroups, expertOn, faceOnRobotAgreement, imaginationGaps, imaginedAgreement, repeatability, restoreGroups, saveGroups,
  type AgreementGroups, type ImaginationGaps, type SavedGroups,
} from './vla-measure.js';
import { hashSources, setupCache, toJson as cacheJson } from '../lib/setup-cache.js';

export const TASKS = VLA_TASKS;
export type Task = VlaTask;
export type SplitName = 'train' | 'validation' | 'test';

/** Every (task, RL seed)'s cells: the behaviour-cloned start, then each RL arm trained from it. */
export const ARMS = ['bc', 'sparse_only', 'dense_only', 'wmrl'] as const;
export type Arm = (typeof ARMS)[number];
export type RlArm = Exclude<Arm, 'bc'>;

// ── What a run evaluates on ─────────────────────────────────────────────────────────────────────
/** Start states come in blocks of this many seeds. */
export const START_BLOCK = 100_000;
/** The setup's start states all lie in block 0: the combination split's training seeds from 0 and the world model's exploratory episodes from 50,000. */
export const SETUP_BLOCK = 0;
/** The block each split's evaluation reads: validation's are the held-out states the bench's choices were made on before the protocol. */
export const EVAL_BLOCK: Readonly<Record<SplitName, number>> = { train: 1, validation: 90, test: 95 };

const combo = (goal: number, region: number): Combination => ({ goal, region });
/**
 * The (instruction, target region) combinations of 3 goals × 4 regions, three ways: validation holds out goal k in
 * region k (the held-out combinations the bench's choices were read on before the protocol), test goal k in region
 * k + 2, never evaluated before it; the six others train, every goal and every region among them.
 */
export const COMBINATIONS: Readonly<Record<SplitName, readonly Combination[]>> = {
  train: [combo(0, 1), combo(0, 3), combo(1, 0), combo(1, 2), combo(2, 1), combo(2, 3)],
  validation: [combo(0, 0), combo(1, 1), combo(2, 2)],
  test: [combo(0, 2), combo(1, 3), combo(2, 0)],
};
/** The seed of the shuffled-instruction draws (policies/demos.ts EvalOptions): the same for every arm and RL seed, so they pair. */
export const SHUFFLE_SEED = 53;

/** A quick run (the train split) evaluates its "held-out combinations" on these train combinations, which its own small clone leaves out. */
export const QUICK_HELD_OUT: readonly Combination[] = [combo(0, 1), combo(1, 2), combo(2, 3)];

/**
 * Sizes: the RL arms' updates per task (dense only and WMRL; sparse only runs WMRL's anchor episodes) and the start
 * states of each evaluation set. The full sizes keep one (task, seed) with every arm near 25 minutes on two cores
 * (docs/decisions.md); a quick run is a smoke test of the code, its figures mean nothing, and it skips WMRL's refit
 * (the recipe's own quick runs one), whose fixed cost would double it. `refitEvery` null: the recipe's.
 */
export const SIZES = {
  full: { updates: { reach: 120, push: 32 } as Record<Task, number>, evalEpisodes: 100, refitEvery: null },
  quick: { updates: { reach: 2, push: 2 } as Record<Task, number>, evalEpisodes: 5, refitEvery: 0 },
};

/** The setup's diagnostics: the rank agreements' groups (start states × the recipe's group size) and the clone episodes the action gaps are measured on, both from the last training seeds, which no demonstration and no prompt uses. */
const diagnostics = (q: boolean) => ({ agreementGroups: q ? 2 : 16, gapEpisodes: q ? 2 : 10 });

/** What every cell of a run depends on besides its code: its JSON is the computation key's options. */
export function cellOptions(o: { quick: boolean; split: SplitName }) {
  if (o.quick !== (o.split === 'train')) throw new Error(`bench vla: a quick run evaluates the train split and a full run validation or test, not a ${o.quick ? 'quick' : 'full'} run on ${o.split}`);
  const sz = o.quick ? SIZES.quick : SIZES.full;
  const others = o.quick ? [...COMBINATIONS.validation, ...COMBINATIONS.test] : (['validation', 'test'] as const).filter((x) => x !== o.split).flatMap((x) => COMBINATIONS[x]);
  return {
    quick: o.quick,
    split: o.split,
    updates: sz.updates,
    refitEvery: sz.refitEvery,
    heldOut: [...(o.quick ? QUICK_HELD_OUT : COMBINATIONS[o.split])],
    withheld: others,
    eval: { seed0: EVAL_BLOCK[o.split] * START_BLOCK, episodes: sz.evalEpisodes },
  };
}
export type CellOptions = ReturnType<typeof cellOptions>;

/**
 * The task's split for a run: the training seeds (the same for validation and test, whose held-out combinations are
 * each other's withheld ones) and the run's evaluation sets, checked to lie in their blocks of start states.
 */
export async function evaluationSplit(task: Task, o: CellOptions): Promise<EvaluationSplit> {
  const split = await vlaSplit(task, o.quick, { heldOut: o.heldOut, withheld: o.withheld, eval: o.eval });
  const block = (s: number) => Math.floor(s / START_BLOCK);
  const out = split.train.find((s) => block(s) !== SETUP_BLOCK) ?? [...split.heldOutStates, ...split.heldOutCombinations].find((s) => block(s) !== EVAL_BLOCK[o.split]);
  if (out !== undefined) throw new Error(`bench vla: start state ${out} of the ${task} split lies outside its block (training: ${SETUP_BLOCK}, ${o.split}'s evaluation: ${EVAL_BLOCK[o.split]})`);
  return split;
}

// ── Cells ───────────────────────────────────────────────────────────────────────────────────────
/** The task's setup as the report reads it (built once from train items; the same for every seed and split). */
export interface SetupCell {
  bcLoss: number;
  demoSteps: number;
  /** Round-0 demonstrations (noise injected) that succeeded on the robot. */
  demoSuccess: number;
  /** The world model's loss on held-out exploratory episodes after all its fitting. */
  wmValLoss: number;
  trainSeeds: number;
  controlHz: number;
  horizon: number;
  /** How well the latent face stands in for the encoder (held-out distillation states). */
  latent: LatentDistillReport;
  /** The twin's and the face's action gaps on the clone's own robot episodes from training seeds. */
  gaps: ImaginationGaps;
  /**
   * Within-group rank agreement of the clone's robot returns with: its returns imagined on the twin under the
   * pretrained model's nominal context (over the whole rollouts and their first `firstSteps.steps`), the latent
   * face's on the robot, its own on the robot under other sensor noise and jitter.
   */
  agreement: { nominal: number; firstSteps: { steps: number[]; nominal: number[] }; faceOnRobot: number; repeatability: number };
}

/**
 * A policy on the held-out states with each episode's instruction replaced by a random one of the task's (SHUFFLE_SEED),
 * success still its own goal's: per start state, its outcome, and its chance outcome (what a policy that follows the
 * instruction it is given would score on those draws: its outcome on the true instruction where the draw was that
 * instruction, else 0); `choices`: the task's instructions.
 */
export interface ShuffledCell {
  outcomes: number[];
  chance: number[];
  choices: number;
}

/** The behaviour-cloned start on the split's evaluation, beside the references it is cloned from. */
export interface BcCell {
  arm: 'bc';
  /** Per start state, in the split's order: 1 success, 0 not (held-out states; held-out combinations). */
  states: number[];
  combinations: number[];
  /** The held-out states again with shuffled instructions. */
  shuffled: ShuffledCell;
  /** Success of the robust demonstrator and of the nominal sim's scripted expert on the same start states (noise-free). */
  demonstrator: { states: number; combinations: number };
  expert: { states: number; combinations: number };
  /** The cell's wall-clock and its process's CPU seconds (every thread). */
  cellSeconds: number;
  cpuSeconds: number;
}

/** One RL arm post-trained from the clone at one RL seed. */
export interface RlCell {
  arm: RlArm;
  /** The last evaluation per start state, in the split's order (the same states for every arm of a seed). */
  states: number[];
  combinations: number[];
  /** WMRL: its final VLA on the held-out states again with shuffled instructions; null for the other arms. */
  shuffled: ShuffledCell | null;
  /** Held-out-state success at every evaluation during training (every quarter of the updates and the last), with the robot hours spent by then. */
  curve: Array<{ update: number; robotHours: number; success: number }>;
  updates: number;
  robotEpisodes: number;
  robotHours: number;
  /** Robot episodes of RL that succeeded (sampled actions). */
  robotSuccesses: number;
  /** The trainer's compute wall-clock seconds, its evaluations included; the whole cell's; and its process's CPU seconds over the cell (every thread). */
  computeSeconds: number;
  cellSeconds: number;
  cpuSeconds: number;
  /** Per update: groups, and of them those run on the robot (WMRL: anchors). */
  groups: number[];
  realGroups: number[];
  /** WMRL, per update: the denoiser's anchor weight (1: not up-weighted), whether a debias map calibrated the scores, its held-out bias reduction, the imagined gate's share kept; null for the other arms. */
  anchorWeight: number[] | null;
  calibrated: boolean[] | null;
  biasReduction: Array<number | null> | null;
  imaginedWeight: number[] | null;
  /** WMRL: the identified context (log scales) and delay, the exploitation guard, and the clone's rank agreement imagined under them. */
  wmrl: {
    identified: { context: number[]; delay: number };
    guard: { updatesFlagged: number; maxFlagged: number };
    agreement: { identified: number; firstSteps: number[] };
  } | null;
}

export type ArmCell = BcCell | RlCell;

// ── The setup and its cache ─────────────────────────────────────────────────────────────────────
/**
 * The setup cache's folder (`VLA_SETUP_CACHE`, default bench/.cache/vla-setup, git-ignored): one subfolder per task,
 * scale and setupKey, holding the clone with its latent face (vla.safetensors) and what the setup measured
 * (measured.json), beside its two parts' folders (`.clone`; `.model`, which the whole setup reads its model from). A
 * setup is an intermediate, not a result: cells are cached under the computation key, which hashes this code too.
 */
export const setupCacheRoot = () => process.env.VLA_SETUP_CACHE || fileURLToPath(new URL('../.cache/vla-setup', import.meta.url));

/** The combinations a run's training seeds leave out (held out or withheld), sorted: what the setup's training seeds depend on. */
const excluded = (o: CellOptions) => [...o.heldOut, ...o.withheld].map((c) => `${c.goal}/${c.region}`).sort();

/**
 * What a task's setup depends on, hashed: every file under common/, nn/, sim/, policies/ and worldmodel/,
 * wmrl/sim-setup.ts, wmrl/embodied.ts, recipes/vla-options.ts (the recipe's defaults) and package-lock.json, the
 * source of the functions that build it and the constants they read, the combinations its training seeds leave out,
 * and the Node version and CPU architecture.
 * Hashed once per process and task, scale and exclusions: the code that runs is the code loaded then.
 */
export function setupKey(task: Task, o: CellOptions): string {
  const id = JSON.stringify([task, o.quick, excluded(o)]);
  const known = setupKeys.get(id);
  if (known) return known;
  const h = createHash('sha256');
  hashSources(h, ['common', 'nn', 'sim', 'policies', 'worldmodel'], ['wmrl/sim-setup.ts', 'wmrl/embodied.ts', 'recipes/vla-options.ts', 'package-lock.json']);
  for (const fn of [loadSetup, buildSetup, clonePart, modelPart, evaluationSplit, cloneOnGap, gapRobot, cloneWithDagger, makeVla, distillStates, distillFace, imaginationGaps, agreementGroups, imaginedAgreement, faceOnRobotAgreement, repeatability, vlaSplit, SplitPrompts, vlaPrompts, vlaRecipe, vlaScale, diagnostics]) h.update(fn.toString());
  h.update(JSON.stringify({ task, q: o.quick, excluded: excluded(o), S, LATENCY, COMMAND_HISTORY, VLA_CLONE, VLA_HIDDEN, RL_LOG_STD, DEFAULT_PRETRAIN, AGREEMENT_STEPS, node: process.version, arch: process.arch }));
  const key = h.digest('hex').slice(0, 24);
  setupKeys.set(id, key);
  return key;
}
const setupKeys = new Map<string, string>();

// Imported last and bound to local names: setupKey hashes the compiled source of the functions that call them, which must not move.
const { writeCached, readJson, loadCached } = setupCache('vla bench');
const toJson = cacheJson;

/** The two parts of a task's setup that depend on nothing of each other: the clone and the fitted world model. */
export const SETUP_PARTS = ['clone', 'model'] as const;
export type SetupPart = (typeof SETUP_PARTS)[number];
/** The file whose presence says a cached part (or, `whole`, the setup) is whole: written last into it, before it is renamed into place. */
const MARKER = { clone: 'clone.json', model: 'model.json', whole: 'measured.json' } as const;

/** The folder of a task's cached setup (`part`: of one of its two parts). */
export const setupDir = (task: Task, o: CellOptions, part?: SetupPart) => join(setupCacheRoot(), `${task}-${o.quick ? 'quick' : 'full'}-${setupKey(task, o)}${part ? `.${part}` : ''}`);

/** Whether a task's whole setup is cached (a cell then builds none of it). */
export const setupCached = (task: Task, o: CellOptions) => existsSync(join(setupDir(task, o), MARKER.whole));

/** A cached world model, checked against the one this run builds (`like`, unfitted): the same config, else refused naming both. */
async function readModel(path: string, like: EnsembleModel): Promise<EnsembleModel> {
  const model = loadCached(path, (f) => EnsembleModel.load(f));
  const shape = (m: EnsembleModel) => JSON.stringify({ dObs: m.dObs, dAct: m.dAct, members: m.members, hidden: m.hidden, context: m.config.contextNames ?? [], commandHistory: m.config.commandHistory ?? 0, actionHistory: m.config.actionHistory ?? 0 });
  if (shape(model) !== shape(like)) {
    await model.release();
    throw new Error(`vla bench: the cached ${path} is a world model of ${shape(model)}, this run builds ${shape(like)}; delete ${dirname(path)} to build it afresh`);
  }
  return model;
}

/** What cloning gives besides the VLA's parameters. */
interface CloneMeasured {
  obsMean: number[];
  obsStd: number[];
  loss: number;
  steps: number;
  demoSuccess: number;
}

/** The task's behaviour-cloned VLA: read from its cached part, or cloned on the gap robot from the split's first training seeds (and cached). */
async function clonePart(task: Task, o: CellOptions, split: EvaluationSplit, progress: (label: string) => void): Promise<{ vla: VlaPolicy; loss: number; steps: number; demoSuccess: number }> {
  const R = vlaRecipe({ task, quick: o.quick });
  const dir = setupDir(task, o, 'clone');
  const saved = readJson<CloneMeasured>(join(dir, MARKER.clone));
  if (saved) {
    const layout = await makeEnv(gapRobot(task));
    try {
      const vla = makeVla(layout, R.hidden, R.proprio)(saved.obsMean, saved.obsStd);
      loadCached(join(dir, 'vla.safetensors'), (f) => vla.store.load(f));
      progress(`${task}: the clone read from ${dir}`);
      return { vla, loss: saved.loss, steps: saved.steps, demoSuccess: saved.demoSuccess };
    } finally {
      layout.dispose();
    }
  }
  // The demonstrations are recorded on the robot (the gap profile), its declared latency told to the demonstrator.
  const C = R.clone;
  const { policy: vla, ...clone } = await cloneOnGap(task, split, C, (env) => makeVla(env, R.hidden, R.proprio), (k) => progress(`${task}: behaviour cloning, round ${k + 1}/${C.daggerRounds + 1}`), COMMAND_HISTORY);
  writeCached(dir, MARKER.clone, (part) => {
    vla.store.save(join(part, 'vla.safetensors'));
    writeFileSync(join(part, MARKER.clone), toJson({ obsMean: [...vla.config.obsMean], obsStd: [...vla.config.obsStd], loss: clone.loss, steps: clone.steps, demoSuccess: clone.demoSuccess } satisfies CloneMeasured));
  });
  return { vla, ...clone };
}

/** The product's world model for the task with its exploratory episodes (simData): the fitted model read from its cached part (the episodes drawn again, nothing fitted), or pretrained (and cached). */
async function modelPart(task: Task, o: CellOptions, progress: (label: string) => void): Promise<{ model: EnsembleModel; simData: Transitions; wmValLoss: number }> {
  const { wm } = vlaRecipe({ task, quick: o.quick });
  const dir = setupDir(task, o, 'model');
  const saved = readJson<{ wmValLoss: number }>(join(dir, MARKER.model));
  const pre = await pretrainWorldModel({ ...wm, task, seed: 0, commandHistory: COMMAND_HISTORY, ...(saved ? { fit: false } : {}), onProgress: (what, k, n) => progress(`${task}: ${what} ${k}/${n}`) });
  if (saved) {
    const model = await readModel(join(dir, 'model.safetensors'), pre.model);
    await pre.model.release();
    progress(`${task}: the world model read from ${dir}`);
    return { model, simData: pre.simData, wmValLoss: saved.wmValLoss };
  }
  writeCached(dir, MARKER.model, (part) => {
    pre.model.save(join(part, 'model.safetensors'));
    writeFileSync(join(part, MARKER.model), toJson({ wmValLoss: pre.wmValLoss }));
  });
  return pre;
}

/** Builds and caches one part of a task's setup (two processes build the two side by side), unless it, or (the clone) the whole setup, is cached already. */
export async function buildSetupPart(task: Task, o: CellOptions, part: SetupPart, progress: (label: string) => void): Promise<void> {
  if ((part === 'clone' && setupCached(task, o)) || existsSync(join(setupDir(task, o, part), MARKER[part]))) return;
  if (part === 'clone') {
    const { vla } = await clonePart(task, o, await evaluationSplit(task, o), progress);
    await vla.release();
  } else {
    const { model } = await modelPart(task, o, progress);
    await model.release();
  }
}

/** What the whole setup's cache keeps beside the VLA's parameters: the report's figures, the clone's normalization and the agreement groups' robot rollouts. */
interface SetupSaved extends SetupCell {
  obsMean: number[];
  obsStd: number[];
  groups: SavedGroups;
}

/** A task's setup as the RL arms start from it, loaded in one process. */
export interface TaskSetup {
  task: Task;
  options: CellOptions;
  split: EvaluationSplit;
  vla: VlaPolicy;
  face: LatentVla;
  model: EnsembleModel;
  simData: Transitions;
  robotEnv: Env;
  twin: SceneTwin;
  prompts: SplitPrompts;
  groups: AgreementGroups;
  cell: SetupCell;
  /** Puts the clone's and the pretrained model's parameters back (every arm starts from them). */
  reset(): void;
  /** The clone's parameters (what the identified agreement imagines). */
  policy0: Float32Array[];
  release(): Promise<void>;
}

const copyOf = (xs: ReadonlyArray<{ data: Float32Array }>) => xs.map((t) => Float32Array.from(t.data));

/**
 * One task's setup, as every arm starts from it: the split, the VLA behaviour-cloned on the gap robot, the world model,
 * the robot, the twin and the prompts, the latent face and the diagnostics. Deterministic, so it is cached
 * (setupCacheRoot; `progress` says what was read): whole, and its two parts (clonePart, modelPart) apart, so a run can
 * build those side by side. A cached setup gives the arms exactly what a built one gives.
 */
export async function loadSetup(task: Task, o: CellOptions, progress: (label: string) => void): Promise<TaskSetup> {
  const R = vlaRecipe({ task, quick: o.quick });
  const D = diagnostics(o.quick);
  const dir = setupDir(task, o);
  const saved = readJson<SetupSaved>(join(dir, MARKER.whole));
  progress(`${task}: split`);
  const split = await evaluationSplit(task, o);
  const clone = saved ? null : await clonePart(task, o, split, progress);
  // The model's part, cached or fitted (a cached one draws the exploratory episodes again, simData: what WMRL's refits and imagination's starts read, and fits nothing).
  const pre = await modelPart(task, o, progress);
  const robotEnv = await makeEnv(gapRobot(task));
  const twin = await SceneTwin.create(task, S, { commandHistory: COMMAND_HISTORY });
  const sim = await SimPrompts.create(task, 'nominal', { commandHistory: COMMAND_HISTORY });
  const reserved = D.agreementGroups + D.gapEpisodes;
  const prompts = vlaPrompts(R, split, sim, reserved);
  const built = saved ? null : await buildSetup(dir, R, clone!, pre, { robotEnv, twin, prompts, trainSeeds: split.train, reserved }, progress);
  const vla = built ? clone!.vla : makeVla(robotEnv, R.hidden, R.proprio)(saved!.obsMean, saved!.obsStd);
  const face = built ? built.face : LatentVla.declare(vla, R.distill.hidden);
  if (saved) {
    loadCached(join(dir, 'vla.safetensors'), (f) => vla.store.load(f));
    progress(`${task}: setup read from ${dir}`);
  }
  const s = (saved ?? built!.saved);
  const { obsMean: _m, obsStd: _s, groups: savedGroups, ...cell } = s;
  const policy0 = copyOf(vla.paramNames().map((n) => vla.store.get(n)));
  const model0 = copyOf(pre.model.store.names().map((n) => pre.model.store.get(n)));
  return {
    task, options: o, split, vla, face, model: pre.model, simData: pre.simData, robotEnv, twin, prompts, cell, policy0,
    groups: built ? built.groups : restoreGroups(savedGroups, vla.actDim),
    reset() {
      vla.paramNames().forEach((n, i) => vla.store.set(n, policy0[i]!));
      pre.model.store.names().forEach((n, i) => pre.model.store.set(n, model0[i]!));
    },
    async release() {
      await face.release();
      twin.dispose();
      robotEnv.dispose();
      sim[Symbol.dispose]();
      await pre.model.release();
      await vla.release();
    },
  };
}

/**
 * What only a built setup measures, cached in `dir` with the clone: the latent face distilled on the model's
 * pretraining states and the clone's own episodes, the action gaps on the first of the `reserved` last training
 * seeds, and the rank agreements on the others (the clone on the robot, imagined under the pretrained model's nominal context, the face on the robot,
 * the robot's repeatability).
 */
async function buildSetup(
  dir: string, R: ReturnType<typeof vlaRecipe>, clone: Awaited<ReturnType<typeof clonePart>>, pre: Awaited<ReturnType<typeof modelPart>>,
  on: { robotEnv: Env; twin: SceneTwin; prompts: SplitPrompts; trainSeeds: readonly number[]; reserved: number },
  progress: (label: string) => void,
): Promise<{ face: LatentVla; groups: AgreementGroups; saved: SetupSaved }> {
  const { vla } = clone;
  const { robotEnv, twin, prompts } = on;
  const task = R.task, D = diagnostics(R.quick);
  const reserved = on.trainSeeds.slice(-on.reserved);
  progress(`${task}: latent face`);
  const { face, report: latent } = await distillFace(R, vla, robotEnv, twin, pre.simData.obs, prompts, (e, n) => progress(`${task}: latent face, epoch ${e}/${n}`));
  progress(`${task}: the clone's action gaps and rank agreements`);
  const gaps = await imaginationGaps(vla, face, twin, robotEnv, reserved.slice(0, D.gapEpisodes));
  // The agreements are of the policy RL samples from: the clone at the task's RL log-std.
  const p0 = copyOf(vla.paramNames().map((n) => vla.store.get(n)));
  if (R.logStd !== null) vla.setLogStd(R.logStd);
  const groups = await agreementGroups(vla, robotEnv, reserved.slice(D.gapEpisodes), R.groupSize, robotEnv.horizon, 7);
  const nominal = await imaginedAgreement(groups, vla, pre.model, twin, robotEnv, 0, DEFAULT_WMRL.successThreshold, 7);
  const faceOnRobot = await faceOnRobotAgreement(groups, face, robotEnv), repeat = await repeatability(groups, vla, robotEnv, 555_000);
  vla.paramNames().forEach((n, i) => vla.store.set(n, p0[i]!));
  const saved: SetupSaved = {
    bcLoss: clone.loss, demoSteps: clone.steps, demoSuccess: clone.demoSuccess, wmValLoss: pre.wmValLoss, trainSeeds: on.trainSeeds.length, controlHz: robotEnv.spec.controlHz, horizon: robotEnv.horizon, latent, gaps,
    agreement: {
      nominal: nominal.whole,
      firstSteps: { steps: AGREEMENT_STEPS.filter((K) => K < groups.H), nominal: nominal.firstSteps },
      faceOnRobot,
      repeatability: repeat,
    },
    obsMean: [...vla.config.obsMean], obsStd: [...vla.config.obsStd], groups: saveGroups(groups),
  };
  writeCached(dir, MARKER.whole, (part) => {
    vla.store.save(join(part, 'vla.safetensors'));
    writeFileSync(join(part, MARKER.whole), toJson(saved));
  });
  return { face, groups, saved };
}

// ── The arms ────────────────────────────────────────────────────────────────────────────────────
/** `vla` on the held-out states with shuffled instructions, beside its chance outcomes given `own`, its evaluation on them with their own instructions. */
async function shuffledOn(s: TaskSetup, vla: VlaPolicy, own: EvalResult): Promise<ShuffledCell> {
  const r = await evaluateOn(s.robotEnv, vla, s.split.heldOutStates, { shuffleInstructions: { seed: SHUFFLE_SEED } });
  return { outcomes: r.outcomes, chance: chanceOutcomes(own, r), choices: r.shuffled!.choices };
}

/** Success of `who` on the split's two evaluation sets (noise-free references). */
async function reference(s: TaskSetup, who: 'expert' | 'demonstrator'): Promise<{ states: number; combinations: number }> {
  const r = await expertOn(s.task, s.split, who, LATENCY);
  return { states: r.heldOutStates, combinations: r.heldOutCombinations };
}

/**
 * One arm of `s`'s task at RL seed `seed`, from the clone. 'bc' measures the clone (its mean action: the same on every
 * seed) and the references; an RL arm post-trains the VLA's head with the recipe's settings for the task
 * (recipes/vla.ts vlaRecipe: β, log-std, anchors, imagination, learning rate) for the run's updates, is evaluated on the
 * split's held-out states every quarter of them and after the last, then on the held-out combinations. The clone and
 * WMRL's final VLA are also evaluated on the held-out states with shuffled instructions (ShuffledCell).
 * sparse_only spends `robotEpisodes`: WMRL's at the same seed.
 */
export async function computeArm(s: TaskSetup, arm: Arm, seed: number, o: { robotEpisodes?: number }, progress: (label: string) => void): Promise<ArmCell> {
  const t0 = performance.now(), cpu0 = process.cpuUsage();
  const cpuSeconds = () => {
    const d = process.cpuUsage(cpu0);
    return (d.user + d.system) / 1e6;
  };
  const { task, split, vla, robotEnv } = s;
  const at = `${task}, seed ${seed}: ${arm}`;
  s.reset();
  if (arm === 'bc') {
    progress(`${at}: evaluating the clone`);
    const states = await evaluateOn(robotEnv, vla, split.heldOutStates), combinations = await evaluateOn(robotEnv, vla, split.heldOutCombinations);
    progress(`${at}: evaluating the clone with shuffled instructions`);
    const shuffled = await shuffledOn(s, vla, states);
    return { arm, states: states.outcomes, combinations: combinations.outcomes, shuffled, demonstrator: await reference(s, 'demonstrator'), expert: await reference(s, 'expert'), cellSeconds: (performance.now() - t0) / 1000, cpuSeconds: cpuSeconds() };
  }
  if (arm === 'sparse_only' && o.robotEpisodes === undefined) throw new Error('bench vla: sparse only spends WMRL\'s robot episodes at its seed, and none were given');
  const R = vlaRecipe({ task, quick: s.options.quick, seed, updates: s.options.updates[task], ...(s.options.refitEvery === null ? {} : { refitEvery: s.options.refitEvery }) });
  if (R.logStd !== null) vla.setLogStd(R.logStd);
  let last: EvalResult | null = null;
  const evaluate = async () => {
    last = await evaluateOn(robotEnv, vla, split.heldOutStates);
    return { success: last.success, meanReturn: last.return, episodes: last.episodes };
  };
  // The label carries the latest held-out success, so a long run shows where each arm stands as it goes.
  let seen = '';
  const tmp = mkdtempSync(join(tmpdir(), `bench-vla-${task}-`));
  try {
    // WMRL's robot episodes are recorded: its refits learn the robot's dynamics from them.
    const st = await trainVlaRl(R, arm, {
      vla, face: s.face, model: s.model, simData: s.simData, twin: s.twin, prompts: s.prompts, evaluate,
      onUpdate: (u) => {
        if (u.evalSuccess !== undefined) seen = `, held-out ${Math.round(100 * u.evalSuccess)}% at update ${u.update}`;
        progress(`${at} update ${u.update}${seen}`);
      },
      ...(arm === 'wmrl' ? { store: join(tmp, 'wmrl.sqlite') } : {}), ...(o.robotEpisodes !== undefined && arm === 'sparse_only' ? { robotEpisodes: o.robotEpisodes } : {}),
    });
    const rows = st.rows;
    const states = last as EvalResult | null;
    if (!states) throw new Error(`bench vla: ${at} ended without evaluating after its last update`);
    progress(`${at}: evaluating on the held-out combinations`);
    const combinations = await evaluateOn(robotEnv, vla, split.heldOutCombinations);
    let wmrl: RlCell['wmrl'] = null, shuffled: ShuffledCell | null = null;
    if (arm === 'wmrl') {
      progress(`${at}: evaluating with shuffled instructions`);
      shuffled = await shuffledOn(s, vla, states);
      const flagged = rows.map((x) => x.flaggedContexts ?? 0);
      const identified = { context: Array.from(s.model.context), delay: rows.at(-1)?.actionDelay ?? 0 };
      // The clone's rank agreement imagined under the context and delay WMRL identified, in the world model as its refits left it.
      progress(`${at}: rank agreement under the identified context`);
      vla.paramNames().forEach((n, i) => vla.store.set(n, s.policy0[i]!));
      if (R.logStd !== null) vla.setLogStd(R.logStd);
      const agreement = await imaginedAgreement(s.groups, vla, s.model, s.twin, robotEnv, identified.delay, st.successThreshold, 7);
      wmrl = { identified, guard: { updatesFlagged: flagged.filter((k) => k > 0).length, maxFlagged: Math.max(0, ...flagged) }, agreement: { identified: agreement.whole, firstSteps: agreement.firstSteps } };
    }
    const corrected = arm === 'wmrl';
    return {
      arm,
      states: states.outcomes,
      combinations: combinations.outcomes,
      shuffled,
      curve: rows.filter((r) => r.evalSuccess !== undefined).map((r) => ({ update: r.update, robotHours: r.robotSeconds / 3600, success: r.evalSuccess! })),
      updates: rows.length,
      robotEpisodes: st.robotEpisodes,
      robotHours: st.robotSeconds / 3600,
      robotSuccesses: rows.reduce((a, x) => a + Math.round((x.trainSuccess ?? 0) * x.realGroups * R.groupSize), 0),
      computeSeconds: rows.at(-1)?.computeSeconds ?? 0,
      cellSeconds: (performance.now() - t0) / 1000,
      cpuSeconds: cpuSeconds(),
      groups: rows.map((r) => r.groups),
      realGroups: rows.map((r) => r.realGroups),
      anchorWeight: corrected ? rows.map((r) => r.anchorWeight ?? 1) : null,
      calibrated: corrected ? rows.map((r) => r.calibrated ?? false) : null,
      biasReduction: corrected ? rows.map((r) => r.biasReduction ?? null) : null,
      imaginedWeight: corrected ? rows.map((r) => r.imaginedWeight ?? 1) : null,
      wmrl,
    };
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

// ── Jobs, as the bench's worker processes run them (bench/cells/vla-worker.ts) ──────────────────
export type Job =
  | { kind: 'part'; task: Task; options: CellOptions; part: SetupPart }
  | { kind: 'setup'; task: Task; options: CellOptions }
  | { kind: 'arm'; task: Task; options: CellOptions; arm: Arm; seed: number; robotEpisodes?: number };
export type JobResult = null | SetupCell | ArmCell;

/**
 * Runs jobs in one process, keeping the latest task's setup loaded for the next job of the same task and options
 * (a job of another releases it first). A job that fails releases the setup, so the next loads it afresh.
 */
export class JobRunner {
  private loaded: { id: string; setup: TaskSetup } | null = null;

  async run(job: Job, progress: (label: string) => void): Promise<JobResult> {
    if (job.kind === 'part') {
      await buildSetupPart(job.task, job.options, job.part, progress);
      return null;
    }
    try {
      const setup = await this.setup(job.task, job.options, progress);
      return job.kind === 'setup' ? setup.cell : await computeArm(setup, job.arm, job.seed, job.robotEpisodes === undefined ? {} : { robotEpisodes: job.robotEpisodes }, progress);
    } catch (e) {
      await this.release();
      throw e;
    }
  }

  private async setup(task: Task, options: CellOptions, progress: (label: string) => void): Promise<TaskSetup> {
    const id = JSON.stringify([task, options]);
    if (this.loaded?.id === id) return this.loaded.setup;
    await this.release();
    const setup = await loadSetup(task, options, progress);
    this.loaded = { id, setup };
    return setup;
  }

  async release(): Promise<void> {
    const l = this.loaded;
    this.loaded = null;
    await l?.setup.release();
  }
}
