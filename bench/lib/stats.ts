// The protocol's statistics: paired bootstrap intervals of a difference over seeds × shared test episodes, the
// "beats" verdict that needs an interval excluding 0, speedups per seed with their interval across seeds, and the
// per-seed table every report carries. Every resampling is seeded, so a report repeats exactly from the same figures.
import { Rng } from '../../nn/rng.js';
import { fmt, markdownTable } from './report.js';

/** A point estimate with its two-sided interval. */
export interface Interval {
  estimate: number;
  lo: number;
  hi: number;
  /** Coverage of [lo, hi], e.g. 0.95. */
  level: number;
}

export interface BootstrapOptions {
  /** Resamples; default 10,000. */
  resamples?: number;
  /** The resampling's seed; default 0. */
  seed?: number;
  /** Coverage of the interval; default 0.95. */
  level?: number;
}

const DEFAULTS = { resamples: 10_000, seed: 0, level: 0.95 };

/** The q-quantile of sorted values by nearest rank (no interpolation, so ±Infinity stays meaningful). */
function rankQuantile(sorted: readonly number[], q: number): number {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.round(q * (sorted.length - 1))));
  return sorted[i]!;
}

function checkMatrix(name: string, m: ReadonlyArray<readonly number[]>): void {
  if (m.length === 0) throw new Error(`${name}: no seeds`);
  m.forEach((row, s) => {
    if (row.length === 0) throw new Error(`${name}: seed row ${s} has no episodes`);
    row.forEach((v, e) => {
      if (!Number.isFinite(v)) throw new Error(`${name}: seed row ${s}, episode ${e} is ${v}; every score must be a finite number`);
    });
  });
}

const meanOf = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;

/**
 * The mean over seeds of each seed's mean over its episodes, with a two-level bootstrap interval: each resample
 * draws the seeds with replacement and, within every drawn seed, its episodes with replacement. `values[s][e]` is
 * seed s's figure on episode e (seeds may have different episode counts).
 */
export function hierarchicalBootstrap(values: ReadonlyArray<readonly number[]>, opts: BootstrapOptions = {}): Interval {
  checkMatrix('bootstrap', values);
  const { resamples, seed, level } = { ...DEFAULTS, ...opts };
  if (!(Number.isInteger(resamples) && resamples >= 100)) throw new Error(`bootstrap: resamples ${resamples} must be an integer >= 100`);
  if (!(level > 0 && level < 1)) throw new Error(`bootstrap: level ${level} must be in (0, 1)`);
  const rng = new Rng(seed);
  const n = values.length;
  const stats = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    let total = 0;
    for (let i = 0; i < n; i++) {
      const row = values[rng.int(n)]!;
      let s = 0;
      for (let j = 0; j < row.length; j++) s += row[rng.int(row.length)]!;
      total += s / row.length;
    }
    stats[r] = total / n;
  }
  const sorted = Array.from(stats).sort((a, b) => a - b);
  const tail = (1 - level) / 2;
  return { estimate: meanOf(values.map(meanOf)), lo: rankQuantile(sorted, tail), hi: rankQuantile(sorted, 1 - tail), level };
}

/**
 * The paired difference a − b: `a[s][e]` and `b[s][e]` are two variants' figures on the same seed s and the same
 * (shared) test episode e, so the pairs' differences are resampled together (hierarchicalBootstrap). Throws unless
 * both have the same seeds × episodes shape.
 */
export function pairedDifference(a: ReadonlyArray<readonly number[]>, b: ReadonlyArray<readonly number[]>, opts: BootstrapOptions = {}): Interval {
  checkMatrix('paired difference: a', a);
  checkMatrix('paired difference: b', b);
  if (a.length !== b.length) throw new Error(`paired difference: a has ${a.length} seeds, b ${b.length}; pairs need the same seeds`);
  const d = a.map((row, s) => {
    if (row.length !== b[s]!.length) throw new Error(`paired difference: seed row ${s} has ${row.length} episodes in a, ${b[s]!.length} in b; pairs need the same episodes`);
    return row.map((v, e) => v - b[s]![e]!);
  });
  return hierarchicalBootstrap(d, opts);
}

export type Verdict = 'beats' | 'worse' | 'no difference shown';

/** Of a difference a − b where higher is better: "beats" only when the whole interval is above 0, "worse" below. */
export function verdict(d: Interval): Verdict {
  if (d.lo > 0) return 'beats';
  if (d.hi < 0) return 'worse';
  return 'no difference shown';
}

/** "+0.012 [-0.004, +0.031]" (signed), or "0.52 [0.49, 0.55]" with `signed` false. */
export function formatInterval(iv: Interval, signed = true, digits = 3): string {
  const f = (x: number) => (signed && x > 0 ? '+' : '') + fmt(x, digits);
  return `${f(iv.estimate)} [${f(iv.lo)}, ${f(iv.hi)}]`;
}

/** One seed's speedup: how the variant's cost to reach a level compares with the reference's. */
export interface SeedSpeedup {
  seed: number | string;
  /** Cost (robot time, slot seconds) for the reference to reach the level; Infinity: never within its budget. */
  reference: number;
  /** Cost for the variant; Infinity: never within its budget. */
  variant: number;
  /** reference / variant: 0 when the variant never reached the level, Infinity when only the reference never did, NaN when neither did. */
  speedup: number;
  status: 'reached' | 'variant never reached' | 'reference never reached' | 'neither reached';
}

