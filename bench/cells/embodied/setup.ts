// What every cell of `bench embodied` shares, and only that: at one (task, RL seed), the pretraining (behaviour
// cloning, world model), the robot (the sim under the arm's hardware profile, its reset charged), the training prompts, the
// trainers' own measurement on the robot, the split's evaluation, and a trained variant's cell made from its trainer's
// run rows. Its code and the cell options are
// the shared part of every cell's computation key (bench/lib/protocol.ts protocolKeys); a variant's trainer is called
// through its own module beside this one (grpo.ts, wmrl.ts, …), so nothing here imports a trainer (wmrl/train_*.ts):
// editing one variant's trainer moves that variant's key alone.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evaluateSuccess, robotEvaluation, type ClosableTarget, type Evaluation } from '../../../wmrl/embodied.js';
import type { Policy } from '../../../policies/types.js';
import type { RunRow } from '../../../wmrl/run-state.js';
import { loadProfile } from '../../../sim/profiles.js';
import { makeEnv } from '../../../sim/index.js';
import { Rng } from '../../../nn/index.js';
import { noisedRollout } from '../../../policies/demos.js';
import { groupAgreement } from '../../../wmrl/gate.js';
import type { CalibrationMemo, CalibrationReport } from '../../../wmrl/calibration.js';
import { DEFAULT_PRETRAIN, SimPrompts, simRobotTarget, type Pretrained, type PretrainOptions } from '../../../wmrl/sim-setup.js';
import { cachedPretrain } from './pretrain-cache.js';
import { DiskCalibrationMemo } from './calibration-cache.js';

/** The robot: the sim under this hardware profile (the reality gap) unless an arm names another, its reset charged this many robot seconds. */
export const PROFILE = 'gap';
const RESET_SECONDS = 5;
/**
 * The robot reports its last this many commands (sim/env.ts commandHistory), and every policy, prompt and evaluation
 * reads them: the commands still in flight on a robot with actuation latency (the trainers' delay search goes to 5).
 */
export const COMMAND_HISTORY = 4;

/**
 * An arm of the bench: a task on the robot under a profile, named `task` (PROFILE's robot) or `task@profile`
 * (`reach@worn`). Every cell of an arm is cached under its name, so arms on other profiles keep the others' cells.
 */
export function armOf(name: string): { task: string; profile: string } {
  const [task, profile = PROFILE, ...rest] = name.split('@');
  if (!task || !profile || rest.length) throw new Error(`bench embodied: '${name}' is neither a task nor task@profile`);
  return { task, profile };
}

/** Start states come in blocks of this many seeds; a run's prompts at RL seed s are block 10 + s (seeds from 1,000,000 + s·100,000). */
export const START_BLOCK = 100_000;
export const promptBlock = (seed: number) => 10 + seed;
/**
 * The trainers' own measurement, the one keep-best selects the returned policy on (wmrl/keep-best.ts), reads the start
 * states of this train block, which no prompt, pretraining or split's evaluation reads: what a user with a real robot
 * has, never the states the report scores.
 */
export const MEASURE_BLOCK = 8;
/** The start states of the robot's repeatability: train block 9, which only the train split's evaluation also reads (neither trains). */
export const REPEAT_BLOCK = 9;

/**
 * The robot's repeatability for `policy`: from each start, a group of G rollouts under G draws of policy noise, run twice
 * on the robot's sim with other sensor noise and jitter from the first step on; the mean over groups of the two runs'
 * within-group rank agreement of returns (wmrl/gate.ts groupAgreement). A closed-loop agreement of imagined with real
 * returns can reach this at most, since the robot does not agree with itself more.
 */
