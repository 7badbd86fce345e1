// What a ROS robot adapter sends and reads, independent of the transport (rosbridge or rclnodejs).
import { fromRosTime, toRosTime } from '../../bridge/ros/msgs.js';
import type { RobotConfig } from '../config.js';
import { compressedSize } from '../../common/image.js';
import type { Image } from '../../common/robot.js';

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

/**
 * The QoS each topic is read with (native ROS 2; rosbridge_server matches its publishers' itself): sensor streams
 * best-effort with a short history, as camera and state drivers publish them (a best-effort reader also takes a
 * reliable publisher's messages, the reverse is incompatible); the outcome and instruction reliable, since a lost
 * success would end an episode wrongly.
 */
export const TOPIC_QOS = { state: 'sensor_data', features: 'sensor_data', camera: 'sensor_data', outcome: 'reliable', instruction: 'reliable' } as const;

/** A camera declared rgb8 streams sensor_msgs/Image; png or jpeg, sensor_msgs/CompressedImage. */
export const cameraType = (encoding: Image['encoding']): string => (encoding === 'rgb8' ? 'sensor_msgs/msg/Image' : 'sensor_msgs/msg/CompressedImage');

const bytesOf = (data: string | ArrayLike<number>): Uint8Array =>
  typeof data === 'string' ? new Uint8Array(Buffer.from(data, 'base64')) : data instanceof Uint8Array ? data : Uint8Array.from(data);

/**
 * A camera message as a frame at the size the camera really sent (policies resize it, common/image.ts): a
 * CompressedImage's PNG or JPEG as it is, told apart by its bytes; a raw Image in rgb8, bgr8, rgba8, bgra8 or mono8
 * as rgb8, its row padding (`step`) dropped. Anything else is an error naming what arrived.
 */
export function imageFromMessage(type: string, m: Record<string, unknown>, who: string): Image {
  if (type === 'sensor_msgs/msg/CompressedImage') {
    const data = bytesOf(m.data as string | ArrayLike<number>);
    const size = compressedSize(data);
    if (!size) throw new Error(`${who}: a CompressedImage (format '${String(m.format)}') that is neither PNG nor JPEG`);
    return { ...size, data };
  }
  const width = Number(m.width), height = Number(m.height), encoding = String(m.encoding), step = Number(m.step);
  const channels = ({ rgb8: 3, bgr8: 3, rgba8: 4, bgra8: 4, mono8: 1 } as Record<string, number>)[encoding];
  if (channels === undefined) throw new Error(`${who}: Image encoding '${encoding}' (this reads rgb8, bgr8, rgba8, bgra8, mono8)`);
  const data = bytesOf(m.data as string | ArrayLike<number>);
  if (!(width > 0 && height > 0 && step >= width * channels && data.length >= step * height)) throw new Error(`${who}: a ${width}x${height} ${encoding} Image with step ${step} and ${data.length} bytes`);
  const rgb = new Uint8Array(width * height * 3);
  const [r, g, b] = encoding.startsWith('bgr') ? [2, 1, 0] : channels === 1 ? [0, 0, 0] : [0, 1, 2];
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * step + x * channels, o = (y * width + x) * 3;
      rgb[o] = data[i + r]!;
      rgb[o + 1] = data[i + g]!;
      rgb[o + 2] = data[i + b]!;
    }
  }
  return { width, height, encoding: 'rgb8', data: rgb };
}
