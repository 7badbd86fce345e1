// nn/ training step vs the same step in TensorFlow.js (wasm backend), and the step's effective
// GFLOP/s against ONNX Runtime's own forward-pass GFLOP/s on the same network, in one run.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';
import * as nn from '../nn/index.js';
import { median, type BenchOptions, type BenchReport } from './lib/report.js';

const E = 5, B = 256, SIZES = [20, 256, 256, 256, 15];
const fwdFlops = 2 * B * E * SIZES.slice(1).reduce((s, o, i) => s + SIZES[i]! * o, 0);

async function timeIt(n: number, f: () => Promise<unknown> | unknown): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await f();
  return (performance.now() - t0) / n;
}

async function nnSetup(threads?: number) {
  const store = new nn.ParamStore(1);
  const ens = new nn.EnsembleMLP(store, 'wm', E, { sizes: SIZES, activation: 'relu' });
  const g = new nn.Graph();
  const x = g.input('x', ['batch', SIZES[0]!]);
  const y = g.input('y', [E, 'batch', SIZES.at(-1)!]);
  const out = ens.forward(x);
  const trainer = await nn.Trainer.create({ loss: nn.mean(nn.square(nn.sub(out, y))), store, optimizer: { lr: 1e-3 } }, { threads });
  const fwd = await nn.Program.inference([{ name: 'x', tensor: x }], [{ name: 'out', tensor: out }], store, { threads });
  const rng = new nn.Rng(2);
  const xs = nn.tensor(Float32Array.from({ length: B * SIZES[0]! }, () => rng.uniform(-1, 1)), [B, SIZES[0]!]);
  const ys = nn.tensor(Float32Array.from({ length: E * B * SIZES.at(-1)! }, () => rng.uniform(-1, 1)), [E, B, SIZES.at(-1)!]);
  return { trainer, train: () => trainer.step({ x: xs, y: ys }), forward: () => fwd.run({ x: xs }) };
}

/** The same ensemble step in TF.js: members batched in rank-3 matmuls, or one 2-D model per member. */
function tfSetup(batched: boolean) {
  const init = (shape: number[], fanIn: number) => tf.variable(tf.randomUniform(shape, -1 / Math.sqrt(fanIn), 1 / Math.sqrt(fanIn), 'float32', 1));
  const layers = SIZES.slice(1).map((o, i) => (batched ? [init([E, SIZES[i]!, o], SIZES[i]!), init([E, 1, o], SIZES[i]!)] : [init([SIZES[i]!, o], SIZES[i]!), init([o], SIZES[i]!)]));
  const members = batched ? [layers] : Array.from({ length: E }, (_, e) => (e === 0 ? layers : SIZES.slice(1).map((o, i) => [init([SIZES[i]!, o], SIZES[i]!), init([o], SIZES[i]!)])));
  const x = tf.randomUniform([B, SIZES[0]!], -1, 1, 'float32', 2);
  const y = tf.randomUniform([E, B, SIZES.at(-1)!], -1, 1, 'float32', 3);
  const xIn = batched ? tf.tile(tf.expandDims(x, 0), [E, 1, 1]) : x;
  const ys = batched ? [y] : tf.unstack(y);
  const opt = tf.train.adam(1e-3);
  return () =>
    opt.minimize(() => {
      let total: tf.Tensor = tf.scalar(0);
      members.forEach((ls, e) => {
        let h: tf.Tensor = xIn;
        ls.forEach(([W, b], i) => {
          h = tf.add(tf.matMul(h, W!), b!);
          if (i < ls.length - 1) h = tf.relu(h);
        });
        total = tf.add(total, tf.mean(tf.square(tf.sub(h, ys[e]!))));
      });
      return tf.div(total, members.length) as tf.Scalar;
    }, true)!.dataSync();
}

