// Standard GRPO on the robot from the calibrated clone, as a variant of `bench embodied`: the clone calibrated first
// (wmrl/calibrate.ts, through the pretrained world model), then standard GRPO (wmrl/train_standard.ts) as embodied/grpo.ts
// runs it. A module of its own, so calibration's code is in this variant's computation key and not in standard GRPO's
// (and one variant's module imports no other's: bench/lib/protocol.ts).
import { ClippedPolicyGradient } from '../../../policies/pg.js';
import { calibrateMeasured, calibrationConfig } from '../../../wmrl/calibrate.js';
import { postTrainPg } from '../../../wmrl/sim-setup.js';
import { trainStandard } from '../../../wmrl/train_standard.js';
import type { TrainerInputs, TrainerOutcome } from './setup.js';

export interface GrpoCalOptions {
  /** Groups per update, all on the robot. */
  prompts: number;
  /** Robot episodes of the calibration, at a full or a smoke run's sizes. */
  calibrate: { episodes: number; quick: boolean };
  /** β of GRPO's KL penalty to the calibrated clone (wmrl/sim-setup.ts postTrainPg); absent: none. */
  klCoef?: number;
  /** The policy's Adam step; absent: POST_TRAIN_PG's. */
  lr?: number;
}

export async function train(x: TrainerInputs, v: GrpoCalOptions): Promise<TrainerOutcome> {
  const { pre: p, target, prompts, evaluate } = x;
  const calibration = await calibrateMeasured({ task: x.task, commandHistory: x.o.commandHistory, policy: p.policy, model: p.model, target, prompts, memo: x.calibrationMemo }, calibrationConfig({ ...v.calibrate, task: x.task, seed: x.seed }), x.measure);
  const pg = await ClippedPolicyGradient.create(p.policy, postTrainPg(v.klCoef ?? 0, v.lr));
  const state = await trainStandard({ config: x.loop(v.prompts), policy: p.policy, pg, target, prompts, evaluate });
  await pg.release();
  return { rows: state.rows, groups: v.prompts, corrected: false, calibration };
}
