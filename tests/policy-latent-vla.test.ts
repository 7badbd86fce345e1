// A VLA's latent face (policies/latent-vla.ts): a map distilled from the frozen image encoder on the twin's
// renders stands in for camera + encoder; the head is the VLA's own. Checks: the map learns the encoder's features
// (held-out error well under their spread) and the face's mean actions sit closer to the VLA's than a face blind
// to the state; the face's log π recomputes its own samples; a policy-gradient step on the face moves the VLA's
// head (the same store) and nothing else; the VLA's exported artifact holds no map; and bad input is refused by name.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { makeEnv, SceneTwin, type Env } from '../sim/index.js';
import { VlaPolicy } from '../policies/vla.js';
import { LatentVla, type LatentDistillReport } from '../policies/latent-vla.js';
import { behaviourClone } from '../policies/bc.js';
import { expertDemonstrations } from '../policies/demos.js';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG } from '../policies/pg.js';
import { exportPolicyArtifact } from '../policies/artifact.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { agreementGroups, imaginationGaps, repeatability } from '../bench/cells/vla-measure.js';

const S = 16;
let env: Env;
let twin: SceneTwin;
let vla: VlaPolicy;
let face: LatentVla;
let report: LatentDistillReport;
let states: Float32Array;
let instructions: string[];
/** The VLA's parameters as distilled (the policy-gradient test moves its head). */
let distilled: Array<[string, Float32Array]>;
const make = () => new VlaPolicy({ layout: env.layout, actDim: 2, image: { height: S, width: S }, instructions: env.observationSpace.instructions, convChannels: [4, 8], imageFeatures: 16, embedDim: 8, hidden: [32], initLogStd: -1, seed: 0 });

beforeAll(async () => {
  env = await makeEnv({ task: 'reach', image: S, seed: 0 });
  twin = await SceneTwin.create('reach', S);
  vla = make();
  const demos = expertDemonstrations(env, 12, 100);
  await behaviourClone(vla, demos, { epochs: 10, batchSize: 64 });
  // A tiny clone's image features barely vary; an encoder whose features do (its head scaled up) makes the map's
  // error measurable against their variance.
  const w = vla.encoder.head.paramNames().find((k) => k.endsWith('.weight'))!;
  vla.store.set(w, vla.store.get(w).data.map((v) => 30 * v));
  // The states to distill on: episodes of random actions, which sweep the arm (and so the image) widely.
  const rng = new Rng(7), xs: number[] = [];
  instructions = [];
  for (let ep = 0; ep < 20; ep++) {
    let o = env.reset(500 + ep);
    for (let t = 0; t < 100; t++) {
      xs.push(...o.state);
      instructions.push(o.instruction);
      const r = env.step(Float32Array.from({ length: 2 }, () => rng.uniform(-1, 1)));
      o = r.obs;
      if (r.terminated || r.truncated) break;
    }
  }
  states = Float32Array.from(xs);
  ({ policy: face, report } = await LatentVla.distill(vla, twin, states, instructions, { epochs: 100, minibatch: 32, seed: 1 }));
  distilled = vla.store.names().map((n) => [n, Float32Array.from(vla.store.get(n).data)]);
}, 120_000);
afterAll(async () => {
  await face.release();
  await vla.release();
  twin.dispose();
  env.dispose();
});

