// The benchmarks' worker pool (bench/lib/worker-pool.ts): an idle slot takes the queued job of lowest priority among
// those of its last job's affinity, else among all; a slot's process serves job after job; a job's error rejects it
// and leaves the process up; a process that ends during a job rejects it, and the next job gets a new one; closing
// rejects what is under way and what has not started.
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { WorkerPool } from '../bench/lib/worker-pool.js';

interface Job {
  tag: string;
  wait: number;
  fail?: boolean;
  exit?: boolean;
}
type Result = { tag: string; pid: number };
const script = fileURLToPath(new URL('./fixtures/pool-worker.ts', import.meta.url));
const pools: Array<WorkerPool<Job, Result>> = [];
const pool = (size: number, progress?: (slot: number, label: string) => void) => {
  const p = new WorkerPool<Job, Result>(script, size, progress);
  pools.push(p);
  return p;
};
afterEach(() => pools.splice(0).forEach((p) => p.close()));

describe('worker pool', () => {
  it('runs queued jobs in priority order, in one process per slot, reporting their progress', async () => {
    const labels: string[] = [];
    const p = pool(1, (slot, label) => labels.push(`${slot} ${label}`));
    const order: string[] = [];
    const run = (tag: string, priority: number[]) => p.run({ tag, wait: 20 }, priority).then((r) => (order.push(r.tag), r));
    const results = await Promise.all([run('late', [2]), run('first', [0, 5]), run('second', [1]), run('before-second', [0, 7])]);
    expect(order).toEqual(['first', 'before-second', 'second', 'late']);
    expect(new Set(results.map((r) => r.pid)).size).toBe(1);
    expect(labels).toEqual(['0 start first', '0 start before-second', '0 start second', '0 start late']);
    expect(() => new WorkerPool(script, 0)).toThrow('worker pool: size must be a positive integer, got 0');
  }, 60_000);

  it("keeps a slot on its last job's affinity while such a job is queued", async () => {
    const p = pool(2);
    const x = p.run({ tag: 'x', wait: 300 }, [0], 'reach'), y = p.run({ tag: 'y', wait: 600 }, [1], 'push');
    const [rx, ry] = await Promise.all([x, y]);
    // Queued together: the reach slot takes the reach job although the push job comes first, then the push job.
    const more = await Promise.all([p.run({ tag: 'p2', wait: 10 }, [0], 'push'), p.run({ tag: 'r2', wait: 10 }, [1], 'reach')]);
    expect(more.find((r) => r.tag === 'r2')!.pid).toBe(rx.pid);
    expect(more.find((r) => r.tag === 'p2')!.pid).toBe(ry.pid);
    expect(rx.pid).not.toBe(ry.pid);
  }, 60_000);

  it("rejects a failed job with the child's error and keeps its process; a process that ends is replaced", async () => {
    const p = pool(1);
    const ok = await p.run({ tag: 'a', wait: 1 });
    await expect(p.run({ tag: 'e', wait: 1, fail: true })).rejects.toThrow('job e failed');
    expect((await p.run({ tag: 'b', wait: 1 })).pid).toBe(ok.pid);
    await expect(p.run({ tag: 'x', wait: 1, exit: true })).rejects.toThrow('worker pool: the child process exited (code 3) during its job');
    const after = await p.run({ tag: 'c', wait: 1 });
    expect(after.pid).not.toBe(ok.pid);
    const running = p.run({ tag: 'long', wait: 5000 }), queued = p.run({ tag: 'q', wait: 1 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    p.close();
    await expect(running).rejects.toThrow('worker pool: closed during the job');
    await expect(queued).rejects.toThrow('worker pool: closed before the job started');
    await expect(p.run({ tag: 'z', wait: 1 })).rejects.toThrow('worker pool: closed');
  }, 60_000);
});
