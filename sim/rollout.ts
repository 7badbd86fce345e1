// Running a task's scripted expert: success rates and demonstrations.
import type { Env, Obs } from './types.js';

export interface Demo {
  instruction: string;
  states: Float32Array[];
  actions: Float32Array[];
  rewards: number[];
  success: boolean;
}

/** One expert episode from `seed`. */
export function expertEpisode(env: Env, seed: number): Demo {
  let obs: Obs = env.reset(seed);
  const expert = env.expert();
  const demo: Demo = { instruction: obs.instruction, states: [], actions: [], rewards: [], success: false };
  for (;;) {
    const a = expert.act(obs);
    demo.states.push(obs.state);
    demo.actions.push(a);
    const r = env.step(a);
    demo.rewards.push(r.reward);
    obs = r.obs;
    if (r.terminated || r.truncated) {
      demo.success = r.info.success;
      return demo;
    }
  }
}

/** Fraction of `episodes` expert episodes (seeds seed0, seed0+1, ...) that end in success. */
export function expertSuccess(env: Env, episodes: number, seed0 = 0): number {
  let ok = 0;
  for (let ep = 0; ep < episodes; ep++) if (expertEpisode(env, seed0 + ep).success) ok++;
  return ok / episodes;
}
