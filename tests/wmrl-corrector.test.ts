// The correction loop: step order (map updated before disagreement is measured), weight exactly 1
// before calibration, exclusion of unscored rollouts, async anchors with limited slots that never
// block world-model scoring, and restore-then-continue = never stopped. Standard GRPO, the
// baseline, is tests/wmrl-grpo.test.ts.
import { describe, expect, it } from 'vitest';
import type { Score } from '../wmrl/advantages.js';
import { DEFAULT_ANCHOR_CONFIG, inclusionProbabilities } from '../wmrl/anchors.js';
import {
  Corrector, correctorConfig, DEFAULT_CORRECTOR_CONFIG, DEFAULT_PER_ROLLOUT_CONFIG, type StepLog, type CorrectorConfig, type CorrectorOverrides, type WorldModelScorer,
} from '../wmrl/corrector.js';
import { binnedIsotonic, DEFAULT_DEBIAS_CONFIG, evalKnots } from '../wmrl/debias.js';
import { normalizedDisagreement } from '../wmrl/denoise.js';
import { Rng } from '../wmrl/rng.js';
import { TrustedScorerError, type TrustedScorer } from '../wmrl/trusted.js';

/** A rollout carries its true reward and a fixed noise draw, so scorers are pure functions of it. */
interface R { r: number; e: number; v: number }

const distort = (r: number) => 2 + Math.exp(3 * r);

class Real implements TrustedScorer<R> {
  calls: R[][] = [];
  constructor(private readonly nullEvery = 0) {}
  async score(rs: readonly R[]): Promise<Score[]> {
    this.calls.push([...rs]);
    return rs.map((x, i) => (this.nullEvery && i % this.nullEvery === 0 ? null : x.r));
  }
}

class Wm implements WorldModelScorer<R> {
  calls = 0;
  async score(groups: ReadonlyArray<readonly R[]>) {
    this.calls++;
    return groups.map((g) => ({ scores: g.map((x) => distort(x.r) + x.e), variance: g.map((x) => x.v) }));
  }
}

function makeGroups(rng: Rng, n: number, g = 8): R[][] {
  return Array.from({ length: n }, () => Array.from({ length: g }, () => ({ r: rng.next(), e: 0.3 * rng.normal(), v: 0.01 + rng.next() })));
}

/** The tests' base config, with `over` applied on top (parts merged key by key). */
const cfg = (over: CorrectorOverrides = {}): CorrectorConfig =>
  correctorConfig(over, correctorConfig({ anchors: { fraction: 0.25, maxInFlight: 64 }, debias: { minPairs: 64, refitEvery: 32 }, denoise: { warmupGroups: 8 }, seed: 3 }));

