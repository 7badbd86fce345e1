// Outcome world models: predict an experiment's score without running it.
//
// `EnsembleOutcomeModel`: E MLPs batched in one weight tensor (nn/ EnsembleMLP), each trained on
// its own bootstrap resample (Poisson(1) weights per sample and member) of the executed results,
// online: `observe` adds results, `fit` takes a few Adam steps. Its prediction is the members'
// mean, and their variance (the epistemic uncertainty active anchor selection reads).
// `GpOutcomeModel`: a Gaussian process over the same features with a second-order overlap kernel
// (k = a·u + b·u², u the features' normalized dot product: per-field additive effects plus
// pairwise interactions, the Bayesian linear model on those terms), hyperparameters chosen by
// marginal likelihood on every fit: data-efficient from a handful of executions, with an epistemic
// variance that grows away from the data, and joint posterior draws (Thompson sampling).
// Features: one-hot per field plus the choice's ordinal position for numeric fields (structured
// proposals); hashed character n-grams for text or code.
import { EnsembleMLP, Graph, ParamStore, Program, Rng, Trainer, f32, mean, mul, square, sub, sum, tensor } from '../nn/index.js';
import type { Field, Proposal } from './task.js';

// ---------------------------------------------------------------- features

/** Writes the one-hot of the proposal's choice for field `f` at `out[at …]`; returns the choice's index. Throws on a choice not in the field. */
function oneHot(f: Field, p: Proposal, out: Float32Array, at: number): number {
  const i = f.choices.indexOf(p[f.name]!);
  if (i < 0) throw new Error(`proposal.${f.name}: ${JSON.stringify(p[f.name])} is not one of ${JSON.stringify(f.choices)}`);
  out[at + i] = 1;
  return i;
}

/** Width of `structuredFeatures` for these fields. */
export const structuredDim = (fields: readonly Field[]): number =>
  fields.reduce((n, f) => n + f.choices.length + (f.choices.every((c) => typeof c === 'number') ? 1 : 0), 0);

/** One-hot per field, plus its position in [0, 1] for numeric (ordered) fields. Throws on a choice not in the field. */
export function structuredFeatures(fields: readonly Field[], p: Proposal, out = new Float32Array(structuredDim(fields)), at = 0): Float32Array {
  let o = at;
  for (const f of fields) {
    const i = oneHot(f, p, out, o);
    o += f.choices.length;
    if (f.choices.every((c) => typeof c === 'number')) out[o++] = f.choices.length > 1 ? i / (f.choices.length - 1) : 0;
  }
  return out;
}

/** Width of `ordinalFeatures` for these fields. */
export const ordinalDim = (fields: readonly Field[]): number =>
  fields.reduce((n, f) => n + f.choices.length + (f.choices.every((c) => typeof c === 'number') ? f.choices.length - 1 : 0), 0);

/**
 * One-hot per field, plus for numeric (ordered) fields a thermometer code: indicators "choice
 * index ≥ k" for k = 1 … n−1, scaled by 1/√(n−1). In a linear model or a dot-product kernel the
 * thermometer makes neighbouring choices share most of their effect (a smoothness prior along
 * the field's order) while the one-hot still lets each choice differ. Throws on a choice not in the field.
 */
