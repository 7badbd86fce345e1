// embodied: post-training a behaviour-cloned policy on the `gap` robot (reach; `--all`: reach and push) (the sim under the gap hardware
// profile: heavier, weaker, laggier, noisier) with standard GRPO on the robot against WMRL and its
// ablations, the world model pretrained on sim data (under randomized profiles, conditioned on their context,
// the robot's identified from the anchors; DEFAULT_PRETRAIN.wmRandomize). True success on held-out start states
// against robot-hours; imagined transitions/s against raw MuJoCo steps/s in the same run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MjEnv, loadTaskModel } from '../sim/env.js';
import { NOMINAL } from '../sim/profiles.js';
import { taskDef } from '../sim/registry.js';
import { Rng } from '../nn/index.js';
import { ClippedPolicyGradient, type PgConfig } from '../policies/pg.js';
import { correctorConfig, type CorrectorConfig } from '../wmrl/corrector.js';
import type { RunRow } from '../wmrl/run-state.js';
import { DEFAULT_PRETRAIN, POST_TRAIN_PG, SimPrompts, heldOutEvaluation, simRobotTarget, type Pretrained } from '../wmrl/sim-setup.js';
import { trainStandard } from '../wmrl/train_standard.js';
import { DEFAULT_WMRL, trainWmrl } from '../wmrl/train_wmrl.js';
import { fmt, median, type BenchOptions, type BenchReport, type Series } from './lib/report.js';
import { rawSimSps } from './worldmodel.js';
import { ModelEnv } from '../worldmodel/index.js';
import { embodiedPretrain } from '../recipes/embodied.js';

/**
 * WMRL imagines IMAGINED times the groups standard GRPO executes per update: imagination costs compute, not
 * robot time, and more groups per update give a policy gradient with less noise from the same robot episodes
 * (scratch probe, seeds 0/1, success after 20 updates against standard GRPO's 0.265 / 0.16: 8 imagined groups
 * 0.195 / 0.12, 32 groups 0.225 / 0.225, 64 groups 0.335 / 0.24 at 1.4x the compute of 32; 32 keeps the full
 * run within 25 minutes). Every WMRL variant runs ANCHORS_PER_UPDATE anchor groups per update on average (no
 * per-update floor): an anchor group every other update, the imagined updates between anchors being where
 * WMRL saves robot time.
 */
const IMAGINED = 4;
const ANCHORS_PER_UPDATE = 0.5;
/** The tasks `--all` runs (`--task NAME` one of them); the default run is the first. */
export const tasks = ['reach', 'push'] as const;
const TASKS = tasks;

type Variant = { label: string; corrector: CorrectorConfig | false | 'standard'; prompts?: number };

/**
 * The variants of one run, by name, for standard GRPO's B groups per update; `corrector` false = pure world
 * model, 'standard' = every group on the robot. `prompts`: groups per update where a variant differs from B.
 * The control 'anchors_only' is standard GRPO on just one group per update — twice the robot episodes WMRL's
 * anchors spend — without any imagined group, so the table shows what the imagined groups add beyond the
 * anchors.
 */
function variants(B: number): Record<string, Variant> {
  const imagined = IMAGINED * B;
  const base = correctorConfig({ anchors: { fraction: ANCHORS_PER_UPDATE / imagined, floor: 0 } }, DEFAULT_WMRL.corrector as CorrectorConfig);
  return {
    standard: { label: 'standard GRPO on the robot', corrector: 'standard' },
    anchors_only: { label: 'standard GRPO, 1 group per update (the anchors alone)', corrector: 'standard', prompts: 1 },
    pure_wm: { label: 'pure world model', corrector: false, prompts: imagined },
    debias: { label: '+ debias', corrector: correctorConfig({ denoise: false }, base), prompts: imagined },
    denoise: { label: '+ denoise', corrector: correctorConfig({ debias: false }, base), prompts: imagined },
    full: { label: 'full WMRL', corrector: base, prompts: imagined },
    full_active: { label: 'full WMRL, active anchors', corrector: correctorConfig({ anchors: { mode: 'active' } }, base), prompts: imagined },
  };
}

interface Curve {
  rows: RunRow[];
  /** (robot hours, success) at every evaluation, starting with the behaviour-cloned policy at 0 h. */
  points: Array<[number, number]>;
  /** (robot hours, success) at the run's `updates` (every variant's comparison point). */
  atUpdates: [number, number];
}