export async function repeatability(policy: Policy, task: string, profile: string, commandHistory: number, seeds: readonly number[], G: number, seed: number): Promise<number> {
  const env = await makeEnv({ task, profile, commandHistory });
  try {
    const rng = new Rng(seed + 9_999), A = policy.actDim, H = env.horizon;
    const rhos: number[] = [];
    for (const [b, s] of seeds.entries()) {
      const noise = Float32Array.from({ length: G * H * A }, () => rng.normal());
      const returns = async (run: number) => {
        const out: number[] = [];
        for (let k = 0; k < G; k++) out.push((await noisedRollout(env, policy, s, noise.subarray(k * H * A, (k + 1) * H * A), H, { reseed: run * 1_000_000 + b * G + k })).return);
        return out;
      };
      const rho = groupAgreement(await returns(1), await returns(2));
      if (!Number.isNaN(rho)) rhos.push(rho);
    }
    if (!rhos.length) throw new Error(`bench embodied: no group of ${G} measured a repeatability`);
    return rhos.reduce((a, x) => a + x, 0) / rhos.length;
  } finally {
    env.dispose();
  }
}

/**
 * A full run's sizes and a quick run's (a smoke test of the code: its figures mean nothing). `measureEpisodes`: the
 * trainers' own measurement's episodes at each evaluation, the start's included, each charged to the robot clock;
 * `repeatGroups` × `repeatSize`: the groups the robot's repeatability is measured on (off the robot clock: a diagnostic of the sim).
 */
export const SIZES = {
  full: { updates: 20, prompts: 8, groupSize: 8, evalEvery: 4, evalEpisodes: 200, measureEpisodes: 10, repeatGroups: 16, repeatSize: 8, pretrain: {} as Partial<PretrainOptions> },
  quick: {
    updates: 3, prompts: 4, groupSize: 4, evalEvery: 3, evalEpisodes: 10, measureEpisodes: 4, repeatGroups: 2, repeatSize: 4,
    pretrain: { bcEpisodes: 10, bcEpochs: 20, daggerRounds: 1, daggerEpisodes: 5, daggerEpochs: 10, wmEpisodes: 12, wmEpochs: 3, wmHidden: [64, 64], wmMembers: 3 } as Partial<PretrainOptions>,
  },
};

/** What every cell of a run depends on besides its code: its JSON is the shared part of the computation keys' options. */
export function sharedOptions(o: { quick: boolean; split: 'train' | 'validation' | 'test'; evalSeed0: number }) {
  const sz = o.quick ? SIZES.quick : SIZES.full;
  return { split: o.split, ...sz, evalSeed0: o.evalSeed0, resetSeconds: RESET_SECONDS, commandHistory: COMMAND_HISTORY, quick: o.quick };
}
export type CellOptions = ReturnType<typeof sharedOptions>;

/** The behaviour-cloned start on the split's evaluation start states. */
export interface StartCell {
  success: number;
  /** Per start state, in order: 1 success, 0 not. */
  outcomes: number[];
  /** The robot's repeatability (repeatability below): the ceiling a closed-loop agreement of imagined with real returns is read against. */
  repeatability: number;
}

/** One variant post-trained from the start at one seed. */
export interface VariantCell {
  /**
   * At every evaluation (every evalEvery updates and the last): the robot hours so far, the trainer's measurement
   * included, and the success on the split's evaluation start states of the policy the run would hand back if it
   * stopped there (the kept one).
   */
  points: Array<[number, number]>;
  /** The policy the trainer handed back (the kept one) per start state, in order: 1 success, 0 not (the same states for every variant of a seed). */
  outcomes: number[];
  /** The update whose parameters the trainer handed back (0: the start's). */
  keptUpdate: number;
  /** At every evaluation, the success on the split's states of the policy as its last update left it (whether kept or not). */
  updatedSuccess: number[];
  /**
   * The trainer's own measurement, which chose the kept update: its episodes per evaluation (the mean action on the
   * robot from the start states of MEASURE_BLOCK), the start's success and each later evaluation's, and the robot
   * hours all of it cost (within robotHours).
   */
  measure: { episodes: number; start: number; success: number[]; robotHours: number };
  /** The split's success of the policy the trainer started from (after a calibration, the calibrated clone, or the clone put back). */
  startSuccess: number;
  /** That policy per start state, in the order of `outcomes`: 1 success, 0 not. */
  startOutcomes: number[];
  /** The robot hours when the trainer's start was measured: any calibration and that measurement included. */
  startHours: number;
  /** What the variant's calibration identified, and the clone's measured success before and after it; null without one. */
  calibration: CalibrationReport | null;
  /** Robot time and episodes of the whole run, the trainer's measurement and any calibration included. */
  robotHours: number;
  robotEpisodes: number;
  /** Compute wall-clock seconds of the training run (its evaluations included). */
  computeSeconds: number;
  /** Groups per update, and per update the groups that ran on the robot (anchors for WMRL). */
  groups: number;
  realGroups: number[];
  /** Variants with the Corrector, per update: the denoiser's anchor weight (1: not up-weighted), whether a debias map calibrated the scores, the map's held-out bias reduction; null without the Corrector. */
  anchorWeight: number[] | null;
  calibrated: boolean[] | null;
  biasReduction: Array<number | null> | null;
  /** WMRL with anchors: every anchor group's closed-loop rank agreement of imagined with real returns (RunRow.agreements), in order; null for other trainers. */
  agreements: number[] | null;
  /** Updates on which the reward-hacking alarm was raised. */
  alarms: number;
  imaginedTransitions: number;
  imagineSeconds: number;
}