describe('Corrector', () => {
  it('updates the map before measuring disagreement, and weighs exactly 1 before calibration', async () => {
    const real = new Real();
    const c = new Corrector<R>(cfg(), new Wm(), real);
    const rng = new Rng(1);
    let sawCalibration = false;
    for (let t = 0; t < 30; t++) {
      const calibratedBefore = c.state().debiaser!.fits > 0;
      const res = await c.step(makeGroups(rng, 16));
      if (!res.log.calibrated) {
        expect(res.log.anchorWeight).toBe(1);
        expect(res.log.disagreement).toBeNull();
      } else {
        expect(res.log.anchorWeight).toBeGreaterThanOrEqual(1);
        expect(res.log.anchorWeight).toBeLessThanOrEqual(4);
      }
      if (res.log.calibrated && !calibratedBefore) {
        // The step that first fits the map measures its anchors' disagreement with that new map.
        sawCalibration = true;
        const anchors = real.calls.slice(-res.log.anchorsLaunched);
        const expected = anchors.map((g) => normalizedDisagreement(g.map((x) => c.calibrate(distort(x.r) + x.e)), g.map((x) => x.r))!);
        const withIdentity = anchors.map((g) => normalizedDisagreement(g.map((x) => distort(x.r) + x.e), g.map((x) => x.r))!);
        // EWMA of these values with a bias-corrected start.
        const a = 1 - 0.5 ** (1 / 64);
        let num = 0, den = 0;
        for (const s of expected) { num = (1 - a) * num + a * s; den = (1 - a) * den + a; }
        expect(res.log.disagreement).toBeCloseTo(num / den, 10);
        let numId = 0, denId = 0;
        for (const s of withIdentity) { numId = (1 - a) * numId + a * s; denId = (1 - a) * denId + a; }
        expect(Math.abs(res.log.disagreement! - numId / denId)).toBeGreaterThan(0.05);
      }
    }
    expect(sawCalibration).toBe(true);
  });

  it('excludes unscored rollouts and logs every step', async () => {
    const c = new Corrector<R>(cfg({ anchors: { fraction: 1 } }), new Wm(), new Real(3));
    const res = await c.step(makeGroups(new Rng(2), 4));
    expect(res.source).toEqual(['real', 'real', 'real', 'real']);
    for (const g of res.advantages) expect(g.filter((a, i) => i % 3 === 0 && a !== null)).toEqual([]);
    expect(res.log.excludedRollouts).toBe(4 * 3);
    for (const key of ['anchorFraction', 'calibrated', 'biasReduction', 'anchorWeight', 'realExecutions', 'trueMean'] as const) {
      expect(res.log).toHaveProperty(key);
    }
  });

  it('a slow trusted scorer never blocks world-model scoring; slots cap anchors in flight; late results join calibration', async () => {
    const release: Array<() => void> = [];
    const slow: TrustedScorer<R> = {
      score: (rs) => new Promise<Score[]>((resolve) => release.push(() => resolve(rs.map((x) => x.r)))),
    };
    const wm = new Wm();
    const c = new Corrector<R>(cfg({ anchorWaitMs: 0, anchors: { maxInFlight: 3 } }), wm, slow);
    const rng = new Rng(4);
    for (let t = 0; t < 4; t++) {
      const res = await c.step(makeGroups(rng, 8));
      expect(res.source.every((s) => s === 'wm')).toBe(true);
      expect(c.inFlight).toBeLessThanOrEqual(3);
    }
    expect(wm.calls).toBe(4);
    expect(c.inFlight).toBe(3);
    expect(() => c.state()).toThrow(/in flight/);
    for (const r of release) r();
    await c.drain();
    const res = await c.step(makeGroups(rng, 8));
    expect(res.log.anchorsAbsorbed).toBe(3);
  });

  it('restore-then-continue equals never-stopped', async () => {
    const config = cfg({ anchors: { mode: 'active' }, perRolloutWeights: {} });
    const run = async (stopAt: number | null) => {
      let c = new Corrector<R>(config, new Wm(), new Real(5));
      const out: unknown[] = [];
      for (let t = 0; t < 40; t++) {
        if (t === stopAt) {
          await c.drain();
          const saved = JSON.parse(JSON.stringify(c.state()));
          c = new Corrector<R>(config, new Wm(), new Real(5));
          c.restore(saved);
        }
        out.push(await c.step(makeGroups(new Rng(100 + t), 12)));
      }
      return out;
    };
    const straight = await run(null);
    const resumed = await run(23);
    expect(resumed).toEqual(straight);
    // The stop point lies after calibration and c are fixed, so the state is not trivial.
    expect((straight[22] as { log: { calibrated: boolean; anchorWeight: number } }).log.calibrated).toBe(true);
    expect((straight[22] as { log: { anchorWeight: number } }).log.anchorWeight).toBeGreaterThan(1);
  });

  it("keeps world-model groups at weight 1 on every step, anchors adding weight: no step-size jitter from anchor luck", async () => {
    const c = new Corrector<R>(cfg({ anchors: { fraction: 0.05, floor: 0 } }), new Wm(), new Real(7));
    const rng = new Rng(9);
    let withAnchors = 0;
    let without = 0;
    for (let t = 0; t < 60; t++) {
      const res = await c.step(makeGroups(rng, 16));
      res.weights.forEach((g, gi) => g.forEach((w, i) => {
        if (res.advantages[gi]![i] === null) expect(w).toBe(1);
        else if (res.source[gi] === 'wm') expect(w).toBe(1);
        else expect(w).toBeCloseTo(res.log.anchorWeight, 12);
      }));
      if (res.log.anchorWeight > 1.5 && res.log.anchorsUsed > 0) withAnchors++;
      if (res.log.anchorWeight > 1.5 && res.log.anchorsUsed === 0) without++;
    }
    // Both kinds of step happened after c was fixed, so the check above covered both.
    expect(withAnchors).toBeGreaterThan(5);
    expect(without).toBeGreaterThan(5);
  });
});

