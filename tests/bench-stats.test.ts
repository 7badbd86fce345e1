// The protocol's statistics (bench/lib/stats.ts): paired bootstrap intervals over seeds × shared episodes that repeat
// from their seed, cover the true difference about as often as they claim, and call "beats" only when they exclude 0;
// speedups per seed where a seed that never reaches the level stays visible.
import { describe, expect, it } from 'vitest';
import { Rng } from '../nn/rng.js';
import { formatInterval, formatSpeedup, hierarchicalBootstrap, pairedDifference, perSeedTable, speedups, verdict } from '../bench/lib/stats.js';

/** seeds × episodes of figures: a per-seed offset (seed-to-seed spread) plus per-episode noise, plus `shift`. */
function figures(rng: Rng, seeds: number, episodes: number, shift: number, seedSd = 0.1, episodeSd = 0.05, seedOffsets?: number[]): number[][] {
  const offsets = seedOffsets ?? Array.from({ length: seeds }, () => seedSd * rng.normal());
  return offsets.map((o) => Array.from({ length: episodes }, () => 0.5 + shift + o + episodeSd * rng.normal()));
}

describe('paired bootstrap', () => {
  it('repeats exactly from its seed and brackets its estimate', () => {
    const rng = new Rng(1);
    const a = figures(rng, 6, 5, 0.05), b = figures(rng, 6, 5, 0);
    const x = pairedDifference(a, b, { seed: 3, resamples: 2000 });
    expect(pairedDifference(a, b, { seed: 3, resamples: 2000 })).toEqual(x);
    expect(pairedDifference(a, b, { seed: 4, resamples: 2000 })).not.toEqual(x);
    expect(x.lo).toBeLessThanOrEqual(x.estimate);
    expect(x.hi).toBeGreaterThanOrEqual(x.estimate);
    expect(x.level).toBe(0.95);
  });

  it('pairs: a shift shared seed by seed is found though the seed-to-seed spread is larger than it', () => {
    const rng = new Rng(2);
    const offsets = Array.from({ length: 6 }, () => 0.3 * rng.normal());
    const b = figures(rng, 6, 5, 0, 0, 0.01, offsets);
    const a = figures(rng, 6, 5, 0.03, 0, 0.01, offsets);
    const d = pairedDifference(a, b, { resamples: 2000 });
    expect(verdict(d)).toBe('beats');
    expect(verdict(pairedDifference(b, a, { resamples: 2000 }))).toBe('worse');
    // Unpaired, each arm's interval is wider than the shift: the two intervals overlap.
    const ia = hierarchicalBootstrap(a, { resamples: 2000 }), ib = hierarchicalBootstrap(b, { resamples: 2000 });
    expect(ia.lo).toBeLessThan(ib.hi);
  });

  it('shows no difference between identical arms, and covers the true difference about 95% of the time', () => {
    const same = figures(new Rng(3), 5, 4, 0);
    const zero = pairedDifference(same, same, { resamples: 500 });
    expect([zero.estimate, zero.lo, zero.hi]).toEqual([0, 0, 0]);
    expect(verdict(zero)).toBe('no difference shown');
    const rng = new Rng(4);
    let covered = 0;
    const trials = 200;
    for (let t = 0; t < trials; t++) {
      const offsets = Array.from({ length: 8 }, () => 0.1 * rng.normal());
      const b = figures(rng, 8, 5, 0, 0, 0.05, offsets);
      // The true difference is 0.02 per seed plus seed-level noise of mean 0.
      const a = figures(rng, 8, 5, 0.02, 0, 0.05, offsets.map((o) => o + 0.03 * rng.normal()));
      const d = pairedDifference(a, b, { resamples: 1000, seed: t });
      if (d.lo <= 0.02 && 0.02 <= d.hi) covered++;
    }
    // Percentile bootstrap with 8 seeds under-covers a little; far below 95% would be a broken resampler.
    expect(covered / trials).toBeGreaterThan(0.85);
    expect(covered / trials).toBeLessThanOrEqual(0.99);
  });

  it('refuses pairs of different shapes and figures that are not finite, naming them', () => {
    expect(() => pairedDifference([[1, 2]], [[1, 2], [3, 4]])).toThrow(/a has 1 seeds, b 2/);
    expect(() => pairedDifference([[1, 2]], [[1]])).toThrow(/seed row 0 has 2 episodes in a, 1 in b/);
    expect(() => pairedDifference([[1, Number.NaN]], [[1, 2]])).toThrow(/a: seed row 0, episode 1 is NaN/);
    expect(() => hierarchicalBootstrap([])).toThrow(/no seeds/);
    expect(() => hierarchicalBootstrap([[1]], { resamples: 10 })).toThrow(/resamples 10 must be an integer >= 100/);
  });

  it('formats an interval signed, as the reports print it', () => {
    expect(formatInterval({ estimate: 0.012, lo: -0.004, hi: 0.031, level: 0.95 })).toBe('+0.012 [-0.004, +0.031]');
    expect(formatInterval({ estimate: 0.52, lo: 0.49, hi: 0.55, level: 0.95 }, false)).toBe('0.52 [0.49, 0.55]');
  });
});

