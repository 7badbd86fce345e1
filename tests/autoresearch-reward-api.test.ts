// The reward API over a listening server and a real HTTP client (fetch): OpenRLHF's exact
// request and response JSON, excluded (not zero) rewards when a sandbox execution times out or
// crashes, 400s that name the field, and 100 concurrent requests all answered within the deadline,
// items whose execution is still running answered from the calibrated world model and marked.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveRewardApi } from '../autoresearch/reward-api.js';
import { RewardService } from '../autoresearch/reward-service.js';
import { SandboxPool } from '../autoresearch/sandbox.js';
import type { ResearchTask } from '../autoresearch/task.js';
import { startService } from '../server/service.js';

/** A research task whose execution is cheap and whose faults are chosen by the proposal. */
const TASK: ResearchTask = {
  name: 'toy',
  fields: [
    { name: 'quality', choices: [0, 1, 2, 3] },
    { name: 'mode', choices: ['ok', 'crash', 'hang', 'slow'] },
  ],
  program: {
    kind: 'source',
    code: `export default async function ({ proposal }) {
      if (proposal.mode === 'crash') process.exit(7);
      if (proposal.mode === 'hang') while (true) {}
      if (proposal.mode === 'slow') await new Promise((r) => setTimeout(r, 60_000));
      return { score: proposal.quality / 3 };
    }`,
  },
  metric: 'quality / 3',
  limits: { timeoutMs: 2500, memoryMb: 256, maxProcs: 4 },
  seeds: 1,
};

const answer = (quality: number, mode = 'ok') => ` Proposal: {"quality": ${quality}, "mode": "${mode}"}`;
const errors: Error[] = [];

async function start(deadlineMs: number, fraction: number, o: { token?: string; maxPendingRequests?: number } = {}) {
  const pool = SandboxPool.create({ slots: 2 });
  const service = new RewardService({ task: TASK, executor: pool, deadlineMs, invalidReward: -1, corrector: { anchors: { fraction, floor: 1 } }, onError: (e) => errors.push(e), maxPendingRequests: o.maxPendingRequests });
  const server = await serveRewardApi(service, { port: 0, token: o.token });
  const auth: Record<string, string> = o.token ? { authorization: `Bearer ${o.token}` } : {};
  return {
    url: server.url,
    post: (path: string, body: unknown, headers: Record<string, string> = auth) => fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) }),
    async close() {
      await server.close();
      await pool.close();
      await service.close();
    },
  };
}

