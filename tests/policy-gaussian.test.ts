// The Gaussian MLP policy and the clipped policy-gradient update the trainers share: sampling and
// log-probabilities against a plain TypeScript Gaussian, bounds, weights, GRPO learning on a bandit
// with known optimum, and checkpoints that resume exactly.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import * as ort from 'onnxruntime-node';
import { GaussianPolicy, exportPolicy } from '../policies/gaussian.js';
import { onnxCheck } from './helpers/onnx-check.js';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG, type PgBatch } from '../policies/pg.js';

const dir = mkdtempSync(join(tmpdir(), 'policy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function normals(rng: Rng, n: number): Float32Array {
  return Float32Array.from({ length: n }, () => rng.normal());
}

describe('GaussianPolicy.act', () => {
  it('samples mean + std·noise with the log-probability of a diagonal Gaussian', async () => {
    const p = new GaussianPolicy({ obsDim: 3, actDim: 2, initLogStd: -0.7, seed: 1, actLow: [-2, 0], actHigh: [2, 1] });
    const rng = new Rng(4);
    const obs = Float32Array.from({ length: 5 * 3 }, () => rng.uniform(-1, 1));
    const noise = normals(rng, 5 * 2);
    const r = await p.act(obs, noise);
    const std = Math.exp(-0.7);
    for (let i = 0; i < 5; i++) {
      let lp = 0;
      for (let j = 0; j < 2; j++) {
        const a = r.action[i * 2 + j]!, m = r.mean[i * 2 + j]!;
        expect(a).toBeCloseTo(m + std * noise[i * 2 + j]!, 5);
        lp += -0.5 * ((a - m) / std) ** 2 - Math.log(std) - 0.5 * Math.log(2 * Math.PI);
      }
      expect(r.logProb[i]).toBeCloseTo(lp, 4);
      // The mean is squashed into each dimension's own bounds.
      expect(Math.abs(r.mean[i * 2]!)).toBeLessThan(2);
      expect(r.mean[i * 2 + 1]).toBeGreaterThan(0);
      expect(r.mean[i * 2 + 1]).toBeLessThan(1);
    }
    const det = await p.act(obs, new Float32Array(10));
    expect(Array.from(det.action)).toEqual(Array.from(r.mean));
    await p.release();
  });

  it('refuses inputs of the wrong size or with NaN, naming the problem', async () => {
    const p = new GaussianPolicy({ obsDim: 3, actDim: 2 });
    await expect(p.act(new Float32Array(4), new Float32Array(2))).rejects.toThrow(/not a multiple of obsDim 3/);
    await expect(p.act(new Float32Array(3), new Float32Array(3))).rejects.toThrow(/noise has 3 values, expected 1 x 2/);
    await expect(p.act(Float32Array.of(0, NaN, 0), new Float32Array(2))).rejects.toThrow(/obs\[1\] is NaN/);
    expect(() => new GaussianPolicy({ obsDim: 2, actDim: 1, obsStd: [1, 0] })).toThrow(/obsStd/);
    expect(() => new GaussianPolicy({ obsDim: 2, actDim: 1, actLow: [1], actHigh: [0] })).toThrow(/actLow/);
    await p.release();
  });
});

/** A contextual bandit: the best action for obs x is (0.6·x0, −0.4·x1); score −‖a − a*‖². */
async function collect(p: GaussianPolicy, rng: Rng, prompts: number, G: number): Promise<{ batch: PgBatch; meanErr: number }> {
  const M = prompts * G;
  const obs = new Float32Array(M * 2);
  for (let b = 0; b < prompts; b++) {
    const x = [rng.uniform(-1, 1), rng.uniform(-1, 1)];
    for (let k = 0; k < G; k++) obs.set(x, (b * G + k) * 2);
  }
  const r = await p.act(obs, normals(rng, M * 2));
  const score = new Float32Array(M), advantage = new Float32Array(M);
  let meanErr = 0;
  for (let i = 0; i < M; i++) {
    const t0 = 0.6 * obs[2 * i]!, t1 = -0.4 * obs[2 * i + 1]!;
    score[i] = -((r.action[2 * i]! - t0) ** 2 + (r.action[2 * i + 1]! - t1) ** 2);
    meanErr += Math.hypot(r.mean[2 * i]! - t0, r.mean[2 * i + 1]! - t1) / M;
  }
  for (let b = 0; b < prompts; b++) {
    const s = score.subarray(b * G, (b + 1) * G);
    const mu = s.reduce((a, v) => a + v, 0) / G;
    const sd = Math.sqrt(s.reduce((a, v) => a + (v - mu) ** 2, 0) / G);
    for (let k = 0; k < G; k++) advantage[b * G + k] = (s[k]! - mu) / (sd + 1e-6);
  }
  return { batch: { obs, action: r.action, oldLogProb: r.logProb, advantage, weight: new Float32Array(M).fill(1) }, meanErr };
}

describe('ClippedPolicyGradient', () => {
  it('learns a contextual bandit from group-standardized advantages (seeded)', async () => {
    const p = new GaussianPolicy({ obsDim: 2, actDim: 2, hidden: [32], seed: 3 });
    const pg = await ClippedPolicyGradient.create(p, { ...DEFAULT_PG_CONFIG, optimizer: { lr: 3e-3, clipNorm: 1 }, minibatch: 256 });
    const rng = new Rng(11);
    const first = (await collect(p, rng, 32, 8)).meanErr;
    let err = first;
    for (let it = 0; it < 60; it++) {
      const { batch, meanErr } = await collect(p, rng, 32, 8);
      err = meanErr;
      const st = await pg.update(batch, rng);
      expect(st.clipFraction).toBeLessThanOrEqual(1);
      expect(Number.isFinite(st.loss)).toBe(true);
    }
    expect(first).toBeGreaterThan(0.3);
    expect(err).toBeLessThan(0.1);
    await pg.release();
    await p.release();
  });

  it('a zero-weight batch leaves the policy unchanged; a weighted one moves it', async () => {
    const p = new GaussianPolicy({ obsDim: 2, actDim: 2, hidden: [8], seed: 5 });
    const pg = await ClippedPolicyGradient.create(p);
    const rng = new Rng(2);
    const { batch } = await collect(p, rng, 8, 4);
    const before = p.paramNames().map((n) => Float32Array.from(p.store.get(n).data));
    await pg.update({ ...batch, weight: new Float32Array(batch.weight.length) }, rng);
    p.paramNames().forEach((n, i) => expect(Array.from(p.store.get(n).data)).toEqual(Array.from(before[i]!)));
    await pg.update(batch, rng);
    const moved = p.paramNames().some((n, i) => p.store.get(n).data.some((v, j) => v !== before[i]![j]));
    expect(moved).toBe(true);
    await pg.release();
    await p.release();
  });

  it('targetKl stops an update once a minibatch measures the KL past 1.5x the target; without it every epoch runs', async () => {
    // A small log-std: each minibatch step moves the distribution far (the regime the target guards).
    const make = async (targetKl?: number) => {
      const p = new GaussianPolicy({ obsDim: 2, actDim: 2, hidden: [16], initLogStd: -2.5, seed: 4 });
      return { p, pg: await ClippedPolicyGradient.create(p, { ...DEFAULT_PG_CONFIG, optimizer: { lr: 3e-3, clipNorm: 1 }, epochs: 8, minibatch: 32, ...(targetKl === undefined ? {} : { targetKl }) }) };
    };
    const runs = [await make(), await make(0.01), await make(1e6)];
    const { batch } = await collect(runs[0]!.p, new Rng(6), 16, 8); // 128 steps: 4 minibatches per epoch
    const [free, held, loose] = await Promise.all(runs.map((r) => r.pg.update(batch, new Rng(1))));
    expect(free!.minibatches).toBe(32);
    expect(free!.stoppedEarly).toBe(false);
    expect(held!.stoppedEarly).toBe(true);
    expect(held!.minibatches).toBeGreaterThan(1);
    expect(held!.minibatches).toBeLessThan(32);
    // A target never reached changes nothing: the same steps, the same parameters.
    expect(loose!.minibatches).toBe(32);
    runs[0]!.p.paramNames().forEach((n) => expect(Array.from(runs[2]!.p.store.get(n).data)).toEqual(Array.from(runs[0]!.p.store.get(n).data)));
    // The held policy stays closer to the one that acted (KL on the batch).
    const kl = async (p: GaussianPolicy) => {
      const lp = await p.logProb(batch.obs, batch.action);
      return lp.reduce((s, v, i) => s + batch.oldLogProb[i]! - v, 0) / lp.length;
    };
    expect(await kl(runs[1]!.p)).toBeLessThan(await kl(runs[0]!.p));
    await expect(ClippedPolicyGradient.create(runs[0]!.p, { ...DEFAULT_PG_CONFIG, targetKl: 0 })).rejects.toThrow(/targetKl must be a positive number, got 0/);
    for (const r of runs) {
      await r.pg.release();
      await r.p.release();
    }
  });

  it('klCoef holds the policy near the one it started from under noise advantages; its first step is the plain one', async () => {
    // Advantages that are pure noise (what sparse groups mostly give): without the penalty the mean drifts away.
    const make = async (klCoef?: number) => {
      const p = new GaussianPolicy({ obsDim: 2, actDim: 2, hidden: [16], seed: 8 });
      return { p, pg: await ClippedPolicyGradient.create(p, { ...DEFAULT_PG_CONFIG, optimizer: { lr: 3e-3, clipNorm: 1 }, epochs: 2, minibatch: 64, ...(klCoef === undefined ? {} : { klCoef }) }) };
    };
    const runs = [await make(), await make(2)];
    const probe = Float32Array.from({ length: 64 * 2 }, (_, i) => Math.sin(i));
    const mean0 = (await runs[0]!.p.act(probe, new Float32Array(128))).mean;
    // The penalty's gradient is zero at the reference: one minibatch step from it is the plain step.
    const one = await collect(runs[0]!.p, new Rng(3), 8, 8);
    const single = await Promise.all(runs.map(async (r) => {
      const q = new GaussianPolicy({ obsDim: 2, actDim: 2, hidden: [16], seed: 8 });
      const pg = await ClippedPolicyGradient.create(q, { ...r.pg.config, epochs: 1 });
      const st = await pg.update(one.batch, new Rng(1));
      const v = q.paramNames().map((n) => Array.from(q.store.get(n).data));
      await pg.release();
      await q.release();
      return { st, v };
    }));
    single[1]!.v.forEach((v, i) => v.forEach((x, j) => expect(x).toBeCloseTo(single[0]!.v[i]![j]!, 6)));
    // Adam's first step is about lr·sign(g), so compare the gradient (measured before clipping) and the loss too.
    expect(single[1]!.st.gradNorm).toBeCloseTo(single[0]!.st.gradNorm, 5);
    expect(single[1]!.st.loss).toBeCloseTo(single[0]!.st.loss, 6);
    expect(single[1]!.st.refKl).toBeCloseTo(0, 6);
    const rng = new Rng(12);
    const stats = [];
    for (let it = 0; it < 40; it++) {
      const obs = Float32Array.from({ length: 64 * 2 }, () => rng.uniform(-1, 1));
      const noise = normals(rng, 64 * 2), advantage = normals(rng, 64);
      for (const r of runs) {
        const a = await r.p.act(obs, noise);
        stats.push(await r.pg.update({ obs, action: a.action, oldLogProb: a.logProb, advantage, weight: new Float32Array(64).fill(1) }, new Rng(it)));
      }
    }
    const drift = async (p: GaussianPolicy) => {
      const m = (await p.act(probe, new Float32Array(128))).mean;
      return Math.sqrt(m.reduce((s, v, i) => s + (v - mean0[i]!) ** 2, 0) / m.length);
    };
    const [free, held] = [await drift(runs[0]!.p), await drift(runs[1]!.p)];
    expect(free).toBeGreaterThan(0.05);
    expect(held).toBeLessThan(0.5 * free);
    // The penalized run reports a positive KL to its reference; the plain one none.
    expect(stats.at(-1)!.refKl).toBeGreaterThan(0);
    expect(stats.at(-2)!.refKl).toBeNull();
    await expect(ClippedPolicyGradient.create(runs[0]!.p, { ...DEFAULT_PG_CONFIG, klCoef: -1 })).rejects.toThrow(/klCoef must be a number ≥ 0, got -1/);
    for (const r of runs) {
      await r.pg.release();
      await r.p.release();
    }
  });

  it('rejects a malformed batch with the field named', async () => {
    const p = new GaussianPolicy({ obsDim: 2, actDim: 2, hidden: [8] });
    const pg = await ClippedPolicyGradient.create(p);
    const rng = new Rng(1);
    const { batch } = await collect(p, rng, 2, 2);
    await expect(pg.update({ ...batch, weight: new Float32Array(3) }, rng)).rejects.toThrow(/weight has 3 values, expected 4/);
    const bad = Float32Array.from(batch.advantage);
    bad[2] = NaN;
    await expect(pg.update({ ...batch, advantage: bad }, rng)).rejects.toThrow(/advantage\[2\] is NaN/);
    await pg.release();
    await p.release();
  });

  it.each([[undefined], [0.5]])('a checkpoint restored into a fresh policy continues exactly as the original (klCoef %s: its reference too)', async (klCoef) => {
    // The fresh one starts from other weights: with klCoef its reference must come from the checkpoint, not from them.
    const make = async (seed: number) => {
      const p = new GaussianPolicy({ obsDim: 2, actDim: 2, hidden: [8], seed });
      return { p, pg: await ClippedPolicyGradient.create(p, { ...DEFAULT_PG_CONFIG, minibatch: 8, ...(klCoef === undefined ? {} : { klCoef }) }) };
    };
    const a = await make(9);
    const dataRng = new Rng(3);
    const batches = [(await collect(a.p, dataRng, 4, 4)).batch, (await collect(a.p, dataRng, 4, 4)).batch];
    await a.pg.update(batches[0]!, new Rng(1));
    const ck = join(dir, `pg-${klCoef ?? 0}.safetensors`);
    a.pg.saveCheckpoint(ck);
    await a.pg.update(batches[1]!, new Rng(2));
    const b = await make(10);
    b.pg.loadCheckpoint(ck);
    await b.pg.update(batches[1]!, new Rng(2));
    for (const n of a.p.paramNames()) expect(Array.from(b.p.store.get(n).data)).toEqual(Array.from(a.p.store.get(n).data));
    if (klCoef !== undefined) {
      // A checkpoint written without the penalty has no reference to give: a named error, not a silent new one.
      const plain = await ClippedPolicyGradient.create(b.p, { ...DEFAULT_PG_CONFIG, minibatch: 8 });
      plain.saveCheckpoint(join(dir, 'pg-plain.safetensors'));
      await plain.release();
      expect(() => b.pg.loadCheckpoint(join(dir, 'pg-plain.safetensors'))).toThrow(/has no reference policy .*pg-plain\.safetensors\.reference/);
    }
    for (const x of [a, b]) {
      await x.pg.release();
      await x.p.release();
    }
  });
});

describe('exportPolicy', () => {
  it('writes an artifact onnx.checker accepts whose action is the clipped mean, with its deployment metadata', async () => {
    const p = new GaussianPolicy({ obsDim: 3, actDim: 2, hidden: [8], seed: 2, obsMean: [0.1, 0, -0.2], obsStd: [2, 1, 0.5], actLow: [-1, 0], actHigh: [1, 0.5] });
    const path = join(dir, 'policy.onnx');
    const info = exportPolicy(p, path, { observationNames: ['a', 'b', 'c'], actionNames: ['x', 'y'], controlHz: 50, policyVersion: 'v3', runId: 'runs/t' });
    expect(onnxCheck(path).opset).toBe(17);
    expect(info.metadata.control_hz).toBe('50');
    expect(JSON.parse(info.metadata.action_high!)).toEqual([1, 0.5]);
    expect(info.metadata.training_run).toBe('runs/t');
    const rng = new Rng(8);
    const obs = Float32Array.from({ length: 4 * 3 }, () => rng.uniform(-3, 3));
    const session = await ort.InferenceSession.create(path);
    const out = (await session.run({ obs: new ort.Tensor('float32', obs, [4, 3]) })).action!.data as Float32Array;
    const mean = (await p.act(obs, new Float32Array(8))).mean;
    out.forEach((v, i) => expect(v).toBeCloseTo(Math.min(i % 2 ? 0.5 : 1, Math.max(i % 2 ? 0 : -1, mean[i]!)), 5));
    expect(() => exportPolicy(p, path, { observationNames: ['a'], actionNames: ['x', 'y'], controlHz: 50, policyVersion: 'v', runId: 'r' })).toThrow(/1 observation names for obsDim 3/);
    await session.release();
    await p.release();
  });
});
