// A ROS 2 robot through native rclnodejs, behind the same Robot interface as RosRobot; used where
// this service runs inside a sourced ROS 2 environment (no rosbridge hop).
import { loadRclnodejs, type Rclnodejs, type RclNode } from '../../bridge/ros2native.js';
import type { RobotConfig } from '../config.js';
import type { RobotObservation, RobotDeclaration } from '../../common/robot.js';
import { checkObservation, layoutOf, type ObservationLayout } from '../../common/layout.js';
import { resetSeed, UnseededResetError, type ResetOptions, type Robot } from '../types.js';
import { commandMessage, commandType, JointStateReader, type JointStateMsg } from './ros-messages.js';

export class Ros2Robot implements Robot {
  readonly spec: RobotDeclaration;
  private joint?: { stamp: number; position: Float64Array; velocity: Float64Array };
  private features?: Float32Array;
  private featureSeq = 0;
  private instruction?: string;
  private readonly reader: JointStateReader;
  readonly layout: ObservationLayout;
  private readonly pub: { publish(msg: unknown): void };
  private seedPub?: { publish(msg: unknown): void };

  private constructor(readonly config: RobotConfig, private readonly rcl: Rclnodejs, private readonly node: RclNode) {
    this.spec = config.spec;
    this.layout = layoutOf(config.spec);
    this.reader = new JointStateReader(config.spec.joints);
    this.pub = node.createPublisher(commandType(config), config.command.topic);
    node.createSubscription('sensor_msgs/msg/JointState', config.stateTopic, (m) => {
      this.joint = this.reader.read(m as JointStateMsg) ?? this.joint;
    });
    if (config.featuresTopic) node.createSubscription('std_msgs/msg/Float32MultiArray', config.featuresTopic, (m) => {
        this.features = Float32Array.from((m as { data: ArrayLike<number> }).data);
        this.featureSeq++;
      });
    if (config.instructionTopic) node.createSubscription('std_msgs/msg/String', config.instructionTopic, (m) => (this.instruction = (m as { data: string }).data));
    rcl.spin(node);
  }

  /** `importer` replaces `import('rclnodejs')` (tests; a vendored build). */
  static async connect(config: RobotConfig, env: NodeJS.ProcessEnv = process.env, importer?: () => Promise<unknown>): Promise<Ros2Robot> {
    const rcl = await loadRclnodejs(env, importer);
    await rcl.init();
    return new Ros2Robot(config, rcl, rcl.createNode(`wmrl_${config.spec.name.replace(/\W/g, '_')}`));
  }

  async observe(): Promise<RobotObservation> {
    if (!this.joint) throw new Error(`${this.spec.name}: no joint state received yet on ${this.config.stateTopic}`);
    const o = { ...this.joint, ...(this.features ? { features: this.features } : {}), ...(this.instruction !== undefined ? { instruction: this.instruction } : {}) };
    checkObservation(this.layout, o, this.spec.name);
    return o;
  }

  async act(action: Float32Array): Promise<Float32Array> {
    this.pub.publish(commandMessage(this.config, action, this.joint?.position));
    return action;
  }

  private async trigger(name: string | undefined, what: string): Promise<void> {
    if (!name) throw new Error(`${this.spec.name}: no ${what} service configured`);
    const client = this.node.createClient('std_srvs/srv/Trigger', name);
    if (!(await client.waitForService(5000))) throw new Error(`${this.spec.name}: ${what} service ${name} is not available`);
    const res = await new Promise<{ success: boolean; message: string }>((resolve) => client.sendRequest({}, (r) => resolve(r as { success: boolean; message: string })));
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
    const deadline = Date.now() + 5000;
    while (!fresh()) {
      if (Date.now() > deadline) throw new Error(`${this.spec.name}: timed out after 5000 ms: joint state${this.config.featuresTopic ? ' and features' : ''} after reset`);
      await new Promise((r) => setTimeout(r, 2));
    }
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