describe('reward API, every group anchored', () => {
  let api: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => { api = await start(15_000, 1); });
  afterAll(async () => { await api?.close(); });

  it('POST /get_reward: the OpenRLHF request and response, exactly', async () => {
    const p1 = 'Propose a classifier config for dataset A.';
    const p2 = 'Propose a classifier config for dataset B.';
    const request = {
      query: [p1 + answer(3), p1 + answer(1), p1 + ' no idea', p2 + answer(0), p2 + answer(2)],
      prompts: [p1, p1, p1, p2, p2],
      labels: [null, null, null, null, null],
    };
    const res = await api.post('/get_reward', request);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { rewards: number[]; scores: number[]; extra_logs: Record<string, number[]> };
    expect(Object.keys(body).sort()).toEqual(['extra_logs', 'rewards', 'scores']);
    expect(Object.keys(body.extra_logs).sort()).toEqual(['anchor_weight', 'bias_reduction', 'calibrated', 'excluded', 'invalid', 'pending', 'real', 'world_model']);
    for (const v of Object.values(body.extra_logs)) expect(v).toHaveLength(5);
    // Every group is an anchor here: the valid proposals are scored by their real execution.
    expect(body.rewards).toEqual([1, 1 / 3, -1, 0, 2 / 3]);
    expect(body.scores).toEqual(body.rewards);
    expect(body.extra_logs.real).toEqual([1, 1, 0, 1, 1]);
    expect(body.extra_logs.invalid).toEqual([0, 0, 1, 0, 0]);
    expect(body.extra_logs.excluded).toEqual([0, 0, 0, 0, 0]);
    expect(body.extra_logs.pending).toEqual([0, 0, 0, 0, 0]);
    for (const x of body.extra_logs.world_model!) expect(Number.isFinite(x)).toBe(true);
  }, 30_000);

  it('a timeout or crash in the sandbox gives an excluded rollout, not a 0 reward', async () => {
    const p = 'Propose.';
    const items = [answer(3), answer(0), answer(2, 'crash'), answer(1, 'hang')].map((response) => ({ prompt: p, response }));
    const graded = await (await api.post('/grade', { items })).json() as { items: Array<{ score: number | null; source: string; reason: string | null }>; stats: { excludedItems: number; realItems: number } };
    expect(graded.items.map((i) => i.score)).toEqual([1, 0, null, null]);
    expect(graded.items.map((i) => i.source)).toEqual(['real', 'real', 'excluded', 'excluded']);
    expect(graded.items[2]!.reason).toMatch(/^crash: .*exit code 7/);
    expect(graded.items[3]!.reason).toMatch(/^timeout/);
    expect(graded.stats).toMatchObject({ excludedItems: 2, realItems: 2 });
    // OpenRLHF's format has no null: the excluded items get their group's mean (zero advantage), flagged.
    const r = await (await api.post('/get_reward', { query: items.map((i) => p + i.response), prompts: items.map(() => p) })).json() as { rewards: number[]; extra_logs: Record<string, number[]> };
    expect(r.rewards).toEqual([1, 0, 0.5, 0.5]);
    expect(r.extra_logs.excluded).toEqual([0, 0, 1, 1]);
  }, 30_000);

  it('a malformed request gets 400 naming the field', async () => {
    const cases: Array<[string, unknown, RegExp]> = [
      ['/get_reward', { query: ['a'] }, /body\.prompts: is required/],
      ['/get_reward', { query: 'a b', prompts: ['a'] }, /body\.query: must be array/],
      ['/get_reward', { query: ['a', 'b'], prompts: ['a'] }, /body\.prompts: has 1 items, body\.query has 2/],
      ['/get_reward', { query: [1], prompts: ['a'] }, /body\.query\.0: must be string/],
      ['/grade', { items: [{ prompt: 'p' }] }, /body\.items\.0\.response: is required/],
      ['/grade', { items: [], extra: 1 }, /body\.items: must NOT have fewer than 1 items.*body\.extra: is not a known field|body\.extra: is not a known field.*body\.items/],
    ];
    for (const [path, body, msg] of cases) {
      const res = await api.post(path, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      const e = (await res.json()) as { code: string; message: string };
      expect(e.code).toBe('WMRL_VALIDATION');
      expect(e.message).toMatch(msg);
    }
    const bad = await fetch(`${api.url}/get_reward`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query": [' });
    expect(bad.status).toBe(400);
  });

  it('GET /health reports the sandbox capacity and isolation', async () => {
    const h = await (await fetch(`${api.url}/health`)).json();
    expect(h).toMatchObject({ status: 'ok', capacity: 2, isolation: { network: true, pidNamespace: true } });
  });
});

describe('reward API under load: deadlines', () => {
  const DEADLINE = 3000;
  let api: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => { api = await start(DEADLINE, 0.1); });
  afterAll(async () => { await api?.close(); });

  it('100 concurrent requests are all answered within their deadline; unfinished anchors are marked pending', async () => {
    const requests = Array.from({ length: 100 }, (_, k) => {
      const prompts = [`task ${k % 7} a`, `task ${k % 7} a`, `task ${k % 7} a`, `task ${k % 5} b`, `task ${k % 5} b`, `task ${k % 5} b`];
      // Every proposal's execution outlasts the deadline (mode slow), so no anchor is back in time.
      const query = prompts.map((p, i) => p + answer((k + i) % 4, 'slow'));
      return { query, prompts };
    });
    const t0 = performance.now();
    const results = await Promise.all(requests.map(async (body) => {
      const s = performance.now();
      const res = await api.post('/get_reward', body);
      return { status: res.status, ms: performance.now() - s, body: (await res.json()) as { rewards: number[]; extra_logs: Record<string, number[]> } };
    }));
    const wall = performance.now() - t0;
    for (const r of results) {
      expect(r.status).toBe(200);
      expect(r.ms).toBeLessThan(DEADLINE + 1000);
      expect(r.body.rewards).toHaveLength(6);
      // Nothing is scored 0 for lack of a result: every reward is the calibrated world model's.
      expect(r.body.extra_logs.real).toEqual([0, 0, 0, 0, 0, 0]);
      expect(r.body.rewards).toEqual(r.body.extra_logs.world_model);
    }
    const pending = results.reduce((n, r) => n + r.body.extra_logs.pending!.reduce((a, b) => a + b, 0), 0);
    expect(pending).toBeGreaterThan(0);
    expect(errors).toEqual([]);
    console.log(`[reward-api] 100 concurrent requests: max ${Math.max(...results.map((r) => r.ms)).toFixed(0)} ms, wall ${wall.toFixed(0)} ms, pending items ${pending}`);
  }, 60_000);
});

