// What a ROS robot adapter sends and reads, independent of the transport (rosbridge or rclnodejs).
import { fromRosTime, toRosTime } from '../../bridge/ros/msgs.js';
import type { RobotConfig } from '../config.js';

export interface JointStateMsg {
  header: { stamp: { sec: number; nanosec: number } };
  name: string[];
  position: ArrayLike<number>;
  velocity: ArrayLike<number>;
}

export const commandType = (c: RobotConfig): string =>
  c.command.mode === 'forward_command' ? 'std_msgs/msg/Float64MultiArray' : 'trajectory_msgs/msg/JointTrajectory';

/**
 * The command message for one action: a Float64MultiArray (forward_command_controller), or a one-point
 * JointTrajectory as a stock joint_trajectory_controller takes it (bridge/ros/trajectory.ts): stamped zero, so the
 * controller starts it on receipt whatever the skew between the clocks; reached one control period later; positions
 * always filled — the action itself, or for a velocity action the current position moved on by one period. The
 * velocity is not sent: from Jazzy on the controller drops a trajectory that ends at a non-zero velocity.
 * `position`: the robot's latest joint positions in `spec.joints` order (needed for a velocity action).
 */
export function commandMessage(c: RobotConfig, action: Float32Array, position?: ArrayLike<number>): Record<string, unknown> {
  const data = Array.from(action);
  if (c.command.mode === 'forward_command') return { layout: { dim: [], data_offset: 0 }, data };
  const dt = 1 / c.spec.controlHz;
  let positions = data;
  if (c.command.trajectoryField === 'velocities') {
    if (!position) throw new Error(`${c.spec.name}: a velocity command as a joint trajectory needs the robot's current joint positions, and none has arrived yet`);
    positions = c.spec.action.names.map((name, i) => {
      const j = c.spec.joints.indexOf(name);
      if (j < 0) throw new Error(`${c.spec.name}: action ${name} is not one of the robot's joints, so a joint trajectory cannot carry it`);
      return position[j]! + data[i]! * dt;
    });
  }
  return {
    header: { stamp: { sec: 0, nanosec: 0 }, frame_id: '' },
    joint_names: c.spec.action.names,
    points: [{ positions, velocities: [], accelerations: [], effort: [], time_from_start: toRosTime(dt) }],
  };
}

/** Maps JointState messages (any joint order, possibly other joints) onto the spec's joint order. */
export class JointStateReader {
  private order?: { key: string; idx: number[] };
  constructor(private readonly joints: readonly string[]) {}

  /** Null when the message does not carry every joint of the robot. */
  read(m: JointStateMsg): { stamp: number; position: Float64Array; velocity: Float64Array } | null {
    const key = m.name.join('\u0000');
    if (this.order?.key !== key) {
      const idx = this.joints.map((j) => m.name.indexOf(j));
      if (idx.some((i) => i < 0)) return null;
      this.order = { key, idx };
    }
    const { idx } = this.order;
    return {
      stamp: fromRosTime(m.header.stamp),
      position: Float64Array.from(idx, (i) => m.position[i] ?? NaN),
      velocity: Float64Array.from(idx, (i) => m.velocity[i] ?? NaN),
    };
  }
}
