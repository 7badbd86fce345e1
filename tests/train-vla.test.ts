// Post-training any policy of the one interface, the VLA included: the clipped policy gradient reads each
// step's image and instruction from the batch; a robot episode gives the VLA the robot's own camera image and
// instruction and keeps them with the step (so log π recomputes exactly); held-out evaluation renders each
// env's camera for it; both embodied trainers post-train a VLA on the sim robot under the gap profile, WMRL
// imagining it on the digital twin's renders of predicted states, or through its latent face (a map distilled
// from the frozen encoder) while the VLA itself runs the anchors on the robot's camera.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { makeEnv, SceneTwin, type Env } from '../sim/index.js';
import { EnsembleModel, TransitionBuffer, type Transitions } from '../worldmodel/index.js';
import { VlaPolicy } from '../policies/vla.js';
import { LatentVla } from '../policies/latent-vla.js';
import { behaviourClone } from '../policies/bc.js';
import { evaluateOn, expertDemonstrations } from '../policies/demos.js';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG, type PgBatch } from '../policies/pg.js';
import { correctorConfig } from '../wmrl/corrector.js';
import { evaluateSuccess, pgBatch, robotEpisode } from '../wmrl/embodied.js';
import { SimPrompts, simRobotTarget } from '../wmrl/sim-setup.js';
import { trainStandard } from '../wmrl/train_standard.js';
import { trainWmrl, type WmrlConfig } from '../wmrl/train_wmrl.js';
import { exploratoryEpisodes } from '../sim/index.js';
import { withoutEncoderSplit } from './helpers/policies.js';

const S = 16;
const dir = mkdtempSync(join(tmpdir(), 'train-vla-'));
let env: Env;
let vla: VlaPolicy;
let snapshot: Float32Array[];
const fresh = () => vla.paramNames().forEach((n, i) => vla.store.set(n, snapshot[i]!));
const params = () => vla.paramNames().map((n) => Float32Array.from(vla.store.get(n).data));

beforeAll(async () => {
  env = await makeEnv({ task: 'reach', image: S, seed: 0 });
  vla = new VlaPolicy({ layout: env.layout, actDim: 2, image: { height: S, width: S }, instructions: env.observationSpace.instructions, convChannels: [4, 8], imageFeatures: 16, embedDim: 8, hidden: [32], initLogStd: -1, seed: 0 });
  await behaviourClone(vla, expertDemonstrations(env, 6, 100), { epochs: 10, batchSize: 64 });
  snapshot = params();
}, 60_000);
afterAll(async () => {
  env.dispose();
  await vla.release();
  rmSync(dir, { recursive: true, force: true });
});

