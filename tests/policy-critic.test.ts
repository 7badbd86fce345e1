// policies/critic.ts: generalized advantage estimation checked against its recursion by hand, and the value
// critic fitting a known function of the observation (the baseline on-policy training with per-step credit uses).
import { describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { ValueCritic, gae } from '../policies/critic.js';

describe('gae', () => {
  it('matches the recursion by hand: a terminal episode bootstraps 0, a time-limited one its bootstrap value', () => {
    // episode 0: steps 0-1, terminal; episode 1: steps 2-4, cut by the time limit with V(s_after) = 2
    const r = [1, 2, 0.5, -1, 3], v = [0.5, 1, 0, 0.25, 1];
    const g = 0.9, l = 0.8;
    const { advantage, returns } = gae(r, v, [{ start: 0, length: 2, terminal: true, bootstrap: 99 }, { start: 2, length: 3, terminal: false, bootstrap: 2 }], g, l);
    const d1 = 2 + g * 0 - 1, d0 = 1 + g * 1 - 0.5;
    const a1 = d1, a0 = d0 + g * l * a1;
    const e4 = 3 + g * 2 - 1, e3 = -1 + g * 1 - 0.25, e2 = 0.5 + g * 0.25 - 0;
    const a4 = e4, a3 = e3 + g * l * a4, a2 = e2 + g * l * a3;
    [a0, a1, a2, a3, a4].forEach((a, i) => expect(advantage[i]).toBeCloseTo(a, 5));
    [a0, a1, a2, a3, a4].forEach((a, i) => expect(returns[i]).toBeCloseTo(a + v[i]!, 5));
  });

  it('with lambda 1 and gamma 1 the advantage is the reward-to-go minus the value', () => {
    const r = [1, 1, 1, 1], v = [0.3, -0.2, 0.1, 0];
    const { advantage } = gae(r, v, [{ start: 0, length: 4, terminal: true, bootstrap: 0 }], 1, 1);
    [4, 3, 2, 1].forEach((togo, i) => expect(advantage[i]).toBeCloseTo(togo - v[i]!, 5));
  });

  it('rejects an episode outside the steps and mismatched lengths, naming the problem', () => {
    expect(() => gae([1, 2], [0, 0], [{ start: 1, length: 2, terminal: true, bootstrap: 0 }], 0.9, 0.9)).toThrow(/outside the 2 steps/);
    expect(() => gae([1, 2], [0], [], 0.9, 0.9)).toThrow(/2 rewards but 1 values/);
    expect(() => gae([1], [0], [], 1.5, 0.9)).toThrow(/gamma and lambda/);
  });
});

describe('ValueCritic', () => {
  it('fits a smooth function of the observation and predicts it on new points', async () => {
    const D = 3, rng = new Rng(1);
    const f = (x: Float32Array, i: number) => 2 * x[i * D]! - x[i * D + 1]! + 0.5 * Math.sin(3 * x[i * D + 2]!);
    const draw = (n: number) => Float32Array.from({ length: n * D }, () => rng.uniform(-1, 1));
    const X = draw(2048), y = Float32Array.from({ length: 2048 }, (_, i) => f(X, i));
    const critic = await ValueCritic.create({ obsDim: D, obsMean: [0, 0, 0], obsStd: [1, 1, 1], hidden: [32, 32], optimizer: { lr: 3e-3, clipNorm: 1 }, seed: 0 });
    try {
      const before = await critic.predict(X);
      const mse = (p: Float32Array, t: Float32Array) => p.reduce((a, v, i) => a + (v - t[i]!) ** 2, 0) / t.length;
      const loss = await critic.fit(X, y, { epochs: 60, minibatch: 128, rng });
      const Xt = draw(256), yt = Float32Array.from({ length: 256 }, (_, i) => f(Xt, i));
      const after = await critic.predict(Xt);
      expect(mse(before, y)).toBeGreaterThan(0.5);
      expect(loss).toBeLessThan(0.02);
      expect(mse(after, yt)).toBeLessThan(0.03);
      await expect(critic.fit(X, y.subarray(0, 10), { epochs: 1, minibatch: 8, rng })).rejects.toThrow(/expected 10 x 3/);
    } finally {
      await critic.release();
    }
  });
});
