// The AutoResearch measurement baselines (bench/lib/research-baselines.ts) on an in-process executor whose score is a
// known additive function of the proposal (the sandbox cannot be the point here): both stop at their CPU budget
// (not the wall slot time) and are charged every execution; GP-BO finds a better proposal than random search at the same budget.
import { describe, expect, it } from 'vitest';
import type { Executor, SandboxJob, SandboxOutcome } from '../autoresearch/sandbox.js';
import { classifierTask } from '../autoresearch/tasks/classifier.js';
import type { ExecutionInput, Proposal } from '../autoresearch/task.js';
import { ACQUISITIONS, gpBayesOpt, randomSearch, type SearchRound } from '../bench/lib/research-baselines.js';

/** Each field's best choice is its last; the score is the share of fields at their best, plus seed noise. */
function truth(p: Proposal): number {
  return classifierTask.fields.reduce((s, f) => s + f.choices.indexOf(p[f.name]!) / (f.choices.length - 1), 0) / classifierTask.fields.length;
}

class FakeExecutor implements Executor {
  readonly capacity = 2;
  readonly queueLength = 0;
  readonly busy = 0;
  runs = 0;
  /** Each execution uses cpuMs of CPU while holding its slot for longer (a loaded machine): the budget counts the CPU. */
  constructor(private readonly cpuMs = 500, private readonly slotMs = 2 * cpuMs) {}
  async run(job: SandboxJob): Promise<SandboxOutcome> {
    this.runs++;
    const { proposal, seed } = job.input as ExecutionInput;
    // A proposal with the smallest hidden size crashes: a failure is charged and not scored.
    if (proposal.hidden === 2) return { ok: false, reason: 'crash', detail: 'boom', slotMs: this.slotMs, cpuMs: this.cpuMs, slot: 0 };
    return { ok: true, value: { score: truth(proposal) + 0.02 * ((seed % 3) - 1) }, slotMs: this.slotMs, cpuMs: this.cpuMs, slot: 0 };
  }
}

describe('research baselines', () => {
  it('random search stops at its budget, is charged every execution and recommends its best observed proposal', async () => {
    const ex = new FakeExecutor(500);
    const rounds: SearchRound[] = [];
    const rows = await randomSearch({ task: classifierTask, executor: ex, seed: 1, cpuBudgetS: 10, batch: 4, onRound: (r) => void rounds.push(r) });
    expect(rounds).toEqual(rows);
    // 0.5 CPU s an execution, 4 a round: 2 s a round, so the 5th round ends at the 10 s budget; the wall slot time is twice that.
    expect(rows.map((r) => r.cpuSeconds)).toEqual([2, 4, 6, 8, 10]);
    expect(rows.map((r) => r.slotSeconds)).toEqual([4, 8, 12, 16, 20]);
    expect(rows.at(-1)!.executions).toBe(20);
    expect(ex.runs).toBe(20);
    expect(rows.at(-1)!.failedExecutions).toBeGreaterThan(0);
    const best = rows.at(-1)!.recommended;
    expect(best.hidden).not.toBe(2);
    // Its best observed is at least as good as every earlier recommendation (by the same noisy scores, up to noise).
    for (const r of rows) expect(truth(best)).toBeGreaterThanOrEqual(truth(r.recommended) - 0.04);
  });

  it('repeats from its seed, and another seed searches elsewhere', async () => {
    const a = await randomSearch({ task: classifierTask, executor: new FakeExecutor(), seed: 5, cpuBudgetS: 4, batch: 4 });
    const b = await randomSearch({ task: classifierTask, executor: new FakeExecutor(), seed: 5, cpuBudgetS: 4, batch: 4 });
    const c = await randomSearch({ task: classifierTask, executor: new FakeExecutor(), seed: 6, cpuBudgetS: 4, batch: 4 });
    expect(a).toEqual(b);
    expect(c).not.toEqual(a);
  });

  it('GP-BO, with each acquisition, beats random search at the same budget on an additive objective', async () => {
    const budget = 24; // 48 executions at 0.5 s
    const seeds = [0, 1];
    const randomTruth = await Promise.all(seeds.map(async (seed) => truth((await randomSearch({ task: classifierTask, executor: new FakeExecutor(), seed, cpuBudgetS: budget, batch: 4 })).at(-1)!.recommended)));
    for (const acquisition of ACQUISITIONS) {
      const ex = new FakeExecutor();
      const got = await Promise.all(seeds.map(async (seed) => {
        const rows = await gpBayesOpt({ task: classifierTask, executor: ex, seed, cpuBudgetS: budget, batch: 4, acquisition, init: 8 });
        expect(rows.at(-1)!.cpuSeconds).toBeGreaterThanOrEqual(budget);
        expect(rows.at(-1)!.cpuSeconds).toBeLessThan(budget + 2.01);
        return truth(rows.at(-1)!.recommended);
      }));
      const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / xs.length;
      expect(mean(got), acquisition).toBeGreaterThan(mean(randomTruth));
      expect(mean(got), acquisition).toBeGreaterThan(0.85);
    }
  }, 60_000);

  it('refuses a budget, batch, init or acquisition that cannot run', async () => {
    const args = { task: classifierTask, executor: new FakeExecutor(), seed: 0, cpuBudgetS: 1, batch: 2 };
    await expect(randomSearch({ ...args, cpuBudgetS: 0 })).rejects.toThrow(/CPU budget 0 s must be > 0/);
    await expect(randomSearch({ ...args, batch: 0 })).rejects.toThrow(/batch 0 must be a positive integer/);
    await expect(gpBayesOpt({ ...args, acquisition: 'ei', init: 0 })).rejects.toThrow(/init 0 must be a positive integer/);
    await expect(gpBayesOpt({ ...args, acquisition: 'pi' as 'ei', init: 2 })).rejects.toThrow(/acquisition 'pi' is not one of thompson, ei, ucb/);
  });
});
