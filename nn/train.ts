// One training step — forward, loss, backward, optimizer update — as one ONNX graph, run by one
// `session.run`. Parameters and optimizer state stay ORT tensors between steps.
import { grad } from './autodiff.js';
import { topoSort, type Tensor } from './graph.js';
import { toOnnx } from './onnx.js';
import { add, div, minimum, mul, pow, sqrt, sub, sum } from './ops.js';
import { writeTensorFile, readTensorFile, type ParamStore, type ParamValue } from './params.js';
import { ort, sessionOptions, type SessionOptions } from './runtime.js';

export interface AdamConfig {
  lr: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  /** Decoupled weight decay (AdamW); 0 is plain Adam. */
  weightDecay?: number;
  /** Global-norm gradient clipping threshold; off when undefined. */
  clipNorm?: number;
}

export interface TrainerConfig {
  loss: Tensor;
  store: ParamStore;
  optimizer: AdamConfig;
  /** Parameters to train (default: every param the loss depends on). Others are fed as constants. */
  trainable?: readonly string[];
  /** Extra scalar or tensor outputs to report each step (e.g. metrics). */
  metrics?: Readonly<Record<string, Tensor>>;
}

export interface StepResult {
  loss: number;
  gradNorm: number;
  metrics: Record<string, ort.Tensor>;
}

const M = (n: string) => `adam.m.${n}`;
const V = (n: string) => `adam.v.${n}`;
const NEW = (n: string) => `new.${n}`;

/** Emits Adam(W) with optional global-norm clipping into the loss's graph. */
function emitAdam(
  g: Tensor['graph'],
  params: Array<[string, Tensor]>,
  grads: Tensor[],
  cfg: AdamConfig,
): { updates: Array<{ name: string; tensor: Tensor }>; stateInputs: Array<{ name: string; tensor: Tensor }>; gradNorm: Tensor } {
  const b1 = cfg.beta1 ?? 0.9, b2 = cfg.beta2 ?? 0.999, eps = cfg.eps ?? 1e-8, wd = cfg.weightDecay ?? 0;
  const t = g.input('adam.t', []);
  const lr = g.input('adam.lr', []);
  const gradNorm = sqrt(grads.map((d) => sum(mul(d, d))).reduce((a, b) => add(a, b)));
  let gs = grads;
  if (cfg.clipNorm !== undefined) {
    const scale = minimum(div(cfg.clipNorm, add(gradNorm, 1e-6)), 1);
    gs = grads.map((d) => mul(d, scale));
  }
  // Bias corrections folded into two scalars so each parameter costs few elementwise ops.
  const stepSize = div(lr, sub(1, pow(b1, t)));
  const invSqrtBc2 = div(1, sqrt(sub(1, pow(b2, t))));
  const decay = wd ? sub(1, mul(lr, wd)) : null;
  const updates: Array<{ name: string; tensor: Tensor }> = [];
  const stateInputs: Array<{ name: string; tensor: Tensor }> = [{ name: 'adam.t', tensor: t }, { name: 'adam.lr', tensor: lr }];
  params.forEach(([name, p], i) => {
    const d = gs[i]!;
    const m = g.input(M(name), p.shape);
    const v = g.input(V(name), p.shape);
    stateInputs.push({ name: M(name), tensor: m }, { name: V(name), tensor: v });
    const m2 = add(mul(m, b1), mul(d, 1 - b1));
    const v2 = add(mul(v, b2), mul(mul(d, d), 1 - b2));
    const upd = div(mul(m2, stepSize), add(mul(sqrt(v2), invSqrtBc2), eps));
    const kept = decay ? mul(p, decay) : p;
    updates.push({ name: NEW(name), tensor: sub(kept, upd) }, { name: NEW(M(name)), tensor: m2 }, { name: NEW(V(name)), tensor: v2 });
  });
  return { updates, stateInputs, gradNorm };
}

