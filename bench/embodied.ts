// embodied: post-training a behaviour-cloned policy on the `gap` robot (the sim under the gap hardware profile:
// heavier, weaker, laggier, noisier) — reach; `--task push` push; `--all` both — with standard GRPO on the robot
// against WMRL, its ablations and the robot-only baselines, the world model pretrained on sim data under randomized
// profiles (DEFAULT_PRETRAIN.wmRandomize). Under the evidence protocol (bench/lib/protocol.ts): RL seeds and start
// states are split into train (--quick), validation (`--split validation`, where choices are made) and test (the
// report, read once per computation key). Each (task, seed, variant) is a cell computed in bench/cells/embodied.ts and
// cached under its own computation key (the shared setup and its variant's trainer), so a full run can span sessions
// and a new variant leaves the others' cells valid; this file runs and reports them: true success on the split's
// evaluation start states against robot-hours, per seed, with paired intervals and robot-hours speedups across seeds,
// for WMRL's arms and the robot-only baselines tuned on validation (PPO, RLPD, BC with more demonstrations: the grids
// of bench/cells/embodied.ts); and imagined transitions/s against raw MuJoCo steps/s, measured in every run. Each
// trainer hands back the policy of the evaluation it keeps by its own measurement on the robot, from train-split start
// states (MEASURE_BLOCK): the split's states measure the policy handed back and never choose it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '../nn/index.js';
import { embodiedPretrain } from '../recipes/embodied.js';
import { POST_TRAIN_LR } from '../recipes/options.js';
import { MjEnv, loadTaskModel } from '../sim/env.js';
import { NOMINAL } from '../sim/profiles.js';
import { taskDef } from '../sim/registry.js';
import { DEFAULT_PRETRAIN } from '../wmrl/sim-setup.js';
import { DEFAULT_WMRL } from '../wmrl/train_wmrl.js';
import type { CorrectorConfig } from '../wmrl/corrector.js';
import { ModelEnv } from '../worldmodel/index.js';
import { ANCHORS_PER_UPDATE, CHOSEN, HEADLINE, CHOSEN_ON_VALIDATION, CORE_VARIANTS, GRIDS, IMAGINED, MEASURE_BLOCK, PROFILE, SETUP_MODULE, SIZES, armOf, START_BLOCK, SeedSetup, cellOptions, gridVariants, planVariants, promptBlock, trainVariant, variantKeySpecs, variants, type StartCell, type TunedFamily, type VariantCell, type VariantName } from './cells/embodied.js';
import { CACHE_ROOT, defineSplits, evaluateCell, protocolKeys, protocolRun, type BenchProtocol, type ProtocolKeys, type SplitName } from './lib/protocol.js';
import { fmt, median, type BenchOptions, type BenchReport, type Series } from './lib/report.js';
import { formatInterval, formatSpeedup, hierarchicalBootstrap, pairedDifference, perSeedTable, speedups, verdict, type Interval, type SpeedupSummary } from './lib/stats.js';
import { acted, said, seedList, type Corrections } from './lib/words.js';
import { rawSimSps } from './worldmodel.js';

/**
 * The arms (`--task NAME` one of them; the default run is the first): each task on the `gap` robot, and on the
 * `worn` robot (sim/profiles/worn.yaml), a second reality gap that no choice is made on: `--all` runs the worn arms
 * on the test split alone, and a validation or train run refuses them.
 */
export const tasks = ['reach', 'push', 'reach@worn', 'push@worn'] as const;
/** The arms on the robot every choice is made on. */
const chosenOn = (arm: string) => armOf(arm).profile === PROFILE;

// ── Splits ──────────────────────────────────────────────────────────────────────────────────────
/**
 * RL seeds (each seeds a run's pretraining, its robot's noise, its policy's sampling and its prompts): validation
 * holds seeds 1-5, seeds 0-2 being those the bench's choices were made on before this protocol (0 is train, --quick's);
 * test seeds start at 100 and were never run before it.
 */
const RL_SEEDS = { train: [0], validation: [1, 2, 3, 4, 5], test: [100, 101, 102, 103, 104] };
/**
 * The start-state block (START_BLOCK seeds) each split's evaluation reads: validation's are the held-out states the
 * bench's choices were made on before this protocol (from 9,000,000), test's were never evaluated before it.
 */
export const EVAL_BLOCK: Readonly<Record<SplitName, number>> = { train: 9, validation: 90, test: 95 };
const ALL_SEEDS = [...RL_SEEDS.train, ...RL_SEEDS.validation, ...RL_SEEDS.test];
// Pretraining (wmrl/sim-setup.ts) draws its start states from seeds below 1,000,000 only for RL seeds below 400.
if (Math.max(...ALL_SEEDS) >= 400) throw new Error('bench embodied: an RL seed of 400 or more pretrains on start states above 1,000,000, the prompts\' blocks');

/**
 * RL seeds, and start states in blocks of START_BLOCK seeds. Train: blocks 0-9 (pretraining's demonstrations, DAgger
 * and world-model data below block MEASURE_BLOCK, block MEASURE_BLOCK the trainers' own measurement on the robot, and
 * block 9, the train split's evaluation) and every seed's prompt block (10 + seed); the validation and test evaluations
 * each read their own block, which no run trains on and no trainer measures on.
 */
export const SPLITS = defineSplits('embodied', {
  seeds: RL_SEEDS,
  starts: { train: [...Array.from({ length: 10 }, (_, b) => b), ...ALL_SEEDS.map(promptBlock)], validation: [EVAL_BLOCK.validation], test: [EVAL_BLOCK.test] },
});
if (SPLITS.splitOf('starts', MEASURE_BLOCK) !== 'train' || Object.values(EVAL_BLOCK).includes(MEASURE_BLOCK)) throw new Error(`bench embodied: the trainers' measurement block ${MEASURE_BLOCK} must be a train block no split evaluates on`);
// Pretraining's DAgger round r at RL seed s starts from seed r·100,000 + s·1,000 (wmrl/sim-setup.ts): below the measurement's block.
for (const sz of [SIZES.full, SIZES.quick]) {
  const o = { ...DEFAULT_PRETRAIN, ...sz.pretrain };
  const top = o.daggerRounds * 100_000 + Math.max(...ALL_SEEDS) * 1000 + Math.max(o.bcEpisodes, o.daggerEpisodes);
  if (top >= MEASURE_BLOCK * START_BLOCK) throw new Error(`bench embodied: pretraining reaches start state ${top}, in the trainers' measurement block ${MEASURE_BLOCK}`);
}

