// The Robot contract (DESIGN.md §4) and the Episode record every real execution produces.
// A sim robot, a ROS robot and an MQTT robot implement Robot; the safety layer wraps every one.

/** What a robot declares about itself; policies and the safety layer are configured from it. */
export interface RobotSpec {
  name: string;
  /** Joint names, in the order of every per-joint array below and of observations. */
  joints: string[];
  /** [lower, upper] joint position limits (rad or m); ±Infinity when unlimited. */
  positionLimits: Array<[number, number]>;
  /** Maximum |joint velocity| (rad/s or m/s). */
  velocityLimits: number[];
  /** The command a policy sends each control step. */
  action: ActionSpec;
  /** Nominal control rate, Hz. */
  controlHz: number;
  /** Extra observation features the robot provides beyond joint states (e.g. task state from perception). */
  features?: string[];
  camera?: { width: number; height: number; encoding: ImageEncoding };
}

export interface ActionSpec {
  /**
   * joint_position: absolute targets (rad); joint_velocity: rad/s; normalized: [-1, 1] scaled by the
   * robot's own controller (the sim's actuator range).
   */
  kind: 'joint_position' | 'joint_velocity' | 'normalized';
  names: string[];
  low: number[];
  high: number[];
}

export type ImageEncoding = 'rgb8' | 'jpeg' | 'png';

export interface Image {
  width: number;
  height: number;
  encoding: ImageEncoding;
  data: Uint8Array;
}

export interface RobotObservation {
  /** Robot clock at which the state was measured, seconds. */
  stamp: number;
  /** Joint positions and velocities in `spec.joints` order. */
  position: Float64Array;
  velocity: Float64Array;
  /** Values for `spec.features`, when the robot declares any. */
  features?: Float32Array;
  image?: Image;
  /** The task instruction in words, when the robot (or its operator) gives one. */
  instruction?: string;
}

export interface Robot extends AsyncDisposable {
  readonly spec: RobotSpec;
  /** The latest observation (never older than one control period on a healthy connection). */
  observe(): Promise<RobotObservation>;
  /** Sends one command; returns the action actually sent, after any clipping on the way. */
  act(action: Float32Array): Promise<Float32Array>;
  /** Brings the robot to its start state and returns the first observation. */
  reset(): Promise<RobotObservation>;
  /** Stops the robot now. */
  estop(): Promise<void>;
}

// ---------------------------------------------------------------- episodes

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
