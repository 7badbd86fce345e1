// Task (1): architecture and hyperparameter search for a classifier trained with nn/ on the
// Seattle weather data shipped inside the `vega-datasets` npm package (1461 days: precipitation,
// max/min temperature, wind and the season → drizzle, fog, rain, snow or sun). One execution
// trains the proposed MLP on a fixed 60% train split and scores its balanced accuracy (mean per-class
// recall: the rare fog, drizzle and snow days count as much as sun and rain) on a held-out 20%
// validation split (the score the agent sees); the last 20% is a test split reported beside it.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Graph, MLP, ParamStore, Program, Rng, Trainer, f32, logSumExp, mean, mul, sub, sum, tensor, type Activation } from '../../nn/index.js';
import type { ExecutionInput, ExecutionOutput, ResearchTask } from '../task.js';

const HERE = fileURLToPath(import.meta.url);

export const CLASSES = ['drizzle', 'fog', 'rain', 'snow', 'sun'] as const;

export const classifierTask: ResearchTask = {
  name: 'weather-classifier',
  fields: [
    { name: 'hidden', choices: [2, 4, 8, 16, 32] },
    { name: 'layers', choices: [1, 2, 3] },
    { name: 'activation', choices: ['relu', 'tanh'] },
    { name: 'lr', choices: [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1] },
    { name: 'epochs', choices: [1, 3, 10] },
    { name: 'batch', choices: [32, 128, 512] },
  ],
  program: { kind: 'module', path: HERE, export: 'trainClassifier', bundle: true },
  metric: 'balanced accuracy (mean per-class recall) of the weather classifier on the held-out validation split',
  limits: { timeoutMs: 30_000, memoryMb: 1024, maxProcs: 4 },
  seeds: 3,
};

export interface WeatherData {
  /** N x D standardized features (train statistics). */
  x: Float32Array;
  /** N class indices into CLASSES. */
  y: Int32Array;
  d: number;
  split: { train: number[]; val: number[]; test: number[] };
}

// The package exports only its build/ entry; its data/ folder sits beside build/.
const csvPath = (): string => join(dirname(createRequire(import.meta.url).resolve('vega-datasets')), '..', 'data', 'seattle-weather.csv');

/** The dataset, featurized and split (the split is fixed: seed 12345). */
export function loadWeather(): WeatherData {
  const lines = readFileSync(csvPath(), 'utf8').trim().split('\n');
  const header = lines[0]!.split(',');
  const col = (name: string) => {
    const i = header.indexOf(name);
    if (i < 0) throw new Error(`seattle-weather.csv has no column '${name}'`);
    return i;
  };
  const [iDate, iP, iMax, iMin, iWind, iW] = ['date', 'precipitation', 'temp_max', 'temp_min', 'wind', 'weather'].map(col) as [number, number, number, number, number, number];
  const rows = lines.slice(1).map((l) => l.split(','));
  const d = 7;
  const n = rows.length;
  const raw = new Float64Array(n * d);
  const y = new Int32Array(n);
  rows.forEach((r, i) => {
    const month = Number(r[iDate]!.slice(5, 7));
    const p = Number(r[iP]);
    raw.set([Math.log1p(p), p > 0 ? 1 : 0, Number(r[iMax]), Number(r[iMin]), Number(r[iWind]), Math.sin((2 * Math.PI * month) / 12), Math.cos((2 * Math.PI * month) / 12)], i * d);
    const c = CLASSES.indexOf(r[iW] as (typeof CLASSES)[number]);
    if (c < 0) throw new Error(`seattle-weather.csv row ${i + 2}: unknown weather '${r[iW]}'`);
    y[i] = c;
  });
  const order = new Rng(12345).shuffle(Array.from({ length: n }, (_, i) => i));
  const a = Math.floor(0.6 * n), b = Math.floor(0.8 * n);
  const split = { train: order.slice(0, a), val: order.slice(a, b), test: order.slice(b) };
  const x = new Float32Array(n * d);
  for (let j = 0; j < d; j++) {
    let m = 0, s = 0;
    for (const i of split.train) m += raw[i * d + j]! / split.train.length;
    for (const i of split.train) s += (raw[i * d + j]! - m) ** 2 / split.train.length;
    const sd = Math.sqrt(s) || 1;
    for (let i = 0; i < n; i++) x[i * d + j] = (raw[i * d + j]! - m) / sd;
  }
  return { x, y, d, split };
}

