// Scorers for the Corrector: one scalar per rollout (and its variance across ensemble members) from the
// model's dense per-step signal, for imagined rollouts and for the open-loop replay of a real episode.
import * as nn from '../nn/index.js';
import { checkRows } from './dataset.js';
import type { EnsembleModel } from './ensemble.js';
import { delayActions } from './delay.js';
import { ModelEnv, type GraphPolicy } from './model-env.js';

/**
 * How a rollout's dense progress collapses to one score:
 * - 'last-minus-first' (default): mean of the last k steps minus mean of the first k: credits getting
 *   there and staying there;
 * - 'return': the sum over the rollout, the model's estimate of the episode's return: the same quantity
 *   a robot episode's return measures, so it ranks a group's rollouts as the robot would when the dense
 *   signal is the task's reward;
 * - 'peak': the best step minus the mean of the first k. Exploitable: a policy that drives the model into
 *   one spuriously high prediction (a fling through the goal, a state the model never saw) scores as well
 *   as one that holds the goal, and the max of noisy predictions is biased upward. The sparse real anchor
 *   catches it; prefer the default.
 */
export type CollapseMode = 'last-minus-first' | 'peak' | 'return';

export interface ScoreOptions {
  /** Steps averaged at each end (default 5, at most H). */
  k?: number;
  mode?: CollapseMode;
}

/** Success-based scoring: the predicted success probability at the last step, or its maximum over the rollout. */
export type SuccessMode = 'final' | 'max';

function rolloutsOf(what: string, a: Float32Array, horizon: number): number {
  if (!(Number.isInteger(horizon) && horizon > 0)) throw new Error(`${what}: horizon must be a positive integer, got ${horizon}`);
  return checkRows(what, a, horizon);
}

/** One score per rollout: progress Shape N x H → Shape N. */
export function scoreImagined(progress: Float32Array, horizon: number, opts: ScoreOptions = {}): Float32Array {
  const n = rolloutsOf('scoreImagined: progress', progress, horizon);
  const k = opts.k ?? Math.min(5, horizon);
  const mode = opts.mode ?? 'last-minus-first';
  if (!(Number.isInteger(k) && k >= 1 && k <= horizon)) throw new Error(`scoreImagined: k must be an integer in [1, H = ${horizon}], got ${k}`);
  if (mode !== 'last-minus-first' && mode !== 'peak' && mode !== 'return') throw new Error(`scoreImagined: unknown mode '${mode as string}' (last-minus-first, peak, return)`);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const row = progress.subarray(i * horizon, (i + 1) * horizon);
    if (mode === 'return') {
      out[i] = row.reduce((a, b) => a + b, 0);
      continue;
    }
    let first = 0;
    for (let t = 0; t < k; t++) first += row[t]! / k;
    let end: number;
    if (mode === 'peak') end = row.reduce((a, b) => Math.max(a, b), -Infinity);
    else {
      end = 0;
      for (let t = horizon - k; t < horizon; t++) end += row[t]! / k;
    }
    out[i] = end - first;
  }
  return out;
}

/**
 * Scores per member and their spread: memberProgress Shape E x N x H → score (the members' mean) and
 * variance (population variance across members), each Shape N. Two sources fit:
 * - E trajectories per rollout, one per member (`replayScore` does this): the variance includes how the
 *   members' dynamics errors compound;
 * - every member's reward along one shared trajectory (`memberReward` of a step or of `imagine`): free,
 *   but blind to dynamics disagreement, so it underestimates the spread of long rollouts.
 */
export function scoreWithVariance(memberProgress: Float32Array, members: number, horizon: number, opts: ScoreOptions = {}): { score: Float32Array; variance: Float32Array } {
  if (!(Number.isInteger(members) && members > 0)) throw new Error(`scoreWithVariance: members must be a positive integer, got ${members}`);
  const rows = rolloutsOf('scoreWithVariance: memberProgress', memberProgress, horizon);
  if (rows % members !== 0) throw new Error(`scoreWithVariance: ${rows} rows are not E x N for E = ${members}`);
  const n = rows / members;
  const per = scoreImagined(memberProgress, horizon, opts); // [E x N]
  const score = new Float32Array(n), variance = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let m = 0;
    for (let e = 0; e < members; e++) m += per[e * n + i]! / members;
    let v = 0;
    for (let e = 0; e < members; e++) v += (per[e * n + i]! - m) ** 2 / members;
    score[i] = m;
    variance[i] = v;
  }
  return { score, variance };
}

/** Success-based score per rollout: successProb Shape N x H → Shape N. */
export function successScore(successProb: Float32Array, horizon: number, mode: SuccessMode = 'final'): Float32Array {
  const n = rolloutsOf('successScore: successProb', successProb, horizon);
  if (mode !== 'final' && mode !== 'max') throw new Error(`successScore: unknown mode '${mode as string}' (final, max)`);
  return Float32Array.from({ length: n }, (_, i) => {
    const row = successProb.subarray(i * horizon, (i + 1) * horizon);
    return mode === 'final' ? row[horizon - 1]! : row.reduce((a, b) => Math.max(a, b), 0);
  });
}

