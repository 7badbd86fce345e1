// Anchor scheduler: which groups of a step are also executed for real.
// Both modes draw a fixed-size sample by systematic sampling over a shuffled order, which gives each
// group an exact, known inclusion probability; the prediction-powered interval (ppi.ts) needs that
// probability to stay unbiased when active mode samples unevenly.
import { Rng, type RngState } from './rng.js';

export type AnchorMode = 'random' | 'active';

export interface AnchorConfig {
  /** Expected fraction of a step's groups that become anchors. */
  fraction: number;
  /** Anchors per step at least (when slots allow). */
  floor: number;
  /** Anchors in flight at most: slots of the exclusive resource (robot, sandbox). */
  maxInFlight: number;
  /** random: uniform. active: probability grows with the world model's uncertainty. */
  mode: AnchorMode;
  /** Active mode: share of the selection probability spread uniformly, so no group has probability 0. */
  uniformMix: number;
}

export const DEFAULT_ANCHOR_CONFIG: AnchorConfig = {
  fraction: 0.1,
  floor: 1,
  maxInFlight: Number.POSITIVE_INFINITY,
  mode: 'random',
  uniformMix: 0.2,
};

export interface AnchorChoice {
  /** Indices of the chosen groups, ascending. */
  groups: number[];
  /** Inclusion probability of each chosen group, aligned with `groups`. */
  inclusion: number[];
  /** Anchors wanted before the in-flight cap. */
  wanted: number;
}

export interface AnchorSchedulerState {
  rng: RngState;
  groupsSeen: number;
  anchorsChosen: number;
}

/**
 * Inclusion probabilities (length n, summing to k, each ≤ 1) proportional to `weights`:
 * probabilities that would exceed 1 are set to 1 and the rest redistributed.
 */
export function inclusionProbabilities(weights: readonly number[], k: number): number[] {
  const n = weights.length;
  const pi = new Array<number>(n).fill(0);
  const capped = new Array<boolean>(n).fill(false);
  let left = k;
  for (;;) {
    let total = 0;
    for (let i = 0; i < n; i++) if (!capped[i]) total += weights[i]!;
    let changed = false;
    for (let i = 0; i < n; i++) {
      if (capped[i]) continue;
      pi[i] = total > 0 ? (left * weights[i]!) / total : 0;
      if (pi[i]! >= 1) { pi[i] = 1; capped[i] = true; left -= 1; changed = true; }
    }
    if (!changed || left <= 0) break;
  }
  return pi;
}

export class AnchorScheduler {
  private rng: Rng;
  private groupsSeen = 0;
  private anchorsChosen = 0;

  constructor(
    readonly cfg: AnchorConfig,
    seed: number,
  ) {
    if (!(cfg.fraction >= 0 && cfg.fraction <= 1)) throw new Error(`anchor fraction ${cfg.fraction} not in [0, 1]`);
    if (!(cfg.uniformMix > 0 && cfg.uniformMix <= 1)) throw new Error(`uniformMix ${cfg.uniformMix} not in (0, 1]`);
    this.rng = new Rng(seed);
  }

  /** Anchors chosen over groups seen so far. */
  get realizedFraction(): number {
    return this.groupsSeen ? this.anchorsChosen / this.groupsSeen : 0;
  }

  /**
   * Chooses this step's anchors among `numGroups` groups, `inFlight` anchors still running.
   * `uncertainty` (length numGroups, ≥ 0; e.g. mean ensemble variance of a group's world-model
   * scores) is required in active mode and ignored in random mode. `boost` (length numGroups, ≥ 1,
   * optional) multiplies a group's selection weight in either mode, e.g. for the groups of a context
   * the exploitation guard flagged; inclusion probabilities stay exact.
   */
  choose(numGroups: number, inFlight: number, uncertainty?: readonly number[], boost?: readonly number[]): AnchorChoice {
    const { cfg, rng } = this;
    this.groupsSeen += numGroups;
    const exact = cfg.fraction * numGroups;
    // Stochastic rounding keeps the expected count at fraction·n when n·fraction is not whole.
    let wanted = Math.floor(exact) + (rng.next() < exact - Math.floor(exact) ? 1 : 0);
    wanted = Math.min(numGroups, Math.max(wanted, cfg.floor));
    const k = Math.max(0, Math.min(wanted, cfg.maxInFlight - inFlight));
    if (k === 0) return { groups: [], inclusion: [], wanted };

    let weights: number[];
    if (cfg.mode === 'active') {
      if (!uncertainty || uncertainty.length !== numGroups) throw new Error('active anchors need one uncertainty per group');
      const total = uncertainty.reduce((s, u) => s + Math.max(u, 0), 0);
      weights = uncertainty.map((u) =>
        total > 0 ? (1 - cfg.uniformMix) * (Math.max(u, 0) / total) + cfg.uniformMix / numGroups : 1 / numGroups,
      );
    } else {
      weights = new Array<number>(numGroups).fill(1 / numGroups);
    }
    if (boost) {
      if (boost.length !== numGroups) throw new Error(`anchor boost has ${boost.length} entries for ${numGroups} groups`);
      weights = weights.map((w, i) => w * Math.max(1, boost[i]!));
    }
    const pi = inclusionProbabilities(weights, k);

    // Systematic sampling over a shuffled order: points u, u+1, …, u+k-1 on the cumulative π.
    const order = rng.shuffle(Array.from({ length: numGroups }, (_, i) => i));
    const u = rng.next();
    const chosen: number[] = [];
    let cum = 0;
    for (const i of order) {
      const lo = cum;
      cum += pi[i]!;
      if (Math.ceil(cum - u - 1e-12) - Math.ceil(lo - u - 1e-12) >= 1 && chosen.length < k) chosen.push(i);
    }
    chosen.sort((a, b) => a - b);
    this.anchorsChosen += chosen.length;
    return { groups: chosen, inclusion: chosen.map((i) => Math.min(1, pi[i]!)), wanted };
  }

  state(): AnchorSchedulerState {
    return { rng: this.rng.getState(), groupsSeen: this.groupsSeen, anchorsChosen: this.anchorsChosen };
  }

  restore(s: AnchorSchedulerState): void {
    this.rng = Rng.fromState(s.rng);
    this.groupsSeen = s.groupsSeen;
    this.anchorsChosen = s.anchorsChosen;
  }
}