export async function run(opts: BenchOptions): Promise<BenchReport> {
  await tf.setBackend('wasm');
  await tf.ready();
  const rounds = opts.quick ? 3 : 7;
  const [nTrain, nFwd, nTf] = opts.quick ? [20, 50, 2] : [50, 200, 5];
  const nnDefault = await nnSetup();
  const nnOne = await nnSetup(1);
  const tfBatched = tfSetup(true);
  const tfPerMember = tfSetup(false);
  // Warm up every path once (session init, wasm compile, allocator).
  for (let i = 0; i < 3; i++) {
    await nnDefault.train();
    await nnDefault.forward();
    await nnOne.train();
    await nnOne.forward();
  }
  tfBatched();
  tfPerMember();
  const t = { train: [] as number[], fwd: [] as number[], train1: [] as number[], fwd1: [] as number[], tfB: [] as number[], tfM: [] as number[] };
  // Interleaved rounds, so background load hits every contender alike; medians over rounds.
  for (let r = 0; r < rounds; r++) {
    t.train.push(await timeIt(nTrain, nnDefault.train));
    t.fwd.push(await timeIt(nFwd, nnDefault.forward));
    t.train1.push(await timeIt(nTrain, nnOne.train));
    t.fwd1.push(await timeIt(nFwd, nnOne.forward));
    t.tfB.push(await timeIt(nTf, tfBatched));
    t.tfM.push(await timeIt(nTf, tfPerMember));
    opts.progress(r + 1, rounds, 'rounds');
  }
  const m = Object.fromEntries(Object.entries(t).map(([k, v]) => [k, median(v)])) as Record<keyof typeof t, number>;
  const trainFlops = nnDefault.trainer.matmulFlopsPerRow * B;
  const gf = (flops: number, ms: number) => flops / ms / 1e6;
  const tfBest = Math.min(m.tfB, m.tfM);
  const result = {
    speedup_vs_tfjs: tfBest / m.train,
    train_gflops: gf(trainFlops, m.train),
    fwd_gflops: gf(fwdFlops, m.fwd),
    efficiency: gf(trainFlops, m.train) / gf(fwdFlops, m.fwd),
  };
  const tfThreads = (tf.backend() as unknown as { wasm?: { _get_threads_count?: () => number } }).wasm?._get_threads_count?.() ?? 1;
  return {
    title: 'nn/ training step vs TensorFlow.js (wasm), and training vs forward GFLOP/s',
    summary: [
      `One training step (forward, MSE loss, backward, Adam) of a ${E}-member ensemble MLP ${SIZES.join('→')} (ReLU), batch ${B}.`,
      `nn/ runs the whole step as one ONNX graph in onnxruntime-node; TF.js ${tf.version.tfjs} runs it on its wasm backend (${tfThreads} thread(s) under Node), both as one batched model and as ${E} separate models (the faster counts).`,
      `Training FLOPs are the multiply-adds of every matmul in the emitted training graph (${(trainFlops / 1e9).toFixed(3)} GFLOP/step; forward ${(fwdFlops / 1e9).toFixed(3)} GFLOP).`,
      `Median of ${rounds} interleaved rounds (${nTrain} nn steps, ${nFwd} forward passes, ${nTf} TF.js steps each); seeds fixed.`,
    ].join(' '),
    header: ['what', 'ms', 'GFLOP/s', '× slower than nn/ train step'],
    rows: [
      ['nn/ train step (ORT, default threads)', m.train, gf(trainFlops, m.train), 1],
      ['nn/ train step (ORT, 1 thread)', m.train1, gf(trainFlops, m.train1), m.train1 / m.train],
      ['ORT forward only (default threads)', m.fwd, gf(fwdFlops, m.fwd), m.fwd / m.train],
      ['ORT forward only (1 thread)', m.fwd1, gf(fwdFlops, m.fwd1), m.fwd1 / m.train],
      ['TF.js wasm train step (batched members)', m.tfB, gf(trainFlops, m.tfB), m.tfB / m.train],
      ['TF.js wasm train step (one model per member)', m.tfM, gf(trainFlops, m.tfM), m.tfM / m.train],
    ],
    notes: `Targets: speedup ≥ 10× over TF.js; training-step GFLOP/s ≥ 40% of forward GFLOP/s. Measured: ${result.speedup_vs_tfjs.toFixed(1)}× and ${(100 * result.efficiency).toFixed(0)}% (1 thread: ${(100 * gf(trainFlops, m.train1) / gf(fwdFlops, m.fwd1)).toFixed(0)}%).`,
    plot: {
      title: 'Training step time (log scale)',
      xLabel: 'implementation',
      yLabel: 'ms per step',
      logY: true,
      bars: [
        { label: 'nn/ ORT', value: m.train },
        { label: 'nn/ ORT 1t', value: m.train1 },
        { label: 'ORT fwd', value: m.fwd },
        { label: 'tfjs batched', value: m.tfB },
        { label: 'tfjs per-member', value: m.tfM },
      ],
    },
    result,
  };
}