describe('active anchors', () => {
  it('scale each anchor\'s excess weight by mean inclusion over its inclusion (clipped at maxWeight), so no content is favoured in expectation', async () => {
    const mix = 0.2;
    const c = new Corrector<R>(cfg({ anchors: { mode: 'active', uniformMix: mix } }), new Wm(), new Real());
    const rng = new Rng(11);
    let checked = 0;
    for (let t = 0; t < 40; t++) {
      const groups = makeGroups(rng, 16);
      const res = await c.step(groups);
      const w = res.log.anchorWeight;
      const wm = res.source.indexOf('wm');
      if (w <= 1 || wm < 0) continue;
      const u = groups.map((g) => g.reduce((s, x) => s + x.v, 0) / g.length);
      const total = u.reduce((s, x) => s + x, 0);
      const pi = inclusionProbabilities(u.map((x) => (1 - mix) * (x / total) + mix / u.length), res.log.anchorsLaunched);
      const meanPi = res.log.anchorsLaunched / groups.length;
      res.source.forEach((s, g) => {
        if (s !== 'real') return;
        expect(res.weights[g]![0]! / res.weights[wm]![0]!).toBeCloseTo(Math.min(4, 1 + (w - 1) * (meanPi / pi[g]!)), 9);
        checked++;
      });
    }
    expect(checked).toBeGreaterThan(20);
  });

  it('calibrate without selection bias: pairs and s² weighted by inverse inclusion, advantage weights never above maxWeight', async () => {
    // Half the groups are "hard" (the ensemble is unsure: variance 1) and really score 0.35 below
    // their world-model score, with noisy rankings; the "easy" half (variance 0.01) score 0.35 above.
    // Over all groups E[real | wm] = wm, so the true map at 0.5 is 0.5, but active selection picks
    // hard groups ~89% of the time: unweighted, the map would give ≈ 0.23 there.
    interface H { x: number; hard: boolean; e: number }
    const wm: WorldModelScorer<H> = {
      score: async (groups) => groups.map((g) => ({ scores: g.map((r) => r.x), variance: g.map((r) => (r.hard ? 1 : 0.01)) })),
    };
    const real: TrustedScorer<H> = { score: async (rs) => rs.map((r) => r.x + (r.hard ? -0.35 + 0.2 * r.e : 0.35 + 0.05 * r.e)) };
    const draw = (rng: Rng): H[][] => Array.from({ length: 16 }, (_, g) =>
      Array.from({ length: 8 }, () => ({ x: rng.next(), hard: g % 2 === 0, e: rng.normal() })));
    const over = { anchors: { fraction: 0.25, mode: 'active' as const }, debias: { minPairs: 400, refitEvery: 64, bufferCap: 5000 }, denoise: { warmupGroups: 8, targetWeight: 3 } };
    const active = new Corrector<H>(cfg(over), wm, real);
    const uniform = new Corrector<H>(cfg({ ...over, anchors: { fraction: 0.25, mode: 'random' } }), wm, real);
    let maxRatio = 0;
    let unclipped = 0;
    for (let t = 0; t < 150; t++) {
      const groups = draw(new Rng(700 + t));
      const res = await active.step(groups);
      await uniform.step(groups);
      const w = res.log.anchorWeight;
      const wmGroup = res.source.indexOf('wm');
      res.source.forEach((src, g) => {
        if (src !== 'real' || wmGroup < 0) return;
        const ratio = res.weights[g]![0]! / res.weights[wmGroup]![0]!;
        maxRatio = Math.max(maxRatio, ratio);
        // What the inclusion correction alone would give an easy group (π ≈ 0.054, π̄ = 0.25).
        if (!groups[g]![0]!.hard && w > 1) unclipped = Math.max(unclipped, 1 + (w - 1) * (0.25 / 0.054));
      });
    }
    // Weighted: ≈ 0.49 (uniform selection: ≈ 0.51).
    expect(Math.abs(active.calibrate(0.5) - 0.5)).toBeLessThan(0.05);
    expect(Math.abs(active.calibrate(0.5) - uniform.calibrate(0.5))).toBeLessThan(0.05);
    const st = active.state();
    const buffer = st.debiaser!.buffer;
    const hardShare = buffer.filter((p) => p.weight! < 1).length / buffer.length;
    expect(hardShare).toBeGreaterThan(0.8);
    // The same pairs fitted without their weights: the selection-biased map the review measured (≈ 0.23).
    const naive = binnedIsotonic(buffer.map((p) => p.wm), buffer.map((p) => p.real), 20);
    expect(evalKnots(naive.knotsX, naive.knotsY, 0.5)).toBeLessThan(0.3);
    // s²: the weighted average over actively chosen groups matches the one under uniform selection.
    const s2a = st.weighter!.ewma / st.weighter!.norm;
    const s2u = uniform.state().weighter!.ewma / uniform.state().weighter!.norm;
    const hardOnly = 0.2 ** 2 / (1 / 12 + 0.2 ** 2); // ≈ 0.32, what an unweighted s² would drift towards
    expect(s2a / s2u).toBeGreaterThan(0.75);
    expect(s2a / s2u).toBeLessThan(1.33);
    expect(s2a).toBeLessThan(0.75 * hardOnly);
    // Advantage weights: the inclusion correction alone would exceed maxWeight; the clip holds it there.
    expect(unclipped).toBeGreaterThan(4);
    expect(maxRatio).toBeLessThanOrEqual(4 + 1e-12);
    expect(maxRatio).toBeGreaterThan(3);
  });
});