/** The executor: trains the proposed MLP (cross-entropy, Adam) and scores it on the held-out splits. */
export async function trainClassifier(input: ExecutionInput): Promise<ExecutionOutput> {
  const p = input.proposal;
  const hidden = Number(p.hidden), layers = Number(p.layers), lr = Number(p.lr), epochs = Number(p.epochs), batch = Number(p.batch);
  const act = String(p.activation) as Activation;
  const data = loadWeather();
  const K = CLASSES.length, D = data.d;
  const store = new ParamStore(1000 + input.seed);
  const net = new MLP(store, 'clf', { sizes: [D, ...Array<number>(layers).fill(hidden), K], activation: act });
  const g = new Graph();
  const x = g.input('x', ['B', D]);
  const onehot = g.input('onehot', ['B', K]);
  const logits = net.forward(x);
  const loss = mean(sub(logSumExp(logits, -1), sum(mul(logits, onehot), -1)));
  const trainer = await Trainer.create({ loss, store, optimizer: { lr, clipNorm: 5 } }, { threads: 1 });
  const rng = new Rng(7 + input.seed);
  const train = [...data.split.train];
  const bs = Math.min(batch, train.length);
  let steps = 0;
  try {
    for (let e = 0; e < epochs; e++) {
      rng.shuffle(train);
      for (let s = 0; s + bs <= train.length; s += bs) {
        const xb = new Float32Array(bs * D), yb = new Float32Array(bs * K);
        for (let r = 0; r < bs; r++) {
          const i = train[s + r]!;
          xb.set(data.x.subarray(i * D, (i + 1) * D), r * D);
          yb[r * K + data.y[i]!] = 1;
        }
        await trainer.step({ x: tensor(xb, [bs, D]), onehot: tensor(yb, [bs, K]) });
        steps++;
      }
    }
    trainer.syncToStore();
  } finally {
    await trainer.release();
  }
  const gi = new Graph();
  const xi = gi.input('x', ['B', D]);
  const prog = await Program.inference([{ name: 'x', tensor: xi }], [{ name: 'logits', tensor: net.forward(xi) }], store, { threads: 1 });
  /** Plain accuracy and balanced accuracy (the mean of the per-class recalls) on `idx`. */
  const evaluate = async (idx: number[]) => {
    const xb = new Float32Array(idx.length * D);
    idx.forEach((i, r) => xb.set(data.x.subarray(i * D, (i + 1) * D), r * D));
    const out = f32((await prog.run({ x: tensor(xb, [idx.length, D]) })).logits);
    const hit = new Array<number>(K).fill(0), seen = new Array<number>(K).fill(0);
    idx.forEach((i, r) => {
      let best = 0;
      for (let k = 1; k < K; k++) if (out[r * K + k]! > out[r * K + best]!) best = k;
      seen[data.y[i]!]!++;
      if (best === data.y[i]) hit[data.y[i]!]!++;
    });
    const present = seen.map((n, k) => [n, k] as const).filter(([n]) => n > 0);
    return {
      accuracy: hit.reduce((a, b) => a + b, 0) / idx.length,
      balanced: present.reduce((a, [n, k]) => a + hit[k]! / n, 0) / present.length,
    };
  };
  try {
    const val = await evaluate(data.split.val);
    const test = await evaluate(data.split.test);
    return { score: val.balanced, valAccuracy: val.accuracy, test: test.balanced, testAccuracy: test.accuracy, steps };
  } finally {
    await prog.release();
  }
}
