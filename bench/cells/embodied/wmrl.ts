// WMRL and its ablations (wmrl/train_wmrl.ts), as variants of `bench embodied`: groups imagined in the pretrained world
// model, anchor groups on the robot correcting their scores through the Corrector (or none: the pure world model). This
// module and what it imports are the variants' own code in their computation keys.
import { ClippedPolicyGradient } from '../../../policies/pg.js';
import { calibrateMeasured, calibrationConfig } from '../../../wmrl/calibrate.js';
import { IdentifiedSim } from '../../../wmrl/identified-sim.js';
import type { CorrectorConfig } from '../../../wmrl/corrector.js';
import { postTrainPg } from '../../../wmrl/sim-setup.js';
import { DEFAULT_WMRL, trainWmrl } from '../../../wmrl/train_wmrl.js';
import type { TrainerInputs, TrainerOutcome } from './setup.js';

export interface WmrlOptions {
  /** Groups imagined per update. */
  prompts: number;
  /** The Corrector; false: the pure world model. */
  corrector: CorrectorConfig | false;
  /** Calibrate the clone first (wmrl/calibrate.ts) from this many robot episodes, at a full or a smoke run's sizes; absent: none. */
  calibrate?: { episodes: number; quick: boolean };
  /** β of GRPO's KL penalty to the policy post-training starts from (wmrl/sim-setup.ts postTrainPg); absent: none. */
  klCoef?: number;
  /** The policy's Adam step; absent: POST_TRAIN_PG's. */
  lr?: number;
  /** Where the groups are imagined: the pretrained world model (default), or the sim the calibration identified (needs `calibrate`). */
  imagine?: 'model' | 'identified-sim';
}

export async function train(x: TrainerInputs, v: WmrlOptions): Promise<TrainerOutcome> {
  const { pre: p, target, prompts, evaluate } = x;
  const calibration = v.calibrate ? await calibrateMeasured({ task: x.task, commandHistory: x.o.commandHistory, policy: p.policy, model: p.model, target, prompts, memo: x.calibrationMemo }, calibrationConfig({ ...v.calibrate, task: x.task, seed: x.seed }), x.measure) : undefined;
  if (v.imagine === 'identified-sim' && !calibration) throw new Error('bench embodied: imagining in the identified sim needs a calibration');
  using sim = calibration && v.imagine === 'identified-sim'
    ? await IdentifiedSim.fromCalibration(x.task, calibration, { commandHistory: x.o.commandHistory })
    : null;
  const pg = await ClippedPolicyGradient.create(p.policy, postTrainPg(v.klCoef ?? 0, v.lr));
  // The alarm's warnings are counted from the rows (hackingAlarm), not printed over the progress bar.
  // A cell reads nothing of the world model after the run: no refit at the last update.
  const state = await trainWmrl({ config: { ...DEFAULT_WMRL, ...x.loop(v.prompts), corrector: v.corrector, horizon: target.maxSteps, refitAtEnd: false }, policy: p.policy, pg, model: p.model, simData: p.simData, target, prompts, evaluate, warn: () => {}, ...(sim ? { sim } : {}) });
  await pg.release();
  return { rows: state.rows, groups: v.prompts, corrected: v.corrector !== false, ...(calibration ? { calibration } : {}) };
}
