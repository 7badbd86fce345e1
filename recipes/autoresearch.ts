// The AutoResearch recipe: one validated config → a research run. A built-in task's agent is post-trained with
// standard GRPO (every proposal executed in the sandbox) or WMRL (an outcome world model scores proposals, a thin
// stream of anchor groups is executed, the Corrector corrects the model's scores with them); after every step the
// greedy proposal is executed on held-out training seeds (a measurement, charged to no one). `wmrl research`, the
// service's `research` job and `bench autoresearch` all run this.
//
// Checkpoint and resume: executions are deterministic in (proposal, training seed), so each one's outcome is
// journaled (OUT/executions.jsonl) and a resumed run replays the trainer from its seed, answering every journaled
// execution from the journal, charged the slot time it measured, and executing only what the journal lacks.
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Value } from '@sinclair/typebox/value';
import { writeFileAtomic } from '../nn/index.js';
import type { ProposalPolicy } from '../autoresearch/agent.js';
import { SandboxPool, type Executor, type SandboxJob, type SandboxOutcome } from '../autoresearch/sandbox.js';
import { RESEARCH_TASKS } from '../autoresearch/tasks/index.js';
import { checkProposal, execute, type Proposal, type ResearchTask } from '../autoresearch/task.js';
import { trainStandard, type ResearchStepLog } from '../autoresearch/train_standard.js';
import { trainWmrl } from '../autoresearch/train_wmrl.js';
import type { CorrectorOverrides } from '../wmrl/corrector.js';
import { RESEARCH_SIZES, RESEARCH_TASK_NAMES, ResearchOptions } from './research-options.js';

export { RESEARCH_SIZES, ResearchOptions };

// The options name the built-in tasks without loading them (the CLI builds its flags from them).
for (const k of new Set([...RESEARCH_TASKS.keys(), ...RESEARCH_TASK_NAMES])) {
  if (!RESEARCH_TASKS.has(k) || !RESEARCH_TASK_NAMES.includes(k)) throw new Error(`recipes/options.ts RESEARCH_TASK_NAMES ${RESEARCH_TASK_NAMES.join(', ')} differ from the built-in research tasks (${[...RESEARCH_TASKS.keys()].join(', ')})`);
}

// ── The config ──────────────────────────────────────────────────────────────────────────────────
/** What is wrong across options that the schema cannot state, or null; names each option as the flag and as the job's key. */
export function researchProblem(o: ResearchOptions): string | null {
  if (o.algo === 'standard' && (o.pureWm || o.warmup !== undefined)) return `pure world model and warm-up (--pure-wm, pureWm; --warmup, warmup) are WMRL options; algo standard has no world model`;
  const seeds = RESEARCH_TASKS.get(o.task)!.seeds;
  if (o.evalSeeds !== undefined && o.evalSeeds > seeds) return `evaluation seeds (--eval-seeds, evalSeeds) ${o.evalSeeds}: task ${o.task} has ${seeds} training seeds`;
  return null;
}

/**
 * The correction core for AutoResearch: one group in 32 executed as an anchor (no per-step floor), drawn with
 * probability growing with the outcome model's variance over the group; the debiasing map fitted from 48 anchor
 * pairs, refitted every 16.
 */
export const RESEARCH_WMRL: CorrectorOverrides = { anchors: { fraction: 1 / 32, floor: 0, mode: 'active' }, debias: { minPairs: 48, refitEvery: 16 }, denoise: { warmupGroups: 8 } };
const PURE_WM: CorrectorOverrides = { anchors: { fraction: 0, floor: 0 }, debias: false, denoise: false };
/**
 * The outcome world model: a Gaussian process over one-hot + thermometer features, each step's scores one joint
 * posterior draw (Thompson sampling), which keeps the agent from collapsing onto the warm-up's argmax
 * (an MLP ensemble scored by its mean does).
 */
export const RESEARCH_OUTCOME = { outcomeModel: 'gp', features: 'ordinal', thompson: true } as const;

/** The sizes a run uses: those given, else the full or quick defaults. */
export function researchSizes(o: ResearchOptions) {
  const d = o.quick ? RESEARCH_SIZES.quick : RESEARCH_SIZES.full;
  return {
    steps: o.steps ?? (o.algo === 'standard' ? d.standardSteps : d.wmrlSteps),
    groupsPerStep: o.groupsPerStep ?? d.groupsPerStep,
    groupSize: o.groupSize ?? d.groupSize,
    warmup: o.algo === 'standard' ? 0 : o.warmup ?? d.warmup,
    evalSeeds: o.evalSeeds ?? d.evalSeeds,
  };
}