export class Trainer {
  /**
   * Current values by graph-input name: trainable params and their Adam moments. Frozen params are not copied: each
   * step reads them from the store, so a value set there later (a log-std schedule, a swapped encoder) is what the
   * step uses, and syncToStore never writes a stale copy back over it.
   */
  private state: Record<string, ort.Tensor> = {};
  private stepCount = 0;
  private lr: number;

  private constructor(
    readonly session: ort.InferenceSession,
    readonly model: Uint8Array,
    readonly store: ParamStore,
    readonly trainable: string[],
    readonly frozen: string[],
    readonly dataInputs: string[],
    private readonly metricNames: string[],
    /** Multiply-add FLOPs of the matmuls and convolutions in one step (for efficiency figures). */
    readonly matmulFlopsPerRow: number,
    cfg: AdamConfig,
  ) {
    this.lr = cfg.lr;
    for (const n of trainable) {
      const v = store.get(n);
      this.state[n] = new ort.Tensor('float32', Float32Array.from(v.data), v.shape);
    }
    for (const n of trainable) {
      const v = store.get(n);
      this.state[M(n)] = new ort.Tensor('float32', new Float32Array(v.data.length), v.shape);
      this.state[V(n)] = new ort.Tensor('float32', new Float32Array(v.data.length), v.shape);
    }
  }

  static async create(cfg: TrainerConfig, opts: SessionOptions = {}): Promise<Trainer> {
    const g = cfg.loss.graph;
    const all = [...g.params.entries()].filter(([, t]) => topoSort([cfg.loss]).includes(t));
    const wanted = cfg.trainable ? new Set(cfg.trainable) : null;
    if (wanted) for (const n of wanted) if (!g.params.has(n)) throw new Error(`trainer: no parameter '${n}' in the loss graph`);
    const params = all.filter(([n]) => !wanted || wanted.has(n));
    const frozen = all.filter(([n]) => wanted && !wanted.has(n));
    if (!params.length) throw new Error('trainer: the loss depends on no trainable parameter');
    const grads = grad(cfg.loss, params.map(([, t]) => t)).map((d, i) => {
      if (!d) throw new Error(`trainer: parameter '${params[i]![0]}' does not affect the loss`);
      return d;
    });
    const { updates, stateInputs, gradNorm } = emitAdam(g, params, grads, cfg.optimizer);
    const dataInputs = [...g.inputs.entries()].filter(([n]) => !n.startsWith('adam.'));
    const metrics = Object.entries(cfg.metrics ?? {});
    const outputs = [{ name: 'loss', tensor: cfg.loss }, { name: 'grad_norm', tensor: gradNorm }, ...updates, ...metrics.map(([n, t]) => ({ name: `metric.${n}`, tensor: t }))];
    const model = toOnnx({
      inputs: [
        ...dataInputs.map(([name, tensor]) => ({ name, tensor })),
        ...params.map(([name, tensor]) => ({ name, tensor })),
        ...frozen.map(([name, tensor]) => ({ name, tensor })),
        ...stateInputs,
      ],
      outputs,
      graphName: 'train_step',
    });
    const session = await ort.InferenceSession.create(model, sessionOptions(opts));
    const flops = topoSort(outputs.map((o) => o.tensor)).reduce((acc, t) => acc + opFlopsPerRow(t), 0);
    return new Trainer(session, model, cfg.store, params.map(([n]) => n), frozen.map(([n]) => n), dataInputs.map(([n]) => n), metrics.map(([n]) => n), flops, cfg.optimizer);
  }

  get steps(): number {
    return this.stepCount;
  }

  setLearningRate(lr: number): void {
    if (!(lr >= 0)) throw new Error(`trainer: invalid learning rate ${lr}`);
    this.lr = lr;
  }

