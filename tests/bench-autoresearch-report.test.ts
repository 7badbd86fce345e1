// bench autoresearch's report from known cells (no sandbox): its splits are the declared ones, paired intervals and
// verdicts follow the figures, a seed an arm never reaches the level on is named, and on validation the GP-BO
// acquisition the rule picks is the one with the highest median speedup.
import { describe, expect, it } from 'vitest';
import { plan, report, SPLITS, type ArmCell } from '../bench/autoresearch.js';

const base = { quick: false, all: false, progress: () => {} };

/** A cell whose greedy curve reaches `final` at `reachAt` CPU seconds (never, where reachAt is Infinity) and whose episodes score `ep`. */
function cell(final: number, reachAt: number, ep: number, spend = 100): ArmCell {
  const points: Array<[number, number]> = Number.isFinite(reachAt) ? [[reachAt / 2, final - 0.1], [reachAt, final], [spend, final]] : [[spend / 2, final - 0.2], [spend, final - 0.1]];
  return { points, cpuSeconds: spend, slotSeconds: 2 * spend, executions: 10, failed: 0, proposal: { hidden: 8 }, episodes: [ep, ep + 0.01, ep - 0.01, ep, ep + 0.02], unscored: 0, anchorShare: null, anchorWeight: null, budgetS: null };
}

function cells(p: ReturnType<typeof plan>, neverSeed: number): Map<string, ArmCell> {
  const m = new Map<string, ArmCell>();
  p.seeds.forEach((s, i) => {
    const jitter = 0.002 * (i % 3);
    m.set(`${s}/standard`, cell(0.5, 300, 0.5 + jitter, 400));
    m.set(`${s}/wmrl`, { ...cell(0.55, s === neverSeed ? Number.POSITIVE_INFINITY : 30, 0.56 + jitter), anchorShare: 1 / 32, anchorWeight: [1, 1, i === 0 ? 2.5 : 1] });
    m.set(`${s}/pure`, cell(0.4, Number.POSITIVE_INFINITY, 0.4 + jitter, 5));
    m.set(`${s}/random`, cell(0.52, 100, 0.52 + jitter));
    // EI reaches the level soonest; Thompson scores highest at the end.
    m.set(`${s}/gpbo-thompson`, cell(0.53, 60, 0.54 + jitter));
    m.set(`${s}/gpbo-ei`, cell(0.53, 20, 0.53 + jitter));
    m.set(`${s}/gpbo-ucb`, cell(0.53, 80, 0.5 + jitter));
  });
  return m;
}

describe('bench autoresearch report', () => {
  it('runs the declared splits: quick on train, validation with every GP-BO acquisition, test with the chosen one', () => {
    expect(plan({ ...base, quick: true }).seeds).toEqual(SPLITS.sets.seeds.train);
    const v = plan({ ...base, split: 'validation' });
    expect(v.seeds).toEqual(SPLITS.sets.seeds.validation);
    expect(v.arms).toEqual(['standard', 'wmrl', 'pure', 'random', 'gpbo-thompson', 'gpbo-ei', 'gpbo-ucb']);
    const t = plan(base);
    expect(t.seeds).toEqual(SPLITS.sets.seeds.test);
    expect(t.seeds.length).toBeGreaterThanOrEqual(5);
    expect(t.episodes).toEqual(SPLITS.sets.episodes.test);
    expect(t.arms.filter((a) => a.startsWith('gpbo-'))).toHaveLength(1);
  });

  it('on validation: intervals and verdicts from the figures, the never-reached seed named, the rule picking by speedup', () => {
    const p = plan({ ...base, split: 'validation' });
    const r = report(p, { compute: 'c', report: 'k' }, cells(p, 5), { wallS: 1, computed: 0, executed: 0, isolation: true });
    expect(r.result.split).toBe('validation');
    expect(r.result.seeds).toBe(11);
    expect(r.result.speedup_wmrl_never).toBe(1);
    expect(r.result.wmrl_vs_standard).toBe('beats');
    expect(r.result.final_wmrl).toBeCloseTo(0.564, 2);
    expect(r.summary).toContain('seed 5 never reached the level: counted as 0x');
    expect(r.notes).toContain('it picks **GP-BO (EI)**');
    // Per-seed tables: one row per validation seed, twice.
    expect(r.notes!.split('\n').filter((l) => /^\| 11 +\|/.test(l))).toHaveLength(2);
    // The paired interval of WMRL − GP-BO (the acquisition the test run uses, UCB) lies near the 0.06 difference and excludes 0.
    expect(r.result.wmrl_vs_gpbo).toBe('beats');
    expect(Number(r.result.wmrl_minus_gpbo_lo)).toBeGreaterThan(0.04);
    expect(Number(r.result.wmrl_minus_gpbo_hi)).toBeLessThan(0.08);
    expect(r.keys).toEqual({ compute: 'c', report: 'k' });
    // The denoiser's weight on the anchors: above 1 on one step of the first seed only.
    expect(r.summary).toContain(`above 1 on 1 of 3 steps, ${Array(10).fill('0 of 3 steps').join(', ')}`);
    expect(r.result.anchor_weight_wmrl).toBe(1);
  });

  it('says so where the denoiser never acted', () => {
    const p = plan({ ...base, split: 'validation' });
    const m = cells(p, 5);
    for (const s of p.seeds) m.set(`${s}/wmrl`, { ...m.get(`${s}/wmrl`)!, anchorWeight: [1, 1, 1] });
    const r = report(p, { compute: 'c', report: 'k' }, m, { wallS: 1, computed: 0, executed: 0, isolation: true });
    expect(r.summary).toContain('in this run the denoiser never acted');
  });
});
