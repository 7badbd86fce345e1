// What a task supplies to the generic MuJoCo env: its scene, how an episode starts, what is observed,
// how it is scored, and a scripted expert.
import type { DerivedEntries } from '../common/derived.js';
import type { JointUnit, ObservationLayout } from '../common/layout.js';
import type { SimData, SimModel } from './mujoco.js';
import type { Rng } from './rng.js';
import type { Demonstrator, DemonstratorOptions, Obs } from './types.js';

export interface TaskDef {
  name: string;
  /** Absolute path of the MJCF scene. */
  scene: string;
  /** Physics steps per control step. */
  substeps: number;
  /** Control steps per episode before truncation. */
  horizon: number;
  /** Fixed camera used for image observations ('' = the model's first camera, or a default view when it has none). */
  camera: string;
  /** MJCF elements the task adds to the scene's world body (a user's robot: its goal marker). */
  worldbody?: string;
  /** Resolve names to ids once per model. */
  bind(model: SimModel): BoundTask;
}

export interface BoundTask {
  actuatorNames: string[];
  /** The observation layout: the state vector is [joint positions, joint velocities, features] in this order. */
  layout: ObservationLayout;
  stateLow?: Float32Array;
  stateHigh?: Float32Array;
  instructions: string[];
  keyframe?: string;
  /** Lay out the episode (object and target positions) after the keyframe reset; returns the goal index. */
  resetEpisode(data: SimData, rng: Rng): number;
  /** Write the true state into `out` (length layoutDim(layout), in layout order). Physics is at mj_forward level. */
  observe(data: SimData, goal: number, out: Float32Array): void;
  /**
   * The inverse of `observe` for what a camera sees besides the layout's joints (those the twin writes itself):
   * writes the object and target positions a state vector declares into `data` (qpos, mocap_pos). What the
   * layout does not declare (an object's height and orientation) keeps the value `data` holds. For sim/twin.ts.
   */
  pose?(data: SimData, state: Float32Array): void;
  /**
   * The identities the state vector keeps (common/derived.ts, by entry index in `layout`): entries constant within
   * an episode and entries computed from others, which a world model's imagination restores after each step.
   */
  derived?: DerivedEntries;
  /** Where the goal of the instruction lies on the table (x, y), for splits by target region (sim/split.ts). */
  goalPosition?(data: SimData, goal: number): [number, number];
  /** Dense reward and sparse success of the current state. `action` is in action-space units. */
  evaluate(data: SimData, goal: number, action: Float32Array): { reward: number; success: boolean };
  /** A scripted controller that reads only observations; fresh per episode. */
  expert(): { act(obs: Obs): Float32Array };
  /** The expert made robust to the robot's latency and actuation (Env.demonstrator); `controlDt` in s. */
  demonstrator?(o: DemonstratorOptions & { controlDt: number }): Demonstrator;
  /** Frees what bind() allocated in WASM memory (scratch data), when anything. */
  dispose?(): void;
}

/** Index of `instruction` in the vocabulary of the task (the goal), read back from a state vector one-hot. */
export function argmaxFrom(state: Float32Array, from: number, n: number): number {
  let best = 0;
  for (let i = 1; i < n; i++) if (state[from + i]! > state[from + best]!) best = i;
  return best;
}

const JOINT_TYPES = ['free', 'ball', 'slide', 'hinge'] as const;

/** How a model's joint is measured: a hinge in rad, a slide in m; free and ball joints are not joints of a layout. */
export function jointUnit(model: SimModel, name: string): { type: (typeof JOINT_TYPES)[number]; unit?: JointUnit } {
  const type = JOINT_TYPES[(model.raw.jnt_type as Int32Array)[model.id('mjOBJ_JOINT', name)]!]!;
  return { type, unit: type === 'hinge' ? 'rad' : type === 'slide' ? 'm' : undefined };
}