/** Robot hours at the first evaluation whose success reaches `level`; null if never. */
function hoursToReach(c: Curve, level: number): number | null {
  const p = c.points.find(([, s]) => s >= level);
  return p ? p[0] : null;
}

interface TaskRun {
  task: string;
  seeds: number[];
  updates: number;
  evalEpisodes: number;
  prompts: number;
  groupSize: number;
  variants: Record<string, Variant>;
  curves: Record<string, Curve[]>;
  /** One update's imagination (B x G rollouts, policy + ensemble fused) against raw MuJoCo, measured alternately. */
  imagineTps: number;
  simSps: number;
  /** Imagined transitions/s over the training runs (their load varies). */
  trainingTps: number;
  imagineRollouts: number;
  horizon: number;
  /** Wall-clock minutes of this task's whole run (pretraining, every variant and seed, the throughput measurement). */
  wallMinutes: number;
}

async function runTask(task: string, o: BenchOptions, step: (label: string, advance?: boolean) => void): Promise<TaskRun> {
  const wall0 = performance.now();
  const q = o.quick;
  const seeds = q ? [0] : [0, 1, 2];
  const updates = q ? 3 : 20;
  const evalEpisodes = q ? 10 : 200;
  const cfg = { ...DEFAULT_WMRL, updates, prompts: q ? 4 : 8, groupSize: q ? 4 : 8, evalEvery: q ? 3 : 4 };
  // One policy-gradient setting for every variant: the trainers' (wmrl/sim-setup.ts POST_TRAIN_PG).
  const pgConfig: PgConfig = POST_TRAIN_PG;
  const pre = q ? { bcEpisodes: 10, bcEpochs: 20, daggerRounds: 1, daggerEpisodes: 5, daggerEpochs: 10, wmEpisodes: 12, wmEpochs: 3, wmHidden: [64, 64], wmMembers: 3 } : {};
  const VARIANTS = variants(cfg.prompts);
  const names = Object.keys(VARIANTS);
  const curves: Record<string, Curve[]> = Object.fromEntries(names.map((n) => [n, []]));
  const evaluate = heldOutEvaluation(task, 'gap', evalEpisodes);
  let imagined = 0, imagineSeconds = 0;
  let last: Pretrained | null = null;
  const tmp = mkdtempSync(join(tmpdir(), 'bench-embodied-'));
  try {
    for (const seed of seeds) {
      step(`${task}, seed ${seed}: pretraining (behaviour cloning, world model)`);
      const p: Pretrained = await embodiedPretrain({ task, seed, quick: false, commandHistory: 0, sizes: pre });
      last = p;
      step(`${task}, seed ${seed}: pretrained`, true);
      const policy0 = p.policy.paramNames().map((n) => Float32Array.from(p.policy.store.get(n).data));
      const model0 = p.model.store.names().map((n) => Float32Array.from(p.model.store.get(n).data));
      const start = (await evaluate(p.policy)).success;
      for (const name of names) {
        step(`${task}, seed ${seed}: ${name}`);
        p.policy.paramNames().forEach((n, i) => p.policy.store.set(n, policy0[i]!));
        p.model.store.names().forEach((n, i) => p.model.store.set(n, model0[i]!));
        const target = await simRobotTarget({ task, profile: 'gap', robots: 1, resetSeconds: 5, seed, store: join(tmp, `${task}-${seed}-${name}.db`) });
        using prompts = await SimPrompts.create(task);
        const pg = await ClippedPolicyGradient.create(p.policy, pgConfig);
        const v = VARIANTS[name]!;
        const common = { updates, prompts: v.prompts ?? cfg.prompts, groupSize: cfg.groupSize, evalEvery: cfg.evalEvery, promptSeed0: 1_000_000 + seed * 100_000, seed };
        const state = v.corrector === 'standard'
          ? await trainStandard({ config: common, policy: p.policy, pg, target, prompts, evaluate })
          : await trainWmrl({ config: { ...cfg, ...common, corrector: v.corrector, horizon: target.maxSteps }, policy: p.policy, pg, model: p.model, simData: p.simData, target, prompts, evaluate, warn: () => {} });
        await pg.release();
        await target.close();
        for (const r of state.rows) if (r.imagineSeconds) { imagined += r.imaginedTransitions!; imagineSeconds += r.imagineSeconds; }
        const points: Array<[number, number]> = [[0, start], ...state.rows.filter((r) => r.evalSuccess !== undefined).map((r): [number, number] => [r.robotSeconds / 3600, r.evalSuccess!])];
        const at = state.rows[updates - 1]!;
        if (at.evalSuccess === undefined) throw new Error(`embodied bench: ${name} has no evaluation at update ${updates} (evalEvery ${cfg.evalEvery})`);
        curves[name]!.push({ rows: state.rows, points, atUpdates: [at.robotSeconds / 3600, at.evalSuccess] });
        step(`${task}, seed ${seed}: ${name} done`, true);
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }

  // Raw MuJoCo control steps/s on the same task against imagined transitions/s of one WMRL update's imagination
  // (its groups x G rollouts of the task's horizon, policy + ensemble fused, the identified delay), the two measured
  // alternately under the same machine load, medians of 3; the training runs' own imagination rate (its
  // load varies over the run) is reported beside it.
  const def = taskDef(task);
  const model = await loadTaskModel(def, NOMINAL);
  const env = new MjEnv(def, model, NOMINAL, { seed: 0 }, false);
  const rng = new Rng(1);
  const p = last!;
  const graph = p.policy.graphPolicy!();
  const menv = new ModelEnv(p.model, { members: 'fixed', seed: 0, actionDelay: 3 });
  const B = VARIANTS.full!.prompts ?? cfg.prompts;
  const N = B * cfg.groupSize, D = p.policy.obsDim, H = def.horizon;
  const startObs = new Float32Array(N * D);
  for (let i = 0; i < N; i++) startObs.set(env.reset(1_000_000 + Math.floor(i / cfg.groupSize)).state, i * D);
  const imagineRate = async () => {
    const t = performance.now();
    await menv.imagine(startObs, graph, H);
    return (N * H) / ((performance.now() - t) / 1000);
  };
  rawSimSps(env, def.substeps, 500, rng);
  await imagineRate();
  const sims: number[] = [], ims: number[] = [];
  for (let r = 0; r < 3; r++) {
    sims.push(rawSimSps(env, def.substeps, q ? 2000 : 10_000, rng));
    ims.push(await imagineRate());
  }
  await menv.release();
  env.dispose();
  model.dispose();
  return {
    task, seeds, updates, evalEpisodes, prompts: cfg.prompts, groupSize: cfg.groupSize, variants: VARIANTS, curves,
    imagineTps: median(ims), simSps: median(sims), trainingTps: imagineSeconds > 0 ? imagined / imagineSeconds : 0, imagineRollouts: N, horizon: H,
    wallMinutes: (performance.now() - wall0) / 60_000,
  };
}

/** One task's summary sentences, table rows and RESULT figures, all from its run. */
function summarize(t: TaskRun, named: boolean) {
  const { curves, updates, evalEpisodes, seeds, task, variants: VARIANTS } = t;
  const names = Object.keys(VARIANTS);
  // Per seed: standard's final success is the level; each variant's robot hours to reach it.
  // Success and robot hours at the run's `updates` (the same number of updates for every variant).
  const finalOf = (name: string) => curves[name]!.map((c) => c.atUpdates[1]);
  const hoursOf = (name: string) => curves[name]!.map((c) => c.atUpdates[0]);
  const stdFinal = finalOf('standard');
  const starts = curves.standard!.map((c) => c.points[0]![1]);
  // A speedup is defined on a seed only where standard GRPO improved on the behaviour-cloned start:
  // otherwise "reaching its final success" costs nothing and says nothing.
  const speedups = curves.full!.map((c, i) => {
    if (!(stdFinal[i]! > starts[i]!)) return null;
    // Both sides the robot-hours of their first evaluation at standard's final success (standard may reach it
    // before its last update).
    const h = hoursToReach(c, stdFinal[i]!);
    return h === null ? 0 : hoursToReach(curves.standard![i]!, stdFinal[i]!)! / h;
  });
  const defined = speedups.filter((x): x is number => x !== null);
  // Whether standard GRPO's improvement itself is more than evaluation noise.
  const stdGain = median(stdFinal) - median(starts);
  const pS = Math.max(median(stdFinal), 0.5 / evalEpisodes), p0 = Math.max(median(starts), 0.5 / evalEpisodes);
  const stdGainSe2 = 2 * Math.sqrt((pS * (1 - pS) + p0 * (1 - p0)) / evalEpisodes);
  const rows = names.map((n) => {
    const reach = curves[n]!.map((c, i) => hoursToReach(c, stdFinal[i]!));
    return [
      (named ? `${task}: ` : '') + VARIANTS[n]!.label,
      String(VARIANTS[n]!.prompts ?? t.prompts),
      fmt(median(finalOf(n))),
      finalOf(n).map((x) => fmt(x, 2)).join(' / '),
      fmt(median(hoursOf(n))),
      reach.map((h) => (h === null ? 'not reached' : fmt(h, 3))).join(' / '),
      fmt(median(curves[n]!.map((c) => c.rows.at(-1)!.computeSeconds)), 3),
    ];
  });
  const med = (n: string) => median(finalOf(n));
  const speedup = defined.length ? median(defined) : null;
  const lines: Series[] = names.map((n) => ({ label: VARIANTS[n]!.label, points: curves[n]![0]!.points }));
  // Two evaluations' binomial standard errors: differences within two of them are not called a difference.
  const verdictOf = (a: number, b: number) => {
    const d = a - b;
    const se = 2 * Math.sqrt((Math.max(a, 0.5 / evalEpisodes) * (1 - a) + Math.max(b, 0.5 / evalEpisodes) * (1 - b)) / evalEpisodes);
    const word = Math.abs(d) <= se ? 'indistinguishable from' : d > 0 ? 'above' : 'below';
    return `${word} (${d >= 0 ? '+' : ''}${fmt(d, 2)}, two standard errors ${fmt(se, 2)})`;
  };
  const verdict = (a: string, b: string) => verdictOf(med(a), med(b));
  // The ablations: full WMRL with a part taken out (active anchors is a variant of full WMRL, not an ablation).
  const ablations = ['pure_wm', 'debias', 'denoise'];
  const below = ablations.filter((n) => med(n) > med('full'));
  const summary = [
    `Task ${task}; robot = the sim under the gap profile; world model pretrained on ${DEFAULT_PRETRAIN.wmRandomize > 0 ? `sim data under randomized profiles (context parameters in [1/${DEFAULT_PRETRAIN.wmRandomize}, ${DEFAULT_PRETRAIN.wmRandomize}]), the robot's context identified from the anchors` : 'nominal sim data'}; ${seeds.length} seed(s), ${updates} updates; standard GRPO runs ${t.prompts} prompts × ${t.groupSize} rollouts on the robot per update, the WMRL variants imagine ${VARIANTS.full!.prompts} prompts × ${t.groupSize} rollouts per update and run ${ANCHORS_PER_UPDATE} anchor group(s) per update on average on the robot; true success = mean action on ${evalEpisodes} held-out start states.`,
    `Median success after ${updates} updates: full WMRL ${fmt(med('full'))}, standard GRPO ${fmt(med('standard'))}, pure world model ${fmt(med('pure_wm'))} (behaviour-cloned start ${fmt(median(starts))}); one evaluation's binomial standard error at the median is ±${fmt(Math.sqrt(Math.max(med('full'), 1 / evalEpisodes) * (1 - med('full')) / evalEpisodes), 2)}.`,
    `After the same number of updates full WMRL is ${verdict('full', 'standard')} standard GRPO, having spent ${fmt(median(hoursOf('full').map((h, i) => h / hoursOf('standard')[i]!)), 2)} of its robot-hours; pure world model is ${verdict('pure_wm', 'full')} full WMRL.`,
    `Full WMRL against each ablation after ${updates} updates: ${ablations.map((n) => `${VARIANTS[n]!.label} ${fmt(med(n))} (full ${verdict('full', n)})`).join('; ')}; ${below.length === 0 ? 'full WMRL is at or above every ablation' : `${below.map((n) => VARIANTS[n]!.label).join(', ')} above full WMRL`}.`,
    `Anchor weight (Inverse-Variance Denoising; 1 = anchors not up-weighted) after ${updates} updates, per seed: full WMRL ${curves.full!.map((c) => fmt(c.rows[updates - 1]!.anchorWeight ?? 1, 2)).join(' / ')}, + denoise ${curves.denoise!.map((c) => fmt(c.rows[updates - 1]!.anchorWeight ?? 1, 2)).join(' / ')} (with the map on, the denoiser measures the world model's disagreement only once the map is fitted, at ${(DEFAULT_WMRL.corrector as CorrectorConfig).debias ? ((DEFAULT_WMRL.corrector as CorrectorConfig).debias as { minPairs: number }).minPairs : 0} anchor pairs).`,
    `Standard GRPO on one group per update (${fmt(median(hoursOf('anchors_only')), 3)} robot-hours, ${fmt(median(hoursOf('anchors_only').map((h, i) => h / hoursOf('full')[i]!)), 2)}× full WMRL's) reaches ${fmt(med('anchors_only'))}; full WMRL is ${verdict('full', 'anchors_only')} it: this is what the imagined groups add beyond the anchors.`,
    speedup === null
      ? `Robot-time speedup: not defined — standard GRPO did not improve on the behaviour-cloned start on any seed (start ${starts.map((x) => fmt(x, 2)).join(' / ')}, final ${stdFinal.map((x) => fmt(x, 2)).join(' / ')}).`
      : `Robot-time speedup of full WMRL to standard GRPO's final success, both read where their curves first reach it, median over the ${defined.length} seed(s) where standard improved on the start: ${fmt(speedup)} (per seed ${speedups.map((x) => (x === null ? 'n/a' : fmt(x, 3))).join(' / ')})${defined.some((x) => x === 0) ? ` (not reached on ${defined.filter((x) => x === 0).length}, counted as 0)` : ''}` +
        (stdGain <= stdGainSe2 ? `; standard GRPO's own gain over the start (${fmt(stdGain, 2)}) is within two standard errors (${fmt(stdGainSe2, 2)}), so this ratio measures noise, not a speedup.` : '.'),
    `The whole ${task} run (pretraining, ${names.length} variants × ${seeds.length} seed(s), this measurement) took ${fmt(t.wallMinutes, 3)} minutes of wall-clock.`,
    `One WMRL update's imagination (${t.imagineRollouts} rollouts × ${t.horizon} steps, policy + ensemble fused) ran at ${fmt(t.imagineTps, 4)} transitions/s against ${fmt(t.simSps, 4)} raw MuJoCo control steps/s, measured alternately: ${fmt(t.imagineTps / t.simSps)}× (during the training runs, under their varying load: ${fmt(t.trainingTps, 4)} transitions/s).`,
  ];
  const result: Record<string, number | string> = {
    robot_time_speedup: speedup ?? 'n/a',
    final_success_wmrl: med('full'),
    final_success_standard: med('standard'),
    final_success_pure_wm: med('pure_wm'),
    final_success_active: med('full_active'),
    final_success_debias_only: med('debias'),
    final_success_denoise_only: med('denoise'),
    final_success_anchors_only: med('anchors_only'),
    wall_min: t.wallMinutes,
    robot_hours_ratio: median(hoursOf('full').map((h, i) => h / hoursOf('standard')[i]!)),
    imagine_tps: t.imagineTps,
    imagine_tps_training: t.trainingTps,
    sim_sps: t.simSps,
    imagine_vs_sim: t.imagineTps / t.simSps,
  };
  return { summary, rows, lines, result };
}

export async function run(o: BenchOptions): Promise<BenchReport> {
  const tasks: string[] = o.all ? [...TASKS] : [o.task ?? TASKS[0]];
  const seedsPer = o.quick ? 1 : 3;
  const total = tasks.length * seedsPer * (Object.keys(variants(1)).length + 1);
  let done = 0;
  const step = (label: string, advance = false) => o.progress(advance ? ++done : done, total, label);
  const runs: TaskRun[] = [];
  for (const task of tasks) runs.push(await runTask(task, o, step));
  const parts = runs.map((r) => summarize(r, runs.length > 1));
  const first = runs[0]!;
  // The first task's figures under the plain keys; every further task's under its name.
  const result: Record<string, number | string> = { ...parts[0]!.result };
  parts.slice(1).forEach((p, i) => Object.entries(p.result).forEach(([k, v]) => { result[`${runs[i + 1]!.task}_${k}`] = v; }));
  return {
    title: 'Embodied WMRL: post-training on the gap robot',
    summary: parts.map((p) => p.summary.join('\n')).join('\n\n'),
    header: ['variant', 'groups per update', `success after ${first.updates} updates (median)`, 'per seed', `robot hours at ${first.updates} updates (median)`, 'robot hours to standard\'s final success, per seed', 'compute s (median)'],
    rows: parts.flatMap((p) => p.rows),
    plot: { title: `${first.task} on the gap robot: true success against robot-hours (seed ${first.seeds[0]})`, xLabel: 'robot hours', yLabel: 'success on held-out starts', lines: parts[0]!.lines },
    result,
  };
}
