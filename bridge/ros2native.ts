// Native ROS 2 through rclnodejs, an optional dependency. Importing rclnodejs without a built
// native addon starts a rebuild against a ROS installation, so it is imported only after the
// environment shows a sourced ROS 2 (ROS_DISTRO and AMENT_PREFIX_PATH).

export class Ros2UnavailableError extends Error {
  constructor(reason: string) {
    super(`native ROS 2 is unavailable: ${reason}. Use transport: rosbridge (rosbridge_server) instead, or source your ROS 2 setup (e.g. source /opt/ros/jazzy/setup.bash) and install rclnodejs.`);
    this.name = 'Ros2UnavailableError';
  }
}

export type Ros2Status = { available: true; distro: string } | { available: false; reason: string };

export function ros2Status(env: NodeJS.ProcessEnv = process.env): Ros2Status {
  if (!env.ROS_DISTRO) return { available: false, reason: 'ROS_DISTRO is not set (no ROS 2 setup has been sourced)' };
  if (!env.AMENT_PREFIX_PATH) return { available: false, reason: `ROS_DISTRO=${env.ROS_DISTRO} but AMENT_PREFIX_PATH is empty (the setup was not sourced completely)` };
  return { available: true, distro: env.ROS_DISTRO };
}

/** The subset of rclnodejs this project calls. */
export interface Rclnodejs {
  init(): Promise<void>;
  createNode(name: string): RclNode;
  spin(node: RclNode): void;
  shutdown(): void;
  /** `new rclnodejs.ActionClient(node, type, name)`. */
  ActionClient: new (node: RclNode, type: string, name: string) => RclActionClient;
}
export interface RclActionClient {
  waitForServer(timeoutMs: number): Promise<boolean>;
  sendGoal(goal: unknown): Promise<RclGoalHandle>;
  destroy(): void;
}
export interface RclGoalHandle {
  isAccepted(): boolean;
  getResult(): Promise<unknown>;
  isSucceeded(): boolean;
  readonly status: number;
}
/** What a service callback answers through (rclnodejs's Response). */
export interface RclServiceResponse {
  send(response: unknown): void;
}
/** rclnodejs's QoS profile names; `qos_profile_sensor_data` is best-effort with a short history. */
export type RclQos = 'qos_profile_sensor_data' | 'qos_profile_default' | 'qos_profile_system_default';
export interface RclNode {
  createPublisher(type: string, topic: string, options?: { qos?: RclQos }): { publish(msg: unknown): void };
  createSubscription(type: string, topic: string, options: { qos?: RclQos }, cb: (msg: unknown) => void): unknown;
  createClient(type: string, service: string): { waitForService(timeoutMs: number): Promise<boolean>; sendRequest(req: unknown, cb: (res: unknown) => void): void };
  createService(type: string, service: string, options: { qos?: RclQos }, cb: (req: unknown, response: RclServiceResponse) => void): unknown;
  destroy(): void;
}

/**
 * Loads rclnodejs when ROS 2 is sourced; otherwise throws Ros2UnavailableError without importing it.
 * `importer` is replaceable for tests.
 */
export async function loadRclnodejs(env: NodeJS.ProcessEnv = process.env, importer: () => Promise<unknown> = () => import('rclnodejs' as string)): Promise<Rclnodejs> {
  const s = ros2Status(env);
  if (!s.available) throw new Ros2UnavailableError(s.reason);
  let mod: unknown;
  try {
    mod = await importer();
  } catch (e) {
    throw new Ros2UnavailableError(`ROS 2 ${s.distro} is sourced but rclnodejs could not be loaded (${(e as Error).message.split('\n')[0]}); run npm install rclnodejs in this environment`);
  }
  const m = ((mod as { default?: unknown }).default ?? mod) as Rclnodejs;
  if (typeof m.init !== 'function' || typeof m.createNode !== 'function') throw new Ros2UnavailableError('the rclnodejs module does not look like rclnodejs');
  return m;
}
