// Digital-twin imagination for image policies: the twin (sim/twin.ts) renders the task camera from an
// observation vector alone and matches the simulator's camera on true states; imaginePolicy feeds a policy
// the twin's renders of the world model's predictions (never the simulator's), equals the fused
// ModelEnv.imagine for a policy that reads no image, and keeps what the policy gradient needs to recompute
// log-probs; the gap it leaves on `reach` (a fitted ensemble, a behaviour-cloned VLA) stays within stated bounds.
// imaginedRollouts cuts each imagined rollout at its predicted success and scores it there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { exploratoryEpisodes, makeEnv, SceneTwin, type Env } from '../sim/index.js';
import { EnsembleModel, ModelEnv, TransitionBuffer, repeatRows } from '../worldmodel/index.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { VlaPolicy } from '../policies/vla.js';
import { behaviourClone } from '../policies/bc.js';
import { expertDemonstrations } from '../policies/demos.js';
import { imaginePolicy, imaginedRollouts, imaginedSteps, type ImaginedArrays } from '../wmrl/imagine-policy.js';
import { measureTwinGap } from '../wmrl/twin-gap.js';

const S = 32;

/** Fraction of pixels whose colour differs. */
function changed(a: Uint8Array, b: Uint8Array): number {
  let c = 0;
  for (let p = 0; p < a.length; p += 3) if (a[p] !== b[p] || a[p + 1] !== b[p + 1] || a[p + 2] !== b[p + 2]) c++;
  return c / (a.length / 3);
}

