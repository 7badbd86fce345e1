// AutoResearch on the WMRL core: the built-in agent searches the weather classifier's architecture
// and hyperparameters (autoresearch/tasks/classifier.ts; every execution trains a real nn/ model
// in the sandbox pool), trained three ways with the same policy, groups and learning rate:
// standard GRPO (every proposal executed), full WMRL (outcome world model + anchors through the
// Corrector) and pure world model (the warm-up data only, no anchors, no corrections); both world-model
// arms use the same outcome model (a Gaussian process scored by Thompson draws). Reports the
// sandbox-slot time from which each stays at the standard run's final score (and first reaches it) and the final scores.
//
// Cost accounting: an execution is charged its measured slot time (spawn to exit). Executions are
// deterministic in (proposal, training seed), so the bench memoizes them across arms and seeds: a
// repeated execution replays the measured outcome *and is charged its measured slot time again*,
// exactly as if it had run; only the bench's wall clock is spared. Evaluations of the greedy
// proposal (the score curves) are measurements and are not charged to any arm.
import { SandboxPool } from '../autoresearch/sandbox.js';
import { classifierTask } from '../autoresearch/tasks/classifier.js';
import { RESEARCH_OUTCOME, RESEARCH_SIZES, RESEARCH_WMRL, ReplayExecutor, runResearch, type ResearchRow } from '../recipes/autoresearch.js';
import { fmt, median, type BenchOptions, type BenchReport } from './lib/report.js';

type ArmKey = 'standard' | 'wmrl' | 'pure';
const ARM_NAMES: Record<ArmKey, string> = { standard: 'standard GRPO (all executed)', wmrl: 'full WMRL', pure: 'pure world model' };

// WMRL's steps are cheap (world-model scored) and its slot time goes to anchors and the warm-up, so
// it takes more steps than standard GRPO; both arms are charged every execution they ask for.
// 12 seeds: the per-seed ratio ranges from about 1 (standard GRPO finds its final proposal in its first
// step) to about 30, so a 3-seed median is one borderline seed's ratio.
const FULL = { seeds: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], ...RESEARCH_SIZES.full };
const QUICK = { seeds: [0], ...RESEARCH_SIZES.quick };
const LR = 1;
const WMRL_ANCHOR_FRACTION = RESEARCH_WMRL.anchors!.fraction!;
const OUTCOME = RESEARCH_OUTCOME;

interface Curve {
  /** (slot seconds spent, greedy proposal's real score) after each step. */
  points: Array<[number, number]>;
  final: number;
  slotSeconds: number;
  executions: number;
  failed: number;
  lastLog: ResearchRow | null;
}

