// World-model acceptance on held-out `reach` nominal sim data: one-step NLL and error, H = 20 open-loop
// replay error against the "no change" baseline, variance that predicts error, ONNX export, save/load/refit.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';
import { EnsembleModel, type Transitions } from '../worldmodel/index.js';
import { replayError, simEpisodes, toTransitions, type SimData } from './helpers/sim-transitions.js';
import { rankAgreement } from '../wmrl/gate.js';

const dir = mkdtempSync(join(tmpdir(), 'wm-fit-'));
const CONFIG = { members: 5, hidden: [128, 128, 128], seed: 1 };
const FIT = { epochs: 30, lr: 3e-3, batchSize: 128, seed: 1 };
const H = 20;
/** NLL per dim of a standard normal fitted to standardized targets: what a model that learned nothing scores. */
const UNIT_GAUSSIAN_NLL = 0.5 * Math.log(2 * Math.PI * Math.E);

let train: SimData, test: SimData, testT: Transitions, model: EnsembleModel;
beforeAll(async () => {
  train = await simEpisodes('reach', 150, 0);
  test = await simEpisodes('reach', 30, 10_000); // other seeds: other targets and start poses
  testT = toTransitions(test);
  model = new EnsembleModel({ dObs: train.dObs, dAct: train.dAct, obsNames: train.obsNames, ...CONFIG });
  await model.fit(toTransitions(train), FIT);
});
afterAll(async () => {
  await model.release();
  rmSync(dir, { recursive: true, force: true });
});

/** Columns whose value changes within an episode (the arm), as opposed to the fixed targets and goal one-hot. */
function movingDims(d: SimData): number[] {
  const t = toTransitions(d);
  return Array.from({ length: d.dObs }, (_, j) => j).filter((j) => t.obs.some((v, k) => k % d.dObs === j && v !== t.nextObs[k]));
}

