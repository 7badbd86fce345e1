// The one policy interface (policies/types.ts) on the Gaussian MLP and the VLA: act, log-prob and entropy
// agree with a plain diagonal Gaussian; the VLA reads image, instruction and proprioception and learns by
// behaviour cloning from the scripted expert's camera demonstrations; its deployment artifact passes
// onnx.checker (full_check), gives the same actions in onnxruntime-node and onnxruntime-web (wasm), runs
// on the robot it was made for and is refused, with the mismatch named, on one it was not.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ortNode from 'onnxruntime-node';
import * as ortWeb from 'onnxruntime-web';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cameraRgb } from '../common/image.js';
import { layoutDim, layoutOf, robotEntries } from '../common/layout.js';
import { Rng } from '../nn/index.js';
import { makeEnv, type Env } from '../sim/index.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { VlaPolicy } from '../policies/vla.js';
import { LatentVla } from '../policies/latent-vla.js';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG } from '../policies/pg.js';
import { behaviourClone } from '../policies/bc.js';
import { expertDemonstrations } from '../policies/demos.js';
import { exportPolicyArtifact } from '../policies/artifact.js';
import { OnnxPolicy } from '../policies/onnx-policy.js';
import { buildVocabulary, tokenize } from '../policies/tokenizer.js';
import type { Policy, PolicyContext } from '../policies/types.js';
import { onnxCheck } from './helpers/onnx-check.js';

const dir = mkdtempSync(join(tmpdir(), 'vla-'));
const normals = (rng: Rng, n: number) => Float32Array.from({ length: n }, () => rng.normal());

function diagLogProb(a: ArrayLike<number>, m: ArrayLike<number>, logStd: ArrayLike<number>): number {
  let lp = 0;
  for (let j = 0; j < a.length; j++) lp += -0.5 * ((a[j]! - m[j]!) / Math.exp(logStd[j]!)) ** 2 - logStd[j]! - 0.5 * Math.log(2 * Math.PI);
  return lp;
}

/** act / logProb / entropy of any policy agree with a plain diagonal Gaussian. */
async function checkGaussianInterface(p: Policy, logStdName: string, obs: Float32Array, ctx: PolicyContext | undefined, n: number): Promise<void> {
  const rng = new Rng(9);
  const k = p.chunk * p.actDim;
  const noise = normals(rng, n * k);
  const r = await p.act(obs, noise, ctx);
  const logStd = p.store.get(logStdName).data;
  const lp = await p.logProb(obs, r.action, ctx);
  for (let i = 0; i < n; i++) {
    const a = r.action.subarray(i * k, (i + 1) * k), m = r.mean.subarray(i * k, (i + 1) * k);
    for (let j = 0; j < k; j++) expect(a[j]).toBeCloseTo(m[j]! + Math.exp(logStd[j]!) * noise[i * k + j]!, 5);
    expect(r.logProb[i]).toBeCloseTo(diagLogProb(a, m, logStd), 3);
    expect(lp[i]).toBeCloseTo(r.logProb[i]!, 4);
  }
  expect(p.entropy()).toBeCloseTo(Array.from(logStd).reduce((h, s) => h + s + 0.5 + 0.5 * Math.log(2 * Math.PI), 0), 5);
  const det = await p.act(obs, new Float32Array(n * k), ctx);
  expect(Array.from(det.action)).toEqual(Array.from(r.mean));
}

let env: Env;
beforeAll(async () => {
  env = await makeEnv({ task: 'reach', image: 64, seed: 0 });
});
afterAll(() => env.dispose());

const small = (e: Env, chunk = 1) => new VlaPolicy({
  layout: e.layout, actDim: 2, chunk, image: { height: 64, width: 64 }, instructions: e.observationSpace.instructions, convChannels: [8, 8], imageFeatures: 16, hidden: [32], seed: 3,
});

