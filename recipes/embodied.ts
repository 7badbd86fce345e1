// The embodied recipe: one validated config → a post-training run of the Gaussian-MLP policy on a robot.
// Pretraining on the nominal sim (behaviour cloning of the task's scripted expert + DAgger, and the world model),
// then the trainer — train_wmrl (imagined groups corrected by anchor episodes on the robot) or train_standard (every
// group on the robot) — checkpointing into the run folder every update, evaluation (held out in the sim twin of a sim
// robot, or on a robot YAML's robot with --eval-episodes) of the start and every few updates, and the policy of the best
// evaluation exported as a deployable .onnx with its observation layout inside. `wmrl train` runs it;
// the service's `wmrl-train` job shares its pretraining, corrector and export (server/wmrl-train.ts).
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Value } from '@sinclair/typebox/value';
import { OBSERVATION_LAYOUT_KEY, layoutEntries, layoutOf, layoutToJson } from '../common/layout.js';
import type { RobotDeclaration } from '../common/robot.js';
import { loadRobotConfig } from '../hardware/config.js';
import { writeFileAtomic } from '../nn/index.js';
import { exportPolicy, type GaussianPolicy } from '../policies/gaussian.js';
import { ClippedPolicyGradient } from '../policies/pg.js';
import { makeEnv } from '../sim/index.js';
import { correctorConfig, type CorrectorConfig } from '../wmrl/corrector.js';
import { yamlRobotTarget } from '../wmrl/robot-target.js';
import { calibrateMeasured, calibrationConfig, type CalibrationReport } from '../wmrl/calibrate.js';
import { robotEvaluation } from '../wmrl/embodied.js';
import type { EvalPoint, RunRow, RunState } from '../wmrl/run-state.js';
import { DEFAULT_PRETRAIN, SimPrompts, heldOutEvaluation, postTrainPg, pretrain, simRobotTarget, type PretrainOptions, type Pretrained } from '../wmrl/sim-setup.js';
import type { PromptSource, RobotTarget } from '../wmrl/embodied.js';
import { trainStandard } from '../wmrl/train_standard.js';
import { DEFAULT_WMRL, trainWmrl } from '../wmrl/train_wmrl.js';
import { IdentifiedSim } from '../wmrl/identified-sim.js';
import { CALIBRATED_WORLD_MODEL, CALIBRATE_EPISODES, EmbodiedOptions, IMAGINE, POST_TRAIN_LR, SIM_COMMAND_HISTORY } from './options.js';

export { EmbodiedOptions };

// ── Pieces the service's job shares ─────────────────────────────────────────────────────────────
/** `quick`: pretraining sizes of a smoke run (its clone 128 x 128, half the full run's width: smoke runs are the test suite's). */
export const QUICK_PRETRAIN: Partial<PretrainOptions> = { bcEpisodes: 10, bcEpochs: 20, daggerRounds: 1, daggerEpisodes: 5, daggerEpochs: 10, wmEpisodes: 12, wmEpochs: 3, wmRolloutEpochs: 1, wmHidden: [64, 64], wmMembers: 3, policyHidden: [128, 128] };

/**
 * The calibration a new run makes: `calibrate` where given, else CALIBRATE_EPISODES where the run can check what it
 * did (it evaluates the clone before and after, and keeps the better) and the task has a robust demonstrator to clone
 * from, else none (a pure world-model run never: it runs nothing on the robot). A problem names the options.
 */
export function calibrateEpisodes(o: { pureWm: boolean; calibrate?: number | undefined; task: string }, can: { evaluates: boolean; demonstrator: boolean }): number {
  const problem = calibrateProblem(o);
  if (problem) throw new Error(problem);
  if ((o.calibrate ?? 0) > 0 && !can.demonstrator) throw new Error(`calibration (--calibrate, calibrate) ${o.calibrate}: task ${o.task} has no robust demonstrator to learn again from in the sim as identified (tasks with one: reach, push); set it to 0`);
  return o.calibrate ?? (o.pureWm || !can.evaluates || !can.demonstrator ? 0 : CALIBRATE_EPISODES);
}

/** The policy's Adam step a run takes: `lr` where given, else the product's default for a start that was calibrated or not. */
export const postTrainLr = (lr: number | undefined, calibrate: number): number => lr ?? (calibrate > 0 ? POST_TRAIN_LR.calibrated : POST_TRAIN_LR.uncalibrated);