export function ordinalFeatures(fields: readonly Field[], p: Proposal, out = new Float32Array(ordinalDim(fields)), at = 0): Float32Array {
  let o = at;
  for (const f of fields) {
    const i = oneHot(f, p, out, o);
    o += f.choices.length;
    if (!f.choices.every((c) => typeof c === 'number')) continue;
    const s = 1 / Math.sqrt(Math.max(1, f.choices.length - 1));
    for (let k = 1; k < f.choices.length; k++) out[o + k - 1] = i >= k ? s : 0;
    o += f.choices.length - 1;
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

/** What a trainer needs of an outcome world model. */
export interface OutcomeModel {
  readonly dim: number;
  /** Results held. */
  readonly size: number;
  /** Whether `fit` has run on data at least once. */
  readonly fitted: boolean;
  /** Adds executed results: features (length dim each) and their real scores. */
  observe(features: readonly Float32Array[], scores: readonly number[]): void;
  fit(): Promise<void>;
  /** Mean and epistemic variance per row, in score units. */
  predict(features: readonly Float32Array[]): Promise<OutcomePrediction[]>;
  /** One joint posterior draw of the mean score per row (Thompson sampling), where the model has a posterior. */
  sample?(features: readonly Float32Array[], rng: Rng): Promise<number[]>;
  release(): Promise<void>;
}

export class EnsembleOutcomeModel implements OutcomeModel {
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
    checkObservations(features, scores, this.dim);
    features.forEach((x, i) => {
      this.xs.push(x);
      this.ys.push(scores[i]!);
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

// ---------------------------------------------------------------- the Gaussian process

export interface GpOutcomeConfig {
  /** Results kept (FIFO); the fit is O(n³) in them. */
  bufferCap: number;
  /** Candidate kernel weights of the additive term (targets standardized). */
  additive: readonly number[];
  /** Candidate kernel weights of the pairwise term. */
  pairwise: readonly number[];
  /** Candidate observation-noise variances (standardized units). */
  noise: readonly number[];
}

export const DEFAULT_GP_CONFIG: GpOutcomeConfig = {
  bufferCap: 512,
  additive: [0.1, 0.3, 1, 3],
  pairwise: [0, 0.1, 0.3, 1, 3],
  noise: [0.01, 0.03, 0.1, 0.3, 1],
};

/** In-place lower Cholesky of the n×n row-major `a`; false when it is not positive definite. */
export function cholesky(a: Float64Array, n: number): boolean {
  for (let j = 0; j < n; j++) {
    let d = a[j * n + j]!;
    for (let k = 0; k < j; k++) d -= a[j * n + k]! ** 2;
    if (!(d > 0)) return false;
    const l = Math.sqrt(d);
    a[j * n + j] = l;
    for (let i = j + 1; i < n; i++) {
      let s = a[i * n + j]!;
      for (let k = 0; k < j; k++) s -= a[i * n + k]! * a[j * n + k]!;
      a[i * n + j] = s / l;
    }
    for (let k = j + 1; k < n; k++) a[j * n + k] = 0;
  }
  return true;
}

/** Solves L·x = b in place (L lower, n×n row-major). */
function forward(l: Float64Array, n: number, b: Float64Array): void {
  for (let i = 0; i < n; i++) {
    let s = b[i]!;
    for (let k = 0; k < i; k++) s -= l[i * n + k]! * b[k]!;
    b[i] = s / l[i * n + i]!;
  }
}

/** Solves Lᵀ·x = b in place. */
function backward(l: Float64Array, n: number, b: Float64Array): void {
  for (let i = n - 1; i >= 0; i--) {
    let s = b[i]!;
    for (let k = i + 1; k < n; k++) s -= l[k * n + i]! * b[k]!;
    b[i] = s / l[i * n + i]!;
  }
}

/**
 * Gaussian-process outcome model. Kernel on features x, x': with u = ⟨x, x'⟩ / ⟨x̄, x̄⟩ (x̄ the mean
 * self-product of the data, so u ≈ the share of fields two proposals have in common),
 * k = a·u + b·u²: `a` weighs per-feature (per-field) additive effects, `b` the pairwise
 * interactions. (a, b, noise) are picked from the config's grids by log marginal likelihood at
 * every fit; targets standardized with the buffer's statistics.
 */
export class GpOutcomeModel implements OutcomeModel {
  private xs: Float32Array[] = [];
  private ys: number[] = [];
  private yMean = 0;
  private yStd = 1;
  private scale = 1;
  private hyper = { a: 1, b: 0, noise: 0.1 };
  private chol: Float64Array | null = null;
  private alpha: Float64Array | null = null;
  private fitX: Float32Array[] = [];
  private fits = 0;

  constructor(readonly dim: number, readonly cfg: GpOutcomeConfig = DEFAULT_GP_CONFIG) {
    if (!(Number.isInteger(dim) && dim >= 1)) throw new Error(`outcome model: feature dim ${dim} must be a positive integer`);
    if (!(cfg.additive.length && cfg.pairwise.length && cfg.noise.length)) throw new Error('gp outcome model: every hyperparameter grid needs at least one value');
    if (cfg.noise.some((v) => !(v > 0))) throw new Error('gp outcome model: noise variances must be > 0');
  }

  get size(): number {
    return this.ys.length;
  }

  get fitted(): boolean {
    return this.fits > 0;
  }

  /** The hyperparameters the last fit chose. */
  get hyperparameters(): { a: number; b: number; noise: number } {
    return { ...this.hyper };
  }

  observe(features: readonly Float32Array[], scores: readonly number[]): void {
    checkObservations(features, scores, this.dim);
    features.forEach((x, i) => {
      this.xs.push(x);
      this.ys.push(scores[i]!);
    });
    const over = this.ys.length - this.cfg.bufferCap;
    if (over > 0) {
      this.xs.splice(0, over);
      this.ys.splice(0, over);
    }
  }

  private dot(x: Float32Array, z: Float32Array): number {
    let s = 0;
    for (let i = 0; i < x.length; i++) s += x[i]! * z[i]!;
    return s / this.scale;
  }

  /** The chosen kernel between two feature rows. */
  private kernel(x: Float32Array, z: Float32Array): number {
    const { a, b } = this.hyper;
    const u = this.dot(x, z);
    return a * u + b * u * u;
  }

  async fit(): Promise<void> {
    const n = this.ys.length;
    if (n === 0) return;
    this.yMean = this.ys.reduce((a, b) => a + b, 0) / n;
    this.yStd = Math.sqrt(this.ys.reduce((a, b) => a + (b - this.yMean) ** 2, 0) / n) || 1;
    this.scale = this.xs.reduce((s, x) => s + x.reduce((t, v) => t + v * v, 0), 0) / n || 1;
    const y = Float64Array.from(this.ys, (v) => (v - this.yMean) / this.yStd);
    const u = new Float64Array(n * n);
    for (let i = 0; i < n; i++) for (let j = 0; j <= i; j++) u[i * n + j] = u[j * n + i] = this.dot(this.xs[i]!, this.xs[j]!);
    let best: { lml: number; a: number; b: number; noise: number; chol: Float64Array; alpha: Float64Array } | null = null;
    for (const a of this.cfg.additive) for (const b of this.cfg.pairwise) for (const noise of this.cfg.noise) {
      const k = new Float64Array(n * n);
      for (let i = 0; i < n * n; i++) k[i] = a * u[i]! + b * u[i]! * u[i]!;
      for (let i = 0; i < n; i++) k[i * n + i]! += noise;
      if (!cholesky(k, n)) continue;
      // Log marginal likelihood (up to a constant): −½ yᵀK⁻¹y − ½ log det K.
      const alpha = Float64Array.from(y);
      forward(k, n, alpha);
      let lml = 0;
      for (let i = 0; i < n; i++) lml -= 0.5 * alpha[i]! ** 2 + Math.log(k[i * n + i]!);
      backward(k, n, alpha);
      if (!best || lml > best.lml) best = { lml, a, b, noise, chol: k, alpha };
    }
    if (!best) throw new Error('gp outcome model: no kernel on the grid is positive definite');
    this.hyper = { a: best.a, b: best.b, noise: best.noise };
    this.chol = best.chol;
    this.alpha = best.alpha;
    this.fitX = [...this.xs];
    this.fits++;
  }

  /** Posterior mean and variance of the mean score (not of one noisy execution). Before any fit: mean 0, variance 1. */
  async predict(features: readonly Float32Array[]): Promise<OutcomePrediction[]> {
    const { chol, alpha } = this;
    return features.map((f) => {
      if (f.length !== this.dim) throw new Error(`outcome model: feature row has ${f.length} values, expected ${this.dim}`);
      if (!chol || !alpha) return { mean: 0, variance: 1 };
      const n = this.fitX.length;
      const ks = new Float64Array(n);
      for (let i = 0; i < n; i++) ks[i] = this.kernel(f, this.fitX[i]!);
      let m = 0;
      for (let i = 0; i < n; i++) m += ks[i]! * alpha[i]!;
      forward(chol, n, ks);
      let v = this.kernel(f, f);
      for (let i = 0; i < n; i++) v -= ks[i]! ** 2;
      return { mean: m * this.yStd + this.yMean, variance: Math.max(0, v) * this.yStd * this.yStd };
    });
  }

  /**
   * One joint draw of the mean score at `features` from the posterior (Thompson sampling): rows
   * that are the same proposal get the same value, similar proposals correlated values. Before any
   * fit: independent draws from the prior (mean 0, variance 1).
   */
  async sample(features: readonly Float32Array[], rng: Rng): Promise<number[]> {
    const pred = await this.predict(features);
    const { chol } = this;
    const m = features.length;
    if (!chol || m === 0) return pred.map((p) => p.mean + Math.sqrt(p.variance) * rng.normal());
    const n = this.fitX.length;
    // V = L⁻¹ K(X, F), then Σ = K(F, F) − VᵀV (standardized units).
    const v = features.map((f) => {
      const col = new Float64Array(n);
      for (let i = 0; i < n; i++) col[i] = this.kernel(f, this.fitX[i]!);
      forward(chol, n, col);
      return col;
    });
    const cov = new Float64Array(m * m);
    for (let i = 0; i < m; i++) for (let j = 0; j <= i; j++) {
      let c = this.kernel(features[i]!, features[j]!);
      for (let k = 0; k < n; k++) c -= v[i]![k]! * v[j]![k]!;
      cov[i * m + j] = cov[j * m + i] = c;
    }
    for (let jitter = 1e-8; ; jitter *= 10) {
      const c = Float64Array.from(cov);
      for (let i = 0; i < m; i++) c[i * m + i]! += jitter;
      if (!cholesky(c, m)) {
        if (jitter > 1) throw new Error('gp outcome model: posterior covariance is not positive semi-definite');
        continue;
      }
      const z = Array.from({ length: m }, () => rng.normal());
      return pred.map((p, i) => {
        let e = 0;
        for (let k = 0; k <= i; k++) e += c[i * m + k]! * z[k]!;
        return p.mean + e * this.yStd;
      });
    }
  }

  async release(): Promise<void> {}
}

/** Throws, naming the problem, unless every feature row has `dim` values and its score is finite (both models observe through it). */
function checkObservations(features: readonly Float32Array[], scores: readonly number[], dim: number): void {
  if (features.length !== scores.length) throw new Error(`outcome model: ${features.length} feature rows for ${scores.length} scores`);
  features.forEach((x, i) => {
    if (x.length !== dim) throw new Error(`outcome model: feature row has ${x.length} values, expected ${dim}`);
    if (!Number.isFinite(scores[i]!)) throw new Error(`outcome model: score ${scores[i]} is not finite`);
  });
}