describe('the policy interface', () => {
  it('the Gaussian MLP: act, logProb and entropy of a diagonal Gaussian', async () => {
    const p = new GaussianPolicy({ obsDim: 3, actDim: 2, initLogStd: -0.3, seed: 1 });
    const obs = Float32Array.from({ length: 12 }, (_, i) => Math.sin(i));
    await checkGaussianInterface(p, 'policy.log_std', obs, undefined, 4);
    expect(p.inputs()).toEqual({ obsDim: 3, obsMean: [0, 0, 0], obsStd: [1, 1, 1] });
    await p.release();
  });

  it('the VLA: the same on images and instructions, for one action and for chunks of 3', async () => {
    const demos = expertDemonstrations(env, 1, 7);
    const n = 3, D = env.layout.joints.length * 2 + env.layout.features.length;
    const ctx: PolicyContext = { images: demos.images!.subarray(0, n * 64 * 64 * 3), instructions: demos.instructions!.slice(0, n) };
    for (const chunk of [1, 3]) {
      const p = small(env, chunk);
      await checkGaussianInterface(p, 'vla.log_std', demos.obs.subarray(0, n * D), ctx, n);
      expect((await p.act(demos.obs.subarray(0, n * D), new Float32Array(n * 2 * chunk), ctx)).mean).toHaveLength(n * 2 * chunk);
      await p.release();
    }
  });

  it('the VLA reads the image and the instruction: changing either changes the action', async () => {
    const p = small(env);
    const o = env.reset(11);
    const zero = new Float32Array(2);
    const base = (await p.act(o.state, zero, { images: o.image!, instructions: [o.instruction] })).mean;
    const dark = (await p.act(o.state, zero, { images: new Uint8Array(o.image!.length), instructions: [o.instruction] })).mean;
    const otherInstruction = o.instruction === 'reach the blue target' ? 'reach the red target' : 'reach the blue target';
    const other = (await p.act(o.state, zero, { images: o.image!, instructions: [otherInstruction] })).mean;
    expect(Math.abs(dark[0]! - base[0]!) + Math.abs(dark[1]! - base[1]!)).toBeGreaterThan(1e-6);
    expect(Math.abs(other[0]! - base[0]!) + Math.abs(other[1]! - base[1]!)).toBeGreaterThan(1e-6);
    await expect(p.act(o.state, zero, { instructions: [o.instruction] })).rejects.toThrow(/needs images/);
    await expect(p.act(o.state, zero, { images: o.image! })).rejects.toThrow(/needs 1 instructions, got 0/);
    await p.release();
  });

  it('tokenizes over the vocabulary of the instructions: padding 0, unknown words 1', () => {
    const vocab = buildVocabulary(['Reach the red target', 'reach the BLUE target']);
    expect(vocab).toEqual(['blue', 'reach', 'red', 'target', 'the']);
    expect(Array.from(tokenize(['reach the green target', 'red'], vocab, 5), Number)).toEqual([3, 6, 1, 5, 0, 4, 0, 0, 0, 0]);
  });
});

