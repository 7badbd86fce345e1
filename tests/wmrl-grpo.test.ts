// Standard GRPO, the Corrector's baseline: every group executed for real with at most maxInFlight at
// once, GRPO advantages of the real scores at weight 1, and real-execution failures handled by the
// same rules as the Corrector's anchors (a throw stops the run; kept-unscored groups that keep
// failing stop it too).
import { describe, expect, it } from 'vitest';
import { groupAdvantages, type Score } from '../wmrl/advantages.js';
import { DEFAULT_GRPO_CONFIG, StandardGrpo, type GrpoConfig } from '../wmrl/grpo.js';
import { Rng } from '../wmrl/rng.js';
import { TrustedScorerError, type TrustedScorer } from '../wmrl/trusted.js';

interface R { r: number }

const makeGroups = (rng: Rng, n: number, g = 8): R[][] =>
  Array.from({ length: n }, () => Array.from({ length: g }, () => ({ r: rng.next() })));

const cfg = (over: Partial<GrpoConfig> = {}): GrpoConfig => ({ ...DEFAULT_GRPO_CONFIG, ...over });

/** Scores the true reward; throws on the calls `failOn` picks (0-based). */
class Flaky implements TrustedScorer<R> {
  calls = 0;
  constructor(private readonly failOn: (call: number) => boolean = () => false) {}
  async score(rs: readonly R[]): Promise<Score[]> {
    if (this.failOn(this.calls++)) throw new Error('robot 3: joint 2 encoder timeout');
    return rs.map((x) => x.r);
  }
}

describe('StandardGrpo', () => {
  it('executes every group for real and forms GRPO advantages of the real scores at weight 1', async () => {
    const real = new Flaky();
    const grpo = new StandardGrpo<R>(cfg(), real);
    const groups = makeGroups(new Rng(3), 10);
    const res = await grpo.step(groups);
    expect(real.calls).toBe(10);
    expect(res.source.every((s) => s === 'real')).toBe(true);
    expect(res.scores).toEqual(groups.map((g) => g.map((x) => x.r)));
    expect(res.advantages).toEqual(groupAdvantages(res.scores).advantages);
    expect(res.advantages.flat().some((a) => a !== null && Math.abs(a) > 0.5)).toBe(true);
    expect(res.weights.flat().every((w) => w === 1)).toBe(true);
    expect(res.log.realExecutions).toBe(80);
    expect((await grpo.step(makeGroups(new Rng(4), 2))).log.realExecutions).toBe(96);
  });

  it('keeps at most maxInFlight groups executing at once', async () => {
    let running = 0;
    let peak = 0;
    const slow: TrustedScorer<R> = {
      async score(rs) {
        peak = Math.max(peak, ++running);
        await new Promise((r) => setTimeout(r, 2));
        running--;
        return rs.map((x) => x.r);
      },
    };
    const res = await new StandardGrpo<R>(cfg({ maxInFlight: 3 }), slow).step(makeGroups(new Rng(5), 10));
    expect(peak).toBe(3);
    expect(res.scores.flat().every((s) => s !== null)).toBe(true);
  });
});

describe('StandardGrpo real-execution failures', () => {
  it('an exception stops the run: the step rejects naming the cause, and so does every later step', async () => {
    const grpo = new StandardGrpo<R>(cfg(), new Flaky((k) => k === 2));
    const rng = new Rng(30);
    const error = await grpo.step(makeGroups(rng, 4)).then(() => null, (e: unknown) => e);
    expect(error).toBeInstanceOf(TrustedScorerError);
    expect((error as Error).message).toMatch(/real execution failed: Error: robot 3: joint 2 encoder timeout/);
    expect(((error as Error).cause as Error).message).toBe('robot 3: joint 2 encoder timeout');
    await expect(grpo.step(makeGroups(rng, 4))).rejects.toBe(error);
  });

  it("the caller's policy can keep faults as unscored; groups that keep failing still stop the run", async () => {
    const seen: unknown[] = [];
    // Call 1 fails, then every call from 6 on.
    const flaky = new Flaky((k) => k === 1 || k >= 6);
    const grpo = new StandardGrpo<R>(cfg({ maxFailedGroups: 3, maxInFlight: 1 }), flaky, {
      onTrustedError: (e) => { seen.push(e); return 'unscored'; },
    });
    const rng = new Rng(31);
    const first = await grpo.step(makeGroups(rng, 4));
    expect(first.log.trustedErrors).toBe(1);
    expect(first.log.excludedRollouts).toBe(8);
    expect(first.log.skippedGroups).toBe(1);
    expect(first.advantages[1]!.every((a) => a === null)).toBe(true);
    expect(first.log.failedAnchorStreak).toBe(0);
    // Calls 4, 5 succeed; 6, 7 fail and are kept; 8 is the third in a row.
    const second = await grpo.step(makeGroups(rng, 4));
    expect(second.log.trustedErrors).toBe(3);
    expect(second.log.failedAnchorStreak).toBe(2);
    await expect(grpo.step(makeGroups(rng, 4))).rejects.toThrow(/3 groups in a row .* the last one threw Error: robot 3: joint 2 encoder timeout/);
    // The third failure in a row (the step's first group) failed the run: its other three groups were never launched.
    expect(seen.length).toBe(4);
  });

  it('groups that only ever come back null stop the run too', async () => {
    const nulls: TrustedScorer<R> = { score: async (rs) => rs.map(() => null) };
    const grpo = new StandardGrpo<R>(cfg({ maxFailedGroups: 5 }), nulls);
    const rng = new Rng(32);
    const res = await grpo.step(makeGroups(rng, 4));
    expect(res.log.failedAnchorStreak).toBe(4);
    await expect(grpo.step(makeGroups(rng, 4))).rejects.toThrow(TrustedScorerError);
    await expect(grpo.step(makeGroups(rng, 4))).rejects.toThrow(/5 groups in a row .* only null scores/);
  });
});
