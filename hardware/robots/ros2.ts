// A ROS 2 robot through native rclnodejs, behind the same Robot interface as RosRobot; used where
// this service runs inside a sourced ROS 2 environment (no rosbridge hop).
import { loadRclnodejs, type RclQos, type Rclnodejs, type RclNode } from '../../bridge/ros2native.js';
import type { RobotConfig } from '../config.js';
import type { Image, RobotObservation, RobotDeclaration } from '../../common/robot.js';
import { checkObservation, layoutOf, type ObservationLayout } from '../../common/layout.js';
import { resetSeed, UnseededResetError, type ResetOptions, type Robot } from '../types.js';
import { cameraType, commandMessage, commandType, imageFromMessage, JointStateReader, TOPIC_QOS, type JointStateMsg } from './ros-messages.js';
import { FOLLOW_JOINT_TRAJECTORY, JOINT_TRAJECTORY, RosControl, SWITCH_CONTROLLER, type ControllerLink, type FollowJointTrajectoryResult, type SwitchControllerResponse } from './ros-control.js';

/** What a service call or an outcome waits for before it fails, ms. */
const TIMEOUT_MS = 5000;

const qos = (kind: keyof typeof TOPIC_QOS): { qos: RclQos } => ({ qos: TOPIC_QOS[kind] === 'sensor_data' ? 'qos_profile_sensor_data' : 'qos_profile_default' });

export class Ros2Robot implements Robot {
  readonly spec: RobotDeclaration;
  private joint?: { stamp: number; position: Float64Array; velocity: Float64Array };
  private features?: Float32Array;
  private featureSeq = 0;
  private instruction?: string;
  private image?: Image;
  private imageError?: Error;
  private outcome: { reward: number; success: boolean; done: boolean } | null = null;
  private outcomeSeq = 0;
  private outcomeAtCommand = 0;
  private readonly reader: JointStateReader;
  readonly layout: ObservationLayout;
  private readonly pub: { publish(msg: unknown): void };
  private seedPub?: { publish(msg: unknown): void };
  private readonly publishers = new Map<string, { publish(msg: unknown): void }>();
  /** Reset through the home pose and e-stop through the controller manager, where the robot YAML declares them. */
  private readonly control?: RosControl;

  private constructor(readonly config: RobotConfig, private readonly rcl: Rclnodejs, private readonly node: RclNode, private readonly timeoutMs: number) {
    this.spec = config.spec;
    this.layout = layoutOf(config.spec);
    this.reader = new JointStateReader(config.spec.joints);
    this.pub = node.createPublisher(commandType(config), config.command.topic);
    node.createSubscription('sensor_msgs/msg/JointState', config.stateTopic, qos('state'), (m) => {
      this.joint = this.reader.read(m as JointStateMsg) ?? this.joint;
    });
    if (config.featuresTopic) node.createSubscription('std_msgs/msg/Float32MultiArray', config.featuresTopic, qos('features'), (m) => {
        this.features = Float32Array.from((m as { data: ArrayLike<number> }).data);
        this.featureSeq++;
      });
    if (config.instructionTopic) node.createSubscription('std_msgs/msg/String', config.instructionTopic, qos('instruction'), (m) => (this.instruction = (m as { data: string }).data));
    if (config.outcomeTopic) node.createSubscription('std_msgs/msg/Float64MultiArray', config.outcomeTopic, qos('outcome'), (m) => {
        const [, reward, success, terminated, truncated] = Array.from((m as { data: ArrayLike<number> }).data);
        this.outcome = { reward: reward ?? NaN, success: success === 1, done: terminated === 1 || truncated === 1 };
        this.outcomeSeq++;
      });
    if (config.cameraTopic && config.spec.camera) {
      const type = cameraType(config.spec.camera.encoding), topic = config.cameraTopic;
      node.createSubscription(type, topic, qos('camera'), (m) => {
        try {
          this.image = imageFromMessage(type, m as Record<string, unknown>, `${this.spec.name} camera ${topic}`);
          this.imageError = undefined;
        } catch (e) {
          this.image = undefined;
          this.imageError = e as Error;
        }
      });
    }
    if (config.home || config.controllerManager) this.control = new RosControl(config, rclControlLink(rcl, node, config, () => this.joint?.position, (cond, ms, what) => this.until(cond, what, ms), this.publishers));
    rcl.spin(node);
  }

