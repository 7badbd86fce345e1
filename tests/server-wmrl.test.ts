// The WMRL trainer as the service's job `wmrl-train`: its options on the route (400 naming the field), a tiny
// run through the RunManager to the end (policy in the library and deployable, real and imagined frames with
// every ensemble member, metrics per update, the trainer's checkpoint in the run folder), the viewer's e-stop
// stopping its anchor episodes on the robot, and a stop checkpointing it during pretraining and during training.
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimRobot } from '../hardware/robots/sim.js';
import { OnnxPolicy } from '../policies/onnx-policy.js';
import { embodiedPretrain, exportEmbodiedPolicy } from '../recipes/embodied.js';
import { CALIBRATE_EPISODES } from '../recipes/options.js';
import { startService, type Service } from '../server/service.js';
import type { MetricsPoint, RunStatus, StreamEvent } from '../server/schemas.js';
import type { WmrlCheckpoint } from '../server/wmrl-train.js';
import { keptUpdates } from './helpers/keep-rule.js';
import { until } from './helpers/until.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-job-'));
let svc: Service;
let auth: Record<string, string>;

/** Pretraining small enough for a test (the policy learns little; the wiring is what is checked). */
const TINY = { pretrain: { bcEpisodes: 3, bcEpochs: 5, daggerRounds: 0, wmEpisodes: 4, wmEpochs: 2, wmMembers: 3, wmHidden: [32] }, evalEpisodes: 5, prompts: 2, group: 2, imagine: 1, anchorGroups: 1, calibrate: 0 };

beforeAll(async () => {
  svc = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: null });
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
}, `run ${id} ended`, 45_000);
function record(): { events: StreamEvent[]; off(): void } {
  const events: StreamEvent[] = [];
  // A copy: a run event carries the run's live status object.
  const on = (e: StreamEvent) => events.push(structuredClone(e));
  svc.ctx.runs.events.on('event', on);
  return { events, off: () => svc.ctx.runs.events.off('event', on) };
}

describe('wmrl-train job: options on the route', () => {
  it('is listed with its options schema; bad options are 400 naming the field; no token 401; unknown robot 404', async () => {
    const jobs = (await inject({ url: '/api/runs/jobs' })).json<Array<{ kind: string; options: { properties: Record<string, { default?: unknown }> } }>>();
    const job = jobs.find((j) => j.kind === 'wmrl-train')!;
    expect(job.options.properties.updates!.default).toBe(20);
    expect(Object.keys(job.options.properties)).toEqual(expect.arrayContaining(['robot', 'updates', 'prompts', 'group', 'debias', 'denoise', 'pureWm', 'anchors', 'klCoef', 'pretrain', 'realTime']));
    const bad: Array<[unknown, string]> = [
      [{ robot: 'sim', updates: 0 }, 'body.updates: must be >= 1'],
      [{ robot: 'sim', group: 1 }, 'body.group: must be >= 2'],
      [{ robot: 'sim', updates: '5' }, 'body.updates: must be integer'],
      [{ robot: 'sim', klCoef: -0.5 }, 'body.klCoef: must be >= 0'],
      [{ robot: 'sim', pretrain: { wmMembers: 1 } }, 'body.pretrain.wmMembers: must be >= 2'],
      [{ robot: 'sim', pretrain: { layers: 3 } }, 'body.pretrain.layers: is not a known field'],
      [{ robot: 'sim', learningRate: 1 }, 'body.learningRate: is not a known field'],
      [{ updates: 2 }, 'body.robot: is required'],
      // across options (the job's check): more anchor groups per update than the update imagines
      [{ robot: 'sim', prompts: 2, imagine: 1, anchorGroups: 3 }, 'anchor groups per update (--anchor-groups, anchorGroups) 3: more than the 2 groups an update imagines (prompts 2 x imagine 1)'],
      // a pure world-model run spends no robot episode, so it cannot calibrate (left out, calibrate is 0 for it)
      [{ robot: 'sim', pureWm: true, calibrate: 4 }, 'calibration (--calibrate, calibrate) 4: a pure world-model run (--pure-wm, pureWm) runs nothing on the robot; leave calibrate out or set it to 0'],
      // the identified sim needs a calibration to identify it
      [{ robot: 'sim', worldModel: 'identified-sim', calibrate: 0 }, 'world model (--world-model, worldModel) identified-sim: calibration (--calibrate, calibrate) 0 identifies no sim to imagine in; calibrate, or imagine in the learned model'],
    ];
    for (const [payload, message] of bad) {
      const r = await inject({ method: 'POST', url: '/api/runs/wmrl-train', payload });
      expect(r.statusCode, message).toBe(400);
      expect(r.json()).toMatchObject({ code: 'WMRL_VALIDATION', message });
    }
    const anchors = await inject({ method: 'POST', url: '/api/runs/wmrl-train', payload: { robot: 'sim', anchors: 'psychic' } });
    expect(anchors.statusCode).toBe(400);
    expect(anchors.json().message).toMatch(/^body\.anchors: /);
    expect((await inject({ method: 'POST', url: '/api/runs/wmrl-train', payload: { robot: 'sim' }, headers: {} })).statusCode).toBe(401);
    const unknown = await inject({ method: 'POST', url: '/api/runs/wmrl-train', payload: { robot: 'r2d2' } });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().code).toBe('WMRL_ROBOT_NOT_FOUND');
    // Nothing was started by any of them.
    expect(svc.ctx.runs.list()).toHaveLength(0);
  });
});