export type WorldModelKind = 'learned' | 'identified-sim';

/** Why `worldModel` cannot go with the other options, or null: the identified sim needs a calibration, which a pure world-model run never makes. */
export function worldModelProblem(o: { worldModel?: WorldModelKind | undefined; pureWm: boolean; calibrate?: number | undefined }): string | null {
  if (o.worldModel !== 'identified-sim') return null;
  if (o.pureWm) return 'world model (--world-model, worldModel) identified-sim: a pure world-model run (--pure-wm, pureWm) makes no calibration to identify a sim from; imagine in the learned model';
  return o.calibrate === 0 ? "world model (--world-model, worldModel) identified-sim: calibration (--calibrate, calibrate) 0 identifies no sim to imagine in; calibrate, or imagine in the learned model" : null;
}

/** Where a run of `calibrate` robot episodes imagines: `worldModel` where given (the identified sim only after a calibration), else the product's default. */
export function imaginationIn(o: { worldModel?: WorldModelKind | undefined }, calibrate: number): WorldModelKind {
  if (o.worldModel === 'identified-sim' && calibrate === 0) throw new Error("world model (--world-model, worldModel) identified-sim: the run does not calibrate, so no sim is identified to imagine in; give --calibrate N > 0 (calibrate), or imagine in the learned model");
  return o.worldModel ?? (calibrate > 0 ? CALIBRATED_WORLD_MODEL : 'learned');
}

/** Groups an update imagines, as a multiple of prompts: `imagine` where given, else the schedule of where it imagines. */
export const imagineMultiple = (o: { imagine?: number | undefined }, worldModel: WorldModelKind): number => o.imagine ?? IMAGINE[worldModel];

/** The sim a run imagines in, or null where it imagines in the learned model. */
export async function imaginedSim(worldModel: WorldModelKind | undefined, task: string, calibration: CalibrationReport | undefined, commandHistory: number): Promise<IdentifiedSim | null> {
  if (worldModel !== 'identified-sim') return null;
  if (!calibration) throw new Error('world model identified-sim: the run has no calibration (calibration.json) to build its sim from');
  return IdentifiedSim.fromCalibration(task, calibration, { commandHistory });
}

/** Why `calibrate` cannot go with the other options, or null: a pure world-model run spends no robot episode. */
export function calibrateProblem(o: { pureWm: boolean; calibrate?: number | undefined }): string | null {
  return o.pureWm && (o.calibrate ?? 0) > 0 ? `calibration (--calibrate, calibrate) ${o.calibrate}: a pure world-model run (--pure-wm, pureWm) runs nothing on the robot; leave calibrate out or set it to 0` : null;
}

/** Whether the task's sim has a robust demonstrator (sim/env.ts Env.demonstrator), which calibration clones from. */
export async function hasRobustDemonstrator(task: string): Promise<boolean> {
  const env = await makeEnv({ task });
  try {
    return env.hasDemonstrator;
  } finally {
    env.dispose();
  }
}

/** What is wrong with a run's anchor groups per update against the groups it imagines, or null; names the option as the flag and as the job's key. */
export function anchorGroupsProblem(o: { pureWm: boolean; prompts: number; imagine?: number | undefined; anchorGroups: number; worldModel?: WorldModelKind | undefined }): string | null {
  // Left out, imagine is resolved where the run imagines; unless the options say where, the fewest groups it could imagine are the learned model's.
  const imagine = o.imagine ?? IMAGINE[o.worldModel ?? 'learned'], groups = o.prompts * imagine;
  return !o.pureWm && o.anchorGroups > groups ? `anchor groups per update (--anchor-groups, anchorGroups) ${o.anchorGroups}: more than the ${groups} groups an update imagines (prompts ${o.prompts} x imagine ${imagine}${o.imagine === undefined ? ', the fewest a run that leaves imagine out imagines' : ''})` : null;
}

/**
 * The Corrector as the trainer's options configure it (false: pure world model). `maxInFlight`: anchor groups
 * executed at once — one per robot (the episodes of one robot take turns in any case:
 * wmrl/embodied.ts robotEpisode).
 */
