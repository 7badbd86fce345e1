// A research task: a proposal space, an executor (a program the sandbox runs on one proposal), a
// metric and a time limit. Proposals here are structured (one choice per field); free text or code
// proposals are strings, featurized by hashed n-grams (features.ts).
import { Rng } from '../nn/rng.js';
import type { Executor, SandboxLimits, SandboxProgram } from './sandbox.js';

/** One field of a structured proposal: a name and its choices (ordered when numeric). */
export interface Field {
  name: string;
  choices: ReadonlyArray<number | string>;
}

/** A structured proposal: field name → one of its choices. */
export type Proposal = Record<string, number | string>;

export interface ResearchTask {
  name: string;
  /** What a proposal decides. */
  fields: readonly Field[];
  /** The executor: its function takes `ExecutionInput` and returns `ExecutionOutput`. */
  program: SandboxProgram;
  /** What the score measures (higher is better). */
  metric: string;
  /** Sandbox limits of one execution (the time limit among them). */
  limits: Partial<SandboxLimits>;
  /** Training seeds an execution may draw (the score's noise across re-runs). */
  seeds: number;
}

export interface ExecutionInput {
  proposal: Proposal;
  seed: number;
}

export interface ExecutionOutput {
  /** The metric, higher is better. */
  score: number;
  /** Anything else worth keeping (test-split score, steps). */
  [k: string]: unknown;
}

/** One real execution: its score, or null with the reason when it came back unscored. */
export interface Executed {
  score: number | null;
  reason: string | null;
  slotMs: number;
  /** CPU time charged (SandboxOutcome.cpuMs). */
  cpuMs: number;
  output: ExecutionOutput | null;
}

/** Checks a proposal against the task's fields; the error names the field. */
export function checkProposal(task: ResearchTask, p: Proposal): void {
  for (const f of task.fields) {
    if (!(f.name in p)) throw new Error(`proposal.${f.name}: is required`);
    if (!f.choices.includes(p[f.name]!)) throw new Error(`proposal.${f.name}: ${JSON.stringify(p[f.name])} is not one of ${JSON.stringify(f.choices)}`);
  }
  for (const k of Object.keys(p)) if (!task.fields.some((f) => f.name === k)) throw new Error(`proposal.${k}: is not a field of task ${task.name}`);
}

/** A uniformly random proposal. */
export function randomProposal(task: ResearchTask, rng: Rng): Proposal {
  return Object.fromEntries(task.fields.map((f) => [f.name, f.choices[rng.int(f.choices.length)]!]));
}

/** A stable key of (proposal, seed), for caches. */
export const proposalKey = (task: ResearchTask, p: Proposal, seed: number): string => `${task.fields.map((f) => String(p[f.name])).join('|')}#${seed}`;

/** Runs one proposal in the sandbox; a failed or malformed run is unscored (null), never 0. */
export async function execute(executor: Executor, task: ResearchTask, proposal: Proposal, seed: number, signal?: AbortSignal): Promise<Executed> {
  const input: ExecutionInput = { proposal, seed };
  const o = await executor.run({ program: task.program, input, limits: task.limits }, signal);
  if (!o.ok) return { score: null, reason: `${o.reason}: ${o.detail}`, slotMs: o.slotMs, cpuMs: o.cpuMs, output: null };
  const out = o.value as ExecutionOutput | null;
  if (!out || typeof out.score !== 'number' || !Number.isFinite(out.score)) {
    return { score: null, reason: `invalid: the program returned no finite score (${JSON.stringify(o.value)?.slice(0, 200)})`, slotMs: o.slotMs, cpuMs: o.cpuMs, output: null };
  }
  return { score: out.score, reason: null, slotMs: o.slotMs, cpuMs: o.cpuMs, output: out };
}