export interface ReplayScore {
  /** Shape N: members' mean of the collapsed progress. */
  score: Float32Array;
  /** Shape N: variance of the score across members, each member replaying on its own. */
  variance: Float32Array;
  /** Shape N: `successScore` of the members' mean success probability. */
  success: Float32Array;
  /** Shape E x N x H: each member's predicted progress along its own replay. */
  memberProgress: Float32Array;
  /** Shape E x N x H. */
  memberSuccessProb: Float32Array;
}

/** Replays the fed noise as the action: an open-loop "policy" for `imagine`. */
function openLoop(dAct: number): GraphPolicy {
  return { store: new nn.ParamStore(0), noiseDim: dAct, build: (_obs, noise) => ({ action: noise! }) };
}

/**
 * The world model's score of a recorded episode, for an anchor pair: its actions (Shape N x H x dAct) replayed
 * open loop from its recorded start state (Shape N x dObs) through every member (TS∞, member means, no
 * sampling), scored as `scoreWithVariance`. Both scores of the pair then describe the same episode.
 */
export async function replayScore(model: EnsembleModel, startObs: Float32Array, actions: Float32Array, opts: ScoreOptions & { success?: SuccessMode; stepsPerRun?: number; actionDelay?: number } = {}): Promise<ReplayScore> {
  const { dObs, dAct, members: E } = model;
  const n = checkRows('replayScore: startObs', startObs, dObs);
  if (actions.length % (n * dAct) !== 0 || actions.length === 0) throw new Error(`replayScore: ${actions.length} action values are not N x H x dAct for N = ${n}, dAct = ${dAct}`);
  const H = actions.length / (n * dAct);
  checkRows('replayScore: actions', actions, dAct, n * H);
  // The actions as the actuators got them (see ModelEnvOptions.actionDelay).
  if (opts.actionDelay) actions = delayActions(actions, n, dAct, opts.actionDelay);
  // Rollout e·N + i is episode i under member e.
  const start = new Float32Array(E * n * dObs);
  const acts = new Float32Array(E * n * H * dAct);
  for (let e = 0; e < E; e++) {
    start.set(startObs, e * n * dObs);
    acts.set(actions, e * n * H * dAct);
  }
  let r = replayers.get(model);
  if (!r) replayers.set(model, (r = { env: new ModelEnv(model, { members: 'fixed' }), policy: openLoop(dAct) }));
  const members = Int32Array.from({ length: E * n }, (_, row) => Math.floor(row / n));
  const im = await r.env.imagine(start, r.policy, H, { policyNoise: acts, members, stepsPerRun: opts.stepsPerRun });
  const { score, variance } = scoreWithVariance(im.reward, E, H, opts);
  const meanSuccess = new Float32Array(n * H);
  for (let e = 0; e < E; e++) for (let j = 0; j < n * H; j++) meanSuccess[j]! += im.successProb[e * n * H + j]! / E;
  return { score, variance, success: successScore(meanSuccess, H, opts.success ?? 'final'), memberProgress: im.reward, memberSuccessProb: im.successProb };
}

/** Mean of `row[from, to)`. */
const meanOf = (row: Float32Array, from: number, to: number) => {
  let s = 0;
  for (let t = from; t < to; t++) s += row[t]!;
  return s / Math.max(to - from, 1);
};

/**
 * A rollout's dense signal collapsed to one score over its first T steps, as a trainer scores a rollout that ends at
 * its predicted success: its sum ('return'), or the mean of the last k minus the mean of the first k (k = min(K, T)).
 */
export function collapse(row: Float32Array, T: number, mode: 'return' | 'last-minus-first', K: number): number {
  if (mode === 'return') return meanOf(row, 0, T) * T;
  const k = Math.min(K, T);
  return meanOf(row, T - k, T) - meanOf(row, 0, k);
}

/**
 * The world model's score of a recorded episode as imagination scores a rollout: its commands (Shape T x dAct, as the
 * policy acted them) replayed open loop from its start state, fed `actionDelay` steps late, each member's replay
 * ending where its predicted success first passes `successThreshold`, collapsed as `collapse`, the members' mean.
 */
export async function replayToSuccess(model: EnsembleModel, startObs: Float32Array, actions: Float32Array, o: { mode: 'return' | 'last-minus-first'; k: number; actionDelay: number; successThreshold: number }): Promise<number> {
  const T = actions.length / model.dAct, E = model.members;
  const r = await replayScore(model, startObs, actions, { k: Math.min(o.k, T), mode: o.mode, actionDelay: o.actionDelay });
  let s = 0;
  for (let e = 0; e < E; e++) {
    const p = r.memberSuccessProb.subarray(e * T, (e + 1) * T), hit = p.findIndex((x) => x > o.successThreshold);
    s += collapse(r.memberProgress.subarray(e * T, (e + 1) * T), hit < 0 ? T : hit + 1, o.mode, o.k) / E;
  }
  return s;
}

// One replay env per model, so its compiled graphs are reused across calls (recompiled when the model changes).
const replayers = new WeakMap<EnsembleModel, { env: ModelEnv; policy: GraphPolicy }>();
