// The rules by which a stock ros2_controllers joint_trajectory_controller (Humble to Kilted, default parameters)
// accepts a trajectory_msgs/JointTrajectory on its topic, as one function: the stand-in robot applies them and the
// conformance tests hold the project's own command messages to them. What they mean for a streamed command: a zero
// header stamp starts the trajectory when the controller receives it (no clock is shared, so no skew can make it
// late); a non-zero stamp is on the controller's clock, and a trajectory that ends before its "now" is dropped.
import { fromRosTime } from './msgs.js';

export interface TrajectoryPointMsg {
  positions?: ArrayLike<number>;
  velocities?: ArrayLike<number>;
  accelerations?: ArrayLike<number>;
  effort?: ArrayLike<number>;
  time_from_start?: { sec: number; nanosec: number };
}

export interface JointTrajectoryMsg {
  header?: { stamp?: { sec: number; nanosec: number } };
  joint_names?: string[];
  points?: TrajectoryPointMsg[];
}

export interface ControllerView {
  /** The controller's joints (`joints` parameter). */
  joints: readonly string[];
  /** The controller's clock, seconds. */
  now: number;
  /** `allow_nonzero_velocity_at_trajectory_end`: false by default from Jazzy on. */
  allowNonzeroVelocityAtEnd?: boolean;
  /** `allow_partial_joints_goal`: false by default. */
  allowPartialJoints?: boolean;
}

const seconds = (d: { sec: number; nanosec: number } | undefined) => (d ? d.sec + d.nanosec / 1e9 : 0);

/** Why the controller would drop `msg`, or null if it accepts it. */
export function trajectoryRefusal(msg: JointTrajectoryMsg, c: ControllerView): string | null {
  const names = msg.joint_names ?? [];
  const points = msg.points ?? [];
  if (points.length === 0) return 'empty trajectory (no points)';
  if (names.length === 0) return 'no joint names';
  if (new Set(names).size !== names.length) return 'duplicate joint names';
  const unknown = names.find((n) => !c.joints.includes(n));
  if (unknown !== undefined) return `joint ${unknown} is not one of the controller's joints`;
  if (!c.allowPartialJoints && names.length !== c.joints.length) return `the trajectory names ${names.length} of the controller's ${c.joints.length} joints (allow_partial_joints_goal is false)`;
  const n = names.length;
  let previous = -Infinity;
  for (const [i, p] of points.entries()) {
    const t = seconds(p.time_from_start);
    if (!(t > previous)) return `point ${i}: time_from_start is not strictly increasing`;
    previous = t;
    // Positions are required; the other fields are either empty or one value per joint.
    const fields: Array<[string, ArrayLike<number> | undefined, boolean]> = [['positions', p.positions, false], ['velocities', p.velocities, true], ['accelerations', p.accelerations, true], ['effort', p.effort, true]];
    for (const [field, v, mayBeEmpty] of fields) {
      const len = v?.length ?? 0;
      if (len === 0 && mayBeEmpty) continue;
      if (len !== n) return `point ${i}: ${field} has ${len} values for ${n} joints`;
      for (let j = 0; j < len; j++) if (!Number.isFinite(v![j]!)) return `point ${i}: ${field}[${j}] is not finite`;
    }
  }
  const last = points[points.length - 1]!;
  if (!c.allowNonzeroVelocityAtEnd && Array.from(last.velocities ?? []).some((v) => Math.abs(v) > 1.1920929e-7)) return 'the last point\'s velocity is not zero (allow_nonzero_velocity_at_trajectory_end is false)';
  const start = fromRosTime(msg.header?.stamp ?? { sec: 0, nanosec: 0 });
  if (start !== 0 && start + seconds(last.time_from_start) < c.now) return `the trajectory ends in the past (start ${start.toFixed(3)} s + ${seconds(last.time_from_start).toFixed(3)} s before now ${c.now.toFixed(3)} s)`;
  return null;
}