export function trainerCorrector(o: { pureWm: boolean; debias: boolean; denoise: boolean; anchors: 'random' | 'active'; seed: number; prompts: number; imagine: number; anchorGroups: number }, maxInFlight?: number): CorrectorConfig | false {
  if (o.pureWm) return false;
  const problem = anchorGroupsProblem(o);
  if (problem) throw new Error(problem);
  const groups = o.prompts * o.imagine;
  return correctorConfig(
    {
      ...(o.debias ? {} : { debias: false }), ...(o.denoise ? {} : { denoise: false }),
      // anchorGroups of the update's groups on average; at least one every update where that is one or more.
      anchors: { mode: o.anchors, fraction: o.anchorGroups / groups, floor: o.anchorGroups >= 1 ? 1 : 0, ...(maxInFlight ? { maxInFlight } : {}) },
      seed: o.seed,
    },
    DEFAULT_WMRL.corrector || undefined,
  );
}

/** Pretraining of a run: the default sizes, `quick`'s, then any given; `fit: false` loads the run's world model instead (resume). */
export function embodiedPretrain(o: { task: string; seed: number; quick: boolean; commandHistory: number; sizes?: Partial<PretrainOptions>; fit?: boolean; onProgress?: PretrainOptions['onProgress'] }): Promise<Pretrained> {
  return pretrain({
    ...DEFAULT_PRETRAIN, ...(o.quick ? QUICK_PRETRAIN : {}), ...o.sizes, task: o.task, seed: o.seed, commandHistory: o.commandHistory,
    ...(o.fit === undefined ? {} : { fit: o.fit }),
    ...(o.onProgress ? { onProgress: o.onProgress } : {}),
  });
}

/** The policy as a deployable .onnx for the robot of `spec`, its observation layout inside. */
export function exportEmbodiedPolicy(policy: GaussianPolicy, spec: RobotDeclaration, path: string, meta: { policyVersion: string; runId: string; extra?: Record<string, string> }): void {
  const layout = layoutOf(spec);
  exportPolicy(policy, path, {
    observationNames: layoutEntries(layout).map((e) => e.label),
    actionNames: spec.action.names, controlHz: spec.controlHz, policyVersion: meta.policyVersion, runId: meta.runId,
    extra: { [OBSERVATION_LAYOUT_KEY]: layoutToJson(layout), ...meta.extra },
  });
}

// ── The run ─────────────────────────────────────────────────────────────────────────────────────
/** Everything a run was started with, resolved; saved as OUT/config.json so a resume continues the same run. */
export interface EmbodiedRunConfig {
  algo: 'wmrl' | 'standard';
  /** The robot (a fleet's first). */
  robot: string;
  /** Every robot of a fleet (--robot repeated), `robot` first; absent: one robot. */
  fleet?: string[];
  task: string;
  profile: string;
  debias: boolean;
  denoise: boolean;
  pureWm: boolean;
  anchors: 'random' | 'active';
  updates: number;
  prompts: number;
  group: number;
  /** Groups imagined per update as a multiple of prompts; left out of a new run's options, runEmbodied resolves it (imagineMultiple). */
  imagine?: number;
  anchorGroups: number;
  /** β of GRPO's KL penalty to the pretrained policy (0: none). Absent in runs from before it: 0. */
  klCoef: number;
  robots: number;
  resetSeconds: number;
  seed: number;
  quick: boolean;
  /** The robot's observation reports its last this many commands (sim: commandHistory; a robot YAML: its command_history). Absent in runs from before it: 0. */
  commandHistory?: number;
  /** Episodes of each evaluation (EmbodiedOptions.evalEpisodes, resolved; 0: none). Absent in runs from before it: sim 100 (quick 10), a robot YAML 0. */
  evalEpisodes?: number;
  /** Robot episodes of the calibration before the trainer (0: none); left out of a new run's options, runEmbodied resolves it (calibrateEpisodes). Absent in runs from before it: 0. */
  calibrate?: number;
  /** The policy's Adam step (resolved by postTrainLr when the run starts). Absent in runs from before it: POST_TRAIN_PG's 1e-3. */
  lr?: number;
  /** Where WMRL imagines (resolved by imaginationIn when the run starts). Absent in runs from before it: learned. */
  worldModel?: WorldModelKind;
}

