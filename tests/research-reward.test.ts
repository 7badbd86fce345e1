// A research run's artifact under the reward API: the service starts a tiny `research` run on a built-in task, and
// the proposal its policy.json ends on, sent as the response to the service's own /reward/grade and
// /reward/get_reward for that task, is scored by its real execution: exactly what the task's own program gives it
// (executed here on its own) and what the run measured it at.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RewardService } from '../autoresearch/reward-service.js';
import { SandboxPool } from '../autoresearch/sandbox.js';
import { execute } from '../autoresearch/task.js';
import { RESEARCH_TASKS } from '../autoresearch/tasks/index.js';
import { loadResearchArtifact } from '../recipes/autoresearch.js';
import type { RunStatus } from '../server/schemas.js';
import { startService, type Service } from '../server/service.js';
import { until } from './helpers/until.js';

const task = RESEARCH_TASKS.get('classifier')!;
const dir = mkdtempSync(join(tmpdir(), 'wmrl-research-reward-'));
const errors: Error[] = [];
let svc: Service;
let pool: SandboxPool;
let reward: RewardService;
let headers: Record<string, string>;

beforeAll(async () => {
  pool = SandboxPool.create({ slots: 1 });
  // Every request's group is an anchor (one group a request: the floor), executed within the deadline.
  reward = new RewardService({ task, executor: pool, deadlineMs: 120_000, invalidReward: -1, onError: (e) => errors.push(e) });
  svc = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: null, reward });
  headers = { authorization: `Bearer ${svc.token}`, 'content-type': 'application/json' };
});
afterAll(async () => {
  await svc?.close();
  await reward?.close();
  await pool?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("a research run's artifact under the reward API", () => {
  it("is graded by the task's own program: /reward/grade and /reward/get_reward give the score its execution gives", async () => {
    // One step, measured on one training seed (seed 0, the one the reward service executes on).
    const started = await svc.app.inject({ method: 'POST', url: '/api/runs/research', headers, payload: { task: 'classifier', algo: 'standard', steps: 1, groupsPerStep: 1, groupSize: 2, evalSeeds: 1 } });
    expect(started.statusCode, started.body).toBe(201);
    const id = started.json<RunStatus>().id;
    const done = await until(() => {
      const s = svc.ctx.runs.get(id).status;
      return s.state === 'running' ? undefined : s;
    }, 'the research run ended', 180_000);
    expect(done.state, done.error ?? '').toBe('finished');
    const artifact = loadResearchArtifact(join(dir, 'runs', id, 'policy.json'));
    expect(artifact.task).toBe('classifier');

    const own = await execute(pool, task, artifact.proposal, 0);
    expect(own.reason).toBeNull();
    // The run measured the proposal it ends on with the same program, on the same seed.
    expect(artifact.score).toBe(own.score);

    const prompt = 'Propose an MLP config for the Seattle weather data.';
    const response = JSON.stringify(artifact.proposal);
    const grade = await fetch(`${svc.url}/reward/grade`, { method: 'POST', headers, body: JSON.stringify({ items: [{ prompt, response }] }) });
    expect(grade.status).toBe(200);
    const graded = (await grade.json()) as { items: Array<{ score: number | null; source: string; reason: string | null }>; stats: { anchorGroups: number } };
    expect(graded.items).toEqual([expect.objectContaining({ score: own.score, source: 'real', reason: null })]);
    expect(graded.stats.anchorGroups).toBe(1);

    const rl = await fetch(`${svc.url}/reward/get_reward`, { method: 'POST', headers, body: JSON.stringify({ query: [`${prompt} ${response}`], prompts: [prompt], labels: [null] }) });
    expect(rl.status).toBe(200);
    const body = (await rl.json()) as { rewards: number[]; extra_logs: { real: number[] } };
    expect(body.rewards).toEqual([own.score]);
    expect(body.extra_logs.real).toEqual([1]);

    // Without the service's token, the reward API refuses.
    expect((await fetch(`${svc.url}/reward/grade`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ items: [{ prompt, response }] }) })).status).toBe(401);
    expect(errors).toEqual([]);
  }, 240_000);
});
