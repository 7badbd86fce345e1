// The in-process sim robot: a sim/ Env behind the Robot interface (one act() = one control step).
import { makeEnv, type Env, type Obs, type StepResult } from '../../sim/index.js';
import type { RobotObservation, RobotDeclaration } from '../../common/robot.js';
import { declarationOf, splitObservation } from '../../common/layout.js';
import { resetSeed, type ResetOptions, type Robot } from '../types.js';

export interface SimRobotOptions {
  task: string;
  /** Hardware profile name or YAML path (sim/profiles); default nominal. */
  profile?: string;
  seed?: number;
  /** Side of the square camera image, px; omit for no camera. */
  image?: number;
  /** Declared joint speed limit, rad/s (MuJoCo motors have none of their own). */
  velocityLimit?: number;
  /** Report the last this many commands sent as observation features (sim/env.ts EnvOptions.commandHistory); default 0. */
  commandHistory?: number;
}

export class SimRobot implements Robot {
  readonly spec: RobotDeclaration;
  private obs: Obs;
  private seed: number;
  private stopped = false;
  private stepsTaken = 0;
  /** The last env step (reward, success, termination), for episode recording. */
  lastStep?: StepResult;

  private constructor(readonly env: Env, opts: SimRobotOptions) {
    this.seed = opts.seed ?? 0;
    const a = env.actionSpace;
    this.spec = {
      name: `sim-${env.task}-${env.profile}`,
      ...declarationOf(env.layout),
      positionLimits: env.spec.jointLimits.map(([lo, hi]) => [lo, hi]),
      velocityLimits: env.spec.jointNames.map(() => opts.velocityLimit ?? 20),
      action: { kind: 'normalized', names: [...env.spec.actuatorNames], low: Array.from(a.low), high: Array.from(a.high) },
      controlHz: env.spec.controlHz,
      ...(opts.image ? { camera: { width: opts.image, height: opts.image, encoding: 'rgb8' as const } } : {}),
    };
    this.obs = env.reset(this.seed);
  }

  static async create(opts: SimRobotOptions): Promise<SimRobot> {
    const env = await makeEnv({ task: opts.task, profile: opts.profile, seed: opts.seed, image: opts.image, commandHistory: opts.commandHistory });
    return new SimRobot(env, opts);
  }

  /** Observation in robot terms, from an env observation at control step t. */
  toRobotObservation(o: Obs, t: number): RobotObservation {
    return {
      stamp: t / this.spec.controlHz,
      ...splitObservation(this.env.layout, o.state, this.spec.name),
      instruction: o.instruction,
      ...(o.image && this.spec.camera ? { image: { width: this.spec.camera.width, height: this.spec.camera.height, encoding: 'rgb8' as const, data: o.image } } : {}),
    };
  }

  get lastObs(): Obs {
    return this.obs;
  }

  async observe(): Promise<RobotObservation> {
    return this.toRobotObservation(this.obs, this.lastStep?.info.t ?? 0);
  }

  /**
   * Returns the command as its actuators are sent it (Robot.act's contract; StepInfo.command: as the sim takes it); no
   * effort on a stopped robot. Not what they apply this step: under a profile's latency that is a command sent steps
   * ago (StepInfo.appliedAction).
   */
  async act(action: Float32Array): Promise<Float32Array> {
    // A stopped robot applies no effort until it is reset, whatever it is sent.
    const r = this.env.step(this.stopped ? new Float32Array(action.length) : action);
    this.stepsTaken++;
    this.lastStep = r;
    this.obs = r.obs;
    return r.info.command;
  }

  /**
   * The robot's own clock, ms: one control period per step taken, whole life. A safety layer over a sim that is stepped
   * as fast as it goes (not in real time) reads this clock, so that how long the host took to compute a command, which
   * the sim waits for, never changes what the robot does.
   */
  get clockMs(): number {
    return (this.stepsTaken * 1000) / this.spec.controlHz;
  }

  /** Without a seed, each reset takes the next seed after the last unseeded one (the robot's own sequence). */
  async reset(options?: ResetOptions): Promise<RobotObservation> {
    const seed = resetSeed(this.spec.name, options);
    this.stopped = false;
    this.obs = this.env.reset(seed ?? ++this.seed);
    this.lastStep = undefined;
    return this.observe();
  }

  async estop(): Promise<void> {
    this.stopped = true;
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.env.dispose();
  }
}
