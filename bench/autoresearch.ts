// AutoResearch on the WMRL core, under the evidence protocol (bench/lib/protocol.ts): the built-in agent searches the
// weather classifier's architecture and hyperparameters (autoresearch/tasks/classifier.ts; every execution trains a
// real nn/ model in the sandbox pool), trained with the same policy, groups and learning rate as standard GRPO (every
// proposal executed), full WMRL (outcome world model + anchors through the Corrector) and pure world model (the
// warm-up data only); beside them two measurement baselines at WMRL's slot budget: random search and GP Bayesian
// optimisation over the proposal space (bench/lib/research-baselines.ts). Research-task seeds are split into train
// (--quick), validation (where choices are made: `--split validation`) and test (the report, read once per
// computation key). The cells are computed in bench/cells/autoresearch.ts; this file runs and reports them.
//
// Per seed: the sandbox CPU time from which each arm's greedy proposal stays at or above standard GRPO's final score, and
// the final proposal's balanced accuracy on the split's own evaluation episodes (held-out training seeds of the
// classifier; on the test split scored on the data's test part, which no arm ever sees).
//
// Cost accounting: an execution is charged the CPU time its sandboxed process reported (its wall slot time where it
// never answered), which other processes on the machine barely change, so budgets and speedups do not follow the
// machine's load; wall slot time is reported beside. Executions are deterministic in (proposal, training seed), so the
// bench memoizes them across arms and seeds, and journals them beside its cached cells: a repeated execution replays
// the measured outcome *and is charged its measured time again*, exactly as if it had run. Evaluations of the greedy
// proposal (the score curves, the episodes) are measurements, charged to no arm.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandboxPool } from '../autoresearch/sandbox.js';
import { classifierTask } from '../autoresearch/tasks/classifier.js';
import { RESEARCH_OUTCOME, RESEARCH_WMRL, ReplayExecutor } from '../recipes/autoresearch.js';
import { ArmCells, BASELINE_BATCH, LR, SLOTS, cellOptions, type Arm, type ArmCell } from './cells/autoresearch.js';
import { CACHE_ROOT, defineSplits, evaluateCell, protocolKeys, protocolRun, type BenchProtocol, type ProtocolKeys, type SplitName } from './lib/protocol.js';
import { fmt, median, type BenchOptions, type BenchReport } from './lib/report.js';
import { ACQUISITIONS, type Acquisition } from './lib/research-baselines.js';
import { formatInterval, formatSpeedup, hierarchicalBootstrap, pairedDifference, perSeedTable, speedups, verdict, type Interval, type SpeedupSummary } from './lib/stats.js';

export type { ArmCell };

// ── Splits ──────────────────────────────────────────────────────────────────────────────────────
/**
 * Research-task seeds (the agent's seed: its sampling and warm-up) and evaluation episodes (the classifier's training
 * seeds a final proposal is scored on). Validation holds seeds 1-11, on which the recipe's choices were made before
 * this protocol; test seeds start at 1000 and were never run before it. Train episodes are the task's training seeds
 * (those the agent's executions and its greedy curve draw); the other two splits' episodes are seeds it never sees.
 */
export const SPLITS = defineSplits('autoresearch', {
  seeds: { train: [0], validation: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], test: [1000, 1001, 1002, 1003, 1004, 1005, 1006, 1007, 1008, 1009] },
  episodes: { train: [0, 1, 2], validation: [3, 4, 5, 6, 7], test: [8, 9, 10, 11, 12] },
});
if (SPLITS.sets.episodes.train.length !== classifierTask.seeds) throw new Error(`bench autoresearch: the train episodes must be the task's ${classifierTask.seeds} training seeds`);

// ── What runs ───────────────────────────────────────────────────────────────────────────────────
/** GP-BO's acquisition in the test run, chosen on the validation split by the rule its report states (docs/decisions.md). */
export const GPBO_ACQUISITION: Acquisition = 'ucb';

const NAMES: Record<string, string> = { standard: 'standard GRPO (all executed)', wmrl: 'full WMRL', pure: 'pure world model', random: 'random search', 'gpbo-thompson': 'GP-BO (Thompson)', 'gpbo-ei': 'GP-BO (EI)', 'gpbo-ucb': 'GP-BO (UCB)' };
const armName = (a: Arm) => NAMES[a] ?? a;

