// The VLA recipe as the service's job `vla-train` at a tiny budget: its options on the route (400 naming the field,
// or the robot that cannot run it), a run through app.inject() to its end on the service's camera robot (the VLA in
// the library, loadable by the policy runner and deployed; the robot's episodes recorded and streamed; metrics; the
// trainer's checkpoint), a stop during pretraining (no policy), and a run started and stopped over real HTTP on the
// listening service during training (the VLA as its last update left it, in the library).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OnnxPolicy } from '../policies/onnx-policy.js';
import { COMMAND_HISTORY, S } from '../recipes/vla.js';
import type { MetricsPoint, RobotStatus, RunStatus, StreamEvent } from '../server/schemas.js';
import { startService, type Service } from '../server/service.js';
import type { VlaCheckpoint } from '../server/vla-train.js';
import { until } from './helpers/until.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-vla-job-'));
let svc: Service;
let auth: Record<string, string>;
/** The recipe's smoke sizes, one update, the robot stepped as fast as it goes. */
const TINY = { robot: 'cam', quick: true, updates: 1, realTime: false };

beforeAll(async () => {
  svc = await startService({
    dataDir: dir, port: 0, foxglovePort: null, mqttPort: null,
    robots: [{ id: 'sim', task: 'reach', profile: 'gap' }, { id: 'cam', task: 'reach', profile: 'gap', image: S, commandHistory: COMMAND_HISTORY }],
  });
  auth = { authorization: `Bearer ${svc.token}` };
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

const inject = (o: { method?: 'GET' | 'POST'; url: string; payload?: unknown; headers?: Record<string, string> }) =>
  svc.app.inject({ method: o.method ?? 'GET', url: o.url, headers: o.headers ?? auth, payload: o.payload as string });
const ended = (id: string) => until(() => {
  const s = svc.ctx.runs.get(id).status;
  return s.state === 'running' || s.state === 'stopping' ? undefined : s;
}, `run ${id} ended`, 120_000);
function record(): { events: StreamEvent[]; off(): void } {
  const events: StreamEvent[] = [];
  const on = (e: StreamEvent) => events.push(structuredClone(e));
  svc.ctx.runs.events.on('event', on);
  return { events, off: () => svc.ctx.runs.events.off('event', on) };
}
const checkpointOf = (s: RunStatus) => JSON.parse(readFileSync(s.checkpoint!, 'utf8')) as VlaCheckpoint;

describe('vla-train job: options on the route', () => {
  it('is listed with its options schema; bad options are 400 naming the field or what the robot lacks; no token 401; unknown robot 404', async () => {
    const jobs = (await inject({ url: '/api/runs/jobs' })).json<Array<{ kind: string; options: { properties: Record<string, { default?: unknown }>; required: string[] } }>>();
    const job = jobs.find((j) => j.kind === 'vla-train')!;
    expect(Object.keys(job.options.properties)).toEqual(['robot', 'seed', 'quick', 'clone', 'hidden', 'updates', 'prompts', 'groupSize', 'refitEvery', 'proprio', 'rl', 'realTime']);
    expect(job.options.required).toEqual(['robot', 'realTime']);
    expect(job.options.properties.quick!.default).toBe(false);
    expect(job.options.properties.proprio!.default).toBe('robot');
    // The robots say what they carry.
    const robots = (await inject({ url: '/api/robots' })).json<RobotStatus[]>();
    expect(robots.map((r) => [r.id, r.camera, r.commandHistory])).toEqual([['sim', null, 0], ['cam', S, COMMAND_HISTORY]]);

    const bad: Array<[unknown, string | RegExp]> = [
      [{ robot: 'cam', updates: 0 }, 'body.updates: must be >= 1'],
      [{ robot: 'cam', groupSize: 1 }, 'body.groupSize: must be >= 2'],
      [{ robot: 'cam', updates: '1' }, 'body.updates: must be integer'],
      [{ robot: 'cam', hidden: [] }, 'body.hidden: must NOT have fewer than 1 items'],
      [{ robot: 'cam', rl: { klBeta: -1 } }, 'body.rl.klBeta: must be >= 0'],
      [{ robot: 'cam', rl: { imagine: 'dream' } }, /^body\.rl\.imagine: /],
      [{ robot: 'cam', proprio: 'scene' }, /^body\.proprio: /],
      [{ robot: 'cam', clone: { demos: 4 } }, /body\.clone\.daggerRounds: is required/],
      // The robot names the task.
      [{ robot: 'cam', task: 'push' }, 'body.task: is not a known field'],
      [{ robot: 'cam', klCoef: 0.5 }, 'body.klCoef: is not a known field'],
      [{ quick: true }, 'body.robot: is required'],
      // Across fields, with the robot's task: the recipe's own check.
      [{ robot: 'cam', clone: { demos: 2, daggerRounds: 1, daggerEpisodes: 2, bcEpochs: 1 } }, 'vla recipe: bad config: clone.demos (2) must exceed clone.daggerRounds x clone.daggerEpisodes (2)'],
      // A robot without the VLA's camera and command history.
      [{ robot: 'sim', quick: true }, `robot 'sim' cannot run the VLA recipe: it needs a ${S}x${S} camera, not none; its last ${COMMAND_HISTORY} commands in its observation, not 0 (wmrl serve --task reach --profile gap --camera ${S} --command-history ${COMMAND_HISTORY} starts one)`],
    ];
    for (const [payload, message] of bad) {
      const r = await inject({ method: 'POST', url: '/api/runs/vla-train', payload });
      expect(r.statusCode, JSON.stringify(payload)).toBe(400);
      expect(r.json()).toMatchObject({ code: 'WMRL_VALIDATION' });
      if (typeof message === 'string') expect(r.json<{ message: string }>().message).toBe(message);
      else expect(r.json<{ message: string }>().message).toMatch(message);
    }
    expect((await inject({ method: 'POST', url: '/api/runs/vla-train', payload: TINY, headers: {} })).statusCode).toBe(401);
    const unknown = await inject({ method: 'POST', url: '/api/runs/vla-train', payload: { ...TINY, robot: 'r2d2' } });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().code).toBe('WMRL_ROBOT_NOT_FOUND');
    expect(svc.ctx.runs.list()).toHaveLength(0);
  });
});

describe('vla-train job: tiny runs', () => {
  it('runs to its end through app.inject(): the VLA in the library, loadable and deployed; episodes recorded and streamed; metrics; checkpoint', async () => {
    const rec = record();
    const started = await inject({ method: 'POST', url: '/api/runs/vla-train', payload: TINY });
    expect(started.statusCode, started.body).toBe(201);
    const id = started.json<RunStatus>().id;
    const done = await ended(id);
    rec.off();
    expect(done).toMatchObject({ state: 'finished', error: null, robot: 'cam' });
    const phases = new Set(rec.events.flatMap((e) => (e.type === 'run' && e.status.id === id ? [e.status.progress.phase] : [])));
    expect([...phases]).toEqual(expect.arrayContaining(['pretraining: behaviour cloning', 'pretraining: world model', 'evaluating the clone', 'updates']));

    // The checkpoint, and the trainer's own files in the run folder.
    const cp = checkpointOf(done);
    expect(cp).toMatchObject({ run: id, task: 'reach', profile: 'gap', updates: 1, stoppedEarly: false, stoppedDuring: null, policy: { id, updates: 1 } });
    expect(cp.clone!.states).toBeGreaterThanOrEqual(0);
    expect(cp.wmrl!.combinations).toBeGreaterThanOrEqual(0);
    for (const f of ['state.json', 'pg.safetensors', 'world_model.safetensors', 'history.json']) expect(existsSync(join(dir, 'runs', id, f)), f).toBe(true);

    // The robot's episodes (quick: one anchor group of 2): on the service's robot, in its store, streamed frame by frame.
    expect(cp.episodes).toHaveLength(2);
    const stored = svc.ctx.store.list().filter((e) => cp.episodes.includes(e.meta.id));
    expect(stored).toHaveLength(2);
    expect(stored.every((e) => e.meta.hardwareProfile === 'gap' && e.status === 'complete')).toBe(true);
    const steps = stored.find((e) => e.meta.id === cp.episodes[0])!.steps;
    expect(svc.ctx.runs.rollout(id, cp.episodes[0]!)!.real.map((f) => f.t)).toEqual(Array.from({ length: steps }, (_, t) => t));
    const ends = rec.events.filter((e) => e.type === 'episode' && e.phase === 'end' && e.run === id);
    expect(ends).toHaveLength(2);

    // Metrics: the clone's held-out success, then the update's.
    const metrics = (await inject({ url: `/api/runs/${id}/metrics` })).json<MetricsPoint[]>();
    expect(metrics.map((m) => m.step)).toEqual([0, 1]);
    expect(metrics[0]!.trueSuccess).toBe(cp.clone!.states);
    expect(metrics[1]!.trueSuccess).toBe(cp.wmrl!.states);
    expect(metrics[1]!.robotSeconds).toBeGreaterThan(0);
    expect(metrics[1]!.anchorFraction).toBeGreaterThan(0);
    expect(metrics[1]!.ppi![0]).toBeLessThanOrEqual(metrics[1]!.trueSuccess!);

    // The VLA in the library, reading the camera and the instruction, as the policy runner loads it.
    const info = (await inject({ url: `/api/policies/${id}` })).json<{ inputs: Array<{ name: string }>; metadata: Record<string, string> }>();
    expect(info.inputs.map((i) => i.name).sort()).toEqual(['image', 'obs', 'tokens']);
    expect(info.metadata).toMatchObject({ policy_version: id, training_run: id });
    const host = svc.ctx.robots.get('cam')!;
    const runner = await OnnxPolicy.load(svc.ctx.policies.path(id), host.sim.spec);
    const a = await runner.act(host.sim.toRobotObservation(host.sim.lastObs, 0));
    expect(a).toHaveLength(host.sim.spec.action.names.length);
    expect(a.every(Number.isFinite)).toBe(true);
    // Deployed: on the camera robot it runs; the robot without the camera and the command history is refused.
    const d = await inject({ method: 'POST', url: `/api/policies/${id}/deploy`, payload: { robot: 'cam', episodes: 1 } });
    expect(d.statusCode, d.body).toBe(201);
    expect(await ended(d.json<RunStatus>().id)).toMatchObject({ kind: 'policy', state: 'finished' });
    expect(svc.ctx.store.list().at(-1)!.meta.policyVersion).toBe(id);
    const blind = await inject({ method: 'POST', url: `/api/policies/${id}/deploy`, payload: { robot: 'sim', episodes: 1 } });
    expect(blind.statusCode).toBe(422);
    expect(blind.json<{ message: string }>().message).toMatch(/on robot sim-reach-gap: observation layouts differ/);
  }, 180_000);

  it('a stop during pretraining checkpoints without a policy', async () => {
    const run = svc.ctx.runs.start('vla-train', { ...TINY, clone: { demos: 40, daggerRounds: 1, daggerEpisodes: 2, bcEpochs: 2 } });
    await until(() => svc.ctx.runs.get(run.id).status.progress.phase.startsWith('pretraining'), 'the pretraining phase', 120_000);
    const s = await svc.ctx.runs.stop(run.id);
    expect(s.state, s.error ?? '').toBe('stopped');
    expect(checkpointOf(s)).toMatchObject({ stoppedEarly: true, stoppedDuring: 'pretraining', policy: null, episodes: [] });
    expect(svc.ctx.policies.has(run.id)).toBe(false);
    expect(svc.ctx.robots.get('cam')!.run).toBeNull();
  }, 120_000);

  it('started and stopped over HTTP on the listening service during training: the VLA as its last update left it, in the library', async () => {
    const rec = record();
    const post = (path: string, body?: unknown) => fetch(`${svc.url}${path}`, { method: 'POST', headers: { ...auth, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
    // The smallest clone: only the stop during training is under test here.
    const res = await post('/api/runs/vla-train', { ...TINY, updates: 50, clone: { demos: 3, daggerRounds: 0, daggerEpisodes: 0, bcEpochs: 1 } });
    expect(res.status).toBe(201);
    const id = ((await res.json()) as RunStatus).id;
    // A robot episode of WMRL under way.
    await until(() => rec.events.some((e) => e.type === 'real' && e.run === id), 'a real frame of the run', 120_000);
    const stopped = await post(`/api/runs/${id}/stop`);
    expect(stopped.status).toBe(200);
    const s = (await stopped.json()) as RunStatus;
    rec.off();
    expect(s.state, s.error ?? '').toBe('stopped');
    const cp = checkpointOf(s);
    expect(cp).toMatchObject({ stoppedEarly: true, stoppedDuring: 'training', policy: { id }, wmrl: null });
    expect(cp.updates).toBeLessThan(50);
    expect(svc.ctx.policies.has(id)).toBe(true);
    expect(svc.ctx.store.list({ status: 'recording' })).toHaveLength(0);
    expect(rec.events.find((e) => e.type === 'episode' && e.phase === 'end' && e.run === id)).toMatchObject({ status: 'partial (aborted)' });
    const listed = (await (await fetch(`${svc.url}/api/policies`)).json()) as Array<{ id: string }>;
    expect(listed.map((p) => p.id)).toContain(id);
    expect(svc.ctx.robots.get('cam')!.run).toBeNull();
  }, 120_000);
});
