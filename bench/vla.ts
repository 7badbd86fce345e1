// vla: post-training a behaviour-cloned VLA on the `gap` robot (the sim under the gap hardware profile, reporting only
// sparse success), the published recipe's four arms at CPU scale, built and trained by the VLA recipe's pieces
// (recipes/vla.ts: its per-task settings, clone, prompts, face and RL runs), per task (reach, push; `--task` one):
//   bc:          the VLA behaviour-cloned with DAgger from the task's robust demonstrator on the gap robot;
//   sparse_only: standard GRPO on the robot (the VLA on its camera), scored by its sparse success, for exactly the
//                robot episodes WMRL spent on anchors at the same seed;
//   dense_only:  the pure world model: the VLA imagined (on the digital twin, or through its latent face, as the
//                recipe's IMAGINE says), scored by the model's dense return, no robot;
//   wmrl:        both: imagined groups under the context and delay identified from the anchors, anchor groups on the
//                robot correcting the model's scores, the model refitted on the robot's episodes.
// Under the evidence protocol (bench/lib/protocol.ts): RL seeds, start states and (instruction, target region)
// combinations are split into train (the setup's demonstrations, DAgger, world model and prompts; --quick),
// validation (`--split validation`, where choices are made) and test (the report, read once per computation key).
// Each (task, RL seed, arm) is a cell computed in bench/cells/vla.ts, in worker processes side by side
// (bench/cells/vla-worker.ts), and cached, so a full run can span sessions; this file runs and reports them: success
// of the mean action on the split's held-out start states and held-out combinations, per seed, with paired intervals
// of WMRL against each arm, the clone's and WMRL's success with shuffled instructions against their chance, the
// corrections WMRL made, and the deployed artifact's latency, measured in every run.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SimRobot } from '../hardware/robots/sim.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { OnnxPolicy } from '../policies/onnx-policy.js';
import { ANCHORS, IMAGINE, KL_BETA, LATENCY, RL_LOG_STD, S, VLA_CLONE, VLA_HIDDEN, exportVla, gapRobot, makeVla, vlaPgConfig, vlaRecipe, vlaScale, wmrlScale, type CloneScale } from '../recipes/vla.js';
import { CONTEXT_PARAMS, loadProfile, makeEnv, type Env } from '../sim/index.js';
import { DEFAULT_PRETRAIN } from '../wmrl/sim-setup.js';
import {
  ARMS, COMBINATIONS, EVAL_BLOCK, QUICK_HELD_OUT, SETUP_BLOCK, SETUP_PARTS, START_BLOCK, TASKS as CELL_TASKS, cellOptions, setupCached,
  type Arm, type ArmCell, type BcCell, type Job, type JobResult, type RlArm, type RlCell, type SetupCell, type SplitName, type Task,
} from './cells/vla.js';
import { CACHE_ROOT, defineSplits, evaluateCell, protocolKeys, protocolRun, type BenchProtocol, type ProtocolKeys } from './lib/protocol.js';
import { fmt, median, quantile, type BenchOptions, type BenchReport, type Series } from './lib/report.js';
import { formatInterval, hierarchicalBootstrap, pairedDifference, perSeedTable, verdict, type Interval } from './lib/stats.js';
import { acted, said, seedList, type Corrections as BaseCorrections } from './lib/words.js';
import { WorkerPool } from './lib/worker-pool.js';

/** The gap robot's true context, in the order the world model's context is declared (sim/profiles.ts CONTEXT_PARAMS). */
export const CONTEXT_TRUTH = CONTEXT_PARAMS.map((k) => loadProfile('gap')[k]);
export const TASKS = CELL_TASKS;
/** `--task NAME` runs one of them (report vla-NAME); by default both, as the acceptance asks. */
export const tasks = TASKS;
/**
 * Behaviour cloning per task for the benches' clone over the state alone (vla-ceiling, rl-budget, bc-scale): reach's
 * hold-within-3-cm success needs the longer fit; push's 300-step episodes give more steps each. The VLA's own clone
 * sizes are the recipe's (recipes/vla.ts VLA_CLONE).
 */
export const CLONE: Record<'full' | 'quick', Record<Task, CloneScale>> = {
  full: { reach: { demos: 300, daggerRounds: 2, daggerEpisodes: 15, bcEpochs: 60 }, push: { demos: 40, daggerRounds: 2, daggerEpisodes: 8, bcEpochs: 30 } },
  quick: VLA_CLONE.quick,
};

/** The embodied trainers' policy for `env`'s layout, as vla-ceiling and rl-budget clone it: a Gaussian MLP over the state alone, 128x128, log-std -1. */
export const benchMlp = (env: Env) => (obsMean: number[], obsStd: number[]) => new GaussianPolicy({
  obsDim: env.observationSpace.state.shape[0], actDim: env.actionSpace.shape[0], hidden: [128, 128], initLogStd: -1, obsMean, obsStd, seed: 0,
});

// ── Splits ──────────────────────────────────────────────────────────────────────────────────────
/**
 * RL seeds (each seeds an arm's policy noise, group members, anchor choice, minibatches and the robot's noise; the
 * setup is the same for every seed): validation holds seeds 1-5, seeds 0 and 1 being those the bench's choices were
 * made on before this protocol (0 is train, --quick's); test seeds start at 100 and were never run before it.
 */
const RL_SEEDS = { train: [0], validation: [1, 2, 3, 4, 5], test: [100, 101, 102, 103, 104] };

