// Calibration, the step between pretraining and post-training: a few robot episodes of the clone identify the robot
// through the pretrained world model (its actuation delay, and for a context-conditioned model its mass, friction,
// damping and actuator gain: identifyRobot below), and a clone of the same shape, its weights drawn afresh, then learns
// the task again from the task's robust demonstrator in the sim set to what was identified, with DAgger there
// (policies/dagger.ts), and replaces the pretrained one's weights.
// System identification then sim-to-real: the robot pays for the identification's episodes, the sim for the rest.
// A policy reading the robot's last commands (sim/env.ts commandHistory) can follow the identified latency; one
// without them clones the identified sim all the same.
import { createHash } from 'node:crypto';
import { Rng } from '../nn/index.js';
import { cloneWithDagger } from '../policies/dagger.js';
import { evaluateOn } from '../policies/demos.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { makeEnv } from '../sim/index.js';
import { CONTEXT_NAMES, CONTEXT_PARAMS, NOMINAL, type HardwareProfile } from '../sim/profiles.js';
import { identifyContext } from '../worldmodel/context.js';
import { identifyDelay } from '../worldmodel/delay.js';
import type { EnsembleModel } from '../worldmodel/index.js';
import type { DelayEpisode } from '../worldmodel/delay.js';
import { actedEpisode, groupEpisodes, type PromptSource, type RobotTarget } from './embodied.js';
import type { Calibration, CalibrationMemo, CalibrationReport } from './calibration.js';

export type { Calibration, CalibrationMemo, CalibrationReport } from './calibration.js';

export interface CalibrateConfig {
  /** Robot episodes of the clone (its sampled actions, from the first prompts) the identification reads. */
  episodes: number;
  /** The largest actuation delay, in control steps, the identification considers. */
  maxDelay: number;
  /** Demonstration episodes in the identified sim, the DAgger rounds' included. */
  demos: number;
  daggerRounds: number;
  daggerEpisodes: number;
  /** Behaviour-cloning epochs of the first fit (a DAgger round's: half). */
  epochs: number;
  /** Sim episodes (start states apart from the demonstrations') that score each round's clone in the identified sim, for the record: the last round is kept. */
  selectEpisodes: number;
  /** Each cloning fit's step schedule (policies/bc.ts BcOptions.schedule). */
  schedule: 'constant' | 'cosine';
  /** The identification's pull toward the nominal sim (worldmodel/context.ts ContextSearch.prior; 0: none). */
  prior: number;
  /** The first prompt the robot episodes start from. */
  promptSeed0: number;
  seed: number;
}

export const DEFAULT_CALIBRATE: Omit<CalibrateConfig, 'promptSeed0' | 'seed'> = { episodes: 16, maxDelay: 5, prior: 0, demos: 3300, daggerRounds: 3, daggerEpisodes: 100, epochs: 40, selectEpisodes: 100, schedule: 'constant' };
/** A task's own cloning sizes: push's clone keeps gaining from more demonstrations, at half the epochs (docs/decisions.md, 2026-12-06: push). */
export const TASK_CALIBRATE: Readonly<Record<string, Partial<typeof DEFAULT_CALIBRATE>>> = { push: { demos: 6600, epochs: 20 } };
/** A smoke run's cloning sizes. */
export const QUICK_CALIBRATE = { demos: 12, daggerRounds: 1, daggerEpisodes: 4, epochs: 5, selectEpisodes: 4 };

/** A run's calibration config: `episodes` robot episodes from the prompts after a trainer's first 10,000, the task's cloning sizes of a full run, or a smoke run's. */
export const calibrationConfig = (o: { task: string; episodes: number; quick: boolean; seed: number; promptSeed0?: number }): CalibrateConfig =>
  ({ ...DEFAULT_CALIBRATE, ...(o.quick ? QUICK_CALIBRATE : TASK_CALIBRATE[o.task]), episodes: o.episodes, promptSeed0: o.promptSeed0 ?? 1_010_000, seed: o.seed });


/**
 * The robot's delay and context together, for a context-conditioned model: for each delay 0 … maxDelay the context
 * under it (identifyContext: the open-loop error of 10-step predictions), and the pair whose error is lowest; the
 * model's context is left at it. Searched jointly because a wrong delay is partly explained away by a context (a weak
 * actuator looks like a late one), and a one-step likelihood can favour the wrong delay where contact makes some
 * entries hard to predict. A model without a context: the delay of the best one-step likelihood (identifyDelay).
 */
