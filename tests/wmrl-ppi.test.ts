// Prediction-powered interval for the true mean: coverage with a biased predictor, narrower than
// anchors alone, and unbiased under uneven (active) inclusion probabilities.
import { describe, expect, it } from 'vitest';
import { classicalMeanInterval, normalQuantile, ppiMeanInterval } from '../wmrl/ppi.js';
import { Rng } from '../wmrl/rng.js';

describe('prediction-powered interval', () => {
  it('normalQuantile matches known values', () => {
    expect(normalQuantile(0.975)).toBeCloseTo(1.959964, 5);
    expect(normalQuantile(0.5)).toBeCloseTo(0, 9);
    expect(normalQuantile(0.001)).toBeCloseTo(-3.090232, 5);
  });

  it('covers the true mean ~95% of the time with a biased predictor and is narrower than anchors alone', () => {
    const rng = new Rng(2);
    let cover = 0;
    let narrower = 0;
    const trials = 400;
    for (let t = 0; t < trials; t++) {
      // Population: y = x + 0.1 noise; predictions f = x + 0.3 (biased by 0.3).
      const xs = Array.from({ length: 2000 }, () => rng.next());
      const ys = xs.map((x) => x + 0.1 * rng.normal());
      const trueMean = 0.5;
      const anchors = Array.from({ length: 40 }, () => rng.int(2000));
      const units = anchors.map((i) => ({ value: ys[i]! - (xs[i]! + 0.3), weight: 1 }));
      const ci = ppiMeanInterval(xs.map((x) => x + 0.3), units)!;
      const classical = classicalMeanInterval(anchors.map((i) => ({ value: ys[i]!, weight: 1 })))!;
      if (ci.lo <= trueMean && trueMean <= ci.hi) cover++;
      if (ci.halfWidth < classical.halfWidth) narrower++;
    }
    expect(cover / trials).toBeGreaterThan(0.91);
    expect(cover / trials).toBeLessThan(0.99);
    expect(narrower).toBe(trials);
  });

  it('stays unbiased when anchors are drawn unevenly, thanks to the inclusion weights', () => {
    const rng = new Rng(3);
    let sumWeighted = 0;
    let sumNaive = 0;
    const trials = 300;
    for (let t = 0; t < trials; t++) {
      // Groups with residual 1 are drawn with probability 0.5, the others with 0.05.
      const units: Array<{ value: number; weight: number }> = [];
      const naive: Array<{ value: number; weight: number }> = [];
      for (let g = 0; g < 400; g++) {
        const bad = g % 4 === 0;
        const p = bad ? 0.5 : 0.05;
        if (rng.next() < p) { units.push({ value: bad ? 1 : 0, weight: 1 / p }); naive.push({ value: bad ? 1 : 0, weight: 1 }); }
      }
      sumWeighted += ppiMeanInterval([0], units)!.mean;
      sumNaive += ppiMeanInterval([0], naive)!.mean;
    }
    expect(sumWeighted / trials).toBeCloseTo(0.25, 1); // true mean residual: a quarter of groups
    expect(sumNaive / trials).toBeGreaterThan(0.6);
  });
});