/**
 * RL seeds; start states in blocks of START_BLOCK seeds (train: block SETUP_BLOCK, the setup's demonstrations, DAgger,
 * world model, prompts and diagnostics, and the train split's evaluation block; validation and test each their own
 * evaluation block, which no run trains on); and the (instruction, target region) combinations (bench/cells/vla.ts
 * COMBINATIONS).
 */
export const SPLITS = defineSplits('vla', {
  seeds: RL_SEEDS,
  starts: { train: [SETUP_BLOCK, EVAL_BLOCK.train], validation: [EVAL_BLOCK.validation], test: [EVAL_BLOCK.test] },
  combinations: COMBINATIONS,
});

// ── What runs ───────────────────────────────────────────────────────────────────────────────────
const SHORT: Record<Arm, string> = { bc: 'behaviour cloning', sparse_only: 'sparse only', dense_only: 'dense only', wmrl: 'WMRL' };
const LABEL: Record<Arm, string> = {
  bc: 'behaviour cloning',
  sparse_only: '+ RL on the sparse robot success only (standard GRPO on the robot)',
  dense_only: '+ RL on the dense world-model signal only (pure world model)',
  wmrl: '+ WMRL (both corrections)',
};
const RL_ARMS = ['sparse_only', 'dense_only', 'wmrl'] as const satisfies readonly RlArm[];
/** The arms also evaluated with shuffled instructions (bench/cells/vla.ts ShuffledCell). */
const SHUFFLED_ARMS = ['bc', 'wmrl'] as const;
type ShuffledArm = (typeof SHUFFLED_ARMS)[number];
/** The arms WMRL is compared with. */
const OTHERS = ['sparse_only', 'dense_only', 'bc'] as const satisfies ReadonlyArray<Exclude<Arm, 'wmrl'>>;
/** The order a seed's cells take a free worker in: the longest first, sparse only once WMRL gave its robot episodes. */
const RANK: Record<Arm, number> = { wmrl: 0, dense_only: 1, bc: 2, sparse_only: 3 };
/** Worker processes: one per core of the machine the bench was sized on. */
const SLOTS = 2;
const WORKER = fileURLToPath(new URL('./cells/vla-worker.ts', import.meta.url));

/** The run a set of options makes: split, tasks, seeds and the cells' options. Its JSON is part of the report key. */
export function plan(o: BenchOptions) {
  const split: SplitName = o.quick ? 'train' : o.split ?? 'test';
  const task = o.task === undefined ? undefined : TASKS.find((t) => t === o.task);
  if (o.task !== undefined && !task) throw new Error(`bench vla: --task ${o.task}: not one of ${TASKS.join(', ')}`);
  return {
    split,
    tasks: task ? [task] : [...TASKS],
    seeds: SPLITS.sets.seeds[split],
    arms: [...ARMS],
    cell: cellOptions({ quick: o.quick, split }),
    /** The deployed artifact's timed calls per task. */
    latencyCalls: o.quick ? 200 : 3000,
  };
}
export type Plan = ReturnType<typeof plan>;

/** The cells depend on bench/cells/vla-worker.ts, everything it imports and the cells' options; the report adds this file and the run's tasks and seeds. */
export const protocol: BenchProtocol = {
  splits: SPLITS,
  keys: (o) => {
    const p = plan(o);
    return protocolKeys({ compute: { entry: new URL('./cells/vla-worker.ts', import.meta.url).href, options: p.cell }, report: { entry: import.meta.url, options: p } });
  },
};

export const cellKey = (task: string, seed: number, arm: Arm) => `${task}/${seed}/${arm}`;

/** A run's cells: each task's setup, and each (task, seed, arm)'s cell under cellKey. */
export interface VlaCells {
  setups: ReadonlyMap<string, SetupCell>;
  arms: ReadonlyMap<string, ArmCell>;
}

