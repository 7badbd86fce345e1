// The imagined gate's parts (wmrl/gate.ts): its rank agreement (Spearman's correlation with tied values given
// their mean rank, NaN where a side has no ranking), the share of the imagined groups it keeps, and the gate
// itself: which anchor groups it measures, its window, and which imagined groups an update drops.
import { describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { ImaginedGate, NoiseReplay, keptShare, rankAgreement } from '../wmrl/gate.js';

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

describe('ImaginedGate', () => {
  it('measures an anchor group from its complete episodes only, at least 3 of them with a ranking on each side, over its window', () => {
    const gate = new ImaginedGate({ window: 2, minGroups: 1 }, true);
    // Two incomplete episodes (null, undefined) leave 3: the same order, agreement 1.
    gate.observe([1, 2, 3, 9, 8], [10, 20, 30, null, undefined]);
    expect(gate.agreements).toEqual([1]);
    // Fewer than 3 complete episodes, or all real scores equal: nothing measured.
    gate.observe([1, 2, 3], [5, null, 6]);
    gate.observe([1, 2, 3], [0, 0, 0]);
    expect(gate.agreements).toEqual([1]);
    gate.observe([1, 2, 3], [3, 2, 1]);
    gate.observe([1, 2, 3, 4], [1, 2, 4, 3]);
    // The window keeps the latest 2, oldest first; the getter hands out a copy.
    expect(gate.agreements).toEqual([-1, rankAgreement([1, 2, 3, 4], [1, 2, 4, 3])]);
    gate.agreements.push(5);
    expect(gate.agreements).toHaveLength(2);
  });

  it('keeps every imagined group until minGroups are measured, then the clipped mean agreement\'s share of them, never dropping an anchor group', () => {
    const source: Array<'real' | 'wm'> = ['wm', 'real', 'wm', 'wm', 'wm', 'real', 'wm', 'wm', 'wm'];
    const gate = new ImaginedGate({ window: 4, minGroups: 2 }, true);
    gate.observe([1, 2, 3], [1, 2, 3]);
    const rng = new Rng(0);
    expect(gate.select(source, rng)).toEqual({ weight: 1, dropped: new Set() });
    // Drew nothing: the trainer's stream is untouched until the gate decides.
    expect(rng.next()).toBe(new Rng(0).next());
    gate.observe([1, 2, 3, 4], [1, 2, 4, 3]);
    const mean = (1 + rankAgreement([1, 2, 3, 4], [1, 2, 4, 3])) / 2;
    const { weight, dropped } = gate.select(source, new Rng(3));
    expect(weight).toBeCloseTo(mean, 12);
    // The first imagined groups are kept: 7 imagined, 0.9 x 7 = 6.3 kept, rounded at random.
    const wm = [0, 2, 3, 4, 6, 7, 8];
    const kept = wm.filter((b) => !dropped.has(b));
    expect(kept).toEqual(wm.slice(0, kept.length));
    expect([6, 7]).toContain(kept.length);
    expect([...dropped].every((b) => source[b] === 'wm')).toBe(true);
    // A mean below 0 keeps no imagined group; the restored agreements are what it averages.
    gate.restore([-1, -0.5]);
    expect(gate.select(source, new Rng(4))).toEqual({ weight: 0, dropped: new Set(wm) });
  });

  it('refuses a gate without anchors or with a window it cannot fill, by name', () => {
    expect(() => new ImaginedGate({ window: 4, minGroups: 1 }, false)).toThrow(/without a corrector runs no anchors/);
    expect(() => new ImaginedGate({ window: 1.5, minGroups: 1 }, true)).toThrow(/imaginedGate.window must be a whole number of anchor groups, at least 1; got 1.5/);
    expect(() => new ImaginedGate({ window: 3, minGroups: 4 }, true)).toThrow(/imaginedGate.minGroups must be a whole number from 1 to its window \(3\); got 4/);
  });
});

describe('NoiseReplay', () => {
  it('replays the imagined noise value by value, then draws from the trainer\'s stream, which also serves every other draw', () => {
    const rest = new Rng(7), same = new Rng(7);
    const r = new NoiseReplay(Float32Array.of(0.5, -1), rest);
    expect(r.normal()).toBe(0.5);
    expect(r.next()).toBe(same.next());
    expect(r.normal()).toBe(-1);
    expect(r.normal()).toBe(same.normal());
  });
});
