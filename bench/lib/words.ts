// Words the learning benches' reports share (bench embodied, bench vla): seeds, paired verdicts, whether a correction
// acted, and what WMRL's Corrector did. Apart from stats.ts, whose figures every report's key depends on.
import { verdict, type Interval } from './stats.js';
/** "seed 3", "seeds 1, 2". */
export const seedList = (xs: ReadonlyArray<number>) => `${xs.length === 1 ? 'seed' : 'seeds'} ${xs.join(', ')}`;

/** A paired difference in words: "<who> better" or "<who> worse" only where its interval excludes 0. */
export const said = (d: Interval, who: string) => (verdict(d) === 'beats' ? `${who} better` : verdict(d) === 'worse' ? `${who} worse` : 'no difference shown');

/** Whether a correction acted over a run's seeds, in words: on every seed, on none (then `did`), or the seeds it never did. */
export const acted = (seeds: readonly number[], never: readonly number[], what: string, did: string) =>
  never.length === seeds.length ? `${what} never acted on any seed: ${did}` : never.length ? `${what} never acted on ${seedList(never)} (${did} there)` : `${what} acted on every seed`;

/** What WMRL's Corrector did at one seed, from its run rows. */
export interface Corrections {
  anchorsPerUpdate: number;
  /** Anchor groups over the update's groups, averaged over updates. */
  anchorShare: number;
  weightEnd: number;
  weightMax: number;
  /** The denoiser up-weighted the anchors on some update. */
  denoised: boolean;
  /** First update whose world-model scores a debias map calibrated; null: none. */
  mapFrom: number | null;
  /** The map's latest held-out bias reduction; null: never measured. */
  biasReduction: number | null;
}
