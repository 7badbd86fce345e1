// The research recipe's journal of executions (the checkpoint a resume replays): a repeated job runs once, a
// journaled one not at all (its measured slot time charged again), a cancelled one is not kept, a torn last line
// (a run killed while appending) runs again, and a torn line before the end is an error naming the file and line.
import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Executor, SandboxJob, SandboxOutcome } from '../autoresearch/sandbox.js';
import { ReplayExecutor } from '../recipes/autoresearch.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-research-journal-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Scores a job by its input; `cancel` makes the next one come back cancelled. */
class Counting implements Executor {
  readonly capacity = 2;
  readonly queueLength = 0;
  readonly busy = 0;
  ran: unknown[] = [];
  cancel = false;
  async run(job: SandboxJob): Promise<SandboxOutcome> {
    this.ran.push(job.input);
    if (this.cancel) {
      this.cancel = false;
      return { ok: false, reason: 'cancelled', detail: 'pool closed', slotMs: 0, cpuMs: 0, slot: -1 };
    }
    return { ok: true, value: { score: (job.input as { seed: number }).seed / 10 }, slotMs: 100 + this.ran.length, cpuMs: 50 + this.ran.length, slot: 0 };
  }
}
const job = (seed: number): SandboxJob => ({ program: { kind: 'source', source: '' }, input: { proposal: { a: 1 }, seed } }) as unknown as SandboxJob;

describe('research journal', () => {
  it('runs a job once, replays journaled outcomes with their slot time, and keeps no cancelled one', async () => {
    const file = join(dir, 'a.jsonl');
    const inner = new Counting();
    const ex = new ReplayExecutor(inner, file);
    const first = await ex.run(job(1));
    expect(await ex.run(job(1))).toEqual(first);
    inner.cancel = true;
    expect((await ex.run(job(2))).ok).toBe(false);
    expect((await ex.run(job(2))).ok).toBe(true);
    expect(inner.ran).toHaveLength(3);
    expect(readFileSync(file, 'utf8').trim().split('\n')).toHaveLength(2);

    const again = new Counting();
    const resumed = new ReplayExecutor(again, file);
    expect(await resumed.run(job(1))).toEqual(first);
    expect(again.ran).toEqual([]);
    expect(resumed.executed).toBe(0);
  });

  it('runs a torn last line again; a torn line before the end is an error naming the line', async () => {
    const file = join(dir, 'b.jsonl');
    await new ReplayExecutor(new Counting(), file).run(job(1));
    appendFileSync(file, '{"key":"{\\"proposal');
    const inner = new Counting();
    const ex = new ReplayExecutor(inner, file);
    await ex.run(job(1));
    await ex.run(job(3));
    expect(inner.ran).toHaveLength(1);
    const lines = readFileSync(file, 'utf8').split('\n');
    expect(lines.filter(Boolean).map((l) => (JSON.parse(l) as { key: string }).key)).toEqual([JSON.stringify(job(1).input), JSON.stringify(job(3).input)]);
    writeFileSync(file, [lines[0], 'garbage', ...lines.slice(1)].join('\n'));
    expect(() => new ReplayExecutor(new Counting(), file)).toThrow(/b\.jsonl:2: not an execution record/);
  });
});
