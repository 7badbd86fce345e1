// Anchor scheduler: realized fraction, floor, in-flight cap, reproducibility, exact inclusion
// probabilities, and active selection favouring uncertain groups.
import { describe, expect, it } from 'vitest';
import { AnchorScheduler, DEFAULT_ANCHOR_CONFIG, inclusionProbabilities } from '../wmrl/anchors.js';
import { Rng } from '../wmrl/rng.js';

describe('AnchorScheduler', () => {
  it('realizes the configured fraction, respects the floor and the in-flight cap', () => {
    const s = new AnchorScheduler(DEFAULT_ANCHOR_CONFIG, 1);
    let total = 0;
    for (let t = 0; t < 2000; t++) total += s.choose(32, 0).groups.length;
    expect(total / (2000 * 32)).toBeCloseTo(0.1, 2);
    expect(s.realizedFraction).toBeCloseTo(0.1, 2);
    // 4 groups × 0.1 would round to 0 or 1; the floor makes it at least 1 every step.
    const f = new AnchorScheduler(DEFAULT_ANCHOR_CONFIG, 2);
    for (let t = 0; t < 50; t++) expect(f.choose(4, 0).groups.length).toBeGreaterThanOrEqual(1);
    const c = new AnchorScheduler({ ...DEFAULT_ANCHOR_CONFIG, fraction: 0.5, maxInFlight: 3 }, 3);
    expect(c.choose(20, 1).groups.length).toBe(2);
    expect(c.choose(20, 3).groups.length).toBe(0);
  });

  it('is reproducible from its seed and from saved state', () => {
    const a = new AnchorScheduler(DEFAULT_ANCHOR_CONFIG, 7);
    const b = new AnchorScheduler(DEFAULT_ANCHOR_CONFIG, 7);
    for (let t = 0; t < 5; t++) expect(a.choose(40, 0)).toEqual(b.choose(40, 0));
    const saved = JSON.parse(JSON.stringify(a.state()));
    const next = a.choose(40, 0);
    const c = new AnchorScheduler(DEFAULT_ANCHOR_CONFIG, 999);
    c.restore(saved);
    expect(c.choose(40, 0)).toEqual(next);
    expect(new AnchorScheduler(DEFAULT_ANCHOR_CONFIG, 8).choose(40, 0)).not.toEqual(new AnchorScheduler(DEFAULT_ANCHOR_CONFIG, 7).choose(40, 0));
  });

  it('active mode picks each group with its stated inclusion probability and favours uncertain groups', () => {
    const rng = new Rng(5);
    const u = Array.from({ length: 12 }, () => rng.next() ** 3);
    u[3] = 5; // one very uncertain group: its probability is capped at 1
    const s = new AnchorScheduler({ ...DEFAULT_ANCHOR_CONFIG, mode: 'active', fraction: 0.25 }, 6);
    const counts = new Array<number>(12).fill(0);
    const stated = new Array<number>(12).fill(0);
    const T = 4000;
    for (let t = 0; t < T; t++) {
      const ch = s.choose(12, 0, u);
      expect(ch.groups.length).toBe(3);
      ch.groups.forEach((g, j) => { counts[g]!++; stated[g] = ch.inclusion[j]!; });
    }
    expect(counts[3]).toBe(T);
    const weights = u.map((x) => 0.8 * (x / u.reduce((a, b) => a + b)) + 0.2 / 12);
    const pi = inclusionProbabilities(weights, 3);
    expect(pi.reduce((a, b) => a + b)).toBeCloseTo(3, 9);
    pi.forEach((p, i) => {
      expect(counts[i]! / T).toBeCloseTo(p, 1);
      if (counts[i]! > 0) expect(stated[i]).toBeCloseTo(p, 9);
    });
    const order = [...u.keys()].sort((a, b) => u[a]! - u[b]!);
    expect(counts[order[11]!]!).toBeGreaterThan(counts[order[0]!]!);
  });
});
