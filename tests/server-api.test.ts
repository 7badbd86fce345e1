// Every route of the service through app.inject(): what it returns, and how it refuses — schema
// violations (400 naming the field), missing or wrong token (401), oversized bodies (413), unknown
// robot / run / policy / episode (404), repeated auth failures (429).
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZSTD_AVAILABLE } from '../episodes/mcap/export.js';
import { importEpisodeBytes } from '../episodes/mcap/import.js';
import { startService, type Service } from '../server/service.js';
import type { MetricsPoint, RobotStatus, RunStatus } from '../server/schemas.js';
import { policyOnnx } from './helpers/policy-onnx.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-api-'));
let svc: Service;
let auth: Record<string, string>;
let n = 0;
/** Each test's requests come from their own address, so the auth-failure limit of one never bites another. */
const from = () => `10.0.${Math.floor(++n / 250)}.${n % 250}`;

beforeAll(async () => {
  svc = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: null, policyBodyLimit: 256 * 1024, auth: { maxFailures: 3, windowMs: 60_000 } });
  auth = { authorization: `Bearer ${svc.token}` };
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

const inject = (o: { method?: 'GET' | 'POST' | 'PUT'; url: string; headers?: Record<string, string>; payload?: unknown; remoteAddress?: string }) =>
  svc.app.inject({ method: o.method ?? 'GET', url: o.url, headers: o.headers, payload: o.payload as string, remoteAddress: o.remoteAddress ?? from() });

async function waitFor<T>(f: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    const v = await f();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('timed out');
}
const runDone = (id: string) => waitFor(async () => {
  const s = (await inject({ url: `/api/runs/${id}` })).json<RunStatus>();
  return s.state === 'running' || s.state === 'stopping' ? undefined : s;
});

describe('service API: health, docs, metrics', () => {
  it('the token file is 0600 and 64 hex digits', () => {
    expect(statSync(svc.tokenFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(svc.tokenFile, 'utf8').trim()).toMatch(/^[0-9a-f]{64}$/);
  });

  it('GET /api/health', async () => {
    const r = await inject({ url: '/api/health' });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ status: 'ok', robots: 1, foxglove: null, mqtt: null });
  });

  it('OpenAPI at /docs/json lists every domain and marks secured routes', async () => {
    const doc = (await inject({ url: '/docs/json' })).json<{ paths: Record<string, Record<string, { security?: unknown[] }>> }>();
    for (const p of ['/api/runs/expert-session', '/api/runs/{id}/stop', '/api/robots/{id}/estop', '/api/policies/{id}/deploy', '/api/episodes/{id}/mcap', '/api/health', '/metrics']) expect(Object.keys(doc.paths)).toContain(p);
    expect(doc.paths['/api/robots/{id}/estop']!.post!.security).toEqual([{ bearer: [] }]);
    expect((await inject({ url: '/docs' })).statusCode).toBeLessThan(400);
  });

  it('unknown routes are 404 with a stable code', async () => {
    const r = await inject({ url: '/api/nope' });
    expect(r.statusCode).toBe(404);
    expect(r.json()).toMatchObject({ code: 'WMRL_NOT_FOUND', message: 'no route GET /api/nope' });
  });
});