export async function identifyRobot(model: EnsembleModel, episodes: readonly DelayEpisode[], maxDelay: number, seed: number, prior = 0): Promise<{ delay: number; loss: number[] }> {
  if (model.contextDim === 0) {
    const d = await identifyDelay(model, episodes, maxDelay);
    return { delay: d.delay, loss: d.nll };
  }
  const found: Array<{ context: Float32Array; loss: number }> = [];
  for (let d = 0; d <= maxDelay; d++) found.push(await identifyContext(model, episodes, { delay: d, seed, prior }));
  const loss = found.map((f) => f.loss);
  const delay = loss.indexOf(Math.min(...loss));
  model.setContext(found[delay]!.context);
  return { delay, loss };
}

/** The sim as identified: the nominal profile with the delay and, for a context-conditioned model, its context's scales. */
export function identifiedProfile(delay: number, model: EnsembleModel): { profile: HardwareProfile; scales: Calibration['scales'] } {
  const scales: Calibration['scales'] = {};
  if (model.contextDim > 0) {
    const names = model.config.contextNames ?? [];
    if (names.length !== CONTEXT_NAMES.length || names.some((n, i) => n !== CONTEXT_NAMES[i])) throw new Error(`calibrate: the world model's context (${names.join(', ')}) is not the sim profiles' (${CONTEXT_NAMES.join(', ')})`);
    CONTEXT_PARAMS.forEach((k, i) => (scales[k] = Math.exp(model.context[i]!)));
  }
  return { profile: { ...NOMINAL, ...scales, name: 'identified', description: 'the sim as the robot\'s episodes identified it', action_latency_steps: delay }, scales };
}

/** What calibration works on: the task, the robot's command history (its observation's last commands), the pretrained clone and world model, the robot, the prompts. */
export interface CalibrateRun {
  task: string;
  commandHistory: number;
  policy: GaussianPolicy;
  model: EnsembleModel;
  target: RobotTarget;
  prompts: PromptSource;
  /**
   * Where what the identification and the cloning computed is kept, by the robot episodes and the clone and world model
   * they started from: a run that records the same episodes from the same start (a benchmark's arms on one seed) reuses
   * it. The robot episodes run, and are charged, every time.
   */
  memo?: CalibrationMemo;
}

/** The memo's key: the config, the task, the episodes, the clone's and the world model's parameters and context. */
function memoKey(run: CalibrateRun, c: CalibrateConfig, acted: readonly DelayEpisode[]): string {
  const h = createHash('sha256').update(JSON.stringify({ c, task: run.task, commandHistory: run.commandHistory }));
  const add = (v: ArrayLike<number>) => {
    const x = Float32Array.from(v);
    h.update(`${x.length}:`).update(new Uint8Array(x.buffer));
  };
  for (const e of acted) [e.states, e.actions, e.rewards, e.success].forEach(add);
  for (const n of run.policy.paramNames()) add(run.policy.store.get(n).data);
  for (const n of run.model.store.names()) add(run.model.store.get(n).data);
  add(Float32Array.from(run.model.context));
  return h.digest('hex');
}

/**
 * Identifies the robot from `episodes` episodes of the policy on the target (prompts promptSeed0 on), sets the
 * model's context to what was identified, and clones the task again on the identified sim into a policy of the same
 * config with fresh weights, whose weights then replace the policy's (in place).
 */
