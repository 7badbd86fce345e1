// bench embodied under the protocol, from known cells (no training): its RL seeds and start states are split as
// declared, with no run's prompts and no trainer's own measurement on an evaluation state; its keys separate cells
// from the report; and the report's per-seed tables, paired intervals, speedups (a seed never reached, a seed without a
// level), the updates the trainers handed back and its account of corrections that never acted follow the cells. Then
// a cell from training (a short run on the quick sizes): its outcomes are the handed-back policy's, and the trainer's
// measurement runs on its own train block, never on the split's states.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVAL_BLOCK, SPLITS, binomialUpperTail, cellKey, corrections, doNoHarm, filterPlan, filterProblem, plan, protocol, report, type EmbodiedCell, type Plan } from '../bench/embodied.js';
import { protocolKeys, runKeySources, variantKey } from '../bench/lib/protocol.js';
import { POST_TRAIN_LR } from '../recipes/options.js';
import { CHOSEN, CORE_VARIANTS, HEADLINE, MEASURE_BLOCK, armOf, GRIDS, SETUP_MODULE, SIZES, START_BLOCK, SeedSetup, gridVariants, promptBlock, variantKeySpecs, variants, type CellOptions, type TunedFamily, type VariantCell, type VariantName } from '../bench/cells/embodied.js';
import * as grpo from '../bench/cells/embodied/grpo.js';
import { repeatability, splitView, type EvaluationSeen, type TrainerInputs, type TrainerOutcome } from '../bench/cells/embodied/setup.js';
import type { Policy } from '../policies/types.js';
import { evaluateSuccess } from '../wmrl/embodied.js';
import type { RunRow } from '../wmrl/run-state.js';
import { DEFAULT_PRETRAIN } from '../wmrl/sim-setup.js';

const base = { quick: false, all: false, progress: () => {} };
const EPISODES = 20;
/** The first k of EPISODES start states solved. */
const wins = (k: number) => Array.from({ length: EPISODES }, (_, e) => (e < k ? 1 : 0));

/** A variant's cell: success climbing to `final` over 5 evaluations, `hoursPerEval` robot hours apart, `wins` of EPISODES start states solved at the end. */
function vcell(final: number, hoursPerEval: number, extra: Partial<VariantCell> = {}): VariantCell {
  const solved = Math.round(final * EPISODES);
  const points = [1, 2, 3, 4, 5].map((k): [number, number] => [k * hoursPerEval, k === 5 ? solved / EPISODES : (final * k) / 6]);
  return {
    points, outcomes: wins(solved), keptUpdate: 20, updatedSuccess: points.map(([, y]) => y),
    measure: { episodes: 10, start: 0.1, success: points.map(([, y]) => y), robotHours: 0.01 }, startSuccess: 0.1, startOutcomes: wins(2), startHours: 0.01, calibration: null, robotHours: 5 * hoursPerEval, robotEpisodes: 100, computeSeconds: 10,
    groups: 8, realGroups: Array(20).fill(0), anchorWeight: null, calibrated: null, biasReduction: null, agreements: null, alarms: 0, imaginedTransitions: 0, imagineSeconds: 0, ...extra,
  };
}
const corrected = (denoised: boolean, mapFrom: number | null): Partial<VariantCell> => ({
  groups: 32,
  realGroups: Array.from({ length: 20 }, (_, u) => (u % 2 ? 1 : 0)),
  anchorWeight: Array.from({ length: 20 }, (_, u) => (denoised && u >= 15 ? 1.8 : 1)),
  calibrated: Array.from({ length: 20 }, (_, u) => mapFrom !== null && u + 1 >= mapFrom),
  biasReduction: Array.from({ length: 20 }, (_, u) => (mapFrom !== null && u + 1 > mapFrom ? 0.4 : null)),
  agreements: [0.1, 0.3, 0.2],
});

/**
 * Validation cells: the start solves 2 of 20 states; standard GRPO 8 (at 1 h per evaluation); full WMRL 12 (at 0.05 h),
 * except on `neverSeed`, where it stays at 6 and never reaches standard's level; on `flatSeed` standard GRPO gains
 * nothing over the start. The denoiser acts on no seed; the debias map on all but the first.
 */