// ── What runs ───────────────────────────────────────────────────────────────────────────────────
/** A (task, seed)'s cells: the behaviour-cloned start ('bc'), then each variant trained from it. */
export type CellVariant = 'bc' | VariantName;
const label = (v: CellVariant) => (v === 'bc' ? 'behaviour-cloned start' : variants(1)[v]!.label);
/** The baselines the headline arm is defended against (robot-only, and either imagination alone) that every run has; the tuned robot-only baselines are the plan's other variants. */
const BASELINES = ['standard', 'anchors_only', 'pure_wm', 'pure_sim'] as const;
/** The plan's variants trained from the start (every cell but 'bc'), and those of them beyond WMRL's arms and the core baselines. */
const trained = (p: Plan) => p.variants.filter((v) => v !== 'bc');
const tuned = (p: Plan) => trained(p).filter((v) => !(CORE_VARIANTS as readonly string[]).includes(v));
/** Variants with the Corrector, whose corrections the report follows. */
const CORRECTED = ['full', 'full_active', 'full_sim', 'debias', 'denoise'] as const;
/** A robot-only variant: trained on the robot alone, the world model neither imagining nor calibrating for it. */
const ROBOT_ONLY = (v: { family: string; options: object }) => v.family !== 'wmrl' && !('calibrate' in v.options);

/** The run a set of options makes: split, tasks, seeds and the cells' options. Its JSON is part of the report key. */
export function plan(o: BenchOptions) {
  const split: SplitName = o.quick ? 'train' : o.split ?? 'test';
  const arms: string[] = o.all ? tasks.filter((t) => split === 'test' || chosenOn(t)) : [o.task ?? tasks[0]];
  for (const a of arms) if (split !== 'test' && !chosenOn(a)) throw new Error(`bench embodied: --task ${a} runs on the test split only: no choice is made on the ${armOf(a).profile} robot (run it with --split test, or --all)`);
  return {
    split,
    tasks: arms,
    seeds: SPLITS.sets.seeds[split],
    variants: ['bc', ...planVariants(split)] as CellVariant[],
    /** The robot-only baselines' learner budgets: a quick run's are a smoke test's. */
    scale: o.quick ? ('quick' as const) : ('full' as const),
    cell: cellOptions({ quick: o.quick, split, evalSeed0: EVAL_BLOCK[split] * START_BLOCK }),
  };
}
export type Plan = ReturnType<typeof plan>;

/**
 * Every cell depends on the shared setup (bench/cells/embodied/setup.ts, everything it imports, the cells' options), a
 * trained variant's cell also on its family's module (everything it imports: its trainer) and its options, and on
 * nothing else; the report adds this file and the run's tasks, seeds and variants.
 */
export const protocol: BenchProtocol = {
  splits: SPLITS,
  keys: (o) => {
    const p = plan(o);
    return protocolKeys({ compute: { entry: SETUP_MODULE, options: p.cell }, variants: variantKeySpecs(trained(p), p.cell.prompts, p.scale), report: { entry: import.meta.url, options: p } });
  },
};

export type EmbodiedCell = StartCell | VariantCell;
export const cellKey = (task: string, seed: number, variant: CellVariant) => `${task}/${seed}/${variant}`;
const isVariantCell = (c: EmbodiedCell): c is VariantCell => 'points' in c;

/** One WMRL update's imagination against raw MuJoCo on the same task, measured alternately (medians of 3). */
export interface Throughput {
  imagineTps: number;
  simSps: number;
  rollouts: number;
  horizon: number;
}

async function measureThroughput(task: string, o: Plan['cell'], quick: boolean): Promise<Throughput> {
  // An unfitted world model and policy of the run's sizes: imagination runs the task's whole horizon whatever their weights.
  const p = await embodiedPretrain({ task, seed: 0, quick: false, commandHistory: 0, sizes: o.pretrain, fit: false });
  const def = taskDef(task);
  const model = await loadTaskModel(def, NOMINAL);
  const env = new MjEnv(def, model, NOMINAL, { seed: 0 }, false);
  const rng = new Rng(1);
  const menv = new ModelEnv(p.model, { members: 'fixed', seed: 0, actionDelay: 3 });
  try {
    const graph = p.policy.graphPolicy!();
    const N = IMAGINED * o.prompts * o.groupSize, D = p.policy.obsDim, H = def.horizon;
    const startObs = new Float32Array(N * D);
    for (let i = 0; i < N; i++) startObs.set(env.reset(1_000_000 + Math.floor(i / o.groupSize)).state, i * D);
    const imagineRate = async () => {
      const t = performance.now();
      await menv.imagine(startObs, graph, H);
      return (N * H) / ((performance.now() - t) / 1000);
    };
    rawSimSps(env, def.substeps, 500, rng);
    await imagineRate();
    const sims: number[] = [], ims: number[] = [];
    for (let r = 0; r < 3; r++) {
      sims.push(rawSimSps(env, def.substeps, quick ? 2000 : 10_000, rng));
      ims.push(await imagineRate());
    }
    return { imagineTps: median(ims), simSps: median(sims), rollouts: N, horizon: H };
  } finally {
    await menv.release();
    env.dispose();
    model.dispose();
  }
}

export interface RunInfo {
  wallS: number;
  /** Cells computed in this run (the rest came from the cache). */
  computed: number;
  throughput: Record<string, Throughput>;
}

/** Which of a plan's cells a run computes: every one (a full run), or `--seeds` / `--variants` of them. */
export interface CellFilter {
  seeds?: readonly number[];
  variants?: readonly string[];
}

/** What is wrong with a filter for a plan (a seed or variant the plan does not run), or null. */
export function filterProblem(p: Plan, f: CellFilter): string | null {
  if (p.split === 'train') return 'bench embodied: --seeds and --variants cache cells for a full run; a quick run caches nothing';
  const bad = (f.seeds ?? []).filter((s) => !p.seeds.includes(s));
  if (bad.length) return `bench embodied: --seeds ${bad.join(', ')}: not among the ${p.split} split's seeds (${p.seeds.join(', ')})`;
  const badV = (f.variants ?? []).filter((v) => !p.variants.includes(v));
  if (badV.length) return `bench embodied: --variants ${badV.join(', ')}: not among the ${p.split} split's variants (${p.variants.join(', ')})`;
  return null;
}