describe('real-execution failures', () => {
  /** Throws on calls listed in `failOn` (0-based), scores the true reward otherwise. */
  class Flaky implements TrustedScorer<R> {
    calls = 0;
    constructor(private readonly failOn: (call: number) => boolean) {}
    async score(rs: readonly R[]): Promise<Score[]> {
      if (this.failOn(this.calls++)) throw new Error('robot 3: joint 2 encoder timeout');
      return rs.map((x) => x.r);
    }
  }

  it('by default an exception of the trusted scorer stops the run: the step rejects naming the cause, and so does every later call', async () => {
    const c = new Corrector<R>(cfg(), new Wm(), new Flaky((k) => k === 5));
    const rng = new Rng(30);
    let error: unknown = null;
    for (let t = 0; t < 5 && error === null; t++) {
      try { await c.step(makeGroups(rng, 8)); } catch (e) { error = e; }
    }
    expect(error).toBeInstanceOf(TrustedScorerError);
    expect((error as Error).message).toMatch(/real execution failed: Error: robot 3: joint 2 encoder timeout/);
    expect(((error as Error).cause as Error).message).toBe('robot 3: joint 2 encoder timeout');
    await expect(c.step(makeGroups(rng, 8))).rejects.toBe(error);
    await expect(c.drain()).rejects.toBe(error);
  });

  it("a late anchor's exception surfaces at the next step", async () => {
    let fail: (e: Error) => void = () => {};
    const late: TrustedScorer<R> = { score: () => new Promise<Score[]>((_, reject) => { fail = reject; }) };
    const c = new Corrector<R>(cfg({ anchorWaitMs: 0, anchors: { fraction: 0, floor: 1 } }), new Wm(), late);
    const rng = new Rng(31);
    await c.step(makeGroups(rng, 8)); // its anchor is still running
    fail(new Error('sandbox pool lost'));
    await expect(c.step(makeGroups(rng, 8))).rejects.toThrow(/sandbox pool lost/);
  });

  it("the caller's policy can keep expected faults as unscored; anchors that keep failing still stop the run, naming the cause", async () => {
    const seen: Array<{ error: unknown; size: number }> = [];
    const onTrustedError = (error: unknown, group: readonly R[]) => {
      seen.push({ error, size: group.length });
      return 'unscored' as const;
    };
    // Calls 3 and 4 fail, then 5 succeeds (the streak resets), then every call from 10 on fails.
    const flaky = new Flaky((k) => k === 3 || k === 4 || k >= 10);
    const c = new Corrector<R>(cfg({ maxFailedAnchors: 4, anchors: { fraction: 0, floor: 1 } }), new Wm(), flaky, { onTrustedError });
    const rng = new Rng(32);
    const logs: StepLog[] = [];
    let error: unknown = null;
    for (let t = 0; t < 20 && error === null; t++) {
      try { logs.push((await c.step(makeGroups(rng, 8))).log); } catch (e) { error = e; }
    }
    // Steps 3 and 4 went on with their anchor unscored and counted; the run stopped at the 4th failure in a row (call 13).
    expect(logs[3]!.trustedErrors).toBe(1);
    expect(logs[4]!.trustedErrors).toBe(2);
    expect(logs[4]!.failedAnchorStreak).toBe(2);
    expect(logs[5]!.failedAnchorStreak).toBe(0);
    expect(logs[12]!.failedAnchorStreak).toBe(3);
    expect(logs.length).toBe(13);
    expect(seen.length).toBe(6);
    expect(seen.every((x) => x.size === 8 && (x.error as Error).message === 'robot 3: joint 2 encoder timeout')).toBe(true);
    expect(error).toBeInstanceOf(TrustedScorerError);
    expect((error as Error).message).toMatch(/4 anchor groups in a row .* the last one threw Error: robot 3: joint 2 encoder timeout/);
  });

  it('anchors that only ever come back null stop the run too; a policy that throws stops it with its own error', async () => {
    const nulls: TrustedScorer<R> = { score: async (rs) => rs.map(() => null) };
    const c = new Corrector<R>(cfg({ maxFailedAnchors: 3, anchors: { fraction: 0, floor: 1 } }), new Wm(), nulls);
    const rng = new Rng(33);
    await c.step(makeGroups(rng, 8));
    await c.step(makeGroups(rng, 8));
    await expect(c.step(makeGroups(rng, 8))).rejects.toThrow(/3 anchor groups in a row .* only null scores/);
    const strict = new Corrector<R>(cfg(), new Wm(), new Flaky(() => true), {
      onTrustedError: (e) => { throw new Error(`operator policy: ${(e as Error).message}`); },
    });
    await expect(strict.step(makeGroups(rng, 8))).rejects.toThrow(/operator policy: robot 3/);
  });
});

