// The Robot contract (DESIGN.md §4). A sim robot, a ROS robot and an MQTT robot implement it;
// the safety layer wraps every one.
import type { RobotObservation, RobotDeclaration } from '../common/robot.js';

export interface Robot extends AsyncDisposable {
  readonly spec: RobotDeclaration;
  /** The latest observation (never older than one control period on a healthy connection). */
  observe(): Promise<RobotObservation>;
  /** Sends one command; returns the action actually sent, after any clipping on the way. */
  act(action: Float32Array): Promise<Float32Array>;
  /** Brings the robot to its start state and returns the first observation. */
  reset(): Promise<RobotObservation>;
  /** Stops the robot now. */
  estop(): Promise<void>;
}