describe('the scene twin', () => {
  it.each(['reach', 'push'])('%s: renders the true state as the simulator camera does, from the observation vector alone', async (task) => {
    const env = await makeEnv({ task, image: S });
    const twin = await SceneTwin.create(task, S);
    try {
      let o = env.reset(4);
      const expert = env.expert();
      let worst = 0;
      for (let t = 0; t < 40; t++) {
        worst = Math.max(worst, changed(twin.render(o.state), o.image!));
        o = env.step(expert.act(o)).obs;
      }
      // float32 states and the cube's unobserved yaw leave a few edge pixels
      expect(worst).toBeLessThan(0.005);
      // a batch renders each state in turn
      const two = new Float32Array(2 * twin.dim);
      two.set(o.state, 0);
      two.set(env.reset(9).state, twin.dim);
      const batch = twin.render(two);
      expect(Array.from(batch.subarray(twin.imageBytes))).toEqual(Array.from(twin.render(two.subarray(twin.dim))));
      expect(changed(batch.subarray(0, twin.imageBytes), batch.subarray(twin.imageBytes))).toBeGreaterThan(0.01);
    } finally {
      twin.dispose();
      env.dispose();
    }
  });

  it('moves what the state declares: joint angles and target positions change the image', async () => {
    const env = await makeEnv({ task: 'reach' });
    const twin = await SceneTwin.create('reach', S);
    const s = env.reset(2).state;
    const base = twin.render(s);
    const turned = s.slice();
    turned[0] += 1; // shoulder
    const moved = s.slice();
    moved[6] = -moved[6]!; // red target x
    moved[7] = -moved[7]!;
    expect(changed(twin.render(turned), base)).toBeGreaterThan(0.005);
    expect(changed(twin.render(moved), base)).toBeGreaterThan(0.002);
    expect(() => twin.render(s.subarray(1))).toThrow(/not a positive multiple of the layout's 17/);
    const bad = s.slice();
    bad[3] = NaN;
    expect(() => twin.render(bad)).toThrow(/state 0 entry 3 is NaN/);
    twin.dispose();
    env.dispose();
  });
});

describe('imaginePolicy on reach with a fitted world model', () => {
  let sim: Env, twin: SceneTwin, model: EnsembleModel, vla: VlaPolicy;
  beforeAll(async () => {
    const data = await exploratoryEpisodes('reach', 60, 0, { maxSteps: 80 });
    const buf = new TransitionBuffer(data.dObs, data.dAct);
    for (const e of data.episodes) buf.addEpisode({ ...e, weight: 1 });
    model = new EnsembleModel({ dObs: data.dObs, dAct: data.dAct, members: 3, hidden: [128, 128], seed: 1 });
    await model.fit(buf.transitions(), { epochs: 25, lr: 3e-3, batchSize: 128, seed: 1 });
    sim = await makeEnv({ task: 'reach', image: S });
    twin = await SceneTwin.create('reach', S);
    vla = new VlaPolicy({ layout: sim.layout, actDim: 2, image: { height: S, width: S }, instructions: sim.observationSpace.instructions, convChannels: [8, 16], imageFeatures: 32, hidden: [64, 64], seed: 0 });
    await behaviourClone(vla, expertDemonstrations(sim, 6, 100), { epochs: 15, batchSize: 64 });
  });
  afterAll(async () => {
    await vla.release();
    await model.release();
    twin.dispose();
    sim.dispose();
  });

  const startsOf = (seeds: number[]) => {
    const obs = new Float32Array(seeds.length * twin.dim);
    const instructions = seeds.map((seed, i) => {
      const o = sim.reset(seed);
      obs.set(o.state, i * twin.dim);
      return o.instruction;
    });
    return { obs, instructions };
  };

  it('the VLA sees the twin\'s renders of the predicted states; the log-probs recompute from what it kept', async () => {
    const B = 2, G = 3, N = B * G, H = 6, D = twin.dim, px = twin.imageBytes;
    const s = startsOf([300, 301]);
    const start = { obs: repeatRows(s.obs, D, G), instructions: s.instructions.flatMap((x) => [x, x, x]) };
    const env = new ModelEnv(model, { members: 'fixed', seed: 2 });
    const im = await imaginePolicy(env, twin, vla, start, H, { seed: 5, members: [0, 1, 2, 0, 1, 2] });
    expect([im.obs.length, im.actionRaw.length, im.action.length, im.logProb.length, im.reward.length, im.successProb.length, im.memberReward.length, im.images.length])
      .toEqual([N * (H + 1) * D, N * H * 2, N * H * 2, N * H, N * H, N * H, 3 * N * H, N * (H + 1) * px]);
    expect(Array.from(im.member.subarray(0, H))).toEqual(new Array(H).fill(0));
    for (const v of im.action) expect(Math.abs(v)).toBeLessThanOrEqual(1);
    // every image is the twin's render of the observation at that step (t = 0: the start state)
    for (const i of [0, 4]) for (const t of [0, 3, H]) {
      const row = im.obs.subarray((i * (H + 1) + t) * D, (i * (H + 1) + t + 1) * D);
      expect(changed(im.images.subarray((i * (H + 1) + t) * px, (i * (H + 1) + t + 1) * px), twin.render(row))).toBe(0);
    }
    // the predicted states are not the simulator's: replaying rollout 0's actions gives other states
    sim.reset(300);
    let truth: Float32Array = new Float32Array(0);
    for (let t = 0; t < H; t++) truth = sim.step(im.action.subarray(t * 2, (t + 1) * 2)).obs.state;
    const last = im.obs.subarray(H * D, (H + 1) * D);
    expect(last.some((v, k) => Math.abs(v - truth[k]!) > 1e-4)).toBe(true);
    // the group's rollouts share the start but not the noise
    expect(Array.from(im.obs.subarray(0, D))).toEqual(Array.from(im.obs.subarray((H + 1) * D, (H + 2) * D)));
    expect(im.actionRaw[0]).not.toBe(im.actionRaw[H * 2]);
    // the policy gradient's recompute: same log-probs from the kept obs, samples, images and instructions
    for (const i of [1, 5]) {
      const st = imaginedSteps(im, i);
      const lp = await vla.logProb(st.obs, st.actionRaw, st.context);
      lp.forEach((v, t) => expect(v).toBeCloseTo(st.logProb[t]!, 3));
    }
    expect(() => imaginedSteps(im, N)).toThrow(/rollout 6 is not in \[0, 6\)/);
    await env.release();
  });

  it('a policy that reads no image: the same rollouts as the fused ModelEnv.imagine', async () => {
    const D = twin.dim, H = 5, N = 4;
    const pol = new GaussianPolicy({ obsDim: D, actDim: 2, hidden: [32], initLogStd: -0.7, seed: 4 });
    const s = startsOf([400, 401, 402, 403]);
    const rng = new Rng(8);
    const noise = Float32Array.from({ length: N * H * 2 }, () => rng.normal());
    const members = [2, 0, 1, 2];
    const a = await imaginePolicy(new ModelEnv(model, { members: 'fixed' }), null, pol, s, H, { noise, members });
    const b = await new ModelEnv(model, { members: 'fixed' }).imagine(s.obs, pol.graphPolicy(), H, { policyNoise: noise, members });
    a.obs.forEach((v, k) => expect(v).toBeCloseTo(b.obs[k]!, 4));
    a.reward.forEach((v, k) => expect(v).toBeCloseTo(b.reward[k]!, 4));
    a.logProb.forEach((v, k) => expect(v).toBeCloseTo(b.policy.logProb![k]!, 3));
    a.actionRaw.forEach((v, k) => expect(v).toBeCloseTo(b.policy.action_raw![k]!, 4));
    a.memberReward.forEach((v, k) => expect(v).toBeCloseTo(b.memberReward[k]!, 4));
    expect(a.images).toHaveLength(0);
    await expect(imaginePolicy(new ModelEnv(model), null, vla, s, H)).rejects.toThrow(/reads camera images; give the task's twin/);
    await pol.release();
  });

  it('the gap: twin images of predicted states against the camera at the true states, within the stated bounds', async () => {
    const env = new ModelEnv(model, { members: 'mean' });
    const gap = await measureTwinGap(env, twin, vla, sim, [5000, 5001, 5002, 5003, 5004, 5005], 20, { meanActions: true });
    const m = gap.mean;
    console.log(`twin gap (reach, ${S} px, H 20, 6 rollouts): pixel MAE ${(100 * m.pixelMae).toFixed(3)}% (changed ${(100 * m.pixelChanged).toFixed(2)}% of pixels), floor ${(100 * m.floorMae).toFixed(4)}%, frozen image ${(100 * m.staticMae).toFixed(3)}%; joint RMSE ${m.stateRmse.toFixed(4)} rad; VLA action gap from the image ${m.actionImage.toExponential(2)}, total ${m.actionTotal.toFixed(4)}, frozen image ${m.actionStatic.toExponential(2)}`);
    // Rendering from the layout alone costs nearly nothing when the state is right.
    expect(m.floorChanged).toBeLessThan(0.002);
    // Bounds (measured: MAE 0.08%, 1.3% of pixels changed; action gap from the image 1e-4):
    expect(m.pixelMae).toBeLessThan(0.005);
    expect(m.pixelChanged).toBeLessThan(0.05);
    expect(m.actionImage).toBeLessThan(0.01);
    // Predicted renders track the scene better than not updating the image at all.
    expect(m.pixelMae).toBeLessThan(m.staticMae);
    // The gap grows with the horizon as the prediction drifts.
    expect(gap.perStep[19]!.stateRmse).toBeGreaterThan(gap.perStep[0]!.stateRmse);
    await env.release();
  });
});

describe('imaginedRollouts (a trainer\'s imagined rollouts)', () => {
  // N = 2 rollouts of H = 4 steps, D = 1, A = 1, E = 2 members, 1-byte images.
  const H = 4;
  const im: ImaginedArrays = {
    obs: Float32Array.of(0, 1, 2, 3, 4, 10, 11, 12, 13, 14),
    actionRaw: Float32Array.of(0.1, 0.2, 0.3, 0.4, 1.1, 1.2, 1.3, 1.4),
    logProb: Float32Array.of(-1, -2, -3, -4, -5, -6, -7, -8),
    reward: Float32Array.of(1, 2, 3, 4, 1, 1, 1, 1),
    // Rollout 0 passes 0.5 at step 1; rollout 1 never does.
    successProb: Float32Array.of(0.1, 0.7, 0.9, 0.2, 0.1, 0.2, 0.3, 0.4),
    memberReward: Float32Array.of(1, 3, 9, 9, 0, 0, 0, 0, /* member 1 */ 1, 1, 9, 9, 2, 2, 2, 2),
    images: Uint8Array.of(0, 1, 2, 3, 4, 10, 11, 12, 13, 14),
    imageBytes: 1,
    instructions: ['reach the red', 'reach the blue'],
  };

  it('ends a rollout at its first step past the success threshold and scores it there, its members\' variance along the same steps', () => {
    const r = imaginedRollouts(im, H, { image: { height: 1, width: 1 }, instruction: { vocabulary: [], maxTokens: 1 } }, { successThreshold: 0.5, mode: 'return', k: 5 });
    expect(r.traj.map((t) => t.steps)).toEqual([2, 4]);
    expect(Array.from(r.traj[0]!.obs)).toEqual([0, 1]);
    expect(Array.from(r.traj[0]!.action)).toEqual([Math.fround(0.1), Math.fround(0.2)]);
    expect(Array.from(r.traj[1]!.logProb)).toEqual([-5, -6, -7, -8]);
    expect(Array.from(r.traj[1]!.images!)).toEqual([10, 11, 12, 13]);
    expect(r.traj[0]!.instructions).toEqual(['reach the red', 'reach the red']);
    expect(r.score).toEqual([3, 4]);
    // Members' scores over the kept steps: (4, 2) and (0, 8).
    expect(r.variance).toEqual([1, 16]);
    expect(r.successProb).toEqual([1, Math.fround(0.4)]);
    // No threshold passed: the whole horizon, scored as last minus first.
    const whole = imaginedRollouts(im, H, {}, { successThreshold: 1, mode: 'last-minus-first', k: 1 });
    expect(whole.traj.map((t) => t.steps)).toEqual([4, 4]);
    expect(whole.score).toEqual([3, 0]);
    expect(whole.traj[0]!.images).toBeUndefined();
    expect(whole.traj[0]!.instructions).toBeUndefined();
  });
});
