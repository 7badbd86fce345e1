// Online Debiaser: PAV against a brute-force isotonic solver, monotone maps, identity before
// min_pairs, refit cadence, FIFO cap, and undoing a monotone non-linear distortion.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { binnedIsotonic, evalKnots, OnlineDebiaser, pav, robustRange, type Pair } from '../wmrl/debias.js';
import { Rng } from '../wmrl/rng.js';

/** Brute force: the isotonic solution is f_i = max_{j ≤ i} min_{k ≥ i} wmean(y_j..y_k). */
function bruteIsotonic(y: number[], w: number[]): number[] {
  const n = y.length;
  const wmean = (j: number, k: number) => {
    let s = 0, ws = 0;
    for (let t = j; t <= k; t++) { s += y[t]! * w[t]!; ws += w[t]!; }
    return s / ws;
  };
  return y.map((_, i) => {
    let best = Number.NEGATIVE_INFINITY;
    for (let j = 0; j <= i; j++) {
      let m = Number.POSITIVE_INFINITY;
      for (let k = i; k < n; k++) m = Math.min(m, wmean(j, k));
      best = Math.max(best, m);
    }
    return best;
  });
}

const finite = fc.double({ min: -100, max: 100, noNaN: true, noDefaultInfinity: true });

describe('isotonic regression', () => {
  it('PAV equals the brute-force isotonic solver on random weighted data', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(finite, fc.double({ min: 0.1, max: 10, noNaN: true })), { minLength: 1, maxLength: 25 }),
        (pts) => {
          const y = pts.map((p) => p[0]);
          const w = pts.map((p) => p[1]);
          const got = pav(y, w);
          const want = bruteIsotonic(y, w);
          expect(got.length).toBe(y.length);
          got.forEach((g, i) => expect(g).toBeCloseTo(want[i]!, 6));
        },
      ),
      { seed: 4242, numRuns: 300 },
    );
  });

  it('PAV output is non-decreasing', () => {
    fc.assert(
      fc.property(fc.array(finite, { minLength: 1, maxLength: 60 }), (y) => {
        const f = pav(y);
        for (let i = 1; i < f.length; i++) expect(f[i]!).toBeGreaterThanOrEqual(f[i - 1]! - 1e-9);
      }),
      { seed: 7, numRuns: 200 },
    );
  });

  it('the binned map is monotone over the whole real line, for any data', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(finite, finite), { minLength: 1, maxLength: 200 }),
        fc.integer({ min: 1, max: 30 }),
        fc.array(fc.double({ min: -200, max: 200, noNaN: true }), { minLength: 2, maxLength: 50 }),
        (pts, bins, probes) => {
          const { knotsX, knotsY } = binnedIsotonic(pts.map((p) => p[0]), pts.map((p) => p[1]), bins);
          const xs = [...probes].sort((a, b) => a - b);
          for (let i = 1; i < xs.length; i++) {
            expect(evalKnots(knotsX, knotsY, xs[i]!)).toBeGreaterThanOrEqual(evalKnots(knotsX, knotsY, xs[i - 1]!) - 1e-9);
          }
        },
      ),
      { seed: 11, numRuns: 200 },
    );
  });
});

/** Anchor groups of 8 with real score r ~ U(0,1) and world-model score g(r) + noise. */
function groups(rng: Rng, count: number, g: (r: number) => number, noise: number, firstId = 0): Pair[][] {
  return Array.from({ length: count }, (_, k) =>
    Array.from({ length: 8 }, () => {
      const r = rng.next();
      return { wm: g(r) + noise * rng.normal(), real: r, group: firstId + k };
    }),
  );
}