/** The run a set of options makes: split, seeds, arms, and the cells' options (episodes, sizes, settings). Its JSON is part of the report key. */
export function plan(o: BenchOptions) {
  const split: SplitName = o.quick ? 'train' : o.split ?? 'test';
  const arms: Arm[] = ['standard', 'wmrl', 'pure', 'random', ...(split === 'validation' ? ACQUISITIONS.map((a) => `gpbo-${a}` as const) : [`gpbo-${GPBO_ACQUISITION}` as const])];
  return { ...cellOptions({ quick: o.quick, split, episodes: SPLITS.sets.episodes[split] }), seeds: SPLITS.sets.seeds[split], arms };
}

/**
 * The cells depend on bench/cells/autoresearch.ts and everything it imports, autoresearch/ whole (the sandbox runs its
 * programs by path) and the cells' options; the report adds this file and the run's seeds and arms.
 */
export const protocol: BenchProtocol = {
  splits: SPLITS,
  keys: (o) => {
    const p = plan(o);
    return protocolKeys({
      compute: { entry: new URL('./cells/autoresearch.ts', import.meta.url).href, dirs: ['autoresearch'], options: cellOptions({ quick: o.quick, split: p.split, episodes: p.episodes }) },
      report: { entry: import.meta.url, dirs: ['autoresearch'], options: p },
    });
  },
};

// ── Cells: an arm at one seed ───────────────────────────────────────────────────────────────────
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
/** Slot time from which the curve stays at or above `level` to its end (Infinity: it does not end there). */
function stays(points: ReadonlyArray<[number, number]>, level: number): number {
  let k = points.length;
  while (k > 0 && points[k - 1]![1] >= level - 1e-9) k--;
  return k < points.length ? points[k]![0] : Number.POSITIVE_INFINITY;
}
const firstReach = (points: ReadonlyArray<[number, number]>, level: number) => points.find(([, y]) => y >= level - 1e-9)?.[0] ?? Number.POSITIVE_INFINITY;
const finalOf = (c: ArmCell) => c.points[c.points.length - 1]![1];

