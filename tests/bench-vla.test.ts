// bench vla under the protocol, from known cells (no training): its RL seeds, start states and (instruction, target
// region) combinations are split as declared, validation's held-out combinations disjoint from test's and both kept
// out of training; its keys separate cells from the report; and the report's per-seed tables, paired intervals,
// two-task claims, WMRL's corrections and the robot episodes sparse only spends follow the cells.
import { describe, expect, it } from 'vitest';
import { COMBINATIONS, EVAL_BLOCK, QUICK_HELD_OUT, SETUP_BLOCK, START_BLOCK, cellOptions, evaluationSplit, type Arm, type ArmCell, type BcCell, type RlCell, type SetupCell } from '../bench/cells/vla.js';
import { SPLITS, cellKey, corrections, plan, protocol, report, type Plan, type VlaCells } from '../bench/vla.js';
import { makeEnv, regionOf, type Combination, type MjEnv } from '../sim/index.js';

const base = { quick: false, all: false, progress: () => {} };
const E = 20;
const wins = (k: number) => Array.from({ length: E }, (_, e) => (e < k ? 1 : 0));
const same = (a: Combination, b: Combination) => a.goal === b.goal && a.region === b.region;

const setupCell: SetupCell = {
  bcLoss: 0.15, demoSteps: 9000, demoSuccess: 0.99, wmValLoss: -2.9, trainSeeds: 1500, controlHz: 50, horizon: 100,
  latent: { states: 1000, heldOut: 100, valMse: 0.1, valRelMse: 0.3, actionGap: 0.1, actionGapConstant: 0.2 },
  gaps: { states: 900, twinVsCamera: 0.09, faceVsCamera: 0.27, spread: 0.65 },
  agreement: { nominal: 0.38, firstSteps: { steps: [25, 50], nominal: [0.7, 0.3] }, faceOnRobot: -0.1, repeatability: 0.7 },
};
/** Every third draw names the true goal: a policy that follows the drawn instruction keeps those of its wins alone. */
const chance = (k: number) => wins(k).map((x, e) => (e % 3 === 0 ? x : 0));
/** The clone is not fooled by shuffled instructions (it solves what it solved); WMRL's VLA falls to its chance. */
const bcCell = (k: number): BcCell => ({ arm: 'bc', states: wins(k), combinations: wins(k >> 1), shuffled: { outcomes: wins(k), chance: chance(k), choices: 3 }, demonstrator: { states: 1, combinations: 0.98 }, expert: { states: 0.04, combinations: 0.02 }, cellSeconds: 30, cpuSeconds: 40 });

/** An RL arm's cell: `k` of E states and k/2 of E combinations solved at the end; 8 updates; WMRL with the Corrector's rows. */
function rlCell(arm: Exclude<Arm, 'bc'>, k: number, o: { episodes?: number; denoised?: boolean; mapFrom?: number | null } = {}): RlCell {
  const U = 8, wmrl = arm === 'wmrl';
  return {
    arm, states: wins(k), combinations: wins(k >> 1), shuffled: wmrl ? { outcomes: chance(k), chance: chance(k), choices: 3 } : null,
    curve: [4, 8].map((u) => ({ update: u, robotHours: u / 10, success: u === 8 ? k / E : k / (2 * E) })),
    updates: U, robotEpisodes: o.episodes ?? (arm === 'dense_only' ? 0 : 32), robotHours: 0.8, robotSuccesses: arm === 'dense_only' ? 0 : 5, computeSeconds: 100, cellSeconds: 110, cpuSeconds: 150,
    groups: Array(U).fill(arm === 'sparse_only' ? 1 : 16), realGroups: Array.from({ length: U }, (_, u) => (arm === 'sparse_only' ? 1 : wmrl ? u % 2 : 0)),
    anchorWeight: wmrl ? Array.from({ length: U }, (_, u) => (o.denoised && u >= 6 ? 2.5 : 1)) : null,
    calibrated: wmrl ? Array.from({ length: U }, (_, u) => o.mapFrom != null && u + 1 >= o.mapFrom) : null,
    biasReduction: wmrl ? Array.from({ length: U }, (_, u) => (o.mapFrom != null && u + 1 > o.mapFrom ? 0.5 : null)) : null,
    imaginedWeight: wmrl ? Array(U).fill(1) : null,
    wmrl: wmrl ? { identified: { context: [0.5, -0.6, -0.9, -0.3], delay: 3 }, guard: { updatesFlagged: 0, maxFlagged: 0 }, agreement: { identified: 0.2, firstSteps: [0.6, 0.4] } } : null,
  };
}

