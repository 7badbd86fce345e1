// Standard GRPO for the research agent: every proposal of every group is executed in the sandbox,
// and its real score forms the advantages. The baseline train_wmrl.ts changes; diff the two files.
import { Rng } from '../nn/rng.js';
import { DEFAULT_GRPO_CONFIG, StandardGrpo } from '../wmrl/grpo.js';
import { ProposalPolicy, type ResearchRollout } from './agent.js';
import type { Executor } from './sandbox.js';
import { SandboxScorer } from './scorers.js';
import type { Proposal, ResearchTask } from './task.js';

// ---- arguments ----------------------------------------------------------------------------------

export interface ResearchTrainArgs {
  task: ResearchTask;
  /** The sandbox pool (or remote slots): real execution. */
  executor: Executor;
  /** Prompts: one policy head each (e.g. datasets); default one. */
  contexts?: string[];
  steps: number;
  groupsPerStep: number;
  groupSize: number;
  lr: number;
  seed: number;
  /** Stop before a step once this much sandbox-slot time (s) is spent. */
  slotBudgetS?: number;
  onStep?: (log: ResearchStepLog, policy: ProposalPolicy) => void | Promise<void>;
}

export interface ResearchStepLog {
  step: number;
  /** Sandbox-slot time spent so far (every real execution, warm-up included), s. */
  slotSeconds: number;
  /** CPU time of those executions, s (SandboxOutcome.cpuMs). */
  cpuSeconds: number;
  executions: number;
  failedExecutions: number;
  /** The greedy proposal of the first context after this step's update. */
  greedy: Proposal;
  entropy: number;
  /** Mean of the scores the step's advantages came from (real here). */
  meanScore: number;
  anchorFraction: number;
  biasReduction: number | null;
  anchorWeight: number;
}

export interface ResearchTrainResult {
  policy: ProposalPolicy;
  log: ResearchStepLog[];
}

export async function trainStandard(args: ResearchTrainArgs): Promise<ResearchTrainResult> {
  const contexts = args.contexts ?? ['default'];
  const rng = new Rng(args.seed * 7919 + 17);

  // ---- real execution and the GRPO step -------------------------------------------------------
  const real = new SandboxScorer(args.executor, args.task);
  // A proposal that crashes or times out comes back unscored (null); an exception is a broken sandbox and stops the run.
  const grpo = new StandardGrpo<ResearchRollout>({ ...DEFAULT_GRPO_CONFIG, maxInFlight: args.executor.capacity }, real);

  // ---- policy -------------------------------------------------------------------------------
  const policy = new ProposalPolicy(args.task);
  const log: ResearchStepLog[] = [];

  // ---- training loop ------------------------------------------------------------------------
  for (let step = 0; step < args.steps; step++) {
    if (args.slotBudgetS !== undefined && real.slotMs / 1000 >= args.slotBudgetS) break;
    const groups: ResearchRollout[][] = [];
    for (let b = 0; b < args.groupsPerStep; b++) {
      const ctx = contexts[b % contexts.length]!;
      groups.push(Array.from({ length: args.groupSize }, () => policy.sample(ctx, rng)));
    }
    const res = await grpo.step(groups);
    real.takeExecuted();
    policy.update(groups, res.advantages, res.weights, args.lr);

    const scored = res.scores.flat().filter((x): x is number => x !== null);
    const entry: ResearchStepLog = {
      step,
      slotSeconds: real.slotMs / 1000,
      cpuSeconds: real.cpuMs / 1000,
      executions: real.executions,
      failedExecutions: real.failures,
      greedy: policy.greedy(contexts[0]!),
      entropy: policy.entropy(contexts[0]!),
      meanScore: scored.length ? scored.reduce((a, b) => a + b, 0) / scored.length : Number.NaN,
      anchorFraction: res.log.anchorFraction,
      biasReduction: res.log.biasReduction,
      anchorWeight: res.log.anchorWeight,
    };
    log.push(entry);
    await args.onStep?.(entry, policy);
  }
  return { policy, log };
}