describe('OnlineDebiaser', () => {
  const cfg = { minPairs: 200, refitEvery: 64, bufferCap: 5000, bins: 20, diagnosticHalfLife: 64 };

  it('is the identity until min_pairs, then fits', () => {
    const d = new OnlineDebiaser(cfg);
    const rng = new Rng(1);
    const gs = groups(rng, 25, (r) => r ** 3, 0); // 200 pairs
    for (const grp of gs.slice(0, 24)) expect(d.addGroup(grp)).toBe(false);
    expect(d.pairCount).toBe(192);
    expect(d.calibrated).toBe(false);
    for (const x of [-3, 0, 0.2, 0.7, 5]) expect(d.apply(x)).toBe(x);
    expect(d.addGroup(gs[24]!)).toBe(true);
    expect(d.calibrated).toBe(true);
    expect(Math.abs(d.apply(0.125) - 0.5)).toBeLessThan(0.05);
  });

  it('refits every refit_every new pairs and keeps a FIFO buffer of bufferCap pairs', () => {
    const d = new OnlineDebiaser({ ...cfg, minPairs: 16, refitEvery: 24, bufferCap: 40 });
    const rng = new Rng(2);
    const fits: boolean[] = groups(rng, 12, (r) => r, 0).map((grp) => d.addGroup(grp));
    // Fits at 16 pairs (group 2), then every 24 more pairs (3 groups): groups 5, 8, 11.
    expect(fits.map((f, i) => (f ? i : -1)).filter((i) => i >= 0)).toEqual([1, 4, 7, 10]);
    expect(d.pairCount).toBe(40);
    expect(d.state().buffer[0]!.group).toBe(7); // the oldest groups were dropped first
  });

  it('undoes a monotone non-linear distortion, with scores outside [0, 1]', () => {
    const d = new OnlineDebiaser({ ...cfg, minPairs: 800 });
    const rng = new Rng(3);
    const distort = (r: number) => 10 + 5 * r ** 3;
    for (const grp of groups(rng, 100, distort, 0)) d.addGroup(grp);
    expect(d.calibrated).toBe(true);
    // Equal-width bins are coarse where r³ is flat (small r), so the mean error is the fair measure.
    let err = 0;
    for (let i = 0; i <= 100; i++) err += Math.abs(d.apply(distort(i / 100)) - i / 100) / 101;
    expect(err).toBeLessThan(0.05);
    const identityErr = Array.from({ length: 101 }, (_, i) => Math.abs(distort(i / 100) - i / 100)).reduce((s, e) => s + e) / 101;
    expect(identityErr).toBeGreaterThan(1);
    const diag = d.diagnostic();
    expect(diag.before).toBeGreaterThan(0.01);
    expect(diag.reduction).toBeGreaterThan(0.9);
    // Held out: later groups scored by a map fitted before they arrived.
    for (const grp of groups(rng, 20, distort, 0, 1000)) d.addGroup(grp);
    expect(d.heldOutDiagnostic()!.reduction).toBeGreaterThan(0.9);
  });

  it('tracks a drifting distortion through refits from the FIFO buffer', () => {
    const d = new OnlineDebiaser({ ...cfg, bufferCap: 400 });
    const rng = new Rng(4);
    for (const grp of groups(rng, 60, (r) => r ** 3, 0.01)) d.addGroup(grp);
    const before = d.apply(0.5 ** 0.5);
    for (const grp of groups(rng, 60, (r) => r ** 0.5, 0.01, 100)) d.addGroup(grp);
    // Under the new distortion wm = sqrt(r), wm 0.707 means r = 0.5.
    expect(Math.abs(before - 0.5)).toBeGreaterThan(0.2);
    expect(Math.abs(d.apply(0.5 ** 0.5) - 0.5)).toBeLessThan(0.06);
  });

  it('one far outlier does not take the bins: in-sample error stays near the fit without it', () => {
    // 299 world-model scores in [0, 1] with real = wm² + noise, plus one score at 10. Bins spanning
    // [min, max] would put the 299 into 2 of 20 bins (error ≈ 0.09, ten times the outlier-free fit).
    const rng = new Rng(1);
    const truth = (x: number) => x * x;
    const x = Array.from({ length: 299 }, () => rng.next());
    const y = x.map((v) => truth(v) + 0.05 * rng.normal());
    const fit = (pairs: Array<{ wm: number; real: number }>) => {
      const d = new OnlineDebiaser({ ...cfg, minPairs: pairs.length, bufferCap: pairs.length });
      for (let i = 0; i < pairs.length; i += 10) d.addGroup(pairs.slice(i, i + 10).map((p) => ({ ...p, group: i })));
      expect(d.calibrated).toBe(true);
      return x.reduce((s, v) => s + Math.abs(d.apply(v) - truth(v)), 0) / x.length;
    };
    const pairs = x.map((v, i) => ({ wm: v, real: y[i]! }));
    const clean = fit(pairs);
    const withOutlier = fit([...pairs.slice(0, 150), { wm: 10, real: 0.5 }, ...pairs.slice(150)]);
    expect(clean).toBeLessThan(0.012); // the fixed-bin level, ≈ 0.0095
    expect(withOutlier).toBeLessThan(1.3 * clean);
    // The outlier itself maps into the range of the real scores (flat beyond the last knot).
    const { lo, hi } = robustRange([...x, 10]);
    expect(lo).toBe(Math.min(...x));
    expect(hi).toBe(Math.max(...x));
  });

  it('keeps the identity while every buffered world-model score is equal, and the last good fit when the buffer collapses', () => {
    const d = new OnlineDebiaser({ ...cfg, bufferCap: 200 });
    const rng = new Rng(6);
    const flat = (n: number, id: number) => Array.from({ length: n }, (_, k) =>
      Array.from({ length: 8 }, () => ({ wm: 0.5, real: rng.next(), group: id + k })));
    for (const grp of flat(30, 0)) expect(d.addGroup(grp)).toBe(false);
    expect(d.pairCount).toBe(200);
    expect(d.calibrated).toBe(false);
    for (const v of [-1, 0.2, 0.5, 0.9, 3]) expect(d.apply(v)).toBe(v);
    // Once the buffer spreads, the map is fitted (retried on the next group, not after refitEvery more).
    for (const grp of groups(rng, 25, (r) => r ** 2, 0, 100)) d.addGroup(grp);
    expect(d.calibrated).toBe(true);
    expect(d.apply(0.8) - d.apply(0.1)).toBeGreaterThan(0.3);
    // A FIFO that fills with equal scores again keeps the last map fitted on spread scores, not a constant.
    for (const grp of flat(30, 200)) d.addGroup(grp);
    expect(d.state().buffer.every((p) => p.wm === 0.5)).toBe(true);
    expect(d.state().knotsX.length).toBeGreaterThan(1);
    expect(d.apply(0.8) - d.apply(0.1)).toBeGreaterThan(0.1);
  });

  it('keeps the identity while every anchor\'s real score is the same (a sparse success none has reached), then fits', () => {
    const d = new OnlineDebiaser(cfg);
    const rng = new Rng(9);
    // World-model scores spread, the robot's success 0 on every anchor: a fitted map would be the constant 0.
    for (let g = 0; g < 40; g++) expect(d.addGroup(Array.from({ length: 8 }, () => ({ wm: rng.next(), real: 0, group: g })))).toBe(false);
    expect(d.calibrated).toBe(false);
    for (const v of [-1, 0.2, 0.9]) expect(d.apply(v)).toBe(v);
    // The first successes (where the world model scores high) give the map a slope.
    d.addGroup(Array.from({ length: 8 }, (_, k) => ({ wm: k / 7, real: k >= 6 ? 1 : 0, group: 40 })));
    expect(d.calibrated).toBe(true);
    expect(d.apply(1) - d.apply(0)).toBeGreaterThan(0);
  });
});