/** The evaluation episodes a run takes when its options leave them out: a sim robot's held out in its sim, none on a robot YAML's robot (they cost robot time). */
const defaultEvalEpisodes = (sim: boolean, quick: boolean) => (sim ? (quick ? 10 : 100) : 0);

/** The options checked across fields and the robot resolved (sim task and profile, or the YAML's command history); a problem names the flag. */
export function embodiedConfig(o: EmbodiedOptions): EmbodiedRunConfig {
  const bad = [...Value.Errors(EmbodiedOptions, o)].map((e) => `${e.path.slice(1)}: ${e.message}`);
  if (bad.length) throw new Error(bad.join('; '));
  const fleet = typeof o.robot === 'string' ? [o.robot] : o.robot;
  const robot = fleet[0]!;
  const sim = robot.startsWith('sim:');
  if (fleet.length > 1) {
    // One policy acts on every robot of a fleet, and the held-out evaluation runs under the sims' one profile.
    if (fleet.some((r) => r.startsWith('sim:') !== sim)) throw new Error(`--robot: a fleet is robot YAMLs or copies of one sim, not both; got ${fleet.join(', ')}`);
    if (sim && fleet.some((r) => r !== robot)) throw new Error(`--robot: a fleet of sims is copies of one sim:TASK[:PROFILE]; got ${fleet.join(', ')}`);
    if (o.robots !== 1) throw new Error(`--robots ${o.robots} stands one robot in for several in the robot-time accounting; a fleet of ${fleet.length} (--robot repeated) is its own robots`);
  }
  const [, simTask = '', profile = sim ? 'nominal' : 'real'] = sim ? robot.split(':') : [];
  const yamls = sim ? [] : fleet.map((r) => loadRobotConfig(r));
  // The task each robot names itself (sim:TASK, or a robot YAML's task:): --task must agree with it.
  const owns = sim ? [simTask] : yamls.map((y) => y.task);
  const own = owns.find((t) => t);
  if (sim && !own) throw new Error('--robot sim:TASK[:PROFILE] needs a task');
  const other = owns.findIndex((t) => t && t !== own);
  if (other >= 0) throw new Error(`--robot ${fleet[other]}: its task ${owns[other]} is not the fleet's, ${own} (--robot ${fleet[owns.indexOf(own)]}): a fleet's robots share one task`);
  if (o.task && own && o.task !== own) throw new Error(`--task ${o.task} contradicts --robot ${fleet[owns.indexOf(own)]}${sim ? '' : `, whose task is ${own}`}`);
  const task = own || o.task;
  if (!task) throw new Error(`--robot ${robot}: a robot YAML needs --task TASK (or task: in the YAML), the sim task whose expert and world model the run starts from and whose seeded resets give the prompts`);
  if (o.commandHistory !== undefined && !sim) throw new Error(`--command-history is the sim robot's; robot ${robot} sets command_history in its YAML`);
  const histories = yamls.map((y) => y.commandHistory ?? 0);
  if (histories.some((h) => h !== histories[0])) throw new Error(`--robot: the fleet's robots report different command histories (${fleet.map((r, i) => `${r}: ${histories[i]}`).join(', ')}); one policy reads one observation`);
  const problem = o.algo === 'wmrl' ? anchorGroupsProblem(o) : null;
  if (problem) throw new Error(problem);
  const commandHistory = sim ? (o.commandHistory ?? SIM_COMMAND_HISTORY) : histories[0]!;
  const problemCal = calibrateProblem(o) ?? (o.algo === 'wmrl' ? worldModelProblem(o) : null);
  if (problemCal) throw new Error(problemCal);
  const { calibrate, lr, worldModel } = o;
  const { algo, robots, debias, denoise, pureWm, anchors, updates, prompts, group, imagine, anchorGroups, klCoef, resetSeconds, seed, quick } = o;
  const evalEpisodes = o.evalEpisodes ?? defaultEvalEpisodes(sim, quick);
  return { algo, robot, ...(fleet.length > 1 ? { fleet } : {}), task, profile, robots, debias, denoise, pureWm, anchors, updates, prompts, group, anchorGroups, klCoef, resetSeconds, seed, quick, commandHistory, evalEpisodes, calibrate, ...(imagine === undefined ? {} : { imagine }), ...(lr === undefined ? {} : { lr }), ...(worldModel === undefined ? {} : { worldModel }) };
}

