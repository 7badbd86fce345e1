// The Episode record (DESIGN.md §4) every real execution produces: ordered steps plus metadata.
// The store, the MCAP format and the MQTT upload all read and write it.
import type { RobotObservation } from '../common/robot.js';

export type EpisodeStatus = 'recording' | 'complete' | 'partial';

export interface EpisodeMeta {
  id: string;
  robot: string;
  policyVersion: string;
  hardwareProfile: string;
  task?: string;
  instruction?: string;
  /** Wall-clock start, ms since the Unix epoch. */
  startedAt: number;
  extra?: Record<string, unknown>;
}

export interface EpisodeStep {
  /** 0, 1, 2, … within the episode: the (episode, seq) pair identifies a step exactly once. */
  seq: number;
  /** Robot clock of the observation and of the action, seconds. */
  tObs: number;
  tAct: number;
  obs: RobotObservation;
  action: Float32Array;
  reward: number;
  done: boolean;
  /** Sparse success, known at the episode's last step. */
  success?: boolean;
}

export interface Episode {
  meta: EpisodeMeta;
  status: EpisodeStatus;
  steps: EpisodeStep[];
}
