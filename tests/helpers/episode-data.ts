// Deterministic episodes for the store and MCAP tests.

import type { ImageEncoding } from '../../common/robot.js';
import type { Episode, EpisodeMeta, EpisodeStep } from '../../episodes/types.js';
import { Rng } from '../../nn/rng.js';

/** Uniform numbers in [0, 1) from the project's seeded PRNG, so failures reproduce from the seed. */
export function rng(seed: number): () => number {
  const r = new Rng(seed);
  return () => r.next();
}

function hash(s: string): number {
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 16777619);
  return h >>> 0;
}

/** A step whose every value follows from (episode id, seq): the durability test re-derives it. */
export function makeStep(id: string, seq: number, last: boolean): EpisodeStep {
  const r = rng(hash(`${id}/${seq}`));
  const t = seq * 0.02;
  return {
    seq,
    tObs: t,
    tAct: t + 0.001,
    obs: {
      stamp: t,
      position: Float64Array.from({ length: 3 }, () => r() * 2 - 1),
      velocity: Float64Array.from({ length: 3 }, () => r() - 0.5),
    },
    action: Float32Array.from({ length: 2 }, () => r() * 2 - 1),
    reward: r(),
    done: last,
  };
}

export const meta = (id: string, extra?: Record<string, unknown>): EpisodeMeta => ({
  id,
  robot: 'arm-1',
  policyVersion: 'vla-0.3',
  hardwareProfile: 'stand-in',
  task: 'reach',
  instruction: 'touch the red cube',
  startedAt: 1_764_000_000_000,
  ...(extra ? { extra } : {}),
});

/** A full episode with features, an image on every step and an instruction. */
export function richEpisode(id: string, n: number, encoding: ImageEncoding = 'rgb8', seed = 1): Episode {
  const r = rng(seed);
  const steps: EpisodeStep[] = [];
  for (let seq = 0; seq < n; seq++) {
    // Stamps on whole nanoseconds, as a ROS clock gives them.
    const tObs = 1_700_000_000 + (seq * 50_000_000 + Math.floor(r() * 1000)) / 1e9;
    const w = 4;
    const h = 3;
    const data =
      encoding === 'rgb8'
        ? Uint8Array.from({ length: w * h * 3 }, () => Math.floor(r() * 256))
        : Uint8Array.from({ length: 20 + Math.floor(r() * 20) }, () => Math.floor(r() * 256));
    steps.push({
      seq,
      tObs,
      tAct: tObs + 0.002,
      obs: {
        stamp: tObs,
        position: Float64Array.from({ length: 4 }, () => r() * 6 - 3),
        velocity: Float64Array.from({ length: 4 }, () => r() * 2 - 1),
        features: Float32Array.from({ length: 5 }, () => r()),
        image: { width: w, height: h, encoding, data },
        instruction: 'touch the red cube',
      },
      action: Float32Array.from({ length: 4 }, () => r() * 2 - 1),
      reward: r(),
      done: seq === n - 1,
      ...(seq === n - 1 ? { success: true } : {}),
    });
  }
  return { meta: meta(id, { joints: ['j0', 'j1', 'j2', 'j3'], operator: 'lab' }), status: 'complete', steps };
}
