// Seeded sim episodes for world-model tests and the worldmodel bench: a task's scripted expert with action
// noise, mixed with smoothly varying random actions, so the data covers more than the expert's path.
import { exploratoryEpisodes, type ExploratoryData } from '../../sim/index.js';
import { ModelEnv, TransitionBuffer, type EnsembleModel, type Transitions } from '../../worldmodel/index.js';

export type SimData = ExploratoryData;
export const simEpisodes = exploratoryEpisodes;

/** The episodes' transitions, concatenated. */
export function toTransitions(d: SimData, weight = 1): Transitions {
  const buf = new TransitionBuffer(d.dObs, d.dAct);
  for (const e of d.episodes) buf.addEpisode({ ...e, weight });
  return buf.transitions();
}

/** MSE after H open-loop replayed steps ('mean' members) and of predicting no change, over windows every 10 steps. */
export async function replayError(model: EnsembleModel, test: SimData, H: number): Promise<{ model: number; baseline: number; windows: number }> {
  const D = test.dObs, A = test.dAct;
  const starts = test.episodes.flatMap((e, ei) => Array.from({ length: Math.max(0, Math.floor((e.rewards.length - H) / 10) + 1) }, (_, s) => [ei, 10 * s] as const));
  const N = starts.length;
  const s0 = new Float32Array(N * D), truth = new Float32Array(N * D);
  starts.forEach(([ei, t0], i) => {
    s0.set(test.episodes[ei]!.states.subarray(t0 * D, (t0 + 1) * D), i * D);
    truth.set(test.episodes[ei]!.states.subarray((t0 + H) * D, (t0 + H + 1) * D), i * D);
  });
  const env = new ModelEnv(model, { members: 'mean' });
  let obs = env.reset(s0);
  for (let t = 0; t < H; t++) {
    const a = new Float32Array(N * A);
    starts.forEach(([ei, t0], i) => a.set(test.episodes[ei]!.actions.subarray((t0 + t) * A, (t0 + t + 1) * A), i * A));
    obs = (await env.step(a)).obs;
  }
  await env.release();
  const mse = (p: Float32Array) => p.reduce((acc, v, k) => acc + (v - truth[k]!) ** 2, 0) / (N * D);
  return { model: mse(obs), baseline: mse(s0), windows: N };
}