describe('LatentVla.distill', () => {
  it('learns the frozen encoder\'s features of the twin\'s renders from the state alone', () => {
    expect(report.states).toBe(states.length / vla.obsDim);
    expect(report.heldOut).toBe(Math.round(report.states * 0.1));
    // Well under the features' own spread about their mean (1); at 16 px the features jump at pixel edges the state does not mark.
    expect(report.valRelMse).toBeLessThan(0.6);
    // The face acts closer to the VLA than the head fed the features' mean (what a map blind to the state gives).
    expect(report.actionGap).toBeLessThan(report.actionGapConstant);
  });

  it('reads the observation and instruction only, and recomputes log π of its own samples', async () => {
    expect(face.inputs().image).toBeUndefined();
    expect(face.inputs().instruction?.vocabulary).toEqual(vla.config.vocabulary);
    const n = 8, D = vla.obsDim, A = vla.actDim;
    const obs = states.slice(0, n * D), ctx = { instructions: instructions.slice(0, n) };
    const r = await face.act(obs, Float32Array.from({ length: n * A }, () => 0.5), ctx);
    const lp = await face.logProb(obs, r.action, ctx);
    for (let i = 0; i < n; i++) expect(lp[i]).toBeCloseTo(r.logProb[i]!, 4);
    expect(face.entropy()).toBeCloseTo(vla.entropy(), 6);
    await expect(face.act(obs, new Float32Array(n * A), { instructions: ctx.instructions.slice(1) })).rejects.toThrow(/needs 8 instructions, got 7/);
  });

  it('a policy-gradient step on the face moves the VLA\'s head, not its encoder or the map', async () => {
    const n = 64, D = vla.obsDim, A = vla.actDim, rng = new Rng(2);
    const obs = states.slice(0, n * D), ctx = { instructions: instructions.slice(0, n) };
    const keep = [...vla.encoderParamNames(), ...face.map.paramNames()].map((k) => [k, Array.from(vla.store.get(k).data)] as const);
    const head0 = vla.headParamNames().map((k) => Array.from(vla.store.get(k).data));
    const image = twin.render(obs);
    const before = await vla.act(obs, new Float32Array(n * A), { images: image, instructions: ctx.instructions });
    const r = await face.act(obs, Float32Array.from({ length: n * A }, () => rng.normal()), ctx);
    const advantage = Float32Array.from({ length: n }, (_, i) => Math.sign(r.action[i * A]! - r.mean[i * A]!));
    const pg = await ClippedPolicyGradient.create(face, { ...DEFAULT_PG_CONFIG, optimizer: { lr: 3e-3, clipNorm: 0.5 }, minibatch: 32 });
    await pg.update({ obs, action: r.action, oldLogProb: r.logProb, advantage, weight: new Float32Array(n).fill(1), instructions: ctx.instructions }, rng);
    await pg.release();
    for (const [k, v] of keep) expect(Array.from(vla.store.get(k).data)).toEqual(v);
    expect(vla.headParamNames().some((k, i) => Array.from(vla.store.get(k).data).some((v, j) => v !== head0[i]![j]))).toBe(true);
    // Advantage = the sign of the first entry's noise rewards samples above the mean and penalizes those below: both
    // push that entry's mean up. The VLA on its camera shows it: its first action entry rose on average.
    const after = await vla.act(obs, new Float32Array(n * A), { images: image, instructions: ctx.instructions });
    let rise = 0;
    for (let i = 0; i < n; i++) rise += (after.mean[i * A]! - before.mean[i * A]!) / n;
    expect(rise).toBeGreaterThan(0);
  });

  it('leaves the VLA\'s exported artifact as it was: the map is not in it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'latent-vla-'));
    const robot = await SimRobot.create({ task: 'reach', image: S });
    try {
      const path = join(dir, 'vla.onnx');
      exportPolicyArtifact(vla, path, { layout: robot.env.layout, action: robot.spec.action, controlHz: robot.spec.controlHz, policyVersion: 'v', runId: 'r' });
      const bytes = readFileSync(path);
      expect(bytes.includes(Buffer.from(vla.headParamNames()[0]!))).toBe(true);
      expect(bytes.includes(Buffer.from('vla.latent'))).toBe(false);
    } finally {
      await robot[Symbol.asyncDispose]();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a second map in the same VLA, a twin of another size, mismatched instructions, too few states and a split or minibatch that cannot train', async () => {
    await expect(LatentVla.distill(vla, twin, states, instructions)).rejects.toThrow(/already holds a map 'vla.latent'/);
    expect(() => LatentVla.declare(vla)).toThrow(/already holds a map 'vla.latent'/);
    const other = make();
    const small = await SceneTwin.create('reach', 8);
    try {
      await expect(LatentVla.distill(other, small, states, instructions)).rejects.toThrow(/the twin renders 8x8, the VLA reads 16x16/);
      await expect(LatentVla.distill(other, twin, states, instructions.slice(1))).rejects.toThrow(/instructions for \d+ states/);
      await expect(LatentVla.distill(other, twin, states.slice(0, 3 * other.obsDim), 'reach')).rejects.toThrow(/need at least 10 states/);
      await expect(LatentVla.distill(other, twin, states, instructions, { valFraction: 1 })).rejects.toThrow(/valFraction must be in \(0, 1\), got 1/);
      await expect(LatentVla.distill(other, twin, states, instructions, { minibatch: 0 })).rejects.toThrow(/minibatch and epochs must be positive integers, got 0 and 60/);
    } finally {
      small.dispose();
      await other.release();
    }
  });

  it('bench vla\'s imagination gaps: on a noise-free robot the twin shows the VLA its camera image, the face does not; observation noise opens the twin\'s gap', async () => {
    for (const [n, v] of distilled) vla.store.set(n, v);
    const seeds = [9_000_000, 9_000_001];
    const clean = await imaginationGaps(vla, face, twin, env, seeds);
    const noisy = await makeEnv({ task: 'reach', profile: 'gap', image: S, seed: 0 });
    try {
      const gap = await imaginationGaps(vla, face, twin, noisy, seeds);
      // Every step of both episodes was measured (the reach horizon is 100 steps; success ends one sooner).
      expect(clean.states).toBeGreaterThan(seeds.length);
      expect(clean.states).toBeLessThanOrEqual(seeds.length * 100);
      expect(clean.spread).toBeGreaterThan(0);
      // The twin renders what the nominal camera sees: the same action, up to the renderer's float rounding.
      expect(clean.twinVsCamera).toBeLessThan(1e-3);
      // The face reads the state through its map, which misses some of what the encoder sees.
      expect(clean.faceVsCamera).toBeGreaterThan(10 * clean.twinVsCamera);
      // The gap robot's camera sees the true scene, the twin renders the noisy observed state: the VLA acts differently.
      expect(gap.twinVsCamera).toBeGreaterThan(clean.twinVsCamera);
    } finally {
      noisy.dispose();
    }
  });
  it('bench vla\'s repeatability: the noise-free sim repeats a group\'s order exactly; the gap robot\'s sensor noise and jitter reorder it', async () => {
    for (const [n, v] of distilled) vla.store.set(n, v);
    const seeds = [9_000_000, 9_000_001, 9_000_002];
    const clean = await agreementGroups(vla, env, seeds, 8, 100, 3);
    // Same starts, same policy noise, the robot's noise stream reseeded: nothing on the nominal sim draws from it.
    expect(await repeatability(clean, vla, env, 42)).toBe(1);
    const noisy = await makeEnv({ task: 'reach', profile: 'gap', image: S, seed: 0 });
    try {
      const g = await agreementGroups(vla, noisy, seeds, 8, 100, 3);
      const again = await repeatability(g, vla, noisy, 42);
      expect(again).toBeLessThan(1);
      expect(again).toBeGreaterThan(-1);
      // Deterministic: the same reseed gives the same figure.
      expect(await repeatability(g, vla, noisy, 42)).toBe(again);
    } finally {
      noisy.dispose();
    }
  });
});
