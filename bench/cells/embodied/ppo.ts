// PPO with a learned value baseline (wmrl/train_ppo.ts), as a variant of `bench embodied`: standard GRPO's robot
// episodes per update, each step credited by GAE from a critic. This module and what it imports are the variant's own
// code in its computation key.
import { ClippedPolicyGradient } from '../../../policies/pg.js';
import { POST_TRAIN_PG } from '../../../wmrl/sim-setup.js';
import { DEFAULT_PPO, trainPpo } from '../../../wmrl/train_ppo.js';
import type { TrainerInputs, TrainerOutcome } from './setup.js';

export interface PpoOptions {
  /** Groups per update, all on the robot (standard GRPO's). */
  prompts: number;
  /** The policy's Adam step (the grid's axis); the rest of the update is standard GRPO's (POST_TRAIN_PG). */
  lr: number;
}

export async function train(x: TrainerInputs, v: PpoOptions): Promise<TrainerOutcome> {
  const { pre: p, target, prompts, evaluate } = x;
  const pg = await ClippedPolicyGradient.create(p.policy, { ...POST_TRAIN_PG, optimizer: { ...POST_TRAIN_PG.optimizer, lr: v.lr } });
  try {
    const state = await trainPpo({ config: { ...x.loop(v.prompts), ...DEFAULT_PPO }, policy: p.policy, pg, target, prompts, evaluate });
    return { rows: state.rows, groups: v.prompts, corrected: false };
  } finally {
    await pg.release();
  }
}
