// GRPO group advantages: each group's scores standardized (or only centred) within the group.
// An unscored rollout (null: timeout, robot fault) is excluded, never scored 0, and a group with
// fewer than 2 scored rollouts carries no comparison, so it is skipped.

/** A rollout's scalar score; null means unscored and is excluded. */
export type Score = number | null;

export interface AdvantageConfig {
  /** Subtract the group mean only, without dividing by the group std. Default false. */
  centreOnly: boolean;
  /** Added to the std before dividing, so a degenerate group gives zeros, not NaN. */
  eps: number;
}

/**
 * The rollouts scored on both sides of a pair of score lists (world model and real, aligned):
 * `a` and `b` hold their scores in order; a rollout unscored on either side is left out.
 */
export function scoredPairs(x: readonly Score[], y: readonly Score[]): { a: number[]; b: number[] } {
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < y.length; i++) {
    const u = x[i];
    const v = y[i];
    if (u === null || u === undefined || v === null || v === undefined) continue;
    a.push(u);
    b.push(v);
  }
  return { a, b };
}

export const DEFAULT_ADVANTAGE_CONFIG: AdvantageConfig = { centreOnly: false, eps: 1e-8 };

export interface GroupAdvantages {
  /** [group][rollout]; null for excluded rollouts and for every rollout of a skipped group. */
  advantages: Score[][];
  /** Groups with at least 2 scored rollouts. */
  scoredGroups: number;
  /** Groups with fewer than 2 scored rollouts. */
  skippedGroups: number;
  /** Unscored rollouts, over all groups. */
  excludedRollouts: number;
}

/**
 * Advantages of one group (length G in, length G out), or null when fewer than 2 rollouts are
 * scored. Standardization uses the population std of the scored rollouts.
 */
export function groupAdvantage(scores: readonly Score[], cfg: AdvantageConfig = DEFAULT_ADVANTAGE_CONFIG): Score[] | null {
  let n = 0;
  let sum = 0;
  for (const s of scores) if (s !== null) { n++; sum += s; }
  if (n < 2) return null;
  const mean = sum / n;
  let ss = 0;
  for (const s of scores) if (s !== null) ss += (s - mean) ** 2;
  const scale = cfg.centreOnly ? 1 : 1 / (Math.sqrt(ss / n) + cfg.eps);
  return scores.map((s) => (s === null ? null : (s - mean) * scale));
}

/** Advantages of every group; `scores` is [group][rollout], groups may differ in size. */
export function groupAdvantages(
  scores: ReadonlyArray<readonly Score[]>,
  cfg: AdvantageConfig = DEFAULT_ADVANTAGE_CONFIG,
): GroupAdvantages {
  let scoredGroups = 0;
  let skippedGroups = 0;
  let excludedRollouts = 0;
  const advantages = scores.map((g) => {
    for (const s of g) if (s === null) excludedRollouts++;
    const a = groupAdvantage(g, cfg);
    if (a === null) {
      skippedGroups++;
      return g.map(() => null);
    }
    scoredGroups++;
    return a;
  });
  return { advantages, scoredGroups, skippedGroups, excludedRollouts };
}
