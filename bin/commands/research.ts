// `wmrl research`: post-train an AutoResearch agent on a built-in task with WMRL (or the standard-GRPO baseline),
// journal every execution (--resume continues exactly), export the proposal it ends on (recipes/autoresearch.ts).
import { join } from 'node:path';
import { ResearchOptions, runResearch } from '../../recipes/autoresearch.js';
import { printJson } from '../json-output.js';
import { progressBar } from '../progress.js';
import { schemaValues } from '../schema-flags.js';

export interface ResearchFlags extends Record<string, unknown> {
  out?: string;
  resume: boolean;
  unsafeNoSandbox: boolean;
  json?: boolean;
}

export async function research(flags: ResearchFlags, keys: readonly string[], given: readonly string[]): Promise<void> {
  if (flags.resume && !flags.out) throw new Error('--resume needs --out DIR, the run folder to continue');
  // With --resume only --steps may change (to extend a finished run).
  const fixed = given.filter((f) => f !== '--steps');
  if (flags.resume && fixed.length) throw new Error(`--resume continues the run as it was started; drop ${fixed.join(', ')}`);
  const o = schemaValues(ResearchOptions, flags, keys) as ResearchOptions;
  const out = flags.out ?? join('runs', `research-${o.algo}-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  const bar = progressBar();
  const run = await runResearch(o, {
    out, resume: flags.resume, ...(flags.resume && given.includes('--steps') ? { resumeSteps: o.steps } : {}), unsafeNoIsolation: flags.unsafeNoSandbox,
    onStep: (r, total) => bar(r.step + 1, total, `step · slot ${r.slotSeconds.toFixed(1)} s · greedy ${r.score.toFixed(3)}`),
  });
  const a = run.options;
  const first = run.rows[0], last = run.rows.at(-1);
  if (!last || !first) throw new Error(`${out}: the run took no step`);
  const files = { policy: run.artifact, executions: join(out, 'executions.jsonl'), history: join(out, 'steps.json') };
  if (flags.json) return printJson({ run: out, ...files, options: a, executed: run.executed, stopped: run.stopped, proposal: run.proposal, steps: run.rows });
  console.log(`\n| run | task | algo | steps | executions | failed | slot s | greedy score first → last | proposal |\n|---|---|---|---|---|---|---|---|---|`);
  console.log(`| ${out} | ${a.task} | ${a.algo}${a.pureWm ? ' (pure world model)' : ''} | ${run.rows.length} | ${last.executions} | ${last.failedExecutions} | ${last.slotSeconds.toFixed(1)} | ${first.score.toFixed(3)} → ${last.score.toFixed(3)} | ${JSON.stringify(last.greedy)} |`);
  console.log(`\npolicy: ${files.policy}   executions: ${files.executions} (${run.executed} run now)   history: ${files.history}`);
}
