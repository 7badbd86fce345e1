// Actuation latency the model never saw: a robot applies an action some control steps after it is sent,
// a sim (and a model fitted to it) at once. The delay is identified from robot episodes with the model
// itself — the one whose one-step likelihood is best when fed the actions sent d steps earlier — and then
// applied by ModelEnv (`actionDelay`), by replays and by refits, so the model keeps learning applied-action
// dynamics.
import { TransitionBuffer, checkRows } from './dataset.js';
import type { EnsembleModel } from './ensemble.js';

/**
 * The actions applied at each step when those sent (Shape N x H x dAct, rollout-major) arrive `delay` steps
 * late: row t holds the action sent at t − delay, zeros for the first `delay` steps.
 */
export function delayActions(actions: Float32Array, n: number, dAct: number, delay: number): Float32Array {
  if (!(Number.isInteger(delay) && delay >= 0)) throw new Error(`delayActions: delay must be a non-negative integer, got ${delay}`);
  if (n < 1 || actions.length % (n * dAct) !== 0) throw new Error(`delayActions: ${actions.length} values are not N x H x dAct for N = ${n}, dAct = ${dAct}`);
  const H = actions.length / (n * dAct);
  const out = new Float32Array(actions.length);
  for (let i = 0; i < n; i++) {
    for (let t = delay; t < H; t++) out.set(actions.subarray((i * H + t - delay) * dAct, (i * H + t - delay + 1) * dAct), (i * H + t) * dAct);
  }
  return out;
}

/** A recorded episode: T + 1 observations, T sent actions, rewards and success flags. */
export interface DelayEpisode {
  states: Float32Array;
  actions: Float32Array;
  rewards: ArrayLike<number>;
  success: ArrayLike<number>;
}

export interface DelayEstimate {
  delay: number;
  /** The model's one-step NLL (per dynamics dim, EnsembleModel.dynamicsDims; normalized delta units) on the episodes for d = 0 … maxDelay. */
  nll: number[];
}

/**
 * The delay d in [0, maxDelay] under which the model best explains `episodes` (lowest one-step NLL over its dynamics
 * entries: a robot's reported command tail says what was sent, not when it acted, and the model's copy of it would
 * favour d = 0 whatever the robot's latency).
 */
export async function identifyDelay(model: EnsembleModel, episodes: readonly DelayEpisode[], maxDelay: number): Promise<DelayEstimate> {
  if (!(Number.isInteger(maxDelay) && maxDelay >= 0)) throw new Error(`identifyDelay: maxDelay must be a non-negative integer, got ${maxDelay}`);
  const usable = episodes.filter((e) => e.rewards.length > 0);
  if (usable.length === 0) throw new Error('identifyDelay: no episode with a step');
  const nll: number[] = [];
  if (model.dynamicsDims.length === 0) throw new Error('identifyDelay: the model predicts no dynamics entry (every entry is constant or a command)');
  for (let d = 0; d <= maxDelay; d++) {
    const buf = new TransitionBuffer(model.dObs, model.dAct, model.actionHistory);
    for (const e of usable) {
      const T = e.rewards.length;
      checkRows('identifyDelay: episode actions', e.actions, model.dAct, T);
      buf.addEpisode({ states: e.states, rewards: e.rewards, success: e.success, actions: delayActions(e.actions, 1, model.dAct, d) });
    }
    nll.push((await model.evaluate(buf.transitions())).dynamics.nll);
  }
  return { delay: nll.indexOf(Math.min(...nll)), nll };
}