export async function run(opts: BenchOptions): Promise<BenchReport> {
  const p = plan(opts);
  const keys = protocol.keys(opts);
  // A quick run is a smoke test of this code: it caches nothing, so it always runs.
  const scratch = opts.quick ? mkdtempSync(join(tmpdir(), 'bench-autoresearch-')) : null;
  const cacheRoot = scratch ?? CACHE_ROOT;
  const pr = protocolRun(SPLITS, keys.compute, { cacheRoot, ...(opts.relook ? { relook: true } : {}) });
  const journalDir = join(cacheRoot, 'autoresearch', keys.compute);
  mkdirSync(journalDir, { recursive: true });
  const pool = SandboxPool.create({ slots: SLOTS });
  const ex = new ReplayExecutor(pool, join(journalDir, 'executions.jsonl'));
  const started = performance.now();
  const cells = new Map<string, ArmCell>();
  let done = 0, computed = 0;
  const total = p.seeds.length * p.arms.length;
  const compute = new ArmCells(ex, p, (label) => opts.progress(done, total, label));

  try {
    for (const seed of p.seeds) {
      for (const arm of p.arms) {
        const cell = () => (arm === 'standard' || arm === 'wmrl' || arm === 'pure' ? compute.research(seed, arm) : compute.baseline(seed, arm, cells.get(`${seed}/wmrl`)!.cpuSeconds));
        const out = await evaluateCell(pr, { task: 'classifier', variant: arm, seed, split: p.split, episodes: p.episodes.length }, cell, (c) => ({
          final_score: finalOf(c),
          episode_mean: mean(c.episodes),
          cpu_s: c.cpuSeconds,
          executions: c.executions,
        }));
        if (!out.cached) computed++;
        cells.set(`${seed}/${arm}`, out.value);
        opts.progress(++done, total, `seed ${seed} ${arm}${out.cached ? ' (cached)' : ''}`);
      }
    }
  } finally {
    await pool.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
  const wallS = (performance.now() - started) / 1000;
  return report(p, keys, cells, { wallS, computed, executed: ex.executed, isolation: pool.isolation.network });
}

// ── The report ──────────────────────────────────────────────────────────────────────────────────
/** The report of a run's cells (`seed/arm` → cell), which the run measured or reused. */
export function report(p: ReturnType<typeof plan>, keys: ProtocolKeys, cells: Map<string, ArmCell>, run: { wallS: number; computed: number; executed: number; isolation: boolean }): BenchReport {
  const task = classifierTask;
  const sz = p.sizes;
  const seeds = p.seeds;
  const cell = (seed: number, a: Arm) => cells.get(`${seed}/${a}`)!;
  const gpbo = p.arms.find((a) => a === `gpbo-${GPBO_ACQUISITION}`)!;
  const others = p.arms.filter((a) => a !== 'wmrl');
  // The level per seed: standard GRPO's final greedy score; each arm's CPU time from which it stays there (and first reaches it).
  const level = seeds.map((s) => finalOf(cell(s, 'standard')));
  const t = (a: Arm) => seeds.map((s, i) => stays(cell(s, a).points, level[i]!));
  const first = (a: Arm) => seeds.map((s, i) => firstReach(cell(s, a).points, level[i]!));
  const speed: Record<string, SpeedupSummary> = Object.fromEntries(p.arms.filter((a) => a !== 'standard').map((a) => [a, speedups(seeds, t('standard'), t(a))]));
  const speedFirst = speedups(seeds, first('standard'), first('wmrl'));
  const wmrlOverGpbo = speedups(seeds, t(gpbo), t('wmrl'));
  const episodes = (a: Arm) => seeds.map((s) => cell(s, a).episodes);
  const score: Record<string, Interval> = Object.fromEntries(p.arms.map((a) => [a, hierarchicalBootstrap(episodes(a))]));
  const diff: Record<string, Interval> = Object.fromEntries(others.map((a) => [a, pairedDifference(episodes('wmrl'), episodes(a))]));
  const gpboMinusRandom = pairedDifference(episodes(gpbo), episodes('random'));
  const what = p.split === 'test' ? "balanced accuracy on the data's test part" : "balanced accuracy on the data's validation part";
  const anchorShare = median(seeds.map((s) => cell(s, 'wmrl').anchorShare!));
  // Whether the denoiser acted: its weight on the anchors above 1 on some step of some seed.
  const weights = seeds.map((s) => cell(s, 'wmrl').anchorWeight!);
  const anchorWeightLast = median(weights.map((w) => w.at(-1)!));
  const acted = weights.map((w) => w.filter((x) => x > 1 + 1e-9).length);
  const denoiserSentence = acted.every((n) => n === 0)
    ? `1 on every step of every seed: in this run the denoiser never acted (full WMRL here is the debiased outcome model with its anchors at face value).`
    : `median at the last step ${fmt(anchorWeightLast)}; above 1 on ${acted.map((n, i) => `${n} of ${weights[i]!.length} steps`).join(', ')} (seeds ${seeds.join(', ')}).`;
  const unscored = p.arms.flatMap((a) => seeds.map((s) => cell(s, a).unscored)).reduce((x, y) => x + y, 0);

  const rows = p.arms.map((a) => [
    armName(a),
    formatInterval(score[a]!, false),
    a === 'wmrl' ? '—' : `${formatInterval(diff[a]!)} ${verdict(diff[a]!) === 'beats' ? '(WMRL better)' : verdict(diff[a]!) === 'worse' ? '(WMRL worse)' : '(no difference shown)'}`,
    median(seeds.map((s) => finalOf(cell(s, a)))),
    median(seeds.map((s) => cell(s, a).cpuSeconds)),
    median(seeds.map((s) => cell(s, a).slotSeconds)),
    a === 'standard' ? '1x (the level)' : formatSpeedup(speed[a]!),
    median(seeds.map((s) => cell(s, a).executions)),
  ]);
  const summary = [
    `Task: ${task.name} (${task.metric}); the agent's policy is one softmax per field over ${task.fields.map((f) => `${f.name} (${f.choices.length})`).join(', ')} (${task.fields.reduce((n, f) => n * f.choices.length, 1)} proposals).`,
    `Split: **${p.split}** — research-task seeds ${seeds.join(', ')}; each arm's final proposal scored on evaluation episodes (classifier training seeds ${p.episodes.join(', ')}) by ${what}. Intervals: 95% bootstrap over seeds and, within them, episodes (paired where two arms are compared: same seeds, same episodes); "better"/"worse" only where the interval excludes 0.`,
    `Same agent in the three GRPO arms: ${sz.groupsPerStep} groups of ${sz.groupSize} proposals per step, learning rate ${LR}; standard GRPO ${sz.standardSteps} steps, WMRL and pure world model ${sz.wmrlSteps} steps after ${sz.warmup} random warm-up executions; WMRL executes ${fmt(RESEARCH_WMRL.anchors!.fraction!)} of its groups as anchors (median share of anchor groups per step over seeds: ${fmt(anchorShare)}); world-model arms score with a Gaussian-process outcome model (${RESEARCH_OUTCOME.features} features, one Thompson draw per step). The denoiser's weight on the anchors: ${denoiserSentence}`,
    `Baselines at WMRL's budget (per seed, the sandbox CPU seconds WMRL's executions used): random search and GP Bayesian optimisation (${p.arms.filter((a) => a.startsWith('gpbo-')).map(armName).join(', ')}; ${p.baseline.init} random proposals first, then ${BASELINE_BATCH} a round on the same GP as WMRL's outcome model, refitted each round), each recommending its best proposal after every round. Standard GRPO spends more than that budget (its ${sz.standardSteps} steps), so its final score is not at equal cost. Every arm is charged the CPU time each execution's sandboxed process reported (wall slot time where it never answered); the wall slot seconds are reported beside.`,
    `Sandbox pool of ${SLOTS} slots (network isolation ${run.isolation ? 'on' : 'OFF'}); ${run.computed} of ${seeds.length * p.arms.length} cells computed in this run (${run.executed} executions), ${fmt(run.wallS)} s wall; the rest reused from bench/results/cells under the computation key.${unscored ? ` ${unscored} final-proposal executions came back unscored and count 0.` : ''}`,
    `CPU time from which the greedy proposal stays at or above standard GRPO's final score, WMRL vs standard: ${formatSpeedup(speed.wmrl!)} (first time it gets there: ${formatSpeedup(speedFirst)}); WMRL vs ${armName(gpbo)}: ${formatSpeedup(wmrlOverGpbo)}.`,
    `Final ${what}: WMRL ${formatInterval(score.wmrl!, false)}; WMRL − ${armName(gpbo)} ${formatInterval(diff[gpbo]!)} (${verdict(diff[gpbo]!)}); WMRL − random search ${formatInterval(diff.random!)} (${verdict(diff.random!)}); WMRL − standard GRPO ${formatInterval(diff.standard!)} (${verdict(diff.standard!)}); ${armName(gpbo)} − random search ${formatInterval(gpboMinusRandom)} (${verdict(gpboMinusRandom)}).`,
  ].join('\n');

  const perSeed = perSeedTable(seeds, [
    { name: 'level (std final)', values: level },
    ...p.arms.map((a) => ({ name: `${a}: CPU s to stay`, values: t(a), cost: true })),
    ...p.arms.map((a) => ({ name: `${a}: final (episodes)`, values: seeds.map((s) => mean(cell(s, a).episodes)) })),
    { name: 'WMRL CPU s (= baseline budget)', values: seeds.map((s) => cell(s, 'wmrl').cpuSeconds) },
    { name: 'WMRL wall slot s', values: seeds.map((s) => cell(s, 'wmrl').slotSeconds) },
    { name: 'WMRL last anchor weight', values: seeds.map((s) => cell(s, 'wmrl').anchorWeight!.at(-1)!) },
  ]);
  const speedTable = perSeedTable(seeds, p.arms.filter((a) => a !== 'standard').map((a) => ({ name: `${a} speedup vs standard`, values: speed[a]!.perSeed.map((x) => x.speedup) })));
  // On validation, the acquisition the rule picks by the criterion WMRL's outcome model was chosen by: the highest
  // median speedup over standard GRPO, then the higher mean final score.
  const candidates = p.arms.filter((a) => a.startsWith('gpbo-'));
  const better = (a: Arm, b: Arm) => speed[a]!.median.estimate > speed[b]!.median.estimate || (speed[a]!.median.estimate === speed[b]!.median.estimate && score[a]!.estimate > score[b]!.estimate);
  const picked = candidates.reduce((b, a) => (better(a, b) ? a : b));
  const choice = p.split !== 'validation' ? [] : [
    '### GP-BO acquisition, chosen here (validation)',
    '',
    `Rule: the acquisition with the highest median speedup over standard GRPO (the criterion WMRL's outcome model was chosen by), then the higher mean final validation score; it picks **${armName(picked)}**. The test run uses ${armName(gpbo)} (\`GPBO_ACQUISITION\`; docs/decisions.md).`,
    '',
    '| acquisition | final validation score | − picked (paired) | speedup vs standard |',
    '| --- | --- | --- | --- |',
    ...candidates.map((a) => `| ${armName(a)} | ${formatInterval(score[a]!, false)} | ${a === picked ? '—' : formatInterval(pairedDifference(episodes(a), episodes(picked)))} | ${formatSpeedup(speed[a]!)} |`),
    '',
  ];
  const notes = [
    `Report key \`${keys.report}\`, computation key \`${keys.compute}\`; test-split cells are recorded in bench/results/ledger.jsonl under the computation key.`,
    '',
    ...choice,
    '### Per seed: the level, CPU seconds from which each arm stays at it ("never": not by the end of its budget), and each final proposal\'s mean over the episodes',
    '',
    perSeed,
    '',
    '### Per seed: speedup over standard GRPO (its CPU time to stay at the level / the arm\'s; 0: the arm never stays there)',
    '',
    speedTable,
    '',
    'Executions are memoized across arms and seeds (deterministic in proposal and training seed); each arm is charged the measured CPU time of every execution it asks for, repeated or not. CPU times are measurements: another machine charges other times, and the baselines\' budgets follow them (the GRPO arms\' proposals do not change).',
  ].join('\n');
  const plotSeed = seeds[0]!;
  return {
    title: `AutoResearch: standard GRPO vs WMRL vs pure world model vs random search vs GP-BO (weather classifier search, ${p.split} split)`,
    summary,
    header: ['arm', `final ${p.split === 'test' ? 'test' : 'validation'} score (mean [95% CI])`, 'WMRL − arm (paired, 95% CI)', 'final greedy score (median)', 'CPU s charged (median)', 'wall slot s (median)', 'speedup vs standard (to stay at its final)', 'executions (median)'],
    rows,
    notes,
    plot: {
      title: `greedy proposal score vs sandbox CPU seconds (seed ${plotSeed})`,
      xLabel: 'sandbox CPU seconds',
      yLabel: 'balanced accuracy (validation part, train episodes)',
      lines: p.arms.map((a) => ({ label: armName(a), points: cell(plotSeed, a).points })),
    },
    keys,
    result: {
      split: p.split,
      seeds: seeds.length,
      speedup_wmrl: speed.wmrl!.median.estimate,
      speedup_wmrl_lo: speed.wmrl!.median.lo,
      speedup_wmrl_hi: speed.wmrl!.median.hi,
      speedup_wmrl_never: speed.wmrl!.never.length,
      speedup_gpbo: speed[gpbo]!.median.estimate,
      speedup_random: speed.random!.median.estimate,
      final_wmrl: score.wmrl!.estimate,
      final_standard: score.standard!.estimate,
      final_pure_wm: score.pure!.estimate,
      final_random: score.random!.estimate,
      final_gpbo: score[gpbo]!.estimate,
      anchor_weight_wmrl: anchorWeightLast,
      wmrl_minus_gpbo: diff[gpbo]!.estimate,
      wmrl_minus_gpbo_lo: diff[gpbo]!.lo,
      wmrl_minus_gpbo_hi: diff[gpbo]!.hi,
      wmrl_minus_standard_lo: diff.standard!.lo,
      wmrl_minus_standard_hi: diff.standard!.hi,
      wmrl_vs_gpbo: verdict(diff[gpbo]!).replace(/ /g, '_'),
      wmrl_vs_standard: verdict(diff.standard!).replace(/ /g, '_'),
    },
  };
}