describe('reward API: access token and a bounded queue', () => {
  const TOKEN = 'reward-token-0123456789abcdef';
  const DEADLINE = 3000;
  let api: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => { api = await start(DEADLINE, 1, { token: TOKEN, maxPendingRequests: 2 }); });
  afterAll(async () => { await api?.close(); });
  const body = (mode = 'ok') => ({ query: ['p' + answer(3, mode), 'p' + answer(0, mode)], prompts: ['p', 'p'] });

  it('refuses a missing or wrong token (401) on /get_reward and /grade; takes it as a bearer header or ?token=', async () => {
    for (const path of ['/get_reward', '/grade']) {
      const none = await api.post(path, {}, {});
      expect(none.status).toBe(401);
      expect(await none.json()).toMatchObject({ code: 'WMRL_UNAUTHORIZED' });
      expect((await api.post(path, {}, { authorization: 'Bearer not-the-token-at-all' })).status).toBe(401);
      expect((await api.post(`${path}?token=not-the-token-at-all`, {}, {})).status).toBe(401);
    }
    expect((await api.post('/get_reward', body())).status).toBe(200);
    expect((await api.post(`/get_reward?token=${TOKEN}`, body(), {})).status).toBe(200);
    expect((await fetch(`${api.url}/health`)).status).toBe(200);
  }, 30_000);

  it('a full queue answers 503 WMRL_QUEUE_FULL at once, with Retry-After; the requests it holds are answered within their deadline', async () => {
    const t0 = performance.now();
    // Two requests whose executions outlast the deadline fill the queue (maxPendingRequests 2).
    const held = [api.post('/get_reward', body('slow')), api.post('/get_reward', body('slow'))];
    await new Promise((r) => setTimeout(r, 200));
    const full = await api.post('/get_reward', body());
    expect(full.status).toBe(503);
    expect(full.headers.get('retry-after')).toBe('1');
    expect(await full.json()).toMatchObject({ code: 'WMRL_QUEUE_FULL', message: expect.stringMatching(/grading 2 requests/) });
    expect(performance.now() - t0).toBeLessThan(DEADLINE);
    expect((await fetch(`${api.url}/health`).then((r) => r.json())) as object).toMatchObject({ pendingRequests: 2, maxPendingRequests: 2 });
    for (const r of await Promise.all(held)) expect(r.status).toBe(200);
    expect(performance.now() - t0).toBeLessThan(DEADLINE + 1000);
    // Room again once they are answered.
    expect((await api.post('/get_reward', body())).status).toBe(200);
  }, 30_000);
});