export interface RunInfo {
  wallS: number;
  /** Cells computed in this run (the rest came from the cache). */
  computed: number;
  /** Per task, the deployed artifact's batch-1 inference times, ms. */
  latency: Record<string, number[]>;
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** The task's VLA exported as the deployed artifact (unfitted weights of its sizes: the graph is the same), timed at batch 1 as a robot runs it (onnxruntime-node, the robot's camera and instruction). */
async function artifactLatency(task: Task, calls: number): Promise<number[]> {
  const tmp = mkdtempSync(join(tmpdir(), 'bench-vla-latency-'));
  const layout = await makeEnv(gapRobot(task));
  const D = layout.observationSpace.state.shape[0];
  const vla = makeVla(layout, VLA_HIDDEN[task], vlaRecipe({ task }).proprio)(new Array<number>(D).fill(0), new Array<number>(D).fill(1));
  const robot = await SimRobot.create({ ...gapRobot(task), seed: 0 });
  try {
    const path = join(tmp, `${task}-vla.onnx`);
    await exportVla(task, vla, path, { policyVersion: 'bench-vla', runId: 'bench' });
    const deployed = await OnnxPolicy.load(path, robot.spec);
    const obs = await robot.reset({ seed: 0 });
    for (let i = 0; i < 50; i++) await deployed.act(obs);
    const out: number[] = [];
    for (let i = 0; i < calls; i++) {
      const t = performance.now();
      await deployed.act(obs);
      out.push(performance.now() - t);
    }
    return out;
  } finally {
    await robot[Symbol.asyncDispose]();
    await vla.release();
    layout.dispose();
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** A cell's headline figures, as the test-split ledger records them. */
function ledgerSummary(c: ArmCell): Record<string, number> {
  const base = { states: mean(c.states), combinations: mean(c.combinations), ...(c.shuffled ? { shuffled: mean(c.shuffled.outcomes), shuffled_chance: mean(c.shuffled.chance) } : {}) };
  return c.arm === 'bc' ? base : { ...base, robot_h: c.robotHours, compute_s: c.computeSeconds };
}

export async function run(o: BenchOptions): Promise<BenchReport> {
  const p = plan(o);
  const keys = protocol.keys(o);
  // A quick run is a smoke test of this code: it caches no cell, so it always runs (its setup is cached like any other).
  const scratch = o.quick ? mkdtempSync(join(tmpdir(), 'bench-vla-cache-')) : null;
  const pr = protocolRun(SPLITS, keys.compute, { cacheRoot: scratch ?? CACHE_ROOT, ...(o.relook ? { relook: true } : {}) });
  const total = p.tasks.length * (1 + p.seeds.length * ARMS.length);
  let done = 0, computed = 0;
  const labels = new Array<string>(SLOTS).fill('');
  const pool = new WorkerPool<Job, JobResult>(WORKER, SLOTS, (slot, label) => {
    labels[slot] = label;
    o.progress(done, total, labels.filter(Boolean).join(' | '));
  });
  const setups = new Map<string, SetupCell>(), arms = new Map<string, ArmCell>();
  const started = performance.now();
  try {
    await Promise.all(p.tasks.map(async (task, ti) => {
      // The setup is built (its two parts side by side, then the face and diagnostics) only where a cell needs it and it is not cached.
      let ensuring: Promise<void> | null = null;
      const ensureSetup = () => (ensuring ??= (async () => {
        if (setupCached(task, p.cell)) return;
        await Promise.all(SETUP_PARTS.map((part) => pool.run({ kind: 'part', task, options: p.cell, part }, [ti, -1], task)));
        await pool.run({ kind: 'setup', task, options: p.cell }, [ti, -1], task);
      })());
      const finished = (label: string, cached: boolean) => {
        if (!cached) computed++;
        o.progress(++done, total, `${label}${cached ? ' (cached)' : ''}`);
      };
      // The setup's figures: a train cell (RL seed 0), whatever split the run reports.
      const setup = await evaluateCell(pr, { task, variant: 'setup', seed: SPLITS.sets.seeds.train[0]!, split: 'train', episodes: 1 }, async () => {
        await ensureSetup();
        return (await pool.run({ kind: 'setup', task, options: p.cell }, [ti, -1], task)) as SetupCell;
      }, (c) => ({ bc_loss: c.bcLoss, wm_val_loss: c.wmValLoss }));
      setups.set(task, setup.value);
      finished(`${task}: setup`, setup.cached);
      await Promise.all(p.seeds.map(async (seed, si) => {
        const cell = async (arm: Arm, extra: { robotEpisodes?: number } = {}): Promise<ArmCell> => {
          const out = await evaluateCell(pr, { task, variant: arm, seed, split: p.split, episodes: 2 * p.cell.eval.episodes }, async () => {
            await ensureSetup();
            return (await pool.run({ kind: 'arm', task, options: p.cell, arm, seed, ...extra }, [ti, si, RANK[arm]], task)) as ArmCell;
          }, ledgerSummary);
          arms.set(cellKey(task, seed, arm), out.value);
          finished(`${task}, seed ${seed}: ${arm}`, out.cached);
          return out.value;
        };
        await Promise.all([
          (async () => {
            const w = (await cell('wmrl')) as RlCell;
            await cell('sparse_only', { robotEpisodes: w.robotEpisodes });
          })(),
          cell('dense_only'),
          cell('bc'),
        ]);
      }));
    }));
  } finally {
    pool.close();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
  const latency: Record<string, number[]> = {};
  for (const task of p.tasks) {
    o.progress(done, total, `${task}: the deployed artifact's latency`);
    latency[task] = await artifactLatency(task, p.latencyCalls);
  }
  return report(p, keys, { setups, arms }, { wallS: (performance.now() - started) / 1000, computed, latency });
}

// ── The report ──────────────────────────────────────────────────────────────────────────────────
type EvalSet = 'states' | 'combinations';
const SETS: readonly EvalSet[] = ['states', 'combinations'];
const SET_NAME: Record<EvalSet, string> = { states: 'held-out start states', combinations: 'held-out combinations' };
const pct = (x: number) => `${fmt(100 * x, 3)}%`;
/** What a VLA's proprioception reads (recipes/vla-options.ts proprio), in words. */
const PROPRIO_WORDS = { robot: "the robot's own state (joints, tip, the commands it sent), so the goal reaches it only through its camera and instruction", all: 'the whole observation, the targets, the goal one-hot and the goal offsets included' } as const;
/** Shuffled − chance, in words: where the interval lies. */
const atChance = (d: Interval) => (d.lo > 0 ? 'above chance: it reaches the true goal more often than following the drawn instruction would' : d.hi < 0 ? 'below chance' : 'no difference from chance shown');

/** What WMRL's Corrector did at one seed, from its run rows, and its imagined gate. */
export interface Corrections extends BaseCorrections {
  /** The imagined gate's share of the imagined groups kept, averaged over updates (1 without a gate). */
  gateShare: number;
}

export function corrections(c: RlCell): Corrections {
  if (!c.anchorWeight || !c.calibrated || !c.biasReduction || !c.imaginedWeight) throw new Error(`corrections: the cell is of ${c.arm}, an arm without the Corrector`);
  const first = c.calibrated.findIndex(Boolean);
  return {
    anchorsPerUpdate: mean(c.realGroups),
    anchorShare: mean(c.realGroups.map((r, u) => r / c.groups[u]!)),
    weightEnd: c.anchorWeight.at(-1)!,
    weightMax: Math.max(...c.anchorWeight),
    denoised: c.anchorWeight.some((w) => w !== 1),
    mapFrom: first < 0 ? null : first + 1,
    biasReduction: c.biasReduction.filter((x): x is number => x !== null).at(-1) ?? null,
    gateShare: mean(c.imaginedWeight),
  };
}

/** One task's figures from its cells. */
export function analyse(p: Plan, task: string, cells: VlaCells) {
  const seeds = p.seeds;
  const setup = cells.setups.get(task);
  if (!setup) throw new Error(`bench vla: no setup cell for ${task}`);
  const get = (seed: number, arm: Arm): ArmCell => {
    const c = cells.arms.get(cellKey(task, seed, arm));
    if (!c) throw new Error(`bench vla: no cell for ${task}, seed ${seed}, ${arm}`);
    if (c.arm !== arm) throw new Error(`bench vla: the cell for ${task}, seed ${seed}, ${arm} holds ${c.arm}'s`);
    return c;
  };
  const bc = (s: number) => get(s, 'bc') as BcCell;
  const rl = (s: number, arm: RlArm) => get(s, arm) as RlCell;
  const outcomes = (arm: Arm, set: EvalSet) => seeds.map((s) => get(s, arm)[set]);
  const success = (arm: Arm, set: EvalSet) => outcomes(arm, set).map(mean);
  const per = <T>(f: (set: EvalSet) => T) => ({ states: f('states'), combinations: f('combinations') });
  const score = Object.fromEntries(ARMS.map((a) => [a, per((set) => hierarchicalBootstrap(outcomes(a, set)))])) as Record<Arm, Record<EvalSet, Interval>>;
  // Paired: every arm of a seed is measured on the same start states.
  const wmrlMinus = Object.fromEntries(OTHERS.map((b) => [b, per((set) => pairedDifference(outcomes('wmrl', set), outcomes(b, set)))])) as Record<(typeof OTHERS)[number], Record<EvalSet, Interval>>;
  const overBc = Object.fromEntries(RL_ARMS.map((a) => [a, per((set) => pairedDifference(outcomes(a, set), outcomes('bc', set)))])) as Record<RlArm, Record<EvalSet, Interval>>;
  const corr = seeds.map((s) => corrections(rl(s, 'wmrl')));
  // Sparse only is to spend exactly WMRL's robot episodes at every seed.
  const unequal = seeds.filter((s) => rl(s, 'sparse_only').robotEpisodes !== rl(s, 'wmrl').robotEpisodes);
  // The shuffled-instruction ablation of the clone and WMRL's VLA: its success, its chance and their paired difference.
  const ablation = (arm: ShuffledArm) => {
    const cs = seeds.map((s) => {
      const c = get(s, arm).shuffled;
      if (!c) throw new Error(`bench vla: the ${arm} cell for ${task}, seed ${s} holds no evaluation with shuffled instructions`);
      return c;
    });
    const runs = cs.map((c) => c.outcomes), chance = cs.map((c) => c.chance);
    return { choices: cs[0]!.choices, success: hierarchicalBootstrap(runs), chance: hierarchicalBootstrap(chance), minus: pairedDifference(runs, chance) };
  };
  const shuffled = Object.fromEntries(SHUFFLED_ARMS.map((x) => [x, ablation(x)])) as Record<ShuffledArm, ReturnType<typeof ablation>>;
  return { task, seeds, setup, get, bc, rl, outcomes, success, score, wmrlMinus, overBc, corr, unequal, shuffled };
}
type Analysis = ReturnType<typeof analyse>;

/** One task's summary sentences, table rows, per-seed tables, plot lines and RESULT figures. */
function summarize(p: Plan, a: Analysis, run: RunInfo, named: boolean) {
  const { task, seeds, setup: su, score, wmrlMinus, overBc, corr, shuffled } = a;
  const t = task as Task;
  const q = p.cell.quick;
  const R = vlaScale(q), W = wmrlScale(t, q), pg = vlaPgConfig(q, t);
  const iv = (arm: Arm, set: EvalSet) => formatInterval(score[arm][set], false);
  const diff = (b: (typeof OTHERS)[number], set: EvalSet) => `${formatInterval(wmrlMinus[b][set])} (${said(wmrlMinus[b][set], 'WMRL')})`;
  const gain = (arm: RlArm, set: EvalSet) => `${formatInterval(overBc[arm][set])} (${said(overBc[arm][set], SHORT[arm])})`;
  const w = (s: number) => a.rl(s, 'wmrl');
  const neverDenoised = seeds.filter((_, i) => !corr[i]!.denoised), neverMapped = seeds.filter((_, i) => corr[i]!.mapFrom === null);
  const b0 = a.bc(seeds[0]!);
  const lat = run.latency[task]!;
  const periodMs = 1000 / su.controlHz;
  const noSuccess = (arm: RlArm) => seeds.filter((s) => a.rl(s, arm).robotSuccesses === 0);
  const zeroSparse = noSuccess('sparse_only'), zeroAnchors = noSuccess('wmrl');

  const summary = [
    `**${task}**, ${p.split} split: RL ${seedList(seeds)}, each arm of a seed post-training the same clone and world model (the setup, built once from train items: the seeds measure post-training's luck, not the clone's). The clone: ${su.demoSteps} labelled steps from the robust demonstrator on the gap robot (${pct(su.demoSuccess)} of its noise-injected demonstrations succeeded), final loss ${fmt(su.bcLoss, 3)}, from ${su.trainSeeds} training seeds of the (instruction, target region) split; the world model's validation loss ${fmt(su.wmValLoss, 3)}. RL: ${p.cell.updates[t]} updates of ${R.prompts} imagined prompts × ${R.groupSize} rollouts for dense only and WMRL (imagining the VLA ${IMAGINE[t] === 'twin' ? "itself on the digital twin's render of every predicted state" : 'through its latent face'}), WMRL running ${W.anchorsPerUpdate} anchor group(s) per update on average on the robot, scored by ${W.anchorScore === 'relabel' ? "the world model's reward over the robot's recorded steps" : "the robot's success"}, ${W.imaginedGate ? `its imagined groups gated by their closed-loop rank agreement with the anchors (window ${W.imaginedGate.window})` : 'training on all its imagined groups'}, the model refitted every ${R.refitEvery} updates; sparse only one group per update for exactly WMRL's anchor episodes at its seed; lr ${pg.optimizer.lr}, β ${KL_BETA[t]}, log-std ${RL_LOG_STD[t] ?? 'as cloned'} (recipes/vla.ts). Success = the mean action on ${p.cell.eval.episodes} ${SET_NAME.states} and ${p.cell.eval.episodes} ${SET_NAME.combinations} (${p.cell.heldOut.map((c) => `goal ${c.goal} in region ${c.region}`).join(', ')}) from ${p.cell.eval.seed0}, the same for every arm of a seed. Intervals: 95% bootstrap over seeds and, within them, start states, paired where two arms are compared; "better"/"worse" only where the interval excludes 0.`,
    `Success on ${SET_NAME.states} (mean over seeds [95% CI]): behaviour cloning ${iv('bc', 'states')}, sparse only ${iv('sparse_only', 'states')}, dense only ${iv('dense_only', 'states')}, WMRL ${iv('wmrl', 'states')}; on ${SET_NAME.combinations}: ${ARMS.map((x) => `${SHORT[x]} ${iv(x, 'combinations')}`).join(', ')}.`,
    `WMRL − each arm (paired), on ${SET_NAME.states}: − sparse only ${diff('sparse_only', 'states')}; − dense only ${diff('dense_only', 'states')}; − behaviour cloning ${diff('bc', 'states')}. On ${SET_NAME.combinations}: − sparse only ${diff('sparse_only', 'combinations')}; − dense only ${diff('dense_only', 'combinations')}; − behaviour cloning ${diff('bc', 'combinations')}.`,
    `Each RL arm − behaviour cloning (paired), on ${SET_NAME.states}: ${RL_ARMS.map((x) => `${SHORT[x]} ${gain(x, 'states')}`).join('; ')}; on ${SET_NAME.combinations}: ${RL_ARMS.map((x) => `${SHORT[x]} ${gain(x, 'combinations')}`).join('; ')}.`,
    `Robot: WMRL spent ${seeds.map((s) => w(s).robotEpisodes).join(' / ')} robot episodes per seed (${fmt(median(seeds.map((s) => w(s).robotHours)), 3)} robot hours, median), sparse only ${a.unequal.length ? `other counts on ${seedList(a.unequal)}: ${seeds.map((s) => a.rl(s, 'sparse_only').robotEpisodes).join(' / ')}` : 'the same on every seed'}; of them succeeded (sampled actions) ${seeds.map((s) => w(s).robotSuccesses).join(' / ')} for WMRL and ${seeds.map((s) => a.rl(s, 'sparse_only').robotSuccesses).join(' / ')} for sparse only.` +
      (zeroSparse.length ? ` No sparse-only robot episode succeeded on ${seedList(zeroSparse)}: every group scored all 0, zero advantages, no gradient.` : '') +
      (zeroAnchors.length ? ` No anchor episode succeeded on ${seedList(zeroAnchors)}: WMRL learned from its imagined groups alone there.` : ''),
    `Corrections in WMRL (from its run rows): anchor groups per update ${fmt(median(corr.map((x) => x.anchorsPerUpdate)), 2)}, their share of the update's groups ${fmt(median(corr.map((x) => x.anchorShare)), 2)} (medians over seeds); the denoiser's anchor weight at the last update, per seed, ${corr.map((x) => fmt(x.weightEnd, 3)).join(' / ')} (largest ${corr.map((x) => fmt(x.weightMax, 3)).join(' / ')}; 1 = anchors not up-weighted); the first update whose scores a debias map calibrated ${corr.map((x) => x.mapFrom ?? 'never').join(' / ')}, its latest held-out bias reduction ${corr.map((x) => (x.biasReduction === null ? '—' : fmt(x.biasReduction, 2))).join(' / ')}` +
      (W.imaginedGate ? `; the imagined gate kept ${corr.map((x) => fmt(x.gateShare, 2)).join(' / ')} of the imagined groups on average` : '') +
      `. ${acted(seeds, neverDenoised, 'The denoiser', 'WMRL ran without Inverse-Variance Denoising')}; ${acted(seeds, neverMapped, 'the debias map', 'WMRL ran without a calibrated world model')}. The exploitation guard distrusted the model on ${seeds.map((s) => w(s).wmrl!.guard.updatesFlagged).join(' / ')} of ${p.cell.updates[t]} updates.`,
    `WMRL identified the robot's context, per seed, as ${seeds.map((s) => w(s).wmrl!.identified.context.map((v) => `×${fmt(Math.exp(v), 2)}`).join(', ')).join('; ')} (mass, friction, damping, actuator gain; the truth ×${CONTEXT_TRUTH.join(', ×')}) and a delay of ${seeds.map((s) => w(s).wmrl!.identified.delay).join(' / ')} steps (the truth ${LATENCY}).`,
    `Within-group rank agreement of the clone's robot returns (Spearman, median over groups, same starts and policy noise) with its returns imagined on the twin: ${fmt(su.agreement.nominal, 2)} under the pretrained model's nominal context (one measurement of the setup${su.agreement.firstSteps.steps.length ? `; over the first ${su.agreement.firstSteps.steps.join(', ')} steps ${su.agreement.firstSteps.nominal.map((x) => fmt(x, 2)).join(', ')}` : ''}), ${seeds.map((s) => fmt(w(s).wmrl!.agreement.identified, 2)).join(' / ')} under the context and delay WMRL identified and the model its refits left, per seed; the latent face on the robot agrees with the VLA at ${fmt(su.agreement.faceOnRobot, 2)} and the VLA with itself run again under other sensor noise at ${fmt(su.agreement.repeatability, 2)} (no world model ranks a group better). The latent face's held-out error ${fmt(su.latent.valRelMse, 3)} of the features' spread; on the clone's own robot states its mean action differs from the VLA's by ${fmt(su.gaps.faceVsCamera, 3)} per entry and the VLA's on the twin's render by ${fmt(su.gaps.twinVsCamera, 3)}, against a spread of ${fmt(su.gaps.spread, 3)}.`,
    `Shuffled instructions (each held-out start state run again with its instruction replaced by one of the task's ${shuffled.wmrl.choices} drawn at random, the same draws for every arm and seed; success still the true goal's): ${SHUFFLED_ARMS.map((x) => `${SHORT[x]} ${formatInterval(shuffled[x].success, false)} against its chance ${formatInterval(shuffled[x].chance, false)}, shuffled − chance ${formatInterval(shuffled[x].minus)} (${atChance(shuffled[x].minus)})`).join('; ')}. Chance is what a policy that follows the instruction it is given scores on those draws: its own success where the draw named the true goal, else 0 (about its success / ${shuffled.wmrl.choices}). The VLA's proprioception: ${PROPRIO_WORDS[vlaRecipe({ task: t }).proprio]}.`,
    `References on the same start states: the robust demonstrator the clone learns from ${pct(b0.demonstrator.states)} / ${pct(b0.demonstrator.combinations)}, the nominal sim's scripted expert ${pct(b0.expert.states)} / ${pct(b0.expert.combinations)} (held-out states / combinations). The deployed VLA artifact (onnxruntime-node, batch 1, camera and instruction, ${lat.length} calls) took ${fmt(quantile(lat, 0.5), 3)} ms median and ${fmt(quantile(lat, 0.99), 3)} ms at the 99th percentile against a control period of ${fmt(periodMs, 3)} ms.`,
  ];

  const dash = '—';
  const rows = ARMS.map((arm) => {
    const cs = arm === 'bc' ? null : seeds.map((s) => a.rl(s, arm));
    return [
      (named ? `${task}: ` : '') + LABEL[arm],
      iv(arm, 'states'),
      iv(arm, 'combinations'),
      arm === 'wmrl' ? dash : diff(arm, 'states'),
      arm === 'wmrl' ? dash : diff(arm, 'combinations'),
      cs ? fmt(median(cs.map((x) => x.robotEpisodes)), 4) : '0',
      cs ? fmt(median(cs.map((x) => x.robotHours)), 3) : '0',
      cs ? fmt(median(cs.map((x) => x.computeSeconds)), 3) : dash,
      fmt(median(seeds.map((s) => a.get(s, arm).cpuSeconds)), 3),
      arm === 'wmrl' ? `${fmt(median(corr.map((x) => x.weightEnd)), 3)} / ${fmt(median(corr.map((x) => x.anchorShare)), 2)}` : dash,
    ];
  });
  rows.push(
    [(named ? `${task}: ` : '') + 'reference: the robust demonstrator the clone learns from', pct(b0.demonstrator.states), pct(b0.demonstrator.combinations), dash, dash, dash, dash, dash, dash, dash],
    [(named ? `${task}: ` : '') + "reference: the nominal sim's scripted expert", pct(b0.expert.states), pct(b0.expert.combinations), dash, dash, dash, dash, dash, dash, dash],
  );

  const perSeed = [
    ...SETS.flatMap((set) => [
      `### ${task}: per seed, success on the ${p.split} split's ${SET_NAME[set]}`,
      '',
      perSeedTable(seeds, ARMS.map((arm) => ({ name: arm, values: a.success(arm, set) }))),
      '',
    ]),
    `### ${task}: per seed, robot episodes / robot hours / the trainer's compute s / the cell's CPU s of each arm`,
    '',
    perSeedTable(seeds, ARMS.map((arm) => ({ name: arm, values: seeds.map((s) => {
      const c = a.get(s, arm);
      return c.arm === 'bc' ? `0 / 0 / — / ${fmt(c.cpuSeconds, 3)}` : `${c.robotEpisodes} / ${fmt(c.robotHours, 3)} / ${fmt(c.computeSeconds, 3)} / ${fmt(c.cpuSeconds, 3)}`;
    }) }))),
    '',
    `### ${task}: per seed, WMRL's corrections (anchor groups per update and their share; the denoiser's anchor weight at the end / its largest, 1 = not up-weighted; the first update a debias map calibrated; the imagined gate's share kept; the identified delay; the rank agreement under the identified context)`,
    '',
    perSeedTable(seeds, [
      { name: 'anchors/update', values: corr.map((x) => fmt(x.anchorsPerUpdate, 2)) },
      { name: 'anchor share', values: corr.map((x) => fmt(x.anchorShare, 2)) },
      { name: 'anchor weight', values: corr.map((x) => `${fmt(x.weightEnd, 3)} / ${fmt(x.weightMax, 3)}`) },
      { name: 'map from', values: corr.map((x) => x.mapFrom ?? 'never') },
      { name: 'gate share', values: corr.map((x) => fmt(x.gateShare, 2)) },
      { name: 'delay', values: seeds.map((s) => w(s).wmrl!.identified.delay) },
      { name: 'agreement', values: seeds.map((s) => fmt(w(s).wmrl!.agreement.identified, 2)) },
    ]),
    '',
    `### ${task}: per seed, success on the held-out start states with shuffled instructions / its chance`,
    '',
    perSeedTable(seeds, SHUFFLED_ARMS.map((x) => ({ name: x, values: seeds.map((s) => {
      const c = a.get(s, x).shuffled!;
      return `${pct(mean(c.outcomes))} / ${pct(mean(c.chance))}`;
    }) }))),
    '',
    `### ${task}: success on the held-out start states during training (mean over seeds, at each evaluation: update, success)`,
    '',
    ...RL_ARMS.map((arm) => `- ${SHORT[arm]}: ${curveOf(a, arm).map(([x, y]) => `${fmt(x, 3)}: ${pct(y)}`).join(', ')}`),
    '',
  ].join('\n');

  // The mean curve over seeds against the share of each arm's updates, from the clone's success at 0.
  const start = mean(a.success('bc', 'states'));
  const lines: Series[] = [
    { label: SHORT.bc, points: [[0, start], [1, start]] },
    ...RL_ARMS.map((arm) => ({ label: SHORT[arm], points: [[0, start] as [number, number], ...curveOf(a, arm).map(([u, y]): [number, number] => [u / a.rl(seeds[0]!, arm).updates, y])] })),
  ];

  const result: Record<string, number | string> = {};
  for (const arm of ARMS) {
    result[arm] = score[arm].states.estimate;
    result[`${arm}_combinations`] = score[arm].combinations.estimate;
  }
  for (const b of OTHERS) {
    const d = wmrlMinus[b].states;
    Object.assign(result, { [`wmrl_minus_${b}`]: d.estimate, [`wmrl_minus_${b}_lo`]: d.lo, [`wmrl_minus_${b}_hi`]: d.hi, [`wmrl_vs_${b}`]: verdict(d).replace(/ /g, '_'), [`wmrl_vs_${b}_combinations`]: verdict(wmrlMinus[b].combinations).replace(/ /g, '_') });
  }
  Object.assign(result, {
    anchor_weight_wmrl: median(corr.map((x) => x.weightEnd)),
    anchor_share_wmrl: median(corr.map((x) => x.anchorShare)),
    denoiser_acted_seeds: seeds.length - neverDenoised.length,
    debias_acted_seeds: seeds.length - neverMapped.length,
    robot_hours_wmrl: median(seeds.map((s) => w(s).robotHours)),
    compute_s_wmrl: median(seeds.map((s) => w(s).computeSeconds)),
    cpu_s_wmrl: median(seeds.map((s) => w(s).cpuSeconds)),
    agreement_nominal: su.agreement.nominal,
    agreement_identified: median(seeds.map((s) => w(s).wmrl!.agreement.identified)),
    agreement_face_on_robot: su.agreement.faceOnRobot,
    agreement_repeatability: su.agreement.repeatability,
    ...Object.fromEntries(SHUFFLED_ARMS.flatMap((x) => {
      const z = shuffled[x];
      return [[`shuffled_success_${x}`, z.success.estimate], [`shuffled_chance_${x}`, z.chance.estimate], [`shuffled_minus_chance_${x}`, z.minus.estimate], [`shuffled_minus_chance_${x}_lo`, z.minus.lo], [`shuffled_minus_chance_${x}_hi`, z.minus.hi], [`shuffled_vs_chance_${x}`, verdict(z.minus).replace(/ /g, '_')]];
    })),
    demonstrator: b0.demonstrator.states,
    expert: b0.expert.states,
    vla_p99_ms: quantile(lat, 0.99),
    control_period_ms: periodMs,
  });
  return { summary, rows, perSeed, lines, result };
}

/** An RL arm's success during training, mean over seeds at each evaluation: [update, success] (every seed evaluates at the same updates). */
function curveOf(a: Analysis, arm: RlArm): Array<[number, number]> {
  const curves = a.seeds.map((s) => a.rl(s, arm).curve);
  return curves[0]!.map((pt, k) => [pt.update, mean(curves.map((c) => c[k]?.success ?? Number.NaN))]);
}

/**
 * Both tasks together, as the old report's headline (the mean over the tasks): per seed, its two tasks' start states
 * side by side, so each seed's mean is the mean over the tasks where both evaluate as many states.
 */
function pooled(p: Plan, parts: readonly Analysis[]) {
  const joined = (arm: Arm, set: EvalSet) => p.seeds.map((_, i) => parts.flatMap((a) => a.outcomes(arm, set)[i]!));
  const score = Object.fromEntries(ARMS.map((arm) => [arm, hierarchicalBootstrap(joined(arm, 'states'))])) as Record<Arm, Interval>;
  const minus = Object.fromEntries(OTHERS.map((b) => [b, pairedDifference(joined('wmrl', 'states'), joined(b, 'states'))])) as Record<(typeof OTHERS)[number], Interval>;
  return { score, minus };
}

/** The report of a run's cells, which the run computed or reused. */
export function report(p: Plan, keys: ProtocolKeys, cells: VlaCells, run: RunInfo): BenchReport {
  const analyses = p.tasks.map((task) => analyse(p, task, cells));
  const parts = analyses.map((a) => summarize(p, a, run, p.tasks.length > 1));
  const n = p.tasks.length * p.seeds.length * ARMS.length;
  const all = [...cells.arms.values()];
  const wall = all.reduce((x, c) => x + c.cellSeconds, 0), cpu = all.reduce((x, c) => x + c.cpuSeconds, 0);
  const result: Record<string, number | string> = { split: p.split, seeds: p.seeds.length };
  const summary: string[] = parts.map((part) => part.summary.join('\n'));
  if (analyses.length > 1) {
    // The old report's claims over both tasks, each with its interval now.
    const { score, minus } = pooled(p, analyses);
    const both = verdict(minus.sparse_only) === 'beats' && verdict(minus.dense_only) === 'beats';
    const tenPoints = minus.bc.lo >= 0.1;
    summary.push(
      `Both tasks (per seed the mean over the tasks' ${SET_NAME.states}): behaviour cloning ${formatInterval(score.bc, false)}, sparse only ${formatInterval(score.sparse_only, false)}, dense only ${formatInterval(score.dense_only, false)}, WMRL ${formatInterval(score.wmrl, false)}; WMRL − sparse only ${formatInterval(minus.sparse_only)} (${said(minus.sparse_only, 'WMRL')}), − dense only ${formatInterval(minus.dense_only)} (${said(minus.dense_only, 'WMRL')}), − behaviour cloning ${formatInterval(minus.bc)} (${said(minus.bc, 'WMRL')}).`,
      `The earlier report's claims, restated: "WMRL above both single-signal rows" — ${both ? 'shown (both intervals exclude 0)' : 'not shown (an interval includes 0 or lies below it)'}; "at least 10 points over behaviour cloning" — ${tenPoints ? 'shown (the interval lies above +0.1)' : `not shown (the interval's lower end is ${formatInterval(minus.bc)})`}.`,
    );
    for (const arm of ARMS) result[arm] = score[arm].estimate;
    for (const b of OTHERS) Object.assign(result, { [`wmrl_minus_${b}`]: minus[b].estimate, [`wmrl_minus_${b}_lo`]: minus[b].lo, [`wmrl_minus_${b}_hi`]: minus[b].hi, [`wmrl_vs_${b}`]: verdict(minus[b]).replace(/ /g, '_') });
    result.wmrl_above_both = both ? 'shown' : 'not_shown';
    result.wmrl_10_points_over_bc = tenPoints ? 'shown' : 'not_shown';
    parts.forEach((part, i) => Object.entries(part.result).forEach(([k, v]) => { result[`${p.tasks[i]}_${k}`] = v; }));
  } else {
    Object.assign(result, parts[0]!.result);
    const m = analyses[0]!.wmrlMinus;
    summary.push(`The earlier report's claim for this task alone, restated: "WMRL above both single-signal rows" — ${verdict(m.sparse_only.states) === 'beats' && verdict(m.dense_only.states) === 'beats' ? 'shown' : 'not shown'} on the ${SET_NAME.states}.`);
  }
  result.vla_p99_ms = Math.max(...p.tasks.map((t) => quantile(run.latency[t]!, 0.99)));
  result.wall_min = run.wallS / 60;
  summary.push(`${run.computed} of ${n + p.tasks.length} cells computed in this run, ${fmt(run.wallS / 60, 3)} min wall-clock, ${SLOTS} worker processes; the rest reused from bench/results/cells under the computation key. The cells' own wall-clock over all arms: ${fmt(wall / 60, 3)} min, their processes' CPU time ${fmt(cpu / 60, 3)} min.`);
  const first = analyses[0]!;
  return {
    title: `VLA post-training on the gap robot: behaviour cloning, sparse-only RL, dense-only RL, WMRL (${p.tasks.join(' and ')}, ${p.split} split)`,
    summary: summary.join('\n\n'),
    header: ['arm', 'held-out states (mean [95% CI])', 'held-out combinations (mean [95% CI])', 'WMRL − arm, states (paired)', 'WMRL − arm, combinations (paired)', 'robot episodes (median)', 'robot hours (median)', 'compute s (median)', 'CPU s (median)', 'anchor weight at the end / anchor share (median)'],
    rows: parts.flatMap((part) => part.rows),
    notes: [
      `Report key \`${keys.report}\`, computation key \`${keys.compute}\`; test-split cells are recorded in bench/results/ledger.jsonl under the computation key. Splits: RL ${seedList([...p.seeds])}; evaluation start states from ${p.cell.eval.seed0} (block ${EVAL_BLOCK[p.split]} of ${START_BLOCK}); held-out combinations ${(p.cell.quick ? QUICK_HELD_OUT : COMBINATIONS[p.split]).map((c) => `(${c.goal}, ${c.region})`).join(', ')} (goal, region). The per-task settings (β, log-std, anchors and their scoring, the imagined gate, twin or face, the learning rate) and the update counts were chosen before the protocol on the states that are now validation's: they are to be re-made on validation (docs/decisions.md). The world model's pretraining: ${DEFAULT_PRETRAIN.wmMembers} members, profiles randomized by up to ×${DEFAULT_PRETRAIN.wmRandomize}; the VLA's ${S}x${S} camera, its observation ending with its last ${LATENCY} commands; ANCHORS ${JSON.stringify(ANCHORS)}.`,
      '',
      ...parts.map((part) => part.perSeed),
    ].join('\n'),
    plot: { title: `${first.task} on the gap robot: success on the held-out start states during training (mean of ${p.seeds.length} seed${p.seeds.length === 1 ? '' : 's'})`, xLabel: "share of the arm's updates", yLabel: "success on the split's held-out states", lines: parts[0]!.lines },
    keys,
    result,
  };
}
