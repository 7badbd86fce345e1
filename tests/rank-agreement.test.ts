// The imagined gate's rank agreement (wmrl/train_wmrl.ts rankAgreement): Spearman's correlation with tied values
// given their mean rank, NaN where a side has no ranking.
import { describe, expect, it } from 'vitest';
import { rankAgreement } from '../wmrl/train_wmrl.js';

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
