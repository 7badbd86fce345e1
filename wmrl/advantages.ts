// GRPO group advantages: each group's scores standardized (or only centred) within the group.
// An unscored rollout (null: timeout, robot fault) is excluded, never scored 0, and a group with
// fewer than 2 scored rollouts carries no comparison, so it is skipped.
//
// The std floor is relative to the score scale: a group is divided by std + eps·scale. An absolute
// floor (1e-8) lets a group whose scores nearly tie — a flat stretch or a clamped end of the debias
// map — come out with full-size advantages (spread 1e-6 → ±1), i.e. rounding noise steers the
// policy as hard as a real preference. With the floor at eps·scale, a spread far below the scale
// gives advantages ≈ spread / (eps·scale) instead, and because the floor moves with the scores,
// standardized advantages stay invariant under any positive affine change of the scores.

/** A rollout's scalar score; null means unscored and is excluded. */
export type Score = number | null;

export interface AdvantageConfig {
  /** Subtract the group mean only, without dividing by the group std. Default false. */
  centreOnly: boolean;
  /** Std floor relative to the score scale: groups are divided by std + eps·scale (see above). */
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

/**
 * eps 1e-3: a spread of 1e-6 on scores of scale ~0.3 gives |advantage| ≈ 0.003 (the reference's
 * absolute 1e-4 gives ≈ 0.01), while a typical group (std ≥ a tenth of the scale) shrinks ≤ 1%.
 */
export const DEFAULT_ADVANTAGE_CONFIG: AdvantageConfig = { centreOnly: false, eps: 1e-3 };

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

/** Population std of the scored values of `groups` pooled together (0 with fewer than 2). */
export function pooledStd(groups: ReadonlyArray<readonly Score[]>): number {
  let n = 0;
  let sum = 0;
  for (const g of groups) for (const s of g) if (s !== null) { n++; sum += s; }
  if (n < 2) return 0;
  const mean = sum / n;
  let ss = 0;
  for (const g of groups) for (const s of g) if (s !== null) ss += (s - mean) ** 2;
  return Math.sqrt(ss / n);
}

/**
 * Advantages of one group (length G in, length G out), or null when fewer than 2 rollouts are
 * scored. Standardization divides by the population std of the scored rollouts plus eps·`scale`.
 * `scale` is the score scale the group's spread is judged against; a lone group has none of its
 * own, so the default (its own std) makes the floor only a guard against 0/0: pass one.
 */
export function groupAdvantage(scores: readonly Score[], cfg: AdvantageConfig = DEFAULT_ADVANTAGE_CONFIG, scale?: number): Score[] | null {
  let n = 0;
  let sum = 0;
  for (const s of scores) if (s !== null) { n++; sum += s; }
  if (n < 2) return null;
  const mean = sum / n;
  let ss = 0;
  for (const s of scores) if (s !== null) ss += (s - mean) ** 2;
  const std = Math.sqrt(ss / n);
  const den = std + cfg.eps * (scale ?? std);
  const k = cfg.centreOnly ? 1 : den > 0 ? 1 / den : 0;
  return scores.map((s) => (s === null ? null : (s - mean) * k));
}

/**
 * Advantages of every group; `scores` is [group][rollout], groups may differ in size. `scale`:
 * the score scale of the std floor; by default the pooled std of every scored value in `scores`.
 */
export function groupAdvantages(
  scores: ReadonlyArray<readonly Score[]>,
  cfg: AdvantageConfig = DEFAULT_ADVANTAGE_CONFIG,
  scale: number = pooledStd(scores),
): GroupAdvantages {
  let scoredGroups = 0;
  let skippedGroups = 0;
  let excludedRollouts = 0;
  const advantages = scores.map((g) => {
    for (const s of g) if (s === null) excludedRollouts++;
    const a = groupAdvantage(g, cfg, scale);
    if (a === null) {
      skippedGroups++;
      return g.map(() => null);
    }
    scoredGroups++;
    return a;
  });
  return { advantages, scoredGroups, skippedGroups, excludedRollouts };
}
