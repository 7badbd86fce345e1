// The identities a task's state vector keeps (common/derived.ts): what reach and push declare is true of the sim's
// own observations, and the world model's imagination restores it after every predicted step (step() and the fused
// imagine() alike), where a model predicting every entry on its own breaks it; bad declarations are refused by name.
import { describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';
import { applyDerived, validateDerived, type DerivedEntries } from '../common/derived.js';
import { makeEnv } from '../sim/index.js';
import { EnsembleModel, ModelEnv, type GraphPolicy } from '../worldmodel/index.js';

/** The largest |applyDerived(next, prev) − next| over every step of a few episodes on `task` (expert with noise, and random). */
async function simViolation(task: string, commandHistory: number): Promise<{ worst: number; steps: number; d: DerivedEntries; dObs: number }> {
  const env = await makeEnv({ task, commandHistory });
  try {
    const d = env.derived;
    if (!d) throw new Error(`${task} declares no derived entries`);
    const rng = new nn.Rng(5);
    let worst = 0, steps = 0;
    for (let ep = 0; ep < 4; ep++) {
      let ob = env.reset(100 + ep);
      const expert = env.expert();
      for (;;) {
        const a = ep % 2 === 0 ? expert.act(ob).map((v) => Math.max(-1, Math.min(1, v + 0.3 * rng.normal()))) : Float32Array.from({ length: 2 }, () => rng.uniform(-1, 1));
        const r = env.step(a);
        const fixed = applyDerived(d, r.obs.state, ob.state);
        fixed.forEach((v, j) => (worst = Math.max(worst, Math.abs(v - r.obs.state[j]!))));
        steps++;
        ob = r.obs;
        if (r.terminated || r.truncated) break;
      }
    }
    return { worst, steps, d, dObs: env.observationSpace.state.shape[0] };
  } finally {
    env.dispose();
  }
}

describe('derived observation entries', () => {
  it('reach and push declare identities their sim observations keep (held entries, the tip by forward kinematics, the offsets), with a command tail after them', async () => {
    for (const task of ['reach', 'push']) {
      const { worst, steps, d, dObs } = await simViolation(task, 3);
      expect(steps).toBeGreaterThan(100);
      // Float32 observations of float64 physics: the identities hold to rounding.
      expect(worst).toBeLessThan(1e-5);
      expect(d.computed.map((x) => x.entry)).toEqual(expect.arrayContaining([4, 5]));
      expect(() => validateDerived(d, dObs, dObs - 3 * 2)).not.toThrow();
    }
  });

  it('imagination restores them after every step; a model predicting every entry on its own breaks them', async () => {
    const env = await makeEnv({ task: 'reach', commandHistory: 1 });
    const d = env.derived!;
    const dObs = env.observationSpace.state.shape[0], dAct = 2, N = 4, H = 6;
    const starts = new Float32Array(N * dObs);
    for (let i = 0; i < N; i++) starts.set(env.reset(i).state, i * dObs);
    env.dispose();
    const cfg = { dObs, dAct, members: 2, hidden: [16], actionHistory: 1, commandHistory: 1, seed: 4 };
    const withIds = new EnsembleModel({ ...cfg, derived: d });
    const without = new EnsembleModel(cfg);
    const openLoop: GraphPolicy = { store: new nn.ParamStore(0), noiseDim: dAct, build: (_obs, noise) => ({ action: noise! }) };
    const rng = new nn.Rng(2);
    const sent = Float32Array.from({ length: N * H * dAct }, () => rng.uniform(-1, 1));
    const members = Int32Array.of(0, 1, 0, 1);
    const violation = (obs: Float32Array) => {
      let worst = 0;
      for (let i = 0; i < N; i++) for (let t = 1; t <= H; t++) {
        const row = (k: number) => obs.subarray((i * (H + 1) + k) * dObs, (i * (H + 1) + k + 1) * dObs);
        applyDerived(d, row(t), row(t - 1)).forEach((v, j) => (worst = Math.max(worst, Math.abs(v - row(t)[j]!))));
      }
      return worst;
    };
    const a = new ModelEnv(withIds, { members: 'fixed', seed: 0 });
    const b = new ModelEnv(without, { members: 'fixed', seed: 0 });
    const im = await a.imagine(starts, openLoop, H, { members, policyNoise: sent, stepsPerRun: 4 });
    const raw = await b.imagine(starts, openLoop, H, { members, policyNoise: sent, stepsPerRun: 4 });
    // An untrained model moves every entry; the declared identities then fail by far more than rounding.
    expect(violation(raw.obs)).toBeGreaterThan(1e-2);
    expect(violation(im.obs)).toBeLessThan(1e-5);
    // Entries the declaration leaves alone are the model's prediction, as without it (same weights and seed).
    const free = Array.from({ length: dObs }, (_, j) => j).filter((j) => !d.held.includes(j) && !d.computed.some((x) => x.entry === j));
    expect(free).toEqual(expect.arrayContaining([0, 1, 2, 3]));
    for (let i = 0; i < N; i++) for (const j of free) expect(im.obs[(i * (H + 1) + 1) * dObs + j]).toBeCloseTo(raw.obs[(i * (H + 1) + 1) * dObs + j]!, 5);
    // step() restores them as the fused imagine() does.
    a.reset(starts, { members });
    for (let t = 0; t < H; t++) {
      const act = Float32Array.from({ length: N * dAct }, (_, r) => sent[(Math.floor(r / dAct) * H + t) * dAct + (r % dAct)]!);
      const s = await a.step(act);
      for (let i = 0; i < N; i++) for (let j = 0; j < dObs; j++) expect(s.obs[i * dObs + j]).toBeCloseTo(im.obs[(i * (H + 1) + t + 1) * dObs + j]!, 5);
    }
    // The declaration travels with a saved model.
    expect(JSON.parse(JSON.stringify(withIds.config)).derived).toEqual(d);
    await a.release();
    await b.release();
    await withIds.release();
    await without.release();
  });

  it('refuses a declaration that does not fit the observation, naming the fault', () => {
    const tip = { entry: 4, expr: { entry: 0 } };
    expect(() => new EnsembleModel({ dObs: 6, dAct: 2, derived: { held: [9], computed: [] } })).toThrow(/held entry 9 is not an index of the 6-entry observation/);
    expect(() => new EnsembleModel({ dObs: 6, dAct: 2, derived: { held: [4], computed: [tip] } })).toThrow(/entry 4 is declared twice/);
    expect(() => new EnsembleModel({ dObs: 6, dAct: 2, commandHistory: 1, derived: { held: [5], computed: [] } })).toThrow(/held entry 5 lies in the command tail \(entries 4\.\.5\)/);
    expect(() => new EnsembleModel({ dObs: 6, dAct: 2, derived: { held: [], computed: [{ entry: 4, expr: { entry: 7 } }] } })).toThrow(/expression of entry 4 reads entry 7/);
    expect(() => new EnsembleModel({ dObs: 6, dAct: 2, derived: { held: [], computed: [{ entry: 4, expr: { add: [] } }] } })).toThrow(/expression of entry 4 has an empty add/);
    expect(() => new EnsembleModel({ dObs: 6, dAct: 2, derived: { held: [], computed: [{ entry: 4, expr: { tan: { entry: 0 } } as never }] } })).toThrow(/unknown node 'tan'/);
  });
});