describe('speedups', () => {
  it('gives a ratio per seed, counts a seed the variant never reached as 0 and names it', () => {
    const s = speedups([0, 1, 2], [10, 30, 20], [2, Number.POSITIVE_INFINITY, 1]);
    expect(s.perSeed.map((x) => [x.speedup, x.status])).toEqual([[5, 'reached'], [0, 'variant never reached'], [20, 'reached']]);
    expect(s.median.estimate).toBe(5);
    expect(s.never).toEqual([1]);
    expect(s.median.lo).toBeGreaterThanOrEqual(0);
    expect(s.median.hi).toBeLessThanOrEqual(20);
    const text = formatSpeedup(s);
    expect(text).toContain('median of 3 seeds');
    expect(text).toContain('seed 1 never reached the level: counted as 0x');
  });

  it('leaves out, and names, a seed neither reached; Infinity where only the reference never did', () => {
    const s = speedups(['a', 'b', 'c'], [Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY, 4], [Number.POSITIVE_INFINITY, 3, 2]);
    expect(s.perSeed.map((x) => x.status)).toEqual(['neither reached', 'reference never reached', 'reached']);
    expect(s.perSeed[1]!.speedup).toBe(Number.POSITIVE_INFINITY);
    expect(s.neither).toEqual(['a']);
    expect(s.median.estimate).toBe(Number.POSITIVE_INFINITY); // median of {2, Infinity}
    expect(formatSpeedup(s)).toContain('on seed a neither did: left out');
    expect(() => speedups([0], [1], [1, 2])).toThrow(/1 seeds, 1 reference costs and 2 variant costs/);
    expect(() => speedups([0], [-1], [1])).toThrow(/seed 0: the reference's cost -1 must be >= 0/);
  });

  it('repeats exactly from its seed', () => {
    const ref = [10, 12, 30, 8, 15], v = [3, 4, 5, Number.POSITIVE_INFINITY, 2];
    expect(speedups([1, 2, 3, 4, 5], ref, v, { seed: 7 })).toEqual(speedups([1, 2, 3, 4, 5], ref, v, { seed: 7 }));
  });
});

describe('per-seed table', () => {
  it('prints one row a seed, "never" for a cost never reached, and refuses a short column', () => {
    const t = perSeedTable([1000, 1001], [{ name: 'slot s', values: [3.5, Number.POSITIVE_INFINITY], cost: true }, { name: 'speedup', values: [Number.POSITIVE_INFINITY, 2] }]);
    const lines = t.split('\n');
    expect(lines[0]).toMatch(/^\| seed +\| slot s +\| speedup +\|$/);
    expect(lines[2]).toMatch(/^\| 1000 +\| 3\.5 +\| Infinity +\|$/);
    expect(lines[3]).toMatch(/^\| 1001 +\| never +\| 2 +\|$/);
    expect(() => perSeedTable([1], [{ name: 'x', values: [] }])).toThrow(/column 'x' has 0 values for 1 seeds/);
  });
});
