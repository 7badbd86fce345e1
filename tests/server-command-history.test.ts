// A service robot that reports its last commands (`wmrl serve --command-history K`): its status says so, and
// its jobs train and run policies over them — a WMRL run's policy declares them in its layout and deploys on it,
// and an expert session's demonstrations carry them into the policy cloned from them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startService, type Service } from '../server/service.js';
import type { RobotStatus, RunStatus } from '../server/schemas.js';

const dir = mkdtempSync(join(tmpdir(), 'svc-commands-'));
let svc: Service;
let auth: Record<string, string>;
const TINY = { pretrain: { bcEpisodes: 3, bcEpochs: 5, daggerRounds: 0, wmEpisodes: 4, wmEpochs: 2, wmMembers: 3, wmHidden: [32] }, evalEpisodes: 5, prompts: 2, group: 2, imagine: 1, anchorGroups: 1, calibrate: 0 };

beforeAll(async () => {
  svc = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: null, robots: [{ id: 'sim', task: 'reach', profile: 'gap', commandHistory: 3 }] });
  auth = { authorization: `Bearer ${svc.token}` };
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

const inject = (o: { method?: 'GET' | 'POST'; url: string; payload?: unknown }) => svc.app.inject({ method: o.method ?? 'GET', url: o.url, headers: auth, payload: o.payload as string });
async function ended(id: string): Promise<RunStatus> {
  for (const t0 = Date.now(); Date.now() - t0 < 90_000;) {
    const s = svc.ctx.runs.get(id).status;
    if (s.state !== 'running' && s.state !== 'stopping') return s;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('timed out');
}

it('the robot reports its last 3 commands; a WMRL run trains over them and its policy deploys on it; an expert session clones over them', async () => {
  const status = (await inject({ url: '/api/robots/sim' })).json<RobotStatus>();
  expect(status.commandHistory).toBe(3);

  const started = await inject({ method: 'POST', url: '/api/runs/wmrl-train', payload: { robot: 'sim', ...TINY, updates: 1, realTime: false } });
  expect(started.statusCode).toBe(201);
  const id = started.json<RunStatus>().id;
  expect(await ended(id)).toMatchObject({ state: 'finished', error: null });
  const policy = (await inject({ url: `/api/policies/${id}` })).json<{ metadata: Record<string, string> }>();
  const features = (JSON.parse(policy.metadata.observation_layout!) as { features: Array<{ name: string }> }).features.map((f) => f.name);
  expect(features.slice(-2)).toEqual(['shoulder command t-3', 'elbow command t-3']);
  const d = await inject({ method: 'POST', url: `/api/policies/${id}/deploy`, payload: { robot: 'sim', episodes: 1 } });
  expect(d.statusCode).toBe(201);
  expect(await ended(d.json<RunStatus>().id)).toMatchObject({ kind: 'policy', state: 'finished', error: null });

  // an expert session's demonstrations carry the commands, and so does the policy cloned from them
  const session = await inject({ method: 'POST', url: '/api/runs/expert-session', payload: { robot: 'sim', episodes: 3 } });
  expect(session.statusCode).toBe(201);
  const sid = session.json<RunStatus>().id;
  expect(await ended(sid)).toMatchObject({ state: 'finished', error: null });
  const bc = (await inject({ url: `/api/policies/bc-${sid}` })).json<{ metadata: Record<string, string> }>();
  expect((JSON.parse(bc.metadata.observation_layout!) as { features: Array<{ name: string }> }).features.at(-1)!.name).toBe('elbow command t-3');
}, 180_000);
