// The VLA recipe: one typed, validated config (VlaRecipeInput) → a VLA (conv image encoder + instruction embedding +
// proprioception) behaviour-cloned with DAgger from the task's robust demonstrator on the gap robot → the world model
// pretrained on exploratory episodes under randomized profiles → WMRL on the VLA's head (imagined groups on the digital
// twin or through the latent face, anchor groups on the robot scored by its sparse success) → evaluation on held-out
// start states and (instruction, target region) combinations → the VLA exported as a deployable ONNX artifact.
// `runVla` reads top to bottom in that order; bench vla runs the same pieces for its four rows and measures them.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Value } from '@sinclair/typebox/value';
import { problem } from '../common/schema.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { Rng } from '../nn/index.js';
import { exportPolicyArtifact } from '../policies/artifact.js';
import { cloneWithDagger } from '../policies/dagger.js';
import { contextOf, evaluateHeldOut, evaluateOn, type EvalResult } from '../policies/demos.js';
import { LatentVla, type LatentDistillReport } from '../policies/latent-vla.js';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG, type PgConfig } from '../policies/pg.js';
import type { Policy } from '../policies/types.js';
import { VlaPolicy, type VlaProprio } from '../policies/vla.js';
import { SceneTwin, combinationSplit, loadProfile, makeEnv, type Combination, type Env, type EvaluationSplit } from '../sim/index.js';
import type { EnsembleModel, Transitions } from '../worldmodel/index.js';
import { correctorConfig, type CorrectorConfig } from '../wmrl/corrector.js';
import { SplitPrompts, type ClosableTarget, type PromptSource, type RobotTarget } from '../wmrl/embodied.js';
import type { RunHooks, RunRow } from '../wmrl/run-state.js';
import { DEFAULT_PRETRAIN, SimPrompts, pretrainWorldModel, simRobotTarget } from '../wmrl/sim-setup.js';
import { trainStandard } from '../wmrl/train_standard.js';
import { DEFAULT_WMRL, trainWmrl } from '../wmrl/train_wmrl.js';
import { VLA_PROPRIO, VLA_TASKS, VlaRecipeInput } from './vla-options.js';

export { VLA_PROPRIO, VLA_TASKS };
export type VlaTask = (typeof VLA_TASKS)[number];
/** Side of the robot's square camera image, px. */
export const S = 32;
/** The gap robot's actuation latency as its profile declares it, what the demonstrator is told. */
const GAP = loadProfile('gap');
export const LATENCY = GAP.action_latency_steps;
/** The robot's observation ends with its last LATENCY commands: those still in flight, which a policy over the state alone cannot see. */
export const COMMAND_HISTORY = LATENCY;
/** The robot every row runs on: the task under the gap profile, its S x S camera, its last COMMAND_HISTORY commands in its observation. */
export const gapRobot = (task: VlaTask) => ({ task, profile: 'gap', image: S, commandHistory: COMMAND_HISTORY });

/** Behaviour cloning's scale: expert episodes (of which the last rounds x episodes are DAgger's) and epochs of the first fit. */
export interface CloneScale {
  demos: number;
  daggerRounds: number;
  daggerEpisodes: number;
  bcEpochs: number;
}
/** The VLA's clone per task: sized so the clone lands about halfway to the demonstrator, leaving RL something to gain. */
export const VLA_CLONE: Record<'full' | 'quick', Record<VlaTask, CloneScale>> = {
  full: { reach: { demos: 160, daggerRounds: 2, daggerEpisodes: 15, bcEpochs: 60 }, push: { demos: 1000, daggerRounds: 2, daggerEpisodes: 8, bcEpochs: 30 } },
  quick: { reach: { demos: 4, daggerRounds: 1, daggerEpisodes: 1, bcEpochs: 3 }, push: { demos: 4, daggerRounds: 1, daggerEpisodes: 1, bcEpochs: 3 } },
};
/** The VLA's fusion MLP per task: push's two-phase policy (get behind the cube, then push) needs the wider one. */
export const VLA_HIDDEN: Record<VlaTask, number[]> = { reach: [64, 64], push: [128, 128] };
/** β of GRPO's KL penalty to the cloned VLA per task (0: none); the imagined signal, not the penalty, is what push lacked. */
export const KL_BETA: Record<VlaTask, number> = { reach: 0, push: 0 };
/** The VLA's log-std under RL per task (null: the clone's, -1): push's clone gains from a dense signal only with more exploration. */
export const RL_LOG_STD: Record<VlaTask, number | null> = { reach: null, push: -1.6 };
/**
 * WMRL's anchors per task: groups an update on average, what scores them (WmrlConfig.anchorScore) and whether they gate
 * the imagined groups (WmrlConfig.imaginedGate). Reach's dense reward does not carry its success (hold within 3 cm), so
 * the robot's success scores it; push's reward head over the robot's own states ranks its groups where imagination does
 * not, and its anchors gate the imagined groups so these do not drown them.
 */
