// The AutoResearch recipe as the service's `research` job at a tiny budget: its options on the route (400 naming
// the field), a run started through app.inject() and stopped after its first step (checkpointed, the proposal it
// stopped on exported), and a run started over real HTTP on the listening service, to its end.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadResearchArtifact, type ResearchRow } from '../recipes/autoresearch.js';
import type { ResearchCheckpoint } from '../server/research-job.js';
import type { RunStatus } from '../server/schemas.js';
import { startService, type Service } from '../server/service.js';
import { until } from './helpers/until.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-research-job-'));
let svc: Service;
let auth: Record<string, string>;
const TINY = { task: 'controller', algo: 'standard', groupsPerStep: 1, groupSize: 2, evalSeeds: 1 };

beforeAll(async () => {
  svc = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: null });
  auth = { authorization: `Bearer ${svc.token}` };
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

const inject = (o: { method?: 'GET' | 'POST'; url: string; payload?: unknown }) => svc.app.inject({ method: o.method ?? 'GET', url: o.url, headers: auth, payload: o.payload as string });
const ended = (id: string) => until(() => {
  const s = svc.ctx.runs.get(id).status;
  return s.state === 'running' || s.state === 'stopping' ? undefined : s;
}, `run ${id} ended`, 180_000);

describe('research job', () => {
  it('is listed with its options schema; bad options are 400 naming the field', async () => {
    const jobs = (await inject({ url: '/api/runs/jobs' })).json<Array<{ kind: string; options: { properties: Record<string, { default?: unknown }> } }>>();
    const job = jobs.find((j) => j.kind === 'research')!;
    expect(job.options.properties.algo!.default).toBe('wmrl');
    const bad: Array<[unknown, RegExp]> = [
      [{ task: 'chess' }, /body\.task/],
      [{ steps: 0 }, /body\.steps: must be >= 1/],
      [{ algo: 'standard', pureWm: true }, /--pure-wm, pureWm; --warmup, warmup\) are WMRL options/],
      [{ unsafeNoIsolation: true }, /unsafeNoIsolation/],
    ];
    for (const [payload, msg] of bad) {
      const r = await inject({ method: 'POST', url: '/api/runs/research', payload });
      expect(r.statusCode, JSON.stringify(payload)).toBe(400);
      expect(r.json<{ message: string }>().message).toMatch(msg);
    }
  });

  it('a stop ends the run after the step in progress, checkpointed, with the proposal it stopped on', async () => {
    const r = await inject({ method: 'POST', url: '/api/runs/research', payload: { ...TINY, steps: 20 } });
    expect(r.statusCode, r.body).toBe(201);
    const id = r.json<RunStatus>().id;
    await until(() => svc.ctx.runs.get(id).status.progress.done >= 1, 'a step done', 180_000);
    expect((await inject({ method: 'POST', url: `/api/runs/${id}/stop` })).statusCode).toBe(200);
    const s = await ended(id);
    expect(s.state, s.error ?? '').toBe('stopped');
    const cp = JSON.parse(readFileSync(s.checkpoint!, 'utf8')) as ResearchCheckpoint;
    expect(cp.stoppedEarly).toBe(true);
    expect(cp.steps).toBeGreaterThanOrEqual(1);
    expect(cp.steps).toBeLessThan(20);
    expect(loadResearchArtifact(cp.policy!).steps).toBe(cp.steps);
  });

  it('runs to its end when started over HTTP on the listening service', async () => {
    const res = await fetch(`${svc.url}/api/runs/research`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify({ ...TINY, steps: 2 }) });
    expect(res.status).toBe(201);
    const id = ((await res.json()) as RunStatus).id;
    const s = await ended(id);
    expect(s.state, s.error ?? '').toBe('finished');
    expect(s.progress).toMatchObject({ done: 2, total: 2 });
    const cp = JSON.parse(readFileSync(s.checkpoint!, 'utf8')) as ResearchCheckpoint;
    expect(cp).toMatchObject({ task: 'controller', algo: 'standard', steps: 2, stoppedEarly: false });
    const runDir = join(dir, 'runs', id);
    const rows = JSON.parse(readFileSync(join(runDir, 'steps.json'), 'utf8')) as ResearchRow[];
    expect(rows.map((x) => x.step)).toEqual([0, 1]);
    expect(loadResearchArtifact(join(runDir, 'policy.json')).proposal).toEqual(rows[1]!.greedy);
    expect(existsSync(join(runDir, 'executions.jsonl'))).toBe(true);
  });
});
