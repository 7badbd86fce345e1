// Real execution (robot episodes, sandbox runs) behind one interface, and what its failures do.
// The Corrector runs its anchor groups through it, standard GRPO (grpo.ts) every group; both stop
// a run the same way when real execution fails, so that neither can go on quietly without it.
import type { Score } from './advantages.js';

/** Real execution of one group (robot episodes, sandbox runs): scarce and slow. */
export interface TrustedScorer<R> {
  /**
   * Scores of `rollouts` (length G out); null = unscored (timeout, fault), excluded downstream.
   * Where real execution does not replay the rollout the world model scored (a robot policy samples
   * its own actions on the robot), return the world model's scores of what was actually executed
   * too (`PairedScores`), so that both scores of each anchor pair describe the same episode.
   */
  score(rollouts: readonly R[]): Promise<Score[] | PairedScores>;
}

/** Real scores with the world model's scores of the same executions (e.g. the recorded actions replayed open loop). */
export interface PairedScores {
  real: Score[];
  worldModel: Score[];
}

/**
 * What to do with one exception of the trusted scorer: `'throw'` stops the run with it (the
 * step that waits for the group rejects, or the next `step()` / `drain()` for a late one);
 * `'unscored'` treats it as an expected fault, like null scores: the group's rollouts are excluded.
 */
export type TrustedErrorPolicy = 'throw' | 'unscored';

export interface TrustedOptions<R> {
  /**
   * Called with every exception of the trusted scorer and the group it was scoring; its answer is
   * the policy for that failure. Without it every exception stops the run. An exception thrown by
   * `onTrustedError` itself stops the run with that exception.
   */
  onTrustedError?: (error: unknown, group: readonly R[]) => TrustedErrorPolicy;
}

/** The run stopped because real execution failed; `cause` is the scorer's exception when there was one. */
export class TrustedScorerError extends Error {
  override readonly name = 'TrustedScorerError';
}

const describeError = (e: unknown): string => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));

/** One group's real scores, and the world model's scores of the same executions when the scorer paired them. */
export interface TrustedScores {
  real: Score[];
  worldModel?: Score[];
}

/**
 * A TrustedScorer with the failure rules applied. `score` never rejects: an exception goes to the
 * caller's policy, 'throw' (the default) records the run's failure, which `throwIfFailed` then
 * throws on every call; 'unscored' makes the group's rollouts unscored. `maxFailed` groups in a row
 * without a scored rollout (thrown-and-unscored, or all null) fail the run too.
 */
export class TrustedExecution<R> {
  private failure: TrustedScorerError | null = null;
  private errorCount = 0;
  private streak = 0;

  /**
   * `maxFailed`: a positive integer (the caller validates it as part of its config); `groupName`
   * names the groups in the streak's error message ("anchor groups").
   */
  constructor(
    private readonly scorer: TrustedScorer<R>,
    private readonly maxFailed: number,
    private readonly groupName: string,
    private readonly onTrustedError: TrustedOptions<R>['onTrustedError'] = undefined,
  ) {}

  /** Exceptions the caller's policy kept as unscored, whole run. */
  get errors(): number {
    return this.errorCount;
  }

  /** Groups in a row, up to now, that came back without a scored rollout. */
  get failedStreak(): number {
    return this.streak;
  }

  /** Restores the counters (from a saved run). */
  restore(errors: number, failedStreak: number): void {
    this.errorCount = errors;
    this.streak = failedStreak;
  }

  /** Whether the run has failed (the next `throwIfFailed` throws). */
  get failed(): boolean {
    return this.failure !== null;
  }

  throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }

  async score(rollouts: readonly R[]): Promise<TrustedScores> {
    let scores: Score[];
    let worldModel: Score[] | undefined;
    let cause: unknown = null;
    try {
      const out = await this.scorer.score(rollouts);
      scores = Array.isArray(out) ? out : out.real;
      if (scores.length !== rollouts.length) throw new Error(`trusted scorer returned ${scores.length} scores for ${rollouts.length} rollouts`);
      if (!Array.isArray(out)) {
        worldModel = out.worldModel;
        if (worldModel.length !== rollouts.length) throw new Error(`trusted scorer returned ${worldModel.length} world-model pair scores for ${rollouts.length} rollouts`);
      }
    } catch (error) {
      let policy: TrustedErrorPolicy = 'throw';
      cause = error;
      if (this.onTrustedError) {
        try {
          policy = this.onTrustedError(error, rollouts);
        } catch (e) {
          cause = e;
        }
      }
      if (policy !== 'unscored') {
        this.failure ??= new TrustedScorerError(`real execution failed: ${describeError(cause)}`, { cause });
        return { real: rollouts.map(() => null) };
      }
      this.errorCount++;
      scores = rollouts.map(() => null);
    }
    if (scores.some((x) => x !== null)) {
      this.streak = 0;
    } else if (++this.streak >= this.maxFailed) {
      const last = cause === null ? 'the last one returned only null scores' : `the last one threw ${describeError(cause)}`;
      this.failure ??= new TrustedScorerError(
        `real execution keeps failing: ${this.streak} ${this.groupName} in a row came back without a scored rollout; ${last}`,
        cause === null ? undefined : { cause },
      );
    }
    return worldModel ? { real: scores, worldModel } : { real: scores };
  }
}
