// Refitting a world model on a robot's recorded episodes: the rows a refit fits (the robot's episodes, the sim
// data mixed in at a weight), the refit itself, and the model's dense score of what really happened (relabelScore).
import { TransitionBuffer, type Transitions } from './dataset.js';
import { delayActions } from './delay.js';
import type { EnsembleModel } from './ensemble.js';
import { fitRollout } from './multistep.js';

/** A recorded episode as the model takes it: T+1 states, T commands, T rewards, T success flags. */
export interface RobotRowsEpisode {
  states: Float32Array;
  actions: Float32Array;
  rewards: Float32Array;
  success: Float32Array;
}

/** What a robot's recorded rewards are: the task's dense reward, or only its success (a robot with no dense measurement). */
export type RobotRewards = 'dense' | 'success';

type ModelShape = Pick<EnsembleModel, 'dObs' | 'dAct' | 'actionHistory' | 'contextDim' | 'context'>;

/**
 * The model's rows of the robot's episodes: each step's reported state, the command applied then (sent `actionDelay`
 * control steps before; zeros before the first, as imagination starts its commands in flight) with the history before
 * it, the model's current context when it has one; `rewardKnown` whether the rewards teach the reward head.
 */
function robotRows(who: string, episodes: readonly RobotRowsEpisode[], model: ModelShape, actionDelay: number, rewardKnown: boolean): TransitionBuffer {
  const d = actionDelay;
  if (!(Number.isInteger(d) && d >= 0)) throw new Error(`${who}: actionDelay must be a whole number of control steps, got ${actionDelay}`);
  const buf = new TransitionBuffer(model.dObs, model.dAct, model.actionHistory, model.contextDim);
  const ctx = model.contextDim > 0 ? model.context : undefined;
  for (const e of episodes) {
    buf.addEpisode({ states: e.states, actions: d > 0 ? delayActions(e.actions, 1, model.dAct, d) : e.actions, rewards: e.rewards, success: e.success, weight: 1, rewardKnown, ...(ctx ? { context: ctx } : {}) });
  }
  return buf;
}

/**
 * What a refit fits: the robot's recorded episodes, under the model's current (identified) context when it is
 * context-conditioned, their rewards teaching the reward head only when the robot's rewards are dense — plus the sim
 * data the model started from at `simWeight` per transition (0: left out). An episode records the commands the robot
 * reports as sent; the model's dynamics take the action applied at each step, which on a robot with actuation delay
 * `actionDelay` (control steps; default 0) is the command sent that many steps before, and nothing (zeros, as
 * imagination starts its commands in flight) before the first.
 */
export function refitTransitions(
  episodes: readonly RobotRowsEpisode[],
  model: ModelShape,
  o: { robotRewards: RobotRewards; simData: Transitions; simWeight: number; actionDelay?: number },
): Transitions {
  const buf = robotRows('wmrl refit', episodes, model, o.actionDelay ?? 0, o.robotRewards === 'dense');
  if (o.simWeight > 0) buf.add({ ...o.simData, weight: (o.simData.weight ?? new Float32Array(o.simData.reward.length).fill(1)).map((w) => w * o.simWeight) });
  return buf.transitions();
}

export interface RefitOptions {
  epochs: number;
  /**
   * Open-loop rollout steps the dynamics refit through (worldmodel/multistep.ts), `rolloutWindows` windows per member
   * and pass; 0: the whole model refits one step. A one-step refit undoes a multi-step fit, so imagination drifts again.
   */
  rolloutSteps: number;
  rolloutWindows: number;
  seed: number;
}

/** Refits `model` on `data`: the reward and success heads one step, the dynamics through rollouts of `rolloutSteps` (or one step at 0). */
export async function refitModel(model: EnsembleModel, data: Transitions, o: RefitOptions): Promise<void> {
  const rollout = o.rolloutSteps > 0;
  await model.fit(data, { epochs: o.epochs, seed: o.seed, dynamics: !rollout });
  if (rollout) await fitRollout(model, data, { steps: o.rolloutSteps, epochs: o.epochs, windowsPerEpoch: o.rolloutWindows, seed: o.seed });
}

/**
 * The world model's dense reward summed over an episode's first `steps` recorded transitions, the members' mean: each
 * step's reward predicted from the state the robot reported and the command applied then (the episode's commands
 * `actionDelay` control steps late, nothing before the first), under the model's current context. One step each,
 * teacher-forced on the real states: no error compounds, as it does in an imagined or replayed rollout.
 */
export async function relabelScore(model: EnsembleModel, episode: { states: Float32Array; actions: Float32Array }, o: { steps: number; actionDelay: number }): Promise<number> {
  const T = o.steps, D = model.dObs, A = model.dAct;
  if (!(Number.isInteger(T) && T >= 0)) throw new Error(`relabelScore: steps must be a whole number, got ${T}`);
  if (episode.states.length < (T + 1) * D || episode.actions.length < T * A) throw new Error(`relabelScore: the episode holds ${episode.states.length / D} states and ${episode.actions.length / A} actions, fewer than ${T} steps need`);
  if (T === 0) return 0;
  const first = { states: episode.states.subarray(0, (T + 1) * D), actions: episode.actions.subarray(0, T * A), rewards: new Float32Array(T), success: new Float32Array(T) };
  const t = robotRows('relabelScore', [first], model, o.actionDelay, false).transitions();
  const p = await model.predict(t.obs, t.action, t.history, t.context);
  let sum = 0;
  for (const r of p.reward) sum += r;
  return sum / model.members;
}
