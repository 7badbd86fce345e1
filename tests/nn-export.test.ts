// Exported models: valid for the independent onnx checker (Debian python3-onnx), same outputs in a
// fresh onnxruntime-node session, in onnxruntime-web (wasm) under Node, and in the float64 reference.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ortweb from 'onnxruntime-web';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';
import { onnxCheck } from './helpers/onnx-check.js';

const dir = mkdtempSync(join(tmpdir(), 'nn-export-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
beforeAll(() => {
  ortweb.env.wasm.numThreads = 1;
});

function vlaPolicy() {
  const store = new nn.ParamStore(42);
  const enc = new nn.ConvEncoder(store, 'vision', { height: 16, width: 16, inChannels: 3, channels: [8, 16], outDim: 32 });
  const emb = new nn.Embedding(store, 'instr', 12, 32);
  const trunk = new nn.MLP(store, 'trunk', { sizes: [32 + 32 + 6, 64, 4], activation: 'silu', outActivation: 'tanh' });
  const g = new nn.Graph();
  const image = g.input('image', ['batch', 16, 16, 3]);
  const instr = g.input('instruction', ['batch', 5], 'int64');
  const proprio = g.input('proprio', ['batch', 6]);
  const words = nn.mean(emb.forward(instr), 1);
  const action = trunk.forward(nn.concat([enc.forward(image), words, proprio], 1));
  return {
    store,
    inputs: [
      { name: 'image', tensor: image, doc: 'RGB camera image, [batch, 16, 16, 3], values in [0, 1]' },
      { name: 'instruction', tensor: instr, doc: 'instruction token ids, [batch, 5]' },
      { name: 'proprio', tensor: proprio, doc: 'joint positions and velocities, [batch, 6]' },
    ],
    outputs: [{ name: 'action', tensor: action, doc: 'joint velocity command in [-1, 1], [batch, 4]' }],
  };
}

describe('ONNX export', () => {
  const meta = { observation_spec: { proprio: { shape: [6] } }, action_spec: { shape: [4], low: -1, high: 1 }, control_rate_hz: 50, vocabulary: ['<pad>', 'reach', 'the', 'red', 'target'] };

  it('writes a standalone model the onnx checker accepts, with IR ≤ 8, opset ≤ 17 and metadata_props', () => {
    const p = vlaPolicy();
    const path = join(dir, 'policy.onnx');
    const info = nn.exportOnnx(path, { ...p, metadata: meta, docString: 'test policy' });
    expect(info.irVersion).toBeLessThanOrEqual(8);
    expect(info.opset).toBeLessThanOrEqual(17);
    expect(info.inputs.map((i) => i.name)).toEqual(['image', 'instruction', 'proprio']);
    expect(info.inputs[0]!.shape).toEqual(['batch', 16, 16, 3]);
    expect(info.inputs[1]!.dtype).toBe('int64');
    expect(info.outputs[0]!.doc).toMatch(/joint velocity/);
    expect(JSON.parse(info.metadata.action_spec!)).toEqual(meta.action_spec);
    expect(info.metadata.control_rate_hz).toBe('50');
    const checked = onnxCheck(path);
    expect(checked).toEqual({ ir: info.irVersion, opset: info.opset });
  });

  it('gives the same outputs (1e-5) in onnxruntime-node, onnxruntime-web (wasm) and the float64 reference, at batch 1 and 7', async () => {
    const p = vlaPolicy();
    const path = join(dir, 'policy2.onnx');
    nn.exportOnnx(path, { ...p, metadata: meta });
    const bytes = readFileSync(path);
    const nodeSession = await nn.ort.InferenceSession.create(path);
    const webSession = await ortweb.InferenceSession.create(new Uint8Array(bytes));
    const rng = new nn.Rng(9);
    for (const B of [1, 7]) {
      const img = Float32Array.from({ length: B * 16 * 16 * 3 }, () => rng.next());
      const ids = Array.from({ length: B * 5 }, () => rng.int(12));
      const pro = Float32Array.from({ length: B * 6 }, () => rng.uniform(-1, 1));
      const a = nn.f32((await nodeSession.run({ image: nn.tensor(img, [B, 16, 16, 3]), instruction: nn.tensor(ids, [B, 5], 'int64'), proprio: nn.tensor(pro, [B, 6]) })).action);
      const w = (await webSession.run({
        image: new ortweb.Tensor('float32', img, [B, 16, 16, 3]),
        instruction: new ortweb.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [B, 5]),
        proprio: new ortweb.Tensor('float32', pro, [B, 6]),
      })).action!.data as Float32Array;
      const ref = nn.evaluate([p.outputs[0]!.tensor], { image: nn.nd([B, 16, 16, 3], img), instruction: nn.nd([B, 5], ids), proprio: nn.nd([B, 6], pro) }, p.store)[0]!;
      expect(a.length).toBe(B * 4);
      expect(new Set(Array.from(a, (v) => v.toFixed(4))).size).toBeGreaterThan(1);
      for (let i = 0; i < a.length; i++) {
        expect(Math.abs(a[i]! - w[i]!)).toBeLessThan(1e-5);
        expect(Math.abs(a[i]! - ref.data[i]!)).toBeLessThan(1e-5);
      }
    }
    await nodeSession.release();
    await webSession.release();
  });

  it('emits training-step graphs the onnx checker accepts (every op and its gradient)', async () => {
    const store = new nn.ParamStore(1);
    const enc = new nn.ConvEncoder(store, 'enc', { height: 8, width: 8, inChannels: 1, channels: [4], outDim: 6 });
    const emb = new nn.Embedding(store, 'emb', 5, 6);
    const ln = new nn.LayerNorm(store, 'ln', 6);
    const ens = new nn.EnsembleMLP(store, 'ens', 3, { sizes: [6, 8, 4], activation: 'silu' });
    store.create('log_std', [2], 'zeros');
    const g = new nn.Graph();
    const img = g.input('img', ['batch', 8, 8, 1]);
    const tok = g.input('tok', ['batch'], 'int64');
    const act = g.input('act', [3, 'batch', 2]);
    const h = ln.forward(nn.add(enc.forward(img), emb.forward(tok)));
    const out = ens.forward(h);
    const mu = nn.slice(out, 2, 0, 2);
    const logits = nn.slice(out, 2, 2, 4);
    const logStd = g.param('log_std', [2]);
    const lp = nn.gaussianLogProb(act, mu, logStd);
    const pg = nn.mean(nn.mul(nn.clip(nn.exp(lp), 0, 5), nn.max(nn.logSoftmax(logits), -1)));
    const loss = nn.sub(nn.add(pg, nn.mean(nn.where(nn.greater(mu, 0), nn.abs(mu), nn.softplus(mu)))), nn.mean(nn.gaussianEntropy(logStd)));
    const trainer = await nn.Trainer.create({ loss, store, optimizer: { lr: 1e-3, clipNorm: 1, weightDecay: 0.01 } });
    const path = join(dir, 'train.onnx');
    writeFileSync(path, trainer.model);
    expect(onnxCheck(path).opset).toBe(17);
    const r = await trainer.step({ img: nn.tensor(new Float32Array(2 * 64).fill(0.5), [2, 8, 8, 1]), tok: nn.tensor([1, 3], [2], 'int64'), act: nn.tensor(new Float32Array(12).fill(0.1), [3, 2, 2]) });
    expect(Number.isFinite(r.loss) && r.gradNorm > 0).toBe(true);
  });
});