// ── Executions, journaled ───────────────────────────────────────────────────────────────────────
/**
 * An executor that answers a repeated job with its first outcome (executions are deterministic in proposal and
 * seed) and, given a journal file, appends each new outcome there and answers from it first. A replayed outcome
 * carries the slot and CPU time it measured, so the trainer is charged them again, exactly as if it had run.
 */
export class ReplayExecutor implements Executor {
  private readonly memo = new Map<string, Promise<SandboxOutcome>>();
  /** Jobs this executor passed on to the pool. */
  executed = 0;

  constructor(private readonly inner: Executor, private readonly journal?: string) {
    if (journal && existsSync(journal)) {
      const lines = readFileSync(journal, 'utf8').split('\n');
      lines.forEach((line, i) => {
        if (!line) return;
        let entry: { key: string; outcome: SandboxOutcome };
        try {
          entry = JSON.parse(line) as typeof entry;
        } catch (e) {
          // Only the last line can be torn (a run killed while appending it): dropped, so appends start on a line of their own; that execution runs again.
          if (i >= lines.length - 2) {
            writeFileAtomic(journal, [lines.slice(0, i).map((l) => `${l}\n`).join('')]);
            return;
          }
          throw new Error(`${journal}:${i + 1}: not an execution record (${(e as Error).message})`, { cause: e });
        }
        this.memo.set(entry.key, Promise.resolve(entry.outcome));
      });
    }
  }

  get capacity() { return this.inner.capacity; }
  get queueLength() { return this.inner.queueLength; }
  get busy() { return this.inner.busy; }

  run(job: SandboxJob, signal?: AbortSignal): Promise<SandboxOutcome> {
    const key = JSON.stringify(job.input);
    let p = this.memo.get(key);
    if (!p) {
      this.executed++;
      p = this.inner.run(job, signal).then((o) => {
        // A cancelled execution says nothing about the proposal: it is neither kept nor journaled.
        if (!o.ok && o.reason === 'cancelled') this.memo.delete(key);
        else if (this.journal) appendFileSync(this.journal, JSON.stringify({ key, outcome: o }) + '\n');
        return o;
      });
      this.memo.set(key, p);
    }
    return p;
  }
}

// ── The run ─────────────────────────────────────────────────────────────────────────────────────
/** One step as the run reports it: the trainer's log and the greedy proposal's measured score. */
export interface ResearchRow {
  step: number;
  /** Sandbox-slot time spent so far (warm-up included), s. */
  slotSeconds: number;
  /** CPU time of those executions, s. */
  cpuSeconds: number;
  executions: number;
  failedExecutions: number;
  /** Mean real score of the greedy proposal on the evaluation seeds (NaN when every one failed). */
  score: number;
  greedy: Proposal;
  anchorFraction: number;
  /** The denoiser's weight on the step's anchors (1: not up-weighted; standard GRPO: 1). */
  anchorWeight: number;
}

/** The exported artifact (OUT/policy.json): the proposal the agent ends on, its score, and the agent's distribution. */
export interface ResearchArtifact {
  task: string;
  algo: 'wmrl' | 'standard';
  pureWm: boolean;
  seed: number;
  steps: number;
  proposal: Proposal;
  score: number | null;
  /** π per field: choice → probability, of the first context. */
  probabilities: Record<string, Array<[string | number, number]>>;
}

export interface ResearchRun {
  options: ResearchOptions;
  rows: ResearchRow[];
  /** OUT/policy.json, or null without an output folder. */
  artifact: string | null;
  proposal: Proposal | null;
  stopped: boolean;
  /** Executions the sandbox ran in this call (a resumed run's journaled ones are not). */
  executed: number;
}

export interface ResearchIo {
  /** The run folder: config.json, executions.jsonl, steps.json, policy.json. None: nothing is written. */
  out?: string;
  /** Continue the run in `out` (its config.json) instead of starting one. */
  resume?: boolean;
  /** With `resume`: the run's new step count (to extend a finished run); its other options stay as started. */
  resumeSteps?: number;
  /** Where proposals run; default a sandbox pool of `slots` slots, closed at the end. */
  executor?: Executor;
  /** Run proposals without bubblewrap (SandboxPool `unsafeNoIsolation`): only where bwrap cannot run. */
  unsafeNoIsolation?: boolean;
  /** Stops the run after the step in progress; what was done stays in `out`. */
  signal?: AbortSignal;
  onStep?: (row: ResearchRow, total: number) => void;
}

/** The options a run in `out` was started with (resume), checked against the schema as a new run's are. */
export function researchConfig(out: string): ResearchOptions {
  const file = join(out, 'config.json');
  if (!existsSync(file)) throw new Error(`${out} has no config.json (not a research run folder)`);
  const o = JSON.parse(readFileSync(file, 'utf8')) as unknown;
  const bad = [...Value.Errors(ResearchOptions, o)].map((e) => `${file}${e.path.replace(/\//g, '.')}: ${e.message}`);
  if (bad.length) throw new Error(bad.join('; '));
  return o as ResearchOptions;
}

