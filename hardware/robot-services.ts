// The robot-side services node, for robots that lack reset, e-stop or an outcome signal: on the robot's own ROS 2
// machine over rclnodejs, from the same robot YAML the bridge reads, it offers std_srvs/Trigger `reset` (the move to
// `home`, hardware/robots/ros-control.ts), `estop` (the command controllers deactivated, and latched) and `clear` (the
// operator's action: the controllers active again, the latch released), and publishes the outcome of each control
// step computed from `outcome_rule`. What it cannot know: anything the robot does not publish — the rule sees joint
// positions and the declared features only (no contact, no grasp, no vision), so its success is a geometric proxy.
import { loadRclnodejs, type Rclnodejs, type RclNode, type RclServiceResponse } from '../bridge/ros2native.js';
import type { RobotConfig } from './config.js';
import { JointStateReader, TOPIC_QOS, type JointStateMsg } from './robots/ros-messages.js';
import { RosControl } from './robots/ros-control.js';
import { pollUntil, rclControlLink } from './robots/ros2.js';

export interface RobotServicesOptions {
  /** The operator's clear service (default /wmrl/clear_estop). */
  clear?: string;
  /** The node's clock, ms (tests); default performance.now. */
  now?: () => number;
  log?: (line: string) => void;
}

type Trigger = { success: boolean; message: string };

/** What the node offers, by name. */
export interface RobotServicesOffer {
  reset?: string;
  estop?: string;
  clear?: string;
  outcome?: string;
}

const qos = (kind: keyof typeof TOPIC_QOS) => ({ qos: TOPIC_QOS[kind] === 'sensor_data' ? ('qos_profile_sensor_data' as const) : ('qos_profile_default' as const) });

export class RobotServices {
  readonly offer: RobotServicesOffer = {};
  private latched = false;
  private resetting = false;
  private episodeStart: number;
  private position?: Float64Array;
  private features?: Float32Array;
  private readonly control: RosControl;
  private readonly now: () => number;

  private constructor(readonly config: RobotConfig, private readonly rcl: Rclnodejs, private readonly node: RclNode, o: RobotServicesOptions) {
    const c = config;
    this.now = o.now ?? (() => performance.now());
    this.episodeStart = this.now();
    const log = o.log ?? (() => {});
    const reader = new JointStateReader(c.spec.joints);
    const link = rclControlLink(rcl, node, c, () => this.position, (cond, ms, what) => pollUntil(cond, ms, `${c.spec.name}: timed out after ${ms} ms: ${what}`));
    this.control = new RosControl(c, link);
    const rule = c.outcomeRule;
    const ruleReadsFeatures = !!rule?.success?.entries.some((e) => c.spec.features?.includes(e));
    const outcome = rule && c.outcomeTopic ? node.createPublisher('std_msgs/msg/Float64MultiArray', c.outcomeTopic) : undefined;
    node.createSubscription('sensor_msgs/msg/JointState', c.stateTopic, qos('state'), (m) => {
      const j = reader.read(m as JointStateMsg);
      if (!j) return;
      this.position = j.position;
      if (outcome && !ruleReadsFeatures) outcome.publish(this.outcomeMessage());
    });
    if (ruleReadsFeatures) {
      if (!c.featuresTopic) throw new Error(`${c.spec.name}: outcome_rule reads features, and the robot YAML declares no features topic`);
      node.createSubscription('std_msgs/msg/Float32MultiArray', c.featuresTopic, qos('features'), (m) => {
        this.features = Float32Array.from((m as { data: ArrayLike<number> }).data);
        if (outcome && this.position) outcome.publish(this.outcomeMessage());
      });
    }
    if (outcome) this.offer.outcome = c.outcomeTopic;
    const serve = (name: string, handler: () => Promise<Trigger>) =>
      node.createService('std_srvs/srv/Trigger', name, {}, (_req: unknown, response: RclServiceResponse) => {
        void handler().then(
          (r) => {
            log(`${name}: ${r.success ? 'ok' : 'refused'}: ${r.message}`);
            response.send(r);
          },
          // Every failure is answered: a caller must never wait out its timeout on an exception here.
          (e: unknown) => {
            log(`${name}: failed: ${(e as Error).message}`);
            response.send({ success: false, message: (e as Error).message });
          },
        );
      });
    if (c.home) serve((this.offer.reset = c.services.reset ?? '/wmrl/reset'), () => this.reset());
    if (c.controllerManager) {
      serve((this.offer.estop = c.services.estop ?? '/wmrl/estop'), () => this.estop());
      serve((this.offer.clear = o.clear ?? '/wmrl/clear_estop'), () => this.clear());
    }
    rcl.spin(node);
  }

