// The Env contract of DESIGN.md §4: spaces, observations, step results, and the simulated robot's layout.
import type { DerivedEntries } from '../common/derived.js';
import type { ObservationLayout } from '../common/layout.js';
import type { SceneStatic } from './scene.js';

/** A bounded float vector space; `names[i]` says what entry i means (with its unit), for display. */
export interface BoxSpace {
  kind: 'box';
  shape: [number];
  low: Float32Array;
  high: Float32Array;
  names: string[];
}

/** An RGB image, row-major H x W x 3, uint8. */
export interface ImageSpace {
  kind: 'image';
  shape: [number, number, 3];
}

export interface ObservationSpace {
  state: BoxSpace;
  /** Present when the env was made with `image`. */
  image?: ImageSpace;
  /** Every instruction this task can give. */
  instructions: string[];
}

export interface Obs {
  /** [joint positions, joint velocities, features] as the env's `layout` declares them. A fresh array per call. */
  state: Float32Array;
  /** The instruction in words, fixed for the episode ("reach the red target"). */
  instruction: string;
  /** H x W x 3 RGB, when images are enabled. A fresh array per call. */
  image?: Uint8Array;
}

export interface StepInfo {
  success: boolean;
  instruction: string;
  /** The action that reached the actuators this step (after clipping and latency), in action-space units. */
  appliedAction: Float32Array;
  /** The action this step sent, as the env took it (within [-1, 1], NaN as 0): what reaches the actuators after the latency. */
  command: Float32Array;
  /** Physics substeps taken this step (varies under control-rate jitter). */
  substeps: number;
  /** Control steps since reset. */
  t: number;
}

export interface StepResult {
  obs: Obs;
  reward: number;
  terminated: boolean;
  truncated: boolean;
  info: StepInfo;
}

/**
 * How the simulated robot is laid out, as the MuJoCo model defines it: its joints and their limits,
 * its actuators, its control rate. hardware/robots/sim.ts builds a RobotDeclaration from it.
 */
export interface SimRobotLayout {
  jointNames: string[];
  /** [lo, hi] per joint in rad or m; [-Inf, Inf] when unlimited. */
  jointLimits: Array<[number, number]>;
  actuatorNames: string[];
  /** Control steps per second (nominal; jitter varies the substeps, not this). */
  controlHz: number;
}

/** Everything needed to continue an episode exactly: physics (incl. mocap layout), goal, latency queue, RNG. */
export interface EnvState {
  physics: Float64Array;
  goal: number;
  t: number;
  queue: Float32Array[];
  /** The last commands sent, newest first: an env made with `commandHistory` reports them. */
  commands?: Float32Array[];
  rng: number[];
}

export interface Env extends Disposable {
  readonly task: string;
  readonly profile: string;
  readonly observationSpace: ObservationSpace;
  readonly actionSpace: BoxSpace;
  readonly spec: SimRobotLayout;
  /** The declared observation layout: `Obs.state` is [joint positions, joint velocities, features] in its order. */
  readonly layout: ObservationLayout;
  /** The identities its state vector keeps (the task's BoundTask.derived; entry indices of `layout`), when the task declares them. */
  readonly derived?: DerivedEntries;
  /** Control steps after which an episode is truncated. */
  readonly horizon: number;
  reset(seed?: number): Obs;
  step(action: ArrayLike<number>): StepResult;
  getState(): EnvState;
  setState(s: EnvState): void;
  /** RGB image (size × size px; default: the env's `image` option, else 64) of the current state from the task's fixed camera. */
  render(size?: number): Uint8Array;
  /** Static scene description for the viewer (geoms, colours, meshes); poses come from `poses()`. */
  sceneStatic(): SceneStatic;
  /** Body poses now, nbody x 7 (x y z qw qx qy qz), a copy. */
  poses(): Float32Array;
  /** A scripted controller for demonstrations; fresh per episode. */
  expert(): Expert;
  /**
   * A demonstrator for this robot as it is (teleoperation's stand-in): the task's expert made robust to
   * actuation latency and weak or heavy actuation, from the observations the robot reports; fresh per
   * episode. Throws when the task has none.
   */
  demonstrator(o: DemonstratorOptions): Demonstrator;
  /** Whether the task has a robust demonstrator (`demonstrator` throws where not). */
  readonly hasDemonstrator: boolean;
  dispose(): void;
}

export interface Expert {
  act(obs: Obs): Float32Array;
}

/** What a demonstrator is told about the robot it drives: its actuation latency, measured (hardware/latency) or declared. */
export interface DemonstratorOptions {
  /** Control steps between a command and its reaching the actuators. */
  latencySteps: number;
}

/**
 * A closed-loop demonstrator: `act` reads only the observation; it predicts through the commands it believes
 * are in flight, so when the robot executed another command than the one it returned (noise injected, a
 * policy driving under DAgger), `executed` must tell it which, before the next `act`.
 */
export interface Demonstrator extends Expert {
  executed(action: ArrayLike<number>): void;
}
