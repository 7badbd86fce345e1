// Scorers for the Corrector: the collapse of dense progress to one score per rollout, its variance across
// members, success scoring, and the anchor pair's replay score against stepping the model env by hand, whole
// or ending where each member's predicted success passes a threshold (replayToSuccess).
import { afterAll, describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';
import { EnsembleModel, ModelEnv, collapse, replayScore, replayToSuccess, scoreImagined, scoreWithVariance, successScore } from '../worldmodel/index.js';

describe('scoreImagined', () => {
  const H = 8;
  // Rollout 0 climbs steadily; rollout 1 spikes once mid-way and falls back (the reward hack 'peak' rewards).
  const climb = Array.from({ length: H }, (_, t) => t / (H - 1));
  const spike = Array.from({ length: H }, (_, t) => (t === 3 ? 2 : 0));
  const progress = Float32Array.from([...climb, ...spike]);

  it('last-minus-first: mean of the last k minus mean of the first k', () => {
    const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    for (const k of [1, 2, 3]) {
      const s = scoreImagined(progress, H, { k });
      expect(s[0]).toBeCloseTo(mean(climb.slice(H - k)) - mean(climb.slice(0, k)), 6);
      expect(s[1]).toBeCloseTo(mean(spike.slice(H - k)) - mean(spike.slice(0, k)), 6);
    }
    expect(scoreImagined(progress, H, { k: 2 })[1]).toBe(0);
  });

  it("'peak' takes the best step, so a one-step spike outscores steady progress (documented as exploitable)", () => {
    const peak = scoreImagined(progress, H, { k: 1, mode: 'peak' });
    expect(peak[0]).toBeCloseTo(1, 6);
    expect(peak[1]).toBeCloseTo(2, 6);
    const lmf = scoreImagined(progress, H, { k: 1 });
    expect(lmf[0]! > lmf[1]!).toBe(true);
  });

  it('names bad input', () => {
    expect(() => scoreImagined(progress, H, { k: H + 1 })).toThrow(/k must be an integer in \[1, H = 8\], got 9/);
    expect(() => scoreImagined(progress, 5)).toThrow(/16 values is not a whole number of rows of 5/);
    expect(() => scoreImagined(Float32Array.of(0, NaN), 2)).toThrow(/progress: not finite at row 0, column 1/);
    expect(() => scoreImagined(progress, H, { mode: 'max' as never })).toThrow(/unknown mode 'max'/);
  });
});

describe('collapse (a rollout cut at its predicted success)', () => {
  const row = Float32Array.of(1, 2, 3, 4, 5, 6);
  it("scores the first T steps only: their sum, or the mean of the last k minus the first k with k at most T", () => {
    expect(collapse(row, 4, 'return', 2)).toBeCloseTo(10, 6);
    expect(collapse(row, 6, 'return', 2)).toBeCloseTo(21, 6);
    expect(collapse(row, 4, 'last-minus-first', 2)).toBeCloseTo(3.5 - 1.5, 6);
    // k = 5 on a 3-step rollout averages all 3 at each end.
    expect(collapse(row, 3, 'last-minus-first', 5)).toBe(0);
    expect(collapse(row, 1, 'return', 5)).toBe(1);
  });
});

describe('scoreWithVariance and successScore', () => {
  it("score = members' mean score, variance = population variance across members", () => {
    const E = 3, N = 2, H = 4;
    // Member e's progress for rollout i rises linearly with slope (e + 1) * (i + 1).
    const mp = Float32Array.from({ length: E * N * H }, (_, j) => {
      const t = j % H, i = Math.floor(j / H) % N, e = Math.floor(j / (N * H));
      return (e + 1) * (i + 1) * t;
    });
    const { score, variance } = scoreWithVariance(mp, E, H, { k: 1 });
    for (let i = 0; i < N; i++) {
      const per = [0, 1, 2].map((e) => (e + 1) * (i + 1) * (H - 1));
      const m = per.reduce((a, b) => a + b, 0) / E;
      expect(score[i]).toBeCloseTo(m, 5);
      expect(variance[i]).toBeCloseTo(per.reduce((a, b) => a + (b - m) ** 2, 0) / E, 4);
    }
    expect(() => scoreWithVariance(mp, 5, H)).toThrow(/6 rows are not E x N for E = 5/);
  });

  it("success: the last step's probability, or the maximum over the rollout", () => {
    const p = Float32Array.of(0.1, 0.9, 0.3, 0.2, 0.4, 0.6);
    expect(Array.from(successScore(p, 3, 'final'))).toEqual([Math.fround(0.3), Math.fround(0.6)]);
    expect(Array.from(successScore(p, 3, 'max'))).toEqual([Math.fround(0.9), Math.fround(0.6)]);
  });
});

describe('replayScore (the anchor pair)', () => {
  const D = 5, A = 2, E = 3, N = 4, H = 9;
  const model = new EnsembleModel({ dObs: D, dAct: A, members: E, hidden: [24], seed: 11 });
  afterAll(() => model.release());
  const rng = new nn.Rng(5);
  const start = Float32Array.from({ length: N * D }, () => rng.uniform(-1, 1));
  const actions = Float32Array.from({ length: N * H * A }, () => rng.uniform(-1, 1));

  it("equals stepping the model env with the episode's actions under each member, scored the same way", async () => {
    const opts = { k: 2 } as const;
    const r = await replayScore(model, start, actions, { ...opts, success: 'max', stepsPerRun: 4 });
    const memberProgress = new Float32Array(E * N * H);
    const memberSuccess = new Float32Array(E * N * H);
    const env = new ModelEnv(model, { members: 'fixed' });
    for (let e = 0; e < E; e++) {
      env.reset(start, { members: new Array(N).fill(e) });
      for (let t = 0; t < H; t++) {
        const a = new Float32Array(N * A);
        for (let i = 0; i < N; i++) a.set(actions.subarray((i * H + t) * A, (i * H + t + 1) * A), i * A);
        const s = await env.step(a);
        for (let i = 0; i < N; i++) {
          memberProgress[(e * N + i) * H + t] = s.reward[i]!;
          memberSuccess[(e * N + i) * H + t] = s.successProb[i]!;
        }
      }
    }
    await env.release();
    const want = scoreWithVariance(memberProgress, E, H, opts);
    for (let i = 0; i < N; i++) {
      expect(r.score[i]).toBeCloseTo(want.score[i]!, 4);
      expect(r.variance[i]).toBeCloseTo(want.variance[i]!, 4);
      const meanSuccess = Float32Array.from({ length: H }, (_, t) => [0, 1, 2].reduce((a, e) => a + memberSuccess[(e * N + i) * H + t]! / E, 0));
      expect(r.success[i]).toBeCloseTo(successScore(meanSuccess, H, 'max')[0]!, 5);
    }
    // Members disagree on an untrained model: the variance is not trivially zero.
    expect(Math.max(...r.variance)).toBeGreaterThan(0);
  });

  it('replayToSuccess: one episode replayed, each member\'s replay scored up to its first step past the success threshold, the members\' mean', async () => {
    const one = start.subarray(0, D), acts = actions.subarray(0, H * A);
    const r = await replayScore(model, one, acts, { k: 2, mode: 'return', actionDelay: 1 });
    // A threshold no probability passes scores the whole replay, as replayScore does.
    expect(await replayToSuccess(model, one, acts, { mode: 'return', k: 2, actionDelay: 1, successThreshold: 2 })).toBeCloseTo(r.score[0]!, 4);
    // A threshold between the members' predictions cuts each replay where its own member first passes it.
    const p = Array.from(r.memberSuccessProb).sort((a, b) => a - b), threshold = p[Math.floor(p.length / 2)]!;
    let want = 0;
    for (let e = 0; e < E; e++) {
      const hit = Array.from(r.memberSuccessProb.subarray(e * H, (e + 1) * H)).findIndex((x) => x > threshold);
      const T = hit < 0 ? H : hit + 1;
      want += Array.from(r.memberProgress.subarray(e * H, e * H + T)).reduce((a, x) => a + x, 0) / E;
    }
    const cut = await replayToSuccess(model, one, acts, { mode: 'return', k: 2, actionDelay: 1, successThreshold: threshold });
    expect(cut).toBeCloseTo(want, 4);
    expect(Math.abs(cut - r.score[0]!)).toBeGreaterThan(1e-4);
  });

  it('names bad input', async () => {
    await expect(replayScore(model, start, actions.subarray(1))).rejects.toThrow(/71 action values are not N x H x dAct for N = 4, dAct = 2/);
    const bad = actions.slice();
    bad[5] = Infinity;
    await expect(replayScore(model, start, bad)).rejects.toThrow(/replayScore: actions: not finite at row 2, column 1/);
  });
});
