// A ROS 2 robot through rosbridge v2, with the standard roslib client over a WebSocket.
// roslib queues whatever is sent while disconnected and replays it on reconnect; a command that
// old must never move a robot, so this adapter sends nothing unless the link is up, and re-creates
// its publishers and subscriptions on each new connection instead of relying on the queue.
import { Action, Ros, Service, Topic } from 'roslib';
import type { ITransportFactory } from 'roslib';
import type { RobotConfig } from '../config.js';
import type { Image, RobotObservation, RobotDeclaration } from '../../common/robot.js';
import { checkObservation, layoutOf, type ObservationLayout } from '../../common/layout.js';
import { authOp } from '../../bridge/rosbridge/auth.js';
import { wsTransportFactory } from '../../bridge/rosbridge/ws-transport.js';
import { resetSeed, UnseededResetError, type ResetOptions, type Robot } from '../types.js';
import { cameraType, commandMessage, commandType, imageFromMessage, JointStateReader, type JointStateMsg } from './ros-messages.js';
import { FOLLOW_JOINT_TRAJECTORY, JOINT_TRAJECTORY, RosControl, SWITCH_CONTROLLER, type ControllerLink, type FollowJointTrajectoryResult, type SwitchControllerResponse } from './ros-control.js';

export class NotConnectedError extends Error {
  constructor(robot: string, what: string) {
    super(`${robot}: not connected to rosbridge; ${what} was not sent (it will not be replayed later)`);
    this.name = 'NotConnectedError';
  }
}

export interface RosRobotOptions {
  transportFactory?: ITransportFactory;
  /** Reconnect backoff, ms. */
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  /** How long connect() and service calls wait. */
  timeoutMs?: number;
}


export class RosRobot implements Robot {
  readonly spec: RobotDeclaration;
  private ros: Ros;
  private command?: Topic;
  private subs: Topic[] = [];
  private joint?: { stamp: number; position: Float64Array; velocity: Float64Array };
  private features?: Float32Array;
  /** Counts joint states and feature messages, so a reset can wait for the first ones of the new episode. */
  private jointSeq = 0;
  private featureSeq = 0;
  /** jointSeq when the latest features arrived: features after the latest joint state belong to its tick. */
  private featuresAtJoint = -1;
  private image?: Image;
  /** Why the latest camera message could not be read. */
  private imageError?: Error;
  private instruction?: string;
  private closed = false;
  private outcome: { reward: number; success: boolean; done: boolean } | null = null;
  private outcomeSeq = 0;
  private outcomeAtCommand = 0;
  private connected = false;
  private backoff: number;
  private reconnectTimer?: NodeJS.Timeout;
  private readonly waiters = new Set<() => void>();
  /** Times the link came up (1 after the first connect). */
  connections = 0;
  private readonly jointReader: JointStateReader;
  /** The observation layout of the config's spec: every observation is checked against it. */
  readonly layout: ObservationLayout;
  private seedTopic?: Topic;
  /** The joint_trajectory_controller's topic the home move goes to (robot YAML `home.topic`), per connection. */
  private homeTopic?: Topic;
  /** Reset through the home pose and e-stop through the controller manager, where the robot YAML declares them. */
  private readonly control?: RosControl;
  /** The rosbridge shared secret, read once from the environment variable the config names. */
  private readonly secret?: string;

  private constructor(readonly config: RobotConfig, private readonly opts: RosRobotOptions) {
    this.spec = config.spec;
    const env = config.rosbridge?.secretEnv;
    if (env !== undefined) {
      this.secret = process.env[env];
      if (!this.secret) throw new Error(`${config.spec.name}: rosbridge.secret_env names ${env}, which is not set or empty`);
    }
    this.layout = layoutOf(config.spec);
    this.jointReader = new JointStateReader(config.spec.joints);
    this.backoff = opts.reconnectMinMs ?? 100;
    this.ros = new Ros({ transportFactory: opts.transportFactory ?? wsTransportFactory });
    this.ros.on('connection', () => this.onConnect());
    this.ros.on('close', () => this.onClose());
    this.ros.on('error', () => this.onClose());
    if (config.home || config.controllerManager) this.control = new RosControl(config, this.controlLink());
  }

