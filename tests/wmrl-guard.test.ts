// Exploitation guard: per-context alignment between the world model's ranking and reality on anchor
// groups; a context where the world model ranks against reality is flagged (hysteresis), its
// world-model groups leave the gradient, anchors favour it, and the state survives save/restore.
import { describe, expect, it } from 'vitest';
import type { Score } from '../wmrl/advantages.js';
import { AnchorScheduler, DEFAULT_ANCHOR_CONFIG } from '../wmrl/anchors.js';
import { Corrector, correctorConfig, type CorrectorConfig, type CorrectorOverrides, type WorldModelScorer } from '../wmrl/corrector.js';
import { DEFAULT_GUARD_CONFIG, ExploitationGuard, groupAlignment } from '../wmrl/guard.js';
import { Rng } from '../wmrl/rng.js';
import type { TrustedScorer } from '../wmrl/trusted.js';

describe('groupAlignment', () => {
  it('is the real-score gain along the standardized world-model ranking: positive, negative, or null when degenerate', () => {
    const real = [0.1, 0.4, 0.2, 0.9];
    const agree = groupAlignment(real.map((y) => 3 * y + 1), real)!;
    const sd = Math.sqrt(real.reduce((s, y) => s + (y - 0.4) ** 2, 0) / 4);
    // Perfect agreement: cov(c/sd(c), y) = sd(y).
    expect(agree.alignment).toBeCloseTo(sd, 12);
    expect(agree.realStd).toBeCloseTo(sd, 12);
    expect(groupAlignment(real.map((y) => -y), real)!.alignment).toBeCloseTo(-sd, 12);
    expect(groupAlignment([1, 1, 1, 1], real)).toBeNull(); // world model constant
    expect(groupAlignment(real, [0.5, 0.5, 0.5, 0.5])).toBeNull(); // reality constant
    expect(groupAlignment([1, null, 2], [0.3, 0.1, null])).toBeNull(); // fewer than 2 pairs
    // Unscored rollouts are left out, not read as 0.
    expect(groupAlignment([1, 2, null, 3], [0.1, 0.2, 0.9, 0.3])!.alignment).toBeCloseTo(groupAlignment([1, 2, 3], [0.1, 0.2, 0.3])!.alignment, 12);
  });
});

