// `wmrl demo`: fit an ensemble world model to known dynamics and export it as ONNX.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import * as nn from '../../nn/index.js';
import { progressBar } from '../progress.js';

/**
 * Fits a 5-member world-model ensemble to a known dynamics function, reports held-out error and
 * member disagreement, and exports the ensemble as a standalone ONNX model.
 */
export async function demo(values: { steps: number; out: string; seed: number }): Promise<void> {
  const { steps, seed } = values;
  const out = resolve(values.out);
  mkdirSync(out, { recursive: true });
  // A pendulum-like transition: state (angle, velocity), action torque → next state.
  const dyn = (s: number[], a: number) => [s[0]! + 0.05 * s[1]!, s[1]! + 0.05 * (-9.8 * Math.sin(s[0]!) + a)];
  const rng = new nn.Rng(seed);
  const sample = () => {
    const s = [rng.uniform(-Math.PI, Math.PI), rng.uniform(-4, 4)];
    const a = rng.uniform(-2, 2);
    return { x: [s[0]!, s[1]!, a], y: dyn(s, a).map((v, i) => v - s[i]!) };
  };
  const E = 5, B = 256;
  const store = new nn.ParamStore(seed);
  const ens = new nn.EnsembleMLP(store, 'dynamics', E, { sizes: [3, 128, 128, 2], activation: 'silu' });
  const g = new nn.Graph();
  const x = g.input('x', [E, 'batch', 3]);
  const y = g.input('y', [E, 'batch', 2]);
  // Targets are scaled so both state deltas weigh alike in the loss.
  const scale = g.constant([10, 1], [2]);
  const loss = nn.mean(nn.square(nn.mul(nn.sub(ens.forward(x), y), scale)));
  const trainer = await nn.Trainer.create({ loss, store, optimizer: { lr: 2e-3, clipNorm: 10 } });
  const progress = progressBar();
  console.log(`fitting a ${E}-member ensemble world model (${store.count()} parameters) for ${steps} steps`);
  let last = 0;
  for (let step = 1; step <= steps; step++) {
    const xb = new Float32Array(E * B * 3), yb = new Float32Array(E * B * 2);
    for (let i = 0; i < E * B; i++) {
      const s = sample();
      xb.set(s.x, i * 3);
      yb.set(s.y, i * 2);
    }
    last = (await trainer.step({ x: nn.tensor(xb, [E, B, 3]), y: nn.tensor(yb, [E, B, 2]) })).loss;
    if (step % 25 === 0 || step === steps) progress(step, steps, `loss ${last.toExponential(2)}`);
  }
  trainer.syncToStore();
  const gi = new nn.Graph();
  const xi = gi.input('state_action', ['batch', 3]);
  const pred = ens.forward(xi);
  const path = join(out, 'world_model.onnx');
  const info = nn.exportOnnx(path, {
    inputs: [{ name: 'state_action', tensor: xi, doc: '[batch, 3]: angle (rad), angular velocity (rad/s), torque' }],
    outputs: [{ name: 'delta', tensor: pred, doc: `[${E}, batch, 2]: predicted state change per ensemble member` }],
    store,
    graphName: 'world_model',
    metadata: { kind: 'ensemble_dynamics', members: E, state: ['angle', 'angular_velocity'], action: ['torque'], dt: 0.05 },
  });
  store.save(join(out, 'world_model.safetensors'), { steps: String(steps) });
  const test = Array.from({ length: 1000 }, sample);
  const prog = await nn.Program.inference([{ name: 'x', tensor: xi }], [{ name: 'y', tensor: pred }], store);
  const o = nn.f32((await prog.run({ x: nn.tensor(test.flatMap((t) => t.x), [test.length, 3]) })).y);
  let err = 0, spread = 0;
  test.forEach((t, i) => {
    for (let k = 0; k < 2; k++) {
      const preds = Array.from({ length: E }, (_, e) => o[(e * test.length + i) * 2 + k]!);
      const mean = preds.reduce((a, b) => a + b, 0) / E;
      err += (mean - t.y[k]!) ** 2;
      spread += preds.reduce((a, p) => a + (p - mean) ** 2, 0) / E;
    }
  });
  console.log(`held-out MSE of the ensemble mean: ${(err / (2 * test.length)).toExponential(3)}; mean member variance: ${(spread / (2 * test.length)).toExponential(3)}`);
  console.log(`exported ${path} (IR ${info.irVersion}, opset ${info.opset}; inputs ${info.inputs.map((i) => i.name)}; outputs ${info.outputs.map((i) => i.name)})`);
}

