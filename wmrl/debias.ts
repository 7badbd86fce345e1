// Online Debiaser: a monotone map f from world-model score to real score, fitted by isotonic
// regression on anchor pairs. Monotone so it never reorders what the world model ranked right;
// not affine, because group standardization cancels any affine correction.
//
// Pairs carry a weight: the inverse of their group's inclusion probability relative to the
// step's mean (π̄/π). Anchors chosen unevenly (active mode: where the ensemble is unsure) are no
// sample of all groups, so an unweighted fit estimates E[real | wm, selected]; weighting each pair
// by how many groups it stands for estimates E[real | wm] (Horvitz–Thompson / Hájek). With
// uniform selection every weight is 1 and nothing changes.

export interface DebiasConfig {
  /** The map stays identity until the buffer holds this many pairs. */
  minPairs: number;
  /** Refit after this many new pairs. */
  refitEvery: number;
  /** FIFO buffer capacity, so the map tracks drift as the policy moves. */
  bufferCap: number;
  /** Equal-width bins over the robust range of world-model scores (see `robustRange`); outliers join the end bins. */
  bins: number;
  /** Half-life, in anchor groups, of the held-out diagnostic's running averages. */
  diagnosticHalfLife: number;
}

export const DEFAULT_DEBIAS_CONFIG: DebiasConfig = {
  minPairs: 200,
  refitEvery: 64,
  bufferCap: 5000,
  bins: 20,
  diagnosticHalfLife: 64,
};

/** One anchor pair; `group` ties pairs of the same group together for the centred diagnostic. */
export interface Pair {
  wm: number;
  real: number;
  group: number;
  /** Selection weight π̄/π of the pair's group (> 0); 1 when absent. */
  weight?: number;
}

/** The within-group-centred squared residual real − f(wm), before (f = identity) and after the map. */
export interface DebiasDiagnostic {
  before: number;
  after: number;
  /** 1 − after/before; 0 when before is 0. */
  reduction: number;
}

export interface DebiaserState {
  buffer: Pair[];
  sinceFit: number;
  fits: number;
  knotsX: number[];
  knotsY: number[];
  heldOut: { before: number; after: number; weight: number };
}

/**
 * Weighted pool-adjacent-violators: the non-decreasing sequence closest to `y` (length n) in
 * weighted least squares (weights `w`, length n, > 0). Returns length n.
 */
export function pav(y: readonly number[], w?: readonly number[]): number[] {
  const n = y.length;
  const val: number[] = [];
  const wt: number[] = [];
  const len: number[] = [];
  for (let i = 0; i < n; i++) {
    val.push(y[i]!);
    wt.push(w ? w[i]! : 1);
    len.push(1);
    while (val.length > 1 && val[val.length - 2]! > val[val.length - 1]!) {
      const b = val.length - 1;
      const W = wt[b - 1]! + wt[b]!;
      val[b - 1] = (val[b - 1]! * wt[b - 1]! + val[b]! * wt[b]!) / W;
      wt[b - 1] = W;
      len[b - 1]! += len[b]!;
      val.pop(); wt.pop(); len.pop();
    }
  }
  const out: number[] = [];
  for (let b = 0; b < val.length; b++) for (let j = 0; j < len[b]!; j++) out.push(val[b]!);
  return out;
}

/** Far-out fences (Tukey): this many interquartile ranges beyond the quartiles. */
const FENCE_IQR = 3;

/**
 * The range of `x` (non-empty) without its far outliers: [min, max] of the values inside
 * q1 − 3·IQR … q3 + 3·IQR. When more than half the values tie (IQR 0) the 5–95% range stands in
 * for the IQR, and when that is 0 too, the full range. A single value far outside the rest would
 * otherwise stretch equal-width bins until the bulk of the data shares two or three of them.
 */