export async function runResearch(given: ResearchOptions, io: ResearchIo = {}): Promise<ResearchRun> {
  // ── config: the run's own, or the one it was started with ──
  const o = io.resume ? { ...researchConfig(io.out ?? ''), ...(io.resumeSteps !== undefined ? { steps: io.resumeSteps } : {}) } : given;
  const problem = researchProblem(o);
  if (problem) throw new Error(problem);
  if (io.out) {
    if (!io.resume && existsSync(join(io.out, 'config.json'))) throw new Error(`${io.out} already holds a run: resume it, or choose another output folder`);
    mkdirSync(io.out, { recursive: true });
    writeFileAtomic(join(io.out, 'config.json'), [JSON.stringify(o, null, 1)]);
  }
  const task: ResearchTask = RESEARCH_TASKS.get(o.task)!;
  const sz = researchSizes(o);

  // ── executions: the sandbox, behind the journal ──
  const pool = io.executor ? null : SandboxPool.create({ slots: o.slots, ...(io.unsafeNoIsolation ? { unsafeNoIsolation: true } : {}) });
  const ex = new ReplayExecutor(io.executor ?? pool!, io.out ? join(io.out, 'executions.jsonl') : undefined);
  const evaluate = async (p: Proposal): Promise<number> => {
    const rs = await Promise.all(Array.from({ length: sz.evalSeeds }, (_, s) => execute(ex, task, p, s)));
    const ok = rs.filter((r) => r.score !== null).map((r) => r.score!);
    return ok.length ? ok.reduce((a, b) => a + b, 0) / ok.length : Number.NaN;
  };

  // ── the trainer ──
  const rows: ResearchRow[] = [];
  let policy: ProposalPolicy | null = null;
  const onStep = async (l: ResearchStepLog, p: ProposalPolicy) => {
    policy = p;
    const row: ResearchRow = { step: l.step, slotSeconds: l.slotSeconds, cpuSeconds: l.cpuSeconds, executions: l.executions, failedExecutions: l.failedExecutions, score: await evaluate(l.greedy), greedy: l.greedy, anchorFraction: l.anchorFraction, anchorWeight: l.anchorWeight };
    rows.push(row);
    if (io.out) writeFileAtomic(join(io.out, 'steps.json'), [JSON.stringify(rows, null, 1)]);
    io.onStep?.(row, sz.steps);
    io.signal?.throwIfAborted();
  };
  const common = { task, executor: ex, groupsPerStep: sz.groupsPerStep, groupSize: sz.groupSize, lr: o.lr, seed: o.seed, onStep };
  let stopped = false;
  try {
    io.signal?.throwIfAborted();
    if (o.algo === 'standard') await trainStandard({ ...common, steps: sz.steps });
    else await trainWmrl({ ...common, ...RESEARCH_OUTCOME, steps: sz.steps, warmup: sz.warmup, corrector: o.pureWm ? PURE_WM : RESEARCH_WMRL });
  } catch (e) {
    if (!io.signal?.aborted) throw e;
    stopped = true;
  } finally {
    await pool?.close();
  }

  // ── the artifact: the greedy proposal the run ends on ──
  const last = rows.at(-1);
  let artifact: string | null = null;
  if (io.out && last) {
    const pi = policy as ProposalPolicy | null;
    const probabilities = pi ? Object.fromEntries(task.fields.map((f, i) => [f.name, f.choices.map((c, k) => [c, pi.probs('default', i)[k]!] as [string | number, number])])) : {};
    const a: ResearchArtifact = { task: o.task, algo: o.algo, pureWm: o.pureWm, seed: o.seed, steps: rows.length, proposal: last.greedy, score: Number.isFinite(last.score) ? last.score : null, probabilities };
    artifact = join(io.out, 'policy.json');
    writeFileAtomic(artifact, [JSON.stringify(a, null, 1)]);
  }
  return { options: o, rows, artifact, proposal: last?.greedy ?? null, stopped, executed: ex.executed };
}

/** Reads a research run's artifact and checks its proposal against the task. */
export function loadResearchArtifact(file: string): ResearchArtifact {
  const a = JSON.parse(readFileSync(file, 'utf8')) as ResearchArtifact;
  const task = RESEARCH_TASKS.get(a.task);
  if (!task) throw new Error(`${file}: task '${a.task}' is not a built-in research task (${[...RESEARCH_TASKS.keys()].join(', ')})`);
  checkProposal(task, a.proposal);
  return a;
}
