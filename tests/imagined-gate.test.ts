// The imagined gate's parts (wmrl/train_wmrl.ts): its rank agreement (Spearman's correlation with tied values given
// their mean rank, NaN where a side has no ranking) and the share of the imagined groups it keeps.
import { describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { keptShare, rankAgreement } from '../wmrl/train_wmrl.js';

describe('rankAgreement', () => {
  it('is 1 for the same order, -1 for the reverse, whatever the scale', () => {
    expect(rankAgreement([1, 2, 3, 4], [10, 200, 3000, 40000])).toBeCloseTo(1, 12);
    expect(rankAgreement([1, 2, 3, 4], [4, 3, 2, 1])).toBeCloseTo(-1, 12);
  });
  it('gives tied values their mean rank, whatever their order in the input', () => {
    // ranks (0, 1, 2, 3) against (0.5, 0.5, 2.5, 2.5): covariance 4, variances 5 and 4
    expect(rankAgreement([1, 2, 3, 4], [0, 0, 1, 1])).toBeCloseTo(4 / Math.sqrt(20), 12);
    expect(rankAgreement([4, 1, 3, 2], [1, 0, 1, 0])).toBeCloseTo(4 / Math.sqrt(20), 12);
    // a success that no imagined order separates from a failure: half the ties agree, half do not
    expect(rankAgreement([1, 1, 2, 2], [0, 1, 0, 1])).toBeCloseTo(0, 12);
  });
  it('is NaN where a side holds one value, or the lengths differ', () => {
    expect(rankAgreement([1, 2, 3], [0, 0, 0])).toBeNaN();
    expect(rankAgreement([5, 5], [1, 2])).toBeNaN();
    expect(rankAgreement([1, 2, 3], [1, 2])).toBeNaN();
    expect(rankAgreement([1], [1])).toBeNaN();
  });
});

describe('keptShare (the imagined gate\'s share of the imagined groups)', () => {
  const items = Array.from({ length: 16 }, (_, i) => i);
  it('keeps none at 0, all at 1, the first share x n where that is whole', () => {
    const rng = new Rng(0);
    expect(keptShare(items, 0, rng)).toEqual([]);
    expect(keptShare(items, 1, rng)).toEqual(items);
    expect(keptShare(items, 0.5, rng)).toEqual(items.slice(0, 8));
    expect(keptShare(items, 0.25, rng)).toEqual(items.slice(0, 4));
  });
  it('rounds a fraction up with its probability: share x n kept on average', () => {
    const rng = new Rng(1);
    const counts = Array.from({ length: 4000 }, () => keptShare(items, 0.07, rng).length); // 1.12 groups
    expect(new Set(counts)).toEqual(new Set([1, 2]));
    expect(counts.reduce((a, x) => a + x, 0) / counts.length).toBeCloseTo(0.07 * 16, 1);
  });
  it('refuses a share outside [0, 1] by name', () => {
    expect(() => keptShare(items, 1.5, new Rng(0))).toThrow(/keptShare: the share must be in \[0, 1\], got 1.5/);
    expect(() => keptShare(items, Number.NaN, new Rng(0))).toThrow(/got NaN/);
  });
});
