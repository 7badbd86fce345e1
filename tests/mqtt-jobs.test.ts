// Rollout jobs spread over worker processes through a shared subscription
// ($share/{group}/wmrl/jobs/rollout): each worker gets a share, every job runs exactly once,
// and a job whose worker dies is re-published and finished by another.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endClient } from '../bridge/mqtt/client.js';
import { JobDispatcher, serveRolloutJobs, type RolloutJob, type RolloutWorker } from '../bridge/mqtt/jobs.js';
import { BROKERS, type TestBroker } from './helpers/mqtt-brokers.js';

const N = 90;

describe.each(BROKERS)('rollout jobs over $name', (kind) => {
  let broker: TestBroker;
  beforeAll(async () => {
    broker = await kind.start();
  });
  afterAll(async () => {
    await broker?.close();
  });

  it(`${N} jobs over 3 workers in one $share group: each worker gets a share, each job runs once`, async () => {
    const ran = new Map<string, string[]>();
    const workers: RolloutWorker[] = [];
    for (let i = 0; i < 3; i++) {
      const workerId = `w${i}`;
      const c = await broker.client(`worker-${i}`);
      const w = await serveRolloutJobs(c, {
        group: 'rollout',
        workerId,
        onError: (e) => broker.errors.push(e),
        run: async (job: RolloutJob) => {
          ran.set(job.jobId, [...(ran.get(job.jobId) ?? []), workerId]);
          await new Promise((r) => setTimeout(r, 1));
          if (job.seed % 17 === 16) throw new Error('robot fault');
          return { score: job.seed * 0.5, steps: job.horizon };
        },
      });
      workers.push(w);
    }
    const dispatcher = await JobDispatcher.create(await broker.client('service-dispatch'), { resultTimeoutMs: 10_000, onError: (e) => broker.errors.push(e) });
    const results = await Promise.all(
      Array.from({ length: N }, (_, j) => dispatcher.submit({ jobId: `job-${j}`, policyVersion: 'p3', seed: j, horizon: 10 })),
    );
    expect(ran.size).toBe(N);
    for (const [id, by] of ran) expect(by, id).toHaveLength(1);
    const perWorker = workers.map((w) => w.handled);
    expect(perWorker.reduce((a, b) => a + b, 0)).toBe(N);
    for (const h of perWorker) expect(h).toBeGreaterThanOrEqual(N / 6); // round robin gives N/3 each
    for (let j = 0; j < N; j++) {
      const r = results[j];
      expect(r.jobId).toBe(`job-${j}`);
      expect(r.workerId).toBe(ran.get(`job-${j}`)![0]);
      if (j % 17 === 16) expect(r).toMatchObject({ ok: false, error: 'robot fault' });
      else expect(r).toMatchObject({ ok: true, score: j * 0.5, steps: 10 });
    }
    expect(dispatcher.duplicateResults).toBe(0);
    expect(broker.errors).toEqual([]);
    console.log(`[jobs ${kind.name}] jobs=${N} per_worker=${perWorker.join(',')}`);
    dispatcher.close();
    for (const w of workers) await w.stop();
  });

  it('a job taken by a worker that dies is re-published and finished by another', async () => {
    const finished: string[] = [];
    const dying = await broker.client('worker-dying', { clean: true });
    let took = 0;
    await serveRolloutJobs(dying, {
      group: 'rollout2',
      workerId: 'dying',
      onError: () => {}, // its client is gone: the publish of a result can only fail
      run: () => {
        took++;
        void endClient(dying, true); // the process dies mid-rollout
        return new Promise(() => {});
      },
    });
    const c = await broker.client('worker-ok');
    const ok = await serveRolloutJobs(c, {
      group: 'rollout2',
      workerId: 'ok',
      onError: (e) => broker.errors.push(e),
      run: async (job) => {
        finished.push(job.jobId);
        return { score: 1, steps: 1 };
      },
    });
    const dispatcher = await JobDispatcher.create(await broker.client('service-dispatch2'), { resultTimeoutMs: 500, onError: (e) => broker.errors.push(e) });
    const results = await Promise.all([0, 1, 2, 3].map((j) => dispatcher.submit({ jobId: `re-${j}`, policyVersion: 'p', seed: j, horizon: 1 })));
    expect(took).toBe(1);
    expect(results.every((r) => r.ok && r.workerId === 'ok')).toBe(true);
    expect(new Set(finished)).toEqual(new Set(['re-0', 're-1', 're-2', 're-3']));
    dispatcher.close();
    await ok.stop();
  });
});
