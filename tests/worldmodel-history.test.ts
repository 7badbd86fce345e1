// A world model that conditions on past actions (actuation latency): the history each transition carries,
// a model that learns a delayed system only with it, the model env carrying each rollout's history through
// step() and the fused imagine() alike, the replay of an episode, and the exported model.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';
import { EnsembleModel, ModelEnv, TransitionBuffer, episodeHistory, replayScore, type GraphPolicy } from '../worldmodel/index.js';
import { onnxCheck } from './helpers/onnx-check.js';
import { delayedEpisodes } from './helpers/delayed-system.js';

/** Episodes of a system whose action acts two steps late: x' = x + 0.5·a(t−2); reward = −|x'|. */
const twoStepsLate = (n: number, T: number, seed: number) => delayedEpisodes(n, T, seed, 2);

describe('action history in the transitions', () => {
  it('episodeHistory holds the h actions before each step, most recent first, zeros before the start', () => {
    const a = Float32Array.of(1, 10, 2, 20, 3, 30); // T = 3, dAct = 2
    expect(Array.from(episodeHistory(a, 2, 2))).toEqual([0, 0, 0, 0, 1, 10, 0, 0, 2, 20, 1, 10]);
  });

  it('the buffer builds it per episode and refuses transitions with another history; the model refuses a mismatch', async () => {
    const buf = new TransitionBuffer(1, 1, 2);
    for (const e of twoStepsLate(2, 4, 0)) buf.addEpisode(e);
    const t = buf.transitions();
    expect(t.history).toHaveLength(8 * 2);
    // row 5 is the second episode's step 1: history [its action 0, 0]
    expect(t.history![10]).toBe(t.action[4]);
    expect(t.history![11]).toBe(0);
    expect(() => new TransitionBuffer(1, 1, 1).add(t)).toThrow('buffer: transitions with 2 past actions per row into a buffer of 1');
    const m = new EnsembleModel({ dObs: 1, dAct: 1, members: 2, hidden: [8], actionHistory: 3 });
    await expect(m.fit(t)).rejects.toThrow('ensemble: transitions carry 2 past actions per row, the model conditions on 3');
    expect(() => new EnsembleModel({ dObs: 1, dAct: 1, actionHistory: -1 })).toThrow('actionHistory must be a non-negative integer');
  });
});

describe('a delayed system', () => {
  it('is learned with two past actions and not without them (held-out one-step error)', async () => {
    const errors: Record<number, number> = {};
    for (const h of [0, 2]) {
      const train = new TransitionBuffer(1, 1, h), val = new TransitionBuffer(1, 1, h);
      for (const e of twoStepsLate(60, 20, 1)) train.addEpisode(e);
      for (const e of twoStepsLate(10, 20, 2)) val.addEpisode(e);
      const m = new EnsembleModel({ dObs: 1, dAct: 1, members: 2, hidden: [32, 32], actionHistory: h, seed: 0 });
      await m.fit(train.transitions(), { epochs: 30, lr: 3e-3, val: val.transitions(), seed: 0 });
      errors[h] = (await m.evaluate(val.transitions())).mse;
      await m.release();
    }
    // The delta is 0.5·a(t−2), variance 1/12: without history nothing predicts it.
    expect(errors[0]).toBeGreaterThan(0.5 / 12);
    expect(errors[2]).toBeLessThan(errors[0]! / 10);
  }, 60_000);
});

describe('the model env with action history', () => {
  const D = 3, A = 2, H = 6, N = 5;
  const model = new EnsembleModel({ dObs: D, dAct: A, members: 3, hidden: [16], actionHistory: 2, seed: 4 });
  const rng = new nn.Rng(9);
  const start = Float32Array.from({ length: N * D }, () => rng.uniform(-1, 1));
  const actions = Float32Array.from({ length: N * H * A }, () => rng.uniform(-1, 1));
  /** An open-loop policy: the action is the noise input. */
  const openLoop: GraphPolicy = { store: new nn.ParamStore(0), noiseDim: A, build: (_obs, noise) => ({ action: noise! }) };
  const members = Int32Array.from({ length: N }, (_, i) => i % 3);

  it('imagine (history carried inside the graph, across graph runs) equals step() one step at a time, and the history matters', async () => {
    const env = new ModelEnv(model, { members: 'fixed' });
    env.reset(start, { members });
    const stepped: Float32Array[] = [];
    for (let t = 0; t < H; t++) {
      const a = new Float32Array(N * A);
      for (let i = 0; i < N; i++) a.set(actions.subarray((i * H + t) * A, (i * H + t + 1) * A), i * A);
      stepped.push((await env.step(a)).obs);
    }
    // stepsPerRun 4 < H: the history crosses from one graph run to the next
    const im = await env.imagine(start, openLoop, H, { policyNoise: actions, members, stepsPerRun: 4 });
    for (let t = 0; t < H; t++) for (let i = 0; i < N; i++) for (let j = 0; j < D; j++) expect(im.obs[(i * (H + 1) + t + 1) * D + j]).toBeCloseTo(stepped[t]![i * D + j]!, 5);
    // The same last action after a different past gives a different prediction.
    const obs = start.subarray(0, D), a = actions.subarray(0, A);
    const p1 = await model.predict(obs, a, new Float32Array(2 * A));
    const p2 = await model.predict(obs, a, Float32Array.of(1, -1, 1, -1));
    expect(p1.nextObsMean.some((v, k) => Math.abs(v - p2.nextObsMean[k]!) > 1e-4)).toBe(true);
    await expect(model.predict(obs, a)).rejects.toThrow('the model conditions on 2 past actions; pass history');
    await env.release();
  });

  it("replayScore replays an episode's actions with their history, and the exported model passes onnx.checker and agrees", async () => {
    const r = await replayScore(model, start.subarray(0, D), actions.subarray(0, H * A), { mode: 'return' });
    expect(r.score).toHaveLength(1);
    expect(Number.isFinite(r.score[0]!)).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), 'wm-history-'));
    try {
      const path = join(dir, 'wm.onnx');
      model.exportOnnx(path);
      expect(onnxCheck(path).opset).toBeGreaterThan(0);
      const session = await nn.ort.InferenceSession.create(path);
      const hist = Float32Array.of(0.5, -0.5, 0.25, 0);
      const out = await session.run({ obs: nn.tensor(start.subarray(0, D), [1, D]), action: nn.tensor(actions.subarray(0, A), [1, A]), action_history: nn.tensor(hist, [1, 2 * A]) });
      const p = await model.predict(start.subarray(0, D), actions.subarray(0, A), hist);
      const onnxMean = out.next_obs_mean!.data as Float32Array;
      p.nextObsMean.forEach((v, k) => expect(onnxMean[k]).toBeCloseTo(v, 5));
      await session.release();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