describe('wmrl-train job: a tiny run', () => {
  it('runs to the end through the RunManager: policy in the library, real and imagined frames of every member, metrics, checkpoint', async () => {
    const rec = record();
    const started = await inject({ method: 'POST', url: '/api/runs/wmrl-train', payload: { robot: 'sim', ...TINY, updates: 2, klCoef: 0.5, realTime: false } });
    expect(started.statusCode).toBe(201);
    const id = started.json<RunStatus>().id;
    const done = await ended(id);
    rec.off();
    expect(done).toMatchObject({ state: 'finished', error: null, progress: { done: 2, total: 2, phase: 'updates' } });
    // Progress went through pretraining first.
    const phases = new Set(rec.events.flatMap((e) => (e.type === 'run' && e.status.id === id ? [e.status.progress.phase] : [])));
    expect([...phases]).toEqual(expect.arrayContaining(['pretraining: demonstrations', 'pretraining: world model', 'updates']));

    // The checkpoint: the trainer's files in the run folder, and the policy in the library.
    const cp = JSON.parse(readFileSync(done.checkpoint!, 'utf8')) as WmrlCheckpoint;
    expect(cp).toMatchObject({ run: id, task: 'reach', profile: 'gap', worldModel: 'learned', updates: 2, stoppedEarly: false, stoppedDuring: null, policy: { id, updates: 2 } });
    for (const f of ['state.json', 'pg.safetensors', 'world_model.safetensors', 'history.json']) expect(existsSync(join(dir, 'runs', id, f)), f).toBe(true);
    // klCoef reached the policy gradient: each update measured its KL to the pretrained policy (null without the penalty).
    const history = JSON.parse(readFileSync(join(dir, 'runs', id, 'history.json'), 'utf8')) as Array<{ refKl: number | null }>;
    expect(history.map((h) => typeof h.refKl)).toEqual(['number', 'number']);
    const policy = (await inject({ url: `/api/policies/${id}` })).json<{ metadata: Record<string, string>; inputs: Array<{ name: string; shape: unknown[] }> }>();
    expect(policy.metadata).toMatchObject({ source: 'wmrl', task: 'reach', updates: '2', training_run: id });
    expect(JSON.parse(policy.metadata.observation_layout!)).toMatchObject({ joints: [{ name: 'shoulder' }, { name: 'elbow' }] });

    // The anchor episodes: recorded in the service's store, on the robot, with real frames from the robot and
    // imagined frames from the world model, one path per ensemble member.
    expect(cp.episodes.length).toBeGreaterThanOrEqual(2 * TINY.group);
    const stored = svc.ctx.store.list().filter((e) => cp.episodes.includes(e.meta.id));
    expect(stored).toHaveLength(cp.episodes.length);
    expect(stored.every((e) => e.meta.robot === 'sim-reach-gap' && e.status === 'complete')).toBe(true);
    const ro = svc.ctx.runs.rollout(id, cp.episodes[0]!)!;
    const steps = stored.find((e) => e.meta.id === cp.episodes[0])!.steps;
    expect(ro.real.map((f) => f.t)).toEqual(Array.from({ length: steps }, (_, t) => t));
    expect(ro.imagined.length).toBeGreaterThan(10);
    const im = ro.imagined[10]!;
    expect(im.source).toBe('world-model');
    expect(im.members).toHaveLength(3);
    expect(im.poses).toHaveLength(3);
    expect(im.poses[0]).toHaveLength(ro.real[0]!.poses.length);
    // The members disagree (the spread the viewer draws), and joints move along the paths (a member's path ends
    // at its first predicted success, so one that predicts success at once stays put).
    const spread = Math.max(...ro.imagined.map((f) => Math.abs(f.members[0]![0]! - f.members[1]![0]!) + Math.abs(f.members[0]![1]! - f.members[2]![1]!)));
    expect(spread).toBeGreaterThan(1e-3);
    const moved = Math.max(...[0, 1, 2].map((e) => Math.abs(ro.imagined.at(-1)!.members[e]![0]! - ro.imagined[0]!.members[e]![0]!)));
    expect(moved).toBeGreaterThan(1e-3);
    // Frames in stream order: the episode starts, its imagined rollout, then its real steps.
    const mine = rec.events.filter((e) => (e.type === 'episode' || e.type === 'real' || e.type === 'imagined') && e.episode === cp.episodes[0]).map((e) => e.type);
    expect(mine[0]).toBe('episode');
    expect(mine.indexOf('real')).toBeGreaterThan(mine.lastIndexOf('imagined'));

    // Metrics: the pretrained start, then one point per update.
    const metrics = (await inject({ url: `/api/runs/${id}/metrics` })).json<MetricsPoint[]>();
    expect(metrics.map((m) => m.step)).toEqual([0, 1, 2]);
    expect(metrics[0]!.robotSeconds).toBe(0);
    for (const m of metrics.slice(1)) {
      expect(m.robotSeconds).toBeGreaterThan(0);
      expect(m.anchorFraction).toBeGreaterThan(0);
      expect(m.trueSuccess).not.toBeNull();
      expect(m.ppi![0]).toBeLessThanOrEqual(m.trueSuccess!);
      expect(m.ppi![1]).toBeGreaterThanOrEqual(m.trueSuccess!);
    }
    expect(metrics[2]!.robotSeconds).toBeGreaterThan(metrics[1]!.robotSeconds);
    // The policy left in the library is that of the evaluation kept (the start's, step 0, included): the latest unless the best beats it by more than one standard error.
    const kept = keptUpdates(metrics.map((m) => ({ update: m.step, success: m.trueSuccess! })), TINY.evalEpisodes).at(-1)!;
    expect(cp.policy!.keptUpdate).toBe(kept);
    expect(policy.metadata.keptUpdate).toBe(String(kept));
    const ppi = metrics[2]!.trueScore!;
    expect(ppi[0]).toBeLessThanOrEqual(ppi[1]);

    // Deployed on the robot it was trained on.
    const d = await inject({ method: 'POST', url: `/api/policies/${id}/deploy`, payload: { robot: 'sim', episodes: 1 } });
    expect(d.statusCode).toBe(201);
    expect(await ended(d.json<RunStatus>().id)).toMatchObject({ kind: 'policy', state: 'finished' });
    expect(svc.ctx.store.list().at(-1)!.meta.policyVersion).toBe(id);
  });

  it('calibrate: robot episodes identify the robot before the trainer, charged to its clock, and the run folder keeps what was identified; the trainer imagines in that sim when told', async () => {
    const rec = record();
    const started = await inject({ method: 'POST', url: '/api/runs/wmrl-train', payload: { robot: 'sim', ...TINY, quick: true, calibrate: 2, updates: 1, realTime: false, worldModel: 'identified-sim' } });
    expect(started.statusCode).toBe(201);
    const id = started.json<RunStatus>().id;
    expect(await ended(id)).toMatchObject({ state: 'finished', error: null });
    rec.off();
    const phases = new Set(rec.events.flatMap((e) => (e.type === 'run' && e.status.id === id ? [e.status.progress.phase] : [])));
    expect([...phases]).toEqual(expect.arrayContaining(['calibration: robot episodes', 'calibration: cloning', 'updates']));
    const cal = JSON.parse(readFileSync(join(dir, 'runs', id, 'calibration.json'), 'utf8')) as { robotEpisodes: number; delay: number; before: number; after: number; kept: boolean };
    expect(cal.robotEpisodes).toBe(2);
    expect(cal.kept).toBe(cal.after >= cal.before);
    // The start the trainer measured is the better clone, at the robot time the calibration spent (its 2 resets and
    // episodes); the first update's robot time adds its own.
    const metrics = (await inject({ url: `/api/runs/${id}/metrics` })).json<MetricsPoint[]>();
    expect(metrics[0]!.trueSuccess).toBe(Math.max(cal.before, cal.after));
    expect(metrics[0]!.robotSeconds).toBeGreaterThanOrEqual(2 * 5);
    expect(metrics[1]!.robotSeconds).toBeGreaterThan(metrics[0]!.robotSeconds);
    // Imagined in the identified sim: its delay is the calibration's, and no learned model was refitted.
    const rows = JSON.parse(readFileSync(join(dir, 'runs', id, 'history.json'), 'utf8')) as Array<{ actionDelay: number; refit: boolean }>;
    expect(rows).toEqual([expect.objectContaining({ actionDelay: cal.delay, refit: false })]);
    // The viewer draws what the trainer imagines: an anchor episode's imagined rollout is the sim's one path, which moves.
    const cp = JSON.parse(readFileSync(join(dir, 'runs', id, 'checkpoint.json'), 'utf8')) as WmrlCheckpoint;
    expect(cp).toMatchObject({ worldModel: 'identified-sim', imagined: TINY.prompts * TINY.imagine });
    const ro = svc.ctx.runs.rollout(id, cp.episodes.at(-1)!)!;
    expect(ro.imagined.length).toBeGreaterThan(1);
    expect(ro.imagined.every((f) => f.members.length === 1)).toBe(true);
    expect(Math.abs(ro.imagined.at(-1)!.members[0]![0]! - ro.imagined[0]!.members[0]![0]!)).toBeGreaterThan(1e-3);
  });

  it('calibrates by default on the sim robot; a stop mid-calibration leaves the clone as pretrained, not half cloned again', async () => {
    const { calibrate: _none, ...defaults } = TINY;
    const rec = record();
    const stopped = svc.ctx.runs.start('wmrl-train', { robot: 'sim', ...defaults, quick: true, updates: 1, realTime: false, seed: 7 });
    await until(() => svc.ctx.runs.get(stopped.id).status.progress.phase === 'calibration: cloning' || undefined, "the calibration's cloning", 45_000);
    const st = await svc.ctx.runs.stop(stopped.id);
    rec.off();
    // Left out, calibrate is CALIBRATE_EPISODES robot episodes.
    const totals = rec.events.flatMap((e) => (e.type === 'run' && e.status.id === stopped.id && e.status.progress.phase === 'calibration: robot episodes' ? [e.status.progress.total] : []));
    expect(new Set(totals)).toEqual(new Set([CALIBRATE_EPISODES]));
    // Stopped while cloning again: the policy it leaves is its seed's pretrained clone, as pretraining alone makes it.
    expect(JSON.parse(readFileSync(st.checkpoint!, 'utf8'))).toMatchObject({ stoppedEarly: true, stoppedDuring: 'calibration', policy: { id: stopped.id } });
    const spec = svc.ctx.robots.get('sim')!.spec;
    const pre = await embodiedPretrain({ task: 'reach', seed: 7, quick: true, commandHistory: 0, sizes: TINY.pretrain });
    exportEmbodiedPolicy(pre.policy, spec, join(dir, 'pretrained.onnx'), { policyVersion: 'pretrained', runId: 'test' });
    await using robot = await SimRobot.create({ task: 'reach', profile: 'gap' });
    const obs = await robot.reset({ seed: 3 });
    const act = async (path: string) => Array.from(await (await OnnxPolicy.load(path, spec)).act(obs));
    expect(await act(svc.ctx.policies.path(stopped.id))).toEqual(await act(join(dir, 'pretrained.onnx')));
  });

  it("the e-stop stops its anchor episode on the robot; the run waits for the robot's reset and then goes on", async () => {
    const host = svc.ctx.robots.get('sim')!;
    const rec = record();
    const run = svc.ctx.runs.start('wmrl-train', { robot: 'sim', ...TINY, updates: 1 });
    // A real-time anchor episode under way.
    await until(() => rec.events.filter((e) => e.type === 'real' && e.run === run.id).length >= 10, 'ten real frames', 45_000);
    await host.estop('test');
    const applied = host.stepsApplied;
    await new Promise((r) => setTimeout(r, 500));
    expect(host.stepsApplied).toBe(applied);
    expect(svc.ctx.runs.get(run.id).status.state).toBe('running');
    const cut = await until(() => rec.events.find((e) => e.type === 'episode' && e.phase === 'end' && e.run === run.id), 'an episode end', 45_000);
    expect(cut).toMatchObject({ status: 'partial (estop)', success: null });
    expect(svc.ctx.store.list({ status: 'recording' })).toHaveLength(0);
    await host.reset();
    const done = await ended(run.id);
    rec.off();
    expect(done).toMatchObject({ state: 'finished', progress: { done: 1, total: 1 } });
    expect(host.stepsApplied).toBeGreaterThan(applied + 10);
    const eps = rec.events.filter((e) => e.type === 'episode' && e.phase === 'end' && e.run === run.id);
    expect(eps.length).toBeGreaterThan(1);
  });

  it('stop during pretraining checkpoints without a policy; stop during training finishes the episode and leaves the policy', async () => {
    const early = svc.ctx.runs.start('wmrl-train', { robot: 'sim', ...TINY, pretrain: { ...TINY.pretrain, bcEpisodes: 200 } });
    await until(() => svc.ctx.runs.get(early.id).status.progress.phase.startsWith('pretraining'), 'the pretraining phase', 45_000);
    const s1 = await svc.ctx.runs.stop(early.id);
    expect(s1.state).toBe('stopped');
    expect(JSON.parse(readFileSync(s1.checkpoint!, 'utf8'))).toMatchObject({ stoppedEarly: true, stoppedDuring: 'pretraining', policy: null });

    const rec = record();
    const run = svc.ctx.runs.start('wmrl-train', { robot: 'sim', ...TINY, updates: 50 });
    await until(() => rec.events.filter((e) => e.type === 'real' && e.run === run.id).length >= 5, 'five real frames', 45_000);
    const s2 = await svc.ctx.runs.stop(run.id);
    rec.off();
    expect(s2.state).toBe('stopped');
    const cp = JSON.parse(readFileSync(s2.checkpoint!, 'utf8')) as WmrlCheckpoint;
    expect(cp).toMatchObject({ stoppedEarly: true, stoppedDuring: 'training', policy: { id: run.id } });
    expect(svc.ctx.policies.has(run.id)).toBe(true);
    expect(svc.ctx.store.list({ status: 'recording' })).toHaveLength(0);
    expect(rec.events.find((e) => e.type === 'episode' && e.phase === 'end' && e.run === run.id)).toMatchObject({ status: 'partial (aborted)' });
    expect(svc.ctx.robots.get('sim')!.run).toBeNull();
  });
});
