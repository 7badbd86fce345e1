// Calibration, the step between pretraining and post-training: a few robot episodes of the clone identify the robot
// (its actuation delay, mass, friction, damping and actuator gain), either by the sim replaying them (identifyProfile
// below) or through the pretrained world model (identifyRobot), and a clone of the same shape, its weights drawn
// afresh, then learns the task again from the task's robust demonstrator in the sim set to what was identified, with
// DAgger there (policies/dagger.ts), and replaces the pretrained one's weights.
// System identification then sim-to-real: the robot pays for the identification's episodes, the sim for the rest.
// A policy reading the robot's last commands (sim/env.ts commandHistory) can follow the identified latency; one
// without them clones the identified sim all the same.
import { createHash } from 'node:crypto';
import { layoutDim } from '../common/layout.js';
import { Rng } from '../nn/index.js';
import { cloneWithDagger } from '../policies/dagger.js';
import { evaluateOn } from '../policies/demos.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { MjEnv, loadTaskModel } from '../sim/env.js';
import { makeEnv } from '../sim/index.js';
import { CONTEXT_NAMES, CONTEXT_PARAMS, NOMINAL, profileContext, type HardwareProfile } from '../sim/profiles.js';
import { taskDef } from '../sim/registry.js';
import type { TaskDef } from '../sim/task.js';
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
  /**
   * What scores a candidate delay and scales: 'sim', the sim replaying the robot's commands from its reported states
   * (identifyProfile below); 'world-model', the world model's open-loop error under a context (identifyRobot).
   */
  identify: 'sim' | 'world-model';
  /** The first prompt the robot episodes start from. */
  promptSeed0: number;
  seed: number;
}

export const DEFAULT_CALIBRATE: Omit<CalibrateConfig, 'promptSeed0' | 'seed'> = { episodes: 16, maxDelay: 5, prior: 0, identify: 'world-model', demos: 3300, daggerRounds: 3, daggerEpisodes: 100, epochs: 40, selectEpisodes: 100, schedule: 'constant' };
/**
 * A task's own settings: push's clone keeps gaining from more demonstrations, at half the epochs (docs/decisions.md,
 * 2026-12-06: push), and its robot is identified in the sim, where the world model missed its delay and friction
 * (2026-12-07: push's identification chosen).
 */
export const TASK_CALIBRATE: Readonly<Record<string, Partial<typeof DEFAULT_CALIBRATE>>> = { push: { demos: 6600, epochs: 20, identify: 'sim' } };
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

async function identifyWithModel(model: EnsembleModel, acted: readonly DelayEpisode[], c: CalibrateConfig) {
  const { delay } = await identifyRobot(model, acted, c.maxDelay, c.seed, c.prior);
  return { delay, ...identifiedProfile(delay, model) };
}

