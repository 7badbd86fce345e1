// Behaviour cloning with more demonstrations at standard GRPO's robot time (wmrl/train_bc.ts), as a variant of
// `bench embodied`: the robust demonstrator on the robot, told the robot's latency, and the clone refitted on its
// demonstrations and the pretraining's. This module and what it imports are the variant's own code in its key.
import { makeEnv } from '../../../sim/index.js';
import { loadProfile } from '../../../sim/profiles.js';
import { DEFAULT_BC_MORE, trainBcMore } from '../../../wmrl/train_bc.js';
import type { TrainerInputs, TrainerOutcome } from './setup.js';

export interface BcMoreOptions {
  /** Standard GRPO's groups per update: with groupSize, the robot time per update. */
  prompts: number;
  /** Behaviour-cloning passes over all demonstrations at each refit (the grid's axis). */
  epochs: number;
}

export async function train(x: TrainerInputs, v: BcMoreOptions): Promise<TrainerOutcome> {
  const { pre: p, target, prompts, evaluate } = x;
  // The demonstrator drives the robot's task; an env of the task builds it (its control period is the robot's).
  const env = await makeEnv({ task: x.task, profile: 'nominal' });
  try {
    const latencySteps = loadProfile(x.profile).action_latency_steps;
    const state = await trainBcMore({
      config: { ...x.loop(v.prompts), ...DEFAULT_BC_MORE, epochs: v.epochs }, policy: p.policy, target, prompts, evaluate,
      demos: { obs: p.demos.obs, action: p.demos.label }, demonstrator: () => env.demonstrator({ latencySteps }),
    });
    return { rows: state.rows, groups: v.prompts, corrected: false };
  } finally {
    env.dispose();
  }
}