/** A training run's loop at `prompts` groups per update (train_standard.ts StandardConfig, which every trainer extends). */
export interface LoopConfig {
  updates: number;
  prompts: number;
  groupSize: number;
  evalEvery: number;
  promptSeed0: number;
  seed: number;
}

/**
 * What a variant's trainer is given: the seed's pretraining (reset to the start), the robot, the prompts and its
 * evaluation: its own measurement on the robot (the split's evaluation observes each call, and never reaches the trainer).
 */
export interface TrainerInputs {
  task: string;
  /** The robot's hardware profile. */
  profile: string;
  seed: number;
  o: CellOptions;
  pre: Pretrained;
  target: ClosableTarget;
  prompts: SimPrompts;
  evaluate: (policy: Policy) => Promise<Evaluation>;
  /** The trainer's measurement on the robot alone (charged, never observed by the split): for a calibration's before and after. */
  measure: (policy: Policy) => Promise<Evaluation>;
  loop(prompts: number): LoopConfig;
  /** The seed's calibrations by what they started from: every calibrating variant records its own robot episodes, and computes what follows them once. */
  calibrationMemo: CalibrationMemo;
}

/** What a variant's trainer gives back: its run rows, its groups per update, and whether it ran the Corrector. */
export interface TrainerOutcome {
  rows: RunRow[];
  groups: number;
  corrected: boolean;
  /** The calibration the variant ran before its trainer (wmrl/calibrate.ts calibrateMeasured), if any. */
  calibration?: CalibrationReport;
}

const copyOf = (xs: ReadonlyArray<{ data: Float32Array }>) => xs.map((t) => Float32Array.from(t.data));

/** One call of a trainer's evaluation: its own measurement's success, the split's evaluation beside it, and the parameters both measured. */
export interface EvaluationSeen {
  measured: number;
  split: Evaluation & { outcomes: number[] };
  params: Float32Array[];
}

/**
 * The split's view of a run that evaluated its start and then once per evaluation row (`seen`, in that order): at each
 * row, the robot hours and the split's success of the update the row names as kept; the kept update at the end, its
 * outcomes, and each row's own policy's success. Throws where rows and evaluations disagree, or where `returned` (the
 * policy's parameters after the run) are not those of the update the run kept.
 */
