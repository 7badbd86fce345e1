// Demonstrations and evaluation on a sim/ env for policies of the one interface: the scripted expert's
// episodes with the env's camera images and instructions (behaviour cloning data), and the success rate
// of a policy acting on the same observations.
import { Rng } from '../nn/index.js';
import { MjEnv, type Env, type EvaluationSplit, type Obs } from '../sim/index.js';
import type { Demonstrations } from './bc.js';
import type { Policy, PolicyContext } from './types.js';

/** `episodes` scripted-expert episodes from seeds seed0, seed0+1, …; images when the env renders them. */
export function expertDemonstrations(env: Env, episodes: number, seed0 = 0): Demonstrations & { successes: number } {
  return expertDemonstrationsOn(env, Array.from({ length: episodes }, (_, ep) => seed0 + ep));
}

/** Scripted-expert episodes from the given seeds (a split's training seeds, sim/split.ts). */
export function expertDemonstrationsOn(env: Env, seeds: readonly number[]): Demonstrations & { successes: number } {
  const obs: number[] = [], action: number[] = [], instructions: string[] = [];
  const images: Uint8Array[] = [];
  let successes = 0;
  for (const seed of seeds) {
    let o: Obs = env.reset(seed);
    const expert = env.expert();
    for (;;) {
      const a = expert.act(o);
      obs.push(...o.state);
      action.push(...a);
      instructions.push(o.instruction);
      if (o.image) images.push(o.image);
      const r = env.step(a);
      o = r.obs;
      if (r.terminated || r.truncated) {
        if (r.info.success) successes++;
        break;
      }
    }
  }
  const px = images[0]?.length ?? 0;
  const all = new Uint8Array(images.length * px);
  images.forEach((im, i) => all.set(im, i * px));
  return { obs: Float32Array.from(obs), action: Float32Array.from(action), instructions, ...(px ? { images: all } : {}), successes };
}

/** The context of one observation for a policy that reads images and instructions. */
export const contextOf = (o: Obs): PolicyContext => ({ ...(o.image ? { images: o.image } : {}), instructions: [o.instruction] });

/** Success rate of the policy's mean action (batch 1, as a robot runs it) over seeds seed0, seed0+1, … */
export async function evaluatePolicy(env: Env, policy: Policy, episodes: number, seed0: number): Promise<{ success: number; steps: number }> {
  return evaluateOn(env, policy, Array.from({ length: episodes }, (_, ep) => seed0 + ep));
}

/**
 * A policy on a split's two held-out sets (sim/split.ts), each measured on its own: new start states of
 * the (instruction, target region) combinations it was trained on, and the combinations held out of training.
 */
export async function evaluateHeldOut(env: Env, policy: Policy, split: EvaluationSplit): Promise<{ heldOutStates: EvalResult; heldOutCombinations: EvalResult }> {
  if (env.task !== split.task) throw new Error(`evaluateHeldOut: the split is of task '${split.task}', the env runs '${env.task}'`);
  return { heldOutStates: await evaluateOn(env, policy, split.heldOutStates), heldOutCombinations: await evaluateOn(env, policy, split.heldOutCombinations) };
}

export interface EvalResult {
  /** Fraction of episodes that ended in success. */
  success: number;
  /** Mean over episodes of the summed reward (the task's dense signal). */
  return: number;
  episodes: number;
  steps: number;
  /** Per episode, in the order of the seeds: 1 success, 0 not (paired comparisons of two policies on the same seeds). */
  outcomes: number[];
  /** With shuffled instructions: per episode, 1 where the instruction drawn was the episode's own; and how many the task has. */
  shuffled?: { matched: number[]; choices: number };
}

export interface EvalOptions {
  /**
   * Give the policy, for each episode, an instruction drawn uniformly from the task's (the env's) in place of the
   * episode's own, drawn in the order of the seeds from `seed`: every policy evaluated on the same seeds gets the same
   * draws. Success is still the episode's own goal's, so a policy that follows what it is told falls to chance.
   */
  shuffleInstructions?: { seed: number };
}

