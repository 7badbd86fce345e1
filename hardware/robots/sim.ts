// The in-process sim robot: a sim/ Env behind the Robot interface (one act() = one control step).
import { makeEnv, type Env, type Obs, type StepResult } from '../../sim/index.js';
import type { RobotObservation, RobotDeclaration } from '../../common/robot.js';
import type { ResetOptions, Robot } from '../types.js';

export interface SimRobotOptions {
  task: string;
  /** Hardware profile name or YAML path (sim/profiles); default nominal. */
  profile?: string;
  seed?: number;
  /** Side of the square camera image, px; omit for no camera. */
  image?: number;
  /** Declared joint speed limit, rad/s (MuJoCo motors have none of their own). */
  velocityLimit?: number;
}

/** Splits the env's state vector into joint positions, velocities and the remaining task features. */
export function stateLayout(env: Env): { pos: number[]; vel: number[]; features: number[]; featureNames: string[] } {
  const names = env.observationSpace.state.names;
  const find = (pred: (n: string) => boolean, what: string, j: string) => {
    const i = names.findIndex(pred);
    if (i < 0) throw new Error(`sim robot: task ${env.task} has no ${what} entry for joint '${j}' in its state (${names.join(', ')})`);
    return i;
  };
  const pos = env.spec.jointNames.map((j) => find((n) => n === `${j} (rad)` || n === `${j} (m)`, 'position', j));
  const vel = env.spec.jointNames.map((j) => find((n) => n.startsWith(`${j} vel`), 'velocity', j));
  const used = new Set([...pos, ...vel]);
  const features = names.map((_, i) => i).filter((i) => !used.has(i));
  return { pos, vel, features, featureNames: features.map((i) => names[i]!) };
}

export class SimRobot implements Robot {
  readonly spec: RobotDeclaration;
  private obs: Obs;
  private seed: number;
  private stopped = false;
  private layout: ReturnType<typeof stateLayout>;
  /** The last env step (reward, success, termination), for episode recording. */
  lastStep?: StepResult;

  private constructor(readonly env: Env, opts: SimRobotOptions) {
    this.seed = opts.seed ?? 0;
    this.layout = stateLayout(env);
    const a = env.actionSpace;
    this.spec = {
      name: `sim-${env.task}-${env.profile}`,
      joints: [...env.spec.jointNames],
      positionLimits: env.spec.jointLimits.map(([lo, hi]) => [lo, hi]),
      velocityLimits: env.spec.jointNames.map(() => opts.velocityLimit ?? 20),
      action: { kind: 'normalized', names: [...env.spec.actuatorNames], low: Array.from(a.low), high: Array.from(a.high) },
      controlHz: env.spec.controlHz,
      features: this.layout.featureNames,
      ...(opts.image ? { camera: { width: opts.image, height: opts.image, encoding: 'rgb8' as const } } : {}),
    };
    this.obs = env.reset(this.seed);
  }

  static async create(opts: SimRobotOptions): Promise<SimRobot> {
    const env = await makeEnv({ task: opts.task, profile: opts.profile, seed: opts.seed, image: opts.image });
    return new SimRobot(env, opts);
  }

  /** Observation in robot terms, from an env observation at control step t. */
  toRobotObservation(o: Obs, t: number): RobotObservation {
    const s = o.state;
    return {
      stamp: t / this.spec.controlHz,
      position: Float64Array.from(this.layout.pos, (i) => s[i]!),
      velocity: Float64Array.from(this.layout.vel, (i) => s[i]!),
      features: Float32Array.from(this.layout.features, (i) => s[i]!),
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

  async act(action: Float32Array): Promise<Float32Array> {
    // A stopped robot applies no effort until it is reset, whatever it is sent.
    const r = this.env.step(this.stopped ? new Float32Array(action.length) : action);
    this.lastStep = r;
    this.obs = r.obs;
    return r.info.appliedAction;
  }

  async reset(options?: ResetOptions): Promise<RobotObservation> {
    this.stopped = false;
    this.obs = this.env.reset(options?.seed ?? ++this.seed);
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