describe("the VLA's proprioception: the whole observation, or the robot's own state", () => {
  const make = (proprio?: 'all' | 'robot') => new VlaPolicy({
    layout: env.layout, actDim: 2, image: { height: 64, width: 64 }, instructions: env.observationSpace.instructions, convChannels: [8, 8], imageFeatures: 16, hidden: [32], seed: 3, ...(proprio ? { proprio } : {}),
  });
  const o = () => env.reset(11);
  const scene = () => env.layout.features.flatMap((f, i) => (f.scene ? [2 * env.layout.joints.length + i] : []));
  /** The mean action and the log-prob of a fixed action at obs with one entry moved by `delta`. */
  const at = async (p: VlaPolicy, entry: number, delta: number) => {
    const ob = o(), s = Float32Array.from(ob.state);
    s[entry]! += delta;
    const ctx = { images: ob.image!, instructions: [ob.instruction] };
    return { mean: Array.from((await p.act(s, new Float32Array(2), ctx)).mean), logProb: (await p.logProb(s, Float32Array.of(0.1, -0.2), ctx))[0]! };
  };

  it("resolves into the config: 'all' (the default) reads every entry, 'robot' the layout's robot entries", async () => {
    const all = make(), robot = make('robot');
    expect(all.config.proprio).toBe('all');
    expect(all.config.proprioEntries).toEqual(Array.from({ length: all.obsDim }, (_, i) => i));
    expect(robot.config.proprio).toBe('robot');
    expect(robot.config.proprioEntries).toEqual(robotEntries(env.layout));
    expect(robot.config.proprioEntries).toEqual([0, 1, 2, 3, 4, 5]);
    expect(() => new VlaPolicy({ layout: env.layout, actDim: 2, image: { height: 64, width: 64 }, instructions: ['a'], proprio: 'scene' as 'all' })).toThrow("vla: proprio must be 'all' or 'robot', got scene");
    await all.release();
    await robot.release();
  });

  it("with 'robot', a scene entry (a target, the goal one-hot, the goal offset) moves neither the mean nor the log-prob; a robot entry does; with 'all' both do", async () => {
    const all = make(), robot = make('robot');
    const moved = (a: { mean: number[]; logProb: number }, b: { mean: number[]; logProb: number }) => Math.abs(a.mean[0]! - b.mean[0]!) + Math.abs(a.mean[1]! - b.mean[1]!) + Math.abs(a.logProb - b.logProb);
    expect(scene().length).toBe(11);
    for (const p of [all, robot]) {
      const base = await at(p, 0, 0);
      for (const e of scene()) {
        const m = moved(await at(p, e, 0.5), base);
        if (p === robot) expect(m).toBe(0);
        else expect(m).toBeGreaterThan(1e-6);
      }
      for (const e of [0, 3, 4]) expect(moved(await at(p, e, 0.5), base)).toBeGreaterThan(1e-6);
    }
    await all.release();
    await robot.release();
  });

  it("behaviour cloning with 'robot' leaves the fusion MLP's weights on the scene entries where they started", async () => {
    const p = make('robot');
    const w = () => {
      const t = p.store.get(`${p.net.layers[0]!.name}.weight`), out = t.shape[1]!;
      return (entry: number) => Array.from(t.data.subarray((p.featureDim + entry) * out, (p.featureDim + entry + 1) * out));
    };
    const before = w();
    const first = { scene: scene().map(before), robot: [0, 4].map(before) };
    await behaviourClone(p, expertDemonstrations(env, 1, 5), { epochs: 1, batchSize: 32, optimizer: { lr: 3e-3, clipNorm: 1 } });
    const after = w();
    expect(scene().map(after)).toEqual(first.scene);
    expect([0, 4].map(after)).not.toEqual(first.robot);
    await p.release();
  }, 60_000);

  it("a policy-gradient step on the head (the frozen encoder's path) and on the latent face leaves them there too", async () => {
    const d = expertDemonstrations(env, 1, 6), M = 16, D = env.layout.joints.length * 2 + env.layout.features.length;
    const batch = {
      obs: d.obs.subarray(0, M * D), action: d.action.subarray(0, M * 2), images: d.images!.subarray(0, M * 64 * 64 * 3), instructions: d.instructions!.slice(0, M),
      advantage: Float32Array.from({ length: M }, (_, i) => (i % 2 ? 1 : -1)), weight: new Float32Array(M).fill(1),
    };
    for (const face of [false, true]) {
      const p = make('robot');
      const policy = face ? LatentVla.declare(p, [16]) : p;
      const cols = () => {
        const t = p.store.get(`${p.net.layers[0]!.name}.weight`), out = t.shape[1]!;
        return (entry: number) => Array.from(t.data.subarray((p.featureDim + entry) * out, (p.featureDim + entry + 1) * out));
      };
      const before = cols();
      const first = { scene: scene().map(before), robot: [0, 4].map(before) };
      const oldLogProb = await policy.logProb(batch.obs, batch.action, { images: batch.images, instructions: batch.instructions });
      const pg = await ClippedPolicyGradient.create(policy, { ...DEFAULT_PG_CONFIG, epochs: 1, minibatch: M }, { trainable: p.headParamNames() });
      await pg.update({ ...batch, oldLogProb }, new Rng(1));
      await pg.release();
      const after = cols();
      expect(scene().map(after)).toEqual(first.scene);
      expect([0, 4].map(after)).not.toEqual(first.robot);
      await policy.release();
      if (face) await p.release();
    }
  }, 60_000);
});