export function robustRange(x: readonly number[]): { lo: number; hi: number } {
  const s = [...x].sort((a, b) => a - b);
  const q = (p: number) => {
    const pos = (s.length - 1) * p;
    const i = Math.floor(pos);
    return s[i]! + (s[Math.min(i + 1, s.length - 1)]! - s[i]!) * (pos - i);
  };
  const spread = q(0.75) - q(0.25) || (q(0.95) - q(0.05)) / 2 || (s[s.length - 1]! - s[0]!) / 2;
  const fenceLo = q(0.25) - FENCE_IQR * spread;
  const fenceHi = q(0.75) + FENCE_IQR * spread;
  let lo = Number.POSITIVE_INFINITY;
  let hi = Number.NEGATIVE_INFINITY;
  for (const v of s) if (v >= fenceLo && v <= fenceHi) { if (v < lo) lo = v; if (v > hi) hi = v; }
  return { lo, hi };
}

/**
 * Binned isotonic fit of y on x (both length n ≥ 1, optional weights `w` > 0, length n): equal-width
 * bins over the robust range of x (`robustRange`), values beyond it clamped into the end bins, the
 * weighted mean of x and y per non-empty bin, PAV weighted by the bins' total weight. Returns the
 * knots (mean clamped x of each bin and its fitted y, ascending in x); the map interpolates
 * linearly between knots and is flat outside. One knot when every x is equal.
 */
export function binnedIsotonic(x: readonly number[], y: readonly number[], bins: number, w?: readonly number[]): { knotsX: number[]; knotsY: number[] } {
  if (x.length === 0) return { knotsX: [], knotsY: [] };
  const { lo, hi } = robustRange(x);
  const width = hi > lo ? (hi - lo) / bins : 1;
  const sx = new Array<number>(bins).fill(0);
  const sy = new Array<number>(bins).fill(0);
  const cnt = new Array<number>(bins).fill(0);
  for (let i = 0; i < x.length; i++) {
    const xi = Math.min(hi, Math.max(lo, x[i]!));
    const b = Math.min(bins - 1, Math.floor((xi - lo) / width));
    const wi = w ? w[i]! : 1;
    sx[b]! += wi * xi;
    sy[b]! += wi * y[i]!;
    cnt[b]! += wi;
  }
  const mx: number[] = [];
  const my: number[] = [];
  const bw: number[] = [];
  for (let b = 0; b < bins; b++) if (cnt[b]! > 0) { mx.push(sx[b]! / cnt[b]!); my.push(sy[b]! / cnt[b]!); bw.push(cnt[b]!); }
  return { knotsX: mx, knotsY: pav(my, bw) };
}

/** Evaluates the piecewise-linear monotone map given by knots (ascending x). */
export function evalKnots(knotsX: readonly number[], knotsY: readonly number[], x: number): number {
  const n = knotsX.length;
  if (n === 0) return x;
  if (x <= knotsX[0]!) return knotsY[0]!;
  if (x >= knotsX[n - 1]!) return knotsY[n - 1]!;
  let lo = 0;
  let hi = n - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (knotsX[mid]! <= x) lo = mid; else hi = mid;
  }
  const t = (x - knotsX[lo]!) / (knotsX[hi]! - knotsX[lo]!);
  return knotsY[lo]! + t * (knotsY[hi]! - knotsY[lo]!);
}

/**
 * Within-group-centred mean squared residual of real − map(wm) over groups with ≥ 2 pairs, each
 * pair counted with its selection weight.
 */
export function centredResidual(pairs: readonly Pair[], map: (x: number) => number): number {
  const byGroup = new Map<number, Array<{ r: number; w: number }>>();
  for (const p of pairs) {
    const e = { r: p.real - map(p.wm), w: p.weight ?? 1 };
    const g = byGroup.get(p.group);
    if (g) g.push(e); else byGroup.set(p.group, [e]);
  }
  let ss = 0;
  let n = 0;
  for (const es of byGroup.values()) {
    if (es.length < 2) continue;
    const m = es.reduce((s, e) => s + e.r, 0) / es.length;
    for (const e of es) { ss += e.w * (e.r - m) ** 2; n += e.w; }
  }
  return n ? ss / n : 0;
}

export class OnlineDebiaser {
  private buffer: Pair[] = [];
  private sinceFit = 0;
  private fits = 0;
  private knotsX: number[] = [];
  private knotsY: number[] = [];
  private heldOut = { before: 0, after: 0, weight: 0 };