export interface EmbodiedIo {
  /** The run folder: config.json, the trainer's checkpoint (state.json, …), episodes.db, history.json, policy.onnx. */
  out: string;
  /** Continue the run in `out` as it was started (its config.json). */
  resume?: boolean;
  /** With `resume`: the run's new update count (to extend a finished run). */
  resumeUpdates?: number;
  onProgress?: PretrainOptions['onProgress'];
  onUpdate?: (row: RunRow, updates: number) => void;
  /** The starting policy's evaluation, before update 1. */
  onStart?: (start: EvalPoint) => void;
  /** What the calibration identified, and the clone's evaluation before and after it (without an evaluation: null). */
  onCalibrated?: (c: CalibrationReport) => void;
  /** Safety events of a robot YAML's robot. */
  log?: (e: { kind: string; detail: string }) => void;
}

export interface EmbodiedRun {
  config: EmbodiedRunConfig;
  rows: RunRow[];
  /** The starting policy's evaluation and the one whose policy was exported; absent without an evaluation (the last update's policy is exported). */
  start?: EvalPoint;
  kept?: EvalPoint;
  /** The calibration before the trainer (a resumed run: the one its start made), absent without one. */
  calibration?: CalibrationReport;
  policyPath: string;
}

export type { CalibrationReport };