describe('reward API inside the service', () => {
  it('is served under /reward behind the access token, with its routes in the OpenAPI document', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'wmrl-reward-'));
    const pool = SandboxPool.create({ slots: 1 });
    const reward = new RewardService({ task: TASK, executor: pool, deadlineMs: 10_000, invalidReward: -1, corrector: { anchors: { fraction: 1 } }, onError: (e) => errors.push(e) });
    const svc = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: null, robots: [], reward });
    try {
      const request = JSON.stringify({ query: ['p' + answer(3), 'p' + answer(0)], prompts: ['p', 'p'], labels: ['', ''] });
      const anonymous = await fetch(`${svc.url}/reward/get_reward`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: request });
      expect(anonymous.status).toBe(401);
      expect(await anonymous.json()).toMatchObject({ code: 'WMRL_UNAUTHORIZED' });
      const r = await fetch(`${svc.url}/reward/get_reward`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${svc.token}` }, body: request });
      expect(r.status).toBe(200);
      expect(((await r.json()) as { rewards: number[] }).rewards).toEqual([1, 0]);
      expect(await (await fetch(`${svc.url}/reward/health`)).json()).toMatchObject({ status: 'ok', capacity: 1 });
      const bad = await fetch(`${svc.url}/reward/grade?token=${svc.token}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ items: [{ prompt: 1, response: 'x' }] }) });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { message: string }).message).toMatch(/body\.items\.0\.prompt: must be string/);
      const doc = (await (await fetch(`${svc.url}/docs/json`)).json()) as { paths: Record<string, unknown> };
      for (const p of ['/reward/get_reward', '/reward/grade', '/reward/health']) expect(Object.keys(doc.paths)).toContain(p);
    } finally {
      await svc.close();
      await pool.close();
      await reward.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});

describe('wmrl reward-serve', () => {
  it('serves the API on its own port, says what the sandbox enforces, and stops on SIGINT', async () => {
    const p = spawn(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'reward-serve', '--port', '0', '--slots', '1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
    const url = await new Promise<string>((resolve, reject) => {
      const t = setInterval(() => { const m = /reward API on (http:\/\/\S+)/.exec(out); if (m && out.includes('sandbox:')) { clearInterval(t); resolve(m[1]!); } }, 50);
      p.once('exit', (code) => { clearInterval(t); reject(new Error(`exited with ${code}: ${out}`)); });
    });
    const token = /access token: ([0-9a-f]{64}) /.exec(out)?.[1];
    expect(token).toBeDefined();
    expect(out).toContain(`--remote_rm_url ${url}/get_reward?token=${token}`);
    const post = (headers: Record<string, string>) => fetch(`${url}/grade`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{}' });
    expect((await post({})).status).toBe(401);
    expect((await post({ authorization: `Bearer ${token}` })).status).toBe(400);
    expect(out).toMatch(/sandbox: 1 slots; network isolated, files and processes too \(bubblewrap\)/);
    expect(await (await fetch(`${url}/health`)).json()).toMatchObject({ status: 'ok', capacity: 1 });
    p.kill('SIGINT');
    expect(await new Promise((r) => p.once('exit', r))).toBe(0);
  }, 30_000);
});

describe('reward API over a free-text (code) task', () => {
  it('responses are proposals as they are, featurized by hashed n-grams, executed as anchors', async () => {
    const task: ResearchTask = {
      name: 'code', fields: [], metric: 'length of the response, capped at 10',
      program: { kind: 'source', code: 'export default ({ proposal }) => ({ score: Math.min(10, proposal.text.trim().length) })' },
      limits: { timeoutMs: 5000 }, seeds: 1,
    };
    const pool = SandboxPool.create({ slots: 2 });
    const service = new RewardService({ task, executor: pool, deadlineMs: 10_000, invalidReward: -1, corrector: { anchors: { fraction: 1 } }, onError: (e) => errors.push(e) });
    try {
      const g = await service.grade([{ prompt: 'p', response: ' x = 1' }, { prompt: 'p', response: ' for (;;) {}' }]);
      expect(g.items.map((i) => [i.score, i.source])).toEqual([[5, 'real'], [10, 'real']]);
    } finally {
      await pool.close();
      await service.close();
    }
  }, 30_000);
});
