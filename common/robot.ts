// The data a robot exchanges with every layer: what it declares about itself, what it observes,
// its images. Types only, importing nothing: transports (bridge/), the episode record (episodes/),
// policies and the Robot contract (hardware/types.ts) all speak in them. The observation vector a
// declaration implies is defined in layout.ts (layoutOf).
import type { JointUnit } from './layout.js';

/** What a robot declares about itself (its `spec`): joints, limits, action, control rate; policies and the safety layer are configured from it. */
export interface RobotDeclaration {
  name: string;
  /** Joint names, in the order of every per-joint array below and of observations. */
  joints: string[];
  /** Unit of each joint's position, in `joints` order: 'rad' (revolute) or 'm' (prismatic); all 'rad' when absent. */
  jointUnits?: JointUnit[];
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
  /** Unit of each feature, in `features` order ('m', 'm/s', '1' for dimensionless); all '1' when absent. */
  featureUnits?: string[];
  /** The features (by name) that measure the world rather than the robot: a target, an object, a goal (layout.ts LayoutFeature.scene). */
  sceneFeatures?: string[];
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