/** The sim's own identification (identifyProfile); a context-conditioned model is then set to the scales found. */
async function identifyInSim(run: CalibrateRun, acted: readonly DelayEpisode[], c: CalibrateConfig) {
  const found = await identifyProfile(run.task, acted, { maxDelay: c.maxDelay, commandHistory: run.commandHistory, seed: c.seed });
  const profile: HardwareProfile = { ...NOMINAL, ...found.scales, name: 'identified', description: 'the sim as the robot\'s episodes identified it', action_latency_steps: found.delay };
  if (run.model.contextDim > 0) run.model.setContext(profileContext(profile));
  return { delay: found.delay, profile, scales: found.scales };
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
  const { delay, profile, scales } = c.identify === 'sim' ? await identifyInSim(run, acted, c) : await identifyWithModel(model, acted, c);
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

// ---- Identification in the sim itself: which profile (actuation delay and the physical scales of CONTEXT_PARAMS)
// makes the sim repeat what a robot recorded. Each candidate replays the robot's commands in short segments, each
// started from the state the robot reported there, and is scored by how far the sim's next states land from the
// recorded ones over the task's dynamics entries (not the pads or goals it holds, not what it computes from others,
// not the command tail). Per delay a cross-entropy search over the log scales, the two best delays then searched on
// locally (Nelder–Mead); the delay and scales of the lowest error win. What the observation does not show (an
// object's turn and spin) starts each segment at the keyframe. It lives in this file because the calibration cache
// hashes this file's code.

/** One robot episode: `states` (T + 1) x D as the robot reported them, `actions` T x A the commands it was sent (-1..1). */
export interface RecordedEpisode {
  states: Float32Array;
  actions: Float32Array;
}

export interface ProfileSearch {
  /** The largest actuation delay considered, in control steps (each of 0 … maxDelay is searched). */
  maxDelay: number;
  /** Control steps per replayed segment (default 10). */
  segment?: number;
  /** Cross-entropy iterations (default 6), candidates per iteration (default 24) and elites (default 6). */
  iterations?: number;
  population?: number;
  elite?: number;
  /** Replays of a local (Nelder–Mead) search from each of the two best delays' best candidates after the cross-entropy pass (default 150). */
  refine?: number;
  /** Each scale is searched within [1/spread, spread] of the nominal sim (default 3). */
  spread?: number;
  /** The robot's observation ends with its last this many commands (sim/env.ts EnvOptions.commandHistory). */
  commandHistory?: number;
  seed?: number;
}

export interface IdentifiedProfile {
  delay: number;
  /** Each CONTEXT_PARAMS scale, against the nominal sim. */
  scales: Record<(typeof CONTEXT_PARAMS)[number], number>;
  /** The lowest replay error found under each delay 0 … maxDelay (mean squared, in recorded standard deviations). */
  loss: number[];
  /** Candidate profiles replayed. */
  evaluations: number;
}

/** The replay error of one candidate: `delay` steps of actuation delay, `logScales` the log of each CONTEXT_PARAMS scale. */
export type ReplayError = (delay: number, logScales: readonly number[]) => Promise<number>;

/**
 * The replay error of candidate profiles, of delays up to `maxDelay`, on `episodes` of `task`: segments of `segment`
 * steps from recorded states maxDelay, maxDelay + segment, …, each fed the commands the robot was sent, the delay
 * applied by the replay (a command sent at t acts at t + delay; no segment needs one from before the episode).
 */
export async function replayError(task: string | TaskDef, episodes: readonly RecordedEpisode[], o: { maxDelay: number; segment?: number; commandHistory?: number }): Promise<ReplayError> {
  const def = typeof task === 'string' ? taskDef(task) : task;
  const K = o.segment ?? 10, history = o.commandHistory ?? 0, first = o.maxDelay;
  if (!(Number.isInteger(K) && K >= 1)) throw new Error(`identify: segment must be a positive whole number of steps, got ${K}`);
  if (!(Number.isInteger(first) && first >= 0)) throw new Error(`identify: maxDelay must be a whole number of steps, got ${first}`);
  // The layout, derived entries and a probe of the nominal sim: what is compared, and how far entries spread.
  const probe = new MjEnv(def, await loadTaskModel(def, NOMINAL), NOMINAL, { commandHistory: history });
  const bound = def.bind(probe.model);
  const nTask = layoutDim(bound.layout), D = layoutDim(probe.layout), A = probe.actionSpace.shape[0]!;
  bound.dispose?.();
  const skip = new Set<number>([...(probe.derived?.held ?? []), ...(probe.derived?.computed ?? []).map((c) => c.entry)]);
  probe.dispose();
  const dims = Array.from({ length: nTask }, (_, i) => i).filter((i) => !skip.has(i));
  const usable = episodes.map((e, i) => {
    const T = e.actions.length / A;
    if (!Number.isInteger(T)) throw new Error(`identify: episode ${i} has ${e.actions.length} action values, not a multiple of the ${A} actuators`);
    if (e.states.length !== (T + 1) * D) throw new Error(`identify: episode ${i} has ${e.states.length} state values, expected ${T + 1} x ${D} for its ${T} commands`);
    return { ...e, T };
  }).filter((e) => e.T >= first + K);
  if (usable.length === 0) throw new Error(`identify: no episode has the ${first + K} steps of one segment after the longest delay`);
  // Each entry's error in units of its spread over the recorded states (floored: an entry that never moved).
  const sd = dims.map((d) => {
    let m = 0, n = 0;
    for (const e of usable) for (let t = 0; t <= e.T; t++, n++) m += e.states[t * D + d]!;
    m /= n;
    let v = 0;
    for (const e of usable) for (let t = 0; t <= e.T; t++) v += (e.states[t * D + d]! - m) ** 2;
    return Math.max(Math.sqrt(v / n), 1e-3);
  });

  return async (delay, logScales) => {
    if (!(Number.isInteger(delay) && delay >= 0 && delay <= first)) throw new Error(`identify: delay ${delay} is outside 0 … ${first}`);
    const profile: HardwareProfile = { ...NOMINAL, name: 'candidate', description: 'a profile under identification', action_latency_steps: 0, obs_noise_std: 0, control_jitter_substeps: 0 };
    CONTEXT_PARAMS.forEach((k, i) => (profile[k] = Math.exp(logScales[i]!)));
    const env = new MjEnv(def, await loadTaskModel(def, profile), profile, { commandHistory: history });
    const task = def.bind(env.model);
    try {
      // Once, for the env's own state (its command tail); each segment then sets the sim's data alone.
      env.reset(0);
      const m = env.model.raw;
      const joints = env.layout.joints.map((j) => env.model.id('mjOBJ_JOINT', j.name));
      const qAdr = joints.map((j) => (m.jnt_qposadr as Int32Array)[j]!), vAdr = joints.map((j) => (m.jnt_dofadr as Int32Array)[j]!);
      const nj = joints.length;
      let err = 0, n = 0;
      for (const e of usable) {
        for (let t0 = first; t0 + K <= e.T; t0 += K) {
          const s0 = e.states.subarray(t0 * D, (t0 + 1) * D);
          const q = env.data.raw.qpos as Float64Array, qd = env.data.raw.qvel as Float64Array;
          env.data.reset(task.keyframe);
          for (let j = 0; j < nj; j++) {
            q[qAdr[j]!] = s0[j]!;
            qd[vAdr[j]!] = s0[nj + j]!;
          }
          task.pose?.(env.data, s0);
          env.data.forward();
          for (let t = t0; t < t0 + K; t++) {
            const sent = t - delay;
            const r = env.step(e.actions.subarray(sent * A, (sent + 1) * A));
            const rec = e.states.subarray((t + 1) * D, (t + 2) * D);
            for (let k = 0; k < dims.length; k++) err += ((r.obs.state[dims[k]!]! - rec[dims[k]!]!) / sd[k]!) ** 2;
            n += dims.length;
          }
        }
      }
      return err / n;
    } finally {
      task.dispose?.();
      env.dispose();
    }
  };
}

/** The profile under which the sim best repeats `episodes` (module comment): each delay's best scales, then the best delay. */
export async function identifyProfile(task: string | TaskDef, episodes: readonly RecordedEpisode[], s: ProfileSearch): Promise<IdentifiedProfile> {
  const iterations = s.iterations ?? 6, population = s.population ?? 24, elite = s.elite ?? 6, spread = s.spread ?? 3, refine = s.refine ?? 150;
  if (!(Number.isInteger(s.maxDelay) && s.maxDelay >= 0)) throw new Error(`identify: maxDelay must be a whole number of steps, got ${s.maxDelay}`);
  if (!(Number.isInteger(refine) && refine >= 0)) throw new Error(`identify: refine must be a whole number of replays, got ${refine}`);
  if (!(Number.isInteger(iterations) && iterations >= 1 && Number.isInteger(population) && population >= 2 && Number.isInteger(elite) && elite >= 1 && elite <= population)) {
    throw new Error(`identify: need iterations ≥ 1, population ≥ 2 and 1 ≤ elite ≤ population (got ${iterations}, ${population}, ${elite})`);
  }
  if (!(Number.isFinite(spread) && spread > 1)) throw new Error(`identify: spread must be a number > 1, got ${spread}`);
  const error = await replayError(task, episodes, s);
  const hi = Math.log(spread), lo = -hi, c = CONTEXT_PARAMS.length;
  const clamp = (v: number) => Math.min(hi, Math.max(lo, v));
  const rng = new Rng(s.seed ?? 0);
  let evaluations = 0;
  // Each delay's search: its best candidate and the Gaussian it samples from, with a full covariance: mass, damping
  // and gain trade off along a valley no axis follows.
  const floor = ((hi - lo) / 100) ** 2;
  const searches = Array.from({ length: s.maxDelay + 1 }, () => ({ best: { x: new Array<number>(c).fill(0), loss: Infinity }, mean: new Array<number>(c).fill(0), cov: diagonal(c, ((hi - lo) / 4) ** 2) }));
  const run = async (d: number, iters: number) => {
    const q = searches[d]!;
    if (q.best.loss === Infinity) {
      q.best = { x: q.best.x, loss: await error(d, q.best.x) };
      evaluations++;
    }
    for (let it = 0; it < iters; it++) {
      const L = cholesky(q.cov);
      const scored = [q.best];
      for (let k = 0; k < population; k++) {
        const z = Array.from({ length: c }, () => rng.normal());
        const x = q.mean.map((m, i) => clamp(m + L[i]!.reduce((a, l, j) => a + l * z[j]!, 0)));
        scored.push({ x, loss: await error(d, x) });
        evaluations++;
      }
      scored.sort((a, b) => a.loss - b.loss);
      q.best = scored[0]!;
      const top = scored.slice(0, elite);
      q.mean = Array.from({ length: c }, (_, i) => top.reduce((a, p) => a + p.x[i]!, 0) / top.length);
      // The elites' spread about their mean; a floor on the diagonal keeps the search from collapsing before its last iteration.
      q.cov = Array.from({ length: c }, (_, i) => Array.from({ length: c }, (_, j) => top.reduce((a, p) => a + (p.x[i]! - q.mean[i]!) * (p.x[j]! - q.mean[j]!), 0) / top.length + (i === j ? floor : 0)));
    }
  };
  for (let d = 0; d <= s.maxDelay; d++) await run(d, iterations);
  // The two delays that explain the episodes best search on locally: the cross-entropy search narrows before it
  // reaches its delay's minimum (and so can miss the right delay), while the error is smooth in the scales near it.
  const order = searches.map((q, d) => [q.best.loss, d] as const).sort((a, b) => a[0] - b[0]);
  for (const [, d] of order.slice(0, 2)) {
    const q = searches[d]!;
    const local = await nelderMead((x) => error(d, x.map(clamp)), q.best, 0.1, refine);
    evaluations += local.evaluations;
    q.best = { x: local.x.map(clamp), loss: local.loss };
  }
  const found = searches.map((q) => q.best);
  const loss = found.map((f) => f.loss);
  const delay = loss.indexOf(Math.min(...loss));
  const x = found[delay]!.x;
  const scales = Object.fromEntries(CONTEXT_PARAMS.map((k, i) => [k, Math.exp(x[i]!)])) as IdentifiedProfile['scales'];
  return { delay, scales, loss, evaluations };
}

const diagonal = (n: number, v: number) => Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => (i === j ? v : 0)));

