// Feature statistics as LeRobot keeps them (compute_stats.py), per episode and for the whole dataset: per entry
// min, max, mean, std (population), count (frames) and the 1/10/50/90/99% quantiles; for a camera per colour
// channel over its pixels, scaled to [0, 1] and shaped [3][1][1]. LeRobot samples frames and estimates quantiles
// from histograms; these are exact over every frame (quantiles interpolate linearly between order statistics, as
// numpy's default does), which LeRobot's own estimates approach.
import { STAT_NAMES } from './format.js';

export type StatName = (typeof STAT_NAMES)[number];
export type FeatureStats = Record<StatName, number[] | number[][][]>;

const QUANTILES: Array<[StatName, number]> = [['q01', 0.01], ['q10', 0.1], ['q50', 0.5], ['q90', 0.9], ['q99', 0.99]];

/** The value at fraction q of n ordered values, `at(i)` giving the i-th smallest. */
function quantile(n: number, q: number, at: (i: number) => number): number {
  const pos = q * (n - 1), lo = Math.floor(pos), hi = Math.ceil(pos);
  const a = at(lo);
  return hi === lo ? a : a + (at(hi) - a) * (pos - lo);
}

/** A vector feature's values, frame by frame; entries that are not finite (a NaN reward) are left out of that entry's stats. */
export class VectorStats {
  private readonly cols: number[][];
  private frames = 0;
  constructor(readonly dim: number) {
    this.cols = Array.from({ length: dim }, () => []);
  }
  add(v: ArrayLike<number>): void {
    for (let i = 0; i < this.dim; i++) if (Number.isFinite(v[i]!)) this.cols[i]!.push(v[i]!);
    this.frames++;
  }
  get count(): number {
    return this.frames;
  }
  result(): FeatureStats {
    const per = this.cols.map((c) => {
      const s = Float64Array.from(c).sort();
      const n = s.length;
      if (n === 0) return { min: NaN, max: NaN, mean: NaN, std: NaN, q: QUANTILES.map(() => NaN) };
      let sum = 0;
      for (const x of s) sum += x;
      const mean = sum / n;
      let sq = 0;
      for (const x of s) sq += (x - mean) ** 2;
      return { min: s[0]!, max: s[n - 1]!, mean, std: Math.sqrt(sq / n), q: QUANTILES.map(([, q]) => quantile(n, q, (i) => s[i]!)) };
    });
    const out: Partial<FeatureStats> = {
      min: per.map((p) => p.min),
      max: per.map((p) => p.max),
      mean: per.map((p) => p.mean),
      std: per.map((p) => p.std),
      count: [this.frames],
    };
    QUANTILES.forEach(([name], k) => (out[name] = per.map((p) => p.q[k]!)));
    return out as FeatureStats;
  }
}

/** A camera's frames (rgb24): a histogram per channel, so stats are exact at any number of frames. */
export class ImageStats {
  private readonly hist = [new Float64Array(256), new Float64Array(256), new Float64Array(256)];
  private frames = 0;
  add(rgb: Uint8Array): void {
    const [r, g, b] = this.hist as [Float64Array, Float64Array, Float64Array];
    for (let i = 0; i + 2 < rgb.length; i += 3) {
      r[rgb[i]!]!++;
      g[rgb[i + 1]!]!++;
      b[rgb[i + 2]!]!++;
    }
    this.frames++;
  }
  get count(): number {
    return this.frames;
  }
  result(): FeatureStats {
    const per = this.hist.map((h) => {
      let n = 0, sum = 0;
      for (let v = 0; v < 256; v++) {
        n += h[v]!;
        sum += v * h[v]!;
      }
      const mean = sum / n;
      let sq = 0, min = -1, max = -1;
      for (let v = 0; v < 256; v++) {
        if (!h[v]) continue;
        sq += h[v]! * (v - mean) ** 2;
        if (min < 0) min = v;
        max = v;
      }
      // the i-th smallest pixel value: the first bin whose cumulative count passes i
      const at = (i: number) => {
        let c = 0;
        for (let v = 0; v < 256; v++) if ((c += h[v]!) > i) return v;
        return max;
      };
      return { min, max, mean, std: Math.sqrt(sq / n), q: QUANTILES.map(([, q]) => quantile(n, q, at)) };
    });
    const shaped = (f: (p: (typeof per)[number]) => number) => per.map((p) => [[f(p) / 255]]);
    const out: Partial<FeatureStats> = { min: shaped((p) => p.min), max: shaped((p) => p.max), mean: shaped((p) => p.mean), std: shaped((p) => p.std), count: [this.frames] };
    QUANTILES.forEach(([name], k) => (out[name] = shaped((p) => p.q[k]!)));
    return out as FeatureStats;
  }
}
