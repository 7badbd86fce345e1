// Training: the Adam step inside the ONNX graph against a plain TypeScript Adam, an ensemble
// fitting a known function, and checkpoints that resume exactly.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as nn from '../nn/index.js';

const dir = mkdtempSync(join(tmpdir(), 'nn-train-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Plain TypeScript Adam(W) with global-norm clipping, float64. */
class RefAdam {
  m: Float64Array[];
  v: Float64Array[];
  t = 0;
  constructor(sizes: number[], private c: Required<Omit<nn.AdamConfig, 'clipNorm'>> & { clipNorm?: number }) {
    this.m = sizes.map((n) => new Float64Array(n));
    this.v = sizes.map((n) => new Float64Array(n));
  }
  step(params: Float64Array[], grads: Float64Array[]): void {
    this.t++;
    const { lr, beta1, beta2, eps, weightDecay, clipNorm } = this.c;
    let norm = 0;
    for (const g of grads) for (const x of g) norm += x * x;
    norm = Math.sqrt(norm);
    const scale = clipNorm === undefined ? 1 : Math.min(1, clipNorm / (norm + 1e-6));
    params.forEach((p, k) => {
      for (let i = 0; i < p.length; i++) {
        const g = grads[k]![i]! * scale;
        this.m[k]![i] = beta1 * this.m[k]![i]! + (1 - beta1) * g;
        this.v[k]![i] = beta2 * this.v[k]![i]! + (1 - beta2) * g * g;
        const mh = this.m[k]![i]! / (1 - beta1 ** this.t);
        const vh = this.v[k]![i]! / (1 - beta2 ** this.t);
        p[i] = p[i]! - lr * weightDecay * p[i]! - (lr * mh) / (Math.sqrt(vh) + eps);
      }
    });
  }
}

describe('Adam in the graph matches a TypeScript reference Adam step for step', () => {
  const variants: Array<[string, nn.AdamConfig]> = [
    ['Adam', { lr: 0.05 }],
    ['AdamW + clipping', { lr: 0.05, weightDecay: 0.1, clipNorm: 0.5, beta1: 0.8, beta2: 0.99, eps: 1e-6 }],
  ];
  it.each(variants)('%s', async (_name, cfg) => {
    const rng = new nn.Rng(7);
    const [B, I, O] = [8, 3, 2];
    const store = new nn.ParamStore(3);
    const lin = new nn.Linear(store, 'lin', I, O);
    const g = new nn.Graph();
    const x = g.input('x', [B, I]);
    const t = g.input('t', [B, O]);
    const loss = nn.mean(nn.square(nn.sub(lin.forward(x), t)));
    const trainer = await nn.Trainer.create({ loss, store, optimizer: cfg });
    const xs = Array.from({ length: B * I }, () => rng.uniform(-1, 1));
    const ts = Array.from({ length: B * O }, () => rng.uniform(-1, 1));
    const W = Float64Array.from(store.get('lin.weight').data);
    const W0 = Float64Array.from(W);
    const b = Float64Array.from(store.get('lin.bias').data);
    const ref = new RefAdam([W.length, b.length], { beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0, ...cfg });
    for (let step = 0; step < 30; step++) {
      // Hand-derived gradient of the mean squared error of a linear layer.
      const dW = new Float64Array(W.length), db = new Float64Array(b.length);
      let refLoss = 0;
      for (let r = 0; r < B; r++) {
        for (let o = 0; o < O; o++) {
          let y = b[o]!;
          for (let i = 0; i < I; i++) y += xs[r * I + i]! * W[i * O + o]!;
          const e = y - ts[r * O + o]!;
          refLoss += (e * e) / (B * O);
          const dy = (2 * e) / (B * O);
          db[o]! += dy;
          for (let i = 0; i < I; i++) dW[i * O + o]! += xs[r * I + i]! * dy;
        }
      }
      const res = await trainer.step({ x: nn.tensor(xs, [B, I]), t: nn.tensor(ts, [B, O]) });
      ref.step([W, b], [dW, db]);
      expect(res.loss).toBeCloseTo(refLoss, 5);
      trainer.syncToStore();
      const got = [...store.get('lin.weight').data, ...store.get('lin.bias').data];
      const want = [...W, ...b];
      const worst = Math.max(...got.map((v, i) => Math.abs(v - want[i]!)));
      expect(worst, `step ${step + 1}`).toBeLessThan(2e-5);
    }
    // The reference moved the parameters: the comparison is not between two unchanged copies.
    expect(Math.max(...W.map((w, i) => Math.abs(w - W0[i]!)))).toBeGreaterThan(0.05);
  });
});

describe('ensemble MLP', () => {
  it('fits a known non-linear function to held-out MSE < 0.01 in every member, and members differ', async () => {
    const f = (x: number[]) => Math.sin(2 * x[0]!) * Math.cos(x[1]!) + 0.5 * x[2]! ** 2;
    const rng = new nn.Rng(11);
    const E = 5, B = 128, D = 3;
    const sample = (n: number) => Array.from({ length: n }, () => Array.from({ length: D }, () => rng.uniform(-1.5, 1.5)));
    const train = sample(2048);
    const test = sample(512);
    const store = new nn.ParamStore(5);
    const ens = new nn.EnsembleMLP(store, 'wm', E, { sizes: [D, 64, 64, 1], activation: 'silu' });
    const g = new nn.Graph();
    const x = g.input('x', [E, 'batch', D]);
    const y = g.input('y', [E, 'batch', 1]);
    const loss = nn.mean(nn.square(nn.sub(ens.forward(x), y)));
    const trainer = await nn.Trainer.create({ loss, store, optimizer: { lr: 3e-3 } });
    for (let step = 0; step < 1500; step++) {
      // Each member draws its own minibatch (bootstrap), so members see different data.
      const xb = new Float32Array(E * B * D), yb = new Float32Array(E * B);
      for (let e = 0; e < E; e++) {
        for (let r = 0; r < B; r++) {
          const p = train[rng.int(train.length)]!;
          xb.set(p, (e * B + r) * D);
          yb[e * B + r] = f(p);
        }
      }
      await trainer.step({ x: nn.tensor(xb, [E, B, D]), y: nn.tensor(yb, [E, B, 1]) });
    }
    trainer.syncToStore();
    const gi = new nn.Graph();
    const xi = gi.input('x', ['batch', D]);
    const prog = await nn.Program.inference([{ name: 'x', tensor: xi }], [{ name: 'y', tensor: ens.forward(xi) }], store);
    const out = nn.f32((await prog.run({ x: nn.tensor(test.flat(), [test.length, D]) })).y);
    const truth = test.map(f);
    const mse = Array.from({ length: E }, (_, e) => truth.reduce((s, t, i) => s + (out[e * test.length + i]! - t) ** 2, 0) / test.length);
    const variance = truth.reduce((s, t) => s + (t - truth.reduce((a, b) => a + b, 0) / truth.length) ** 2, 0) / truth.length;
    for (const m of mse) expect(m).toBeLessThan(0.01);
    expect(variance).toBeGreaterThan(0.1); // the target is far from trivial
    const spread = truth.reduce((s, _, i) => s + Math.abs(out[i]! - out[test.length + i]!), 0) / truth.length;
    expect(spread).toBeGreaterThan(1e-4);
  });
});

describe('checkpoints', () => {
  it('restore-then-continue equals never-stopped, and a mismatched checkpoint is refused', async () => {
    const build = async () => {
      const store = new nn.ParamStore(21);
      const mlp = new nn.MLP(store, 'mlp', { sizes: [4, 16, 2] });
      const g = new nn.Graph();
      const x = g.input('x', [8, 4]);
      const t = g.input('t', [8, 2]);
      return nn.Trainer.create({ loss: nn.mean(nn.square(nn.sub(mlp.forward(x), t))), store, optimizer: { lr: 0.01, weightDecay: 0.01 } });
    };
    const rng = new nn.Rng(3);
    const batches = Array.from({ length: 20 }, () => ({
      x: nn.tensor(Array.from({ length: 32 }, () => rng.normal()), [8, 4]),
      t: nn.tensor(Array.from({ length: 16 }, () => rng.normal()), [8, 2]),
    }));
    const a = await build();
    for (const b of batches) await a.step(b);
    a.syncToStore();

    const b1 = await build();
    for (const b of batches.slice(0, 10)) await b1.step(b);
    const ckpt = join(dir, 'ckpt.safetensors');
    b1.saveCheckpoint(ckpt);
    const b2 = await build();
    b2.loadCheckpoint(ckpt);
    expect(b2.steps).toBe(10);
    for (const b of batches.slice(10)) await b2.step(b);
    b2.syncToStore();
    for (const n of a.store.names()) expect(Array.from(b2.store.get(n).data)).toEqual(Array.from(a.store.get(n).data));

    const other = new nn.ParamStore(1);
    const mlp2 = new nn.MLP(other, 'mlp', { sizes: [4, 8, 2] });
    const g2 = new nn.Graph();
    const x2 = g2.input('x', [8, 4]);
    const c = await nn.Trainer.create({ loss: nn.mean(mlp2.forward(x2)), store: other, optimizer: { lr: 0.01 } });
    expect(() => c.loadCheckpoint(ckpt)).toThrow(/mlp\.l0\.weight' has shape \[4,16\], expected \[4,8\]/);
  });

  it('a frozen parameter is read from the store at every step: a value set there later is used and never overwritten; checkpoints carry it', async () => {
    // y = w·x + s with w trained and s frozen; loss (y − 0)²: the gradient on w is 2·y·x, so it depends on s.
    const build = async () => {
      const store = new nn.ParamStore(5);
      store.create('w', [1], 'zeros');
      store.set('w', [1]);
      store.create('s', [1], 'zeros');
      const g = new nn.Graph();
      const x = g.input('x', [1]);
      const y = nn.add(nn.mul(g.param('w', [1]), x), g.param('s', [1]));
      return { store, trainer: await nn.Trainer.create({ loss: nn.sum(nn.square(y)), store, trainable: ['w'], optimizer: { lr: 0.1 }, metrics: { y: nn.add(y, 0) } }) };
    };
    const { store, trainer } = await build();
    const yOf = async () => ((await trainer.step({ x: nn.tensor([1], [1]) })).metrics.y!.data as Float32Array)[0]!;
    expect(await yOf()).toBeCloseTo(1, 6); // w 1, s 0
    store.set('s', [5]);
    const w = (trainer.syncToStore(), store.get('w').data[0]!);
    expect(await yOf()).toBeCloseTo(w + 5, 5); // the step saw the new s
    trainer.syncToStore();
    expect(store.get('s').data[0]).toBe(5); // not overwritten by a copy taken at creation
    const ckpt = join(dir, 'frozen.safetensors');
    trainer.saveCheckpoint(ckpt);
    const fresh = await build();
    expect(fresh.store.get('s').data[0]).toBe(0);
    fresh.trainer.loadCheckpoint(ckpt);
    expect(fresh.store.get('s').data[0]).toBe(5); // the checkpoint's frozen value restored into the store
    expect(fresh.trainer.steps).toBe(2);
    await trainer.release();
    await fresh.trainer.release();
  });

  it('a non-finite loss stops with a clear error and leaves the parameters as they were', async () => {
    const store = new nn.ParamStore(2);
    const lin = new nn.Linear(store, 'lin', 2, 1);
    const g = new nn.Graph();
    const x = g.input('x', [1, 2]);
    const trainer = await nn.Trainer.create({ loss: nn.sum(nn.log(lin.forward(x))), store, optimizer: { lr: 0.1 } });
    const before = Array.from(store.get('lin.weight').data);
    await expect(trainer.step({ x: nn.tensor([-1e6, -1e6], [1, 2]) })).rejects.toThrow(/loss became NaN at step 1/);
    trainer.syncToStore();
    expect(Array.from(store.get('lin.weight').data)).toEqual(before);
  });
});