/** The plan's seeds and variants a filter keeps, refusing any the plan does not run. */
export function filterPlan(p: Plan, f: CellFilter): { seeds: readonly number[]; variants: readonly CellVariant[] } {
  const problem = f.seeds || f.variants ? filterProblem(p, f) : null;
  if (problem) throw new Error(problem);
  return { seeds: f.seeds ? p.seeds.filter((s) => f.seeds!.includes(s)) : p.seeds, variants: f.variants ? p.variants.filter((v) => f.variants!.includes(v)) : p.variants };
}

/** Computes (or reuses) the plan's cells the filter keeps, in order: task, seed, variant. */
async function computeCells(o: BenchOptions, p: Plan, keys: ProtocolKeys, f: CellFilter, cacheRoot: string): Promise<{ cells: Map<string, EmbodiedCell>; computed: number }> {
  const { seeds, variants: vs } = filterPlan(p, f);
  const pr = protocolRun(SPLITS, keys, { cacheRoot, ...(o.relook ? { relook: true } : {}) });
  const cells = new Map<string, EmbodiedCell>();
  const total = p.tasks.length * seeds.length * vs.length;
  let done = 0, computed = 0;
  for (const task of p.tasks) {
    for (const seed of seeds) {
      // Pretrained only where one of the seed's cells is not cached.
      let setup: SeedSetup | null = null;
      const ready = async (): Promise<SeedSetup> => {
        if (!setup) {
          setup = await SeedSetup.create(task, seed, p.cell, (label) => o.progress(done, total, `${task}, seed ${seed}: ${label}`));
        }
        return setup;
      };
      for (const variant of vs) {
        o.progress(done, total, `${task}, seed ${seed}: ${variant}`);
        const compute = async (): Promise<EmbodiedCell> => (variant === 'bc' ? (await ready()).start() : trainVariant(await ready(), variant, p.cell.prompts, p.scale));
        const summary = (c: EmbodiedCell): Record<string, number> => (isVariantCell(c) ? { success: mean(c.outcomes), kept_update: c.keptUpdate, robot_h: c.robotHours, compute_s: c.computeSeconds } : { success: c.success });
        const out = await evaluateCell(pr, { task, variant, seed, split: p.split, episodes: p.cell.evalEpisodes }, compute, summary);
        if (!out.cached) computed++;
        cells.set(cellKey(task, seed, variant), out.value);
        o.progress(++done, total, `${task}, seed ${seed}: ${variant}${out.cached ? ' (cached)' : ''}`);
      }
    }
  }
  return { cells, computed };
}