  /** One optimizer step on a batch. */
  async step(feeds: Record<string, ort.Tensor>): Promise<StepResult> {
    for (const n of this.dataInputs) if (!(n in feeds)) throw new Error(`trainer: missing input '${n}'`);
    const t = this.stepCount + 1;
    const out = await this.session.run({
      ...feeds,
      ...this.state,
      ...this.frozenFeeds(),
      'adam.t': new ort.Tensor('float32', Float32Array.of(t), []),
      'adam.lr': new ort.Tensor('float32', Float32Array.of(this.lr), []),
    });
    const loss = (out.loss!.data as Float32Array)[0]!;
    if (!Number.isFinite(loss)) throw new Error(`trainer: loss became ${loss} at step ${t}; parameters were not updated`);
    for (const n of this.trainable) {
      this.state[n] = out[NEW(n)]!;
      this.state[M(n)] = out[NEW(M(n))]!;
      this.state[V(n)] = out[NEW(V(n))]!;
    }
    this.stepCount = t;
    const metrics: Record<string, ort.Tensor> = {};
    for (const m of this.metricNames) metrics[m] = out[`metric.${m}`]!;
    return { loss, gradNorm: (out.grad_norm!.data as Float32Array)[0]!, metrics };
  }

  /** The frozen parameters as the store holds them now. */
  private frozenFeeds(): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = {};
    for (const n of this.frozen) {
      const v = this.store.get(n);
      feeds[n] = new ort.Tensor('float32', v.data, v.shape);
    }
    return feeds;
  }

  /** Copies the trained parameters' current values into the store (for export or another graph); frozen ones live there already. */
  syncToStore(): void {
    for (const n of this.trainable) this.store.set(n, this.state[n]!.data as Float32Array);
  }

  /** Saves parameters (trained and frozen, as the store holds the frozen) and optimizer state in one file, atomically. */
  saveCheckpoint(path: string): void {
    const entries: Array<[string, ParamValue]> = Object.entries({ ...this.state, ...this.frozenFeeds() }).map(([n, t]) => [n, { shape: [...t.dims], data: t.data as Float32Array }]);
    writeTensorFile(path, entries, { step: String(this.stepCount), lr: String(this.lr) });
  }

  /** Restores a checkpoint written by `saveCheckpoint` of a trainer of the same model; its frozen parameters go back into the store. */
  loadCheckpoint(path: string): void {
    const { tensors, metadata } = readTensorFile(path);
    const current = { ...this.state, ...this.frozenFeeds() };
    const missing = Object.keys(current).filter((n) => !tensors.has(n));
    if (missing.length) throw new Error(`trainer: checkpoint ${path} lacks ${missing.join(', ')}`);
    const next: Record<string, ort.Tensor> = {};
    for (const [n, cur] of Object.entries(current)) {
      const v = tensors.get(n)!;
      if (v.shape.join() !== cur.dims.join()) throw new Error(`trainer: checkpoint ${path}: '${n}' has shape [${v.shape}], expected [${cur.dims}]`);
      if (!this.frozen.includes(n)) next[n] = new ort.Tensor('float32', v.data, v.shape);
    }
    for (const n of this.frozen) this.store.set(n, tensors.get(n)!.data);
    this.state = next;
    this.stepCount = Number(metadata.step ?? 0);
    if (metadata.lr) this.lr = Number(metadata.lr);
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/**
 * Multiply-add FLOPs (×2) of one node, per unit of the symbolic batch (symbolic dims count as 1).
 */
export function opFlopsPerRow(t: Tensor): number {
  const dim = (d: number | string) => (typeof d === 'number' ? d : 1);
  const prod = (s: ReadonlyArray<number | string>) => s.reduce<number>((a, d) => a * dim(d), 1);
  if (t.op === 'matmul') {
    const a = t.inputs[0]!;
    return 2 * prod(t.shape) * dim(a.shape[a.rank - 1]!);
  }
  if (t.op === 'conv2d' || t.op === 'convTranspose') {
    const w = t.inputs[1]!;
    const perOut = t.op === 'conv2d' ? prod(w.shape.slice(1)) : dim(w.shape[0]!) * prod(w.shape.slice(2));
    return 2 * prod(t.shape) * perOut;
  }
  return 0;
}