  /**
   * Starts the node for `config`'s robot. Refuses a YAML that gives it nothing to offer, and one whose
   * `services.reset_seed_topic` would promise seeded resets that a move to one home pose cannot keep.
   */
  static async start(config: RobotConfig, o: RobotServicesOptions & { env?: NodeJS.ProcessEnv; importer?: () => Promise<unknown> } = {}): Promise<RobotServices> {
    const what = `${config.spec.name}: wmrl robot-services`;
    if (!config.home && !config.controllerManager && !config.outcomeRule) throw new Error(`${what} offers reset from 'home', e-stop from 'controller_manager' and an outcome from 'outcome_rule'; the robot YAML declares none of them`);
    if (config.services.resetSeed) throw new Error(`${what}: its reset always returns to the one home pose and cannot apply a seed; remove services.reset_seed_topic`);
    const rcl = await loadRclnodejs(o.env, o.importer);
    await rcl.init();
    return new RobotServices(config, rcl, rcl.createNode(`wmrl_robot_services_${config.spec.name.replace(/\W/g, '_')}`), o);
  }

  get isEstopped(): boolean {
    return this.latched;
  }

  private async reset(): Promise<Trigger> {
    const clear = this.offer.clear ?? 'the clear service';
    if (this.latched) return { success: false, message: `e-stopped: a reset does not clear the stop; the operator calls ${clear} (ros2 service call ${clear} std_srvs/srv/Trigger), then resets` };
    if (this.resetting) return { success: false, message: 'a reset is already running' };
    this.resetting = true;
    try {
      await this.control.home();
    } finally {
      this.resetting = false;
    }
    this.episodeStart = this.now();
    return { success: true, message: `home: ${this.config.spec.joints.length} joints within ${this.config.home!.tolerance}` };
  }

  private async estop(): Promise<Trigger> {
    if (this.latched) return { success: true, message: 'already stopped' };
    // Latched before the controller manager answers: a reset racing the stop is refused either way.
    this.latched = true;
    await this.control.estop();
    return { success: true, message: `stopped: ${this.config.controllerManager!.commandControllers.join(', ')} deactivated; the operator calls ${this.offer.clear} to resume` };
  }

  private async clear(): Promise<Trigger> {
    if (!this.latched) return { success: true, message: 'not e-stopped' };
    await this.control.reactivate();
    this.latched = false;
    return { success: true, message: `cleared: ${this.config.controllerManager!.commandControllers.join(', ')} active again; reset to start an episode` };
  }

  /** `[t, reward, success, terminated, truncated]`, t in seconds since the node's last reset. */
  outcomeMessage(): { layout: { dim: never[]; data_offset: number }; data: number[] } {
    const rule = this.config.outcomeRule!;
    const t = (this.now() - this.episodeStart) / 1000;
    let distance = NaN;
    if (rule.success) {
      const values = rule.success.entries.map((e) => {
        const f = this.config.spec.features?.indexOf(e) ?? -1;
        return f >= 0 ? (this.features?.[f] ?? NaN) : this.position![this.config.spec.joints.indexOf(e)]!;
      });
      distance = Math.hypot(...values.map((v, i) => v - rule.success!.goal[i]!));
    }
    const success = distance <= (rule.success?.tolerance ?? -Infinity);
    const reward = rule.reward === 'negative_distance' ? -distance : success ? 1 : 0;
    const truncated = this.latched || (rule.episodeS !== undefined && t >= rule.episodeS);
    return { layout: { dim: [], data_offset: 0 }, data: [t, reward, success ? 1 : 0, success ? 1 : 0, truncated ? 1 : 0] };
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.node.destroy();
    this.rcl.shutdown();
  }
}