export const ANCHORS: Record<VlaTask, { perUpdate: number; score: 'robot' | 'relabel'; gate: { window: number; minGroups: number } | false }> = {
  reach: { perUpdate: 0.5, score: 'robot', gate: false },
  push: { perUpdate: 2, score: 'relabel', gate: { window: 16, minGroups: 2 } },
};
/**
 * What WMRL imagines the VLA through, per task: 'twin', the VLA itself on the digital twin's render of every predicted
 * state (the policy that acts on the robot, exactly); 'face', its latent face (a map from the state to the encoder's
 * features, no render per step), cheaper but a worse stand-in for the VLA.
 */
export const IMAGINE: Record<VlaTask, 'twin' | 'face'> = { reach: 'twin', push: 'twin' };
/** WMRL's updates per task; push's 300-step rollouts make an update costly and gained nothing past about 160. */
export const UPDATES: Record<VlaTask, number> = { reach: 600, push: 160 };

/** The policy gradient on the VLA's head: lr 1e-4 (at 3e-4 and above the head's updates lowered success), the task's KL penalty. */
export function vlaPgConfig(quick: boolean, task?: VlaTask): PgConfig {
  const beta = task ? KL_BETA[task] : 0;
  return { ...DEFAULT_PG_CONFIG, optimizer: { lr: 1e-4, clipNorm: 0.5 }, epochs: quick ? 1 : 4, minibatch: 512, ...(beta > 0 ? { klCoef: beta } : {}) };
}

/**
 * The VLA for `env`'s layout, camera and instructions: conv 8-16, 32 image features, 16-d word embeddings, a fusion MLP
 * of `hidden`, log-std -1, its proprioception `proprio` (the recipe's default: the robot's own state).
 */
export const makeVla = (env: Env, hidden: number[] = [64, 64], proprio: VlaProprio = VLA_PROPRIO) => (obsMean: number[], obsStd: number[]) => new VlaPolicy({
  layout: env.layout, actDim: env.actionSpace.shape[0], image: { height: S, width: S }, instructions: env.observationSpace.instructions,
  convChannels: [8, 16], imageFeatures: 32, embedDim: 16, hidden, initLogStd: -1, obsMean, obsStd, seed: 0, proprio,
});

/** Held-out episodes per evaluation set. */
export function evalEpisodes(quick: boolean): number {
  return quick ? 5 : 100;
}

/** Which (instruction, target region) combinations an evaluation holds out and withholds (sim/split.ts), and where its start states begin. */
export interface VlaHeldOut {
  heldOut?: readonly Combination[];
  withheld?: readonly Combination[];
  eval?: { seed0: number; episodes: number };
}

/**
 * The task's (instruction, target region) split: training seeds for demonstrations and prompts, the held-out sets for
 * evaluation; by default goal k in region k held out and evalEpisodes(quick) of each from seed 9,000,000.
 */
export function vlaSplit(task: string, quick: boolean, held: VlaHeldOut = {}): Promise<EvaluationSplit> {
  return combinationSplit(task, {
    ...(held.heldOut ? { heldOut: held.heldOut } : {}), ...(held.withheld ? { withheld: held.withheld } : {}),
    train: { seed0: 0, scan: quick ? 300 : 3000 }, eval: held.eval ?? { seed0: 9_000_000, episodes: evalEpisodes(quick) },
  });
}