export async function runEmbodied(given: EmbodiedRunConfig | null, io: EmbodiedIo): Promise<EmbodiedRun> {
  // ── config: the run's own, or the one it was started with ──
  const { out, resume = false } = io;
  const cfgFile = join(out, 'config.json');
  let a: EmbodiedRunConfig;
  if (resume) {
    if (!existsSync(cfgFile)) throw new Error(`--resume: ${out} has no config.json (not a run folder)`);
    // A run folder from before --imagine, --anchor-groups and --kl-coef: one imagined group per prompt, one anchor group per update, no KL penalty.
    a = { imagine: 1, anchorGroups: 1, klCoef: 0, ...(JSON.parse(readFileSync(cfgFile, 'utf8')) as Omit<EmbodiedRunConfig, 'imagine' | 'anchorGroups' | 'klCoef'> & Partial<EmbodiedRunConfig>), ...(io.resumeUpdates !== undefined ? { updates: io.resumeUpdates } : {}) };
  } else {
    if (!given) throw new Error('a new run needs its config');
    if (existsSync(join(out, 'state.json'))) throw new Error(`${out} already holds a run: pass --resume to continue it, or another --out`);
    // The calibration resolved before anything runs: a task that cannot calibrate fails here, not after pretraining.
    const calibrate = calibrateEpisodes(given, { evaluates: (given.evalEpisodes ?? 0) > 0, demonstrator: await hasRobustDemonstrator(given.task) });
    const worldModel = given.algo === 'wmrl' ? imaginationIn(given, calibrate) : null;
    a = { ...given, calibrate, lr: postTrainLr(given.lr, calibrate), ...(worldModel ? { worldModel, imagine: imagineMultiple(given, worldModel) } : {}) };
    const problem = a.algo === 'wmrl' ? anchorGroupsProblem(a) : null;
    if (problem) throw new Error(problem);
    mkdirSync(out, { recursive: true });
  }
  writeFileAtomic(cfgFile, [JSON.stringify(a, null, 1)]);
  const commandHistory = a.commandHistory ?? 0;

  // ── pretraining: behaviour cloning + DAgger, the world model (a resume loads the run's) ──
  const pre = await embodiedPretrain({ task: a.task, seed: a.seed, quick: a.quick, commandHistory, fit: !resume, ...(io.onProgress ? { onProgress: io.onProgress } : {}) });

  // ── the robot, the prompts, the evaluation ──
  const store = join(out, 'episodes.db');
  const horizon = await SimPrompts.horizon(a.task);
  const log = io.log ?? ((e: { kind: string; detail: string }) => console.error(`safety: ${e.kind}: ${e.detail}`));
  const onLost = (r: { meta: { robot: string } }, e: Error, left: number) => log({ kind: 'robot_lost', detail: `robot ${r.meta.robot} left the fleet (${e.message}); its episode runs again on one of the ${left} left` });
  const target = a.robot.startsWith('sim:')
    ? await simRobotTarget({ task: a.task, profile: a.profile, store, robots: a.robots, resetSeconds: a.resetSeconds, seed: a.seed, commandHistory, ...(a.fleet ? { fleet: a.fleet.length, onLost } : {}) })
    : await yamlRobotTarget({ config: a.fleet ?? a.robot, maxSteps: horizon, store, robots: a.robots, resetSeconds: a.resetSeconds, task: a.task, log, onLost });
  using prompts = await SimPrompts.create(a.task, 'nominal', { commandHistory });
  // Success is measured held out in the sim twin of a sim robot, not costing robot time; on a robot YAML's robot itself.
  const sim = a.robot.startsWith('sim:');
  const evalEpisodes = a.evalEpisodes ?? defaultEvalEpisodes(sim, a.quick);
  const evaluate = evalEpisodes === 0 ? undefined : sim ? heldOutEvaluation(a.task, a.profile, evalEpisodes, { commandHistory }) : robotEvaluation(target, evalEpisodes);

  // ── the trainer ──
  const common = { updates: a.updates, prompts: a.prompts, groupSize: a.group, evalEvery: Math.max(1, Math.floor(a.updates / 5)), promptSeed0: 1_000_000, seed: a.seed };
  const hooks = { onUpdate: (r: RunRow) => io.onUpdate?.(r, a.updates), ...(io.onStart ? { onStart: io.onStart } : {}) };
  const calFile = join(out, 'calibration.json');
  let calibration: CalibrationReport | undefined = existsSync(calFile) ? (JSON.parse(readFileSync(calFile, 'utf8')) as CalibrationReport) : undefined;
  let st: RunState;
  let pg: ClippedPolicyGradient | undefined;
  try {
    // ── calibration (once: a resumed run's trainer loads the policy it left) ──
    if ((a.calibrate ?? 0) > 0 && !resume) {
      calibration = await calibrateClone(a, pre, target, prompts, commandHistory, evaluate, io.onProgress);
      writeFileAtomic(calFile, [JSON.stringify(calibration, null, 1)]);
      io.onCalibrated?.(calibration);
    }
    // After calibration: the KL penalty's reference is the policy post-training starts from.
    pg = await ClippedPolicyGradient.create(pre.policy, postTrainPg(a.klCoef, a.lr));
    if (a.algo === 'standard') {
      st = await trainStandard({ config: common, policy: pre.policy, pg, target, prompts, evaluate, outDir: out, resume, hooks });
    } else {
      using sim = await imaginedSim(a.worldModel, a.task, calibration, commandHistory);
      st = await trainWmrl({
        config: { ...DEFAULT_WMRL, ...common, prompts: a.prompts * a.imagine!, corrector: trainerCorrector({ ...a, imagine: a.imagine! }), horizon: target.maxSteps },
        policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts, evaluate, outDir: out, resume, hooks, ...(sim ? { sim } : {}),
      });
    }
  } finally {
    await pg?.release();
    await target.close();
  }

  // ── the artifact: the trainer left the policy of the evaluation it keeps in pre.policy ──
  const { rows, start, kept } = st;
  const policyPath = join(out, 'policy.onnx');
  exportEmbodiedPolicy(pre.policy, target.robot.spec, policyPath, { policyVersion: `${a.algo}-${kept?.update ?? rows.length}`, runId: out, ...(kept ? { extra: { keptUpdate: String(kept.update), keptSuccess: String(kept.success) } } : {}) });
  return { config: a, rows, ...(start ? { start } : {}), ...(kept ? { kept } : {}), ...(calibration ? { calibration } : {}), policyPath };
}

/** The run's calibration (wmrl/calibrate.ts calibrateMeasured) of the pretrained clone, in place. */
export function calibrateClone(a: Pick<EmbodiedRunConfig, 'task' | 'seed' | 'quick' | 'calibrate'>, pre: Pretrained, target: RobotTarget, prompts: PromptSource, commandHistory: number, evaluate: ((p: GaussianPolicy) => Promise<{ success: number }>) | undefined, onProgress?: EmbodiedIo['onProgress']): Promise<CalibrationReport> {
  return calibrateMeasured({ task: a.task, commandHistory, policy: pre.policy, model: pre.model, target, prompts }, calibrationConfig({ task: a.task, episodes: a.calibrate!, quick: a.quick, seed: a.seed }), evaluate, onProgress);
}
