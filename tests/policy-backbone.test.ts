// A frozen external backbone: the VLA's own encoder exported alone stands in for a user's .onnx (nothing
// downloaded). It runs in onnxruntime-node and reproduces the in-process encoder; its features are
// cached per step; a Gaussian head on it trains by behaviour cloning while the backbone stays as it was.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';
import { makeEnv, type Env } from '../sim/index.js';
import { BackboneHeadPolicy, FrozenBackbone, exportVlaEncoder } from '../policies/backbone.js';
import { behaviourClone } from '../policies/bc.js';
import { expertDemonstrations } from '../policies/demos.js';
import { VlaPolicy } from '../policies/vla.js';
import { tokenize } from '../policies/tokenizer.js';
import { onnxCheck } from './helpers/onnx-check.js';

const dir = mkdtempSync(join(tmpdir(), 'backbone-'));
let env: Env;
let vla: VlaPolicy;
let path: string;
beforeAll(async () => {
  env = await makeEnv({ task: 'reach', image: 64, seed: 0 });
  vla = new VlaPolicy({ layout: env.layout, actDim: 2, image: { height: 64, width: 64 }, instructions: env.observationSpace.instructions, convChannels: [8, 16], imageFeatures: 32, seed: 5 });
  path = join(dir, 'encoder.onnx');
  exportVlaEncoder(vla, path);
});
afterAll(async () => {
  await vla.release();
  env.dispose();
});

describe('frozen backbone', () => {
  it('the exported encoder passes onnx.checker and reproduces the in-process VLA encoder', async () => {
    onnxCheck(path);
    const bb = await FrozenBackbone.load(path);
    expect(bb.featureDim).toBe(vla.featureDim);
    const d = expertDemonstrations(env, 1, 3);
    const n = 5;
    const ctx = { images: d.images!.subarray(0, n * 64 * 64 * 3), instructions: d.instructions!.slice(0, n) };
    const got = await bb.features(ctx, n);
    const g = new nn.Graph();
    const c = vla.graphContext(g);
    const prog = await nn.Program.inference([{ name: 'image', tensor: c.image }, { name: 'tokens', tensor: c.tokens }], [{ name: 'f', tensor: vla.features(c.image, c.tokens) }], vla.store);
    const img = Float32Array.from(ctx.images, (v) => v / 255);
    const want = nn.f32((await prog.run({ image: nn.tensor(img, [n, 64, 64, 3]), tokens: nn.tensor(tokenize(ctx.instructions, vla.config.vocabulary, 8), [n, 8], 'int64') })).f);
    await prog.release();
    for (let i = 0; i < got.length; i++) expect(Math.abs(got[i]! - want[i]!)).toBeLessThan(1e-5);
    await bb.release();
  });

  it('caches features per step: a step seen again does not run the backbone', async () => {
    const bb = await FrozenBackbone.load(path);
    const d = expertDemonstrations(env, 1, 4);
    const n = 6;
    const ctx = { images: d.images!.subarray(0, n * 64 * 64 * 3), instructions: d.instructions!.slice(0, n) };
    const a = await bb.features(ctx, n);
    expect(bb.stats).toEqual({ runs: n, hits: 0 });
    const b = await bb.features(ctx, n);
    expect(bb.stats).toEqual({ runs: n, hits: n });
    expect(Array.from(b)).toEqual(Array.from(a));
    // the same image with another instruction is another step
    await bb.features({ images: ctx.images.subarray(0, 64 * 64 * 3), instructions: ['reach the green target' === ctx.instructions[0] ? 'reach the red target' : 'reach the green target'] }, 1);
    expect(bb.stats.runs).toBe(n + 1);
    await bb.release();
  });

  it('a head on the frozen backbone learns by behaviour cloning; the backbone file is unchanged', async () => {
    const before = readFileSync(path);
    const bb = await FrozenBackbone.load(path);
    const head = new BackboneHeadPolicy(bb, { obsDim: vla.obsDim, actDim: 2, seed: 1 });
    const demos = expertDemonstrations(env, 6, 200);
    const M = demos.action.length / 2;
    const features = await bb.features(demos, M);
    const losses: number[] = [];
    await behaviourClone(head, { ...demos, features }, { epochs: 15, batchSize: 64, optimizer: { lr: 3e-3, clipNorm: 1 }, onEpoch: (_, l) => losses.push(l) });
    expect(losses.at(-1)!).toBeLessThan(0.6 * losses[0]!);
    expect(bb.stats.runs).toBe(M); // every feature computed once, before training
    const o = env.reset(5);
    const r = await head.act(o.state, new Float32Array(2), { images: o.image!, instructions: [o.instruction] });
    expect(r.mean).toHaveLength(2);
    expect((await head.logProb(o.state, r.action, { images: o.image!, instructions: [o.instruction] }))[0]).toBeCloseTo(r.logProb[0]!, 4);
    expect(readFileSync(path).equals(before)).toBe(true);
    await head.release();
    await bb.release();
  });

  it('refuses a model that is not a backbone, naming what is wrong', async () => {
    const store = new nn.ParamStore(0);
    const g = new nn.Graph();
    const x = g.input('obs', ['batch', 3]);
    const bad = join(dir, 'bad.onnx');
    writeFileSync(bad, nn.exportModel({ inputs: [{ name: 'obs', tensor: x }], outputs: [{ name: 'features', tensor: nn.tanh(x) }], store }));
    await expect(FrozenBackbone.load(bad)).rejects.toThrow(/a backbone takes inputs 'image' and\/or 'tokens' \(has \[obs\]\)/);
    const g2 = new nn.Graph();
    const t = g2.input('tokens', ['batch', 4], 'int64');
    const noVocab = join(dir, 'novocab.onnx');
    writeFileSync(noVocab, nn.exportModel({ inputs: [{ name: 'tokens', tensor: t }], outputs: [{ name: 'features', tensor: nn.toFloat(t) }], store }));
    await expect(FrozenBackbone.load(noVocab)).rejects.toThrow(/reads 'tokens' but metadata 'vocabulary' is not a list of words/);
  });
});