/** The lower-triangular L with L Lᵀ = a, for a symmetric positive-definite a. */
function cholesky(a: readonly (readonly number[])[]): number[][] {
  const n = a.length, L = diagonal(n, 0);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j <= i; j++) {
      let sum = a[i]![j]!;
      for (let k = 0; k < j; k++) sum -= L[i]![k]! * L[j]![k]!;
      if (i === j) {
        if (!(sum > 0)) throw new Error(`identify: the search's covariance is not positive definite (pivot ${sum} at ${i})`);
        L[i]![i] = Math.sqrt(sum);
      } else L[i]![j] = sum / L[j]![j]!;
    }
  }
  return L;
}

/**
 * Nelder–Mead from `start` (its error already known), the first simplex `step` away along each axis, until `budget`
 * evaluations are spent or the simplex's errors agree to 1e-6 of the best; the best point found.
 */
async function nelderMead(f: (x: number[]) => Promise<number>, start: { x: readonly number[]; loss: number }, step: number, budget: number): Promise<{ x: number[]; loss: number; evaluations: number }> {
  const n = start.x.length;
  let evaluations = 0;
  const at = async (x: number[]) => {
    evaluations++;
    return { x, loss: await f(x) };
  };
  const simplex = [{ x: [...start.x], loss: start.loss }];
  for (let i = 0; i < n && evaluations < budget; i++) simplex.push(await at(start.x.map((v, j) => (j === i ? v + step : v))));
  const toward = (from: readonly number[], to: readonly number[], t: number) => from.map((v, j) => v + t * (to[j]! - v));
  while (simplex.length === n + 1 && evaluations < budget) {
    simplex.sort((a, b) => a.loss - b.loss);
    const best = simplex[0]!, worst = simplex[n]!, second = simplex[n - 1]!;
    if (worst.loss - best.loss <= 1e-6 * Math.max(best.loss, 1e-12)) break;
    const centroid = Array.from({ length: n }, (_, j) => simplex.slice(0, n).reduce((a, p) => a + p.x[j]!, 0) / n);
    const reflected = await at(toward(centroid, worst.x, -1));
    if (reflected.loss < best.loss) {
      const expanded = evaluations < budget ? await at(toward(centroid, worst.x, -2)) : reflected;
      simplex[n] = expanded.loss < reflected.loss ? expanded : reflected;
    } else if (reflected.loss < second.loss) {
      simplex[n] = reflected;
    } else {
      const contracted = evaluations < budget ? await at(toward(centroid, reflected.loss < worst.loss ? reflected.x : worst.x, 0.5)) : reflected;
      if (contracted.loss < Math.min(worst.loss, reflected.loss)) simplex[n] = contracted;
      else {
        for (let i = 1; i <= n && evaluations < budget; i++) simplex[i] = await at(toward(best.x, simplex[i]!.x, 0.5));
      }
    }
  }
  const best = simplex.reduce((a, p) => (p.loss < a.loss ? p : a));
  return { x: best.x, loss: best.loss, evaluations };
}