/** The recipe's sizes, quick or full. */
export function vlaScale(q: boolean) {
  return {
    evalEpisodes: evalEpisodes(q),
    /** Updates of WMRL (and of the pure world model) for a task. */
    updates: (task: VlaTask) => (q ? 2 : UPDATES[task]),
    /** Imagined groups per update; the trainer on the robot alone runs 1 group per update. */
    prompts: q ? 2 : 16,
    groupSize: q ? 2 : 8,
    /** WMRL refits the world model on the robot's recorded episodes every this many updates. */
    refitEvery: q ? 2 : 30,
    /** Latent face: states the map is distilled on, from the model's pretraining data and from the clone's own episodes; map epochs. */
    distill: { simStates: q ? 300 : 30_000, cloneEpisodes: q ? 2 : 100, epochs: q ? 2 : 60, hidden: [128, 128] },
    /** The world model the product pretrains (randomized profiles, context-conditioned), on 1500 exploratory episodes; quick: a small one. */
    wm: { ...DEFAULT_PRETRAIN, ...(q ? { wmEpisodes: 12, wmEpochs: 2, wmHidden: [64, 64], wmMembers: 3 } : { wmEpisodes: 1500 }) },
    promptSeed0: 1_000_000,
  };
}

/**
 * WMRL's robot side per task: anchor groups an update (quick: 1), what scores an anchor episode, its Corrector and the
 * imagined gate, as ANCHORS declares. An anchor group of G per update gives few pairs, so the map starts at 16 pairs and
 * the anchor weight after 2 groups.
 */
export function wmrlScale(task: VlaTask, q: boolean) {
  const { prompts } = vlaScale(q);
  const anchorsPerUpdate = q ? 1 : ANCHORS[task].perUpdate;
  const corrector = correctorConfig({ anchors: { fraction: anchorsPerUpdate / prompts, floor: 0 }, debias: { minPairs: q ? 2 : 16, refitEvery: q ? 2 : 8 }, denoise: { warmupGroups: 2 } }, DEFAULT_WMRL.corrector as CorrectorConfig);
  return { anchorsPerUpdate, corrector, anchorScore: ANCHORS[task].score, imaginedGate: ANCHORS[task].gate };
}

// ---- the config: one schema, defaults per task ----

// The schema (recipes/options.ts) is TypeBox alone, so the CLI's flags and the service's body read it without MuJoCo.
export { VlaRecipeInput };

/** A validated config with every default filled in: what the recipe's pieces read. */
export interface VlaRecipe {
  task: VlaTask;
  seed: number;
  quick: boolean;
  clone: CloneScale;
  hidden: number[];
  /** What the VLA's proprioception reads (VlaConfig.proprio). */
  proprio: VlaProprio;
  updates: number;
  prompts: number;
  groupSize: number;
  refitEvery: number;
  evalEpisodes: number;
  promptSeed0: number;
  distill: ReturnType<typeof vlaScale>['distill'];
  wm: ReturnType<typeof vlaScale>['wm'];
  pg: PgConfig;
  logStd: number | null;
  imagine: 'twin' | 'face';
  wmrl: ReturnType<typeof wmrlScale>;
}

