// Measurement baselines for `bench autoresearch`: random search and Gaussian-process Bayesian optimisation over the
// research task's proposal space, each stopped at a budget of sandbox CPU time and charged every execution's measured
// CPU time as the trainers are. They are yardsticks for the agent, not product features, so they live with the bench.
import { Rng } from '../../nn/rng.js';
import { DEFAULT_GP_CONFIG, GpOutcomeModel, ordinalDim, ordinalFeatures } from '../../autoresearch/outcome-model.js';
import type { Executor } from '../../autoresearch/sandbox.js';
import { execute, proposalKey, randomProposal, type Proposal, type ResearchTask } from '../../autoresearch/task.js';

export interface SearchArgs {
  task: ResearchTask;
  executor: Executor;
  seed: number;
  /** Stop before a round once this much sandbox CPU time (s) is spent. */
  cpuBudgetS: number;
  /** Proposals executed per round, in parallel over the executor's slots. */
  batch: number;
  /** Called after every round with the proposal the search recommends then (measuring it is not charged). */
  onRound?: (row: SearchRound) => void | Promise<void>;
}

export interface SearchRound {
  round: number;
  /** Sandbox-slot time spent so far, s. */
  slotSeconds: number;
  /** CPU time of those executions, s (what the budget is counted in). */
  cpuSeconds: number;
  executions: number;
  failedExecutions: number;
  recommended: Proposal;
}

/** Bayesian optimisation's acquisition: parallel Thompson draws, expected improvement, or an upper confidence bound (mean + 2 sd). */
export const ACQUISITIONS = ['thompson', 'ei', 'ucb'] as const;
export type Acquisition = (typeof ACQUISITIONS)[number];

export interface GpBoArgs extends SearchArgs {
  acquisition: Acquisition;
  /** Random proposals executed before the first model fit. */
  init: number;
  /** Thompson: candidates per draw (a fresh uniform sample of the space, plus every executed proposal); default 128. */
  candidates?: number;
}

/** What both searches keep of the executions: the charge, and every proposal's scores by key. */
class Executions {
  slotMs = 0;
  cpuMs = 0;
  executions = 0;
  failed = 0;
  readonly seen = new Map<string, { proposal: Proposal; scores: number[] }>();
  readonly xs: Proposal[] = [];
  readonly ys: number[] = [];

  constructor(private readonly args: SearchArgs) {
    if (!(args.cpuBudgetS > 0)) throw new Error(`search: CPU budget ${args.cpuBudgetS} s must be > 0`);
    if (!(Number.isInteger(args.batch) && args.batch >= 1)) throw new Error(`search: batch ${args.batch} must be a positive integer`);
  }

  /** CPU time spent, s. */
  get spentS(): number {
    return this.cpuMs / 1000;
  }

  /** Executes the proposals, each at a training seed drawn from `rng`, and records the scored ones. */
  async run(proposals: readonly Proposal[], rng: Rng): Promise<void> {
    const seeds = proposals.map(() => rng.int(this.args.task.seeds));
    const rs = await Promise.all(proposals.map((p, i) => execute(this.args.executor, this.args.task, p, seeds[i]!)));
    rs.forEach((r, i) => {
      this.slotMs += r.slotMs;
      this.cpuMs += r.cpuMs;
      this.executions++;
      if (r.score === null) {
        this.failed++;
        return;
      }
      const p = proposals[i]!;
      const k = proposalKey(this.args.task, p, 0);
      const s = this.seen.get(k) ?? { proposal: p, scores: [] };
      s.scores.push(r.score);
      this.seen.set(k, s);
      this.xs.push(p);
      this.ys.push(r.score);
    });
  }

  async report(round: number, recommended: Proposal): Promise<void> {
    await this.args.onRound?.({ round, slotSeconds: this.slotMs / 1000, cpuSeconds: this.spentS, executions: this.executions, failedExecutions: this.failed, recommended });
  }
}

/** The executed proposal with the highest mean observed score (the first such), or a fallback where none scored. */
function bestObserved(l: Executions, fallback: Proposal): Proposal {
  let best: { p: Proposal; m: number } | null = null;
  for (const { proposal, scores } of l.seen.values()) {
    const m = scores.reduce((a, b) => a + b, 0) / scores.length;
    if (!best || m > best.m) best = { p: proposal, m };
  }
  return best?.p ?? fallback;
}

/** Random search: `batch` uniformly random proposals a round until the budget is spent; recommends the best observed. */
export async function randomSearch(args: SearchArgs): Promise<SearchRound[]> {
  const rng = new Rng(args.seed * 7919 + 23);
  const l = new Executions(args);
  const rows: SearchRound[] = [];
  const first = randomProposal(args.task, rng);
  for (let round = 0; l.spentS < args.cpuBudgetS; round++) {
    const batch = round === 0 ? [first, ...Array.from({ length: args.batch - 1 }, () => randomProposal(args.task, rng))] : Array.from({ length: args.batch }, () => randomProposal(args.task, rng));
    await l.run(batch, rng);
    const row = { round, slotSeconds: l.slotMs / 1000, cpuSeconds: l.spentS, executions: l.executions, failedExecutions: l.failed, recommended: bestObserved(l, first) };
    rows.push(row);
    await l.report(round, row.recommended);
  }
  return rows;
}

