// Running a task's scripted expert: success rates and demonstrations.
import type { DerivedEntries } from '../common/derived.js';
import { Rng } from '../nn/rng.js';
import { CONTEXT_NAMES, profileContext, randomProfile } from './profiles.js';
import { makeEnv, resolveProfile } from './registry.js';
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

// Exploratory data (world-model fitting, tests, benches): the expert's path and what lies around it.

export interface ExploratoryEpisode {
  /** Shape (T+1) x dObs. */
  states: Float32Array;
  /** Shape T x dAct. */
  actions: Float32Array;
  rewards: Float32Array;
  success: Float32Array;
  /** With randomized profiles: the episode's context (sim/profiles.ts CONTEXT_NAMES). */
  context?: Float32Array;
}

export interface ExploratoryData {
  dObs: number;
  dAct: number;
  episodes: ExploratoryEpisode[];
  obsNames: string[];
  /** With randomized profiles: the names of each episode's context entries. */
  contextNames?: readonly string[];
  /** The identities the task's state vector keeps (Env.derived), when it declares them. */
  derived?: DerivedEntries;
}

/**
 * `episodes` episodes of `task` under `profile` from seeds seed0, seed0+1, ...; every third is random
 * (a slowly drifting action), the rest the expert with Gaussian noise (std 0.3) and 20% random steps.
 * Episodes end at the task's success or horizon, or after `maxSteps`.
 * `randomize` (a spread ≥ 1): every episode runs under its own profile, the context parameters drawn
 * log-uniformly in [1/spread, spread] around `profile` (randomProfile), and carries that context.
 */
export async function exploratoryEpisodes(task: string, episodes: number, seed0: number, opts: { profile?: string; maxSteps?: number; randomize?: number; commandHistory?: number } = {}): Promise<ExploratoryData> {
  const base = resolveProfile(opts.profile ?? 'nominal');
  const commandHistory = opts.commandHistory;
  const shared = opts.randomize === undefined ? await makeEnv({ task, profile: base, commandHistory }) : null;
  let dims: { dObs: number; dAct: number; obsNames: string[]; derived?: DerivedEntries } | null = null;
  const out: ExploratoryEpisode[] = [];
  try {
    for (let ep = 0; ep < episodes; ep++) {
      const profile = opts.randomize === undefined ? null : randomProfile(new Rng((seed0 + ep) * 104_729 + 3), opts.randomize, base, `random-${seed0 + ep}`);
      const env = shared ?? await makeEnv({ task, profile: profile!, commandHistory });
      try {
        dims ??= { dObs: env.observationSpace.state.shape[0], dAct: env.actionSpace.shape[0], obsNames: env.observationSpace.state.names, ...(env.derived ? { derived: env.derived } : {}) };
        out.push({ ...exploratoryEpisode(env, ep, seed0 + ep, opts.maxSteps), ...(profile ? { context: profileContext(profile) } : {}) });
      } finally {
        if (!shared) env.dispose();
      }
    }
  } finally {
    shared?.dispose();
  }
  if (!dims) throw new Error('exploratoryEpisodes: episodes must be at least 1');
  return { ...dims, episodes: out, ...(opts.randomize === undefined ? {} : { contextNames: CONTEXT_NAMES }) };
}

/** Episode `ep` of an exploratory run (see exploratoryEpisodes) from `seed`. */
function exploratoryEpisode(env: Env, ep: number, seed: number, maxSteps?: number): ExploratoryEpisode {
  const dObs = env.observationSpace.state.shape[0];
  const dAct = env.actionSpace.shape[0];
  const rng = new Rng(seed * 7919 + 1);
  let obs = env.reset(seed);
  const expert = env.expert();
  const random = ep % 3 === 2;
  const drift = Float32Array.from({ length: dAct }, () => rng.uniform(-1, 1));
  const states = [obs.state];
  const actions: Float32Array[] = [];
  const rewards: number[] = [];
  const success: number[] = [];
  for (let t = 0; t < (maxSteps ?? env.horizon); t++) {
    let a: Float32Array;
    if (random) {
      for (let i = 0; i < dAct; i++) drift[i] = Math.max(-1, Math.min(1, 0.9 * drift[i]! + 0.45 * rng.normal()));
      a = drift.slice();
    } else if (rng.next() < 0.2) a = Float32Array.from({ length: dAct }, () => rng.uniform(-1, 1));
    else a = expert.act(obs).map((v) => Math.max(-1, Math.min(1, v + 0.3 * rng.normal())));
    const r = env.step(a);
    actions.push(a);
    rewards.push(r.reward);
    success.push(r.info.success ? 1 : 0);
    states.push(r.obs.state);
    obs = r.obs;
    if (r.terminated || r.truncated) break;
  }
  const flat = (rows: Float32Array[], w: number) => {
    const f = new Float32Array(rows.length * w);
    rows.forEach((r, i) => f.set(r, i * w));
    return f;
  };
  return { states: flat(states, dObs), actions: flat(actions, dAct), rewards: Float32Array.from(rewards), success: Float32Array.from(success) };
}
