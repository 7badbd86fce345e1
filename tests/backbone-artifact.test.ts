// One deployable file for a head on a frozen backbone: the backbone's graph composed with the head's
// (nn/compose.ts) passes onnx.checker (full_check), carries the metadata_props of exportPolicyArtifact plus
// the backbone's image format and vocabulary, and gives the policy's mean actions in onnxruntime-node,
// onnxruntime-web (wasm) and OnnxPolicy on the robot (1e-5). Backbones: the VLA encoder the project
// exports, and one written by Python's onnx package; opset and name clashes are refused by name.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ortNode from 'onnxruntime-node';
import * as ortWeb from 'onnxruntime-web';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readOnnxInfo } from '../nn/index.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { ARTIFACT_KEYS, exportPolicyArtifact } from '../policies/artifact.js';
import { BackboneHeadPolicy, FrozenBackbone, exportBackboneHeadArtifact, exportVlaEncoder } from '../policies/backbone.js';
import { behaviourClone } from '../policies/bc.js';
import { expertDemonstrations } from '../policies/demos.js';
import { OnnxPolicy } from '../policies/onnx-policy.js';
import { tokenize } from '../policies/tokenizer.js';
import { VlaPolicy } from '../policies/vla.js';
import { onnxCheck } from './helpers/onnx-check.js';

const dir = mkdtempSync(join(tmpdir(), 'backbone-artifact-'));
const S = 24;
let robot: SimRobot;
beforeAll(async () => {
  robot = await SimRobot.create({ task: 'reach', image: S });
});
afterAll(async () => {
  await robot[Symbol.asyncDispose]();
  rmSync(dir, { recursive: true, force: true });
});

const meta = () => ({ layout: robot.env.layout, action: robot.spec.action, controlHz: robot.spec.controlHz, policyVersion: 'bh-1', runId: 'run-7' });

/** A head on `backbone`, behaviour-cloned a little so its actions span the range. */
async function trainedHead(backbonePath: string): Promise<{ head: BackboneHeadPolicy; demos: ReturnType<typeof expertDemonstrations> }> {
  const bb = await FrozenBackbone.load(backbonePath);
  const head = new BackboneHeadPolicy(bb, { obsDim: robot.env.observationSpace.state.shape[0], actDim: 2, hidden: [32], seed: 2 });
  const demos = expertDemonstrations(robot.env, 2, 60);
  const M = demos.action.length / 2;
  await behaviourClone(head, { ...demos, features: await bb.features(demos, M) }, { epochs: 8, batchSize: 32, optimizer: { lr: 3e-3, clipNorm: 1 } });
  return { head, demos };
}

/** The composed file's actions in onnxruntime-node and -web against the head's mean (with clipping, as the artifact does). */
async function sameActions(path: string, head: BackboneHeadPolicy, demos: ReturnType<typeof expertDemonstrations>, n: number): Promise<number> {
  const D = head.obsDim, px = S * S * 3;
  const ctx = { images: demos.images!.subarray(0, n * px), instructions: demos.instructions!.slice(0, n) };
  const bb = head.backbone;
  const feedsOf = <T extends typeof ortNode.Tensor | typeof ortWeb.Tensor>(T: T) => ({
    obs: new T('float32', demos.obs.slice(0, n * D), [n, D]),
    ...(bb.image ? { image: new T('float32', Float32Array.from(ctx.images, (v) => v / 255), [n, S, S, 3]) } : {}),
    ...(bb.instruction ? { tokens: new T('int64', tokenize(ctx.instructions, bb.instruction.vocabulary, bb.instruction.maxTokens), [n, bb.instruction.maxTokens]) } : {}),
  });
  const node = await ortNode.InferenceSession.create(path);
  const a = (await node.run(feedsOf(ortNode.Tensor) as Record<string, ortNode.Tensor>)).action!.data as Float32Array;
  await node.release();
  ortWeb.env.wasm.numThreads = 1;
  const web = await ortWeb.InferenceSession.create(readFileSync(path), { executionProviders: ['wasm'] });
  const b = (await web.run(feedsOf(ortWeb.Tensor) as Record<string, ortWeb.Tensor>)).action!.data as Float32Array;
  await web.release();
  const mean = (await head.act(demos.obs.subarray(0, n * D), new Float32Array(n * 2), ctx)).mean;
  expect(a).toHaveLength(n * 2);
  let worst = 0;
  for (let i = 0; i < n * 2; i++) {
    worst = Math.max(worst, Math.abs(a[i]! - b[i]!), Math.abs(a[i]! - Math.min(1, Math.max(-1, mean[i]!))));
  }
  return worst;
}