/** Every proposal of the task's space where it has at most `cap` of them, else `cap` uniform draws. */
function candidatePool(task: ResearchTask, cap: number, rng: Rng): Proposal[] {
  const size = task.fields.reduce((n, f) => n * f.choices.length, 1);
  if (size > cap) return Array.from({ length: cap }, () => randomProposal(task, rng));
  let all: Proposal[] = [{}];
  for (const f of task.fields) all = all.flatMap((p) => f.choices.map((c) => ({ ...p, [f.name]: c })));
  return all;
}

/** Standard normal density and distribution function (Abramowitz–Stegun 7.1.26 for erf). */
const pdf = (z: number) => Math.exp(-0.5 * z * z) / Math.sqrt(2 * Math.PI);
function cdf(z: number): number {
  const x = Math.abs(z) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * x);
  const erf = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-x * x);
  return z >= 0 ? 0.5 * (1 + erf) : 0.5 * (1 - erf);
}

/**
 * GP Bayesian optimisation: `init` random proposals, then rounds of `batch` proposals chosen by the acquisition on a
 * Gaussian process (the outcome model WMRL uses: the same kernel, features and marginal-likelihood fit), refitted on
 * every execution so far. Recommends the executed proposal with the highest posterior mean.
 */
export async function gpBayesOpt(args: GpBoArgs): Promise<SearchRound[]> {
  if (!ACQUISITIONS.includes(args.acquisition)) throw new Error(`gp-bo: acquisition '${String(args.acquisition)}' is not one of ${ACQUISITIONS.join(', ')}`);
  if (!(Number.isInteger(args.init) && args.init >= 1)) throw new Error(`gp-bo: init ${args.init} must be a positive integer`);
  const rng = new Rng(args.seed * 7919 + 29);
  const task = args.task;
  const dim = ordinalDim(task.fields);
  const feat = (p: Proposal) => ordinalFeatures(task.fields, p, new Float32Array(dim));
  const space = candidatePool(task, 4096, rng);
  const spaceX = space.map(feat);
  const l = new Executions(args);
  const rows: SearchRound[] = [];
  const init = Array.from({ length: args.init }, () => randomProposal(task, rng));
  await l.run(init, rng);
  for (let round = 0; ; round++) {
    // The model is refitted from scratch on every execution so far (its buffer holds them all).
    const model = new GpOutcomeModel(dim, { ...DEFAULT_GP_CONFIG, bufferCap: Math.max(DEFAULT_GP_CONFIG.bufferCap, l.ys.length) });
    if (l.ys.length) {
      model.observe(l.xs.map(feat), l.ys);
      await model.fit();
    }
    const executed = [...l.seen.values()].map((s) => s.proposal);
    const atExecuted = executed.length ? await model.predict(executed.map(feat)) : [];
    const recommended = executed.length ? executed[atExecuted.reduce((b, p, i) => (p.mean > atExecuted[b]!.mean ? i : b), 0)]! : init[0]!;
    const row = { round, slotSeconds: l.slotMs / 1000, cpuSeconds: l.spentS, executions: l.executions, failedExecutions: l.failed, recommended };
    rows.push(row);
    await l.report(round, recommended);
    if (l.spentS >= args.cpuBudgetS) {
      await model.release();
      break;
    }

    let chosen: Proposal[];
    if (args.acquisition === 'thompson') {
      chosen = [];
      const picked = new Set<string>();
      for (let b = 0; b < args.batch; b++) {
        const cands = [...executed, ...Array.from({ length: args.candidates ?? 128 }, () => randomProposal(task, rng))];
        const draw = await model.sample(cands.map(feat), rng);
        const order = draw.map((v, i) => [v, i] as const).sort((x, y) => y[0] - x[0]);
        const hit = order.find(([, i]) => !picked.has(proposalKey(task, cands[i]!, 0)))!;
        picked.add(proposalKey(task, cands[hit[1]]!, 0));
        chosen.push(cands[hit[1]]!);
      }
    } else {
      const pred = await model.predict(spaceX);
      const best = atExecuted.length ? Math.max(...atExecuted.map((p) => p.mean)) : 0;
      const value = pred.map((p) => {
        const sd = Math.sqrt(p.variance);
        if (args.acquisition === 'ucb') return p.mean + 2 * sd;
        if (sd < 1e-12) return Math.max(0, p.mean - best);
        const z = (p.mean - best) / sd;
        return (p.mean - best) * cdf(z) + sd * pdf(z);
      });
      chosen = value.map((v, i) => [v, i] as const).sort((x, y) => y[0] - x[0]).slice(0, args.batch).map(([, i]) => space[i]!);
    }
    await l.run(chosen, rng);
    await model.release();
  }
  return rows;
}
