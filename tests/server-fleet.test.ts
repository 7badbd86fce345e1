// wmrl-train on a fleet of the service's robots (in-process sims here; tests/fleet-e2e.test.ts runs robots of their
// own processes over rosbridge and MQTT): `fleet` names the robots (or 'all'), checked and claimed before the run
// starts; every anchor group's episodes run on the robots at once, each robot streaming its own frames; metrics and
// checkpoint report robot time and the robots' wall-clock apart.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startService, type Service } from '../server/service.js';
import type { MetricsPoint, RunStatus } from '../server/schemas.js';
import type { WmrlCheckpoint } from '../server/wmrl-train.js';
import { until } from './helpers/until.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-fleet-'));
let svc: Service;
let auth: Record<string, string>;
const TINY = { pretrain: { bcEpisodes: 3, bcEpochs: 5, daggerRounds: 0, wmEpisodes: 4, wmEpochs: 2, wmMembers: 3, wmHidden: [32] }, evalEpisodes: 5, prompts: 2, group: 2, imagine: 1, anchorGroups: 1, calibrate: 0, realTime: false };

beforeAll(async () => {
  svc = await startService({
    dataDir: dir, port: 0, foxglovePort: null, mqttPort: null,
    robots: [{ id: 'a', task: 'reach', profile: 'gap' }, { id: 'b', task: 'reach', profile: 'gap' }, { id: 'p', task: 'push', profile: 'gap' }],
  });
  auth = { authorization: `Bearer ${svc.token}` };
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

const start = (payload: Record<string, unknown>) => svc.app.inject({ method: 'POST', url: '/api/runs/wmrl-train', headers: auth, payload: payload as unknown as string });

describe('wmrl-train on a fleet', () => {
  it('refuses a fleet it cannot run, naming the robot: unknown, another task, driven by another run', async () => {
    const refusals: Array<[Record<string, unknown>, number, string, RegExp]> = [
      [{ robot: 'a', fleet: ['a', 'zz'] }, 404, 'WMRL_ROBOT_NOT_FOUND', /^fleet: no robot 'zz' \(robots: a, b, p\)$/],
      [{ robot: 'a', fleet: ['p'] }, 400, 'WMRL_VALIDATION', /^fleet: robot 'p' performs task 'push', the run's is 'reach' \(robot 'a'\): a fleet's robots share one task$/],
      [{ robot: 'a', fleet: [] }, 400, 'WMRL_VALIDATION', /fleet/],
      [{ robot: 'a', fleet: 'some' }, 400, 'WMRL_VALIDATION', /fleet/],
    ];
    for (const [payload, status, code, message] of refusals) {
      const r = await start(payload);
      expect([r.statusCode, r.json().code], r.body).toEqual([status, code]);
      expect(r.json().message).toMatch(message);
    }
    // Robot b driven by another run: refused, and robot a stays free.
    const busy = svc.ctx.robots.get('b')!;
    busy.run = 'someone-else';
    try {
      const r = await start({ robot: 'a', fleet: ['b'] });
      expect([r.statusCode, r.json().message]).toEqual([409, "robot 'b' is driven by run 'someone-else'; stop it first"]);
      expect(svc.ctx.robots.get('a')!.run).toBeNull();
    } finally {
      busy.run = null;
    }
  });

  it("'all': the connected robots of the run's task, claimed for the run; each group's episodes on both at once; robot time and wall-clock apart", async () => {
    const before = { a: svc.ctx.robots.get('a')!.stepsApplied, b: svc.ctx.robots.get('b')!.stepsApplied };
    const r = await start({ robot: 'a', fleet: 'all', updates: 2, ...TINY });
    expect(r.statusCode, r.body).toBe(201);
    const id = r.json<RunStatus>().id;
    expect(['a', 'b', 'p'].map((x) => svc.ctx.robots.get(x)!.run)).toEqual([id, id, null]);
    const done = await until(() => ((s) => (s.state === 'running' ? undefined : s))(svc.ctx.runs.get(id).status), `run ${id} ended`, 120_000);
    expect([done.state, done.error]).toEqual(['finished', null]);
    expect(['a', 'b'].map((x) => svc.ctx.robots.get(x)!.run)).toEqual([null, null]);
    expect(svc.ctx.robots.get('a')!.stepsApplied).toBeGreaterThan(before.a);
    expect(svc.ctx.robots.get('b')!.stepsApplied).toBeGreaterThan(before.b);
    // Every episode's real frames come from one robot, and both robots streamed episodes of the run.
    const byRobot = new Set<string>();
    for (const ep of svc.ctx.runs.rollouts(id)) {
      const robots = new Set(svc.ctx.runs.rollout(id, ep)!.real.map((f) => f.robot));
      expect(robots.size).toBe(1);
      byRobot.add([...robots][0]!);
    }
    expect(byRobot).toEqual(new Set(['a', 'b']));
    const metrics = (await svc.app.inject({ url: `/api/runs/${id}/metrics` })).json<MetricsPoint[]>();
    const last = metrics.at(-1)!;
    expect(last.robotSeconds).toBeGreaterThan(0);
    expect(last.robotWallSeconds!).toBeLessThan(last.robotSeconds);
    const cp = JSON.parse(readFileSync(done.checkpoint!, 'utf8')) as WmrlCheckpoint;
    expect(cp).toMatchObject({ fleet: ['a', 'b'], robotSeconds: last.robotSeconds, robotWallSeconds: last.robotWallSeconds });
    expect(cp.lostRobots).toBeUndefined();
    expect(cp.episodes.length).toBe(svc.ctx.runs.rollouts(id).length);
  }, 180_000);
});
