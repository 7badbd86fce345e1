// Demonstrations and evaluation on a sim/ env for policies of the one interface: the scripted expert's
// episodes with the env's camera images and instructions (behaviour cloning data), and the success rate
// of a policy acting on the same observations.
import type { Env, Obs } from '../sim/index.js';
import type { Demonstrations } from './bc.js';
import type { Policy, PolicyContext } from './types.js';

/** `episodes` scripted-expert episodes from seeds seed0, seed0+1, …; images when the env renders them. */
export function expertDemonstrations(env: Env, episodes: number, seed0 = 0): Demonstrations & { successes: number } {
  const obs: number[] = [], action: number[] = [], instructions: string[] = [];
  const images: Uint8Array[] = [];
  let successes = 0;
  for (let ep = 0; ep < episodes; ep++) {
    let o: Obs = env.reset(seed0 + ep);
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
  if (policy.chunk !== 1) throw new Error('evaluatePolicy: runs one action per step (chunk 1)');
  let ok = 0, steps = 0;
  const zero = new Float32Array(policy.actDim);
  for (let ep = 0; ep < episodes; ep++) {
    let o = env.reset(seed0 + ep);
    for (;;) {
      const { mean } = await policy.act(o.state, zero, contextOf(o));
      const r = env.step(mean);
      steps++;
      o = r.obs;
      if (r.terminated || r.truncated) {
        if (r.info.success) ok++;
        break;
      }
    }
  }
  return { success: ok / episodes, steps };
}
