// The batched model env: shapes, seeding, member modes as documented, and the fused imagine path against
// plain step-by-step stepping with the same noise. Untrained small ensembles: these are behaviour tests.
import { afterAll, describe, expect, it, vi } from 'vitest';
import * as nn from '../nn/index.js';
import { EnsembleModel, ModelEnv, repeatRows, type GraphPolicy } from '../worldmodel/index.js';

const D = 6, A = 2, E = 4;
const model = new EnsembleModel({ dObs: D, dAct: A, members: E, hidden: [32, 32], seed: 3 });
afterAll(() => model.release());

const rng = new nn.Rng(17);
const rows = (n: number, w: number) => Float32Array.from({ length: n * w }, () => rng.uniform(-1, 1));

/** A Gaussian MLP policy: action = mean + exp(logStd) * noise, with its log-probability. */
function gaussianPolicy(seed: number): GraphPolicy & { mlp: nn.MLP } {
  const store = new nn.ParamStore(seed);
  const mlp = new nn.MLP(store, 'pi', { sizes: [D, 16, A], activation: 'tanh' });
  store.create('pi.log_std', [A], 'zeros').data.fill(-1);
  return {
    store,
    mlp,
    noiseDim: A,
    build(obs, noise) {
      const mean = mlp.forward(obs);
      const logStd = obs.graph.param('pi.log_std', [A]);
      const action = nn.add(mean, nn.mul(nn.exp(logStd), noise!));
      return { action, mean, logProb: nn.gaussianLogProb(action, mean, logStd) };
    },
  };
}

async function collect(env: ModelEnv, actions: Float32Array[]) {
  const steps = [];
  for (const a of actions) steps.push(await env.step(a));
  return steps;
}