function cells(p: Plan, neverSeed: number, flatSeed: number, task = p.tasks[0]!): Map<string, EmbodiedCell> {
  const m = new Map<string, EmbodiedCell>();
  p.seeds.forEach((s, i) => {
    m.set(cellKey(task, s, 'bc'), { success: 0.1, outcomes: Array.from({ length: EPISODES }, (_, e) => (e < 2 ? 1 : 0)), repeatability: 0.6 });
    m.set(cellKey(task, s, 'standard'), vcell(s === flatSeed ? 0.1 : 0.4, 1));
    m.set(cellKey(task, s, 'anchors_only'), vcell(0.3, 0.12));
    m.set(cellKey(task, s, 'pure_wm'), vcell(0.1, 0));
    // The calibrating arms: identified delay 3 on every seed, the calibrated clone at 0.35 on the split; put back on the last seed.
    const cal = { delay: 3, scales: { mass_scale: 1.8, friction_scale: 0.6, damping_scale: 0.4, actuator_gain_scale: 0.7 }, robotEpisodes: 16, demoSuccess: 1, cloneLoss: 0.02, roundSuccess: [0.9, 0.95], round: 1, before: 0.1, after: i === 4 ? 0 : 0.9, kept: i !== 4 };
    const calibrated = { calibration: cal, startSuccess: 0.35, startOutcomes: wins(7), startHours: 0.04 };
    m.set(cellKey(task, s, 'standard_cal'), vcell(0.5, 1, calibrated));
    const fullLike = (final: number) => vcell(s === neverSeed ? 0.3 : final, 0.05, { ...corrected(false, i === 0 ? null : 12), ...calibrated });
    // The headline arm (the product's recipe's) at 0.6, the other way of imagining at 0.7.
    m.set(cellKey(task, s, HEADLINE), fullLike(0.6));
    m.set(cellKey(task, s, HEADLINE === 'full' ? 'full_sim' : 'full'), fullLike(0.7));
    m.set(cellKey(task, s, 'full_active'), fullLike(0.6));
    m.set(cellKey(task, s, 'pure_sim'), vcell(0.65, 0.01, calibrated));
    m.set(cellKey(task, s, 'debias'), vcell(0.6, 0.05, corrected(false, 12)));
    m.set(cellKey(task, s, 'denoise'), vcell(0.5, 0.05, corrected(true, null)));
    // The tuned robot-only baselines: standard GRPO's robot time, below full WMRL's success.
    for (const v of p.variants.filter((x) => !['bc', ...CORE_VARIANTS].includes(x))) m.set(cellKey(task, s, v), vcell(0.35, 1));
    // Standard GRPO handed back its start on the first seed, an earlier update on the second.
    if (i < 2) m.set(cellKey(task, s, 'standard'), { ...(m.get(cellKey(task, s, 'standard')) as VariantCell), keptUpdate: i === 0 ? 0 : 12 });
  });
  return m;
}
const throughput = { reach: { imagineTps: 60_000, simSps: 20_000, rollouts: 256, horizon: 100 } };