export interface SpeedupSummary {
  perSeed: SeedSpeedup[];
  /** The median over every seed but those where neither reached the level (a seed the variant never reached counts as 0), with its bootstrap interval over seeds. */
  median: Interval;
  /** Seeds the variant never reached the level on, named in every statement of the speedup. */
  never: Array<number | string>;
  /** Seeds neither reached the level on: no ratio, left out of the median and named. */
  neither: Array<number | string>;
}

function medianOf(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  if (s.length % 2) return s[m]!;
  // Two equal infinities average to themselves, not NaN.
  return s[m - 1] === s[m] ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * Per seed, reference cost / variant cost to reach a level (Infinity: the level was never reached within the
 * budget), and their median across seeds with a bootstrap interval that resamples seeds. A seed the variant never
 * reached is a speedup of 0: it pulls the median down and is named, never left out.
 */
export function speedups(seeds: ReadonlyArray<number | string>, reference: readonly number[], variant: readonly number[], opts: BootstrapOptions = {}): SpeedupSummary {
  if (seeds.length === 0) throw new Error('speedups: no seeds');
  if (reference.length !== seeds.length || variant.length !== seeds.length) throw new Error(`speedups: ${seeds.length} seeds, ${reference.length} reference costs and ${variant.length} variant costs; one of each per seed`);
  const perSeed = seeds.map((seed, i): SeedSpeedup => {
    const r = reference[i]!, v = variant[i]!;
    for (const [what, x] of [['reference', r], ['variant', v]] as const) {
      if (Number.isNaN(x) || x < 0) throw new Error(`speedups: seed ${seed}: the ${what}'s cost ${x} must be >= 0 (Infinity where it never reached the level)`);
    }
    const rIn = Number.isFinite(r), vIn = Number.isFinite(v);
    if (rIn && vIn) return { seed, reference: r, variant: v, speedup: v === 0 ? (r === 0 ? 1 : Number.POSITIVE_INFINITY) : r / v, status: 'reached' };
    if (rIn) return { seed, reference: r, variant: v, speedup: 0, status: 'variant never reached' };
    if (vIn) return { seed, reference: r, variant: v, speedup: Number.POSITIVE_INFINITY, status: 'reference never reached' };
    return { seed, reference: r, variant: v, speedup: Number.NaN, status: 'neither reached' };
  });
  const counted = perSeed.filter((s) => s.status !== 'neither reached').map((s) => s.speedup);
  const neither = perSeed.filter((s) => s.status === 'neither reached').map((s) => s.seed);
  const never = perSeed.filter((s) => s.status === 'variant never reached').map((s) => s.seed);
  if (counted.length === 0) return { perSeed, median: { estimate: Number.NaN, lo: Number.NaN, hi: Number.NaN, level: opts.level ?? DEFAULTS.level }, never, neither };
  const { resamples, seed, level } = { ...DEFAULTS, ...opts };
  const rng = new Rng(seed);
  const meds: number[] = [];
  const pick = new Array<number>(counted.length);
  for (let r = 0; r < resamples; r++) {
    for (let i = 0; i < counted.length; i++) pick[i] = counted[rng.int(counted.length)]!;
    meds.push(medianOf(pick));
  }
  meds.sort((a, b) => a - b);
  const tail = (1 - level) / 2;
  return { perSeed, median: { estimate: medianOf(counted), lo: rankQuantile(meds, tail), hi: rankQuantile(meds, 1 - tail), level }, never, neither };
}

/** "5.8x [2.1, 7.5] (median of 10 seeds; seed 1003 never reached the level: counted as 0x)". */
export function formatSpeedup(s: SpeedupSummary): string {
  const n = s.perSeed.length - s.neither.length;
  const parts = [`${fmt(s.median.estimate)}x [${fmt(s.median.lo)}, ${fmt(s.median.hi)}] (median of ${n} seed${n === 1 ? '' : 's'}`];
  if (s.never.length) parts.push(`; ${s.never.length === 1 ? 'seed' : 'seeds'} ${s.never.join(', ')} never reached the level: counted as 0x`);
  else parts.push('; every seed reached the level');
  if (s.neither.length) parts.push(`; on ${s.neither.length === 1 ? 'seed' : 'seeds'} ${s.neither.join(', ')} neither did: left out`);
  return parts.join('') + ')';
}

/** A column of the per-seed table; with `cost` set, Infinity (a level never reached) prints as "never". */
export interface SeedColumn {
  name: string;
  values: ReadonlyArray<number | string>;
  cost?: boolean;
}

/** A per-seed figures table: one row per seed, one column per named series. */
export function perSeedTable(seeds: ReadonlyArray<number | string>, columns: readonly SeedColumn[]): string {
  columns.forEach((c) => {
    if (c.values.length !== seeds.length) throw new Error(`per-seed table: column '${c.name}' has ${c.values.length} values for ${seeds.length} seeds`);
  });
  const cell = (c: SeedColumn, v: number | string) => (c.cost && v === Number.POSITIVE_INFINITY ? 'never' : v);
  return markdownTable(['seed', ...columns.map((c) => c.name)], seeds.map((s, i) => [String(s), ...columns.map((c) => cell(c, c.values[i]!))]));
}