describe('advantages in the corrector', () => {
  it("judge a step's near-ties against the real scores' scale seen on anchors, not against the step itself", async () => {
    let tiedStep = false;
    const wm: WorldModelScorer<R> = {
      score: async (groups) => groups.map((g) => ({ scores: g.map((x, i) => (tiedStep ? 0.7 + 1e-6 * (i % 2) : x.r)) })),
    };
    // Real execution faults on every rollout of the tied step, so no real score joins that step.
    const real: TrustedScorer<R> = { score: async (rs) => rs.map((x) => (tiedStep ? null : x.r)) };
    const c = new Corrector<R>(cfg({ debias: false }), wm, real);
    const rng = new Rng(17);
    for (let t = 0; t < 10; t++) await c.step(makeGroups(rng, 16));
    tiedStep = true;
    const res = await c.step(makeGroups(rng, 16));
    const adv = res.advantages.flat().filter((a): a is number => a !== null);
    expect(adv.length).toBeGreaterThanOrEqual(11 * 8); // the world-model groups
    // The step's own pooled std is 5e-7: relative to it the ties would be ±1.
    for (const a of adv) expect(Math.abs(a)).toBeLessThan(0.01);
  });
});

describe('correctorConfig', () => {
  it('merges parts key by key onto the base, turns parts off with false and back on from their defaults, and copies', () => {
    const base = correctorConfig({ anchors: { fraction: 0.25 }, debias: { minPairs: 64 } });
    expect(base.anchors).toEqual({ ...DEFAULT_ANCHOR_CONFIG, fraction: 0.25 });
    expect(base.debias).toEqual({ ...DEFAULT_DEBIAS_CONFIG, minPairs: 64 });
    const off = correctorConfig({ debias: false, guard: false, seed: 9 }, base);
    expect(off.debias).toBe(false);
    expect(off.guard).toBe(false);
    expect(off.seed).toBe(9);
    expect(off.anchors).toEqual(base.anchors); // untouched parts carried over
    // A part switched back on starts from its defaults; a partial override keeps the base's other keys.
    expect(correctorConfig({ debias: { bins: 7 } }, off).debias).toEqual({ ...DEFAULT_DEBIAS_CONFIG, bins: 7 });
    expect(correctorConfig({ anchors: { mode: 'active' } }, base).anchors).toEqual({ ...DEFAULT_ANCHOR_CONFIG, fraction: 0.25, mode: 'active' });
    expect(correctorConfig({ perRolloutWeights: {} }).perRolloutWeights).toEqual(DEFAULT_PER_ROLLOUT_CONFIG);
    // Neither the defaults nor the base are modified.
    expect(DEFAULT_CORRECTOR_CONFIG.debias).toEqual(DEFAULT_DEBIAS_CONFIG);
    expect(base.debias).toEqual({ ...DEFAULT_DEBIAS_CONFIG, minPairs: 64 });
  });

  it('a part that is off is off everywhere: no map, weight 1, nothing flagged, and its saved state is ignored', async () => {
    const on = new Corrector<R>(cfg(), new Wm(), new Real());
    const rng = new Rng(21);
    for (let t = 0; t < 30; t++) await on.step(makeGroups(rng, 16));
    const saved = on.state();
    expect(saved.debiaser!.fits).toBeGreaterThan(0);
    const off = new Corrector<R>(cfg({ debias: false, denoise: false, guard: false }), new Wm(), new Real());
    off.restore(saved);
    const res = await off.step(makeGroups(rng, 16));
    expect(off.calibrate(3.3)).toBe(3.3);
    expect(res.log.calibrated).toBe(false);
    expect(res.log.anchorWeight).toBe(1);
    expect(res.log.flaggedContexts).toBe(0);
    const st = off.state();
    expect(st.debiaser).toBeUndefined();
    expect(st.weighter).toBeUndefined();
    expect(st.guard).toBeUndefined();
  });
});

