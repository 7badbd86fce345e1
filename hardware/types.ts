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

/** A seeded reset asked of a robot that has no way to reproduce a start state from a seed. */
export class UnseededResetError extends Error {
  constructor(robot: string, how: string) {
    super(`${robot}: cannot reset to a seeded start state: ${how}`);
    this.name = 'UnseededResetError';
  }
}

/** The seed of `options`, checked: undefined, or an integer in [0, 2^32). */
export function resetSeed(robot: string, options: ResetOptions | undefined): number | undefined {
  const seed = options?.seed;
  if (seed === undefined) return undefined;
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new RangeError(`${robot}: reset seed must be an integer in [0, 2^32), got ${seed}`);
  return seed;
}
