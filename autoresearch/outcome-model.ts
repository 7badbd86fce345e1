// Outcome world models: predict an experiment's score without running it.
//
// `EnsembleOutcomeModel`: E MLPs batched in one weight tensor (nn/ EnsembleMLP), each trained on
// its own bootstrap resample (Poisson(1) weights per sample and member) of the executed results,
// online: `observe` adds results, `fit` takes a few Adam steps. Its prediction is the members'
// mean, and their variance (the epistemic uncertainty active anchor selection reads).
// Features: one-hot per field plus the choice's ordinal position for numeric fields (structured
// proposals); hashed character n-grams for text or code.
import { EnsembleMLP, Graph, ParamStore, Program, Rng, Trainer, f32, mean, mul, square, sub, sum, tensor } from '../nn/index.js';
import type { Field, Proposal } from './task.js';

// ---------------------------------------------------------------- features

/** Width of `structuredFeatures` for these fields. */
export const structuredDim = (fields: readonly Field[]): number =>
  fields.reduce((n, f) => n + f.choices.length + (f.choices.every((c) => typeof c === 'number') ? 1 : 0), 0);

/** One-hot per field, plus its position in [0, 1] for numeric (ordered) fields. Throws on a choice not in the field. */
export function structuredFeatures(fields: readonly Field[], p: Proposal, out = new Float32Array(structuredDim(fields)), at = 0): Float32Array {
  let o = at;
  for (const f of fields) {
    const i = f.choices.indexOf(p[f.name]!);
    if (i < 0) throw new Error(`proposal.${f.name}: ${JSON.stringify(p[f.name])} is not one of ${JSON.stringify(f.choices)}`);
    out[o + i] = 1;
    o += f.choices.length;
    if (f.choices.every((c) => typeof c === 'number')) out[o++] = f.choices.length > 1 ? i / (f.choices.length - 1) : 0;
  }
  return out;
}

/** FNV-1a, 32 bit. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * Hashed character n-grams of `text` (n in `ns`) into `dim` buckets with a sign hash, L2-normalized:
 * code or prose that shares fragments lands near each other. Whitespace runs count as one space.
 */
export function hashedNgrams(text: string, dim = 256, ns: readonly number[] = [1, 2, 3], out = new Float32Array(dim), at = 0): Float32Array {
  const t = text.replace(/\s+/g, ' ');
  const v = new Float32Array(dim);
  for (const n of ns) {
    for (let i = 0; i + n <= t.length; i++) {
      const h = fnv1a(`${n}:${t.slice(i, i + n)}`);
      v[h % dim]! += h & 0x80000000 ? -1 : 1;
    }
  }
  const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0)) || 1;
  for (let i = 0; i < dim; i++) out[at + i] = v[i]! / norm;
  return out;
}

// ---------------------------------------------------------------- the ensemble

export interface OutcomeModelConfig {
  members: number;
  hidden: number[];
  lr: number;
  batch: number;
  /** Adam steps per `fit`. */
  stepsPerFit: number;
  /** Results kept (FIFO): the policy moves, old results describe where it was. */
  bufferCap: number;
  seed: number;
}

export const DEFAULT_OUTCOME_CONFIG: OutcomeModelConfig = { members: 5, hidden: [64, 64], lr: 3e-3, batch: 64, stepsPerFit: 100, bufferCap: 4096, seed: 0 };

export interface OutcomePrediction {
  mean: number;
  /** Variance of the members' predictions (epistemic). */
  variance: number;
}

export class EnsembleOutcomeModel {
  private readonly store: ParamStore;
  private readonly net: EnsembleMLP;
  private readonly rng: Rng;
  private xs: Float32Array[] = [];
  private ys: number[] = [];
  /** [sample][member] bootstrap weights, drawn once per sample. */
  private ws: Float32Array[] = [];
  private trainer: Promise<Trainer> | null = null;
  private forward: Promise<{ prog: Program; params: string[] }> | null = null;
  private yMean = 0;
  private yStd = 1;
  private fits = 0;

  constructor(readonly dim: number, readonly cfg: OutcomeModelConfig = DEFAULT_OUTCOME_CONFIG) {
    if (!(Number.isInteger(dim) && dim >= 1)) throw new Error(`outcome model: feature dim ${dim} must be a positive integer`);
    this.store = new ParamStore(cfg.seed);
    this.net = new EnsembleMLP(this.store, 'outcome', cfg.members, { sizes: [dim, ...cfg.hidden, 1], activation: 'silu' });
    this.rng = new Rng(cfg.seed + 1);
  }

  get size(): number {
    return this.ys.length;
  }

  get fitted(): boolean {
    return this.fits > 0;
  }