export function splitView(what: string, rows: readonly RunRow[], seen: readonly EvaluationSeen[], returned: readonly Float32Array[]): Pick<VariantCell, 'points' | 'outcomes' | 'keptUpdate' | 'updatedSuccess'> {
  const evals = rows.filter((r) => r.evalSuccess !== undefined);
  if (seen.length !== evals.length + 1) throw new Error(`${what}: ${seen.length} evaluations for its start and ${evals.length} evaluation rows`);
  evals.forEach((r, i) => {
    if (r.evalSuccess !== seen[i + 1]!.measured) throw new Error(`${what}: update ${r.update}'s row holds success ${r.evalSuccess}, its measurement ${seen[i + 1]!.measured}`);
    if (r.keptUpdate === undefined) throw new Error(`${what}: update ${r.update}'s row names no kept update (a trainer without keep-best)`);
  });
  const at = (update: number) => {
    const i = update === 0 ? 0 : evals.findIndex((r) => r.update === update) + 1;
    if (i < 1 && update !== 0) throw new Error(`${what} keeps update ${update}, which it never evaluated`);
    return seen[i]!;
  };
  const keptUpdate = evals.at(-1)?.keptUpdate ?? 0, kept = at(keptUpdate);
  if (returned.length !== kept.params.length || returned.some((x, i) => x.length !== kept.params[i]!.length || !x.every((v, j) => v === kept.params[i]![j]))) {
    throw new Error(`${what} handed back parameters other than those of update ${keptUpdate}, the update it kept`);
  }
  return {
    points: evals.map((r): [number, number] => [r.robotSeconds / 3600, at(r.keptUpdate!).split.success]),
    outcomes: kept.split.outcomes,
    keptUpdate,
    updatedSuccess: seen.slice(1).map((x) => x.split.success),
  };
}

/** An arm at one RL seed: pretrained once (behaviour cloning, world model); each variant starts from the same parameters. */
export class SeedSetup {
  private readonly calibrationMemo: CalibrationMemo = new DiskCalibrationMemo();

  private constructor(
    readonly task: string,
    readonly profile: string,
    readonly seed: number,
    private readonly o: CellOptions,
    private readonly pre: Pretrained,
    private readonly policy0: Float32Array[],
    private readonly model0: Float32Array[],
  ) {}

  /**
   * `arm`: a task, or task@profile (armOf); pretraining is the task's whatever the robot, read from the pretraining
   * cache where it is there (embodied/pretrain-cache.ts); `progress` hears which.
   */
  static async create(arm: string, seed: number, o: CellOptions, progress: (label: string) => void = () => {}): Promise<SeedSetup> {
    const { task, profile } = armOf(arm);
    // An unknown profile fails here, not after minutes of pretraining.
    loadProfile(profile);
    const pre = await cachedPretrain({ ...DEFAULT_PRETRAIN, ...o.pretrain, task, seed, commandHistory: o.commandHistory }, o.quick, progress);
    return new SeedSetup(task, profile, seed, o, pre, copyOf(pre.policy.paramNames().map((n) => pre.policy.store.get(n))), copyOf(pre.model.store.names().map((n) => pre.model.store.get(n))));
  }

  /** The split's evaluation, the report's: the policy's mean action on `evalEpisodes` start states from `evalSeed0`, on the robot's profile. */
  private async evaluate(policy: Policy): Promise<Evaluation & { outcomes: number[] }> {
    const ev = await evaluateSuccess(policy, this.task, this.profile, this.o.evalEpisodes, this.o.evalSeed0, { commandHistory: this.o.commandHistory });
    if (!ev.outcomes) throw new Error('bench embodied: the evaluation kept no per-episode outcomes');
    return { ...ev, outcomes: ev.outcomes };
  }

  private reset(): void {
    const p = this.pre;
    p.policy.paramNames().forEach((n, i) => p.policy.store.set(n, this.policy0[i]!));
    p.model.store.names().forEach((n, i) => p.model.store.set(n, this.model0[i]!));
  }

  async start(): Promise<StartCell> {
    this.reset();
    const ev = await this.evaluate(this.pre.policy);
    const seeds = Array.from({ length: this.o.repeatGroups }, (_, b) => REPEAT_BLOCK * START_BLOCK + this.seed * 1_000 + b);
    return { success: ev.success, outcomes: ev.outcomes, repeatability: await repeatability(this.pre.policy, this.task, this.profile, this.o.commandHistory, seeds, this.o.repeatSize, this.seed) };
  }

