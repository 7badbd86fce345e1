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

/** The command message for one action: a Float64MultiArray, or a one-point JointTrajectory stamped now. */
export function commandMessage(c: RobotConfig, action: Float32Array, nowSeconds = Date.now() / 1000): Record<string, unknown> {
  const data = Array.from(action);
  if (c.command.mode === 'forward_command') return { layout: { dim: [], data_offset: 0 }, data };
  return {
    header: { stamp: toRosTime(nowSeconds), frame_id: '' },
    joint_names: c.spec.action.names,
    points: [{ positions: [], velocities: [], accelerations: [], effort: [], [c.command.trajectoryField]: data, time_from_start: { sec: 0, nanosec: Math.round(1e9 / c.spec.controlHz) } }],
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
