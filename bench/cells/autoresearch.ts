// The cells of `bench autoresearch`: one arm trained (or searched) at one research-task seed and its final proposal
// scored on the split's evaluation episodes. Their code and options make the bench's computation key
// (bench/lib/protocol.ts protocolKeys), so nothing here imports the report's code (bench/autoresearch.ts, stats, report).
import type { Executor } from '../../autoresearch/sandbox.js';
import { execute, type Proposal } from '../../autoresearch/task.js';
import { classifierTask } from '../../autoresearch/tasks/classifier.js';
import { RESEARCH_OUTCOME, RESEARCH_SIZES, RESEARCH_WMRL, runResearch, type ResearchRow } from '../../recipes/autoresearch.js';
import { gpBayesOpt, randomSearch, type Acquisition, type SearchRound } from '../lib/research-baselines.js';

export type Arm = 'standard' | 'wmrl' | 'pure' | 'random' | `gpbo-${Acquisition}`;
/** Proposals a baseline executes per round: two per sandbox slot. */
export const BASELINE_BATCH = 4;
/** GP-BO's random proposals before its first fit: WMRL's warm-up. */
export const GPBO_INIT = RESEARCH_SIZES.full.warmup;
export const LR = 1;
export const SLOTS = 2;
/** A quick run's sizes: the recipe's quick sizes with fewer steps, so five arms finish in a minute on a loaded machine. */
export const QUICK_SIZES = { ...RESEARCH_SIZES.quick, standardSteps: 3, wmrlSteps: 12 };

/** What every cell of a run depends on besides its code: its JSON is the computation key's options. */
export function cellOptions(o: { quick: boolean; split: 'train' | 'validation' | 'test'; episodes: readonly number[] }) {
  const sizes = o.quick ? QUICK_SIZES : RESEARCH_SIZES.full;
  return {
    split: o.split,
    episodes: [...o.episodes],
    sizes,
    lr: LR,
    slots: SLOTS,
    baseline: { batch: BASELINE_BATCH, init: o.quick ? sizes.warmup : GPBO_INIT },
    wmrl: RESEARCH_WMRL,
    outcome: RESEARCH_OUTCOME,
  };
}
export type CellOptions = ReturnType<typeof cellOptions>;

export interface ArmCell {
  /** (sandbox CPU seconds spent, greedy proposal's mean score on the train episodes) after each step or round. */
  points: Array<[number, number]>;
  /** CPU time of the arm's executions, s: what it is charged, and the baselines' budget. */
  cpuSeconds: number;
  /** Wall time its executions held their sandbox slots, s (load-dependent; reported beside). */
  slotSeconds: number;
  executions: number;
  failed: number;
  /** The proposal the arm ends on. */
  proposal: Proposal;
  /** Its balanced accuracy on each of the split's evaluation episodes (test: on the data's test part); an unscored execution counts 0. */
  episodes: number[];
  unscored: number;
  /** WMRL arms: mean share of a step's groups executed as anchors. */
  anchorShare: number | null;
  /** WMRL arms, per step: the denoiser's weight on the anchors (1: not up-weighted). */
  anchorWeight: number[] | null;
  /** Baselines: the CPU budget they were given, s (WMRL's spend at this seed). */
  budgetS: number | null;
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const num = (x: number) => (Number.isFinite(x) ? Number(x.toPrecision(4)).toString() : String(x));

/** Computes cells on one executor (memoized executions: each arm is charged every execution it asks for, repeated or not). */
export class ArmCells {
  readonly task = classifierTask;

  constructor(private readonly ex: Executor, private readonly o: CellOptions, private readonly progress: (label: string) => void = () => {}) {}

  /** The split's evaluation episodes of a proposal: on the test split scored on the data's test part. */
  private async onEpisodes(proposal: Proposal): Promise<Pick<ArmCell, 'episodes' | 'unscored'>> {
    const rs = await Promise.all(this.o.episodes.map((e) => execute(this.ex, this.task, proposal, e)));
    const scores = rs.map((r) => (r.output === null ? 0 : Number(this.o.split === 'test' ? r.output.test : r.output.score)));
    return { episodes: scores, unscored: rs.filter((r) => r.output === null).length };
  }

  private async evalMean(proposal: Proposal): Promise<number> {
    const rs = await Promise.all(Array.from({ length: this.o.sizes.evalSeeds }, (_, s) => execute(this.ex, this.task, proposal, s)));
    const ok = rs.filter((r) => r.score !== null).map((r) => r.score!);
    return ok.length ? mean(ok) : Number.NaN;
  }

  /** A GRPO arm: standard (every proposal executed), full WMRL, or pure world model. */
  async research(seed: number, arm: 'standard' | 'wmrl' | 'pure'): Promise<ArmCell> {
    const sz = this.o.sizes;
    const rows: ResearchRow[] = [];
    const common = { task: 'classifier' as const, groupsPerStep: sz.groupsPerStep, groupSize: sz.groupSize, evalSeeds: sz.evalSeeds, lr: this.o.lr, slots: this.o.slots, seed, quick: false };
    const onStep = (l: ResearchRow) => {
      rows.push(l);
      this.progress(`seed ${seed} ${arm} step ${l.step} greedy ${num(l.score)} cpu ${num(l.cpuSeconds)} s`);
    };
    if (arm === 'standard') await runResearch({ ...common, algo: 'standard', pureWm: false, steps: sz.standardSteps }, { executor: this.ex, onStep });
    else await runResearch({ ...common, algo: 'wmrl', pureWm: arm === 'pure', steps: sz.wmrlSteps, warmup: sz.warmup }, { executor: this.ex, onStep });
    const last = rows.at(-1)!;
    const wm = arm !== 'standard';
    return {
      points: rows.map((r) => [r.cpuSeconds, r.score]), cpuSeconds: last.cpuSeconds, slotSeconds: last.slotSeconds, executions: last.executions, failed: last.failedExecutions, proposal: last.greedy, ...(await this.onEpisodes(last.greedy)),
      anchorShare: wm ? mean(rows.map((r) => r.anchorFraction)) : null, anchorWeight: wm ? rows.map((r) => r.anchorWeight) : null, budgetS: null,
    };
  }

  /** A measurement baseline (random search, GP-BO) at `budgetS` CPU seconds (WMRL's spend at this seed). */
  async baseline(seed: number, arm: Exclude<Arm, 'standard' | 'wmrl' | 'pure'>, budgetS: number): Promise<ArmCell> {
    const points: Array<[number, number]> = [];
    const onRound = async (r: SearchRound) => {
      points.push([r.cpuSeconds, await this.evalMean(r.recommended)]);
      this.progress(`seed ${seed} ${arm} round ${r.round} greedy ${num(points.at(-1)![1])} cpu ${num(r.cpuSeconds)} of ${num(budgetS)} s`);
    };
    const args = { task: this.task, executor: this.ex, seed, cpuBudgetS: budgetS, batch: this.o.baseline.batch, onRound };
    const rows = arm === 'random' ? await randomSearch(args) : await gpBayesOpt({ ...args, acquisition: arm.slice('gpbo-'.length) as Acquisition, init: this.o.baseline.init });
    const last = rows.at(-1)!;
    return { points, cpuSeconds: last.cpuSeconds, slotSeconds: last.slotSeconds, executions: last.executions, failed: last.failedExecutions, proposal: last.recommended, ...(await this.onEpisodes(last.recommended)), anchorShare: null, anchorWeight: null, budgetS };
  }
}
