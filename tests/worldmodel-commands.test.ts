// A world model whose observations end with the robot's last commands (sim/env.ts commandHistory) does not
// predict them: the model env sets them from the actions it takes, in step() and the fused imagine() alike.
import { describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';
import { EnsembleModel, ModelEnv, type GraphPolicy } from '../worldmodel/index.js';

const dObs = 7, dAct = 2, K = 2, head = dObs - K * dAct;
const openLoop: GraphPolicy = { store: new nn.ParamStore(0), noiseDim: dAct, build: (_obs, noise) => ({ action: noise! }) };

describe('command history in the world model', () => {
  it('the tail of every imagined observation is the commands sent, clipped, newest first; step() and imagine() agree', async () => {
    const m = new EnsembleModel({ dObs, dAct, members: 2, hidden: [8], actionHistory: 1, commandHistory: K, seed: 3 });
    const plain = new EnsembleModel({ dObs, dAct, members: 2, hidden: [8], actionHistory: 1, seed: 3 });
    const N = 3, H = 5;
    const rng = new nn.Rng(1);
    const start = Float32Array.from({ length: N * dObs }, () => rng.uniform(-1, 1));
    const sent = Float32Array.from({ length: N * H * dAct }, () => rng.uniform(-1.5, 1.5));
    const members = Int32Array.of(0, 1, 0);
    const env = new ModelEnv(m, { members: 'fixed', seed: 0 });
    const ref = new ModelEnv(plain, { members: 'fixed', seed: 0 });
    const im = await env.imagine(start, openLoop, H, { members, policyNoise: sent, stepsPerRun: 2 });
    // The tail is no input of the model (EnsembleModel.heads): the plain model (unfitted: inputs standardized by mean 0,
    // std 1) sees the same first step with the tail's entries zero.
    const noTail = start.map((v, k) => (k % dObs >= head ? 0 : v));
    const base = await ref.imagine(noTail, openLoop, H, { members, policyNoise: sent, stepsPerRun: 2 });
    const clip = (v: number) => Math.max(-1, Math.min(1, v));
    const obsAt = (o: Float32Array, i: number, t: number) => Array.from(o.subarray((i * (H + 1) + t) * dObs, (i * (H + 1) + t + 1) * dObs));
    const sentAt = (i: number, t: number) => Array.from(sent.subarray((i * H + t) * dAct, (i * H + t + 1) * dAct), (v) => Math.fround(clip(v)));
    for (let i = 0; i < N; i++) {
      for (let t = 1; t <= H; t++) {
        const o = obsAt(im.obs, i, t);
        // newest first: the command sent at t-1, then the one before (at t = 1: the start observation's newest)
        const older = t >= 2 ? sentAt(i, t - 2) : Array.from(start.subarray(i * dObs + head, i * dObs + head + dAct));
        expect(o.slice(head)).toEqual([...sentAt(i, t - 1), ...older]);
      }
      // The first step's dynamics part is the plain model's prediction from the same start without its tail (same weights and seed).
      obsAt(im.obs, i, 1).slice(0, head).forEach((v, j) => expect(v).toBeCloseTo(obsAt(base.obs, i, 1)[j]!, 5));
    }
    env.reset(start, { members });
    for (let t = 0; t < H; t++) {
      const a = Float32Array.from({ length: N * dAct }, (_, r) => sent[(Math.floor(r / dAct) * H + t) * dAct + (r % dAct)]!);
      const s = await env.step(a);
      for (let i = 0; i < N; i++) obsAt(im.obs, i, t + 1).forEach((v, j) => expect(s.obs[i * dObs + j]).toBeCloseTo(v, 5));
    }
    await env.release();
    await ref.release();
    await m.release();
    await plain.release();
  });

  it('refuses a command history that does not fit the observation, naming it', () => {
    expect(() => new EnsembleModel({ dObs: 3, dAct: 2, commandHistory: 2 })).toThrow(/commandHistory 2 x dAct 2 entries do not fit in dObs 3/);
    expect(() => new EnsembleModel({ dObs: 7, dAct: 2, commandHistory: -1 })).toThrow(/commandHistory must be a non-negative integer/);
  });
});
