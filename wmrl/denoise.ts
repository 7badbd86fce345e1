// Inverse-Variance Denoising. After debiasing, the world model's error is noise that can only be
// averaged down. Anchor groups (exact) and world-model groups (noisy) estimate the same gradient;
// with V_wm = (1 + c·s²)·V_real the minimum-variance fusion up-weights anchor-group advantages by
// w = clip(1 + c·s², 1, w_max), s² being the world model's within-group disagreement with reality.
import { scoredPairs, type Score } from './advantages.js';

export interface DenoiseConfig {
  /** Half-life of the EWMA of s², in anchor groups. */
  halfLife: number;
  /** c is fixed once, after this many measured groups, so that w equals `targetWeight` then. */
  warmupGroups: number;
  targetWeight: number;
  maxWeight: number;
}

export const DEFAULT_DENOISE_CONFIG: DenoiseConfig = { halfLife: 64, warmupGroups: 64, targetWeight: 2, maxWeight: 4 };

export interface WeighterState {
  /** Unnormalized EWMA sums; the estimate is ewma / norm (bias-corrected start). */
  ewma: number;
  norm: number;
  groups: number;
  c: number | null;
}

/**
 * Within-group normalized disagreement of one anchor group: the variance of the centred residual
 * (calibrated − real) over the variance of the real scores. Inputs length G, null = unscored
 * (pairs need both). Returns null when fewer than 2 pairs or the real scores are all equal.
 */
export function normalizedDisagreement(calibrated: readonly Score[], real: readonly Score[], eps = 1e-12): number | null {
  const { a: c, b: r } = scoredPairs(calibrated, real);
  const e = c.map((x, i) => x - r[i]!);
  if (r.length < 2) return null;
  const variance = (xs: number[]) => {
    const m = xs.reduce((s, v) => s + v, 0) / xs.length;
    return xs.reduce((s, v) => s + (v - m) ** 2, 0) / xs.length;
  };
  const vr = variance(r);
  if (vr <= eps) return null;
  return variance(e) / vr;
}

export class InverseVarianceWeighter {
  private ewma = 0;
  private norm = 0;
  private groups = 0;
  private c: number | null = null;

  constructor(readonly cfg: DenoiseConfig = DEFAULT_DENOISE_CONFIG) {
    if (!(cfg.maxWeight >= cfg.targetWeight && cfg.targetWeight >= 1)) throw new Error('denoise config: need 1 ≤ targetWeight ≤ maxWeight');
  }

  /** The smoothed s², or null before any group was measured. */
  get s2(): number | null {
    return this.norm > 0 ? this.ewma / this.norm : null;
  }

  get scale(): number | null {
    return this.c;
  }

  get measuredGroups(): number {
    return this.groups;
  }

  /**
   * Feeds one anchor group's calibrated world-model scores and real scores (length G each), with
   * the group's selection weight π̄/π (> 0; 1 under uniform selection): the EWMA is a weighted
   * (Hájek) average, so uneven anchor selection does not bias s² towards the groups it favours.
   * Degenerate groups are skipped, never pushed as zero. Returns the group's s² or null if skipped.
   */
  update(calibrated: readonly Score[], real: readonly Score[], weight = 1): number | null {
    const s2 = normalizedDisagreement(calibrated, real);
    if (s2 === null) return null;
    const a = 1 - 0.5 ** (1 / this.cfg.halfLife);
    this.ewma = (1 - a) * this.ewma + a * weight * s2;
    this.norm = (1 - a) * this.norm + a * weight;
    this.groups++;
    if (this.c === null && this.groups >= this.cfg.warmupGroups) {
      const s = this.ewma / this.norm;
      // A world model that already agrees exactly with reality gives no reason to up-weight.
      if (s > 0) this.c = (this.cfg.targetWeight - 1) / s;
    }
    return s2;
  }

  /** The anchor-group weight: exactly 1 until c is fixed, then clip(1 + c·s², 1, w_max). */
  weight(): number {
    if (this.c === null) return 1;
    const w = 1 + this.c * (this.ewma / this.norm);
    return Math.min(this.cfg.maxWeight, Math.max(1, w));
  }

  state(): WeighterState {
    return { ewma: this.ewma, norm: this.norm, groups: this.groups, c: this.c };
  }

  restore(s: WeighterState): void {
    this.ewma = s.ewma;
    this.norm = s.norm;
    this.groups = s.groups;
    this.c = s.c;
  }
}

/**
 * Per-rollout weights of one world-model group from its ensemble variances (length G):
 * w_i ∝ 1/(v_i + floor), normalized to mean 1 over the scored rollouts so the group's total
 * weight is unchanged. Unscored rollouts (score null) and missing variances get weight 1;
 * `floor` keeps a near-zero variance from taking the whole group.
 */
export function ensembleWeights(variance: readonly Score[], scored: readonly boolean[], floor: number): number[] {
  const inv = variance.map((v, i) => (scored[i] && v !== null && Number.isFinite(v) ? 1 / (Math.max(v, 0) + floor) : null));
  const present = inv.filter((x): x is number => x !== null);
  if (present.length === 0) return variance.map(() => 1);
  const mean = present.reduce((s, x) => s + x, 0) / present.length;
  return inv.map((x) => (x === null ? 1 : x / mean));
}