export async function calibrate(run: CalibrateRun, c: CalibrateConfig, onProgress?: (what: string, done: number, total: number) => void): Promise<Calibration> {
  const { task, policy, model, target, prompts } = run;
  if (!(Number.isInteger(c.episodes) && c.episodes >= 1)) throw new Error(`calibrate: episodes must be a positive whole number, got ${c.episodes}`);
  if (!(Number.isInteger(c.selectEpisodes) && c.selectEpisodes >= 1)) throw new Error(`calibrate: selectEpisodes must be a positive whole number, got ${c.selectEpisodes}`);
  if (c.demos <= c.daggerRounds * c.daggerEpisodes) throw new Error(`calibrate: ${c.demos} demonstrations leave none before ${c.daggerRounds} DAgger rounds of ${c.daggerEpisodes} episodes`);
  // What would fail after the robot's episodes fails before them: the task's demonstrator, the policy's observation.
  const probe = await makeEnv({ task, profile: 'nominal', commandHistory: run.commandHistory });
  try {
    probe.demonstrator({ latencySteps: 0 });
    if (probe.observationSpace.state.shape[0] !== policy.obsDim) throw new Error(`calibrate: the policy reads ${policy.obsDim} observation entries, the ${task} sim with ${run.commandHistory} commands of history reports ${probe.observationSpace.state.shape[0]}`);
  } finally {
    probe.dispose();
  }
  const rng = new Rng(c.seed + 4_242);
  const { actLow, actHigh } = policy.config;
  const acted: DelayEpisode[] = [];
  for (let i = 0; i < c.episodes; i++) {
    const prompt = prompts.get(c.promptSeed0 + i);
    await groupEpisodes(target, policy, prompt.seed, 1, rng, 'calibrate', { ended: (ep) => { if (ep.steps > 0) acted.push(actedEpisode(ep, actLow, actHigh)); } });
    onProgress?.('calibration: robot episodes', i + 1, c.episodes);
  }
  if (acted.length === 0) throw new Error(`calibrate: none of the ${c.episodes} robot episodes took a step; nothing to identify the robot from`);
  const key = run.memo ? memoKey(run, c, acted) : '';
  const kept = run.memo?.get(key);
  if (kept) {
    policy.paramNames().forEach((n, i) => policy.store.set(n, kept.policy[i]!));
    if (model.contextDim > 0) model.setContext(kept.context);
    return kept.calibration;
  }
  const { delay } = await identifyRobot(model, acted, c.maxDelay, c.seed, c.prior);
  const { profile, scales } = identifiedProfile(delay, model);
  const env = await makeEnv({ task, profile, commandHistory: run.commandHistory });
  try {
    // Demonstration start states from block 7 of the train split's seeds (below a run's prompts, apart from pretraining's), the rounds' scoring states right after them.
    const block7 = (i: number) => 700_000 + ((c.seed * 1_000 + i) % 100_000);
    const seeds = Array.from({ length: c.demos }, (_, i) => block7(i));
    const scoring = Array.from({ length: c.selectEpisodes }, (_, i) => block7(c.demos + i));
    const score = async (p: GaussianPolicy) => (await evaluateOn(env, p, scoring)).success;
    // Fresh weights, as the probes that chose this cloning drew them (docs/decisions.md, 2026-12-07).
    const fresh = new GaussianPolicy({ ...policy.config, seed: c.seed + 5_151 });
    // The last round: the identified sim's round scores did not foretell which round does best on the robot (docs/decisions.md, 2026-12-07).
    const cloned = await cloneWithDagger(() => fresh, env, delay, seeds, c.daggerRounds, c.daggerEpisodes, c.epochs, (round) => onProgress?.('calibration: cloning', round + 1, c.daggerRounds + 1), score, { keep: 'last', schedule: c.schedule }).finally(() => fresh.release());
    policy.copyFrom(cloned.policy);
    const calibration: Calibration = { delay, scales, profile, robotEpisodes: c.episodes, demoSuccess: cloned.demoSuccess, cloneLoss: cloned.loss, roundSuccess: cloned.scores, round: cloned.chosen };
    run.memo?.set(key, { calibration, policy: policy.paramNames().map((n) => Float32Array.from(policy.store.get(n).data)), context: Float32Array.from(model.context) });
    return calibration;
  } finally {
    env.dispose();
  }
}

/**
 * `calibrate`, measured: with `evaluate`, the clone is measured before and after, and put back where it measured better
 * before — calibration must not hand the trainer a worse start.
 */
export async function calibrateMeasured(run: CalibrateRun, c: CalibrateConfig, evaluate?: (p: GaussianPolicy) => Promise<{ success: number }>, onProgress?: (what: string, done: number, total: number) => void): Promise<CalibrationReport> {
  const { policy } = run;
  const names = policy.paramNames();
  const saved = names.map((n) => Float32Array.from(policy.store.get(n).data));
  const before = evaluate ? (await evaluate(policy)).success : null;
  const { profile: _profile, ...cal } = await calibrate(run, c, onProgress);
  const after = evaluate ? (await evaluate(policy)).success : null;
  const kept = before === null || after === null || after >= before;
  if (!kept) names.forEach((n, i) => policy.store.set(n, saved[i]!));
  return { ...cal, before, after, kept };
}