  /** Adds executed results: features (length dim each) and their real scores. */
  observe(features: readonly Float32Array[], scores: readonly number[]): void {
    if (features.length !== scores.length) throw new Error(`outcome model: ${features.length} feature rows for ${scores.length} scores`);
    features.forEach((x, i) => {
      if (x.length !== this.dim) throw new Error(`outcome model: feature row has ${x.length} values, expected ${this.dim}`);
      const y = scores[i]!;
      if (!Number.isFinite(y)) throw new Error(`outcome model: score ${y} is not finite`);
      this.xs.push(x);
      this.ys.push(y);
      this.ws.push(Float32Array.from({ length: this.cfg.members }, () => this.poisson1()));
    });
    const over = this.ys.length - this.cfg.bufferCap;
    if (over > 0) {
      this.xs.splice(0, over);
      this.ys.splice(0, over);
      this.ws.splice(0, over);
    }
  }

  /** `stepsPerFit` Adam steps on minibatches of the buffer (members weighted by their bootstrap). */
  async fit(steps = this.cfg.stepsPerFit): Promise<void> {
    const n = this.ys.length;
    if (n === 0) return;
    // Targets standardized with the buffer's statistics; refreshed each fit (the buffer moves).
    this.yMean = this.ys.reduce((a, b) => a + b, 0) / n;
    this.yStd = Math.sqrt(this.ys.reduce((a, b) => a + (b - this.yMean) ** 2, 0) / n) || 1;
    const E = this.cfg.members, D = this.dim;
    const trainer = await (this.trainer ??= this.makeTrainer());
    const bs = Math.min(this.cfg.batch, n);
    for (let s = 0; s < steps; s++) {
      const x = new Float32Array(bs * D), y = new Float32Array(bs), w = new Float32Array(E * bs);
      for (let r = 0; r < bs; r++) {
        const i = this.rng.int(n);
        x.set(this.xs[i]!, r * D);
        y[r] = (this.ys[i]! - this.yMean) / this.yStd;
        for (let e = 0; e < E; e++) w[e * bs + r] = this.ws[i]![e]!;
      }
      await trainer.step({ x: tensor(x, [bs, D]), y: tensor(y, [1, bs, 1]), w: tensor(w, [E, bs, 1]) });
    }
    trainer.syncToStore();
    this.fits++;
  }

  /** Mean and epistemic variance per row, in score units. Before any fit: the prior (mean 0 of no data, variance 1). */
  async predict(features: readonly Float32Array[]): Promise<OutcomePrediction[]> {
    const n = features.length;
    if (n === 0) return [];
    const E = this.cfg.members, D = this.dim;
    const x = new Float32Array(n * D);
    features.forEach((f, i) => {
      if (f.length !== D) throw new Error(`outcome model: feature row has ${f.length} values, expected ${D}`);
      x.set(f, i * D);
    });
    const { prog, params } = await (this.forward ??= this.makeForward());
    const feeds: Record<string, ReturnType<typeof tensor>> = { x: tensor(x, [n, D]) };
    for (const p of params) {
      const v = this.store.get(p);
      feeds[p] = tensor(v.data, v.shape);
    }
    const out = f32((await prog.run(feeds)).y); // [E, n, 1]
    return Array.from({ length: n }, (_, i) => {
      let m = 0;
      for (let e = 0; e < E; e++) m += out[e * n + i]! / E;
      let v = 0;
      for (let e = 0; e < E; e++) v += (out[e * n + i]! - m) ** 2 / Math.max(1, E - 1);
      return { mean: m * this.yStd + this.yMean, variance: v * this.yStd * this.yStd };
    });
  }

  async release(): Promise<void> {
    if (this.trainer) await (await this.trainer).release();
    if (this.forward) await (await this.forward).prog.release();
  }

  private async makeTrainer(): Promise<Trainer> {
    const E = this.cfg.members;
    const g = new Graph();
    const x = g.input('x', ['B', this.dim]);
    const y = g.input('y', [1, 'B', 1]);
    const w = g.input('w', [E, 'B', 1]);
    const pred = this.net.forward(x); // [E, B, 1]
    const loss = mean(sum(mul(w, square(sub(pred, y))), 0));
    return Trainer.create({ loss, store: this.store, optimizer: { lr: this.cfg.lr, weightDecay: 1e-4, clipNorm: 10 } }, { threads: 1 });
  }

  private async makeForward(): Promise<{ prog: Program; params: string[] }> {
    const g = new Graph();
    const x = g.input('x', ['n', this.dim]);
    const y = this.net.forward(x);
    const params = [...g.params.keys()];
    const prog = await Program.fromSpec({
      inputs: [{ name: 'x', tensor: x }, ...params.map((n) => ({ name: n, tensor: g.params.get(n)! }))],
      outputs: [{ name: 'y', tensor: y }],
    }, { threads: 1 });
    return { prog, params };
  }

  /** Poisson(1) draw (Knuth): the online bootstrap's weight. */
  private poisson1(): number {
    const l = Math.exp(-1);
    let k = 0, p = 1;
    do {
      k++;
      p *= this.rng.next();
    } while (p > l);
    return k - 1;
  }
}