describe('ClippedPolicyGradient on a VLA', () => {
  it('raises log π of positively advantaged actions, read on their own images and instructions', async () => {
    fresh();
    const o = env.reset(3);
    const M = 64, D = vla.obsDim, A = vla.actDim;
    const rng = new Rng(1);
    const obs = new Float32Array(M * D), images = new Uint8Array(M * S * S * 3);
    for (let i = 0; i < M; i++) { obs.set(o.state, i * D); images.set(o.image!, i * S * S * 3); }
    const instructions = new Array<string>(M).fill(o.instruction);
    const r = await vla.act(obs, Float32Array.from({ length: M * A }, () => rng.normal()), { images, instructions });
    // Advantage = the sign of the first action entry's noise: the update should move the mean that way.
    const advantage = Float32Array.from({ length: M }, (_, i) => Math.sign(r.action[i * A]! - r.mean[i * A]!));
    const batch: PgBatch = { obs, action: r.action, oldLogProb: r.logProb, advantage, weight: new Float32Array(M).fill(1), images, instructions };
    const pg = await ClippedPolicyGradient.create(vla, { ...DEFAULT_PG_CONFIG, optimizer: { lr: 3e-3, clipNorm: 0.5 }, epochs: 4, minibatch: 32 });
    const before = await vla.logProb(obs, r.action, { images, instructions });
    const stats = await pg.update(batch, rng);
    expect(stats.minibatches).toBe(8);
    const after = await vla.logProb(obs, r.action, { images, instructions });
    let gain = 0;
    for (let i = 0; i < M; i++) gain += advantage[i]! * (after[i]! - before[i]!);
    expect(gain).toBeGreaterThan(0);
    // The image and instruction are inputs of the update, not decoration: without them it is refused, naming what is missing.
    await expect(pg.update({ ...batch, images: undefined }, rng)).rejects.toThrow(/pg: images has 0 values, expected 49152/);
    await expect(pg.update({ ...batch, instructions: instructions.slice(1) }, rng)).rejects.toThrow(/pg: instructions has 63 values, expected 64/);
    await pg.release();
  });

  it('post-trains the head alone when told: the encoder stays bit-identical, the head moves; unknown names are refused', async () => {
    fresh();
    const o = env.reset(4);
    const M = 32, D = vla.obsDim, A = vla.actDim;
    const rng = new Rng(2);
    const obs = new Float32Array(M * D), images = new Uint8Array(M * S * S * 3);
    for (let i = 0; i < M; i++) { obs.set(o.state, i * D); images.set(o.image!, i * S * S * 3); }
    const instructions = new Array<string>(M).fill(o.instruction);
    const r = await vla.act(obs, Float32Array.from({ length: M * A }, () => rng.normal()), { images, instructions });
    const advantage = Float32Array.from({ length: M }, (_, i) => Math.sign(r.action[i * A]! - r.mean[i * A]!));
    const head = vla.headParamNames();
    const pg = await ClippedPolicyGradient.create(vla, { ...DEFAULT_PG_CONFIG, optimizer: { lr: 3e-3, clipNorm: 0.5 }, minibatch: 16 }, { trainable: head });
    const enc0 = vla.encoderParamNames().map((n) => Array.from(vla.store.get(n).data));
    const head0 = head.map((n) => Array.from(vla.store.get(n).data));
    await pg.update({ obs, action: r.action, oldLogProb: r.logProb, advantage, weight: new Float32Array(M).fill(1), images, instructions }, rng);
    vla.encoderParamNames().forEach((n, i) => expect(Array.from(vla.store.get(n).data)).toEqual(enc0[i]));
    expect(head.some((n, i) => Array.from(vla.store.get(n).data).some((v, j) => v !== head0[i]![j]))).toBe(true);
    await pg.release();
    await expect(ClippedPolicyGradient.create(vla, DEFAULT_PG_CONFIG, { trainable: ['vla.nope'] })).rejects.toThrow(/trainable names parameters the vla policy does not have: vla.nope/);
  });

  it('klCoef on a VLA\'s head: the reference pass reads each step\'s image and instruction, over chunks (M > 4096)', async () => {
    fresh();
    // 6000 steps in blocks of 200 with their own start state, instruction and a noise image: a reference
    // log-probability read on another row than its own changes the KL the update reports.
    const M = 6000, D = vla.obsDim, A = vla.actDim, px = S * S * 3;
    const rng = new Rng(5);
    const obs = new Float32Array(M * D), images = new Uint8Array(M * px), instructions: string[] = [];
    for (let i = 0; i < M; i += 200) {
      const o = env.reset(100 + i / 200);
      const image = Uint8Array.from({ length: px }, () => Math.floor(rng.uniform(0, 256)));
      for (let k = i; k < i + 200; k++) {
        obs.set(o.state, k * D);
        images.set(image, k * px);
        instructions.push(o.instruction);
      }
    }
    expect(new Set(instructions).size).toBeGreaterThan(1);
    const r = await vla.act(obs, Float32Array.from({ length: M * A }, () => rng.normal()), { images, instructions });
    const advantage = Float32Array.from({ length: M }, (_, i) => Math.sign(r.action[i * A]! - r.mean[i * A]!));
    const batch: PgBatch = { obs, action: r.action, oldLogProb: r.logProb, advantage, weight: new Float32Array(M).fill(1), images, instructions };
    const head = vla.headParamNames();
    const pg = await ClippedPolicyGradient.create(vla, { ...DEFAULT_PG_CONFIG, optimizer: { lr: 3e-2, clipNorm: 0.5 }, epochs: 1, minibatch: M, klCoef: 1 }, { trainable: head });
    // At the reference the KL is zero.
    expect((await pg.update(batch, rng)).refKl).toBeLessThan(1e-6);
    await pg.update(batch, rng);
    // One minibatch of every step: the next update's KL is measured at the parameters it starts from. Recompute it
    // here, the reference's log-probabilities read row by row in one pass.
    const now = params();
    const lp = await vla.logProb(obs, r.action, { images, instructions });
    fresh();
    const lpRef = await vla.logProb(obs, r.action, { images, instructions });
    vla.paramNames().forEach((n, i) => vla.store.set(n, now[i]!));
    let expected = 0;
    for (let i = 0; i < M; i++) { const d = lpRef[i]! - lp[i]!; expected += (Math.exp(d) - d - 1) / M; }
    const third = await pg.update(batch, rng);
    expect(expected).toBeGreaterThan(1e-3);
    expect(third.refKl).not.toBeNull();
    expect(Math.abs(third.refKl! - expected)).toBeLessThan(1e-4 * expected);
    // The store holds the trained head after the reference pass, not the reference's.
    expect(head.some((n) => Array.from(vla.store.get(n).data).some((v, j) => v !== snapshot[vla.paramNames().indexOf(n)]![j]))).toBe(true);
    await pg.release();
  }, 60_000);

  it('a frozen encoder runs once an update: the head trained on its features moves as the head trained through the encoder', async () => {
    // Four start states, each with its own noise image; 4 epochs of 3 minibatches under the KL penalty, so the
    // features are reused across epochs and minibatches and the reference's log-probabilities are read from them.
    const M = 96, D = vla.obsDim, A = vla.actDim, px = S * S * 3;
    const rng = new Rng(8);
    const obs = new Float32Array(M * D), images = new Uint8Array(M * px), instructions: string[] = [];
    for (let i = 0; i < M; i++) {
      const o = env.reset(200 + (i % 4));
      obs.set(o.state, i * D);
      images.set(i < 4 ? Uint8Array.from({ length: px }, () => Math.floor(rng.uniform(0, 256))) : images.subarray((i % 4) * px, (i % 4 + 1) * px), i * px);
      instructions.push(o.instruction);
    }
    fresh();
    const r = await vla.act(obs, Float32Array.from({ length: M * A }, () => rng.normal()), { images, instructions });
    const advantage = Float32Array.from({ length: M }, (_, i) => Math.sign(r.action[i * A]! - r.mean[i * A]!));
    const batch: PgBatch = { obs, action: r.action, oldLogProb: r.logProb, advantage, weight: new Float32Array(M).fill(1), images, instructions };
    const config = { ...DEFAULT_PG_CONFIG, optimizer: { lr: 3e-3, clipNorm: 0.5 }, epochs: 4, minibatch: 32, klCoef: 0.5 };
    const head = vla.headParamNames();
    // The same VLA without its split: the update's graph runs the encoder on every minibatch.
    const whole = withoutEncoderSplit(vla);
    const results: Array<{ head: number[][]; stats: Awaited<ReturnType<ClippedPolicyGradient['update']>> }> = [];
    for (const policy of [vla, whole]) {
      fresh();
      const pg = await ClippedPolicyGradient.create(policy, config, { trainable: head });
      await pg.update(batch, new Rng(9));
      const stats = await pg.update(batch, new Rng(10));
      results.push({ head: head.map((n) => Array.from(vla.store.get(n).data)), stats });
      await pg.release();
    }
    const [split, through] = results as [typeof results[0], typeof results[0]];
    expect(split.stats.minibatches).toBe(12);
    expect(split.stats.refKl).toBeGreaterThan(1e-4);
    expect(Math.abs(split.stats.refKl! - through.stats.refKl!)).toBeLessThan(1e-3 * through.stats.refKl!);
    expect(Math.abs(split.stats.approxKl - through.stats.approxKl)).toBeLessThan(1e-5);
    let moved = 0, diff = 0;
    split.head.forEach((v, i) => v.forEach((x, j) => { moved = Math.max(moved, Math.abs(x - snapshot[vla.paramNames().indexOf(head[i]!)]![j]!)); diff = Math.max(diff, Math.abs(x - through.head[i]![j]!)); }));
    expect(moved).toBeGreaterThan(1e-3);
    expect(diff).toBeLessThan(1e-5);
    // The encoder's features are the ones forward reads: wrong images are refused by name.
    await expect(vla.encode({ images: images.subarray(px), instructions }, M)).rejects.toThrow(/vla.encode: needs 96 images of 16x16x3, got 72960 bytes/);
    await expect(vla.encode({ images, instructions: instructions.slice(1) }, M)).rejects.toThrow(/vla.encode: needs 96 instructions, got 95/);
  }, 60_000);

  it('pgBatch carries each step\'s image and instruction, and refuses a mix of rollouts with and without', () => {
    const px = 3, t = (v: number, steps: number, ctx: boolean) => ({
      obs: new Float32Array(steps).fill(v), action: new Float32Array(steps).fill(v), logProb: new Float32Array(steps), steps,
      ...(ctx ? { images: new Uint8Array(steps * px).fill(v), instructions: new Array<string>(steps).fill(`go ${v}`) } : {}),
    });
    const b = pgBatch([t(1, 2, true), t(2, 1, true), t(3, 2, true)], [1, null, -1], [1, 1, 1], 1, 1)!;
    expect(Array.from(b.images!)).toEqual([1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3]);
    expect(b.instructions).toEqual(['go 1', 'go 1', 'go 3', 'go 3']);
    expect(() => pgBatch([t(1, 2, true), t(2, 1, false)], [1, 1], [1, 1], 1, 1)).toThrow(/every rollout, or none/);
  });
});