  constructor(readonly cfg: DebiasConfig = DEFAULT_DEBIAS_CONFIG) {
    if (cfg.minPairs < 1 || cfg.refitEvery < 1 || cfg.bufferCap < cfg.minPairs || cfg.bins < 1) {
      throw new Error('debias config: need minPairs ≥ 1, refitEvery ≥ 1, bufferCap ≥ minPairs, bins ≥ 1');
    }
  }

  /** True once a map has been fitted; before that `apply` is the identity. */
  get calibrated(): boolean {
    return this.fits > 0;
  }

  get pairCount(): number {
    return this.buffer.length;
  }

  get fitCount(): number {
    return this.fits;
  }

  apply(x: number): number {
    return this.fits > 0 ? evalKnots(this.knotsX, this.knotsY, x) : x;
  }

  /**
   * Adds one anchor group's pairs (all with the same `group` and weight) and refits when due. Before adding,
   * the group is scored by the current map: that held-out residual is the honest diagnostic.
   * Returns true when the map was refitted. A buffer whose world-model scores are all equal has
   * no slope to fit: the map stays as it was (identity, or the last fit) and the fit is retried
   * with every new group until the buffer has spread.
   */
  addGroup(pairs: readonly Pair[]): boolean {
    if (pairs.length >= 2 && this.fits > 0) {
      const a = 1 - 0.5 ** (1 / this.cfg.diagnosticHalfLife);
      const v = pairs[0]!.weight ?? 1;
      const h = this.heldOut;
      h.before = (1 - a) * h.before + a * v * centredResidual(pairs, (x) => x);
      h.after = (1 - a) * h.after + a * v * centredResidual(pairs, (x) => this.apply(x));
      h.weight = (1 - a) * h.weight + a * v;
    }
    for (const p of pairs) this.buffer.push({ wm: p.wm, real: p.real, group: p.group, weight: p.weight ?? 1 });
    if (this.buffer.length > this.cfg.bufferCap) this.buffer.splice(0, this.buffer.length - this.cfg.bufferCap);
    this.sinceFit += pairs.length;
    const due = this.fits === 0 ? this.buffer.length >= this.cfg.minPairs : this.sinceFit >= this.cfg.refitEvery;
    if (!due) return false;
    return this.refit();
  }

  private refit(): boolean {
    const b = this.buffer;
    const fit = binnedIsotonic(b.map((p) => p.wm), b.map((p) => p.real), this.cfg.bins, b.map((p) => p.weight ?? 1));
    // One knot, or real scores that never differ (a sparse success no anchor has reached yet), would be a
    // constant map: every world-model group would get zero advantage. The map stays as it was until they differ.
    if (fit.knotsX.length < 2 || fit.knotsY[fit.knotsY.length - 1]! - fit.knotsY[0]! <= 0) return false;
    this.knotsX = fit.knotsX;
    this.knotsY = fit.knotsY;
    this.sinceFit = 0;
    this.fits++;
    return true;
  }

  /** In-sample diagnostic over the buffer with the current map. */
  diagnostic(): DebiasDiagnostic {
    const before = centredResidual(this.buffer, (x) => x);
    const after = centredResidual(this.buffer, (x) => this.apply(x));
    return { before, after, reduction: before > 0 ? 1 - after / before : 0 };
  }

  /** Held-out diagnostic: each anchor group scored by the map fitted before it arrived (EWMA); null before any map. */
  heldOutDiagnostic(): DebiasDiagnostic | null {
    const h = this.heldOut;
    if (h.weight === 0) return null;
    const before = h.before / h.weight;
    const after = h.after / h.weight;
    return { before, after, reduction: before > 0 ? 1 - after / before : 0 };
  }

  state(): DebiaserState {
    return {
      buffer: this.buffer.map((p) => ({ ...p })),
      sinceFit: this.sinceFit,
      fits: this.fits,
      knotsX: [...this.knotsX],
      knotsY: [...this.knotsY],
      heldOut: { ...this.heldOut },
    };
  }

  restore(s: DebiaserState): void {
    this.buffer = s.buffer.map((p) => ({ ...p }));
    this.sinceFit = s.sinceFit;
    this.fits = s.fits;
    this.knotsX = [...s.knotsX];
    this.knotsY = [...s.knotsY];
    this.heldOut = { ...s.heldOut };
  }
}
