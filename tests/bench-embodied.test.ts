// bench embodied under the protocol, from known cells (no training): its RL seeds and start states are split as
// declared, with no run's prompts on an evaluation state; its keys separate cells from the report; and the report's
// per-seed tables, paired intervals, speedups (a seed never reached, a seed without a level) and its account of
// corrections that never acted follow the cells.
import { describe, expect, it } from 'vitest';
import { EVAL_BLOCK, SPLITS, cellKey, corrections, plan, protocol, report, type EmbodiedCell, type Plan } from '../bench/embodied.js';
import { protocolKeys, runKeySources, variantKey } from '../bench/lib/protocol.js';
import { CHOSEN, CORE_VARIANTS, armOf, GRIDS, SETUP_MODULE, START_BLOCK, gridVariants, promptBlock, variantKeySpecs, variants, type TunedFamily, type VariantCell, type VariantName } from '../bench/cells/embodied.js';

const base = { quick: false, all: false, progress: () => {} };
const EPISODES = 20;

/** A variant's cell: success climbing to `final` over 5 evaluations, `hoursPerEval` robot hours apart, `wins` of EPISODES start states solved at the end. */
function vcell(final: number, hoursPerEval: number, extra: Partial<VariantCell> = {}): VariantCell {
  const wins = Math.round(final * EPISODES);
  const points = [1, 2, 3, 4, 5].map((k): [number, number] => [k * hoursPerEval, k === 5 ? wins / EPISODES : (final * k) / 6]);
  return {
    points, outcomes: Array.from({ length: EPISODES }, (_, e) => (e < wins ? 1 : 0)), robotHours: 5 * hoursPerEval, robotEpisodes: 100, computeSeconds: 10,
    groups: 8, realGroups: Array(20).fill(0), anchorWeight: null, calibrated: null, biasReduction: null, alarms: 0, imaginedTransitions: 0, imagineSeconds: 0, ...extra,
  };
}
const corrected = (denoised: boolean, mapFrom: number | null): Partial<VariantCell> => ({
  groups: 32,
  realGroups: Array.from({ length: 20 }, (_, u) => (u % 2 ? 1 : 0)),
  anchorWeight: Array.from({ length: 20 }, (_, u) => (denoised && u >= 15 ? 1.8 : 1)),
  calibrated: Array.from({ length: 20 }, (_, u) => mapFrom !== null && u + 1 >= mapFrom),
  biasReduction: Array.from({ length: 20 }, (_, u) => (mapFrom !== null && u + 1 > mapFrom ? 0.4 : null)),
});

/**
 * Validation cells: the start solves 2 of 20 states; standard GRPO 8 (at 1 h per evaluation); full WMRL 12 (at 0.05 h),
 * except on `neverSeed`, where it stays at 6 and never reaches standard's level; on `flatSeed` standard GRPO gains
 * nothing over the start. The denoiser acts on no seed; the debias map on all but the first.
 */