describe('ensemble world model on held-out reach (nominal) data', () => {
  it('one step: NLL far below an unconditional Gaussian, error a small fraction of the delta variance', async () => {
    const ev = await model.evaluate(testT);
    const moving = movingDims(test);
    // joints, joint velocities, the tip, and the goal relative to the tip (entries 15, 16) move
    expect(moving).toEqual([0, 1, 2, 3, 4, 5, 15, 16]);
    // The fixed targets and the goal one-hot never change: not modeled, carried over exactly.
    for (let j = 0; j < test.dObs; j++) expect(Number.isNaN(ev.nllPerDim[j]!)).toBe(!moving.includes(j));
    console.log(`one-step held-out: nll ${ev.nll.toFixed(3)} (unit Gaussian ${UNIT_GAUSSIAN_NLL.toFixed(3)}), per dim ${moving.map((j) => ev.nllPerDim[j]!.toFixed(2)).join(' ')}, mseNorm ${ev.mseNorm.toExponential(2)}, rewardMse ${ev.rewardMse.toExponential(2)}, successBce ${ev.successBce.toFixed(3)}`);
    expect(ev.nll).toBeLessThan(UNIT_GAUSSIAN_NLL - 2);
    for (const j of moving) expect(ev.nllPerDim[j]).toBeLessThan(UNIT_GAUSSIAN_NLL - 0.5);
    // Baseline: predicting the training mean delta, in the same normalized units.
    const nz = model.normalizer;
    const D = test.dObs, n = testT.reward.length;
    let base = 0;
    for (let k = 0; k < n * D; k++) if (moving.includes(k % D)) base += ((testT.nextObs[k]! - testT.obs[k]! - nz.deltaMean[k % D]!) / nz.deltaStd[k % D]!) ** 2 / (n * moving.length);
    expect(ev.mseNorm).toBeLessThan(0.1 * base);
    const rMean = testT.reward.reduce((a, b) => a + b, 0) / n;
    const rVar = testT.reward.reduce((a, b) => a + (b - rMean) ** 2, 0) / n;
    expect(ev.rewardMse).toBeLessThan(0.5 * rVar);
  });

  it('H = 20 open-loop replay of recorded actions: error well below predicting no change', async () => {
    const r = await replayError(model, test, H);
    expect(r.windows).toBeGreaterThan(50);
    console.log(`H=${H} replay over ${r.windows} windows: model MSE ${r.model.toExponential(3)}, no-change baseline ${r.baseline.toExponential(3)}, ratio ${(r.model / r.baseline).toFixed(4)}`);
    expect(r.model).toBeLessThan(0.1 * r.baseline);
  });

  it("the ensemble's variance predicts its error (Spearman > 0.3), disagreement and total predicted variance alike", async () => {
    const D = test.dObs, E = model.members, n = testT.reward.length;
    const p = await model.predict(testT.obs, testT.action);
    const s2 = model.normalizer.deltaStd.map((s) => s * s);
    const disagreement = new Float64Array(n), total = new Float64Array(n), err = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < D; j++) {
        if (s2[j] === 0) continue; // not modeled: carried over exactly
        const at = (e: number) => (e * n + i) * D + j;
        let mu = 0, alea = 0;
        for (let e = 0; e < E; e++) {
          mu += p.nextObsMean[at(e)]! / E;
          alea += p.nextObsVar[at(e)]! / E;
        }
        let v = 0;
        for (let e = 0; e < E; e++) v += (p.nextObsMean[at(e)]! - mu) ** 2 / E;
        disagreement[i]! += v / s2[j]!;
        total[i]! += (v + alea) / s2[j]!;
        err[i]! += (mu - testT.nextObs[i * D + j]!) ** 2 / s2[j]!;
      }
    }
    const rd = rankAgreement(disagreement, err), rt = rankAgreement(total, err);
    console.log(`Spearman vs squared error: disagreement ${rd.toFixed(3)}, total predicted variance ${rt.toFixed(3)} (n = ${n})`);
    expect(rd).toBeGreaterThan(0.3);
    expect(rt).toBeGreaterThan(0.3);
  });

  it('exports a standalone ONNX model the onnx checker accepts and ORT reproduces the in-process predictions', async () => {
    const path = join(dir, 'wm.onnx');
    const info = model.exportOnnx(path);
    expect(info.inputs.map((i) => [i.name, i.shape])).toEqual([['obs', ['batch', test.dObs]], ['action', ['batch', test.dAct]]]);
    expect(info.outputs.map((o) => o.name)).toEqual(['next_obs_mean', 'next_obs_var', 'reward', 'success_prob']);
    expect(info.metadata.members).toBe('5');
    expect(JSON.parse(info.metadata.obs_names!)).toEqual(test.obsNames);
    execFileSync('/usr/bin/python3', ['-c', 'import sys, onnx; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)', path], { stdio: ['ignore', 'pipe', 'pipe'] });
    const n = 64;
    const obs = testT.obs.slice(0, n * test.dObs), action = testT.action.slice(0, n * test.dAct);
    const session = await nn.ort.InferenceSession.create(path);
    const out = await session.run({ obs: nn.tensor(obs, [n, test.dObs]), action: nn.tensor(action, [n, test.dAct]) });
    await session.release();
    const want = await model.predict(obs, action);
    const close = (a: Float32Array, b: Float32Array) => a.every((v, k) => Math.abs(v - b[k]!) <= 1e-5 + 1e-4 * Math.abs(b[k]!));
    expect(close(nn.f32(out.next_obs_mean), want.nextObsMean)).toBe(true);
    expect(close(nn.f32(out.next_obs_var), want.nextObsVar)).toBe(true);
    expect(close(nn.f32(out.reward), want.reward)).toBe(true);
    expect(close(nn.f32(out.success_prob), want.successProb)).toBe(true);
  });

  it('saves and loads (parameters and normalization), and a refit continues from the loaded parameters', async () => {
    const path = join(dir, 'wm.safetensors');
    model.save(path);
    const loaded = EnsembleModel.load(path);
    const n = 32;
    const [a, b] = [await model.predict(testT.obs.slice(0, n * test.dObs), testT.action.slice(0, n * test.dAct)), await loaded.predict(testT.obs.slice(0, n * test.dObs), testT.action.slice(0, n * test.dAct))];
    expect(Array.from(b.nextObsMean)).toEqual(Array.from(a.nextObsMean));
    expect(Array.from(b.reward)).toEqual(Array.from(a.reward));
    const deltaStd = Array.from(loaded.normalizer.deltaStd);
    // One more epoch on new data: the loaded model stays far better than a fresh one after the same epoch.
    const more = toTransitions(await simEpisodes('reach', 20, 500));
    const refit = await loaded.fit(more, { ...FIT, epochs: 1, val: testT });
    const fresh = new EnsembleModel({ dObs: test.dObs, dAct: test.dAct, ...CONFIG });
    const first = await fresh.fit(more, { ...FIT, epochs: 1, val: testT });
    expect(refit.val.nll).toBeLessThan(first.val.nll - 1);
    expect(Array.from(loaded.normalizer.deltaStd)).toEqual(deltaStd);
    await Promise.all([loaded.release(), fresh.release()]);
  });
});