describe('VLA behaviour cloning from the scripted expert with camera images', () => {
  it('the BC loss falls and the held-out action error drops well below the untrained policy\'s', async () => {
    const p = new VlaPolicy({ layout: env.layout, actDim: 2, image: { height: 64, width: 64 }, instructions: env.observationSpace.instructions, seed: 0 });
    const train = expertDemonstrations(env, 8, 100);
    const test = expertDemonstrations(env, 2, 900);
    const M = test.action.length / 2, D = train.obs.length / (train.action.length / 2);
    const heldOut = async () => {
      const r = await p.act(test.obs, new Float32Array(M * 2), { images: test.images, instructions: test.instructions });
      return r.mean.reduce((s, m, i) => s + (m - test.action[i]!) ** 2, 0) / M;
    };
    expect(D).toBe(p.obsDim);
    const before = await heldOut();
    const losses: number[] = [];
    await behaviourClone(p, train, { epochs: 8, batchSize: 64, optimizer: { lr: 3e-3, clipNorm: 1 }, onEpoch: (_, l) => losses.push(l) });
    const after = await heldOut();
    expect(losses.at(-1)!).toBeLessThan(0.6 * losses[0]!);
    expect(after).toBeLessThan(0.6 * before);
    await p.release();
  }, 120_000);
});