  static async connect(config: RobotConfig, opts: RosRobotOptions = {}): Promise<RosRobot> {
    const r = new RosRobot(config, opts);
    await r.ros.connect(config.url).catch(() => undefined);
    const ms = opts.timeoutMs ?? 5000;
    try {
      await r.waitFor(() => r.connected && !!r.joint, ms, `no joint states on ${config.stateTopic} from ${config.url}`);
      // The features are part of every observation: a robot whose first joint states came before them is not yet observable.
      if (config.featuresTopic) await r.waitFor(() => !!r.features, ms, `no features on ${config.featuresTopic} from ${config.url}`);
    } catch (e) {
      r.closed = true;
      r.ros.close();
      throw e;
    }
    return r;
  }

  get isConnected(): boolean {
    return this.connected && this.ros.isConnected;
  }

  private onConnect(): void {
    // Before anything else on the socket: a server that requires auth refuses any other first op.
    if (this.secret) {
      const a = authOp(this.secret, { dest: this.config.url });
      this.ros.authenticate(a.mac, a.client, a.dest, a.rand, a.t, a.level, a.end);
    }
    this.connected = true;
    this.connections++;
    this.backoff = this.opts.reconnectMinMs ?? 100;
    const c = this.config;
    // Fresh Topic objects per connection: the server forgot the old subscriptions with the socket.
    this.subs = [];
    const sub = <T>(name: string, type: string, f: (m: T) => void) => {
      const t = new Topic<T>({ ros: this.ros, name, messageType: type, queue_length: 1 });
      t.subscribe(f);
      this.subs.push(t as Topic);
    };
    sub<JointStateMsg>(c.stateTopic, 'sensor_msgs/msg/JointState', (m) => this.onJointState(m));
    if (c.featuresTopic) sub<{ data: number[] }>(c.featuresTopic, 'std_msgs/msg/Float32MultiArray', (m) => {
        this.features = Float32Array.from(m.data);
        this.featureSeq++;
        this.featuresAtJoint = this.jointSeq;
        this.wake();
      });
    if (c.outcomeTopic) sub<{ data: number[] }>(c.outcomeTopic, 'std_msgs/msg/Float64MultiArray', (m) => {
        const [, reward, success, terminated, truncated] = m.data;
        this.outcome = { reward: reward ?? NaN, success: success === 1, done: terminated === 1 || truncated === 1 };
        this.outcomeSeq++;
        this.wake();
      });
    if (c.instructionTopic) sub<{ data: string }>(c.instructionTopic, 'std_msgs/msg/String', (m) => (this.instruction = m.data));
    if (c.cameraTopic && this.spec.camera) {
      const type = cameraType(this.spec.camera.encoding);
      sub<Record<string, unknown>>(c.cameraTopic, type, (m) => {
        try {
          this.image = imageFromMessage(type, m, `${this.spec.name} camera ${c.cameraTopic}`);
          this.imageError = undefined;
        } catch (e) {
          // A frame that cannot be read leaves none: the policy's read of it fails, naming why.
          this.image = undefined;
          this.imageError = e as Error;
        }
      });
    }
    this.command = new Topic({ ros: this.ros, name: c.command.topic, messageType: commandType(c) });
    this.command.advertise();
    if (c.services.resetSeed) {
      this.seedTopic = new Topic({ ros: this.ros, name: c.services.resetSeed, messageType: 'std_msgs/msg/UInt32', latch: true });
      this.seedTopic.advertise();
    }
    if (c.home?.topic && !c.services.reset) {
      this.homeTopic = c.home.topic === c.command.topic && commandType(c) === JOINT_TRAJECTORY ? this.command : new Topic({ ros: this.ros, name: c.home.topic, messageType: JOINT_TRAJECTORY });
      this.homeTopic.advertise();
    }
    this.wake();
  }

