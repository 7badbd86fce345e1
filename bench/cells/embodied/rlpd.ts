// RLPD / HIL-SERL-style soft actor-critic (wmrl/train_rlpd.ts), as a variant of `bench embodied`: standard GRPO's robot
// episodes per update, learned off-policy from them and the demonstrations the start was cloned from. This module and
// what it imports are the variant's own code in its computation key.
import { DEFAULT_RLPD, trainRlpd } from '../../../wmrl/train_rlpd.js';
import type { TrainerInputs, TrainerOutcome } from './setup.js';

export interface RlpdOptions {
  /** Prompts per update (standard GRPO's), each run groupSize times on the robot. */
  prompts: number;
  /** Adam's step for the actor, the critics and the temperature (the grid's axis). */
  lr: number;
  /** Critic updates per robot step, critic ensemble size and width, warm-up updates on the demonstrations: the learner's budget on this machine. */
  utd: number;
  critics: number;
  criticHidden: number[];
  warmupSteps: number;
}

export async function train(x: TrainerInputs, v: RlpdOptions): Promise<TrainerOutcome> {
  const { pre: p, target, prompts, evaluate } = x;
  const d = p.demos;
  const config = { ...x.loop(v.prompts), ...DEFAULT_RLPD, lr: v.lr, utd: v.utd, critics: v.critics, targetSubset: Math.min(DEFAULT_RLPD.targetSubset, v.critics), criticHidden: v.criticHidden, warmupSteps: v.warmupSteps };
  const state = await trainRlpd({ config, policy: p.policy, target, prompts, evaluate, demos: { obs: d.obs, action: d.executed, reward: d.reward, nextObs: d.nextObs, terminal: d.terminal } });
  return { rows: state.rows, groups: v.prompts, corrected: false };
}
