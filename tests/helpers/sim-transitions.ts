// Seeded sim episodes for world-model tests and the worldmodel bench: a task's scripted expert with action
// noise, mixed with smoothly varying random actions, so the data covers more than the expert's path.
import { exploratoryEpisodes, type ExploratoryData } from '../../sim/index.js';
import { TransitionBuffer, type Transitions } from '../../worldmodel/index.js';

export type SimData = ExploratoryData;
export const simEpisodes = exploratoryEpisodes;

/** The episodes' transitions, concatenated. */
export function toTransitions(d: SimData, weight = 1): Transitions {
  const buf = new TransitionBuffer(d.dObs, d.dAct);
  for (const e of d.episodes) buf.addEpisode({ ...e, weight });
  return buf.transitions();
}