  private onClose(): void {
    if (!this.connected && this.reconnectTimer) return;
    this.connected = false;
    this.command = undefined;
    this.seedTopic = undefined;
    this.homeTopic = undefined;
    // A wait for the robot's next message learns now that none comes over this link.
    this.wake();
    if (this.closed) return;
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (!this.closed) this.ros.connect(this.config.url).catch(() => this.onClose());
    }, this.backoff);
    this.backoff = Math.min(this.backoff * 2, this.opts.reconnectMaxMs ?? 2000);
  }

  private onJointState(m: JointStateMsg): void {
    const j = this.jointReader.read(m);
    if (!j) return; // a JointState of some other joints
    this.joint = j;
    this.jointSeq++;
    this.wake();
  }

  private wake(): void {
    for (const w of this.waiters) w();
  }

  /** Resolves when `cond` holds; re-checked on every connection change and joint state. */
  waitFor(cond: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (cond()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!cond()) return;
        this.waiters.delete(check);
        clearTimeout(t);
        resolve();
      };
      const t = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`${this.spec.name}: timed out after ${timeoutMs} ms: ${what}`));
      }, timeoutMs);
      this.waiters.add(check);
    });
  }

  async observe(): Promise<RobotObservation> {
    if (!this.joint) throw new Error(`${this.spec.name}: no joint state received yet`);
    if (!this.image && this.imageError) throw this.imageError;
    const o: RobotObservation = {
      stamp: this.joint.stamp,
      position: this.joint.position,
      velocity: this.joint.velocity,
      ...(this.features ? { features: this.features } : {}),
      ...(this.image ? { image: this.image } : {}),
      ...(this.instruction !== undefined ? { instruction: this.instruction } : {}),
    };
    checkObservation(this.layout, o, this.spec.name);
    return o;
  }

  async act(action: Float32Array): Promise<Float32Array> {
    if (!this.isConnected || !this.command) throw new NotConnectedError(this.spec.name, 'the command');
    this.outcomeAtCommand = this.outcomeSeq;
    this.command.publish(commandMessage(this.config, action, this.joint?.position));
    return action;
  }

  /**
   * The robot's outcome (reward, success, episode end) of the first control step it reports after the
   * last command was sent: the step that applied it. Needs `outcome_topic` in the robot config.
   */
  async outcomeOfLastCommand(): Promise<{ reward: number; success: boolean; done: boolean }> {
    if (!this.config.outcomeTopic) throw new Error(`${this.spec.name}: its robot config declares no outcome_topic, so it reports no reward or success`);
    const since = this.outcomeAtCommand;
    await this.waitFor(() => this.outcomeSeq > since || !this.isConnected, this.opts.timeoutMs ?? 5000, `an outcome on ${this.config.outcomeTopic} after the last command`);
    if (this.outcomeSeq <= since) throw new Error(`${this.spec.name}: the link to rosbridge dropped before the robot reported the outcome of the last command`);
    const o = this.outcome!;
    if (!Number.isFinite(o.reward)) throw new Error(`${this.spec.name}: outcome message on ${this.config.outcomeTopic} has no finite reward`);
    return o;
  }

  /** Calls a service; `onAnswer` runs synchronously as the answer arrives, before anything received after it. */
  private call<Req, Res>(name: string, type: string, req: Req, what: string, onAnswer?: () => void): Promise<Res> {
    if (!this.isConnected) return Promise.reject(new NotConnectedError(this.spec.name, `the ${what} request`));
    const svc = new Service<Req, Res>({ ros: this.ros, name, serviceType: type });
    const ms = this.opts.timeoutMs ?? 5000;
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.spec.name}: ${what} service ${name} did not answer in ${ms} ms`)), ms);
      svc.callService(
        req,
        (r) => {
          clearTimeout(t);
          onAnswer?.();
          resolve(r);
        },
        (e) => {
          clearTimeout(t);
          reject(new Error(`${this.spec.name}: ${what} service ${name}: ${e}`));
        },
      );
    });
  }

  /** Calls a std_srvs/Trigger service; a `success: false` answer is an error carrying its message. */
  private async trigger(name: string | undefined, what: string, onAnswer?: () => void): Promise<string> {
    if (!name) throw new Error(`${this.spec.name}: no ${what} service configured`);
    const r = await this.call<Record<string, never>, { success: boolean; message: string }>(name, 'std_srvs/srv/Trigger', {}, what, onAnswer);
    if (!r.success) throw new Error(`${this.spec.name}: ${what} failed: ${r.message}`);
    return r.message;
  }

  /** The controller's topic, action and controller manager over this rosbridge link (hardware/robots/ros-control.ts). */
  private controlLink(): ControllerLink {
    return {
      publishTrajectory: (_topic, msg) => {
        if (!this.isConnected || !this.homeTopic) throw new NotConnectedError(this.spec.name, 'the home trajectory');
        this.homeTopic.publish(msg as Record<string, unknown>);
      },
      followTrajectory: (name, goal, timeoutMs) => {
        if (!this.isConnected) return Promise.reject(new NotConnectedError(this.spec.name, 'the home trajectory goal'));
        const action = new Action<typeof goal, unknown, FollowJointTrajectoryResult>({ ros: this.ros, name, actionType: FOLLOW_JOINT_TRAJECTORY });
        return new Promise((resolve, reject) => {
          const id = action.sendGoal(
            goal,
            (r) => {
              clearTimeout(t);
              resolve(r);
            },
            undefined,
            (e) => {
              clearTimeout(t);
              reject(new Error(`${this.spec.name}: ${name}: ${e}`));
            },
          );
          const t = setTimeout(() => {
            if (id !== undefined) action.cancelGoal(id);
            reject(new Error(`${this.spec.name}: ${name} gave no result in ${timeoutMs} ms (goal cancelled)`));
          }, timeoutMs);
        });
      },
      switchControllers: (name, req) => this.call<typeof req, SwitchControllerResponse>(name, SWITCH_CONTROLLER, req, 'controller manager'),
      positions: () => this.joint?.position,
      until: (cond, ms, what) => this.waitFor(cond, ms, what),
    };
  }

  /**
   * With a seed, publishes it on `services.reset_seed_topic` before calling the reset service, on the same
   * socket, so the robot has it when the call arrives. A robot whose config declares no such topic cannot
   * honour a seed: UnseededResetError.
   */
  async reset(options?: ResetOptions): Promise<RobotObservation> {
    const seed = resetSeed(this.spec.name, options);
    if (!this.config.services.reset && this.control && this.config.home) {
      // No reset service: the joints go home, and the first complete observation after that starts the episode.
      if (seed !== undefined) throw new UnseededResetError(this.spec.name, 'its reset is the move to its home pose, which is the same whatever the seed');
      await this.control.home();
      return this.nextObservation('after the move home');
    }
    if (seed !== undefined) {
      if (!this.config.services.resetSeed) throw new UnseededResetError(this.spec.name, 'its robot config declares no services.reset_seed_topic');
      if (!this.isConnected || !this.seedTopic) throw new NotConnectedError(this.spec.name, 'the reset seed');
      this.seedTopic.publish({ data: seed });
    }
    // The first joint state after the reset answer reflects the new episode. Counted from the moment the
    // answer arrives: messages in the same socket read may be handled before this method resumes.
    let since = { joints: this.jointSeq, features: this.featureSeq };
    await this.trigger(this.config.services.reset, 'reset', () => (since = { joints: this.jointSeq, features: this.featureSeq }));
    return this.nextObservation('after reset', since);
  }

  /**
   * The first complete observation received after this call. Joint state and task features travel on
   * separate topics; a robot publishes the features of a tick after its joint state, so features that
   * arrive after the latest joint state complete it (positions, velocities and features of one tick).
   */
  async nextObservation(what = 'next observation', since = { joints: this.jointSeq, features: this.featureSeq }): Promise<RobotObservation> {
    const { joints, features } = since;
    const wantFeatures = this.config.featuresTopic !== undefined;
    let snapshot: Promise<RobotObservation> | undefined;
    await this.waitFor(
      () => {
        if (!(this.jointSeq > joints && (!wantFeatures || (this.featureSeq > features && this.featuresAtJoint === this.jointSeq)))) return false;
        // taken as the condition turns true: a later message must not tear the pair
        snapshot ??= this.observe();
        return true;
      },
      this.opts.timeoutMs ?? 5000,
      wantFeatures ? `joint state and features (${this.config.featuresTopic}) ${what}` : `joint state ${what}`,
    );
    return snapshot!;
  }

  /** The e-stop service where the robot YAML names one, else the controller manager (command controllers off). */
  async estop(): Promise<void> {
    if (!this.config.services.estop && this.control && this.config.controllerManager) return this.control.estop();
    await this.trigger(this.config.services.estop, 'e-stop');
  }

  /** Drops the link as a network failure would (tests); the adapter reconnects by itself. */
  simulateDrop(): void {
    this.ros.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    for (const s of this.subs) s.unsubscribe();
    this.ros.close();
  }
}