/**
 * Validation cells of both tasks: the clone solves 4 of 20 states; sparse only 6; dense only and WMRL 12 (5 on
 * `lowSeed` for WMRL and dense only alike), so WMRL beats sparse only and the clone but not dense only. The denoiser
 * acts on no seed, the debias map on all but the first; on `oddSeed` sparse only spent other robot episodes than WMRL.
 */
function cells(p: Plan, lowSeed: number, oddSeed: number): VlaCells {
  const arms = new Map<string, ArmCell>();
  for (const task of p.tasks) {
    p.seeds.forEach((s, i) => {
      const top = s === lowSeed ? 5 : 12;
      arms.set(cellKey(task, s, 'bc'), bcCell(4));
      arms.set(cellKey(task, s, 'sparse_only'), rlCell('sparse_only', 6, s === oddSeed ? { episodes: 40 } : {}));
      arms.set(cellKey(task, s, 'dense_only'), rlCell('dense_only', top));
      arms.set(cellKey(task, s, 'wmrl'), rlCell('wmrl', top, { denoised: false, mapFrom: i === 0 ? null : 3 }));
    });
  }
  return { setups: new Map(p.tasks.map((t) => [t, setupCell])), arms };
}
const latency = { reach: Array.from({ length: 100 }, (_, i) => 0.05 + i / 1000), push: Array.from({ length: 100 }, (_, i) => 0.04 + i / 1000) };

describe('bench vla: splits and keys', () => {
  it('runs the declared splits: quick on train, at least five new seeds on test, and three ways of combinations', () => {
    const quick = plan({ ...base, quick: true }), v = plan({ ...base, split: 'validation' }), t = plan(base);
    expect(quick.seeds).toEqual(SPLITS.sets.seeds.train);
    expect(v.seeds).toEqual(SPLITS.sets.seeds.validation);
    expect(t.seeds).toEqual(SPLITS.sets.seeds.test);
    expect(v.seeds.length).toBeGreaterThanOrEqual(5);
    expect(t.seeds.length).toBeGreaterThanOrEqual(5);
    expect(t.seeds.filter((s) => v.seeds.includes(s) || s <= 1)).toEqual([]);
    expect(t.tasks).toEqual(['reach', 'push']);
    expect(plan({ ...base, task: 'push' }).tasks).toEqual(['push']);
    expect(() => plan({ ...base, task: 'pick' })).toThrow('bench vla: --task pick: not one of reach, push');
    // Each split evaluates its own block of start states and holds out its own combinations, withholding the other's.
    for (const [x, split] of [[quick, 'train'], [v, 'validation'], [t, 'test']] as const) {
      expect(x.cell.eval.seed0).toBe(EVAL_BLOCK[split] * START_BLOCK);
      expect(SPLITS.splitOf('starts', EVAL_BLOCK[split])).toBe(split);
      for (const c of x.cell.heldOut) expect(SPLITS.splitOf('combinations', c)).toBe(split);
      for (const c of x.cell.withheld) expect(x.cell.heldOut.some((h) => same(h, c))).toBe(false);
    }
    expect(SPLITS.splitOf('starts', SETUP_BLOCK)).toBe('train');
    expect(v.cell.withheld).toEqual(COMBINATIONS.test);
    expect(t.cell.withheld).toEqual(COMBINATIONS.validation);
    expect(quick.cell.heldOut).toEqual(QUICK_HELD_OUT);
    expect(quick.cell.withheld).toEqual([...COMBINATIONS.validation, ...COMBINATIONS.test]);
    // Every goal and every region trains, and validation and test together leave six of the twelve combinations.
    for (let g = 0; g < 3; g++) expect(COMBINATIONS.train.some((c) => c.goal === g)).toBe(true);
    for (let r = 0; r < 4; r++) expect(COMBINATIONS.train.some((c) => c.region === r)).toBe(true);
    expect(COMBINATIONS.train.length + COMBINATIONS.validation.length + COMBINATIONS.test.length).toBe(12);
    expect(() => cellOptions({ quick: false, split: 'train' })).toThrow(/a quick run evaluates the train split and a full run validation or test/);
  });

  it("builds validation's and test's evaluations on one training set, each in its block and on its own combinations", async () => {
    const [v, t] = await Promise.all([evaluationSplit('reach', plan({ ...base, split: 'validation' }).cell), evaluationSplit('reach', plan(base).cell)]);
    expect(t.train).toEqual(v.train);
    const env = await makeEnv({ task: 'reach' });
    const combo = (seed: number): Combination => {
      env.reset(seed);
      const g = (env as MjEnv).goalOf();
      return { goal: g.goal, region: regionOf(g.position![0], g.position![1], 4) };
    };
    const inSplit = (list: readonly Combination[]) => (c: Combination) => list.some((x) => same(x, c));
    try {
      expect(v.train.every((s) => s < START_BLOCK)).toBe(true);
      expect(v.train.slice(0, 300).map(combo).every(inSplit(COMBINATIONS.train))).toBe(true);
      for (const [x, split] of [[v, 'validation'], [t, 'test']] as const) {
        expect(x.heldOutStates).toHaveLength(100);
        expect(x.heldOutCombinations).toHaveLength(100);
        for (const s of [...x.heldOutStates, ...x.heldOutCombinations]) expect(Math.floor(s / START_BLOCK)).toBe(EVAL_BLOCK[split]);
        expect(x.heldOutStates.map(combo).every(inSplit(COMBINATIONS.train))).toBe(true);
        expect(x.heldOutCombinations.map(combo).every(inSplit(COMBINATIONS[split]))).toBe(true);
      }
    } finally {
      env.dispose();
    }
  }, 60_000);

  it('keeps the cells of one split under one computation key whichever tasks a run reports', () => {
    const both = protocol.keys(base), reach = protocol.keys({ ...base, task: 'reach' }), push = protocol.keys({ ...base, task: 'push' });
    expect(reach.compute).toBe(both.compute);
    expect(push.compute).toBe(both.compute);
    expect(new Set([both.report, reach.report, push.report]).size).toBe(3);
    const splits = [protocol.keys({ ...base, quick: true }), protocol.keys({ ...base, split: 'validation' }), both];
    expect(new Set(splits.map((k) => k.compute)).size).toBe(3);
  });
});

