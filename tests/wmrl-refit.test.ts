// What a WMRL refit fits: the robot's episodes under the identified context, their rewards masked when the
// robot reports only success, and the sim data at its weight; how it fits them (refitModel).
import { describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { EnsembleModel, fitRollout, refitModel, refitTransitions, relabelScore, type Transitions } from '../worldmodel/index.js';

const D = 2, A = 1;

/** One episode of T steps: states 0..T, action t = t + 1, reward -t, success at the last step. */
function episode(T: number) {
  return {
    states: Float32Array.from({ length: (T + 1) * D }, (_, k) => Math.floor(k / D)),
    actions: Float32Array.from({ length: T * A }, (_, t) => t + 1),
    rewards: Float32Array.from({ length: T }, (_, t) => -t),
    success: Float32Array.from({ length: T }, (_, t) => (t === T - 1 ? 1 : 0)),
  };
}
const sim: Transitions = { dObs: D, dAct: A, obs: new Float32Array(3 * D), action: new Float32Array(3), nextObs: new Float32Array(3 * D), reward: Float32Array.of(-1, -1, -1), success: new Float32Array(3), weight: Float32Array.of(1, 2, 1), history: new Float32Array(3 * 2 * A), context: new Float32Array(3) };

describe('refitTransitions', () => {
  it('keeps the robot\'s actions and their history, carries the identified context, masks success-only rewards, scales the sim data', async () => {
    const model = new EnsembleModel({ dObs: D, dAct: A, members: 1, hidden: [4], actionHistory: 2, contextNames: ['log gain'], seed: 0 });
    model.setContext([0.5]);
    const t = refitTransitions([episode(5)], model, { robotRewards: 'success', simData: sim, simWeight: 0.25 });
    expect(t.reward.length).toBe(5 + 3);
    // Actions 1..5 as recorded; the history of the two before each, most recent first, zeros before the first.
    expect(Array.from(t.action.subarray(0, 5))).toEqual([1, 2, 3, 4, 5]);
    expect(Array.from(t.history!.subarray(0, 10))).toEqual([0, 0, 1, 0, 2, 1, 3, 2, 4, 3]);
    expect(Array.from(t.context!.subarray(0, 5))).toEqual([0.5, 0.5, 0.5, 0.5, 0.5]);
    expect(Array.from(t.rewardKnown!)).toEqual([0, 0, 0, 0, 0, 1, 1, 1]);
    expect(Array.from(t.success.subarray(0, 5))).toEqual([0, 0, 0, 0, 1]);
    expect(Array.from(t.weight!)).toEqual([1, 1, 1, 1, 1, 0.25, 0.5, 0.25]);
    // Dense robot rewards teach the reward head; simWeight 0 leaves the sim out.
    const dense = refitTransitions([episode(5)], model, { robotRewards: 'dense', simData: sim, simWeight: 0 });
    expect(Array.from(dense.reward)).toEqual([-0, -1, -2, -3, -4]);
    expect(dense.rewardKnown).toBeUndefined();
    await model.release();
  });

  it('takes the commands the robot reports as sent as applied actionDelay steps later (nothing before the first), and refuses a delay that is not a whole number of steps', async () => {
    const model = new EnsembleModel({ dObs: D, dAct: A, members: 1, hidden: [4], actionHistory: 2, seed: 0 });
    const t = refitTransitions([episode(5)], model, { robotRewards: 'dense', simData: sim, simWeight: 0, actionDelay: 2 });
    expect(Array.from(t.action)).toEqual([0, 0, 1, 2, 3]);
    expect(Array.from(t.history!)).toEqual([0, 0, 0, 0, 0, 0, 1, 0, 2, 1]);
    // States, rewards and success stay on their steps.
    expect(Array.from(t.obs.filter((_, k) => k % D === 0))).toEqual([0, 1, 2, 3, 4]);
    expect(Array.from(t.reward)).toEqual([-0, -1, -2, -3, -4]);
    // A delay longer than the episode applies none of its commands.
    expect(Array.from(refitTransitions([episode(2)], model, { robotRewards: 'dense', simData: sim, simWeight: 0, actionDelay: 4 }).action)).toEqual([0, 0]);
    expect(() => refitTransitions([episode(5)], model, { robotRewards: 'dense', simData: sim, simWeight: 0, actionDelay: 1.5 })).toThrow(/actionDelay must be a whole number of control steps, got 1.5/);
    await model.release();
  });

  it('relabelScore: the model\'s reward over the first steps of a real episode, its commands as late as the delay, under the model\'s context, the members\' mean', async () => {
    const model = new EnsembleModel({ dObs: D, dAct: A, members: 2, hidden: [4], actionHistory: 2, contextNames: ['log gain'], seed: 1 });
    model.setContext([0.3]);
    const ep = episode(6);
    // What the model predicts on the rows a refit would fit (refitTransitions, tested above), summed per member.
    const reference = async (steps: number, delay: number) => {
      const e = { states: ep.states.slice(0, (steps + 1) * D), actions: ep.actions.slice(0, steps * A), rewards: ep.rewards.slice(0, steps), success: new Float32Array(steps) };
      const t = refitTransitions([e], model, { robotRewards: 'dense', simData: sim, simWeight: 0, actionDelay: delay });
      const p = await model.predict(t.obs, t.action, t.history, t.context);
      return Array.from(p.reward).reduce((a, b) => a + b, 0) / 2;
    };
    const whole = await relabelScore(model, ep, { steps: 6, actionDelay: 2 });
    expect(whole).toBeCloseTo(await reference(6, 2), 5);
    // The first 4 steps only; the commands on time; another context: each a different score.
    const first = await relabelScore(model, ep, { steps: 4, actionDelay: 2 });
    expect(first).toBeCloseTo(await reference(4, 2), 5);
    expect(Math.abs(first - whole)).toBeGreaterThan(1e-4);
    const onTime = await relabelScore(model, ep, { steps: 6, actionDelay: 0 });
    expect(onTime).toBeCloseTo(await reference(6, 0), 5);
    expect(Math.abs(onTime - whole)).toBeGreaterThan(1e-4);
    model.setContext([-0.3]);
    expect(Math.abs((await relabelScore(model, ep, { steps: 6, actionDelay: 2 })) - whole)).toBeGreaterThan(1e-4);
    expect(await relabelScore(model, ep, { steps: 0, actionDelay: 2 })).toBe(0);
    await expect(relabelScore(model, ep, { steps: 7, actionDelay: 0 })).rejects.toThrow(/holds 7 states and 6 actions, fewer than 7 steps need/);
    await expect(relabelScore(model, ep, { steps: 6, actionDelay: -1 })).rejects.toThrow(/actionDelay must be a whole number of control steps, got -1/);
    await model.release();
  });

  it('refitModel: one step for the whole model at rolloutSteps 0; else the heads one step and the dynamics through rollouts', async () => {
    const make = () => new EnsembleModel({ dObs: D, dAct: A, members: 2, hidden: [8], actionHistory: 2, seed: 4 });
    // Episodes of random states, so both the dynamics and the reward head have something to learn.
    const rng = new Rng(6);
    const noisy = (T: number) => ({ ...episode(T), states: Float32Array.from({ length: (T + 1) * D }, () => rng.normal()), rewards: Float32Array.from({ length: T }, () => rng.normal()) });
    const data = refitTransitions([noisy(40), noisy(30)], make(), { robotRewards: 'dense', simData: sim, simWeight: 0 });
    const params = (m: EnsembleModel) => m.store.names().map((n) => Array.from(m.store.get(n).data));
    const [a, b, c, d] = [make(), make(), make(), make()];
    await refitModel(a, data, { epochs: 2, rolloutSteps: 0, rolloutWindows: 8, seed: 5 });
    await b.fit(data, { epochs: 2, seed: 5, dynamics: true });
    expect(params(a)).toEqual(params(b));
    await refitModel(c, data, { epochs: 2, rolloutSteps: 4, rolloutWindows: 8, seed: 5 });
    await d.fit(data, { epochs: 2, seed: 5, dynamics: false });
    await fitRollout(d, data, { steps: 4, epochs: 2, windowsPerEpoch: 8, seed: 5 });
    expect(params(c)).toEqual(params(d));
    expect(params(c)).not.toEqual(params(a));
    await Promise.all([a, b, c, d].map((m) => m.release()));
  });
});
