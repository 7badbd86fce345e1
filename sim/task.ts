// What a task supplies to the generic MuJoCo env: its scene, how an episode starts, what is observed,
// how it is scored, and a scripted expert.
import type { SimData, SimModel } from './mujoco.js';
import type { Rng } from './rng.js';
import type { Obs } from './types.js';

export interface TaskDef {
  name: string;
  /** Absolute path of the MJCF scene. */
  scene: string;
  /** Physics steps per control step. */
  substeps: number;
  /** Control steps per episode before truncation. */
  horizon: number;
  /** Fixed camera used for image observations ('' = the model's first camera). */
  camera: string;
  /** Resolve names to ids once per model. */
  bind(model: SimModel): BoundTask;
}

export interface BoundTask {
  actuatorNames: string[];
  jointNames: string[];
  stateNames: string[];
  stateLow?: Float32Array;
  stateHigh?: Float32Array;
  instructions: string[];
  keyframe?: string;
  /** Lay out the episode (object and target positions) after the keyframe reset; returns the goal index. */
  resetEpisode(data: SimData, rng: Rng): number;
  /** Write the true state features into `out` (length stateNames.length). Physics is at mj_forward level. */
  observe(data: SimData, goal: number, out: Float32Array): void;
  /** Dense reward and sparse success of the current state. `action` is in action-space units. */
  evaluate(data: SimData, goal: number, action: Float32Array): { reward: number; success: boolean };
  /** A scripted controller that reads only observations; fresh per episode. */
  expert(): { act(obs: Obs): Float32Array };
}

/** Index of `instruction` in the vocabulary of the task (the goal), read back from a state vector one-hot. */
export function argmaxFrom(state: Float32Array, from: number, n: number): number {
  let best = 0;
  for (let i = 1; i < n; i++) if (state[from + i]! > state[from + best]!) best = i;
  return best;
}