describe('service API: robots', () => {
  it('list, status, scene; unknown robot 404; malformed id 400 naming the parameter', async () => {
    const list = (await inject({ url: '/api/robots' })).json<RobotStatus[]>();
    expect(list.map((r) => r.id)).toEqual(['sim']);
    expect(list[0]).toMatchObject({ task: 'reach', profile: 'gap', joints: ['shoulder', 'elbow'], controlHz: 50, state: 'idle' });
    const scene = (await inject({ url: '/api/robots/sim/scene' })).json<{ format: string; geoms: unknown[] }>();
    expect(scene.format).toBe('wmrl-scene/1');
    expect(scene.geoms.length).toBeGreaterThan(3);
    const missing = await inject({ url: '/api/robots/r2d2' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ code: 'WMRL_ROBOT_NOT_FOUND', message: "no robot 'r2d2' (robots: sim)" });
    expect((await inject({ url: '/api/robots/r2d2/scene' })).statusCode).toBe(404);
    const bad = await inject({ url: '/api/robots/a%20b' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/^params\.id: must match pattern/);
  });

  it('e-stop and reset need the token: none or wrong is 401, and the robot keeps moving', async () => {
    for (const url of ['/api/robots/sim/estop', '/api/robots/sim/reset']) {
      const none = await inject({ method: 'POST', url });
      expect(none.statusCode).toBe(401);
      expect(none.json().code).toBe('WMRL_UNAUTHORIZED');
      expect((await inject({ method: 'POST', url, headers: { authorization: 'Bearer ' + '0'.repeat(64) } })).statusCode).toBe(401);
    }
    expect(svc.ctx.robots.get('sim')!.safety.isEstopped).toBe(false);
  });

  it('e-stop latches on the robot (safety layer and the robot itself) until reset; unknown robot 404; bad body 400', async () => {
    const host = svc.ctx.robots.get('sim')!;
    const bad = await inject({ method: 'POST', url: '/api/robots/sim/estop?reason=' + 'x'.repeat(300), headers: auth });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toBe('querystring.reason: must NOT have more than 200 characters');
    expect((await inject({ method: 'POST', url: '/api/robots/r2d2/estop', headers: auth })).statusCode).toBe(404);
    const r = await inject({ method: 'POST', url: '/api/robots/sim/estop?reason=test', headers: auth });
    expect(r.statusCode).toBe(200);
    expect(r.json()).toMatchObject({ state: 'estopped', estopped: true, robotStopped: true });
    expect(host.sim.isStopped).toBe(true);
    await expect(host.safety.act(new Float32Array(2))).rejects.toThrow(/e-stop is latched/);
    const reset = await inject({ method: 'POST', url: '/api/robots/sim/reset', headers: auth });
    expect(reset.statusCode).toBe(200);
    expect(reset.json()).toMatchObject({ state: 'idle', estopped: false, robotStopped: false });
    expect((await inject({ method: 'POST', url: '/api/robots/r2d2/reset', headers: auth })).statusCode).toBe(404);
  });

  it('repeated auth failures from one address: its wrong tokens get 429 (401 at the e-stop), its right token still passes, other addresses get 401', async () => {
    const addr = '192.0.2.7';
    const stop = (headers?: Record<string, string>) => inject({ method: 'POST', url: '/api/runs/nope/stop', headers, remoteAddress: addr });
    for (let i = 0; i < 3; i++) expect((await stop()).statusCode).toBe(401);
    const limited = await stop({ authorization: 'Bearer wrong' });
    expect(limited.statusCode).toBe(429);
    expect(limited.json().code).toBe('WMRL_RATE_LIMITED');
    // The right token is never refused for the address's failures: it reaches the route (no such run).
    expect((await stop(auth)).json().code).toBe('WMRL_RUN_NOT_FOUND');
    expect((await inject({ method: 'POST', url: '/api/robots/sim/estop', headers: { authorization: 'Bearer wrong' }, remoteAddress: addr })).statusCode).toBe(401);
    expect((await inject({ method: 'POST', url: '/api/robots/sim/estop' })).statusCode).toBe(401);
  });
});

describe('service API: runs and episodes', () => {
  let runId = '';

  it('starting a run: 401 without token, 400 naming the field, 413 oversized, 404 unknown robot', async () => {
    expect((await inject({ method: 'POST', url: '/api/runs/expert-session', payload: { robot: 'sim' } })).statusCode).toBe(401);
    const zero = await inject({ method: 'POST', url: '/api/runs/expert-session', headers: auth, payload: { robot: 'sim', episodes: 0 } });
    expect(zero.statusCode).toBe(400);
    expect(zero.json()).toMatchObject({ code: 'WMRL_VALIDATION', message: 'body.episodes: must be >= 1' });
    const missing = await inject({ method: 'POST', url: '/api/runs/expert-session', headers: auth, payload: { episodes: 2 } });
    expect(missing.json().message).toBe('body.robot: is required');
    const extra = await inject({ method: 'POST', url: '/api/runs/expert-session', headers: auth, payload: { robot: 'sim', speed: 'ludicrous' } });
    expect(extra.statusCode).toBe(400);
    expect(extra.json().message).toBe('body.speed: is not a known field');
    const big = await inject({ method: 'POST', url: '/api/runs/expert-session', headers: { ...auth, 'content-type': 'application/json' }, payload: JSON.stringify({ robot: 'sim', pad: 'x'.repeat(70 * 1024) }) });
    expect(big.statusCode).toBe(413);
    expect(big.json().code).toBe('WMRL_BODY_TOO_LARGE');
    const unknown = await inject({ method: 'POST', url: '/api/runs/expert-session', headers: auth, payload: { robot: 'r2d2' } });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().code).toBe('WMRL_ROBOT_NOT_FOUND');
    expect((await inject({ method: 'POST', url: '/api/runs/teleport', headers: auth, payload: {} })).statusCode).toBe(404);
    expect((await inject({ url: '/api/runs/jobs' })).json<Array<{ kind: string }>>().map((j) => j.kind)).toEqual(['wmrl-train', 'vla-train', 'expert-session', 'policy', 'research']);
  });

  it('a run records episodes, streams real and imagined frames, reports metrics, and a busy robot refuses a second run', async () => {
    const r = await inject({ method: 'POST', url: '/api/runs/expert-session', headers: auth, payload: { robot: 'sim', episodes: 2 } });
    expect(r.statusCode).toBe(201);
    const run = r.json<RunStatus>();
    runId = run.id;
    expect(run).toMatchObject({ kind: 'expert-session', state: 'running', robot: 'sim', options: { robot: 'sim', episodes: 2, imagined: true, seed: 0 } });
    const busy = await inject({ method: 'POST', url: '/api/runs/expert-session', headers: auth, payload: { robot: 'sim' } });
    expect(busy.statusCode).toBe(409);
    expect(busy.json().code).toBe('WMRL_ROBOT_BUSY');
    expect((await inject({ method: 'POST', url: '/api/robots/sim/reset', headers: auth })).statusCode).toBe(409);
    const done = await runDone(runId);
    expect(done).toMatchObject({ state: 'finished', progress: { done: 2, total: 2 }, error: null });
    expect(existsSync(done.checkpoint!)).toBe(true);
    // The checkpoint left a behaviour-cloning policy, deployable on the robot it was recorded on.
    const cp = JSON.parse(readFileSync(done.checkpoint!, 'utf8')) as { policy: { id: string; samples: number; trainMse: number } };
    expect(cp.policy.id).toBe(`bc-${runId}`);
    expect(cp.policy.samples).toBeGreaterThanOrEqual(150);
    expect(cp.policy.trainMse).toBeLessThan(0.1);
    const bc = (await inject({ url: `/api/policies/bc-${runId}` })).json<{ metadata: Record<string, string>; inputs: Array<{ name: string }> }>();
    expect(bc.metadata).toMatchObject({ kind: 'wmrl.policy.gaussian_mlp', source: 'behaviour-cloning', training_run: runId, task: 'reach', policy_version: `bc-${runId}` });
    expect(bc.metadata.observation_layout).toBeDefined();
    expect(bc.inputs.map((i) => i.name)).toEqual(['obs']);
    const metrics = (await inject({ url: `/api/runs/${runId}/metrics` })).json<MetricsPoint[]>();
    expect(metrics.map((m) => m.step)).toEqual([1, 2]);
    const m = metrics[1]!;
    expect(m.robotSeconds).toBeGreaterThan(0);
    expect(m.anchorFraction).toBe(1);
    expect(m.biasReduction).toBeNull();
    expect(m.ppi![0]).toBeLessThanOrEqual(m.trueSuccess!);
    expect(m.ppi![1]).toBeGreaterThanOrEqual(m.trueSuccess!);
    const eps = (await inject({ url: `/api/runs/${runId}/rollouts` })).json<string[]>();
    expect(eps).toHaveLength(2);
    const ro = (await inject({ url: `/api/runs/${runId}/rollouts/${eps[0]}` })).json<{ real: Array<{ t: number; q: number[]; poses: number[] }>; imagined: Array<{ source: string; members: number[][] }> }>();
    expect(ro.real.length).toBeGreaterThan(10);
    expect(ro.real.map((f) => f.t).slice(0, 3)).toEqual([0, 1, 2]);
    expect(ro.real[0]!.q).toHaveLength(2);
    expect(ro.imagined.length).toBe(ro.real.length);
    expect(ro.imagined[0]!.source).toBe('sim-replay');
    // The nominal replay and the gap robot diverge: the imagined rollout is a different trajectory.
    const last = ro.real.length - 1;
    expect(Math.abs(ro.imagined[last]!.members[0]![0]! - ro.real[last]!.q[0]!)).toBeGreaterThan(1e-3);
    expect((await inject({ url: `/api/runs/${runId}/rollouts/nope` })).statusCode).toBe(404);
  });

  it('unknown run is 404 on every run route', async () => {
    for (const url of ['/api/runs/nope', '/api/runs/nope/metrics', '/api/runs/nope/rollouts']) {
      const r = await inject({ url });
      expect(r.statusCode, url).toBe(404);
      expect(r.json().code).toBe('WMRL_RUN_NOT_FOUND');
    }
    expect((await inject({ method: 'POST', url: '/api/runs/nope/stop', headers: auth })).statusCode).toBe(404);
    expect((await inject({ method: 'POST', url: '/api/runs/nope/stop' })).statusCode).toBe(401);
  });

  it('stop finishes the episode being recorded and checkpoints the run', async () => {
    const run = (await inject({ method: 'POST', url: '/api/runs/expert-session', headers: auth, payload: { robot: 'sim', episodes: 50, imagined: false } })).json<RunStatus>();
    await new Promise((r) => setTimeout(r, 500));
    const stopped = await inject({ method: 'POST', url: `/api/runs/${run.id}/stop`, headers: auth });
    expect(stopped.statusCode).toBe(200);
    expect(stopped.json()).toMatchObject({ state: 'stopped' });
    const cp = JSON.parse(readFileSync(stopped.json<RunStatus>().checkpoint!, 'utf8')) as { stoppedEarly: boolean; episodes: string[] };
    expect(cp.stoppedEarly).toBe(true);
    // Nothing is left 'recording': the interrupted episode was finished as partial.
    expect(svc.ctx.store.list({ status: 'recording' })).toHaveLength(0);
    expect(cp.episodes.length).toBeGreaterThan(0);
    expect(svc.ctx.robots.get('sim')!.run).toBeNull();
  });

  it('episodes: list (with filters), fetch, MCAP export; unknown 404; bad query 400', async () => {
    const list = (await inject({ url: '/api/episodes?status=complete' })).json<Array<{ id: string; steps: number; hardwareProfile: string }>>();
    expect(list.length).toBeGreaterThanOrEqual(2);
    expect(list[0]!.hardwareProfile).toBe('gap');
    expect((await inject({ url: '/api/episodes?limit=1' })).json<unknown[]>()).toHaveLength(1);
    const bad = await inject({ url: '/api/episodes?status=lost' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toMatch(/^querystring\.status/);
    const e = (await inject({ url: `/api/episodes/${list[0]!.id}` })).json<{ summary: { steps: number }; steps: Array<{ position: number[]; action: number[] }> }>();
    expect(e.steps).toHaveLength(list[0]!.steps);
    expect(e.steps[0]!.position).toHaveLength(2);
    const bag = await inject({ url: `/api/episodes/${list[0]!.id}/mcap?compression=lz4` });
    expect(bag.statusCode).toBe(200);
    expect(bag.rawPayload.subarray(0, 8).toString('latin1')).toBe('\x89MCAP0\r\n');
    // zstd chunks where the service's Node has them (CI's Node 22); a clear 400 where it has not.
    const z = await inject({ url: `/api/episodes/${list[0]!.id}/mcap?compression=zstd` });
    if (ZSTD_AVAILABLE) expect([z.statusCode, importEpisodeBytes(new Uint8Array(z.rawPayload), 'z.mcap').steps.length]).toEqual([200, list[0]!.steps]);
    else expect(z.json()).toMatchObject({ statusCode: 400, code: 'WMRL_VALIDATION', message: expect.stringMatching(/^compression=zstd: .*Node >= 22\.15/) });
    expect((await inject({ url: '/api/episodes/nope' })).json()).toMatchObject({ statusCode: 404, code: 'WMRL_EPISODE_NOT_FOUND' });
    expect((await inject({ url: '/api/episodes/nope/mcap' })).statusCode).toBe(404);
  });

  it('GET /api/runs lists the runs; /metrics counts commands and episodes', async () => {
    expect((await inject({ url: '/api/runs' })).json<RunStatus[]>().map((r) => r.id)).toContain(runId);
    const text = (await inject({ url: '/metrics' })).body;
    expect(text).toMatch(/wmrl_robot_commands_total\{robot="sim"\} [1-9]\d*/);
    expect(text).toMatch(/wmrl_episodes_total\{status="[a-z]+"\} [1-9]/);
    expect(text).toMatch(/wmrl_runs\{state="finished"\} 1/);
  });
});

describe('service API: policies', () => {
  const host = () => svc.ctx.robots.get('sim')!;
  const obsDim = () => host().sim.spec.joints.length * 2 + (host().sim.spec.features?.length ?? 0);
  const octet = { ...{ 'content-type': 'application/octet-stream' } };

  it('upload: 401 without token, 415 as JSON, 422 not a policy, 413 oversized; then list, describe, download', async () => {
    const bytes = Buffer.from(policyOnnx(obsDim(), 2));
    expect((await inject({ method: 'PUT', url: '/api/policies/pi', headers: octet, payload: bytes })).statusCode).toBe(401);
    expect((await inject({ method: 'PUT', url: '/api/policies/pi', headers: auth, payload: { x: 1 } })).statusCode).toBe(415);
    const junk = await inject({ method: 'PUT', url: '/api/policies/pi', headers: { ...auth, ...octet }, payload: Buffer.from('not onnx at all') });
    expect(junk.statusCode).toBe(422);
    expect(junk.json().code).toBe('WMRL_POLICY_INVALID');
    const big = await inject({ method: 'PUT', url: '/api/policies/pi', headers: { ...auth, ...octet }, payload: Buffer.alloc(300 * 1024) });
    expect(big.statusCode).toBe(413);
    const ok = await inject({ method: 'PUT', url: '/api/policies/pi', headers: { ...auth, ...octet }, payload: bytes });
    expect(ok.statusCode).toBe(201);
    expect(ok.json()).toMatchObject({ id: 'pi', bytes: bytes.length, inputs: [{ name: 'obs', shape: ['batch', obsDim()] }], outputs: [{ name: 'action' }], metadata: { kind: 'test_policy' } });
    expect((await inject({ url: '/api/policies' })).json<Array<{ id: string }>>().map((p) => p.id)).toContain('pi');
    expect((await inject({ url: '/api/policies/pi' })).json().sha256).toMatch(/^[0-9a-f]{64}$/);
    const dl = await inject({ url: '/api/policies/pi/download' });
    expect(dl.headers['content-type']).toBe('application/octet-stream');
    expect(Buffer.compare(dl.rawPayload, bytes)).toBe(0);
  });

  it('unknown policy is 404 on every policy route', async () => {
    for (const url of ['/api/policies/nope', '/api/policies/nope/download']) expect((await inject({ url })).json().code).toBe('WMRL_POLICY_NOT_FOUND');
    expect((await inject({ method: 'POST', url: '/api/policies/nope/deploy', headers: auth, payload: { robot: 'sim' } })).statusCode).toBe(404);
  });

  it('deploy: 401, 400 naming the field, 404 unknown robot, 422 wrong shape for the robot; then it runs on the robot', async () => {
    expect((await inject({ method: 'POST', url: '/api/policies/pi/deploy', payload: { robot: 'sim' } })).statusCode).toBe(401);
    expect((await inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: 'sim', episodes: 'many' } })).json().message).toBe('body.episodes: must be integer');
    expect((await inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: 'r2d2' } })).statusCode).toBe(404);
    await inject({ method: 'PUT', url: '/api/policies/narrow', headers: { ...auth, 'content-type': 'application/octet-stream' }, payload: Buffer.from(policyOnnx(3, 2)) });
    const wrong = await inject({ method: 'POST', url: '/api/policies/narrow/deploy', headers: auth, payload: { robot: 'sim' } });
    expect(wrong.statusCode).toBe(422);
    expect(wrong.json().message).toMatch(/'obs' has 3 entries but robot sim-reach-gap provides/);
    const before = host().stepsApplied;
    const d = await inject({ method: 'POST', url: '/api/policies/pi/deploy', headers: auth, payload: { robot: 'sim', episodes: 1 } });
    expect(d.statusCode).toBe(201);
    const done = await runDone(d.json<RunStatus>().id);
    expect(done).toMatchObject({ kind: 'policy', state: 'finished', progress: { done: 1, total: 1 } });
    expect(host().stepsApplied - before).toBeGreaterThanOrEqual(50);
    const eps = (await inject({ url: '/api/episodes' })).json<Array<{ policyVersion: string }>>();
    expect(eps.at(-1)!.policyVersion).toBe('pi');
  });
});

describe('RunManager', () => {
  it('fills in defaults and validates options for callers inside the process too', () => {
    expect(() => svc.ctx.runs.start('expert-session', { robot: 'sim', episodes: -1 })).toThrow(/options\.episodes: Expected integer to be greater or equal to 1/);
    expect(() => svc.ctx.runs.start('expert-session', { robot: 'sim', warp: 9 })).toThrow(/options.warp: Unexpected property/);
  });
});