  /**
   * Variant `name` trained from the start by `trainer` on a fresh robot; its cell from the run rows and the split's
   * evaluation of the policy at each of the trainer's evaluations, the start's included, and of the one it hands back.
   */
  async train(name: string, trainer: (inputs: TrainerInputs) => Promise<TrainerOutcome>): Promise<VariantCell> {
    this.reset();
    const { task, profile, seed, o, pre } = this;
    const tmp = mkdtempSync(join(tmpdir(), 'bench-embodied-'));
    try {
      // The store is this cell's scratch file, deleted with it: no fsync per step.
      const target = await simRobotTarget({ task, profile, robots: 1, resetSeconds: o.resetSeconds, seed, store: join(tmp, 'episodes.db'), storeSync: 'NORMAL', commandHistory: o.commandHistory });
      try {
        const measure = robotEvaluation(target, o.measureEpisodes, MEASURE_BLOCK * START_BLOCK);
        const seen: EvaluationSeen[] = [];
        let measureSeconds = 0;
        let startHours = NaN;
        // The trainer gets its measurement alone; the split's evaluation runs beside it, in the sim, off the robot clock.
        const evaluate = async (policy: Policy): Promise<Evaluation> => {
          const before = target.clock.robotSeconds;
          const measured = await measure(policy);
          measureSeconds += target.clock.robotSeconds - before;
          if (seen.length === 0) startHours = target.clock.robotSeconds / 3600;
          seen.push({ measured: measured.success, split: await this.evaluate(policy), params: copyOf(policy.paramNames().map((n) => policy.store.get(n))) });
          return measured;
        };
        using prompts = await SimPrompts.create(task, 'nominal', { commandHistory: o.commandHistory });
        const loop = (n: number): LoopConfig => ({ updates: o.updates, prompts: n, groupSize: o.groupSize, evalEvery: o.evalEvery, promptSeed0: promptBlock(seed) * START_BLOCK, seed });
        // A calibration's own measurements (the clone before and after it) are the robot's and charged, and the split never sees them.
        const measureOnly = async (policy: Policy): Promise<Evaluation> => {
          const before = target.clock.robotSeconds;
          const m = await measure(policy);
          measureSeconds += target.clock.robotSeconds - before;
          return m;
        };
        const { rows, groups, corrected, calibration = null } = await trainer({ task, profile, seed, o, pre, target, prompts, evaluate, measure: measureOnly, loop, calibrationMemo: this.calibrationMemo });
        const what = `bench embodied: ${task} seed ${seed} ${name}`;
        const end = rows[o.updates - 1];
        if (!end || end.evalSuccess === undefined) throw new Error(`${what} has no evaluation at update ${o.updates}`);
        const returned = pre.policy.paramNames().map((n) => pre.policy.store.get(n).data);
        return {
          ...splitView(what, rows, seen, returned),
          measure: { episodes: o.measureEpisodes, start: seen[0]!.measured, success: seen.slice(1).map((x) => x.measured), robotHours: measureSeconds / 3600 },
          startSuccess: seen[0]!.split.success,
          startOutcomes: seen[0]!.split.outcomes,
          startHours,
          calibration,
          robotHours: end.robotSeconds / 3600,
          robotEpisodes: end.robotEpisodes,
          computeSeconds: end.computeSeconds,
          groups,
          realGroups: rows.map((r) => r.realGroups),
          anchorWeight: corrected ? rows.map((r) => r.anchorWeight ?? 1) : null,
          calibrated: corrected ? rows.map((r) => r.calibrated ?? false) : null,
          biasReduction: corrected ? rows.map((r) => r.biasReduction ?? null) : null,
          agreements: rows.some((r) => r.agreements !== undefined) ? rows.flatMap((r) => r.agreements ?? []) : null,
          alarms: rows.filter((r) => r.hackingAlarm).length,
          imaginedTransitions: rows.reduce((s, r) => s + (r.imaginedTransitions ?? 0), 0),
          imagineSeconds: rows.reduce((s, r) => s + (r.imagineSeconds ?? 0), 0),
        };
      } finally {
        await target.close();
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
}