  /** `importer` replaces `import('rclnodejs')` (tests; a vendored build). */
  static async connect(config: RobotConfig, env: NodeJS.ProcessEnv = process.env, importer?: () => Promise<unknown>, opts: { timeoutMs?: number } = {}): Promise<Ros2Robot> {
    const rcl = await loadRclnodejs(env, importer);
    await rcl.init();
    return new Ros2Robot(config, rcl, rcl.createNode(`wmrl_${config.spec.name.replace(/\W/g, '_')}`), opts.timeoutMs ?? TIMEOUT_MS);
  }

  async observe(): Promise<RobotObservation> {
    if (!this.joint) throw new Error(`${this.spec.name}: no joint state received yet on ${this.config.stateTopic}`);
    if (!this.image && this.imageError) throw this.imageError;
    const o = {
      ...this.joint,
      ...(this.features ? { features: this.features } : {}),
      ...(this.image ? { image: this.image } : {}),
      ...(this.instruction !== undefined ? { instruction: this.instruction } : {}),
    };
    checkObservation(this.layout, o, this.spec.name);
    return o;
  }

  async act(action: Float32Array): Promise<Float32Array> {
    this.outcomeAtCommand = this.outcomeSeq;
    this.pub.publish(commandMessage(this.config, action, this.joint?.position));
    return action;
  }

  /** Resolves when `cond` holds, polled; fails after the timeout naming `what`. */
  private until(cond: () => boolean, what: string, timeoutMs = this.timeoutMs): Promise<void> {
    return pollUntil(cond, timeoutMs, `${this.spec.name}: timed out after ${timeoutMs} ms: ${what}`);
  }

  /** The robot's outcome of the first control step it reports after the last command (as RosRobot's). */
  async outcomeOfLastCommand(): Promise<{ reward: number; success: boolean; done: boolean }> {
    if (!this.config.outcomeTopic) throw new Error(`${this.spec.name}: its robot config declares no outcome_topic, so it reports no reward or success`);
    const since = this.outcomeAtCommand;
    await this.until(() => this.outcomeSeq > since, `an outcome on ${this.config.outcomeTopic} after the last command`);
    const o = this.outcome!;
    if (!Number.isFinite(o.reward)) throw new Error(`${this.spec.name}: outcome message on ${this.config.outcomeTopic} has no finite reward`);
    return o;
  }

  private async trigger(name: string | undefined, what: string): Promise<void> {
    if (!name) throw new Error(`${this.spec.name}: no ${what} service configured`);
    const res = await callService<{ success: boolean; message: string }>(this.node, 'std_srvs/srv/Trigger', name, {}, this.timeoutMs, `${this.spec.name}: ${what} service`);
    if (!res.success) throw new Error(`${this.spec.name}: ${what} failed: ${res.message}`);
  }

  async reset(options?: ResetOptions): Promise<RobotObservation> {
    const seed = resetSeed(this.spec.name, options);
    if (!this.config.services.reset && this.control && this.config.home) {
      if (seed !== undefined) throw new UnseededResetError(this.spec.name, 'its reset is the move to its home pose, which is the same whatever the seed');
      await this.control.home();
      return this.freshObservation(this.joint?.stamp ?? -Infinity, this.featureSeq, 'after the move home');
    }
    if (seed !== undefined) {
      if (!this.config.services.resetSeed) throw new UnseededResetError(this.spec.name, 'its robot config declares no services.reset_seed_topic');
      this.seedPub ??= this.node.createPublisher('std_msgs/msg/UInt32', this.config.services.resetSeed);
      this.seedPub.publish({ data: seed });
    }
    const before = this.joint?.stamp ?? -Infinity;
    const featuresBefore = this.featureSeq;
    await this.trigger(this.config.services.reset, 'reset');
    return this.freshObservation(before, featuresBefore, 'after reset');
  }

