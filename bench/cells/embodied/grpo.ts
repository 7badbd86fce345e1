// Standard GRPO on the robot (wmrl/train_standard.ts), as a variant of `bench embodied`: every group of every update on
// the robot, scored by its recorded return. This module and what it imports are the variant's own code in its
// computation key.
import { ClippedPolicyGradient } from '../../../policies/pg.js';
import { POST_TRAIN_PG } from '../../../wmrl/sim-setup.js';
import { trainStandard } from '../../../wmrl/train_standard.js';
import type { TrainerInputs, TrainerOutcome } from './setup.js';

export interface GrpoOptions {
  /** Groups per update, all on the robot. */
  prompts: number;
}

export async function train(x: TrainerInputs, v: GrpoOptions): Promise<TrainerOutcome> {
  const { pre: p, target, prompts, evaluate } = x;
  const pg = await ClippedPolicyGradient.create(p.policy, POST_TRAIN_PG);
  const state = await trainStandard({ config: x.loop(v.prompts), policy: p.policy, pg, target, prompts, evaluate });
  await pg.release();
  return { rows: state.rows, groups: v.prompts, corrected: false };
}
