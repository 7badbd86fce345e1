// The two scorers the wmrl/ core consumes, for research rollouts: real execution in the sandbox
// (the trusted scorer, scarce) and the outcome world model (cheap). Library code; the trainers
// (train_standard.ts, train_wmrl.ts) only wire them.
import type { Score } from '../wmrl/advantages.js';
import type { WorldModelScorer, WorldModelScores } from '../wmrl/corrector.js';
import type { TrustedScorer } from '../wmrl/trusted.js';
import type { ResearchRollout } from './agent.js';
import type { Rng } from '../nn/rng.js';
import type { OutcomeModel } from './outcome-model.js';
import type { Executor } from './sandbox.js';
import { execute, type Executed, type ResearchTask } from './task.js';

/** Executes every rollout of a group in the sandbox (in parallel over its slots); unscored runs are null. */
export class SandboxScorer implements TrustedScorer<ResearchRollout> {
  /** Slot time spent, ms, whole run. */
  slotMs = 0;
  /** CPU time charged, ms, whole run. */
  cpuMs = 0;
  executions = 0;
  failures = 0;
  /** Executed rollouts not yet taken by `takeExecuted` (the outcome model's new training data). */
  private fresh: Array<{ rollout: ResearchRollout; result: Executed }> = [];

  constructor(private readonly executor: Executor, private readonly task: ResearchTask) {}

  async score(rollouts: readonly ResearchRollout[]): Promise<Score[]> {
    const results = await Promise.all(rollouts.map((r) => execute(this.executor, this.task, r.proposal, r.seed)));
    results.forEach((res, i) => {
      this.slotMs += res.slotMs;
      this.cpuMs += res.cpuMs;
      this.executions++;
      if (res.score === null) this.failures++;
      this.fresh.push({ rollout: rollouts[i]!, result: res });
    });
    return results.map((r) => r.score);
  }

  takeExecuted(): Array<{ rollout: ResearchRollout; result: Executed }> {
    const out = this.fresh;
    this.fresh = [];
    return out;
  }
}

/**
 * The outcome model's predictions as world-model scores, with its epistemic variance. With
 * `thompson` each step's scores are one joint draw from the model's posterior instead of its mean:
 * where the model is unsure, the draws disagree from step to step, so the policy keeps trying
 * those fields' choices (and its anchors execute them) instead of settling on the mean's argmax.
 */
export class OutcomeScorer implements WorldModelScorer<ResearchRollout> {
  constructor(
    private readonly model: OutcomeModel,
    private readonly features: (r: ResearchRollout) => Float32Array,
    /** Thompson sampling with this rng: each step's scores are one joint posterior draw. */
    private readonly thompson: Rng | null = null,
  ) {
    if (thompson && !model.sample) throw new Error('thompson sampling needs an outcome model with a posterior (sample)');
  }

  async score(groups: ReadonlyArray<readonly ResearchRollout[]>): Promise<WorldModelScores[]> {
    const flat = groups.flat();
    const x = flat.map(this.features);
    const pred = await this.model.predict(x);
    const drawn = this.thompson ? await this.model.sample!(x, this.thompson) : null;
    let k = 0;
    return groups.map((g) => {
      const at = k;
      const p = pred.slice(k, (k += g.length));
      return {
        scores: p.map((q, i) => (drawn ? drawn[at + i]! : q.mean)),
        variance: p.map((q) => q.variance),
      };
    });
  }
}
