// A ROS 2 robot through native rclnodejs, behind the same Robot interface as RosRobot; used where
// this service runs inside a sourced ROS 2 environment (no rosbridge hop).
import { loadRclnodejs, type RclQos, type Rclnodejs, type RclNode } from '../../bridge/ros2native.js';
import type { RobotConfig } from '../config.js';
import type { Image, RobotObservation, RobotDeclaration } from '../../common/robot.js';
import { checkObservation, layoutOf, type ObservationLayout } from '../../common/layout.js';
import { resetSeed, UnseededResetError, type ResetOptions, type Robot } from '../types.js';
import { cameraType, commandMessage, commandType, imageFromMessage, JointStateReader, TOPIC_QOS, type JointStateMsg } from './ros-messages.js';

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
  private async until(cond: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + this.timeoutMs;
    while (!cond()) {
      if (Date.now() > deadline) throw new Error(`${this.spec.name}: timed out after ${this.timeoutMs} ms: ${what}`);
      await new Promise((r) => setTimeout(r, 2));
    }
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
    const client = this.node.createClient('std_srvs/srv/Trigger', name);
    if (!(await client.waitForService(this.timeoutMs))) throw new Error(`${this.spec.name}: ${what} service ${name} is not available`);
    const res = await new Promise<{ success: boolean; message: string }>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.spec.name}: ${what} service ${name} did not answer in ${this.timeoutMs} ms`)), this.timeoutMs);
      client.sendRequest({}, (r) => {
        clearTimeout(t);
        resolve(r as { success: boolean; message: string });
      });
    });
    if (!res.success) throw new Error(`${this.spec.name}: ${what} failed: ${res.message}`);
  }

  async reset(options?: ResetOptions): Promise<RobotObservation> {
    const seed = resetSeed(this.spec.name, options);
    if (seed !== undefined) {
      if (!this.config.services.resetSeed) throw new UnseededResetError(this.spec.name, 'its robot config declares no services.reset_seed_topic');
      this.seedPub ??= this.node.createPublisher('std_msgs/msg/UInt32', this.config.services.resetSeed);
      this.seedPub.publish({ data: seed });
    }
    const before = this.joint?.stamp ?? -Infinity;
    const featuresBefore = this.featureSeq;
    await this.trigger(this.config.services.reset, 'reset');
    // Wait for the new episode's first joint state (and features, on their own topic), as RosRobot does.
    const fresh = () => (this.joint?.stamp ?? -Infinity) > before && (!this.config.featuresTopic || this.featureSeq > featuresBefore);
    await this.until(fresh, `joint state${this.config.featuresTopic ? ' and features' : ''} after reset`);
    return this.observe();
  }

  async estop(): Promise<void> {
    await this.trigger(this.config.services.estop, 'e-stop');
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.node.destroy();
    this.rcl.shutdown();
  }
}