describe('bench embodied: splits and keys', () => {
  it('runs the declared splits: quick on train, at least five seeds on validation and test, no run prompting on an evaluation state', () => {
    expect(plan({ ...base, quick: true }).seeds).toEqual(SPLITS.sets.seeds.train);
    const v = plan({ ...base, split: 'validation' }), t = plan(base);
    expect(v.seeds).toEqual(SPLITS.sets.seeds.validation);
    expect(t.seeds).toEqual(SPLITS.sets.seeds.test);
    expect(v.seeds.length).toBeGreaterThanOrEqual(5);
    expect(t.seeds.length).toBeGreaterThanOrEqual(5);
    expect(t.seeds.filter((s) => v.seeds.includes(s))).toEqual([]);
    expect(v.cell.evalSeed0).toBe(EVAL_BLOCK.validation * START_BLOCK);
    expect(t.cell.evalSeed0).toBe(EVAL_BLOCK.test * START_BLOCK);
    expect(SPLITS.splitOf('starts', EVAL_BLOCK.validation)).toBe('validation');
    expect(SPLITS.splitOf('starts', EVAL_BLOCK.test)).toBe('test');
    // Every run's prompts (the most any variant draws) lie in its own train block, away from every evaluation's states.
    const most = Math.max(...Object.values(variants(t.cell.prompts)).map((x) => x.prompts)) * t.cell.updates;
    const evals = [plan({ ...base, quick: true }), v, t].map((x) => [x.cell.evalSeed0, x.cell.evalSeed0 + x.cell.evalEpisodes] as const);
    for (const s of [...SPLITS.sets.seeds.train, ...v.seeds, ...t.seeds]) {
      expect(SPLITS.splitOf('starts', promptBlock(s))).toBe('train');
      const lo = promptBlock(s) * START_BLOCK, hi = lo + most;
      for (const [a, b] of evals) expect(hi <= a || lo >= b, `seed ${s}`).toBe(true);
    }
    // The trainers' own measurement reads a train block of its own: no prompt, no pretraining, no split's evaluation.
    expect(SPLITS.splitOf('starts', MEASURE_BLOCK)).toBe('train');
    const measure = [MEASURE_BLOCK * START_BLOCK, MEASURE_BLOCK * START_BLOCK + SIZES.full.measureEpisodes] as const;
    for (const [a, b] of evals) expect(measure[1] <= a || measure[0] >= b).toBe(true);
    for (const s of [...SPLITS.sets.seeds.train, ...v.seeds, ...t.seeds]) expect(promptBlock(s)).not.toBe(MEASURE_BLOCK);
    const pretrainTop = DEFAULT_PRETRAIN.daggerRounds * 100_000 + Math.max(...t.seeds, ...v.seeds) * 1000 + DEFAULT_PRETRAIN.bcEpisodes;
    expect(pretrainTop).toBeLessThan(measure[0]);
    // The test split runs each tuned baseline's chosen grid point; validation every point.
    const families = Object.keys(GRIDS) as TunedFamily[];
    expect(t.variants).toEqual(['bc', ...CORE_VARIANTS, ...families.map((f) => CHOSEN[f])]);
    expect(v.variants).toEqual(['bc', ...CORE_VARIANTS, ...families.flatMap(gridVariants)]);
    // The arms that post-train the calibrated clone take the product's step.
    const all = variants(SIZES.full.prompts);
    for (const arm of ['full', 'debias', 'denoise', 'full_active', 'full_sim', 'pure_sim', 'standard_cal']) expect(all[arm]!.options).toMatchObject({ lr: POST_TRAIN_LR.calibrated });
    // pure_sim is full_sim without the anchors: the same imagination, no corrector.
    const { corrector: _c, ...simOpts } = all.full_sim!.options as { corrector: unknown };
    expect(all.pure_sim!.options).toEqual({ ...simOpts, corrector: false });
    expect('lr' in all.pure_wm!.options).toBe(false);
    for (const f of families) expect(gridVariants(f)).toContain(CHOSEN[f]);
    expect(gridVariants('ppo')).toEqual(['ppo_lr3e-4', 'ppo_lr1e-3']);
  });

  it('computes a subset of a split\'s cells in the plan\'s order, refusing seeds and variants it does not run', () => {
    const v = plan({ ...base, split: 'validation' });
    expect(filterPlan(v, { seeds: [3, 1], variants: ['full', 'bc'] })).toEqual({ seeds: [1, 3], variants: ['bc', 'full'] });
    expect(filterPlan(v, {})).toEqual({ seeds: v.seeds, variants: v.variants });
    expect(() => filterPlan(v, { seeds: [100] })).toThrow(/--seeds 100: not among the validation split's seeds/);
    expect(filterProblem(plan(base), { variants: ['ppo_lr1e-3'] })).toMatch(/--variants ppo_lr1e-3: not among the test split's variants/);
    expect(filterProblem(plan({ ...base, quick: true }), { seeds: [0] })).toMatch(/a quick run caches nothing/);
  });

  it('reports the worn robot beside gap on the test split alone, and refuses it where choices are made', () => {
    expect(plan({ ...base, all: true }).tasks).toEqual(['reach', 'push', 'reach@worn', 'push@worn']);
    expect(plan({ ...base, all: true, split: 'validation' }).tasks).toEqual(['reach', 'push']);
    expect(plan({ ...base, all: true, quick: true }).tasks).toEqual(['reach', 'push']);
    expect(() => plan({ ...base, task: 'push@worn', split: 'validation' })).toThrow(/push@worn runs on the test split only: no choice is made on the worn robot/);
    expect(() => armOf('reach@worn@gap')).toThrow(/neither a task nor task@profile/);
    expect(armOf('reach')).toEqual({ task: 'reach', profile: 'gap' });
    // Its cells are the arm's own, under the test split's one computation key.
    const t = plan({ ...base, task: 'reach@worn' });
    expect(protocol.keys({ ...base, task: 'reach@worn' }).compute).toBe(protocol.keys(base).compute);
    const r = report(t, { compute: 'c', report: 'k' }, cells(t, t.seeds[1]!, t.seeds[2]!), { wallS: 1, computed: 0, throughput });
    expect(r.title).toBe('Embodied WMRL: post-training on the worn robot (reach, test split)');
    expect(r.summary).toContain('the robot is the sim under the worn profile (a second reality gap, reported on the test split alone: no choice was made on it)');
    const two = plan({ ...base, all: true });
    const both = new Map([...cells(two, two.seeds[1]!, two.seeds[2]!, 'reach'), ...cells(two, two.seeds[1]!, two.seeds[2]!, 'push'), ...cells(two, two.seeds[1]!, two.seeds[2]!, 'reach@worn'), ...cells(two, two.seeds[1]!, two.seeds[2]!, 'push@worn')]);
    const rr = report(two, { compute: 'c', report: 'k' }, both, { wallS: 1, computed: 0, throughput: { ...throughput, push: throughput.reach } });
    expect(rr.result.reach_worn_final_success_wmrl).toBeCloseTo(Number(rr.result.final_success_wmrl), 9);
    expect(rr.title).toBe('Embodied WMRL: post-training on the gap and worn robots (reach and push, test split)');
  });

  it('keeps the cells of one split under one computation key whichever tasks a run reports', () => {
    const reach = protocol.keys(base), push = protocol.keys({ ...base, task: 'push' }), all = protocol.keys({ ...base, all: true });
    expect(push.compute).toBe(reach.compute);
    expect(all.compute).toBe(reach.compute);
    expect(new Set([reach.report, push.report, all.report]).size).toBe(3);
    const splits = [protocol.keys({ ...base, quick: true }), protocol.keys({ ...base, split: 'validation' }), reach];
    expect(new Set(splits.map((k) => k.compute)).size).toBe(3);
  });
});

describe('bench embodied: per-variant computation keys', () => {
  const v = plan({ ...base, split: 'validation' });
  const keys = protocol.keys({ ...base, split: 'validation' });
  const specs = variantKeySpecs(v.variants.filter((x) => x !== 'bc'), v.cell.prompts);
  const sources = (name: string) => runKeySources({ entry: specs[name]!.entry });

  it("keys every trained variant by the shared setup and its family's trainer alone; the start by the setup", () => {
    expect(Object.keys(keys.variants!).sort()).toEqual(v.variants.filter((x) => x !== 'bc').sort());
    expect(variantKey(keys, 'bc')).toBe(keys.compute);
    expect(new Set(Object.values(keys.variants!)).size).toBe(Object.keys(keys.variants!).length);
    const shared = runKeySources({ entry: SETUP_MODULE });
    for (const f of ['wmrl/sim-setup.ts', 'wmrl/embodied.ts', 'policies/pg.ts']) expect(shared).toContain(f);
    // No trainer, and not the file that declares the variants, is in the setup every cell shares.
    for (const f of ['wmrl/train_standard.ts', 'wmrl/train_wmrl.ts', 'bench/cells/embodied.ts', 'bench/embodied.ts']) expect(shared).not.toContain(f);
    expect(sources('standard')).toContain('wmrl/train_standard.ts');
    expect(sources('standard')).not.toContain('wmrl/train_wmrl.ts');
    expect(sources('full')).toContain('wmrl/train_wmrl.ts');
    for (const name of Object.keys(specs)) expect(sources(name)).not.toContain('bench/cells/embodied.ts');
  });

  it("keeps a variant's key when another variant is added, and keeps each trainer in its own variants' keys", () => {
    const keysOf = (names: string[]) => protocolKeys({ compute: { entry: SETUP_MODULE, options: v.cell }, variants: variantKeySpecs(names, v.cell.prompts), report: { entry: 'bench/embodied.ts', options: names } });
    const core = keysOf([...CORE_VARIANTS]), more = keysOf([...CORE_VARIANTS, 'ppo_lr3e-4', 'rlpd_lr1e-4']);
    for (const name of CORE_VARIANTS) expect(more.variants![name]).toBe(core.variants![name]);
    expect(more.compute).toBe(core.compute);
    expect(more.report).not.toBe(core.report);
    const own = { 'wmrl/train_ppo.ts': 'ppo_lr3e-4', 'wmrl/train_rlpd.ts': 'rlpd_lr3e-4', 'wmrl/train_bc.ts': 'bc_more_ep10', 'policies/q-ensemble.ts': 'rlpd_lr1e-4', 'policies/critic.ts': 'ppo_lr1e-3' };
    for (const [file, holder] of Object.entries(own)) {
      for (const name of Object.keys(specs)) expect(sources(name).includes(file), `${file} in ${name}'s key`).toBe(specs[name]!.entry === specs[holder]!.entry);
    }
  });

  it("gives two variants of one trainer different keys by their options alone", () => {
    expect(specs.standard!.entry).toBe(specs.anchors_only!.entry);
    expect(keys.variants!.standard).not.toBe(keys.variants!.anchors_only);
    expect(specs.debias!.entry).toBe(specs.full!.entry);
    expect(keys.variants!.debias).not.toBe(keys.variants!.full);
    expect(new Set(gridVariants('rlpd').map((n) => keys.variants![n])).size).toBe(gridVariants('rlpd').length);
    // A quick run's learner budget is another option: another key.
    expect(variantKeySpecs(['rlpd_lr3e-4'], 8, 'quick')['rlpd_lr3e-4']!.options).not.toEqual(specs['rlpd_lr3e-4']!.options);
  });
});

describe('bench embodied: report', () => {
  const p = plan({ ...base, split: 'validation' });
  const [first, second, third] = p.seeds as [number, number, number];
  const r = report(p, { compute: 'c', report: 'k' }, cells(p, second, third), { wallS: 60, computed: 3, throughput });

  it('states paired intervals and verdicts from the cells, per seed, for every variant', () => {
    expect(r.result.split).toBe('validation');
    expect(r.result.seeds).toBe(5);
    // The headline arm solves 12 of 20 on four seeds and 6 on one: mean 0.54 (the other arm 14 and 6: 0.62); standard 8 of 20 (2 on the flat seed).
    expect(r.result.final_success_wmrl).toBeCloseTo(0.54, 6);
    // The report heads with the product's recipe's arm.
    expect(r.result.wmrl_arm).toBe(HEADLINE);
    const [head, other] = HEADLINE === 'full' ? ['final_success_full_learned', 'final_success_full_sim'] : ['final_success_full_sim', 'final_success_full_learned'];
    expect(r.result[head!]).toBe(r.result.final_success_wmrl);
    expect(r.result[other!]).toBeCloseTo(0.62, 6);
    expect(r.result.final_success_standard).toBeCloseTo(0.34, 6);
    expect(r.result.wmrl_vs_standard).toBe('beats');
    expect(r.result.wmrl_vs_pure_wm).toBe('beats');
    expect(Number(r.result.wmrl_minus_anchors_only_lo)).toBeLessThanOrEqual(Number(r.result.wmrl_minus_anchors_only));
    expect(r.rows).toHaveLength(p.variants.length);
    // Six per-seed tables (success, hours, speedups, the updates handed back, do no harm, corrections), one row per validation seed in each.
    expect(r.notes!.split('\n').filter((l) => new RegExp(`^\\| ${p.seeds.at(-1)} +\\|`).test(l))).toHaveLength(6);
    expect(r.keys).toEqual({ compute: 'c', report: 'k' });
    // Every grid point of the tuned baselines is reported on validation, with its paired difference from full WMRL.
    for (const name of gridVariants('ppo')) {
      expect(r.result[`final_success_${name}`]).toBeCloseTo(0.35, 6);
      expect(Number(r.result[`wmrl_minus_${name}`])).toBeCloseTo(0.54 - 0.35, 6);
    }
    expect(r.summary).toContain('Robot-only baselines, each from the same start');
    const rlpd = variants(8)['rlpd_lr3e-4']!.options as { utd: number };
    expect(r.summary).toContain(`RLPD ran ${rlpd.utd} critic updates per robot step with 2 critics of 128×128: the compute this machine affords, far below RLPD's 20`);
    expect(r.rows.map((row) => row[0])).toContain(variants(8)['ppo_lr1e-3']?.label ?? 'missing');
    // Each family's best grid point on this validation run: tied points keep the first; a higher one is named.
    expect(r.summary).toContain("grid point of the highest mean success on this task (what `CHOSEN` is to name, read beside the other task's; ties keep the first): ppo ppo_lr3e-4 (0.35; ppo_lr1e-3 0.35)");
    const m = cells(p, second, third);
    for (const s of p.seeds) m.set(cellKey(p.tasks[0]!, s, 'rlpd_lr3e-4'), vcell(0.45, 1));
    expect(report(p, { compute: 'c', report: 'k' }, m, { wallS: 60, computed: 3, throughput }).summary).toContain('rlpd rlpd_lr3e-4 (0.45; rlpd_lr1e-4 0.35)');
    // The test split runs the chosen points alone and names no best.
    const t = plan(base);
    expect(report(t, { compute: 'c', report: 'k' }, cells(t, t.seeds[1]!, t.seeds[2]!), { wallS: 1, computed: 0, throughput }).summary).not.toContain('grid point of the highest');
  });

  it("states the calibration, and the issue's headline figures against the best robot-only baseline", () => {
    expect(r.result.success_wmrl).toBe(r.result.final_success_wmrl);
    expect(Number(r.result.success_wmrl_lo)).toBeLessThanOrEqual(Number(r.result.success_wmrl));
    // Robot-only: standard (0.34 over seeds), the anchors alone 0.3, the tuned baselines 0.35; standard GRPO from the
    // calibrated clone (0.5) uses the world model and is no robot-only baseline.
    expect(r.result.success_best_baseline).toBeCloseTo(0.35, 6);
    expect(String(r.result.best_baseline)).toMatch(/^(ppo|rlpd|bc_more)_/);
    expect(r.result.final_success_standard_cal).toBeCloseTo(0.5, 6);
    // Its level (0.35) reached after 5 h; full WMRL's calibrated clone is there where its trainer starts, at 0.04 h, on every seed.
    expect(r.result.robot_time_speedup_best).toBeCloseTo(5 / 0.04, 6);
    expect(r.result.robot_time_speedup_best_never).toBe(0);
    expect(r.summary).toMatch(/The best robot-only baseline \(the highest mean success among the trainers that use no world model\): (PPO|RLPD|BC)/);
    expect(r.result.calibrated_success).toBeCloseTo(0.35, 6);
    expect(r.result.robot_hours_wmrl).toBeCloseTo(0.25, 6);
    expect(r.summary).toContain("per seed: delay 3 / 3 / 3 / 3 / 3 steps, the round kept 1 / 1 / 1 / 1 / 1 (0: the demonstrations alone, then DAgger's), mass ×1.8 / 1.8 / 1.8 / 1.8 / 1.8");
    expect(r.summary).toContain(`put back (measured worse after) on seed ${p.seeds[4]}`);
    expect(r.summary).toMatch(/The calibrated clone on the split's states, before any update: 0\.35 \(mean over seeds; the uncalibrated start 0\.1\)/);
    // A calibrated clone already at the level reaches it where the trainer starts, after the calibration's robot hours.
    const m = cells(p, second, third);
    for (const s of p.seeds) m.set(cellKey('reach', s, HEADLINE), { ...(m.get(cellKey('reach', s, HEADLINE)) as VariantCell), startSuccess: 0.9, startOutcomes: wins(18), startHours: 0.04 });
    const early = report(p, { compute: 'c', report: 'k' }, m, { wallS: 60, computed: 3, throughput });
    expect(early.result.robot_time_speedup).toBeCloseTo(5 / 0.04, 6);
    expect(early.result.robot_time_speedup_never).toBe(0);
  });

  it('names a seed never reaching the level and a seed without one, never hiding them in the median', () => {
    expect(r.result.robot_time_speedup_never).toBe(1);
    expect(r.result.robot_time_speedup_no_level).toBe(1);
    // Standard reaches its level at 5 h, full WMRL at 0.05 h per evaluation: 25x where both reach it (its fourth evaluation, 0.2 h).
    expect(r.result.robot_time_speedup).toBeCloseTo(25, 6); // median of 0, 25, 25, 25
    expect(r.summary).toMatch(new RegExp(`seed ${second} never reached the level: counted as 0x`));
    expect(r.summary).toContain(`On seed ${third} standard GRPO did not improve on the behaviour-cloned start, so there is no level to reach: left out.`);
    expect(r.notes).toContain('no level');
    expect(r.notes).toContain('never');
  });

  it("says where the headline arm's corrections never acted, from its rows", () => {
    expect(r.result.denoiser_acted_seeds).toBe(0);
    expect(r.result.debias_acted_seeds).toBe(4);
    const W = variants(SIZES.full.prompts)[HEADLINE]!.label;
    expect(r.summary).toContain(`The denoiser never acted on any seed: ${W} ran without Inverse-Variance Denoising`);
    expect(r.summary).toContain(`the debias map never acted on seed ${first} (${W} ran without a calibrated world model there)`);
    expect(r.result.anchor_share_wmrl).toBeCloseTo(0.5 / 32, 6);
    // The closed-loop agreement of full WMRL's anchor groups beside the robot's repeatability.
    expect(r.summary).toMatch(/anchor groups .*the run's anchor groups\), per seed: 0\.2 \/ 0\.2 \/ 0\.2 \/ 0\.2 \/ 0\.2; the robot's own repeatability .*, per seed: 0\.6 \/ 0\.6 \/ 0\.6 \/ 0\.6 \/ 0\.6/);
    expect(r.result.agreement_wmrl).toBeCloseTo(0.2, 6);
    expect(r.result.repeatability).toBeCloseTo(0.6, 6);
    const c = corrections(vcell(0.5, 0.05, corrected(true, 12)));
    expect(c).toMatchObject({ anchorsPerUpdate: 0.5, denoised: true, weightEnd: 1.8, mapFrom: 12, biasReduction: 0.4 });
    expect(() => corrections(vcell(0.5, 1))).toThrow(/without the Corrector/);
  });

  it('states per variant the update each run handed back and how often the start, its robot hours holding the measurement', () => {
    expect(r.result.start_kept_standard).toBe(1);
    expect(r.result.start_kept_wmrl).toBe(0);
    const col = r.header.indexOf('update handed back per seed (0: the start)');
    expect(r.rows.find((row) => row[0] === variants(8).standard.label)![col]).toBe('0 / 12 / 20 / 20 / 20 (the start on 1)');
    expect(r.rows.find((row) => row[0] === variants(8).full.label)![col]).toBe('20 / 20 / 20 / 20 / 20 (the start on 0)');
    expect(r.header).toContain("robot hours at 20 updates, the trainer's measurement included (median)");
    expect(r.summary).toContain(`10 episodes of the mean action on the robot from train-split start states (from ${MEASURE_BLOCK * START_BLOCK}, the same at every evaluation)`);
    expect(r.summary).toContain('The start was handed back on standard 1, standard_cal 0, anchors_only 0');
    expect(r.notes).toMatch(new RegExp(`^\\| ${first} +\\| 0; last 0\\.4 +\\| 20; last 0\\.5 +\\| 20; last 0\\.3 +\\|`, 'm'));
  });

  it('says which runs handed back a policy worse than their start by more than the evaluation noise', () => {
    // Nowhere in the base cells: full WMRL's worst seed is the one left at 0.3 against its calibrated clone's 0.35, one state lost.
    expect(r.result.harmed_runs).toBe(0);
    expect(r.result.harm_worst_wmrl).toBeCloseTo(0.3 - 0.35, 6);
    expect(r.summary).toContain('no variant harmed its start on any seed');
    // Full WMRL handing back 0.6 from a calibrated clone at 0.9 (6 states lost, none gained): harmed; 0.85 (one lost) is within the noise.
    const m = cells(p, second, third);
    m.set(cellKey('reach', first, HEADLINE), { ...(m.get(cellKey('reach', first, HEADLINE)) as VariantCell), startSuccess: 0.9, startOutcomes: wins(18) });
    m.set(cellKey('reach', third, HEADLINE), vcell(0.85, 0.05, { ...corrected(false, 12), startSuccess: 0.9, startOutcomes: wins(18) }));
    const h = report(p, { compute: 'c', report: 'k' }, m, { wallS: 60, computed: 3, throughput });
    expect(h.result.harmed_runs_wmrl).toBe(1);
    expect(h.result.harmed_runs).toBe(1);
    expect(h.result.harm_worst_wmrl).toBeCloseTo(0.6 - 0.9, 6);
    expect(h.summary).toContain(`harmed on ${HEADLINE} (seed ${first})`);
    expect(h.notes).toMatch(/do no harm/);
    expect(doNoHarm(vcell(0.5, 1, { startSuccess: 0.5, startOutcomes: wins(10) }))).toEqual({ diff: 0, harmed: false });
    // Paired: 5 states lost and none gained is within the noise (1/32 > 2.5%), 6 lost is a drop (1/64).
    expect(doNoHarm(vcell(0.5, 1, { startOutcomes: wins(15) })).harmed).toBe(false);
    expect(doNoHarm(vcell(0.5, 1, { startOutcomes: wins(16) })).harmed).toBe(true);
    expect(binomialUpperTail(6, 6)).toBeCloseTo(1 / 64, 12);
    expect(binomialUpperTail(10, 0)).toBeCloseTo(1, 12);
    expect(() => doNoHarm(vcell(0.5, 1, { startOutcomes: [1] }))).toThrow(/1 start outcomes against 20/);
  });

  it('refuses a report with a cell missing, naming it', () => {
    const m = cells(p, second, third);
    m.delete(cellKey('reach', first, 'denoise' as VariantName));
    expect(() => report(p, { compute: 'c', report: 'k' }, m, { wallS: 1, computed: 0, throughput })).toThrow(`no cell for reach, seed ${first}, denoise`);
  });
});

describe("bench embodied: the split's view of a run", () => {
  const row = (update: number, evalSuccess?: number, keptUpdate?: number): RunRow => ({
    update, robotSeconds: 360 * update, robotWallSeconds: 360 * update, robotEpisodes: 10 * update, computeSeconds: 1, trainSuccess: null, groups: 1, realGroups: 1, loss: null, approxKl: null, refKl: null,
    ...(evalSuccess === undefined ? {} : { evalSuccess, keptUpdate }),
  });
  /** The start, update 2 and update 4: each measured by the trainer at `measured`, solving `outcomes` of the split's states, with parameters [k]. */
  const seen = (measured: number[], outcomes: number[][]): EvaluationSeen[] => measured.map((m, k) => ({ measured: m, split: { success: outcomes[k]!.reduce((a, b) => a + b, 0) / outcomes[k]!.length, meanReturn: 0, episodes: outcomes[k]!.length, outcomes: outcomes[k]! }, params: [Float32Array.of(k)] }));
  const split = [[0, 0, 0, 1], [1, 1, 0, 1], [0, 0, 0, 0]];

  it("gives the outcomes of the update the run kept, not its last update's, and each point the policy kept there", () => {
    // Update 2 measured best by the trainer and kept; update 4's policy is worse on the split's states.
    const rows = [row(1), row(2, 0.5, 2), row(3), row(4, 0.25, 2)];
    const v = splitView('run', rows, seen([0.25, 0.5, 0.25], split), [Float32Array.of(1)]);
    expect(v.keptUpdate).toBe(2);
    expect(v.outcomes).toEqual([1, 1, 0, 1]);
    expect(v.points).toEqual([[0.2, 0.75], [0.4, 0.75]]);
    expect(v.updatedSuccess).toEqual([0.75, 0]);
    // The start kept throughout: its outcomes, at every point.
    const s = splitView('run', [row(1), row(2, 0.1, 0), row(3), row(4, 0.2, 0)], seen([0.25, 0.1, 0.2], split), [Float32Array.of(0)]);
    expect(s.outcomes).toEqual([0, 0, 0, 1]);
    expect(s.points.map(([, y]) => y)).toEqual([0.25, 0.25]);
  });

  it('refuses a run whose rows, evaluations or returned parameters disagree', () => {
    const rows = [row(1), row(2, 0.5, 2), row(3), row(4, 0.25, 2)];
    expect(() => splitView('run', rows, seen([0.25, 0.5, 0.25], split), [Float32Array.of(2)])).toThrow('run handed back parameters other than those of update 2, the update it kept');
    expect(() => splitView('run', rows, seen([0.5, 0.25], split), [Float32Array.of(1)])).toThrow('run: 2 evaluations for its start and 2 evaluation rows');
    expect(() => splitView('run', rows, seen([0.25, 0.4, 0.25], split), [Float32Array.of(1)])).toThrow("run: update 2's row holds success 0.5, its measurement 0.4");
    expect(() => splitView('run', [row(1), row(2, 0.5, 3)], seen([0.25, 0.5], split), [Float32Array.of(1)])).toThrow('run keeps update 3, which it never evaluated');
    expect(() => splitView('run', [row(1), row(2, 0.5)], seen([0.25, 0.5], split), [Float32Array.of(1)])).toThrow("update 2's row names no kept update");
  });
});

describe('bench embodied: a cell from training (reach, RL seed 0, the quick pretraining, 2 updates)', () => {
  const o: CellOptions = { ...plan({ ...base, quick: true }).cell, updates: 2, prompts: 1, groupSize: 2, evalEvery: 1 };
  let setup: SeedSetup;
  // The pretraining is cached in a folder of the test's own, never in the bench's.
  const cache = mkdtempSync(join(tmpdir(), 'bench-embodied-pretrain-'));
  const before = process.env.EMBODIED_SETUP_CACHE;
  beforeAll(async () => {
    process.env.EMBODIED_SETUP_CACHE = cache;
    setup = await SeedSetup.create('reach', 0, o);
  }, 300_000);
  afterAll(() => {
    if (before === undefined) delete process.env.EMBODIED_SETUP_CACHE;
    else process.env.EMBODIED_SETUP_CACHE = before;
    rmSync(cache, { recursive: true, force: true });
  });
  const paramsOf = (p: Policy) => p.paramNames().map((n) => Float32Array.from(p.store.get(n).data));

  /**
   * A trainer that keeps its start: each update zeroes the policy (a mean action of 0, which moves nothing), every row
   * names update 0 as kept, and the start's parameters go back at the end unless `handBack` is false. `seeds` hears
   * the seed of every robot reset its evaluations ask for.
   */
  const keepsStart = (seeds: number[], handBack = true) => async (x: TrainerInputs): Promise<TrainerOutcome> => {
    const robot = x.target.robot, reset = robot.reset.bind(robot);
    robot.reset = (opts) => {
      seeds.push(opts?.seed ?? -1);
      return reset(opts);
    };
    const p = x.pre.policy, start = paramsOf(p);
    await x.evaluate(p);
    const rows: RunRow[] = [];
    for (let u = 1; u <= x.o.updates; u++) {
      p.paramNames().forEach((n) => p.store.set(n, new Float32Array(p.store.get(n).data.length)));
      const ev = await x.evaluate(p);
      const c = x.target.clock;
      rows.push({ update: u, robotSeconds: c.robotSeconds, robotWallSeconds: c.wallSeconds, robotEpisodes: c.episodes, computeSeconds: 0, trainSuccess: null, groups: 1, realGroups: 0, loss: null, approxKl: null, refKl: null, evalSuccess: ev.success, evalReturn: ev.meanReturn, keptUpdate: 0 });
    }
    if (handBack) p.paramNames().forEach((n, i) => p.store.set(n, start[i]!));
    return { rows, groups: 1, corrected: false };
  };

  it("gives the handed-back policy's outcomes, and measures for the trainer on its own train block alone, on the robot clock", async () => {
    const seeds: number[] = [];
    const cell = await setup.train('scripted', keepsStart(seeds));
    const start = await setup.start();
    expect(cell.keptUpdate).toBe(0);
    expect(cell.outcomes).toEqual(start.outcomes);
    expect(cell.updatedSuccess).toHaveLength(2);
    expect(cell.points.map(([, y]) => y)).toEqual([start.success, start.success]);
    // The trainer's measurement: its episodes at each of the three evaluations, from MEASURE_BLOCK's start states, none of the split's.
    const lo = MEASURE_BLOCK * START_BLOCK;
    expect(seeds).toEqual([0, 1, 2].flatMap(() => Array.from({ length: o.measureEpisodes }, (_, i) => lo + i)));
    expect(seeds.filter((s) => s >= o.evalSeed0 && s < o.evalSeed0 + o.evalEpisodes)).toEqual([]);
    expect(cell.measure.episodes).toBe(o.measureEpisodes);
    expect(cell.measure.success).toHaveLength(2);
    // Charged to the robot clock: here the measurement is all the robot time there is.
    expect(cell.robotEpisodes).toBe(3 * o.measureEpisodes);
    expect(cell.measure.robotHours).toBeGreaterThan(0);
    expect(cell.measure.robotHours).toBeCloseTo(cell.robotHours, 12);
  }, 120_000);

  it("measures the robot's repeatability: exactly 1 on a sim without sensor noise or jitter, a rank agreement on gap", async () => {
    const { GaussianPolicy } = await import('../policies/gaussian.js');
    const { makeEnv } = await import('../sim/index.js');
    const env = await makeEnv({ task: 'reach', profile: 'nominal' });
    const D = env.observationSpace.state.shape[0];
    env.dispose();
    const policy = new GaussianPolicy({ obsDim: D, actDim: 2, hidden: [8], seed: 1, initLogStd: 0 });
    const seeds = [900_000, 900_001, 900_002];
    expect(await repeatability(policy, 'reach', 'nominal', 0, seeds, 4, 0)).toBe(1);
    const gap = await repeatability(policy, 'reach', 'gap', 0, seeds, 4, 0);
    expect(gap).toBeGreaterThanOrEqual(-1);
    expect(gap).toBeLessThanOrEqual(1);
  }, 120_000);

  it('refuses a trainer that hands back parameters other than those of the update it names as kept', async () => {
    await expect(setup.train('scripted', keepsStart([], false))).rejects.toThrow(/scripted handed back parameters other than those of update 0, the update it kept/);
  }, 120_000);

  it("takes a trainer's kept update from its rows (standard GRPO): the outcomes are the returned policy's, the robot hours hold the measurement", async () => {
    let policy: Policy | null = null;
    const cell = await setup.train('standard', (x) => {
      policy = x.pre.policy;
      return grpo.train(x, { prompts: 1 });
    });
    const fresh = await evaluateSuccess(policy!, 'reach', 'gap', o.evalEpisodes, o.evalSeed0, { commandHistory: o.commandHistory });
    expect(cell.outcomes).toEqual(fresh.outcomes);
    expect(cell.points).toHaveLength(2);
    expect(cell.points.at(-1)![1]).toBe(fresh.success);
    expect([0, 1, 2]).toContain(cell.keptUpdate);
    expect(cell.robotEpisodes).toBe(o.updates * o.groupSize + 3 * o.measureEpisodes);
    expect(cell.measure.robotHours).toBeGreaterThan(0);
    expect(cell.measure.robotHours).toBeLessThan(cell.robotHours);
  }, 120_000);
});
