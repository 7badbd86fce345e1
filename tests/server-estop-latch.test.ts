// The e-stop latch survives a restart: a service started again on the same data folder finds its robot
// e-stopped, refuses runs and deployments on it (409) until the operator's reset, and that reset is kept
// too. A latch file that cannot be read keeps the robot stopped and says why.
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { latchFile } from '../server/estop-latch.js';
import type { RobotStatus } from '../server/schemas.js';
import { startService, type Service } from '../server/service.js';
import { policyOnnx } from './helpers/policy-onnx.js';

const root = mkdtempSync(join(tmpdir(), 'wmrl-latch-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let open: Service | null = null;
afterEach(async () => {
  await open?.close();
  open = null;
});

const errors: Error[] = [];
async function start(dataDir: string): Promise<Service> {
  await open?.close();
  open = await startService({ dataDir, port: 0, foxglovePort: null, mqttPort: null, onError: (e) => errors.push(e) });
  return open;
}
const call = (svc: Service, method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown, headers: Record<string, string> = {}) =>
  svc.app.inject({ method, url, headers: { authorization: `Bearer ${svc.token}`, ...headers }, payload: payload as string });
const status = async (svc: Service) => (await call(svc, 'GET', '/api/robots/sim')).json<RobotStatus>();

describe('the e-stop latch across restarts', () => {
  it('a restarted service keeps the robot e-stopped, refuses runs and deploys, until the reset, which is kept too', async () => {
    const data = join(root, 'kept');
    let svc = await start(data);
    const obsDim = svc.ctx.robots.get('sim')!.sim.spec.joints.length * 2 + (svc.ctx.robots.get('sim')!.sim.spec.features?.length ?? 0);
    expect((await call(svc, 'PUT', '/api/policies/pi', Buffer.from(policyOnnx(obsDim, 2)), { 'content-type': 'application/octet-stream' })).statusCode).toBe(201);
    expect((await call(svc, 'POST', '/api/robots/sim/estop?reason=arm%20hit%20the%20table')).json<RobotStatus>()).toMatchObject({ state: 'estopped', estopped: true });

    svc = await start(data);
    expect(await status(svc)).toMatchObject({ state: 'estopped', estopped: true, run: null });
    expect(svc.ctx.robots.get('sim')!.restoredLatch?.reason).toBe('arm hit the table');
    const run = await call(svc, 'POST', '/api/runs/expert-session', { robot: 'sim', episodes: 1, imagined: false });
    expect(run.statusCode).toBe(409);
    expect(run.json()).toMatchObject({ code: 'WMRL_ROBOT_ESTOPPED', message: expect.stringMatching(/robot 'sim' is e-stopped; reset it first \(POST \/api\/robots\/sim\/reset/) });
    const deploy = await call(svc, 'POST', '/api/policies/pi/deploy', { robot: 'sim', episodes: 1 });
    expect(deploy.statusCode).toBe(409);
    expect(deploy.json().code).toBe('WMRL_ROBOT_ESTOPPED');
    expect(() => svc.ctx.runs.start('wmrl-train', { robot: 'sim' })).toThrow(/e-stopped/);
    expect(svc.ctx.runs.list()).toHaveLength(0);
    expect(svc.ctx.robots.get('sim')!.stepsApplied).toBe(0);

    // Still latched after a second restart: restoring does not release it.
    svc = await start(data);
    expect((await status(svc)).estopped).toBe(true);
    const reset = await call(svc, 'POST', '/api/robots/sim/reset');
    expect(reset.json<RobotStatus>()).toMatchObject({ state: 'idle', estopped: false });
    expect(existsSync(latchFile(data, 'sim'))).toBe(false);

    svc = await start(data);
    expect(await status(svc)).toMatchObject({ state: 'idle', estopped: false });
    expect(svc.ctx.robots.get('sim')!.restoredLatch).toBeNull();
    const ok = await call(svc, 'POST', '/api/runs/expert-session', { robot: 'sim', episodes: 1, imagined: false });
    expect(ok.statusCode).toBe(201);
    await svc.ctx.runs.stopAll();
    expect(errors).toEqual([]);
  });

  it('the latch file records who and why, readable by its owner only', async () => {
    const data = join(root, 'record');
    const svc = await start(data);
    await svc.ctx.robots.get('sim')!.estop('operator pressed e-stop');
    const file = latchFile(data, 'sim');
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ format: 'wmrl-estop/1', robot: 'sim', reason: 'operator pressed e-stop' });
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('an unreadable latch file keeps the robot e-stopped and says why; the file is kept until the reset', async () => {
    for (const [name, content, why] of [
      ['truncated', '{"format":"wmrl-estop/1","rob', /is not JSON/],
      ['wrong shape', '{"format":"wmrl-estop/1","robot":"sim"}', /is not a wmrl-estop\/1 record \(\/reason/],
    ] as const) {
      const data = join(root, name.replace(' ', '-'));
      mkdirSync(join(data, 'estop'), { recursive: true });
      writeFileSync(latchFile(data, 'sim'), content);
      const svc = await start(data);
      expect(await status(svc)).toMatchObject({ state: 'estopped', estopped: true });
      const restored = svc.ctx.robots.get('sim')!.restoredLatch!;
      expect(restored.unreadable).toBe(true);
      expect(restored.reason).toMatch(why);
      expect(restored.reason).toContain(latchFile(data, 'sim'));
      expect(readFileSync(latchFile(data, 'sim'), 'utf8')).toBe(content);
      expect((await call(svc, 'POST', '/api/runs/expert-session', { robot: 'sim', episodes: 1 })).statusCode).toBe(409);
      expect((await call(svc, 'POST', '/api/robots/sim/reset')).json<RobotStatus>().estopped).toBe(false);
      expect(existsSync(latchFile(data, 'sim'))).toBe(false);
    }
  });

  it('a dangling symlink in place of the latch file is there, unreadable, and so keeps the robot e-stopped', async () => {
    const data = join(root, 'dangling');
    mkdirSync(join(data, 'estop'), { recursive: true });
    symlinkSync(join(data, 'nowhere.json'), latchFile(data, 'sim'));
    const svc = await start(data);
    expect(await status(svc)).toMatchObject({ state: 'estopped', estopped: true });
    expect(svc.ctx.robots.get('sim')!.restoredLatch!.reason).toMatch(/cannot be read \(ENOENT/);
    expect((await call(svc, 'POST', '/api/robots/sim/reset')).json<RobotStatus>().estopped).toBe(false);
    expect(lstatSync(latchFile(data, 'sim'), { throwIfNoEntry: false })).toBeUndefined();
  });
});