describe('ExploitationGuard', () => {
  const rng = new Rng(7);
  const group = (sign: number) => {
    const real = Array.from({ length: 8 }, () => rng.next());
    return { wm: real.map((y) => sign * y + 0.05 * rng.normal()), real };
  };

  it('flags only the context whose world model ranks against reality, after minGroups, and releases it with hysteresis', () => {
    const g = new ExploitationGuard({ ...DEFAULT_GUARD_CONFIG, minGroups: 3 });
    for (let i = 0; i < 2; i++) {
      const a = group(1);
      g.update('honest', a.wm, a.real);
      const b = group(-1);
      g.update('exploited', b.wm, b.real);
    }
    expect(g.flagged('exploited')).toBe(false); // 2 < minGroups
    const b = group(-1);
    g.update('exploited', b.wm, b.real);
    expect(g.flagged('exploited')).toBe(true);
    expect(g.flagged('honest')).toBe(false);
    expect(g.flaggedContexts).toEqual(['exploited']);
    expect(g.alignment('exploited')!).toBeLessThan(-0.5);
    // Alignment recovering to just above flagBelow does not release; above releaseAbove does.
    let steps = 0;
    while (g.flagged('exploited') && steps < 50) {
      const a = group(1);
      g.update('exploited', a.wm, a.real);
      steps++;
      if (g.flagged('exploited')) expect(g.alignment('exploited')!).toBeLessThanOrEqual(DEFAULT_GUARD_CONFIG.releaseAbove);
    }
    expect(g.flagged('exploited')).toBe(false);
    expect(g.alignment('exploited')!).toBeGreaterThan(DEFAULT_GUARD_CONFIG.releaseAbove);
    expect(g.totalFlags).toBe(1);
  });

  it('remembers at most maxContexts, forgetting the least recently measured unflagged context first', () => {
    const g = new ExploitationGuard({ ...DEFAULT_GUARD_CONFIG, maxContexts: 3 });
    for (let i = 0; i < 3; i++) {
      const b = group(-1);
      g.update('bad', b.wm, b.real);
    }
    expect(g.flagged('bad')).toBe(true);
    for (const k of ['7', '3']) {
      const x = group(1);
      g.update(k, x.wm, x.real);
    }
    const again = group(1);
    g.update('7', again.wm, again.real); // '7' is now more recent than '3'
    const c = group(1);
    g.update('c', c.wm, c.real);
    expect(g.size).toBe(3);
    expect(g.alignment('3')).toBeNull(); // forgotten: least recent unflagged
    expect(g.alignment('7')).not.toBeNull();
    expect(g.flagged('bad')).toBe(true); // the flagged context, though oldest, stays
    // Restore keeps the recency order, integer-like names included (a JSON round trip, as a saved state takes).
    const h = new ExploitationGuard({ ...DEFAULT_GUARD_CONFIG, maxContexts: 3 });
    for (const k of ['bad', 'bad', 'bad', 'x', '7']) {
      const y = group(k === 'bad' ? -1 : 1);
      h.update(k, y.wm, y.real);
    }
    const r = new ExploitationGuard({ ...DEFAULT_GUARD_CONFIG, maxContexts: 3 });
    r.restore(JSON.parse(JSON.stringify(h.state())));
    const d = group(1);
    r.update('d', d.wm, d.real);
    expect(r.alignment('x')).toBeNull(); // 'x' was measured before '7'
    expect(r.alignment('7')).not.toBeNull();
    expect(r.flagged('bad')).toBe(true);
  });

  it('rejects a config whose release threshold lies below its flag threshold', () => {
    expect(() => new ExploitationGuard({ ...DEFAULT_GUARD_CONFIG, flagBelow: 0.2, releaseAbove: 0.1 })).toThrow(/releaseAbove must be ≥ flagBelow/);
  });
});

describe('AnchorScheduler boost', () => {
  it('multiplies selection weights; inclusion probabilities stay exact and sum to the anchor count', () => {
    const s = new AnchorScheduler({ ...DEFAULT_ANCHOR_CONFIG, fraction: 0.25 }, 1);
    const boost = Array.from({ length: 16 }, (_, i) => (i < 2 ? 8 : 1));
    const counts = new Array<number>(16).fill(0);
    const n = 4000;
    for (let t = 0; t < n; t++) for (const g of s.choose(16, 0, undefined, boost).groups) counts[g]!++;
    // Weights 8,8,1×14 → total 30, k = 4: π = 32/30 ≥ 1 capped at 1 for the boosted, the rest share 2 over 14.
    expect(counts[0]! / n).toBeCloseTo(1, 5);
    expect(counts[1]! / n).toBeCloseTo(1, 5);
    for (let i = 2; i < 16; i++) expect(Math.abs(counts[i]! / n - 2 / 14)).toBeLessThan(0.03);
    expect(() => s.choose(16, 0, undefined, [1, 2])).toThrow(/boost has 2 entries for 16 groups/);
  });
});

/** Rollouts of a prompt `p`; the world model over-rates prompt 0's high actions, reversing its ranking. */
interface R { p: number; r: number; e: number }

class Real implements TrustedScorer<R> {
  async score(rs: readonly R[]): Promise<Score[]> {
    return rs.map((x) => x.r);
  }
}

class Wm implements WorldModelScorer<R> {
  async score(groups: ReadonlyArray<readonly R[]>) {
    return groups.map((g) => ({ scores: g.map((x) => (x.p === 0 ? 1 - x.r : x.r) + x.e) }));
  }
}