describe('bench vla: report', () => {
  const p = plan({ ...base, split: 'validation' });
  const [first, , third, , fifth] = p.seeds as [number, number, number, number, number];
  const r = report(p, { compute: 'c', report: 'k' }, cells(p, fifth, third), { wallS: 60, computed: 3, latency });

  it('states paired intervals and verdicts from the cells, per task and over both, per seed for every arm', () => {
    expect(r.result.split).toBe('validation');
    expect(r.result.seeds).toBe(5);
    // WMRL solves 12 of 20 on four seeds and 5 on one: 0.53 on each task; the clone 4 of 20.
    expect(r.result.wmrl).toBeCloseTo(0.53, 6);
    expect(r.result.reach_wmrl).toBeCloseTo(0.53, 6);
    expect(r.result.bc).toBeCloseTo(0.2, 6);
    expect(r.result.reach_wmrl_combinations).toBeCloseTo(0.26, 6);
    expect(r.result.wmrl_vs_sparse_only).toBe('beats');
    expect(r.result.wmrl_vs_bc).toBe('beats');
    // Dense only solves what WMRL solves, state for state: a paired difference of exactly 0, no difference shown.
    expect(r.result.wmrl_minus_dense_only).toBe(0);
    expect(r.result.wmrl_vs_dense_only).toBe('no_difference_shown');
    expect(r.result.push_wmrl_vs_dense_only).toBe('no_difference_shown');
    expect(Number(r.result.wmrl_minus_sparse_only_lo)).toBeLessThanOrEqual(Number(r.result.wmrl_minus_sparse_only));
    expect(Number(r.result.wmrl_minus_sparse_only_lo)).toBeGreaterThan(0);
    // Five per-seed tables per task (states, combinations, robot, corrections, shuffled instructions), one row per validation seed in each.
    expect(r.notes!.split('\n').filter((l) => new RegExp(`^\\| ${fifth} +\\|`).test(l))).toHaveLength(10);
    expect(r.rows).toHaveLength(2 * (4 + 2));
    expect(r.keys).toEqual({ compute: 'c', report: 'k' });
  });

  it('reports the shuffled-instruction ablation: the clone above its chance, WMRL at it, with chance and intervals per task', () => {
    // WMRL: 12 of 20 (5 on the fifth seed), of which the draws that named the true goal keep 4 (2): 0.2 on four seeds, 0.1 on one.
    expect(r.result.reach_shuffled_success_wmrl).toBeCloseTo(0.18, 6);
    expect(r.result.reach_shuffled_chance_wmrl).toBeCloseTo(0.18, 6);
    expect(r.result.reach_shuffled_minus_chance_wmrl).toBe(0);
    expect(r.result.reach_shuffled_vs_chance_wmrl).toBe('no_difference_shown');
    // The clone: 4 of 20 on every seed with or without the true instruction; its chance keeps 2 of them.
    expect(r.result.push_shuffled_success_bc).toBeCloseTo(0.2, 6);
    expect(r.result.push_shuffled_chance_bc).toBeCloseTo(0.1, 6);
    expect(r.result.push_shuffled_vs_chance_bc).toBe('beats');
    expect(Number(r.result.push_shuffled_minus_chance_bc_lo)).toBeGreaterThan(0);
    expect(r.summary).toContain('one of the task\'s 3 drawn at random');
    expect(r.summary).toMatch(/WMRL 0\.18\d* \[[^\]]+\] against its chance 0\.18\d* \[[^\]]+\], shuffled − chance \+?0 \[[^\]]+\] \(no difference from chance shown\)/);
    expect(r.summary).toContain("The VLA's proprioception: the robot's own state");
    expect(r.notes).toContain('reach: per seed, success on the held-out start states with shuffled instructions / its chance');
    // A cell without its shuffled evaluation is refused, naming it.
    const m = cells(p, fifth, third);
    (m.arms as Map<string, ArmCell>).set(cellKey('push', first, 'wmrl'), { ...rlCell('wmrl', 12), shuffled: null });
    expect(() => report(p, { compute: 'c', report: 'k' }, m, { wallS: 1, computed: 0, latency })).toThrow(`bench vla: the wmrl cell for push, seed ${first} holds no evaluation with shuffled instructions`);
  });

  it("restates the earlier report's two-task claims with their intervals", () => {
    expect(r.result.wmrl_above_both).toBe('not_shown');
    // WMRL − the clone is +0.33, its interval well above +0.1.
    expect(r.result.wmrl_10_points_over_bc).toBe('shown');
    expect(r.summary).toContain('"WMRL above both single-signal rows" — not shown');
    expect(r.summary).toContain('"at least 10 points over behaviour cloning" — shown');
  });

  it("says where WMRL's corrections never acted, and where sparse only spent other robot episodes than WMRL", () => {
    expect(r.result.reach_denoiser_acted_seeds).toBe(0);
    expect(r.result.reach_debias_acted_seeds).toBe(4);
    expect(r.summary).toContain('The denoiser never acted on any seed: WMRL ran without Inverse-Variance Denoising');
    expect(r.summary).toContain(`the debias map never acted on seed ${first} (WMRL ran without a calibrated world model there)`);
    expect(r.summary).toContain(`sparse only other counts on seed ${third}: 32 / 32 / 40 / 32 / 32`);
    expect(r.result.reach_anchor_share_wmrl).toBeCloseTo(0.5 / 16, 6);
    expect(corrections(rlCell('wmrl', 5, { denoised: true, mapFrom: 3 }))).toMatchObject({ anchorsPerUpdate: 0.5, denoised: true, weightEnd: 2.5, weightMax: 2.5, mapFrom: 3, biasReduction: 0.5, gateShare: 1 });
    expect(() => corrections(rlCell('sparse_only', 5))).toThrow(/the cell is of sparse_only, an arm without the Corrector/);
  });

  it('reports one task alone with its own keys, and refuses a report with a cell or a setup missing, naming it', () => {
    const one = plan({ ...base, split: 'validation', task: 'push' });
    const alone = report(one, { compute: 'c', report: 'k' }, cells(one, fifth, third), { wallS: 1, computed: 0, latency });
    expect(alone.result.wmrl).toBeCloseTo(0.53, 6);
    expect(alone.result.push_wmrl).toBeUndefined();
    expect(alone.rows).toHaveLength(4 + 2);
    const m = cells(p, fifth, third);
    (m.arms as Map<string, ArmCell>).delete(cellKey('reach', first, 'dense_only'));
    expect(() => report(p, { compute: 'c', report: 'k' }, m, { wallS: 1, computed: 0, latency })).toThrow(`bench vla: no cell for reach, seed ${first}, dense_only`);
    const n = cells(p, fifth, third);
    (n.setups as Map<string, SetupCell>).delete('push');
    expect(() => report(p, { compute: 'c', report: 'k' }, n, { wallS: 1, computed: 0, latency })).toThrow('bench vla: no setup cell for push');
  });
});