/** What vlaRecipe refuses in `input` (every bad field named), or null. */
export function vlaRecipeProblem(input: unknown): string | null {
  try {
    vlaRecipe(input);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

/** Checks `input` against VlaRecipeInput (refusing it with every bad field named) and fills in the task's defaults. */
export function vlaRecipe(input: unknown): VlaRecipe {
  const bad = [...Value.Errors(VlaRecipeInput, input)].map((e) => `${e.path.slice(1).replaceAll('/', '.') || '(config)'} ${problem(e)}`);
  if (bad.length) throw new Error(`vla recipe: bad config: ${bad.join('; ')}`);
  const c = input as VlaRecipeInput, q = c.quick ?? false, task = c.task;
  const scale = vlaScale(q), beta = c.rl?.klBeta ?? KL_BETA[task];
  const clone = c.clone ?? VLA_CLONE[q ? 'quick' : 'full'][task];
  if (clone.demos <= clone.daggerRounds * clone.daggerEpisodes) throw new Error(`vla recipe: bad config: clone.demos (${clone.demos}) must exceed clone.daggerRounds x clone.daggerEpisodes (${clone.daggerRounds * clone.daggerEpisodes})`);
  return {
    task, seed: c.seed ?? 0, quick: q, clone, hidden: c.hidden ?? VLA_HIDDEN[task], proprio: c.proprio ?? VLA_PROPRIO,
    updates: c.updates ?? scale.updates(task), prompts: c.prompts ?? scale.prompts, groupSize: c.groupSize ?? scale.groupSize, refitEvery: c.refitEvery ?? scale.refitEvery,
    evalEpisodes: scale.evalEpisodes, promptSeed0: scale.promptSeed0, distill: scale.distill, wm: scale.wm,
    pg: { ...vlaPgConfig(q), ...(beta > 0 ? { klCoef: beta } : {}) },
    logStd: c.rl?.logStd === undefined ? RL_LOG_STD[task] : c.rl.logStd, imagine: c.rl?.imagine ?? IMAGINE[task], wmrl: wmrlScale(task, q),
  };
}

// ---- the pieces, in the order the recipe runs them ----

/**
 * A policy (`make`, given the recording env: `makeVla` for the VLA) behaviour-cloned with DAgger on the gap robot from
 * the task's robust demonstrator, at scale `C`, from the first training seeds of `split`; `commandHistory`: the robot's
 * observation ends with its last this many commands.
 */
export async function cloneOnGap<P extends Policy>(task: VlaTask, split: EvaluationSplit, C: CloneScale, make: (env: Env) => (obsMean: number[], obsStd: number[]) => P, onRound: (round: number) => void, commandHistory = 0): Promise<{ policy: P; loss: number; steps: number; demoSuccess: number }> {
  const recording = await makeEnv({ ...gapRobot(task), commandHistory });
  try {
    return await cloneWithDagger(make(recording), recording, LATENCY, split.train.slice(0, C.demos), C.daggerRounds, C.daggerEpisodes, C.bcEpochs, onRound);
  } finally {
    recording.dispose();
  }
}

/**
 * The prompts: the split's training seeds after the demonstrations', over again once every one has been a prompt;
 * `reserve`: the last this many training seeds are left out (for measurements that need unseen ones).
 */
export function vlaPrompts(R: Pick<VlaRecipe, 'clone' | 'prompts' | 'promptSeed0'>, split: EvaluationSplit, sim: SimPrompts, reserve = 0): SplitPrompts {
  if (split.train.length < R.clone.demos + R.prompts + reserve) throw new Error(`vla recipe: the split has ${split.train.length} training seeds, fewer than demonstrations, one update's prompts and ${reserve} reserved seeds need`);
  return new SplitPrompts(sim, split.train.slice(R.clone.demos, split.train.length - reserve), R.promptSeed0, true);
}

/** The robot as the recipe has it: its only score is sparse success (reward 1 on the step that succeeds, else 0). */
export function sparse(t: ClosableTarget): ClosableTarget {
  return { ...t, outcome: async () => { const s = await t.outcome(); return { ...s, reward: s.success ? 1 : 0 }; } };
}

/**
 * The states the latent face's map is distilled on: `simStates` of the world model's pretraining observations
 * (evenly strided; the task's first instruction) and every step of `episodes` of the clone itself on the robot
 * (`env`, its camera; sampled actions), from prompts' start states, with their instructions.
 */
export async function distillStates(vla: VlaPolicy, env: Env, simObs: Float32Array, simStates: number, prompts: PromptSource, k0: number, episodes: number): Promise<{ states: Float32Array; instructions: string[] }> {
  const D = vla.obsDim, A = vla.actDim, n = simObs.length / D, stride = Math.max(1, Math.floor(n / simStates));
  const states: number[] = [], instructions: string[] = [];
  for (let i = 0; i < n && states.length < simStates * D; i += stride) {
    states.push(...simObs.subarray(i * D, (i + 1) * D));
    instructions.push(env.observationSpace.instructions[0]!);
  }
  const rng = new Rng(23), lo = env.actionSpace.low, hi = env.actionSpace.high;
  for (let ep = 0; ep < episodes; ep++) {
    let ob = env.reset(prompts.get(k0 + ep).seed);
    for (;;) {
      states.push(...ob.state);
      instructions.push(ob.instruction);
      const a = await vla.act(ob.state, Float32Array.from({ length: A }, () => rng.normal()), contextOf(ob));
      const r = env.step(a.action.map((v, j) => Math.max(lo[j]!, Math.min(hi[j]!, v))));
      ob = r.obs;
      if (r.terminated || r.truncated) break;
    }
  }
  return { states: Float32Array.from(states), instructions };
}

/** The VLA's latent face, distilled on the model's pretraining states and the clone's own robot episodes. */
export async function distillFace(R: VlaRecipe, vla: VlaPolicy, robotEnv: Env, twin: SceneTwin, simObs: Float32Array, prompts: PromptSource, onEpoch: (e: number, n: number) => void): Promise<{ face: LatentVla; report: LatentDistillReport }> {
  const on = await distillStates(vla, robotEnv, simObs, R.distill.simStates, prompts, R.promptSeed0, R.distill.cloneEpisodes);
  const { policy: face, report } = await LatentVla.distill(vla, twin, on.states, on.instructions, { epochs: R.distill.epochs, hidden: R.distill.hidden, seed: 0, onEpoch });
  return { face, report };
}

/** The RL trainers the recipe can run on the VLA's head: WMRL, standard GRPO on the robot's sparse success, the pure world model. */
export type VlaRl = 'wmrl' | 'sparse_only' | 'dense_only';

/** What one RL run of the VLA reads besides the config. */
export interface VlaRlRun {
  vla: VlaPolicy;
  /** The latent face, where the config imagines through it. */
  face?: LatentVla;
  model: EnsembleModel;
  simData: Transitions;
  twin: SceneTwin;
  prompts: PromptSource;
  /** The robot's episode store (WMRL's refits read it); omit for none. */
  store?: string;
  /** sparse_only: the robot episodes it spends (whole groups), one group an update. */
  robotEpisodes?: number;
  evaluate: () => Promise<{ success: number; meanReturn: number; episodes: number }>;
  onUpdate?: RunHooks['onUpdate'];
  onEpisode?: RunHooks['onEpisode'];
  /** Stops the run at the next update (the robot's episode under way finished as partial): the trainer throws. */
  signal?: AbortSignal;
  /** The robot the episodes run on, whose owner closes it; default a fast-stepped sim gap robot of the run's own, recording into `store`. */
  target?: RobotTarget;
  /** The trainer checkpoints here after every update (state, policy gradient, world model, history). */
  outDir?: string;
}

/** Robot time charged per episode for its reset, s (robot-hours accounting). */
export const RESET_SECONDS = 5;

/**
 * One RL run on the VLA's head (the encoder BC trained stays frozen) from its current parameters, on the gap robot
 * reporting sparse success. sparse_only trains the VLA on its camera; the imagining trainers train it on the twin's
 * renders or its latent face (the same head), as `R.imagine` says. WMRL's robot rewards are the robot's success, so its
 * refits teach the dynamics and the success head and leave the dense reward head as the sim taught it.
 */
export async function trainVlaRl(R: VlaRecipe, row: VlaRl, o: VlaRlRun): Promise<{ rows: RunRow[]; robotEpisodes: number; robotSeconds: number; maxSteps: number; successThreshold: number }> {
  const own = o.target ? null : await simRobotTarget({ ...gapRobot(R.task), robots: 1, resetSeconds: RESET_SECONDS, seed: R.seed, ...(o.store ? { store: o.store } : {}), ...(o.signal ? { signal: o.signal } : {}) });
  const target = sparse(own ?? { ...o.target!, close: async () => {} });
  try {
    const viaTwin = R.imagine === 'twin';
    if (!viaTwin && !o.face) throw new Error('vla recipe: imagining through the latent face needs the face');
    const pg = await ClippedPolicyGradient.create(row === 'sparse_only' || viaTwin ? o.vla : o.face!, R.pg, { trainable: o.vla.headParamNames() });
    try {
      // keepBest false: the recipe measures the clone itself and reports and exports the VLA its last update leaves.
      const common = { prompts: R.prompts, groupSize: R.groupSize, evalEvery: Math.max(1, R.updates / 4), promptSeed0: R.promptSeed0, seed: R.seed, keepBest: false as const };
      const hooks = { ...(o.onUpdate ? { onUpdate: o.onUpdate } : {}), ...(o.onEpisode ? { onEpisode: o.onEpisode } : {}), ...(o.signal ? { signal: o.signal } : {}) };
      const outDir = o.outDir ? { outDir: o.outDir } : {};
      const wmrl = { ...DEFAULT_WMRL, ...common, updates: R.updates, horizon: target.maxSteps, refitEvery: row === 'wmrl' ? R.refitEvery : 0, robotRewards: 'success' as const };
      let st;
      if (row === 'sparse_only') {
        const episodes = o.robotEpisodes;
        if (episodes === undefined || episodes <= 0 || episodes % R.groupSize) throw new Error(`vla recipe: sparse_only needs whole groups of ${R.groupSize} robot episodes, got ${episodes}`);
        st = await trainStandard({ config: { ...common, prompts: 1, updates: episodes / R.groupSize, evalEvery: Math.max(1, Math.round(episodes / R.groupSize / 4)) }, policy: o.vla, pg, target, prompts: o.prompts, hooks, ...outDir, evaluate: o.evaluate });
      } else {
        const W = R.wmrl;
        st = await trainWmrl({ config: { ...wmrl, corrector: row === 'wmrl' ? { ...W.corrector, seed: R.seed } : false, ...(row === 'wmrl' ? { anchorScore: W.anchorScore, imaginedGate: W.imaginedGate } : {}) }, policy: o.vla, ...(viaTwin ? { twin: o.twin } : { face: o.face! }), pg, model: o.model, simData: o.simData, target, prompts: o.prompts, hooks, ...outDir, warn: () => {}, evaluate: o.evaluate });
      }
      return { rows: st.rows, robotEpisodes: target.clock.episodes, robotSeconds: target.clock.robotSeconds, maxSteps: target.maxSteps, successThreshold: wmrl.successThreshold };
    } finally {
      await pg.release();
    }
  } finally {
    await target.close();
  }
}

/** Exports `vla` as the deployable artifact of the task's gap robot (its layout, action spec and control rate written in). */
export async function exportVla(task: VlaTask, vla: VlaPolicy, path: string, meta: { policyVersion: string; runId: string }): Promise<void> {
  const robot = await SimRobot.create({ ...gapRobot(task), seed: 0 });
  try {
    exportPolicyArtifact(vla, path, { layout: robot.env.layout, action: robot.spec.action, controlHz: robot.spec.controlHz, ...meta });
  } finally {
    await robot[Symbol.asyncDispose]();
  }
}

// ---- the recipe ----

export interface VlaOutcome {
  /** Held-out success of the clone, and of the post-trained VLA (null when a stop ended RL early: it is exported unmeasured). */
  clone: { heldOutStates: EvalResult; heldOutCombinations: EvalResult };
  wmrl: { heldOutStates: EvalResult; heldOutCombinations: EvalResult } | null;
  rows: RunRow[];
  robotEpisodes: number;
  robotSeconds: number;
  /** The exported VLA artifact. */
  policyPath: string;
  /** A stop (VlaRunIo.signal) ended RL before its last update. */
  stopped: boolean;
}

/** What a run reports and where its robot and its artifact are, beside its config and its folder; each one optional. */
export interface VlaRunIo {
  /**
   * What the run is doing and how far into it: 'pretraining: behaviour cloning' (rounds), 'pretraining: world model'
   * (epochs), 'pretraining: latent face' (epochs), 'evaluating the clone', 'updates', 'evaluating'.
   */
  progress?: (phase: string, done: number, total: number) => void;
  /** The clone's held-out success, measured before RL starts. */
  onClone?: (clone: VlaOutcome['clone']) => void;
  onUpdate?: RunHooks['onUpdate'];
  /** Each robot episode RL runs, as it ends. */
  onEpisode?: RunHooks['onEpisode'];
  /**
   * Stops the run. During pretraining it lands at the end of the clone's round or the model's epoch under way and
   * runVla throws (nothing to export yet); during RL at the next update (the robot's episode under way finished as
   * partial), and the VLA is exported as its last finished update left it.
   */
  signal?: AbortSignal;
  /**
   * The robot RL's episodes run on, whose owner closes it: the task's sim robot under the gap profile, with the
   * recipe's S x S camera and COMMAND_HISTORY commands in its observation. Default: one of the run's own,
   * fast-stepped, recording into OUT/episodes.db.
   */
  target?: RobotTarget;
  /** Where the artifact goes and what it says of itself; default OUT/policy.onnx, version vla-wmrl-UPDATES, run OUT. */
  artifact?: { path: string; policyVersion: string; runId: string };
}

/**
 * The whole recipe into the folder `out`: clone → world model → WMRL (its checkpoint in `out` after every update) →
 * evaluation → the artifact (default out/policy.onnx; the robot's episodes in out/episodes.db).
 */
export async function runVla(input: unknown, out: string, io: VlaRunIo = {}): Promise<VlaOutcome> {
  const R = vlaRecipe(input);
  const progress = io.progress ?? (() => {});
  const stopHere = () => io.signal?.throwIfAborted();
  mkdirSync(out, { recursive: true });
  const split = await vlaSplit(R.task, R.quick);
  let vla: VlaPolicy | undefined, model: EnsembleModel | undefined, robotEnv: Env | undefined, twin: SceneTwin | undefined, face: LatentVla | undefined;
  try {
    // Behaviour cloning with DAgger, demonstrations recorded on the robot itself.
    const rounds = R.clone.daggerRounds + 1;
    progress('pretraining: behaviour cloning', 0, rounds);
    vla = (await cloneOnGap(R.task, split, R.clone, (env) => makeVla(env, R.hidden, R.proprio), (k) => { progress('pretraining: behaviour cloning', k + 1, rounds); stopHere(); }, COMMAND_HISTORY)).policy;
    const policy = vla;
    // The world model, pretrained on exploratory episodes under randomized profiles.
    const pre = await pretrainWorldModel({ ...R.wm, task: R.task, seed: 0, commandHistory: COMMAND_HISTORY, onProgress: (what, k, n) => { progress(`pretraining: ${what}`, k, n); stopHere(); } });
    model = pre.model;
    robotEnv = await makeEnv(gapRobot(R.task));
    const env = robotEnv;
    twin = await SceneTwin.create(R.task, S, { commandHistory: COMMAND_HISTORY });
    using sim = await SimPrompts.create(R.task, 'nominal', { commandHistory: COMMAND_HISTORY });
    const prompts = vlaPrompts(R, split, sim);
    progress('evaluating the clone', 0, 1);
    const clone = await evaluateHeldOut(env, policy, split);
    io.onClone?.(clone);
    if (R.imagine === 'face') face = (await distillFace(R, policy, env, twin, pre.simData.obs, prompts, (e, n) => { progress('pretraining: latent face', e, n); stopHere(); })).face;

    // WMRL on the VLA's head.
    if (R.logStd !== null) policy.setLogStd(R.logStd);
    let last: EvalResult | null = null;
    const evaluate = async () => { last = await evaluateOn(env, policy, split.heldOutStates); return { success: last.success, meanReturn: last.return, episodes: last.episodes }; };
    const rows: RunRow[] = [];
    let robot = { episodes: 0, seconds: 0 }, stopped = false;
    progress('updates', 0, R.updates);
    try {
      const rl = await trainVlaRl(R, 'wmrl', {
        vla: policy, ...(face ? { face } : {}), model: pre.model, simData: pre.simData, twin, prompts, evaluate, outDir: out,
        ...(io.target ? { target: io.target } : { store: join(out, 'episodes.db') }), ...(io.signal ? { signal: io.signal } : {}), ...(io.onEpisode ? { onEpisode: io.onEpisode } : {}),
        onUpdate: (u) => { rows.push(u); io.onUpdate?.(u); progress('updates', u.update, R.updates); },
      });
      robot = { episodes: rl.robotEpisodes, seconds: rl.robotSeconds };
    } catch (e) {
      if (!io.signal?.aborted) throw e;
      stopped = true;
      robot = { episodes: rows.at(-1)?.robotEpisodes ?? 0, seconds: rows.at(-1)?.robotSeconds ?? 0 };
    }
    let wmrl: VlaOutcome['wmrl'] = null;
    if (!stopped) {
      if (!last) throw new Error('vla recipe: WMRL ended without evaluating after its last update');
      progress('evaluating', 0, 1);
      wmrl = { heldOutStates: last, heldOutCombinations: await evaluateOn(env, policy, split.heldOutCombinations) };
      progress('evaluating', 1, 1);
    }
    // The deployable artifact.
    const art = io.artifact ?? { path: join(out, 'policy.onnx'), policyVersion: `vla-wmrl-${rows.length}`, runId: out };
    await exportVla(R.task, policy, art.path, { policyVersion: art.policyVersion, runId: art.runId });
    return { clone, wmrl, rows, robotEpisodes: robot.episodes, robotSeconds: robot.seconds, policyPath: art.path, stopped };
  } finally {
    await face?.release();
    twin?.dispose();
    robotEnv?.dispose();
    await model?.release();
    await vla?.release();
  }
}