/** Success rate of the policy's mean action (batch 1, as a robot runs it) over the given seeds. */
export async function evaluateOn(env: Env, policy: Policy, seeds: readonly number[], opts: EvalOptions = {}): Promise<EvalResult> {
  if (policy.chunk !== 1) throw new Error('evaluatePolicy: runs one action per step (chunk 1)');
  if (!seeds.length) throw new Error('evaluatePolicy: no seeds to evaluate on');
  const choices = env.observationSpace.instructions;
  const draw = opts.shuffleInstructions ? new Rng(opts.shuffleInstructions.seed) : null;
  if (draw && choices.length < 2) throw new Error(`evaluatePolicy: shuffled instructions need a task with 2 or more, ${env.task} has ${choices.length}`);
  let ok = 0, steps = 0, ret = 0;
  const outcomes: number[] = [], matched: number[] = [];
  const zero = new Float32Array(policy.actDim);
  for (const seed of seeds) {
    let o = env.reset(seed);
    const given = draw ? choices[draw.int(choices.length)]! : null;
    if (given !== null) matched.push(given === o.instruction ? 1 : 0);
    for (;;) {
      const { mean } = await policy.act(o.state, zero, contextOf(given === null ? o : { ...o, instruction: given }));
      const r = env.step(mean);
      steps++;
      ret += r.reward;
      o = r.obs;
      if (r.terminated || r.truncated) {
        if (r.info.success) ok++;
        outcomes.push(r.info.success ? 1 : 0);
        break;
      }
    }
  }
  return { success: ok / seeds.length, return: ret / seeds.length, episodes: seeds.length, steps, outcomes, ...(draw ? { shuffled: { matched, choices: choices.length } } : {}) };
}

/**
 * Per episode, what a policy that follows the instruction it is given would score under `shuffled`'s draws: its
 * outcome on the episode's own instruction (`own`: the same policy on the same seeds, instructions unshuffled) where
 * the draw was that instruction, else 0 (it heads for another goal). Their mean is chance: about the policy's own
 * success over the number of the task's instructions.
 */
export function chanceOutcomes(own: EvalResult, shuffled: EvalResult): number[] {
  if (!shuffled.shuffled) throw new Error('chanceOutcomes: the second evaluation did not shuffle its instructions');
  const m = shuffled.shuffled.matched;
  if (m.length !== own.outcomes.length) throw new Error(`chanceOutcomes: ${own.outcomes.length} episodes with their own instructions, ${m.length} shuffled: evaluate both on the same seeds`);
  return own.outcomes.map((x, i) => x * m[i]!);
}

/** One rollout of a policy under given noise (noisedRollout): per step what was sent, applied and scored. */
export interface NoisedRollout {
  /** The observations' states, the one after the last step included: (T+1) x D. */
  states: Float32Array;
  /** T x A: the commands sent (the policy's samples clipped to the action space). */
  actions: Float32Array;
  /** T x A: what the actuators applied (StepResult info.appliedAction). */
  applied: Float32Array;
  /** T: the reward of each step, and whether the task counted as solved after it (1 or 0). */
  rewards: Float32Array;
  success: Float32Array;
  return: number;
  /** Whether the last step left the task solved. */
  succeeded: boolean;
}

/**
 * One rollout of `policy` on `env` from start seed `seed`, at most H steps: at step t the policy's sample under row t
 * of `noise` (H x A), clipped to the action space. `reseed`: the env's sensor noise and control jitter drawn from it
 * from the first step on (the same start observation), which a MuJoCo env allows. `context`: what the policy reads
 * beside the state (default: the observation's image and instruction).
 */
export async function noisedRollout(env: Env, policy: Policy, seed: number, noise: Float32Array, H: number, o: { reseed?: number; context?: (ob: Obs) => PolicyContext } = {}): Promise<NoisedRollout> {
  const A = policy.actDim, lo = env.actionSpace.low, hi = env.actionSpace.high;
  if (noise.length < H * A) throw new Error(`noisedRollout: ${noise.length} noise entries for ${H} steps of ${A} actions`);
  let ob = env.reset(seed);
  if (o.reseed !== undefined) {
    if (!(env instanceof MjEnv)) throw new Error(`noisedRollout: reseeding the sensor noise needs a MuJoCo env; ${env.task}'s is not one`);
    env.reseedNoise(o.reseed);
  }
  const states: number[] = [...ob.state], actions: number[] = [], applied: number[] = [], rewards: number[] = [], success: number[] = [];
  let ret = 0, succeeded = false;
  for (let t = 0; t < H; t++) {
    const { action } = await policy.act(ob.state, noise.subarray(t * A, (t + 1) * A), (o.context ?? contextOf)(ob));
    const a = action.map((v, j) => Math.max(lo[j]!, Math.min(hi[j]!, v)));
    const s = env.step(a);
    ret += s.reward;
    succeeded = !!s.info.success;
    ob = s.obs;
    states.push(...ob.state);
    actions.push(...a);
    applied.push(...s.info.appliedAction);
    rewards.push(s.reward);
    success.push(succeeded ? 1 : 0);
    if (s.terminated || s.truncated) break;
  }
  return { states: Float32Array.from(states), actions: Float32Array.from(actions), applied: Float32Array.from(applied), rewards: Float32Array.from(rewards), success: Float32Array.from(success), return: ret, succeeded };
}
