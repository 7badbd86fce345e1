// Inverse-Variance Weighter and per-rollout ensemble weights.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ensembleWeights, InverseVarianceWeighter, normalizedDisagreement } from '../wmrl/denoise.js';
import { Rng } from '../wmrl/rng.js';

const cfg = { halfLife: 64, warmupGroups: 20, targetWeight: 2, maxWeight: 4 };

describe('InverseVarianceWeighter', () => {
  it('weighs exactly 1 until c is fixed, hits the target then, and skips degenerate groups', () => {
    const w = new InverseVarianceWeighter(cfg);
    const rng = new Rng(1);
    expect(w.weight()).toBe(1);
    expect(w.update([0.1, 0.5, 0.9], [0.3, 0.3, 0.3])).toBeNull();
    expect(w.update([0.1, null, 0.9], [0.3, 0.4, null])).toBeNull();
    expect(w.measuredGroups).toBe(0);
    expect(w.s2).toBeNull();
    for (let g = 0; g < 19; g++) {
      const real = Array.from({ length: 8 }, () => rng.next());
      w.update(real.map((r) => r + 0.2 * rng.normal()), real);
      expect(w.weight()).toBe(1);
    }
    const real = Array.from({ length: 8 }, () => rng.next());
    w.update(real.map((r) => r + 0.2 * rng.normal()), real);
    expect(w.scale).not.toBeNull();
    expect(w.weight()).toBeCloseTo(2, 12);
  });

  it('stays within [1, w_max] for any stream of groups after calibration', () => {
    fc.assert(
      fc.property(fc.array(fc.double({ min: 0, max: 3, noNaN: true }), { minLength: 30, maxLength: 200 }), fc.integer(), (noise, seed) => {
        const w = new InverseVarianceWeighter(cfg);
        const rng = new Rng(seed);
        for (const s of noise) {
          const real = Array.from({ length: 6 }, () => rng.next());
          w.update(real.map((r) => r + s * rng.normal()), real);
          expect(w.weight()).toBeGreaterThanOrEqual(1);
          expect(w.weight()).toBeLessThanOrEqual(4);
        }
      }),
      { seed: 3, numRuns: 100 },
    );
  });

  it('measures disagreement as residual variance over real variance, ignoring offsets', () => {
    expect(normalizedDisagreement([1.1, 2.1, 3.1], [1, 2, 3])).toBeCloseTo(0, 12);
    expect(normalizedDisagreement([0, 0, 0, 0], [0, 1, 0, 1])).toBeCloseTo(1, 12);
  });
});

describe('ensembleWeights', () => {
  it('weighs rollouts by inverse variance, mean 1 over scored rollouts, unscored get 1', () => {
    const w = ensembleWeights([0.1, 0.2, 0.4, null, 0.3], [true, true, true, true, false], 0);
    expect((w[0]! + w[1]! + w[2]!) / 3).toBeCloseTo(1, 12);
    expect(w[0]! / w[1]!).toBeCloseTo(2, 12);
    expect(w[1]! / w[2]!).toBeCloseTo(2, 12);
    expect(w[3]).toBe(1);
    expect(w[4]).toBe(1);
  });
});