function cells(p: Plan, neverSeed: number, flatSeed: number, task = p.tasks[0]!): Map<string, EmbodiedCell> {
  const m = new Map<string, EmbodiedCell>();
  p.seeds.forEach((s, i) => {
    m.set(cellKey(task, s, 'bc'), { success: 0.1, outcomes: Array.from({ length: EPISODES }, (_, e) => (e < 2 ? 1 : 0)) });
    m.set(cellKey(task, s, 'standard'), vcell(s === flatSeed ? 0.1 : 0.4, 1));
    m.set(cellKey(task, s, 'anchors_only'), vcell(0.3, 0.12));
    m.set(cellKey(task, s, 'pure_wm'), vcell(0.1, 0));
    const fullLike = (final: number) => vcell(s === neverSeed ? 0.3 : final, 0.05, corrected(false, i === 0 ? null : 12));
    m.set(cellKey(task, s, 'full'), fullLike(0.6));
    m.set(cellKey(task, s, 'full_active'), fullLike(0.6));
    m.set(cellKey(task, s, 'debias'), vcell(0.6, 0.05, corrected(false, 12)));
    m.set(cellKey(task, s, 'denoise'), vcell(0.5, 0.05, corrected(true, null)));
    // The tuned robot-only baselines: standard GRPO's robot time, below full WMRL's success.
    for (const v of p.variants.filter((x) => !['bc', ...CORE_VARIANTS].includes(x))) m.set(cellKey(task, s, v), vcell(0.35, 1));
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
    // The test split runs each tuned baseline's chosen grid point; validation every point.
    const families = Object.keys(GRIDS) as TunedFamily[];
    expect(t.variants).toEqual(['bc', ...CORE_VARIANTS, ...families.map((f) => CHOSEN[f])]);
    expect(v.variants).toEqual(['bc', ...CORE_VARIANTS, ...families.flatMap(gridVariants)]);
    for (const f of families) expect(gridVariants(f)).toContain(CHOSEN[f]);
    expect(gridVariants('ppo')).toEqual(['ppo_lr3e-4', 'ppo_lr1e-3']);
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
    // Full WMRL solves 12 of 20 on four seeds and 6 on one: mean 0.54; standard 8 of 20 (2 on the flat seed).
    expect(r.result.final_success_wmrl).toBeCloseTo(0.54, 6);
    expect(r.result.final_success_standard).toBeCloseTo(0.34, 6);
    expect(r.result.wmrl_vs_standard).toBe('beats');
    expect(r.result.wmrl_vs_pure_wm).toBe('beats');
    expect(Number(r.result.wmrl_minus_anchors_only_lo)).toBeLessThanOrEqual(Number(r.result.wmrl_minus_anchors_only));
    expect(r.rows).toHaveLength(p.variants.length);
    // Four per-seed tables (success, hours, speedups, corrections), one row per validation seed in each.
    expect(r.notes!.split('\n').filter((l) => new RegExp(`^\\| ${p.seeds.at(-1)} +\\|`).test(l))).toHaveLength(4);
    expect(r.keys).toEqual({ compute: 'c', report: 'k' });
    // Every grid point of the tuned baselines is reported on validation, with its paired difference from full WMRL.
    for (const name of gridVariants('ppo')) {
      expect(r.result[`final_success_${name}`]).toBeCloseTo(0.35, 6);
      expect(Number(r.result[`wmrl_minus_${name}`])).toBeCloseTo(0.54 - 0.35, 6);
    }
    expect(r.summary).toContain('Robot-only baselines, each from the same start');
    expect(r.summary).toContain("RLPD ran 0.5 critic updates per robot step with 2 critics of 128×128: the compute this machine affords, far below RLPD's 20");
    expect(r.rows.map((row) => row[0])).toContain(variants(8)['ppo_lr1e-3']?.label ?? 'missing');
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
    expect(r.summary).toContain('The denoiser never acted on any seed: full WMRL ran without Inverse-Variance Denoising');
    expect(r.summary).toContain(`the debias map never acted on seed ${first} (full WMRL ran without a calibrated world model there)`);
    expect(r.result.anchor_share_wmrl).toBeCloseTo(0.5 / 32, 6);
    const c = corrections(vcell(0.5, 0.05, corrected(true, 12)));
    expect(c).toMatchObject({ anchorsPerUpdate: 0.5, denoised: true, weightEnd: 1.8, mapFrom: 12, biasReduction: 0.4 });
    expect(() => corrections(vcell(0.5, 1))).toThrow(/without the Corrector/);
  });

  it('refuses a report with a cell missing, naming it', () => {
    const m = cells(p, second, third);
    m.delete(cellKey('reach', first, 'denoise' as VariantName));
    expect(() => report(p, { compute: 'c', report: 'k' }, m, { wallS: 1, computed: 0, throughput })).toThrow(`no cell for reach, seed ${first}, denoise`);
  });
});