describe('ModelEnv.step', () => {
  it('returns the documented shapes for N = B x G rollouts and moves the state', async () => {
    const B = 3, G = 4, N = B * G;
    const start = repeatRows(rows(B, D), D, G);
    expect(start.length).toBe(N * D);
    expect(Array.from(start.subarray(0, D))).toEqual(Array.from(start.subarray((G - 1) * D, G * D)));
    const env = new ModelEnv(model, { members: 'random', seed: 1 });
    env.reset(start);
    expect(env.n).toBe(N);
    const s = await env.step(rows(N, A));
    expect([s.obs.length, s.reward.length, s.successProb.length, s.disagreement.length, s.memberReward.length, s.member.length]).toEqual([N * D, N, N, N, E * N, N]);
    expect(Array.from(env.obs)).toEqual(Array.from(s.obs));
    expect(s.obs.some((v, i) => v !== start[i])).toBe(true);
    for (const p of s.successProb) expect(p > 0 && p < 1).toBe(true);
    for (const d of s.disagreement) expect(d).toBeGreaterThan(0);
    await env.release();
  });

  it('reproduces a run from its seed (members and sampled noise), and another seed differs', async () => {
    const start = rows(8, D);
    const actions = Array.from({ length: 5 }, () => rows(8, A));
    const run = async (seed: number) => {
      const env = new ModelEnv(model, { members: 'random', seed, sampleNoise: true });
      env.reset(start);
      const out = await collect(env, actions);
      await env.release();
      return out;
    };
    const [a, b, c] = [await run(5), await run(5), await run(6)];
    expect(a.map((s) => Array.from(s.obs))).toEqual(b.map((s) => Array.from(s.obs)));
    expect(a.map((s) => Array.from(s.member))).toEqual(b.map((s) => Array.from(s.member)));
    expect(a[4]!.obs.some((v, i) => v !== c[4]!.obs[i])).toBe(true);
  });

  it("'fixed' keeps each rollout's member for the whole rollout and predicts as that member alone", async () => {
    const N = 10;
    const start = rows(N, D);
    const env = new ModelEnv(model, { members: 'fixed', seed: 2 });
    env.reset(start);
    const actions = Array.from({ length: 6 }, () => rows(N, A));
    const steps = await collect(env, actions);
    const first = Array.from(steps[0]!.member);
    expect(new Set(first).size).toBeGreaterThan(1);
    for (const s of steps) expect(Array.from(s.member)).toEqual(first);
    // Step 1 equals the chosen member's own prediction.
    const p = await model.predict(start, actions[0]!);
    for (let i = 0; i < N; i++) {
      const m = first[i]!;
      for (let j = 0; j < D; j++) expect(steps[0]!.obs[i * D + j]).toBeCloseTo(p.nextObsMean[(m * N + i) * D + j]!, 5);
      expect(steps[0]!.reward[i]).toBeCloseTo(p.reward[m * N + i]!, 5);
      for (let e = 0; e < E; e++) expect(steps[0]!.memberReward[e * N + i]).toBeCloseTo(p.reward[e * N + i]!, 5);
    }
    // Members pinned at reset are used as given.
    env.reset(start, { members: new Array(N).fill(3) });
    expect(Array.from((await env.step(actions[0]!)).member)).toEqual(new Array(N).fill(3));
    await env.release();
  });

  it("'random' draws members per step; 'mean' is deterministic whatever the seed and noise setting", async () => {
    const N = 16;
    const start = rows(N, D);
    const actions = Array.from({ length: 4 }, () => rows(N, A));
    const random = new ModelEnv(model, { members: 'random', seed: 3 });
    random.reset(start);
    const rs = await collect(random, actions);
    expect(rs.some((s) => s.member[0] !== rs[0]!.member[0])).toBe(true);
    const means = [];
    for (const seed of [1, 2]) {
      const env = new ModelEnv(model, { members: 'mean', seed, sampleNoise: true });
      env.reset(start);
      means.push(await collect(env, actions));
      await env.release();
    }
    expect(means[0]!.map((s) => Array.from(s.obs))).toEqual(means[1]!.map((s) => Array.from(s.obs)));
    expect(Array.from(means[0]![0]!.member)).toEqual(new Array(N).fill(-1));
    // The mean step moves by the members' mean delta.
    const p = await model.predict(start, actions[0]!);
    for (let j = 0; j < D; j++) {
      const avg = Array.from({ length: E }, (_, e) => p.nextObsMean[e * N * D + j]!).reduce((a, b) => a + b, 0) / E;
      expect(means[0]![0]!.obs[j]).toBeCloseTo(avg, 5);
    }
    await random.release();
  });

  it("reads the model's parameters at every step, so an env outlives a refit", async () => {
    const m = new EnsembleModel({ dObs: D, dAct: A, members: 2, hidden: [8], seed: 1 });
    const env = new ModelEnv(m, { members: 'mean' });
    const start = rows(3, D), actions = rows(3, A);
    env.reset(start);
    const before = (await env.step(actions)).obs.slice();
    m.store.get('wm.net.l1.bias').data.fill(0.3);
    env.reset(start);
    const after = (await env.step(actions)).obs;
    expect(Math.abs(after[0]! - before[0]!)).toBeGreaterThan(0.1);
    const p = await m.predict(start, actions);
    expect(after[0]).toBeCloseTo((p.nextObsMean[0]! + p.nextObsMean[3 * D]!) / 2, 5);
    await Promise.all([env.release(), m.release()]);
  });

  it('names the problem on bad input', async () => {
    const env = new ModelEnv(model, { members: 'fixed' });
    await expect(env.step(rows(2, A))).rejects.toThrow(/before reset/);
    expect(() => env.reset(new Float32Array(D + 1))).toThrow(/startObs: 7 values is not a whole number of rows of 6/);
    const bad = rows(2, D);
    bad[D + 2] = NaN;
    expect(() => env.reset(bad)).toThrow(/startObs: not finite at row 1, column 2/);
    expect(() => env.reset(rows(2, D), { members: [0, E] })).toThrow(/member 4 of rollout 1 is not in \[0, 4\)/);
    env.reset(rows(2, D));
    await expect(env.step(rows(3, A))).rejects.toThrow(/actions: 3 rows, expected 2/);
    expect(() => new ModelEnv(model, { members: 'best' as never })).toThrow(/unknown member mode 'best'/);
  });
});

