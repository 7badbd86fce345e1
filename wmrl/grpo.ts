// Standard GRPO, the baseline the Corrector (corrector.ts) changes: every group of every step is
// executed for real, and its real scores form group-standardized advantages. No world model, no
// anchors, no calibration. The same TrustedScorer and failure rules as the Corrector's anchors
// (trusted.ts), and the same StepResult, so that a caller swaps one for the other.
import { groupAdvantages, DEFAULT_ADVANTAGE_CONFIG, type AdvantageConfig, type Score } from './advantages.js';
import type { StepResult } from './corrector.js';
import { TrustedExecution, type TrustedOptions, type TrustedScorer } from './trusted.js';

export interface GrpoConfig {
  /** Groups executing at once (slots of the robot or sandbox). */
  maxInFlight: number;
  advantages: AdvantageConfig;
  /**
   * Groups in a row that may come back without a single scored rollout (an exception the caller
   * chose to treat as unscored, or all null) before the run stops with a TrustedScorerError.
   */
  maxFailedGroups: number;
}

export const DEFAULT_GRPO_CONFIG: GrpoConfig = {
  maxInFlight: Number.POSITIVE_INFINITY,
  advantages: DEFAULT_ADVANTAGE_CONFIG,
  maxFailedGroups: 8,
};

export class StandardGrpo<R> {
  private readonly trusted: TrustedExecution<R>;
  private stepIndex = 0;
  private realExecutions = 0;
  private groupsSeen = 0;

  constructor(readonly cfg: GrpoConfig, trusted: TrustedScorer<R>, opts: TrustedOptions<R> = {}) {
    if (!(cfg.maxInFlight >= 1)) throw new Error('maxInFlight (trusted slots) must be ≥ 1');
    if (!(Number.isInteger(cfg.maxFailedGroups) && cfg.maxFailedGroups >= 1)) throw new Error(`maxFailedGroups ${cfg.maxFailedGroups} must be a positive integer`);
    this.trusted = new TrustedExecution(trusted, cfg.maxFailedGroups, 'groups', opts.onTrustedError);
  }

  /**
   * One training step over `groups` [group][rollout], at most `maxInFlight` groups executing at
   * once. Rejects with a TrustedScorerError when real execution failed (see `TrustedErrorPolicy`
   * and `maxFailedGroups`); the run cannot go on then.
   */
  async step(groups: ReadonlyArray<readonly R[]>): Promise<StepResult> {
    this.trusted.throwIfFailed();
    const step = this.stepIndex++;
    this.groupsSeen += groups.length;
    const real: Score[][] = new Array(groups.length);
    let next = 0;
    const worker = async () => {
      // Once real execution has failed the step rejects anyway: no further group is launched on the robot.
      while (next < groups.length && !this.trusted.failed) {
        const g = next++;
        real[g] = (await this.trusted.score(groups[g]!)).real;
      }
    };
    const slots = Math.min(groups.length, this.cfg.maxInFlight);
    await Promise.all(Array.from({ length: slots }, worker));
    this.trusted.throwIfFailed();
    for (const g of groups) this.realExecutions += g.length;

    const adv = groupAdvantages(real, this.cfg.advantages);
    // The Corrector's log with every group an anchor used at weight 1, and its other parts off.
    return {
      advantages: adv.advantages,
      weights: real.map((g) => g.map(() => 1)),
      source: real.map(() => 'real'),
      scores: real,
      log: {
        step,
        groups: groups.length,
        anchorsLaunched: groups.length,
        anchorsUsed: groups.length,
        anchorsAbsorbed: 0,
        inFlight: 0,
        anchorFraction: groups.length ? 1 : 0,
        realizedAnchorFraction: this.groupsSeen ? 1 : 0,
        realExecutions: this.realExecutions,
        calibrated: false,
        biasReduction: null,
        anchorWeight: 1,
        disagreement: null,
        scoredGroups: adv.scoredGroups,
        skippedGroups: adv.skippedGroups,
        excludedRollouts: adv.excludedRollouts,
        flaggedContexts: 0,
        distrustedGroups: 0,
        trueMean: null,
        trustedErrors: this.trusted.errors,
        failedAnchorStreak: this.trusted.failedStreak,
      },
    };
  }
}