describe('the VLA deployment artifact', () => {
  let robot: SimRobot;
  let path: string;
  let p: VlaPolicy;
  beforeAll(async () => {
    robot = await SimRobot.create({ task: 'reach', image: 64 });
    p = small(robot.env);
    path = join(dir, 'vla.onnx');
    exportPolicyArtifact(p, path, { layout: robot.env.layout, action: robot.spec.action, controlHz: robot.spec.controlHz, policyVersion: 'vla-test-1', runId: 'run-42' });
  });
  afterAll(async () => {
    await p.release();
    await robot[Symbol.asyncDispose]();
  });

  it('passes onnx.checker (full_check) and carries the deployment metadata', () => {
    onnxCheck(path);
    const s = new Map<string, string>();
    // read through onnxruntime's own view of the file too
    return ortNode.InferenceSession.create(path).then(async (sess) => {
      expect(sess.inputNames).toEqual(['obs', 'image', 'tokens']);
      expect(sess.outputNames).toEqual(['action']);
      await sess.release();
      const md = (await OnnxPolicy.load(path, robot.spec)).metadata;
      for (const [k, v] of Object.entries(md)) s.set(k, v);
      expect(JSON.parse(s.get('vocabulary')!)).toEqual(['blue', 'green', 'reach', 'red', 'target', 'the']);
      expect(JSON.parse(s.get('action_spec')!)).toEqual({ kind: 'normalized', names: ['shoulder', 'elbow'], low: [-1, -1], high: [1, 1] });
      expect(JSON.parse(s.get('control_hz')!)).toBe(50);
      expect(s.get('policy_version')).toBe('vla-test-1');
      expect(s.get('training_run')).toBe('run-42');
      expect(JSON.parse(s.get('normalization')!).obs_mean).toHaveLength(layoutDim(layoutOf(robot.spec)));
      expect(JSON.parse(s.get('image')!)).toMatchObject({ height: 64, width: 64, layout: 'NHWC' });
      expect(JSON.parse(s.get('observation_layout')!).joints.map((j: { name: string }) => j.name)).toEqual(['shoulder', 'elbow']);
    });
  });

  it('onnxruntime-node and onnxruntime-web (wasm) give the same actions to 1e-5, equal to the policy\'s mean', async () => {
    const demos = expertDemonstrations(robot.env, 1, 21);
    const n = 4, D = p.obsDim;
    const ctx = { images: demos.images!.subarray(0, n * 64 * 64 * 3), instructions: demos.instructions!.slice(0, n) };
    const feedsOf = <T extends typeof ortNode.Tensor | typeof ortWeb.Tensor>(T: T) => {
      const img = Float32Array.from(ctx.images, (v) => v / 255);
      return {
        obs: new T('float32', demos.obs.slice(0, n * D), [n, D]),
        image: new T('float32', img, [n, 64, 64, 3]),
        tokens: new T('int64', tokenize(ctx.instructions, p.config.vocabulary, p.config.maxTokens), [n, p.config.maxTokens]),
      };
    };
    const node = await ortNode.InferenceSession.create(path);
    const a = (await node.run(feedsOf(ortNode.Tensor) as Record<string, ortNode.Tensor>)).action!.data as Float32Array;
    await node.release();
    ortWeb.env.wasm.numThreads = 1;
    const web = await ortWeb.InferenceSession.create(readFileSync(path), { executionProviders: ['wasm'] });
    const b = (await web.run(feedsOf(ortWeb.Tensor) as Record<string, ortWeb.Tensor>)).action!.data as Float32Array;
    await web.release();
    const mean = (await p.act(demos.obs.subarray(0, n * D), new Float32Array(n * 2), ctx)).mean;
    expect(a).toHaveLength(n * 2);
    for (let i = 0; i < n * 2; i++) {
      expect(Math.abs(a[i]! - b[i]!)).toBeLessThan(1e-5);
      expect(Math.abs(a[i]! - mean[i]!)).toBeLessThan(1e-5);
    }
  });

  it('runs on the robot it was made for and is refused, naming the mismatch, on one it was not', async () => {
    const ok = await OnnxPolicy.load(path, robot.spec);
    const obs = await robot.reset({ seed: 3 });
    const a = await ok.act(obs);
    const want = (await p.act(Float32Array.from([...obs.position, ...obs.velocity, ...obs.features!]), new Float32Array(2), { images: obs.image!.data, instructions: [obs.instruction!] })).mean;
    a.forEach((v, i) => expect(Math.abs(v - want[i]!)).toBeLessThan(1e-5));
    const spec = robot.spec;
    await expect(OnnxPolicy.load(path, { ...spec, camera: undefined })).rejects.toThrow(/reads a 64x64 camera image; the robot declares no camera/);
    // A 640x480 JPEG camera drives it: the policy acts on each frame cropped and resized to the 64x64 it was trained at.
    const big = await OnnxPolicy.load(path, { ...spec, camera: { width: 640, height: 480, encoding: 'jpeg' } });
    const frame = { width: 640, height: 480, encoding: 'jpeg' as const, data: new Uint8Array(readFileSync(new URL('./fixtures/camera-640x480.jpg', import.meta.url))) };
    const fromJpeg = await big.act({ ...obs, image: frame });
    const wantJpeg = (await p.act(Float32Array.from([...obs.position, ...obs.velocity, ...obs.features!]), new Float32Array(2), { images: cameraRgb(frame, { width: 64, height: 64 }, 'frame'), instructions: [obs.instruction!] })).mean;
    fromJpeg.forEach((v, i) => expect(Math.abs(v - wantJpeg[i]!)).toBeLessThan(1e-5));
    await expect(OnnxPolicy.load(path, { ...spec, controlHz: 10 })).rejects.toThrow(/control rates differ: policy runs at 50 Hz, robot at 10 Hz/);
    await expect(OnnxPolicy.load(path, { ...spec, action: { ...spec.action, high: [1, 2] } })).rejects.toThrow(/action specs differ: action 1: policy has 'elbow' \[-1, 1\], robot has 'elbow' \[-1, 2\]/);
    await expect(OnnxPolicy.load(path, { ...spec, action: { ...spec.action, kind: 'joint_position' } })).rejects.toThrow(/action kind: policy has normalized, robot has joint_position/);
    const { instruction: _, ...noInstruction } = obs;
    await expect(ok.act(noInstruction)).rejects.toThrow(/reads the instruction; robot sim-reach-nominal's observation has none/);
  });

  it("a VLA over the robot's own state exports a graph that still takes the whole observation: its mean in onnxruntime-node is act's, and a scene entry moves neither", async () => {
    const v = new VlaPolicy({ layout: robot.env.layout, actDim: 2, image: { height: 64, width: 64 }, instructions: robot.env.observationSpace.instructions, convChannels: [8, 8], imageFeatures: 16, hidden: [32], seed: 3, proprio: 'robot' });
    const vp = join(dir, 'vla-robot.onnx');
    exportPolicyArtifact(v, vp, { layout: robot.env.layout, action: robot.spec.action, controlHz: robot.spec.controlHz, policyVersion: 'r', runId: 'r' });
    const sess = await ortNode.InferenceSession.create(vp);
    try {
      const obs = await robot.reset({ seed: 6 });
      const state = Float32Array.from([...obs.position, ...obs.velocity, ...obs.features!]);
      const goalX = 2 * robot.env.layout.joints.length + robot.env.layout.features.findIndex((f) => f.name === 'goal x - tip x');
      const moved = Float32Array.from(state, (x, i) => (i === goalX ? x + 0.3 : x));
      const ctx = { images: obs.image!.data, instructions: [obs.instruction!] };
      const run = async (s: Float32Array) => Array.from((await sess.run({
        obs: new ortNode.Tensor('float32', s, [1, s.length]),
        image: new ortNode.Tensor('float32', Float32Array.from(ctx.images, (x) => x / 255), [1, 64, 64, 3]),
        tokens: new ortNode.Tensor('int64', tokenize(ctx.instructions, v.config.vocabulary, v.config.maxTokens), [1, v.config.maxTokens]),
      })).action!.data as Float32Array);
      const mean = (await v.act(state, new Float32Array(2), ctx)).mean;
      const a = await run(state), b = await run(moved);
      expect(sess.inputNames).toEqual(['obs', 'image', 'tokens']);
      a.forEach((x, i) => expect(Math.abs(x - mean[i]!)).toBeLessThan(1e-5));
      expect(b).toEqual(a);
      // on the robot, through the artifact's own loader: the same mean
      const deployed = await OnnxPolicy.load(vp, robot.spec);
      (await deployed.act(obs)).forEach((x, i) => expect(Math.abs(x - mean[i]!)).toBeLessThan(1e-5));
    } finally {
      await sess.release();
      await v.release();
    }
  });

  it('a chunked artifact sends its chunk one action per step before asking again', async () => {
    const c = small(robot.env, 3);
    const cp = join(dir, 'chunk.onnx');
    exportPolicyArtifact(c, cp, { layout: robot.env.layout, action: robot.spec.action, controlHz: robot.spec.controlHz, policyVersion: 'c', runId: 'r' });
    const run = await OnnxPolicy.load(cp, robot.spec);
    const obs = await robot.reset({ seed: 4 });
    const full = (await c.act(Float32Array.from([...obs.position, ...obs.velocity, ...obs.features!]), new Float32Array(6), { images: obs.image!.data, instructions: [obs.instruction!] })).mean;
    const got = [await run.act(obs), await run.act(obs), await run.act(obs)].flatMap((x) => Array.from(x));
    got.forEach((v, i) => expect(Math.abs(v - full[i]!)).toBeLessThan(1e-5));
    await c.release();
  });

  it('wmrl drive --policy runs the VLA artifact with image and instruction on the sim robot', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'drive', '--robot', 'sim:reach', '--command-history', '0', '--policy', path, '--episodes', '1', '--steps', '5', '--fast', '--store', join(dir, 'drive.db')], { encoding: 'utf8', timeout: 120_000 });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/1 episode\(s\) recorded .*; success [01]\/1/);
    expect(r.stdout).toMatch(/\b5\b.*complete/);
  });
});
