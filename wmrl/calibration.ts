// What a calibration (wmrl/calibrate.ts) found and did, as a type of its own: a report or a benchmark cell that keeps
// one depends on this shape, not on calibration's code.
import type { CONTEXT_PARAMS, HardwareProfile } from '../sim/profiles.js';

export interface Calibration {
  /** What the robot's episodes said: its actuation delay (control steps) and its context scales (1: the sim's). */
  delay: number;
  scales: Partial<Record<(typeof CONTEXT_PARAMS)[number], number>>;
  /** The sim profile the clone learned again on. */
  profile: HardwareProfile;
  /** Robot episodes spent (recorded in the target's store, charged to its clock). */
  robotEpisodes: number;
  /** The demonstrator's success on the identified sim's first demonstrations, and the clone's final loss. */
  demoSuccess: number;
  cloneLoss: number;
  /** The clone's success in the identified sim after each cloning round (0: the demonstrations, then DAgger's), and the round kept. */
  roundSuccess: number[];
  round: number;
}

/** A run's calibration and what it did to the clone's measured success; `kept`: false where the clone measured better before and was put back. */
export type CalibrationReport = Omit<Calibration, 'profile'> & { before: number | null; after: number | null; kept: boolean };

/** What a calibration computed after its robot episodes (the calibration, the clone's parameters, the model's context), by calibrate.ts's key of what it started from. */
export type CalibrationMemo = Map<string, { calibration: Calibration; policy: Float32Array[]; context: Float32Array }>;