describe('ModelEnv.imagine (policy + ensemble in one graph)', () => {
  it('equals running the policy and stepping the env one step at a time with the same noise and members', async () => {
    const N = 6, H = 7;
    const policy = gaussianPolicy(9);
    const start = rows(N, D);
    const noise = Float32Array.from({ length: N * H * A }, () => rng.normal());
    const members = [0, 1, 2, 3, 1, 2];
    const env = new ModelEnv(model, { members: 'fixed', seed: 4 });
    // 3 steps per run: the unroll is chained across runs (3 + 3 + 1).
    const im = await env.imagine(start, policy, H, { policyNoise: noise, members, stepsPerRun: 3 });
    expect([im.obs.length, im.action.length, im.reward.length, im.memberReward.length, im.policy.logProb!.length, im.policy.mean!.length]).toEqual([N * (H + 1) * D, N * H * A, N * H, E * N * H, N * H, N * H * A]);

    const g = new nn.Graph();
    const obsIn = g.input('obs', ['n', D]);
    const noiseIn = g.input('noise', ['n', A]);
    const out = policy.build(obsIn, noiseIn);
    const prog = await nn.Program.inference([{ name: 'obs', tensor: obsIn }, { name: 'noise', tensor: noiseIn }], [{ name: 'action', tensor: out.action! }, { name: 'logProb', tensor: out.logProb! }], policy.store);
    env.reset(start, { members });
    let obs: Float32Array = start;
    for (let t = 0; t < H; t++) {
      const z = new Float32Array(N * A);
      for (let i = 0; i < N; i++) z.set(noise.subarray((i * H + t) * A, (i * H + t + 1) * A), i * A);
      const po = await prog.run({ obs: nn.tensor(obs, [N, D]), noise: nn.tensor(z, [N, A]) });
      const action = nn.f32(po.action);
      const s = await env.step(action);
      for (let i = 0; i < N; i++) {
        for (let k = 0; k < A; k++) expect(im.action[(i * H + t) * A + k]).toBeCloseTo(action[i * A + k]!, 5);
        for (let j = 0; j < D; j++) expect(im.obs[(i * (H + 1) + t + 1) * D + j]).toBeCloseTo(s.obs[i * D + j]!, 4);
        expect(im.reward[i * H + t]).toBeCloseTo(s.reward[i]!, 4);
        expect(im.successProb[i * H + t]).toBeCloseTo(s.successProb[i]!, 5);
        expect(im.disagreement[i * H + t]).toBeCloseTo(s.disagreement[i]!, 5);
        expect(im.policy.logProb![i * H + t]).toBeCloseTo(nn.f32(po.logProb)[i]!, 4);
        expect(im.member[i * H + t]).toBe(members[i]);
      }
      obs = s.obs;
    }
    await prog.release();
    await env.release();
  });

  it('runs what is left after the stepsPerRun runs in power-of-two runs: a few graphs serve every length, the rollouts those of one run', async () => {
    const N = 3;
    const policy = gaussianPolicy(5);
    const start = rows(N, D);
    const members = [0, 3, 1];
    const lengths = [13, 11, 7, 15, 9];
    const noise = lengths.map((H) => Float32Array.from({ length: N * H * A }, () => rng.normal()));
    // Each length in one run of its own graph.
    const whole = new ModelEnv(model, { members: 'fixed' });
    const ref = [];
    for (const [i, H] of lengths.entries()) ref.push(await whole.imagine(start, policy, H, { policyNoise: noise[i], members, stepsPerRun: H }));
    await whole.release();
    const compile = vi.spyOn(nn.Program, 'fromSpec');
    const env = new ModelEnv(model, { members: 'fixed' });
    try {
      for (const [i, H] of lengths.entries()) {
        // 13 = 8 + 4 + 1, 11 = 8 + 2 + 1, 7 = 4 + 2 + 1, 15 = 8 + 4 + 2 + 1, 9 = 8 + 1.
        const im = await env.imagine(start, policy, H, { policyNoise: noise[i], members, stepsPerRun: 8 });
        for (const k of ['obs', 'action', 'reward', 'successProb', 'disagreement', 'memberReward'] as const) expect(im[k]).toEqual(ref[i]![k]);
        expect(im.policy.logProb).toEqual(ref[i]!.policy.logProb);
      }
      // Graphs of 8, 4, 2 and 1 steps: one each, whatever the lengths.
      expect(compile).toHaveBeenCalledTimes(4);
    } finally {
      compile.mockRestore();
      await env.release();
    }
  });

  it('reads the policy parameters at each call (no recompiling), and is reproducible from the env seed', async () => {
    const N = 4, H = 5;
    const policy = gaussianPolicy(2);
    const start = rows(N, D);
    const run = async (seed: number) => {
      const env = new ModelEnv(model, { members: 'random', seed });
      const r = await env.imagine(start, policy, H);
      await env.release();
      return r;
    };
    const a = await run(8);
    const b = await run(8);
    expect(Array.from(a.obs)).toEqual(Array.from(b.obs));
    expect(Array.from(a.policyNoise)).toEqual(Array.from(b.policyNoise));
    const env = new ModelEnv(model, { members: 'mean' });
    const before = await env.imagine(start, policy, H, { policyNoise: a.policyNoise });
    policy.store.get('pi.l1.bias').data.fill(0.5);
    const after = await env.imagine(start, policy, H, { policyNoise: a.policyNoise });
    expect(Math.abs(after.action[0]! - before.action[0]!)).toBeGreaterThan(0.1);
    await expect(env.imagine(start, policy, H, { policyNoise: new Float32Array(3) })).rejects.toThrow(/policyNoise has 3 values, expected N x H x noiseDim = 4 x 5 x 2/);
    const noAction: GraphPolicy = { store: policy.store, noiseDim: 0, build: (obs) => ({ mean: policy.mlp.forward(obs) }) };
    await expect(env.imagine(start, noAction, H)).rejects.toThrow(/the policy returned no 'action' \(it returned mean\)/);
    await env.release();
  });
});