describe('a VLA on the sim robot', () => {
  it('reads the robot\'s camera image and instruction each step and keeps them, so log π recomputes exactly', async () => {
    fresh();
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, image: S });
    const ep = await robotEpisode(target, vla, 42, new Rng(5), 'test');
    const gap = await makeEnv({ task: 'reach', profile: 'gap', image: S });
    const first = gap.reset(42);
    gap.dispose();
    expect(ep.steps).toBeGreaterThan(0);
    expect(ep.images!.length).toBe(ep.steps * S * S * 3);
    expect(Array.from(ep.images!.subarray(0, S * S * 3))).toEqual(Array.from(first.image!));
    expect(ep.instructions).toEqual(new Array<string>(ep.steps).fill(first.instruction));
    // The camera moves with the arm: the last image differs from the first.
    expect(Array.from(ep.images!.subarray((ep.steps - 1) * S * S * 3)).some((v, i) => v !== first.image![i])).toBe(true);
    const lp = await vla.logProb(ep.obs.subarray(0, ep.steps * vla.obsDim), ep.action, { images: ep.images, instructions: ep.instructions });
    for (let t = 0; t < ep.steps; t++) expect(lp[t]).toBeCloseTo(ep.logProb[t]!, 4);
    await target.close();
    // A robot without a camera is refused with the reason.
    const blind = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0 });
    await expect(robotEpisode(blind, vla, 42, new Rng(5), 'test')).rejects.toThrow(/reads the camera image; robot sim-reach-gap's observation has none/);
    await blind.close();
  });

  it('held-out evaluation renders each env\'s camera: the same success and return as one env at batch 1', async () => {
    fresh();
    const seeds = [700, 701, 702, 703, 704, 705];
    const batched = await evaluateSuccess(vla, 'reach', 'nominal', seeds.length, seeds[0]!);
    const one = await evaluateOn(env, vla, seeds);
    expect(batched.success).toBeCloseTo(one.success, 6);
    expect(batched.meanReturn).toBeCloseTo(one.return, 2);
  });
});