export async function run(opts: BenchOptions): Promise<BenchReport> {
  const sz = opts.quick ? QUICK : FULL;
  const pool = SandboxPool.create({ slots: 2 });
  const ex = new ReplayExecutor(pool);
  const task = classifierTask;
  const totalSteps = sz.seeds.length * (sz.standardSteps + 2 * sz.wmrlSteps);
  let done = 0;
  const started = performance.now();
  const curves: Record<ArmKey, Curve[]> = { standard: [], wmrl: [], pure: [] };
  try {
    for (const seed of sz.seeds) {
      for (const arm of ['standard', 'wmrl', 'pure'] as ArmKey[]) {
        const c: Curve = { points: [], final: Number.NaN, slotSeconds: 0, executions: 0, failed: 0, lastLog: null };
        const onStep = (l: ResearchRow) => {
          c.points.push([l.slotSeconds, l.score]);
          c.lastLog = l;
          opts.progress(++done, totalSteps, `seed ${seed} ${arm} step ${l.step} greedy ${fmt(l.score)} slot ${fmt(l.slotSeconds)} s`);
        };
        const common = { task: 'classifier' as const, groupsPerStep: sz.groupsPerStep, groupSize: sz.groupSize, evalSeeds: sz.evalSeeds, lr: LR, slots: pool.capacity, seed, quick: false };
        if (arm === 'standard') await runResearch({ ...common, algo: 'standard', pureWm: false, steps: sz.standardSteps }, { executor: ex, onStep });
        else await runResearch({ ...common, algo: 'wmrl', pureWm: arm === 'pure', steps: sz.wmrlSteps, warmup: sz.warmup }, { executor: ex, onStep });
        const last = c.lastLog!;
        c.final = c.points[c.points.length - 1]![1];
        c.slotSeconds = last.slotSeconds;
        c.executions = last.executions;
        c.failed = last.failedExecutions;
        curves[arm].push(c);
      }
    }
  } finally {
    await pool.close();
  }
  const wallS = (performance.now() - started) / 1000;

  // Per seed: the standard run's final score, and the slot time from which each arm's greedy proposal scores at
  // least that for the rest of its run (a world-model arm's greedy proposal moves at every step, and a
  // Thompson-sampled one can pass the level for a step and leave it); the first time it does, beside it.
  const reach = (c: Curve, target: number) => c.points.find(([, y]) => y >= target - 1e-9)?.[0] ?? Number.POSITIVE_INFINITY;
  const stays = (c: Curve, target: number) => {
    let k = c.points.length;
    while (k > 0 && c.points[k - 1]![1] >= target - 1e-9) k--;
    return k < c.points.length ? c.points[k]![0] : Number.POSITIVE_INFINITY;
  };
  const perSeed = sz.seeds.map((seed, i) => {
    const target = curves.standard[i]!.final;
    const at = (f: typeof reach) => Object.fromEntries((['standard', 'wmrl', 'pure'] as ArmKey[]).map((a) => [a, f(curves[a][i]!, target)])) as Record<ArmKey, number>;
    const t = at(stays), first = at(reach);
    return { seed, target, t, first, speedup: t.standard / t.wmrl, firstSpeedup: first.standard / first.wmrl };
  });
  const med = (a: ArmKey, f: (c: Curve) => number) => median(curves[a].map(f));
  const speedup = median(perSeed.map((s) => s.speedup));
  const firstSpeedup = median(perSeed.map((s) => s.firstSpeedup));
  const final = { standard: med('standard', (c) => c.final), wmrl: med('wmrl', (c) => c.final), pure: med('pure', (c) => c.final) };
  const rows = (['standard', 'wmrl', 'pure'] as ArmKey[]).map((a) => [
    ARM_NAMES[a],
    final[a],
    med(a, (c) => c.slotSeconds),
    median(perSeed.map((s) => s.t[a])),
    med(a, (c) => c.executions),
    med(a, (c) => c.failed),
    a === 'standard' ? 1 : med(a, (c) => (c.executions - sz.warmup) / ((c.lastLog!.step + 1) * sz.groupsPerStep * sz.groupSize)),
  ]);
  const seedsTable = perSeed.map((s) => `| ${s.seed} | ${fmt(s.target)} | ${fmt(s.t.standard)} | ${fmt(s.t.wmrl)} | ${fmt(s.t.pure)} | ${fmt(s.speedup)} | ${fmt(s.first.standard)} | ${fmt(s.first.wmrl)} | ${fmt(s.first.pure)} | ${fmt(s.firstSpeedup)} |`).join('\n');
  const holds = (ok: boolean) => (ok ? 'holds' : 'does not hold');
  const summary = [
    `Task: ${task.name} (${task.metric}); the agent's policy is one softmax per field over ${task.fields.map((f) => `${f.name} (${f.choices.length})`).join(', ')}.`,
    `Same agent in every arm: ${sz.groupsPerStep} groups of ${sz.groupSize} proposals per step, learning rate ${LR}; standard GRPO ${sz.standardSteps} steps, WMRL and pure world model ${sz.wmrlSteps} steps after ${sz.warmup} random warm-up executions; WMRL executes ${fmt(WMRL_ANCHOR_FRACTION)} of its groups as anchors (no per-step floor; chosen by the outcome model's variance), standard GRPO all of them; the world-model arms score proposals with a Gaussian-process outcome model (${OUTCOME.features} features), each step one Thompson draw from its posterior.`,
    `Seeds ${sz.seeds.join(', ')}; medians over seeds; sandbox pool of ${pool.capacity} slots (network isolation ${pool.isolation.network ? 'on' : 'OFF'}); ${ex.executed} distinct executions ran, ${fmt(wallS)} s wall.`,
    `Slot time from which the greedy proposal stays at or above standard GRPO's final score: WMRL ${fmt(speedup)}x less than standard (target >= 3x: ${holds(speedup >= 3)}; counting the first time it gets there, ${fmt(firstSpeedup)}x). Final score: WMRL ${fmt(final.wmrl)} vs standard ${fmt(final.standard)} (WMRL >= standard: ${holds(final.wmrl >= final.standard)}); pure world model ${fmt(final.pure)}.`,
  ].join('\n');
  const notes = [
    '### Per seed: slot seconds from which the greedy proposal stays at or above the standard run\'s final score (and the first time it gets there)',
    '',
    '| seed | standard final | standard | WMRL | pure WM | speedup | first: standard | first: WMRL | first: pure WM | first: speedup |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    seedsTable,
    '',
    'Executions are memoized across arms and seeds (deterministic in proposal and training seed); each arm is charged the measured slot time of every execution it asks for, repeated or not. Greedy-proposal evaluations are not charged.',
  ].join('\n');
  return {
    title: 'AutoResearch: standard GRPO vs WMRL vs pure world model (weather classifier search)',
    summary,
    header: ['arm', 'final score', 'slot s spent', 'slot s from which it stays at std final (median)', 'executions', 'failed', 'rollouts executed'],
    rows,
    notes,
    plot: {
      title: 'greedy proposal score vs sandbox-slot seconds (seed ' + sz.seeds[0] + ')',
      xLabel: 'sandbox-slot seconds',
      yLabel: 'balanced accuracy (validation)',
      lines: (['standard', 'wmrl', 'pure'] as ArmKey[]).map((a) => ({ label: ARM_NAMES[a], points: curves[a][0]!.points })),
    },
    result: { exec_time_speedup: speedup, exec_time_speedup_first_reach: firstSpeedup, final_wmrl: final.wmrl, final_standard: final.standard, final_pure_wm: final.pure },
  };
}
