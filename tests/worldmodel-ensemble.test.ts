// Fitting mechanics on small synthetic data: sim/real weights, early stopping, bootstrapped members,
// refit units, and errors that name the bad input.
import { describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';
import { EnsembleModel, TransitionBuffer, concatTransitions, validateTransitions, type Transitions } from '../worldmodel/index.js';

const D = 2, A = 1;

/** next = obs + 0.1·action; reward = `reward` everywhere; rows spread over [-1, 1]. */
function synthetic(n: number, seed: number, reward: number, weight: number): Transitions {
  const rng = new nn.Rng(seed);
  const obs = Float32Array.from({ length: n * D }, () => rng.uniform(-1, 1));
  const action = Float32Array.from({ length: n * A }, () => rng.uniform(-1, 1));
  const nextObs = obs.map((v, k) => v + 0.1 * action[Math.floor(k / D)]!);
  return { dObs: D, dAct: A, obs, action, nextObs, reward: new Float32Array(n).fill(reward), success: new Float32Array(n), weight: new Float32Array(n).fill(weight) };
}

describe('fit', () => {
  it('weights: the same inputs labelled by "sim" (reward -1) and "real" (reward +1) are fitted to the weighted mean', async () => {
    const probe = synthetic(64, 99, 0, 1);
    const predicted = async (wSim: number, wReal: number) => {
      const data = concatTransitions(D, A, [synthetic(512, 1, -1, wSim), synthetic(512, 1, 1, wReal)]);
      const m = new EnsembleModel({ dObs: D, dAct: A, members: 2, hidden: [16], seed: 0 });
      await m.fit(data, { epochs: 15, lr: 1e-2, seed: 0 });
      const p = await m.predict(probe.obs, probe.action);
      await m.release();
      return p.reward.reduce((a, b) => a + b, 0) / p.reward.length;
    };
    // Only ratios matter: (w_real - w_sim) / (w_real + w_sim).
    expect(await predicted(1, 1)).toBeCloseTo(0, 1);
    expect(await predicted(1, 3)).toBeCloseTo(0.5, 1);
    expect(await predicted(0, 2)).toBeCloseTo(1, 1);
  });

  it('rewardKnown: rows whose reward is not the dense signal teach the dynamics, never the reward head', async () => {
    const probe = synthetic(64, 99, 0, 1);
    // "sim" rows reward -1 with their reward known; "robot" rows on the same inputs report 0 (success only) and move
    // twice as far per action (the dynamics the sim lacks).
    const robot = (known: boolean): Transitions => {
      const t = synthetic(512, 1, 0, 1);
      return { ...t, nextObs: t.obs.map((v, k) => v + 0.2 * t.action[Math.floor(k / D)]!), ...(known ? {} : { rewardKnown: new Float32Array(512) }) };
    };
    const fitted = async (known: boolean) => {
      const m = new EnsembleModel({ dObs: D, dAct: A, members: 2, hidden: [16], seed: 0 });
      await m.fit(concatTransitions(D, A, [synthetic(512, 1, -1, 1), robot(known)]), { epochs: 15, lr: 1e-2, seed: 0 });
      const p = await m.predict(probe.obs, probe.action);
      const ev = await m.evaluate(robot(known));
      await m.release();
      const slope = probe.action.reduce((a, u, i) => a + (p.nextObsMean[i * D]! - probe.obs[i * D]!) * u, 0) / probe.action.reduce((a, u) => a + u * u, 0);
      return { reward: p.reward.reduce((a, b) => a + b, 0) / p.reward.length, slope, rewardMse: ev.rewardMse };
    };
    const masked = await fitted(false), plain = await fitted(true);
    // The reward head keeps the sim's -1 where the robot's 0s are masked, and averages them where they are not.
    expect(masked.reward).toBeCloseTo(-1, 1);
    expect(plain.reward).toBeCloseTo(-0.5, 1);
    // The dynamics learn from the robot's rows either way: between the sim's 0.1 and the robot's 0.2 per action.
    expect(masked.slope).toBeGreaterThan(0.12);
    expect(Math.abs(masked.slope - plain.slope)).toBeLessThan(0.02);
    // Held-out reward metrics skip the masked rows (none left: 0), and count them when known.
    expect(masked.rewardMse).toBe(0);
    expect(plain.rewardMse).toBeGreaterThan(0.1);
  });

  it('early stopping keeps the best validation epoch; the model then holds exactly those parameters', async () => {
    const m = new EnsembleModel({ dObs: D, dAct: A, members: 3, hidden: [32, 32], seed: 4 });
    const val = synthetic(200, 7, 0.5, 1);
    const rep = await m.fit(synthetic(300, 6, 0.5, 1), { epochs: 40, patience: 3, lr: 3e-2, val, seed: 2 });
    const losses = rep.history.map((h) => h.val.loss);
    const best = losses.indexOf(Math.min(...losses)) + 1;
    expect(rep.keptEpoch).toBe(best);
    expect(rep.epochs - rep.keptEpoch).toBeLessThanOrEqual(3);
    expect((await m.evaluate(val)).loss).toBeCloseTo(rep.val.loss, 5);
    expect(rep.val.loss).toBe(rep.history[best - 1]!.val.loss);
    await m.release();
  });

  it('bootstrapped members differ; a refit keeps the normalization unless asked to refit it', async () => {
    const m = new EnsembleModel({ dObs: D, dAct: A, members: 3, hidden: [16], seed: 1 });
    await m.fit(synthetic(256, 3, 0, 1), { epochs: 3, seed: 1 });
    const p = await m.predict(Float32Array.of(0.3, -0.2), Float32Array.of(0.5));
    expect(p.nextObsMean[0]).not.toBe(p.nextObsMean[D]);
    const before = Array.from(m.normalizer.inStd);
    const shifted = synthetic(256, 4, 0, 1);
    shifted.obs.forEach((v, k) => (shifted.obs[k] = 3 * v));
    await m.fit(shifted, { epochs: 1, seed: 1 });
    expect(Array.from(m.normalizer.inStd)).toEqual(before);
    await m.fit(shifted, { epochs: 1, seed: 1, renormalize: true });
    expect(m.normalizer.inStd[0]).toBeGreaterThan(2 * before[0]!);
    await m.release();
  });
});

describe('bad input is named', () => {
  it('transitions: lengths, non-finite values, success range, weights', () => {
    const t = synthetic(4, 1, 0, 1);
    expect(() => validateTransitions({ ...t, action: new Float32Array(3) })).toThrow(/action has 3 values, expected 4 x 1 = 4/);
    const nan = t.nextObs.slice();
    nan[5] = NaN;
    expect(() => validateTransitions({ ...t, nextObs: nan })).toThrow(/nextObs is not finite at row 2, column 1 \(NaN\)/);
    expect(() => validateTransitions({ ...t, success: Float32Array.of(0, 2, 0, 0) })).toThrow(/success\[1\] = 2 is outside \[0, 1\]/);
    expect(() => validateTransitions({ ...t, weight: new Float32Array(4) })).toThrow(/every weight is 0/);
    expect(() => validateTransitions({ ...t, weight: Float32Array.of(1, -1, 1, 1) })).toThrow(/weight\[1\] = -1 is negative/);
    expect(() => validateTransitions({ ...t, rewardKnown: Float32Array.of(1, 0.5, 1, 1) })).toThrow(/rewardKnown\[1\] = 0.5 is neither 0 nor 1/);
    expect(() => validateTransitions({ ...t, rewardKnown: new Float32Array(3) })).toThrow(/rewardKnown has 3 values, expected 4 x 1 = 4/);
  });

  it('the model and the buffer refuse other dims', async () => {
    const m = new EnsembleModel({ dObs: D, dAct: A, members: 2, hidden: [8] });
    await expect(m.fit({ ...synthetic(8, 1, 0, 1), dObs: 3, obs: new Float32Array(24), nextObs: new Float32Array(24) })).rejects.toThrow(/transitions have dims \(obs 3, action 1\), the model \(obs 2, action 1\)/);
    await expect(m.predict(new Float32Array(5), new Float32Array(2))).rejects.toThrow(/predict obs: 5 values is not a whole number of rows of 2/);
    expect(() => new EnsembleModel({ dObs: 0, dAct: 1 })).toThrow(/dObs must be a positive integer, got 0/);
    const buf = new TransitionBuffer(D, A);
    expect(() => buf.addEpisode({ states: new Float32Array(3 * D), actions: new Float32Array(3 * A), rewards: [0, 0, 0], success: [0, 0, 0] })).toThrow(/episode states: 3 rows, expected 4/);
    buf.addEpisode({ states: new Float32Array(4 * D), actions: new Float32Array(3 * A), rewards: [0, 0, 0], success: [0, 0, 1], weight: 0.5 });
    expect(buf.size).toBe(3);
    expect(Array.from(buf.transitions().weight!)).toEqual([0.5, 0.5, 0.5]);
    await m.release();
  });
});
