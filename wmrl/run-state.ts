// A training run's durable state: what `--resume` needs to continue exactly (update index, random
// state, robot clock, history, policy and optimizer), written atomically after every update.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic, type RngState } from '../nn/index.js';
import type { ClippedPolicyGradient } from '../policies/pg.js';
import type { RobotEpisode } from './embodied.js';

/** One update's log line. Figures absent on updates that do not measure them. */
export interface RunRow {
  update: number;
  /** Robot time spent so far (episodes × steps × control period + resets), all robots together. */
  robotSeconds: number;
  /** Robot time until the last robot is free (robots run in parallel). */
  robotWallSeconds: number;
  robotEpisodes: number;
  /** Compute wall-clock since the run (or its resumption) started. */
  computeSeconds: number;
  /** Success rate of this update's robot episodes (sampled actions). */
  trainSuccess: number | null;
  /** True success on held-out start states (mean action), on evaluation updates. */
  evalSuccess?: number;
  /** Mean return on the same held-out episodes. */
  evalReturn?: number;
  /** On evaluation updates: the update whose parameters the run keeps after this evaluation (0: the starting policy's; wmrl/keep-best.ts). */
  keptUpdate?: number;
  groups: number;
  /** Groups executed on the robot this update (anchors for WMRL). */
  realGroups: number;
  loss: number | null;
  approxKl: number | null;
  /** The update's estimate of KL to the reference policy (PgConfig.klCoef); null without the penalty. */
  refKl: number | null;
  /** A learner with a critic (train_ppo, train_rlpd): the critic's loss on the update's last fit. */
  criticLoss?: number | null;
  biasReduction?: number | null;
  /** WMRL with the debias map on: whether a fitted map calibrated this update's world-model scores (false: the identity). */
  calibrated?: boolean;
  anchorWeight?: number;
  /** Prediction-powered interval for the policy's true mean score. */
  trueMean?: [number, number] | null;
  /** World model's predicted success of the anchor prompts' imagined rollouts, and the anchors' measured success. */
  predictedSuccess?: number;
  measuredSuccess?: number;
  hackingAlarm?: boolean;
  flaggedContexts?: number;
  refit?: boolean;
  /** WMRL: the actuation delay (control steps) imagination applied, as identified so far. */
  actionDelay?: number;
  /** WMRL with a context-conditioned world model: the context imagination ran under (the model's context units). */
  context?: number[];
  /** Imagined transitions this update (policy + ensemble) and the seconds they took. */
  imaginedTransitions?: number;
  imagineSeconds?: number;
  /** WMRL imagining from the robot's reported starts: how many the robot had reported, and how many of this update's prompts imagined from one. */
  reportedStarts?: number;
  imaginedFromReported?: number;
  /** WMRL: each anchor group's closed-loop rank agreement (Spearman) of its real scores with the group imagined from the episodes' own starts under their noise. */
  agreements?: number[];
  /** WMRL under its imagined gate: the share of the imagined groups the update kept (1 until measured), and how many it kept. */
  imaginedWeight?: number;
  imaginedGroups?: number;
  /** WMRL: whether the reward-hacking alarm, raised at an earlier update, kept this update's imagined groups out of it (WmrlConfig.alarmAction). */
  imaginationPaused?: boolean;
}

/** One evaluation of the policy as it was after `update` updates (0: the starting policy). */
export interface EvalPoint {
  update: number;
  /** Success rate over the evaluation's episodes, their mean return, and how many. */
  success: number;
  meanReturn: number;
  episodes: number;
  /** The evaluation noise: the binomial standard error of `success`, √(p(1−p)/n). */
  se: number;
}

export interface RunState {
  algo: string;
  update: number;
  rng: RngState;
  clock: { busy: number[]; episodes: number };
  rows: RunRow[];
  /** Observation after the last action of each stored episode (the record has the ones before). */
  finalObs: Record<string, number[]>;
  episodeIds: string[];
  /** The starting policy's evaluation, measured before update 1 (where the run has an evaluation). */
  start?: EvalPoint;
  /** The evaluation whose parameters the run keeps and hands back as its final policy (wmrl/keep-best.ts). */
  kept?: EvalPoint;
  /** The best evaluation so far (the latest of equals), which a run preferring its latest evaluation falls back to (wmrl/keep-best.ts). */
  best?: EvalPoint;
  /** Trainer-specific state (the Corrector's, the world model's refit schedule). */
  extra?: unknown;
}

export interface RunHooks {
  onUpdate?: (row: RunRow) => void;
  onEpisode?: (ep: RobotEpisode, role: 'train' | 'anchor') => void;
  /** The starting policy's evaluation, before update 1. */
  onStart?: (start: EvalPoint) => void;
  signal?: AbortSignal;
}

const STATE = 'state.json';
const PG = 'pg.safetensors';

/** Writes the policy/optimizer checkpoint, then the state that points at it. */
export function saveRunState(dir: string, state: RunState, pg: ClippedPolicyGradient): void {
  pg.saveCheckpoint(join(dir, PG));
  writeFileAtomic(join(dir, STATE), [new TextEncoder().encode(JSON.stringify(state))]);
}

export function loadRunState(dir: string, algo: string, pg: ClippedPolicyGradient): RunState {
  const file = join(dir, STATE);
  if (!existsSync(file)) throw new Error(`resume: ${dir} has no ${STATE} (not a run folder, or the run never finished an update)`);
  const state = JSON.parse(readFileSync(file, 'utf8')) as RunState;
  if (state.algo !== algo) throw new Error(`resume: ${dir} holds a '${state.algo}' run, not '${algo}'`);
  pg.loadCheckpoint(join(dir, PG));
  return state;
}
