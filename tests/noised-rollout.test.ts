import { describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { noisedRollout } from '../policies/demos.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { makeEnv } from '../sim/index.js';

describe('noisedRollout', () => {
  it('repeats under the same noise and reseed, meets other sensor noise under another reseed, and clips what it sends', async () => {
    const env = await makeEnv({ task: 'reach', profile: 'gap' });
    try {
      const D = env.observationSpace.state.shape[0]!, A = env.actionSpace.shape[0]!, H = 30;
      const policy = new GaussianPolicy({ obsDim: D, actDim: A, hidden: [16], activation: 'tanh', initLogStd: 1, seed: 3 });
      const rng = new Rng(5);
      const noise = Float32Array.from({ length: H * A }, () => 3 * rng.normal());
      const a = await noisedRollout(env, policy, 42, noise, H, { reseed: 7 });
      const b = await noisedRollout(env, policy, 42, noise, H, { reseed: 7 });
      const c = await noisedRollout(env, policy, 42, noise, H, { reseed: 8 });
      expect(a.actions.length).toBe(H * A);
      expect(a.states.length).toBe((H + 1) * D);
      expect(a.return).toBe(b.return);
      expect(Array.from(a.states)).toEqual(Array.from(b.states));
      // The same start observation, other sensor noise after it.
      expect(Array.from(c.states.slice(0, D))).toEqual(Array.from(a.states.slice(0, D)));
      expect(Array.from(c.states.slice(D))).not.toEqual(Array.from(a.states.slice(D)));
      // Wide noise: the samples leave [-1, 1]; what is sent never does.
      expect(Math.max(...a.actions.map(Math.abs))).toBeLessThanOrEqual(1);
      expect(a.actions.some((v) => Math.abs(v) === 1)).toBe(true);
      expect(a.rewards.reduce((s, r) => s + r, 0)).toBeCloseTo(a.return, 4);
      await expect(noisedRollout(env, policy, 42, noise.subarray(0, A), H)).rejects.toThrow(/noise entries for 30 steps/);
    } finally {
      env.dispose();
    }
  });
});
