// The AutoResearch recipe as a service job, `research` (POST /api/runs/research): the run folder under
// data/runs/ holds its journal of executions, its steps and the proposal it ends on (policy.json); a stop ends it
// after the step in progress. Proposals run in a bubblewrap sandbox pool of the run's own.
import { join } from 'node:path';
import { writeFileAtomic } from '../nn/index.js';
import { ResearchOptions, researchProblem, runResearch, type ResearchRow } from '../recipes/autoresearch.js';
import type { JobDefinition } from './runs.js';

/** What the run's checkpoint.json holds beside the recipe's own files. */
export interface ResearchCheckpoint {
  run: string;
  task: string;
  algo: 'wmrl' | 'standard';
  steps: number;
  slotSeconds: number;
  executions: number;
  /** The greedy proposal's measured score after each step. */
  scores: Array<number | null>;
  /** OUT/policy.json (null when the run stopped before its first step ended). */
  policy: string | null;
  stoppedEarly: boolean;
}

export const researchJob: JobDefinition<typeof ResearchOptions> = {
  kind: 'research',
  description: 'AutoResearch: post-trains the research agent of a built-in task with WMRL (outcome world model + anchors executed in the sandbox) or standard GRPO; the proposal it ends on is the run\'s policy.json',
  options: ResearchOptions,
  check: researchProblem,
  async run(o, ctx) {
    const run = await runResearch(o, {
      out: ctx.dir,
      signal: ctx.signal,
      onStep: (r: ResearchRow, total) => ctx.progress(r.step + 1, total, `steps: greedy score ${r.score.toFixed(3)}`),
    });
    const last = run.rows.at(-1);
    const cp: ResearchCheckpoint = {
      run: ctx.runId, task: o.task, algo: o.algo, steps: run.rows.length, slotSeconds: last?.slotSeconds ?? 0, executions: last?.executions ?? 0,
      scores: run.rows.map((r) => (Number.isFinite(r.score) ? r.score : null)), policy: run.artifact, stoppedEarly: run.stopped,
    };
    const file = join(ctx.dir, 'checkpoint.json');
    writeFileAtomic(file, [JSON.stringify(cp, null, 1)]);
    return file;
  },
};