describe('paired scores', () => {
  it('fits the map on the world-model scores of what was executed when the trusted scorer returns them', async () => {
    // The world model scored imagined rollouts in [0, 1]; the robot executed something else, which the
    // world model (replaying it) scores 5 + r, and whose real score is 2·(5 + r).
    const paired: TrustedScorer<R> = { async score(rs) { return { real: rs.map((x) => 2 * (5 + x.r)), worldModel: rs.map((x) => 5 + x.r) }; } };
    const imagined: WorldModelScorer<R> = { async score(groups) { return groups.map((g) => ({ scores: g.map((x) => x.r) })); } };
    const c = new Corrector<R>(cfg({ denoise: false, guard: false }), imagined, paired);
    const rng = new Rng(5);
    for (let t = 0; t < 30; t++) await c.step(makeGroups(rng, 16));
    expect(c.state().debiaser!.fits).toBeGreaterThan(0);
    expect(c.calibrate(5.2)).toBeCloseTo(10.4, 0);
    expect(c.calibrate(5.8)).toBeCloseTo(11.6, 0);
    const bad: TrustedScorer<R> = { async score(rs) { return { real: rs.map(() => 1), worldModel: [1] }; } };
    const c2 = new Corrector<R>(cfg(), imagined, bad);
    await expect(c2.step(makeGroups(rng, 16))).rejects.toThrow(/1 world-model pair scores for 8 rollouts/);
  });
});
