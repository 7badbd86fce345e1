// The Robot contract (DESIGN.md §4). A sim robot, a ROS robot and an MQTT robot implement it;
// the safety layer wraps every one.
import type { RobotObservation, RobotDeclaration } from '../common/robot.js';

export interface ResetOptions {
  /**
   * Reproduce the start state this seed selects (an integer in [0, 2^32)). A GRPO prompt is an
   * instruction plus a start state the robot's reset reproduces. A robot that cannot honour a seed
   * rejects with UnseededResetError; the trainer then records the observed start state instead.
   */
  seed?: number;
}

export interface Robot extends AsyncDisposable {
  readonly spec: RobotDeclaration;
  /** The latest observation (never older than one control period on a healthy connection). */
  observe(): Promise<RobotObservation>;
  /** Sends one command; returns the action actually sent, after any clipping on the way. */
  act(action: Float32Array): Promise<Float32Array>;
  /** Brings the robot to its start state (the one `options.seed` selects, when given) and returns the first observation. */
  reset(options?: ResetOptions): Promise<RobotObservation>;
  /** Stops the robot now. */
  estop(): Promise<void>;
}