  /** The new episode's first joint state (and features, on their own topic), as RosRobot waits for it. */
  private async freshObservation(before: number, featuresBefore: number, what: string): Promise<RobotObservation> {
    const fresh = () => (this.joint?.stamp ?? -Infinity) > before && (!this.config.featuresTopic || this.featureSeq > featuresBefore);
    await this.until(fresh, `joint state${this.config.featuresTopic ? ' and features' : ''} ${what}`);
    return this.observe();
  }

  /** The e-stop service where the robot YAML names one, else the controller manager (command controllers off). */
  async estop(): Promise<void> {
    if (!this.config.services.estop && this.control && this.config.controllerManager) return this.control.estop();
    await this.trigger(this.config.services.estop, 'e-stop');
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.node.destroy();
    this.rcl.shutdown();
  }
}

/** Polls `cond` every 2 ms until it holds; rejects with `message` after `timeoutMs`. */
export async function pollUntil(cond: () => boolean, timeoutMs: number, message: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(message);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Calls a service once it is there; `who` starts each error (`robot: reset service`). */
export async function callService<Res>(node: RclNode, type: string, name: string, req: unknown, timeoutMs: number, who: string): Promise<Res> {
  const client = node.createClient(type, name);
  if (!(await client.waitForService(timeoutMs))) throw new Error(`${who} ${name} is not available`);
  return new Promise<Res>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${who} ${name} did not answer in ${timeoutMs} ms`)), timeoutMs);
    client.sendRequest(req, (r) => {
      clearTimeout(t);
      resolve(r as Res);
    });
  });
}

/**
 * The controller's topic, action and controller manager over rclnodejs (hardware/robots/ros-control.ts); shared by
 * Ros2Robot and the robot-side services node. `publishers` caches one publisher per topic.
 */
export function rclControlLink(
  rcl: Rclnodejs,
  node: RclNode,
  config: RobotConfig,
  positions: () => ArrayLike<number> | undefined,
  until: (cond: () => boolean, timeoutMs: number, what: string) => Promise<void>,
  publishers = new Map<string, { publish(msg: unknown): void }>(),
  timeoutMs = TIMEOUT_MS,
): ControllerLink {
  const who = config.spec.name;
  return {
    publishTrajectory: (topic, msg) => {
      let pub = publishers.get(topic);
      if (!pub) publishers.set(topic, (pub = node.createPublisher(JOINT_TRAJECTORY, topic)));
      pub.publish(msg);
    },
    followTrajectory: async (name, goal, ms) => {
      const client = new rcl.ActionClient(node, FOLLOW_JOINT_TRAJECTORY, name);
      try {
        if (!(await client.waitForServer(timeoutMs))) throw new Error(`${who}: action ${name} is not available`);
        const handle = await client.sendGoal(goal);
        if (!handle.isAccepted()) throw new Error(`${who}: ${name} rejected the home trajectory goal`);
        let timer: NodeJS.Timeout | undefined;
        const result = await Promise.race([
          handle.getResult(),
          new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${who}: ${name} gave no result in ${ms} ms`)), ms))),
        ]).finally(() => clearTimeout(timer));
        const r = (result ?? {}) as FollowJointTrajectoryResult;
        // A goal that ends other than succeeded still reports why in its error code, when it has one.
        if (!handle.isSucceeded() && !(typeof r.error_code === 'number' && r.error_code !== 0)) throw new Error(`${who}: ${name} ended the home trajectory goal with status ${handle.status}`);
        return r;
      } finally {
        client.destroy();
      }
    },
    switchControllers: (name, req) => callService<SwitchControllerResponse>(node, SWITCH_CONTROLLER, name, req, timeoutMs, `${who}: controller manager service`),
    positions,
    until,
  };
}
