// Group advantages: affine invariance, exclusion of unscored rollouts, skipped groups, and a
// monotone non-linear distortion that changes advantages until the debias map undoes it.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_ADVANTAGE_CONFIG, groupAdvantages, groupAdvantage, pooledStd } from '../wmrl/advantages.js';
import { OnlineDebiaser } from '../wmrl/debias.js';
import { Rng } from '../wmrl/rng.js';

describe('group advantages', () => {
  it('a positive affine distortion of the scores leaves standardized advantages unchanged', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { minLength: 2, maxLength: 16 }),
        fc.double({ min: 0.05, max: 20, noNaN: true }),
        fc.double({ min: -50, max: 50, noNaN: true }),
        (scores, a, b) => {
          fc.pre(Math.max(...scores) - Math.min(...scores) > 0.05);
          const exact = { centreOnly: false, eps: 0 }; // eps would add a tiny scale dependence
          const x = groupAdvantage(scores, exact)!;
          const y = groupAdvantage(scores.map((s) => a * s + b), exact)!;
          x.forEach((v, i) => expect(y[i]!).toBeCloseTo(v!, 5));
        },
      ),
      { seed: 5, numRuns: 300 },
    );
  });

  it('centre-only keeps the scale and removes the offset', () => {
    expect(groupAdvantage([1, 2, 3, 6], { centreOnly: true, eps: 0 })).toEqual([-2, -1, 0, 3]);
    const std = groupAdvantage([1, 2, 3, 6])!;
    // A lone group's floor defaults to eps times its own std.
    expect(std[3]).toBeCloseTo(3 / (Math.sqrt(3.5) * (1 + DEFAULT_ADVANTAGE_CONFIG.eps)), 9);
  });

  it('excludes unscored rollouts instead of scoring them 0, and skips groups with < 2 scored', () => {
    const r = groupAdvantages([[1, null, 3], [null, 5, null], [null, null], [2, 2, 2]], { centreOnly: false, eps: 0 });
    expect(r.advantages[0]![1]).toBeNull();
    expect(r.advantages[0]![0]).toBeCloseTo(-1, 6);
    expect(r.advantages[0]![2]).toBeCloseTo(1, 6);
    // Scoring the null as 0 would have given a different first advantage.
    expect(groupAdvantage([1, 0, 3])![0]).not.toBeCloseTo(-1, 3);
    expect(r.advantages[1]).toEqual([null, null, null]);
    expect(r.advantages[2]).toEqual([null, null]);
    expect(r.advantages[3]).toEqual([0, 0, 0]); // degenerate but scored: no preference
    expect(r.scoredGroups).toBe(2);
    expect(r.skippedGroups).toBe(2);
    expect(r.excludedRollouts).toBe(5);
  });

  it('a near-tie is not amplified: the std floor is relative to the score scale, and scale-invariant', () => {
    // A group whose scores a flat stretch of the map left 1e-6 apart, beside groups of ordinary spread.
    const tied = [0.7, 0.7 + 1e-6, 0.7, 0.7 + 1e-6, 0.7 + 1e-6, 0.7, 0.7, 0.7 + 1e-6];
    const groups = [tied, [0.1, 0.5, 0.3, 0.9, 0.2, 0.6, 0.8, 0.4], [0.2, 0.4, 0.35, 0.1, 0.7, 0.5, 0.3, 0.6]];
    const r = groupAdvantages(groups);
    const scale = pooledStd(groups);
    expect(scale).toBeGreaterThan(0.1);
    for (const a of r.advantages[0]!) expect(Math.abs(a!)).toBeLessThan(0.01);
    // Ordinary groups keep full-size advantages (the floor shrinks them by < 1%).
    const exact = groupAdvantage(groups[1]!, { centreOnly: false, eps: 0 })!;
    r.advantages[1]!.forEach((a, i) => expect(a! / exact[i]!).toBeGreaterThan(0.99));
    // One group with the scale passed in, as the corrector passes the real scores' scale.
    for (const a of groupAdvantage(tied, DEFAULT_ADVANTAGE_CONFIG, 0.3)!) expect(Math.abs(a!)).toBeLessThan(0.01);
    // The floor moves with the scores: a positive affine change leaves every advantage unchanged.
    const moved = groupAdvantages(groups.map((g) => g.map((x) => 250 * x - 40)));
    r.advantages.forEach((g, gi) => g.forEach((a, i) => expect(moved.advantages[gi]![i]!).toBeCloseTo(a!, 9)));
  });

  it('a monotone non-linear distortion changes advantages and the debias map undoes it', () => {
    const rng = new Rng(9);
    const distort = (r: number) => 3 + 2 * Math.exp(4 * r);
    const d = new OnlineDebiaser({ minPairs: 2000, refitEvery: 64, bufferCap: 5000, bins: 40, diagnosticHalfLife: 64 });
    for (let g = 0; g < 250; g++) {
      d.addGroup(Array.from({ length: 8 }, () => { const r = rng.next(); return { wm: distort(r), real: r, group: g }; }));
    }
    let rawErr = 0;
    let mapErr = 0;
    for (let t = 0; t < 200; t++) {
      const real = Array.from({ length: 8 }, () => rng.next());
      const truth = groupAdvantage(real)!;
      const raw = groupAdvantage(real.map(distort))!;
      const mapped = groupAdvantage(real.map((r) => d.apply(distort(r))))!;
      truth.forEach((a, i) => { rawErr += (raw[i]! - a!) ** 2; mapErr += (mapped[i]! - a!) ** 2; });
    }
    expect(rawErr / 1600).toBeGreaterThan(0.05);
    expect(mapErr).toBeLessThan(rawErr / 5);
  });
});
