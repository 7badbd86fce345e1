// WMRL for the research agent: proposals are scored by the outcome world model, a thin stream of
// anchor groups is executed in the sandbox, and the wmrl/ Corrector debiases and reweights the
// world model's scores with them; the world model keeps learning from every executed anchor.
// The standard-GRPO twin is train_standard.ts; diff the two files.
import { Rng } from '../nn/rng.js';
import { Corrector, correctorConfig, type CorrectorOverrides } from '../wmrl/corrector.js';
import { ProposalPolicy, type ResearchRollout } from './agent.js';
import { DEFAULT_GP_CONFIG, DEFAULT_OUTCOME_CONFIG, EnsembleOutcomeModel, GpOutcomeModel, ordinalDim, ordinalFeatures, structuredDim, structuredFeatures, type GpOutcomeConfig, type OutcomeModel, type OutcomeModelConfig } from './outcome-model.js';
import { OutcomeScorer, SandboxScorer } from './scorers.js';
import { randomProposal } from './task.js';
import type { ResearchStepLog, ResearchTrainArgs, ResearchTrainResult } from './train_standard.js';

// ---- arguments ----------------------------------------------------------------------------------

export interface WmrlResearchArgs extends ResearchTrainArgs {
  /** The correction core's knobs (anchor fraction, debias, denoise, ...); `anchors.fraction: 0` with debias and denoise off is pure world model. */
  corrector: CorrectorOverrides;
  /** Random proposals executed before training, the outcome model's first data. */
  warmup: number;
  /**
   * The outcome world model: 'gp' (default: a Gaussian process, data-efficient from a handful of
   * executions) or 'ensemble' (MLP ensemble), and its config.
   */
  outcomeModel?: 'gp' | 'ensemble';
  outcome?: Partial<OutcomeModelConfig>;
  gp?: Partial<GpOutcomeConfig>;
  /** Proposal features: 'ordinal' (default: one-hot + thermometer code) or 'structured' (one-hot + ordinal position). */
  features?: 'structured' | 'ordinal';
  /**
   * World-model scores are one joint posterior draw per step (Thompson sampling), not the mean;
   * default on with the gp, which alone supports it. Keeps the policy trying what the model is
   * unsure of until anchors settle it, instead of collapsing onto the first data's argmax.
   */
  thompson?: boolean;
}

export async function trainWmrl(args: WmrlResearchArgs): Promise<ResearchTrainResult> {
  const contexts = args.contexts ?? ['default'];
  const rng = new Rng(args.seed * 7919 + 17);

  // ---- real execution, the outcome world model and the correction core -----------------------
  const real = new SandboxScorer(args.executor, args.task);
  const ordinal = (args.features ?? 'ordinal') === 'ordinal';
  const dim = (ordinal ? ordinalDim(args.task.fields) : structuredDim(args.task.fields)) + contexts.length;
  const features = (r: ResearchRollout): Float32Array => {
    const f = (ordinal ? ordinalFeatures : structuredFeatures)(args.task.fields, r.proposal, new Float32Array(dim));
    f[dim - contexts.length + contexts.indexOf(r.context)] = 1;
    return f;
  };
  const model: OutcomeModel = (args.outcomeModel ?? 'gp') === 'gp'
    ? new GpOutcomeModel(dim, { ...DEFAULT_GP_CONFIG, ...args.gp })
    : new EnsembleOutcomeModel(dim, { ...DEFAULT_OUTCOME_CONFIG, seed: args.seed, ...args.outcome });
  const learn = async () => {
    const done = real.takeExecuted().filter((e) => e.result.score !== null);
    if (done.length === 0) return;
    model.observe(done.map((e) => features(e.rollout)), done.map((e) => e.result.score!));
    await model.fit();
  };
  const corrector = new Corrector<ResearchRollout>(
    correctorConfig({ ...args.corrector, anchors: { maxInFlight: args.executor.capacity, ...args.corrector.anchors }, seed: args.seed }),
    new OutcomeScorer(model, features, (args.thompson ?? model.sample !== undefined) ? new Rng(args.seed * 104729 + 3) : null),
    real,
    // A proposal that crashes or times out comes back unscored (null); an exception is a broken sandbox and stops the run.
    { contextOf: (g) => g[0]!.context },
  );

  // ---- warm-up: the world model's first data --------------------------------------------------
  const warm: ResearchRollout[] = Array.from({ length: args.warmup }, (_, i) => {
    const context = contexts[i % contexts.length]!;
    const proposal = randomProposal(args.task, rng);
    return { context, proposal, choice: args.task.fields.map((f) => f.choices.indexOf(proposal[f.name]!)), seed: rng.int(args.task.seeds) };
  });
  if (warm.length) await real.score(warm);
  await learn();

  // ---- policy -------------------------------------------------------------------------------
  const policy = new ProposalPolicy(args.task);
  const log: ResearchStepLog[] = [];

  // ---- training loop ------------------------------------------------------------------------
  try {
    for (let step = 0; step < args.steps; step++) {
      if (args.slotBudgetS !== undefined && real.slotMs / 1000 >= args.slotBudgetS) break;
      const groups: ResearchRollout[][] = [];
      for (let b = 0; b < args.groupsPerStep; b++) {
        const ctx = contexts[b % contexts.length]!;
        groups.push(Array.from({ length: args.groupSize }, () => policy.sample(ctx, rng)));
      }
      const res = await corrector.step(groups);
      await learn();
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
    await corrector.drain();
  } finally {
    await model.release();
  }
  return { policy, log };
}
