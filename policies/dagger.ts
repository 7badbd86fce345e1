// Behaviour cloning with DAgger, for any policy kind (the Gaussian MLP over the state, the VLA over camera and
// instruction): demonstrations recorded on the robot itself, as teleoperated demonstrations are.
import { Rng } from '../nn/index.js';
import type { Env } from '../sim/index.js';
import { behaviourClone, type BcOptions } from './bc.js';
import { contextOf } from './demos.js';
import type { Policy } from './types.js';

/**
 * Behaviour cloning from demonstrations recorded on `env` by its robust demonstrator: round 0 executes the
 * demonstrator with noise injected (the clone sees recovery states), later rounds (DAgger) execute the clone's mean
 * plus the same noise; every visited step is labelled with the demonstrator's action (told what was executed instead,
 * so its latency prediction follows the robot), bounded to the action range the policy's mean lives in, with the
 * camera image and instruction it was taken on (an env made without a camera records none: for a policy over the
 * state alone). `make` builds the policy from the first demonstrations' observation normalization. Also counts how
 * many round-0 demonstrations succeeded. With `score` (higher is better), every round's clone is scored, and with
 * `keep: 'best'` the best round's weights are the ones returned (ties go to the earlier round); `keep: 'last'` returns
 * the last round's whatever the scores. `schedule`: each fit's step schedule (bc.ts BcOptions).
 */
export async function cloneWithDagger<P extends Policy>(make: (obsMean: number[], obsStd: number[]) => P, env: Env, latencySteps: number, seeds: readonly number[], rounds: number, episodesPerRound: number, epochs: number, onRound: (round: number) => void, score?: (policy: P) => Promise<number>, opts: { keep?: 'best' | 'last'; schedule?: BcOptions['schedule'] } = {}): Promise<{ policy: P; loss: number; steps: number; demoSuccess: number; scores: number[]; chosen: number }> {
  const keep = opts.keep ?? 'best';
  if (seeds.length <= rounds * episodesPerRound) throw new Error(`cloneWithDagger: ${seeds.length} seeds leave no demonstrations before ${rounds} DAgger rounds of ${episodesPerRound} episodes`);
  const rng = new Rng(17);
  const bound = (v: number) => Math.max(-1, Math.min(1, v));
  const obs: number[] = [], action: number[] = [], instructions: string[] = [], images: Uint8Array[] = [];
  const D = env.observationSpace.state.shape[0], zeros = new Float32Array(env.actionSpace.shape[0]);
  const camera = env.observationSpace.image !== undefined;
  let vla: P | null = null;
  let loss = NaN, next = 0, demoOk = 0, demoN = 0, chosen = rounds, best: Float32Array[] | null = null;
  const scores: number[] = [];
  for (let round = 0; round <= rounds; round++) {
    for (let ep = 0; ep < (round === 0 ? seeds.length - rounds * episodesPerRound : episodesPerRound); ep++) {
      let ob = env.reset(seeds[next++]!);
      const expert = env.demonstrator({ latencySteps });
      for (;;) {
        const a = expert.act(ob).map(bound);
        obs.push(...ob.state);
        action.push(...a);
        instructions.push(ob.instruction);
        if (camera) images.push(ob.image!);
        const base = vla ? (await vla.act(ob.state, zeros, contextOf(ob))).mean : a;
        const executed = base.map((v) => bound(v + 0.3 * rng.normal()));
        expert.executed(executed);
        const r = env.step(executed);
        ob = r.obs;
        if (r.terminated || r.truncated) {
          if (round === 0) {
            demoN++;
            if (r.info.success) demoOk++;
          }
          break;
        }
      }
    }
    if (!vla) {
      // The observation normalization from the first demonstrations (entries that never vary keep std 1).
      const M = obs.length / D, mean = new Array<number>(D).fill(0), sd = new Array<number>(D).fill(0);
      for (let i = 0; i < M; i++) for (let j = 0; j < D; j++) mean[j]! += obs[i * D + j]! / M;
      for (let i = 0; i < M; i++) for (let j = 0; j < D; j++) sd[j]! += (obs[i * D + j]! - mean[j]!) ** 2 / M;
      vla = make(mean, sd.map((v) => (v > 1e-8 ? Math.sqrt(v) : 1)));
    }
    const px = camera ? images[0]!.length : 0, all = camera ? new Uint8Array(images.length * px) : undefined;
    images.forEach((im, i) => all!.set(im, i * px));
    const roundLoss = await behaviourClone(vla, { obs: Float32Array.from(obs), action: Float32Array.from(action), ...(all ? { images: all } : {}), instructions }, { epochs: round === 0 ? epochs : Math.ceil(epochs / 2), batchSize: 128, seed: round, ...(opts.schedule ? { schedule: opts.schedule } : {}) });
    if (score) {
      scores.push(await score(vla));
      if (keep === 'last' ? round === rounds : round === 0 || scores[round]! > scores[chosen]!) {
        chosen = round;
        loss = roundLoss;
        best = vla.paramNames().map((n) => Float32Array.from(vla!.store.get(n).data));
      }
    } else loss = roundLoss;
    onRound(round);
  }
  if (best && chosen < rounds) vla!.paramNames().forEach((n, i) => vla!.store.set(n, best![i]!));
  return { policy: vla!, loss, steps: instructions.length, demoSuccess: demoOk / demoN, scores, chosen };
}