export async function run(o: BenchOptions): Promise<BenchReport> {
  const p = plan(o);
  const keys = protocol.keys(o);
  // A quick run is a smoke test of this code: it caches no cell, so it always runs (a pretraining is cached under its own code's key).
  const scratch = o.quick ? mkdtempSync(join(tmpdir(), 'bench-embodied-cache-')) : null;
  const throughput: Record<string, Throughput> = {};
  const started = performance.now();
  try {
    const { cells, computed } = await computeCells(o, p, keys, {}, scratch ?? CACHE_ROOT);
    // Imagination's throughput is the task's, whatever the robot: measured once per task.
    for (const task of p.tasks) {
      const t = armOf(task).task;
      o.progress(1, 1, `${task}: imagined transitions/s against raw MuJoCo`);
      throughput[t] ??= await measureThroughput(t, p.cell, o.quick);
    }
    return report(p, keys, cells, { wallS: (performance.now() - started) / 1000, computed, throughput });
  } finally {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
}

/** Why `--seeds` / `--variants` cannot run with these options, or null. */
export const cellsProblem = (o: BenchOptions, f: CellFilter): string | null => filterProblem(plan(o), f);

/**
 * `--seeds` / `--variants`: those of the split's cells, computed and cached under their keys and no report (a later
 * run without them reuses every one and writes it): to split a full run across processes, or to run first the cells a
 * choice waits on. Not with --quick, which caches nothing.
 */
export async function cellsOnly(o: BenchOptions, f: CellFilter): Promise<{ computed: number; cells: number }> {
  const p = plan(o);
  const { cells, computed } = await computeCells(o, p, protocol.keys(o), f, CACHE_ROOT);
  return { computed, cells: cells.size };
}

// ── The report ──────────────────────────────────────────────────────────────────────────────────
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
/** Robot hours at the first point of a curve at or above `level` (Infinity: never). */
const firstReach = (points: ReadonlyArray<[number, number]>, level: number) => points.find(([, y]) => y >= level - 1e-9)?.[0] ?? Number.POSITIVE_INFINITY;
const shortSpeedup = (s: SpeedupSummary) => (Number.isNaN(s.median.estimate) ? 'no level on any seed' : `${fmt(s.median.estimate)}x [${fmt(s.median.lo)}, ${fmt(s.median.hi)}]${s.never.length ? `, never on ${s.never.length} of ${s.perSeed.length - s.neither.length}` : ''}`);

export type { Corrections };

export function corrections(c: VariantCell): Corrections {
  if (!c.anchorWeight || !c.calibrated || !c.biasReduction) throw new Error('corrections: the cell is of a variant without the Corrector');
  const anchors = mean(c.realGroups);
  const first = c.calibrated.findIndex(Boolean);
  return {
    anchorsPerUpdate: anchors,
    anchorShare: anchors / c.groups,
    weightEnd: c.anchorWeight.at(-1)!,
    weightMax: Math.max(...c.anchorWeight),
    denoised: c.anchorWeight.some((w) => w !== 1),
    mapFrom: first < 0 ? null : first + 1,
    biasReduction: c.biasReduction.filter((x): x is number => x !== null).at(-1) ?? null,
  };
}

/**
 * Do no harm, on one seed: the handed-back policy's success on the split's states minus that of the policy its trainer
 * started from (after any calibration), and whether it is lower by more than the evaluation noise: an exact one-sided
 * sign test (McNemar's) at 2.5% on the states where the two disagree, both measured on the same states.
 */
export function doNoHarm(c: VariantCell): { diff: number; harmed: boolean } {
  if (c.startOutcomes.length !== c.outcomes.length) throw new Error(`bench embodied: ${c.startOutcomes.length} start outcomes against ${c.outcomes.length} handed-back ones`);
  let lost = 0, gained = 0;
  c.outcomes.forEach((o, i) => (c.startOutcomes[i]! > o ? lost++ : c.startOutcomes[i]! < o ? gained++ : 0));
  return { diff: mean(c.outcomes) - mean(c.startOutcomes), harmed: lost > gained && binomialUpperTail(lost + gained, lost) < 0.025 };
}

/** P(X ≥ k) for X ~ Binomial(n, 1/2). */
export function binomialUpperTail(n: number, k: number): number {
  let logC = 0, sum = 0;
  for (let x = 0; x <= n; x++) {
    if (x > 0) logC += Math.log(n - x + 1) - Math.log(x);
    if (x >= k) sum += Math.exp(logC - n * Math.LN2);
  }
  return Math.min(1, sum);
}

/** One task's figures from its cells. */
export function analyse(p: Plan, task: string, cells: ReadonlyMap<string, EmbodiedCell>) {
  const seeds = p.seeds;
  const get = (seed: number, v: CellVariant) => {
    const c = cells.get(cellKey(task, seed, v));
    if (!c) throw new Error(`bench embodied: no cell for ${task}, seed ${seed}, ${v}`);
    return c;
  };
  const start = (s: number) => get(s, 'bc') as StartCell;
  const cell = (s: number, v: VariantName) => get(s, v) as VariantCell;
  const outcomes = (v: CellVariant) => seeds.map((s) => get(s, v).outcomes);
  const success = (v: CellVariant) => outcomes(v).map(mean);
  const score = Object.fromEntries(p.variants.map((v) => [v, hierarchicalBootstrap(outcomes(v))])) as Record<CellVariant, Interval>;
  // Paired: every variant of a seed is measured on the same start states.
  const minusFull = Object.fromEntries(p.variants.filter((v) => v !== HEADLINE).map((v) => [v, pairedDifference(outcomes(HEADLINE), outcomes(v))])) as Record<CellVariant, Interval>;
  // The corrections' ablations are of full WMRL imagining in the learned model; pure_sim is full_sim's.
  const ablation = (v: CellVariant, of: VariantName = 'full') => pairedDifference(outcomes(of), outcomes(v));
  const activeMinusFull = pairedDifference(outcomes('full_active'), outcomes('full'));
  const standardGain = pairedDifference(outcomes('standard'), outcomes('bc'));
  // The level per seed: standard GRPO's final success, where it improved on the start; without that there is no level.
  const level = success('standard');
  const hasLevel = seeds.map((s, i) => level[i]! > start(s).success);
  // The start, then where the trainer started (a calibrating variant: the calibrated clone, after its robot hours), then every evaluation.
  const curve = (s: number, v: VariantName): Array<[number, number]> => [[0, start(s).success], [cell(s, v).startHours, cell(s, v).startSuccess], ...cell(s, v).points];
  const hoursTo = (v: VariantName) => seeds.map((s, i) => (hasLevel[i] ? firstReach(curve(s, v), level[i]!) : Number.POSITIVE_INFINITY));
  const speed = Object.fromEntries(trained(p).filter((v) => v !== 'standard').map((v) => [v, speedups(seeds, hoursTo('standard'), hoursTo(v))])) as Record<VariantName, SpeedupSummary>;
  const noLevel = seeds.filter((_, i) => !hasLevel[i]);
  // The issue's level: the best robot-only baseline's final success (the one with the highest mean), per seed where it improved on the start.
  const robotOnly = trained(p).filter((v) => ROBOT_ONLY(variants(p.cell.prompts, p.scale)[v]!));
  const best = robotOnly.reduce((b, v) => (mean(success(v)) > mean(success(b)) ? v : b), robotOnly[0]!);
  const bestLevel = success(best);
  const hasBestLevel = seeds.map((s, i) => bestLevel[i]! > start(s).success);
  const hoursToBest = (v: VariantName) => seeds.map((s, i) => (hasBestLevel[i] ? firstReach(curve(s, v), bestLevel[i]!) : Number.POSITIVE_INFINITY));
  const speedBest = speedups(seeds, hoursToBest(best), hoursToBest(HEADLINE));
  const corr = Object.fromEntries(CORRECTED.map((v) => [v, seeds.map((s) => corrections(cell(s, v)))])) as Record<(typeof CORRECTED)[number], Corrections[]>;
  const hours = (v: VariantName) => seeds.map((s) => cell(s, v).robotHours);
  /** The update each seed's run handed back (0: the start), and the robot hours its own measurement cost. */
  const kept = (v: VariantName) => seeds.map((s) => cell(s, v).keptUpdate);
  const measureHours = (v: VariantName) => seeds.map((s) => cell(s, v).measure.robotHours);
  const harm = (v: VariantName) => seeds.map((s) => doNoHarm(cell(s, v)));
  return { task, seeds, start, cell, outcomes, success, score, minusFull, ablation, activeMinusFull, standardGain, level, hasLevel, curve, hoursTo, speed, noLevel, corr, hours, kept, measureHours, harm, best, hasBestLevel, speedBest };
}
type Analysis = ReturnType<typeof analyse>;

/** What RLPD's learner ran at, where the run has it: below RLPD's own update-to-data ratio, which a report says. */
function rlpdBudget(p: Plan): string {
  const v = tuned(p).map((n) => variants(p.cell.prompts, p.scale)[n]!).find((x) => x.family === 'rlpd');
  if (!v || v.family !== 'rlpd') return '';
  const o = v.options;
  return ` RLPD ran ${o.utd} critic updates per robot step with ${o.critics} critics of ${o.criticHidden.join('×')}: the compute this machine affords, far below RLPD's 20 updates per step (docs/decisions.md).`;
}

/** Each tuned family's point the test split trains, and whether validation chose it. */
const chosenWords = () => (Object.keys(CHOSEN) as TunedFamily[]).map((f) => `${CHOSEN[f]} (${CHOSEN_ON_VALIDATION[f] ? 'chosen on validation' : 'not yet chosen on validation'})`).join(', ');

/** On validation, each tuned family's grid point of the highest mean success on this task: what `CHOSEN` is to name, read beside the other task's. */
function bestPoints(p: Plan, score: Readonly<Record<string, Interval>>): string {
  if (p.split !== 'validation') return '';
  const best = (Object.keys(GRIDS) as TunedFamily[]).flatMap((f) => {
    const points = gridVariants(f).filter((v) => score[v]);
    if (!points.length) return [];
    const top = points.reduce((a, b) => (score[b]!.estimate > score[a]!.estimate ? b : a));
    return [`${f} ${top} (${fmt(score[top]!.estimate, 3)}; ${points.filter((v) => v !== top).map((v) => `${v} ${fmt(score[v]!.estimate, 3)}`).join(', ')})`];
  });
  return best.length ? ` Each family's grid point of the highest mean success on this task (what \`CHOSEN\` is to name, read beside the other task's; ties keep the first): ${best.join('; ')}; \`CHOSEN\` now: ${chosenWords()}.` : '';
}

/** One task's summary sentences, table rows, per-seed tables, plot lines and RESULT figures. */
function summarize(p: Plan, a: Analysis, run: RunInfo, named: boolean) {
  const { task, seeds, score, minusFull, speed, corr } = a;
  const c = p.cell;
  const V = variants(c.prompts);
  const full = speed[HEADLINE]!;
  /** The headline arm's name in the sentences. */
  const W = V[HEADLINE]!.label, Wcap = W[0]!.toUpperCase() + W.slice(1);
  const corrector = DEFAULT_WMRL.corrector as CorrectorConfig;
  const minPairs = corrector.debias ? corrector.debias.minPairs : 0;
  const fullCorr = corr[HEADLINE];
  // Closed-loop agreement per seed (NaN where no anchor group had 3 completed episodes), and the robot's repeatability.
  const agreeWmrl = seeds.map((sd) => { const xs = a.cell(sd, HEADLINE).agreements ?? []; return xs.length ? mean(xs) : NaN; });
  const repeat = seeds.map((sd) => a.start(sd).repeatability);
  const neverDenoised = seeds.filter((_, i) => !fullCorr[i]!.denoised);
  const neverMapped = seeds.filter((_, i) => fullCorr[i]!.mapFrom === null);
  const { task: taskName, profile } = armOf(task);
  const t = run.throughput[taskName]!;
  const iv = (v: CellVariant) => formatInterval(score[v], false);
  const harmed = trained(p).map((v): [string, number[]] => [v, seeds.filter((_, i) => a.harm(v)[i]!.harmed)]).filter(([, ss]) => ss.length > 0);
  const diff = (v: CellVariant) => `${formatInterval(minusFull[v]!)} (${said(minusFull[v]!, W)})`;
  const abl = (v: CellVariant, of: VariantName = 'full') => { const d = a.ablation(v, of); return `${formatInterval(d)} (${said(d, V[of]!.label)})`; };

  const summary = [
    `**${task}**, ${p.split} split: RL ${seedList(seeds)}; the robot is the sim under the ${profile} profile${profile === PROFILE ? '' : ` (a second reality gap, reported on the test split alone: no choice was made on it)`}; the world model pretrained on ${DEFAULT_PRETRAIN.wmRandomize > 0 ? `sim data under randomized profiles (context parameters in [1/${DEFAULT_PRETRAIN.wmRandomize}, ${DEFAULT_PRETRAIN.wmRandomize}]), the robot's context identified from the anchors` : 'nominal sim data'}; ${c.updates} updates; standard GRPO runs ${c.prompts} prompts × ${c.groupSize} rollouts on the robot per update, the WMRL variants imagine ${V.full.prompts} prompts × ${c.groupSize} in the learned world model (${V.full_sim.prompts} in the identified sim) and run ${ANCHORS_PER_UPDATE} anchor group(s) per update on average on the robot. Training prompts are start states of the seed's own block (from ${promptBlock(0) * START_BLOCK} + seed × ${START_BLOCK}); true success is the mean action's on ${c.evalEpisodes} evaluation start states from ${c.evalSeed0}, the same for every variant of a seed. Intervals: 95% bootstrap over seeds and, within them, start states, paired where two variants are compared; "better"/"worse" only where the interval excludes 0.`,
    `Success of the policy each run handed back after ${c.updates} updates (mean over seeds [95% CI]): ${W} ${iv(HEADLINE)}${HEADLINE === 'full' ? '' : `, full WMRL imagining in the learned world model ${iv('full')}`}, standard GRPO ${iv('standard')}, standard GRPO on one group per update ${iv('anchors_only')}, pure world model ${iv('pure_wm')}; behaviour-cloned start ${iv('bc')}.`,
    `${Wcap} − each baseline (paired): − standard GRPO ${diff('standard')}; − standard GRPO on one group per update ${diff('anchors_only')} (what the imagined groups add beyond the anchors, at ${fmt(median(a.hours('anchors_only').map((h, i) => h / a.hours(HEADLINE)[i]!)), 2)}× its robot-hours); − pure world model (the learned ensemble alone) ${diff('pure_wm')}; − the identified sim alone (no anchors) ${diff('pure_sim')}; − the behaviour-cloned start ${diff('bc')}.`,
    `Full WMRL imagining in the learned world model − each ablation (paired): − debias only (${V.debias.label}) ${abl('debias')}; − denoise only (${V.denoise.label}) ${abl('denoise')}; full WMRL with active anchors − full WMRL ${formatInterval(a.activeMinusFull)} (${said(a.activeMinusFull, 'active anchors')}). Imagining in the identified sim, what the anchors and their corrections add: ${V.full_sim.label} − ${V.pure_sim.label} ${abl('pure_sim', 'full_sim')}.`,
    `Robot-hours to standard GRPO's final success (each variant read at its first evaluation there), ${W}'s speedup over standard GRPO: ${Number.isNaN(full.median.estimate) ? 'not defined on any seed' : formatSpeedup(full)}.` +
      (a.noLevel.length ? ` On ${seedList(a.noLevel)} standard GRPO did not improve on the behaviour-cloned start, so there is no level to reach: left out.` : '') +
      ` Standard GRPO's own gain over the start (paired): ${formatInterval(a.standardGain)} (${said(a.standardGain, 'standard GRPO')}). ${Wcap} spent ${fmt(median(a.hours(HEADLINE).map((h, i) => h / a.hours('standard')[i]!)), 2)} of standard GRPO's robot-hours (median over seeds).`,
    `Corrections in ${W}, the headline arm (from its run rows): anchor groups per update ${fmt(median(fullCorr.map((x) => x.anchorsPerUpdate)), 2)} (share of the update's groups ${fmt(median(fullCorr.map((x) => x.anchorShare)), 2)}, median over seeds); the denoiser's anchor weight at the last update, per seed, ${fullCorr.map((x) => fmt(x.weightEnd, 2)).join(' / ')} (1 = anchors not up-weighted); the first update whose world-model scores a debias map calibrated, per seed, ${fullCorr.map((x) => (x.mapFrom === null ? 'never' : x.mapFrom)).join(' / ')} (the map is fitted at ${minPairs} anchor pairs, and with the map on the denoiser measures the world model's disagreement only once the map is fitted). ` +
      `${acted(seeds, neverDenoised, 'The denoiser', `${W} ran without Inverse-Variance Denoising`)}; ${acted(seeds, neverMapped, 'the debias map', `${W} ran without a calibrated world model`)}. ` +
      `Closed-loop agreement of imagined with real returns in ${W}'s anchor groups (each group imagined again from its episodes' own first observations under the noise they acted with; the mean within-group Spearman over the run's anchor groups), per seed: ${agreeWmrl.map((x) => fmt(x, 2)).join(' / ')}; the robot's own repeatability (the clone's groups run twice on the robot's sim under other sensor noise and jitter, the same policy noise), per seed: ${repeat.map((x) => fmt(x, 2)).join(' / ')} — the most an agreement can reach.`,
    ...(tuned(p).length ? [`Robot-only baselines, each from the same start on the same robot with the same robot accounting (success [95% CI]; ${W} − it, paired; robot hours at the end, median): ${tuned(p).map((v) => `${label(v)} ${iv(v)}; ${diff(v)}; ${fmt(median(a.hours(v)), 3)} h`).join(' — ')}.${rlpdBudget(p)}${bestPoints(p, score)}`] : []),
    `Every trained variant hands back the parameters of the evaluation it keeps by its own measurement (its latest, unless its best measured higher by more than one standard error of the difference, then the best; wmrl/keep-best.ts): ${c.measureEpisodes} episodes of the mean action on the robot from train-split start states (from ${MEASURE_BLOCK * START_BLOCK}, the same at every evaluation), at the start and at every evaluation, charged to the robot clock like every robot episode, so every robot-hour figure here includes them (${W}'s measurement ${fmt(median(a.measureHours(HEADLINE)), 3)} h of its ${fmt(median(a.hours(HEADLINE)), 3)} h, standard GRPO's ${fmt(median(a.measureHours('standard')), 3)} h of ${fmt(median(a.hours('standard')), 3)} h, medians over seeds). The split's start states never choose: the success figures and curves are the handed-back policy's. The start was handed back on ${trained(p).map((v) => `${v} ${a.kept(v).filter((k) => k === 0).length}`).join(', ')} of ${seeds.length} seed${seeds.length === 1 ? '' : 's'}; the update handed back per seed is in the table.`,
    `The arms that post-train the calibrated clone (WMRL's and standard GRPO from it) take the product's policy step ${POST_TRAIN_LR.calibrated.toExponential()} (recipes/options.ts POST_TRAIN_LR, chosen on validation: docs/decisions.md). ` +
      `Do no harm (the handed-back policy against the policy its trainer started from — the calibrated clone where the variant calibrates — on the split's ${c.evalEpisodes} states; harmed: lower by more than the evaluation noise, an exact one-sided sign test at 2.5% on the states where the two disagree): ${harmed.length ? `harmed on ${harmed.map(([v, ss]) => `${v} (seed${ss.length > 1 ? 's' : ''} ${ss.join(', ')})`).join(', ')}` : 'no variant harmed its start on any seed'}; the worst seed's difference per variant: ${trained(p).map((v) => `${v} ${fmt(Math.min(...a.harm(v).map((x) => x.diff)), 2)}`).join(', ')}. Where a run handed back its start the difference is 0 by keep-best; what the updates themselves did is the per-seed table's "last".`,
    `One WMRL update's imagination (${t.rollouts} rollouts × ${t.horizon} steps, policy + ensemble fused, unfitted weights of the run's sizes) ran at ${fmt(t.imagineTps, 4)} transitions/s against ${fmt(t.simSps, 4)} raw MuJoCo control steps/s, measured alternately in this run: ${fmt(t.imagineTps / t.simSps)}×.`,
  ];

  const dash = '—';
  const rows = p.variants.map((v) => {
    const isCorr = (CORRECTED as readonly string[]).includes(v);
    const cs = v === 'bc' ? null : seeds.map((s) => a.cell(s, v));
    return [
      (named ? `${task}: ` : '') + label(v),
      v === 'bc' ? dash : String(V[v].prompts),
      formatInterval(score[v], false),
      v === HEADLINE ? dash : diff(v),
      v === 'bc' ? dash : v === 'standard' ? '1x (the level)' : shortSpeedup(speed[v]),
      cs ? fmt(median(cs.map((x) => x.robotHours)), 3) : '0',
      cs ? `${cs.map((x) => x.keptUpdate).join(' / ')} (the start on ${cs.filter((x) => x.keptUpdate === 0).length})` : dash,
      cs ? fmt(median(cs.map((x) => x.computeSeconds)), 3) : dash,
      cs ? fmt(median(cs.map((x) => mean(x.realGroups))), 2) : dash,
      isCorr ? fmt(median(corr[v as (typeof CORRECTED)[number]].map((x) => x.weightEnd)), 2) : dash,
    ];
  });

  const noLevelMark = (i: number, x: number | string) => (a.hasLevel[i] ? x : 'no level');
  const perSeed = [
    `### ${task}: per seed, success after ${c.updates} updates on the split's start states`,
    '',
    perSeedTable(seeds, p.variants.map((v) => ({ name: v, values: a.success(v) }))),
    '',
    `### ${task}: per seed, robot hours to standard GRPO's final success (the level; "never": not within the run; "no level": standard GRPO did not improve on the start)`,
    '',
    perSeedTable(seeds, [
      { name: 'level', values: a.level.map((x, i) => noLevelMark(i, x)) },
      ...trained(p).map((v) => ({ name: v, values: a.hoursTo(v).map((x, i) => noLevelMark(i, x)), cost: true })),
    ]),
    '',
    `### ${task}: per seed, robot-hours speedup over standard GRPO to the level (its hours / the variant's; 0: the variant never reached it)`,
    '',
    perSeedTable(seeds, trained(p).filter((v) => v !== 'standard').map((v) => ({ name: v, values: speed[v]!.perSeed.map((x, i) => noLevelMark(i, x.speedup)) }))),
    '',
    `### ${task}: per seed, the update each variant handed back, chosen by its own measurement on the robot (0: the start), and the split's success of the last update's policy, whether handed back or not`,
    '',
    perSeedTable(seeds, trained(p).map((v) => ({ name: v, values: seeds.map((s) => `${a.cell(s, v).keptUpdate}; last ${fmt(a.cell(s, v).updatedSuccess.at(-1)!, 2)}`) }))),
    '',
    `### ${task}: per seed, do no harm: the handed-back policy's success minus its trainer's start's (the calibrated clone where the variant calibrates); "harmed": lower by more than the evaluation noise`,
    '',
    perSeedTable(seeds, trained(p).map((v) => ({ name: v, values: a.harm(v).map((x) => `${fmt(x.diff, 2)}${x.harmed ? ' harmed' : ''}`) }))),
    '',
    `### ${task}: per seed, the corrections (anchor groups per update; the denoiser's anchor weight at the end / its largest, 1 = not up-weighted; the first update whose scores a debias map calibrated; the map's latest held-out bias reduction)`,
    '',
    perSeedTable(seeds, [
      { name: `${HEADLINE} anchors/update`, values: corr[HEADLINE].map((x) => fmt(x.anchorsPerUpdate, 2)) },
      ...CORRECTED.flatMap((v) => [
        { name: `${v} weight`, values: corr[v].map((x) => `${fmt(x.weightEnd, 2)} / ${fmt(x.weightMax, 2)}`) },
        { name: `${v} map from`, values: corr[v].map((x) => (x.mapFrom === null ? 'never' : x.mapFrom)) },
      ]),
      { name: `${HEADLINE} bias reduction`, values: corr[HEADLINE].map((x) => (x.biasReduction === null ? dash : fmt(x.biasReduction, 2))) },
    ]),
    '',
  ].join('\n');

  // Mean curve over seeds: every variant evaluates at the same updates on every seed.
  const lines: Series[] = trained(p).map((v) => {
    const curves = seeds.map((s) => a.curve(s, v));
    return { label: V[v]!.label, points: curves[0]!.map((_, k): [number, number] => [mean(curves.map((cv) => cv[k]![0])), mean(curves.map((cv) => cv[k]![1]))]) };
  });

  // Calibration: what the calibrating arms' identification found and what the clone did with it (the headline arm's runs).
  const cals = seeds.map((s) => a.cell(s, HEADLINE).calibration);
  if (cals.every((x) => x !== null)) {
    const scale = (k: string) => cals.map((x) => fmt(x!.scales[k as keyof typeof x.scales] ?? 1, 2)).join(' / ');
    const putBack = seeds.filter((_, i) => !cals[i]!.kept);
    summary.push(
      `Calibration before the trainer (every WMRL arm with a robot, and standard GRPO from the calibrated clone): ${cals[0]!.robotEpisodes} robot episodes of the clone identify the robot through the pretrained world model, and a policy of the clone's shape, its weights drawn afresh, learns again from the task's robust demonstrator in the sim set to what was identified, keeping its last cloning round (wmrl/calibrate.ts). In ${W}'s runs, per seed: delay ${cals.map((x) => x!.delay).join(' / ')} steps, the round kept ${cals.map((x) => x!.round).join(' / ')} (0: the demonstrations alone, then DAgger's), mass ×${scale('mass_scale')}, friction ×${scale('friction_scale')}, damping ×${scale('damping_scale')}, actuator gain ×${scale('actuator_gain_scale')}; the clone's measured success before → after ${cals.map((x) => `${fmt(x!.before ?? NaN, 2)} → ${fmt(x!.after ?? NaN, 2)}`).join(', ')}${putBack.length ? `; put back (measured worse after) on seed${putBack.length > 1 ? 's' : ''} ${putBack.join(', ')}` : ''}. ` +
        `The calibrated clone on the split's states, before any update: ${fmt(mean(seeds.map((s) => a.cell(s, HEADLINE).startSuccess)), 3)} (mean over seeds; the uncalibrated start ${fmt(mean(a.success('bc')), 3)}). Standard GRPO from the calibrated clone ${iv('standard_cal')}; ${W} − it ${diff('standard_cal')}.`,
    );
  }
  const alarms = trained(p).flatMap((v) => seeds.map((s) => a.cell(s, v).alarms)).reduce((x, y) => x + y, 0);
  if (alarms) summary.push(`The reward-hacking alarm was raised on ${alarms} update(s) over the WMRL variants' runs.`);
  const nan = (x: number) => (Number.isNaN(x) ? 'n/a' : x);
  const { best, speedBest } = a;
  summary.push(`The best robot-only baseline (the highest mean success among the trainers that use no world model): ${V[best]!.label} ${iv(best)}. Robot-hours to its final success, ${W}'s speedup over it: ${Number.isNaN(speedBest.median.estimate) ? 'not defined on any seed' : formatSpeedup(speedBest)}${a.hasBestLevel.every((x) => x) ? '' : `; on ${seedList(seeds.filter((_, i) => !a.hasBestLevel[i]))} it did not improve on the start: no level there`}.`);
  const result: Record<string, number | string> = {
    wmrl_arm: HEADLINE,
    success_wmrl: score[HEADLINE].estimate,
    success_wmrl_lo: score[HEADLINE].lo,
    success_wmrl_hi: score[HEADLINE].hi,
    success_best_baseline: score[best]!.estimate,
    best_baseline: best,
    robot_hours_wmrl: median(a.hours(HEADLINE)),
    calibrated_success: mean(seeds.map((s) => a.cell(s, HEADLINE).startSuccess)),
    final_success_standard_cal: score.standard_cal.estimate,
    final_success_wmrl: score[HEADLINE].estimate,
    final_success_standard: score.standard.estimate,
    final_success_anchors_only: score.anchors_only.estimate,
    final_success_pure_wm: score.pure_wm.estimate,
    final_success_debias_only: score.debias.estimate,
    final_success_denoise_only: score.denoise.estimate,
    final_success_active: score.full_active.estimate,
    final_success_full_learned: score.full.estimate,
    final_success_full_sim: score.full_sim.estimate,
    final_success_pure_sim: score.pure_sim.estimate,
    final_success_bc: score.bc.estimate,
    ...Object.fromEntries(BASELINES.flatMap((b) => [
      [`wmrl_minus_${b}`, minusFull[b].estimate], [`wmrl_minus_${b}_lo`, minusFull[b].lo], [`wmrl_minus_${b}_hi`, minusFull[b].hi], [`wmrl_vs_${b}`, verdict(minusFull[b]).replace(/ /g, '_')],
    ])),
    robot_time_speedup_best: nan(speedBest.median.estimate),
    robot_time_speedup_best_lo: nan(speedBest.median.lo),
    robot_time_speedup_best_hi: nan(speedBest.median.hi),
    robot_time_speedup_best_never: speedBest.never.length,
    robot_time_speedup: nan(full.median.estimate),
    robot_time_speedup_lo: nan(full.median.lo),
    robot_time_speedup_hi: nan(full.median.hi),
    robot_time_speedup_never: full.never.length,
    robot_time_speedup_no_level: a.noLevel.length,
    robot_hours_ratio: median(a.hours(HEADLINE).map((h, i) => h / a.hours('standard')[i]!)),
    start_kept_wmrl: a.kept(HEADLINE).filter((k) => k === 0).length,
    harmed_runs: harmed.reduce((n, [, ss]) => n + ss.length, 0),
    harmed_runs_wmrl: a.harm(HEADLINE).filter((x) => x.harmed).length,
    harm_worst_wmrl: Math.min(...a.harm(HEADLINE).map((x) => x.diff)),
    start_kept_standard: a.kept('standard').filter((k) => k === 0).length,
    anchor_share_wmrl: median(fullCorr.map((x) => x.anchorShare)),
    anchor_weight_wmrl: median(fullCorr.map((x) => x.weightEnd)),
    agreement_wmrl: mean(agreeWmrl.filter((x) => !Number.isNaN(x))),
    repeatability: mean(repeat),
    denoiser_acted_seeds: seeds.length - neverDenoised.length,
    debias_acted_seeds: seeds.length - neverMapped.length,
    imagine_tps: t.imagineTps,
    sim_sps: t.simSps,
    imagine_vs_sim: t.imagineTps / t.simSps,
    ...Object.fromEntries(tuned(p).flatMap((b) => [
      [`final_success_${b}`, score[b]!.estimate], [`wmrl_minus_${b}`, minusFull[b]!.estimate], [`wmrl_minus_${b}_lo`, minusFull[b]!.lo], [`wmrl_minus_${b}_hi`, minusFull[b]!.hi], [`wmrl_vs_${b}`, verdict(minusFull[b]!).replace(/ /g, '_')],
    ])),
  };
  return { summary, rows, perSeed, lines, result };
}

/** The report of a run's cells (`task/seed/variant` → cell), which the run computed or reused. */
export function report(p: Plan, keys: ProtocolKeys, cells: ReadonlyMap<string, EmbodiedCell>, run: RunInfo): BenchReport {
  const parts = p.tasks.map((task) => summarize(p, analyse(p, task, cells), run, p.tasks.length > 1));
  const n = p.tasks.length * p.seeds.length * p.variants.length;
  const variantCells = [...cells.values()].filter(isVariantCell);
  const imagined = variantCells.reduce((s, c) => s + c.imaginedTransitions, 0), imagineS = variantCells.reduce((s, c) => s + c.imagineSeconds, 0);
  const cpu = variantCells.reduce((s, c) => s + c.computeSeconds, 0);
  // The first task's figures under the plain keys; every further task's under its name.
  const result: Record<string, number | string> = { split: p.split, seeds: p.seeds.length, ...parts[0]!.result };
  parts.slice(1).forEach((part, i) => Object.entries(part.result).forEach(([k, v]) => { result[`${p.tasks[i + 1]!.replace('@', '_')}_${k}`] = v; }));
  result.imagine_tps_training = imagineS > 0 ? imagined / imagineS : 0;
  result.wall_min = run.wallS / 60;
  const runLine = `${run.computed} of ${n} cells computed in this run, ${fmt(run.wallS / 60, 3)} min wall-clock; the rest reused from bench/results/cells under their computation keys. The training runs' compute over all cells: ${fmt(cpu / 60, 3)} min (imagination during them: ${fmt(result.imagine_tps_training as number, 4)} transitions/s, under their load).`;
  const first = p.tasks[0]!;
  return {
    title: `Embodied WMRL: post-training on the ${[...new Set(p.tasks.map((a) => armOf(a).profile))].join(' and ')} robot${new Set(p.tasks.map((a) => armOf(a).profile)).size > 1 ? 's' : ''} (${[...new Set(p.tasks.map((a) => armOf(a).task))].join(' and ')}, ${p.split} split)`,
    summary: [...parts.map((part) => part.summary.join('\n')), runLine].join('\n\n'),
    header: ['variant', 'groups per update', `success after ${p.cell.updates} updates (mean [95% CI])`, `${variants(p.cell.prompts)[HEADLINE]!.label} − variant (paired, 95% CI)`, "robot-hours speedup to standard's final (median [95% CI])", `robot hours at ${p.cell.updates} updates, the trainer's measurement included (median)`, 'update handed back per seed (0: the start)', 'compute s (median)', 'robot groups per update (median)', 'anchor weight at the end (median)'],
    rows: parts.flatMap((part) => part.rows),
    notes: [
      `Report key \`${keys.report}\`; computation key of the shared setup (pretraining, evaluation, the cell options; the behaviour-cloned start's cells) \`${keys.compute}\`${keys.variants ? `, each variant's (the setup, its trainer's code, its options): ${Object.entries(keys.variants).map(([v, k]) => `${v} \`${k}\``).join(', ')}` : ''}; test-split cells are recorded in bench/results/ledger.jsonl under their computation key. Chosen on validation (docs/decisions.md): where a calibrated run imagines (the identified sim, the headline arm), its imagined groups per update (the twin probes), the policy step of the arms that post-train the calibrated clone, and the grid points of the tuned baselines chosen there (${chosenWords()}); chosen before the protocol on the bench's own seeds and not re-made: the learned model's imagined groups per update (IMAGINED), the anchors per update and the update count. ${p.split === 'validation' ? `The robot-only baselines run every point of their grids (${Object.entries(GRIDS).map(([f, g]) => `${f}: ${Object.entries(g).map(([k, xs]) => `${k} ${xs.join(' / ')}`).join(', ')}`).join('; ')}), for the choice of each one's test point.` : `The robot-only baselines run one grid point each: ${chosenWords()}.`}`,
      '',
      ...parts.map((part) => part.perSeed),
    ].join('\n'),
    plot: { title: `${armOf(first).task} on the ${armOf(first).profile} robot: true success against robot-hours (mean of ${p.seeds.length} seed${p.seeds.length === 1 ? '' : 's'})`, xLabel: 'robot hours', yLabel: 'success on the split\'s start states', lines: parts[0]!.lines },
    keys,
    result,
  };
}