const groupsOf = (rng: Rng): R[][] =>
  Array.from({ length: 16 }, (_, i) => Array.from({ length: 8 }, () => ({ p: i % 4, r: rng.next(), e: 0.05 * rng.normal() })));

/** The tests' base config, with `over` applied on top (parts merged key by key). */
const cfg = (over: CorrectorOverrides = {}): CorrectorConfig =>
  correctorConfig(over, correctorConfig({ anchors: { fraction: 0.25, maxInFlight: 64 }, debias: { minPairs: 64, refitEvery: 32 }, denoise: { warmupGroups: 8 }, seed: 5 }));

describe('Corrector with the exploitation guard', () => {
  const contextOf = (g: readonly R[]) => `prompt ${g[0]!.p}`;

  it("leaves a flagged context's world-model groups out of the gradient and sends it more anchors; other contexts keep theirs", async () => {
    const c = new Corrector<R>(cfg(), new Wm(), new Real(), { contextOf });
    const anchorsOf = [0, 0, 0, 0];
    let flaggedAt = -1;
    for (let t = 0; t < 60; t++) {
      const groups = groupsOf(new Rng(300 + t));
      const res = await c.step(groups);
      if (flaggedAt < 0 && c.distrusts('prompt 0')) flaggedAt = t;
      res.source.forEach((src, g) => {
        const p = groups[g]![0]!.p;
        if (src === 'real' && t > flaggedAt && flaggedAt >= 0) anchorsOf[p]!++;
        if (src === 'wm' && p === 0 && c.distrusts('prompt 0')) expect(res.advantages[g]!.every((a) => a === null)).toBe(true);
        if (src === 'wm' && p !== 0) expect(res.advantages[g]!.some((a) => a !== null)).toBe(true);
      });
      if (c.distrusts('prompt 0')) {
        expect(res.log.flaggedContexts).toBe(1);
        expect(res.log.distrustedGroups).toBe(res.source.filter((s, g) => s === 'wm' && groups[g]![0]!.p === 0).length);
      }
    }
    expect(flaggedAt).toBeGreaterThanOrEqual(0);
    expect(flaggedAt).toBeLessThan(20);
    for (const p of [1, 2, 3]) expect(c.distrusts(`prompt ${p}`)).toBe(false);
    // Boost 8 on prompt 0's 4 groups out of 16: π = 4·8/(32+12) ≈ 0.73 each vs ≈ 0.09 for the others.
    expect(anchorsOf[0]!).toBeGreaterThan(3 * Math.max(anchorsOf[1]!, anchorsOf[2]!, anchorsOf[3]!));
  });

  it('disabled, nothing is flagged and every world-model group counts (the published method)', async () => {
    const c = new Corrector<R>(cfg({ guard: false }), new Wm(), new Real(), { contextOf });
    for (let t = 0; t < 40; t++) {
      const res = await c.step(groupsOf(new Rng(300 + t)));
      expect(res.log.flaggedContexts).toBe(0);
      expect(res.log.distrustedGroups).toBe(0);
    }
  });

  it('restore-then-continue equals never-stopped with the guard state in play', async () => {
    const run = async (stopAt: number | null) => {
      let c = new Corrector<R>(cfg(), new Wm(), new Real(), { contextOf });
      const out: unknown[] = [];
      for (let t = 0; t < 40; t++) {
        if (t === stopAt) {
          await c.drain();
          const saved = JSON.parse(JSON.stringify(c.state()));
          c = new Corrector<R>(cfg(), new Wm(), new Real(), { contextOf });
          c.restore(saved);
        }
        out.push(await c.step(groupsOf(new Rng(500 + t))));
      }
      return out;
    };
    const straight = await run(null);
    expect((straight[19] as { log: { flaggedContexts: number } }).log.flaggedContexts).toBe(1);
    expect(await run(20)).toEqual(straight);
  });
});