describe('backbone + head as one artifact', () => {
  it('the VLA encoder as backbone: one graph that passes onnx.checker, with the artifact metadata, giving the policy\'s actions', async () => {
    const vla = new VlaPolicy({ layout: robot.env.layout, actDim: 2, image: { height: S, width: S }, instructions: robot.env.observationSpace.instructions, convChannels: [8, 8], imageFeatures: 16, seed: 4 });
    const encoder = join(dir, 'encoder.onnx');
    exportVlaEncoder(vla, encoder);
    const { head, demos } = await trainedHead(encoder);
    const path = join(dir, 'policy.onnx');
    const info = exportBackboneHeadArtifact(head, path, meta());
    onnxCheck(path);
    expect(info.inputs.map((i) => i.name)).toEqual(['image', 'tokens', 'obs']);
    expect(info.outputs.map((o) => [o.name, o.shape])).toEqual([['action', ['batch', 2]]]);
    // every key a plain artifact carries, plus the backbone's image, vocabulary and identity
    const plain = join(dir, 'plain.onnx');
    exportPolicyArtifact(vla, plain, meta());
    const md = info.metadata;
    for (const k of Object.keys(readOnnxInfo(plain).metadata)) expect(md).toHaveProperty(k);
    expect(md[ARTIFACT_KEYS.kind]).toBe('backbone_head');
    expect(JSON.parse(md[ARTIFACT_KEYS.vocabulary]!)).toEqual(vla.config.vocabulary);
    expect(JSON.parse(md[ARTIFACT_KEYS.image]!)).toMatchObject({ height: S, width: S, layout: 'NHWC' });
    expect(JSON.parse(md[ARTIFACT_KEYS.normalization]!)).toMatchObject({ image: 'rgb8 / 255' });
    expect(JSON.parse(md.backbone!)).toMatchObject({ file: 'encoder.onnx', features: vla.featureDim });
    expect(md[ARTIFACT_KEYS.policyVersion]).toBe('bh-1');
    expect(await sameActions(path, head, demos, 6)).toBeLessThan(1e-5);
    // the robot runs it from the one file, image and instruction included
    const run = await OnnxPolicy.load(path, robot.spec);
    const o = await robot.reset({ seed: 8 });
    const got = await run.act(o);
    const want = (await head.act(Float32Array.from([...o.position, ...o.velocity, ...o.features!]), new Float32Array(2), { images: o.image!.data, instructions: [o.instruction!] })).mean;
    got.forEach((v, i) => expect(Math.abs(v - Math.min(1, Math.max(-1, want[i]!)))).toBeLessThan(1e-5));
    await expect(OnnxPolicy.load(path, { ...robot.spec, camera: undefined })).rejects.toThrow(/reads a 24x24 camera image; the robot declares no camera/);
    await head.release();
    await head.backbone.release();
    await vla.release();
  });

  it('a backbone written by Python\'s onnx package (image only); other opsets and clashing names are refused by name', async () => {
    const py = (file: string, opset: number, prefix: string) => execFileSync('/usr/bin/python3', ['-c', [
      'import sys, onnx, numpy as np',
      'from onnx import helper as h, TensorProto as T, numpy_helper as nh',
      `S, p = ${S}, '${prefix}'`,
      "w = nh.from_array(np.linspace(-1, 1, 3 * 5).astype(np.float32).reshape(3, 5), p + 'w')",
      'g = h.make_graph([',
      "  h.make_node('ReduceMean', ['image'], [p + 'pooled'], axes=[1, 2], keepdims=0),",
      "  h.make_node('MatMul', [p + 'pooled', p + 'w'], [p + 'mm']),",
      "  h.make_node('Tanh', [p + 'mm'], ['features'])],",
      "  'py_backbone', [h.make_tensor_value_info('image', T.FLOAT, ['b', S, S, 3])],",
      "  [h.make_tensor_value_info('features', T.FLOAT, ['b', 5])], [w])",
      `m = h.make_model(g, opset_imports=[h.make_opsetid('', ${opset})], producer_name='python-test')`,
      'm.ir_version = 8',
      'onnx.checker.check_model(m, full_check=True)',
      'onnx.save(m, sys.argv[1])',
    ].join('\n'), file]);
    const good = join(dir, 'py17.onnx');
    py(good, 17, 'bb_');
    const { head, demos } = await trainedHead(good);
    const path = join(dir, 'py-policy.onnx');
    const info = exportBackboneHeadArtifact(head, path, meta());
    onnxCheck(path);
    expect(info.inputs.map((i) => i.name)).toEqual(['image', 'obs']);
    expect(info.metadata[ARTIFACT_KEYS.vocabulary]).toBeUndefined();
    expect(await sameActions(path, head, demos, 5)).toBeLessThan(1e-5);
    await head.release();
    await head.backbone.release();

    const old = join(dir, 'py13.onnx');
    py(old, 13, 'bb_');
    const h13 = new BackboneHeadPolicy(await FrozenBackbone.load(old), { obsDim: head.obsDim, actDim: 2 });
    expect(() => exportBackboneHeadArtifact(h13, join(dir, 'x.onnx'), meta())).toThrow(/first model imports opset 13, the second 17; convert the first to opset 17/);
    await h13.backbone.release();
    const clash = join(dir, 'clash.onnx');
    py(clash, 17, 'head/');
    const hc = new BackboneHeadPolicy(await FrozenBackbone.load(clash), { obsDim: head.obsDim, actDim: 2 });
    expect(() => exportBackboneHeadArtifact(hc, join(dir, 'y.onnx'), meta())).toThrow(/uses the name 'head\/\w+', which starts with the second model's prefix 'head\/'/);
    await hc.backbone.release();
  });
});
