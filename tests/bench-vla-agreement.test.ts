// bench vla's rank agreement over the rollouts' first steps (firstStepsAgreement): the within-group Spearman between
// the sums of the first K imagined and robot per-step rewards, median over groups, for each K of AGREEMENT_STEPS
// shorter than the horizon. Checks: an imagination that matches the robot over the first 50 steps and inverts it
// after agrees at 1 up to K = 50 and at -1 over the whole rollout; groups whose robot sums tie are skipped; an
// imagination that ties throughout agrees at 0, one with ties in part at the tie-averaged Spearman (wmrl's
// rankAgreement, the gate's own); per-step arrays of the wrong size are refused.
import { describe, expect, it } from 'vitest';
import { AGREEMENT_STEPS, firstStepsAgreement } from '../bench/cells/vla-measure.js';

const G = 4, H = 120, seeds = [1, 2, 3];
const n = seeds.length * G;

/** Per-step rewards: rollout k of each group earns `early(k)` a step for its first 50 steps and `late(k)` after. */
function steps(early: (k: number) => number, late: (k: number) => number): Float32Array {
  const x = new Float32Array(n * H);
  for (let i = 0; i < n; i++) for (let t = 0; t < H; t++) x[i * H + t] = t < 50 ? early(i % G) : late(i % G);
  return x;
}
const sums = (x: Float32Array) => Array.from({ length: n }, (_, i) => x.subarray(i * H, (i + 1) * H).reduce((a, b) => a + b, 0));

describe('bench vla: rank agreement over the first steps', () => {
  it('ranks the first K steps apart from the whole rollout', () => {
    // Robot: rollout k earns k early and 3k late (more for higher k throughout); imagination: k early, -3k late.
    const realSteps = steps((k) => k, (k) => 3 * k);
    const imagined = steps((k) => k, (k) => -3 * k);
    const g = { seeds, G, H, realSteps, real: sums(realSteps) };
    expect(AGREEMENT_STEPS.filter((K) => K < H)).toEqual([25, 50, 100]);
    const [k25, k50, k100] = firstStepsAgreement(g, imagined);
    expect(k25).toBeCloseTo(1, 12);
    expect(k50).toBeCloseTo(1, 12);
    // By step 100, 50 late steps of -3k outweigh 50 early steps of k: the order is inverted.
    expect(k100).toBeCloseTo(-1, 12);
  });

  it('skips groups whose robot sums tie, and is NaN where every group ties', () => {
    const realSteps = steps(() => 1, (k) => k);
    const imagined = steps((k) => k, (k) => k);
    // Over the first 25 and 50 steps every robot rollout earned the same: no group to rank.
    const [k25, k50, k100] = firstStepsAgreement({ seeds, G, H, realSteps, real: sums(realSteps) }, imagined);
    expect(Number.isNaN(k25!)).toBe(true);
    expect(Number.isNaN(k50!)).toBe(true);
    expect(k100).toBeCloseTo(1, 12);
  });

  it('scores an imagination that ties at 0 and averages the ranks of ties', () => {
    const realSteps = steps((k) => k, (k) => k);
    const g = { seeds, G, H, realSteps, real: sums(realSteps) };
    // Every imagined rollout of a group earns the same: it ranks nothing.
    expect(firstStepsAgreement(g, steps(() => 1, () => 1))).toEqual([0, 0, 0]);
    // Imagined ranks 0.5, 0.5, 2.5, 2.5 against 0..3: covariance 4, variances 4 and 5.
    const [k25] = firstStepsAgreement(g, steps((k) => (k < 2 ? 0 : 1), (k) => (k < 2 ? 0 : 1)));
    expect(k25).toBeCloseTo(4 / Math.sqrt(20), 12);
  });

  it('refuses per-step rewards of the wrong size', () => {
    const realSteps = steps((k) => k, (k) => k);
    expect(() => firstStepsAgreement({ seeds, G, H, realSteps, real: sums(realSteps) }, new Float32Array(n * H - 1))).toThrow(/imagined and .* robot per-step rewards for 12 rollouts of 120 steps/);
  });
});