describe('the embodied trainers post-train a VLA (tiny budget, reach on the gap robot)', () => {
  let model: EnsembleModel;
  let simData: Transitions;
  let twin: SceneTwin;
  beforeAll(async () => {
    const data = await exploratoryEpisodes('reach', 6, 50_000);
    const buf = new TransitionBuffer(data.dObs, data.dAct, 2);
    for (const e of data.episodes) buf.addEpisode({ ...e, weight: 1 });
    simData = buf.transitions();
    model = new EnsembleModel({ dObs: data.dObs, dAct: data.dAct, members: 3, hidden: [32, 32], actionHistory: 2, obsNames: data.obsNames, seed: 0 });
    await model.fit(simData, { epochs: 2, seed: 0 });
    twin = await SceneTwin.create('reach', S);
  }, 60_000);
  afterAll(async () => {
    twin.dispose();
    await model.release();
  });
  const pgConfig = { ...DEFAULT_PG_CONFIG, epochs: 1, minibatch: 128 };
  const base = { updates: 1, prompts: 2, groupSize: 2, evalEvery: 1, promptSeed0: 1_000_000, seed: 3 };
  const wmrlConfig: WmrlConfig = {
    ...base, corrector: correctorConfig({ debias: { minPairs: 2, refitEvery: 2 } }), horizon: 40, scoreMode: 'return', scoreK: 5, successThreshold: 0.5,
    refitEvery: 0, refitEpochs: 1, refitRolloutSteps: 16, refitRolloutWindows: 16_384, simWeight: 0.25, robotRewards: 'dense', anchorScore: 'robot', imaginedGate: false, actionDelay: 'identify', maxActionDelay: 5, context: 'identify', alarmWindow: 2, alarmGap: 0.9,
  };

  it('standard GRPO: every group on the robot\'s camera, the VLA updated', async () => {
    fresh();
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, image: S });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(vla, pgConfig);
    const st = await trainStandard({ config: base, policy: vla, pg, target, prompts });
    expect(target.clock.episodes).toBe(4);
    expect(st.rows[0]!.loss).not.toBeNull();
    expect(params().some((p, i) => p.some((v, j) => v !== snapshot[i]![j]))).toBe(true);
    await pg.release();
    await target.close();
  }, 60_000);

  it('WMRL imagines the VLA on the twin\'s renders, anchors it on the robot, and refuses to imagine it without a twin', async () => {
    fresh();
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, image: S });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(vla, pgConfig);
    const st = await trainWmrl({ config: wmrlConfig, policy: vla, pg, model, simData, target, prompts, twin, warn: () => {} });
    const row = st.rows[0]!;
    expect(row.realGroups).toBe(1);
    expect(target.clock.episodes).toBe(2);
    expect(row.imaginedTransitions).toBe(4 * 40);
    expect(row.loss).not.toBeNull();
    expect(params().some((p, i) => p.some((v, j) => v !== snapshot[i]![j]))).toBe(true);
    await expect(trainWmrl({ config: { ...wmrlConfig, corrector: false }, policy: vla, pg, model, simData, target, prompts, warn: () => {} })).rejects.toThrow(/give the task's twin/);
    await pg.release();
    await target.close();
  }, 60_000);

  it('each anchor episode draws the noise its imagined rollout drew and is imagined again from its start; under imaginedGate the imagined groups weigh what that agreement gives', async () => {
    const G = 3, H = 40, N = 2 * G, D = vla.obsDim, A = vla.actDim;
    // Seed 0: the anchor group's imagined and real scores agree in part, so the imagined weight differs from the anchors'.
    const config: WmrlConfig = { ...wmrlConfig, seed: 0, groupSize: G, corrector: correctorConfig({ debias: { minPairs: 2, refitEvery: 2 }, perRolloutWeights: false }) };
    // Every act call's noise (the imagination's batched ones, then the robot's one row at a time), and the update's batch.
    const run = async (gate: WmrlConfig['imaginedGate']) => {
      fresh();
      const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, image: S });
      using prompts = await SimPrompts.create('reach');
      const pg = await ClippedPolicyGradient.create(vla, pgConfig);
      const calls: Array<{ rows: number; noise: Float32Array }> = [], batches: PgBatch[] = [], anchors: number[] = [];
      const act = vla.act.bind(vla), update = pg.update.bind(pg);
      vla.act = (x, noise, ctx) => { calls.push({ rows: x.length / D, noise: Float32Array.from(noise) }); return act(x, noise, ctx); };
      pg.update = (b, r) => { batches.push(b); return update(b, r); };
      try {
        const st = await trainWmrl({ config: { ...config, imaginedGate: gate }, policy: vla, pg, model, simData, target, prompts, twin, hooks: { onEpisode: (ep) => anchors.push(ep.steps) }, warn: () => {} });
        return { st, calls, batch: batches[0]!, anchors };
      } finally {
        delete (vla as { act?: unknown }).act;
        await pg.release();
        await target.close();
      }
    };
    // The anchor group b whose episodes drew, step for step over the imagined steps, its rollouts' noise (-1: none); and
    // that the group was imagined again from its episodes' own starts under the same noise (its closed-loop agreement).
    const replayedGroup = (r: Awaited<ReturnType<typeof run>>) => {
      const steps = r.anchors.reduce((a, x) => a + x, 0);
      const imagined = r.calls.slice(0, H), robot = r.calls.slice(H, H + steps), again = r.calls.slice(H + steps);
      expect(imagined.every((c) => c.rows === N)).toBe(true);
      expect(robot.every((c) => c.rows === 1)).toBe(true);
      expect(again.length).toBe(H);
      expect(again.every((c) => c.rows === r.anchors.length)).toBe(true);
      const b = [0, 1].findIndex((b) => {
        let at = 0;
        return r.anchors.every((T, k) => {
          const ok = Array.from({ length: Math.min(T, H) }, (_, t) => t).every((t) => robot[at + t]!.noise.every((v, j) => v === imagined[t]!.noise[(b * G + k) * A + j]));
          at += T;
          return ok;
        });
      });
      if (b >= 0) again.forEach((c, t) => r.anchors.forEach((_, k) => expect(Array.from(c.noise.subarray(k * A, (k + 1) * A))).toEqual(Array.from(imagined[t]!.noise.subarray((b * G + k) * A, (b * G + k + 1) * A)))));
      return b;
    };
    const gated = await run({ window: 4, minGroups: 1 });
    expect(gated.anchors.length).toBe(G);
    expect(gated.anchors.some((T) => T > H)).toBe(true); // past the imagined steps an anchor draws afresh
    expect(replayedGroup(gated)).toBeGreaterThanOrEqual(0);
    // The one anchor group measured one agreement; the imagined groups' share is its value clipped to [0, 1].
    const agreements = (gated.st.extra as { agreements: number[] }).agreements;
    expect(agreements.length).toBe(1);
    const row = gated.st.rows[0]!, w = row.imaginedWeight!;
    expect(w).toBe(Math.min(1, Math.max(0, agreements[0]!)));
    expect(w).toBeGreaterThan(0);
    expect(w).toBeLessThan(1);
    // Of the one imagined group the update kept none or one (w of one group, rounded at random); a dropped group adds
    // no step, a kept one adds its steps at its own weight (1: no per-rollout weights here), not scaled by w.
    expect([0, 1]).toContain(row.imaginedGroups);
    const steps = (r: Awaited<ReturnType<typeof run>>) => ({ M: r.batch.weight.length, anchor: r.anchors.reduce((a, x) => a + x, 0) });
    const g = steps(gated);
    expect(g.M > g.anchor).toBe(row.imaginedGroups === 1);
    expect(gated.batch.weight.filter((x) => x === 1).length).toBeGreaterThanOrEqual(g.M - g.anchor);
    // Without the gate the anchors still replay their imagined noise (the agreement is logged), and every imagined group is kept.
    const open = await run(false);
    expect(replayedGroup(open)).toBeGreaterThanOrEqual(0);
    expect(open.st.rows[0]!.agreements).toHaveLength(1);
    const o = steps(open);
    expect(o.M).toBeGreaterThan(o.anchor);
    expect(open.st.rows[0]!.imaginedWeight).toBeUndefined();
    expect(open.st.rows[0]!.imaginedGroups).toBeUndefined();
  }, 120_000);

  it('imaginedGate: a gate without anchors, or with a window or minimum it cannot keep, is refused by name', async () => {
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, image: S });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(vla, pgConfig);
    const params0 = params();
    const bad = (over: Partial<WmrlConfig>) => trainWmrl({ config: { ...wmrlConfig, ...over }, policy: vla, pg, model, simData, target, prompts, twin, warn: () => {} });
    await expect(bad({ corrector: false, imaginedGate: { window: 4, minGroups: 1 } })).rejects.toThrow(/imaginedGate .*without a corrector runs no anchors/);
    await expect(bad({ imaginedGate: { window: 0, minGroups: 1 } })).rejects.toThrow(/imaginedGate.window must be a whole number .* got 0/);
    await expect(bad({ imaginedGate: { window: 4, minGroups: 0 } })).rejects.toThrow(/imaginedGate.minGroups must be a whole number from 1 to its window \(4\); got 0/);
    await expect(bad({ imaginedGate: { window: 4, minGroups: 5 } })).rejects.toThrow(/imaginedGate.minGroups .* got 5/);
    // Refused before anything ran: no robot episode, the policy untouched.
    expect(target.clock.episodes).toBe(0);
    expect(params()).toEqual(params0);
    await pg.release();
    await target.close();
  }, 60_000);

  it('WMRL imagines through the VLA\'s latent face (no twin), anchors the VLA itself on the robot\'s camera, and trains the head they share', async () => {
    fresh();
    const { policy: face } = await LatentVla.distill(vla, twin, simData.obs, env.observationSpace.instructions[0]!, { epochs: 5, seed: 0 });
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, image: S });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(face, pgConfig);
    const anchors: number[] = [];
    const enc0 = vla.encoderParamNames().map((n) => Array.from(vla.store.get(n).data));
    const st = await trainWmrl({ config: wmrlConfig, policy: vla, face, pg, model, simData, target, prompts, hooks: { onEpisode: (ep) => anchors.push(ep.images?.length ?? 0) }, warn: () => {} });
    const row = st.rows[0]!;
    expect(row.realGroups).toBe(1);
    // The anchors ran the VLA on the robot's camera: every step kept its image.
    expect(anchors.length).toBe(2);
    expect(anchors.every((n) => n > 0 && n % (S * S * 3) === 0)).toBe(true);
    expect(row.imaginedTransitions).toBe(4 * 40);
    expect(row.loss).not.toBeNull();
    vla.encoderParamNames().forEach((n, i) => expect(Array.from(vla.store.get(n).data)).toEqual(enc0[i]));
    expect(vla.headParamNames().some((n) => { const i = vla.paramNames().indexOf(n); return Array.from(vla.store.get(n).data).some((v, j) => v !== snapshot[i]![j]); })).toBe(true);
    // The update trains what imagines: a policy gradient over the VLA is refused beside its face.
    const wrong = await ClippedPolicyGradient.create(vla, pgConfig);
    await expect(trainWmrl({ config: wmrlConfig, policy: vla, face, pg: wrong, model, simData, target, prompts, warn: () => {} })).rejects.toThrow(/trains a vla policy, not the vla_latent policy that imagines/);
    await wrong.release();
    await pg.release();
    await face.release();
    await target.close();
  }, 60_000);
});
