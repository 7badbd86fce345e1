// The service's exposure, tried as an attacker would against a listening service: a flood of wrong
// tokens must not lock the operator out of the e-stop; a DNS-rebinding Host and a foreign page's
// WebSocket are refused; URDF files cannot be reached outside their package through a same-named
// folder or a symbolic link; 500s do not leak internal messages; overlong ids are 4xx; the Foxglove
// endpoint bounds what clients send and what a stalled client costs.
import { EventEmitter } from 'node:events';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { WebSocket } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FoxgloveClient } from '../server/foxglove-protocol.js';
import { startFoxglove } from '../server/foxglove.js';
import type { RobotHost } from '../server/robot-host.js';
import type { RunManager } from '../server/runs.js';
import type { RobotStatus } from '../server/schemas.js';
import { startService, type Service } from '../server/service.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-sec-'));
const STL = 'solid x\nendsolid x\n';
// dir/outer/arm_description/urdf/arm.urdf, a ROS package; dir/outer/private.stl and dir/secret.stl are not the robot's.
const pkg = join(dir, 'outer', 'arm_description');
const errors: Error[] = [];
let svc: Service;

beforeAll(async () => {
  mkdirSync(join(pkg, 'urdf'), { recursive: true });
  mkdirSync(join(pkg, 'meshes'), { recursive: true });
  mkdirSync(join(dir, 'shared'), { recursive: true });
  mkdirSync(join(dir, 'viewer'), { recursive: true });
  writeFileSync(join(pkg, 'urdf', 'arm.urdf'), readFileSync('sim/assets/reach/robot.urdf', 'utf8'));
  writeFileSync(join(pkg, 'meshes', 'tip.stl'), STL);
  writeFileSync(join(dir, 'shared', 'common.stl'), STL);
  writeFileSync(join(dir, 'outer', 'private.stl'), 'private');
  writeFileSync(join(dir, 'secret.stl'), 'secret');
  symlinkSync(join(dir, 'secret.stl'), join(pkg, 'urdf', 'link.stl'));
  symlinkSync(dir, join(pkg, 'urdf', 'up'));
  writeFileSync(join(dir, 'viewer', 'index.html'), '<!doctype html><title>viewer</title>');
  svc = await startService({
    dataDir: join(dir, 'data'), port: 0, foxglovePort: 0, mqttPort: null, viewerDir: join(dir, 'viewer'),
    robots: [{ id: 'arm', task: 'reach', profile: 'nominal', urdf: join(pkg, 'urdf', 'arm.urdf'), packages: { shared_meshes: join(dir, 'shared') } }],
    allowedHosts: ['robot.lab'], allowedOrigins: ['https://app.foxglove.dev'],
    onError: (e) => errors.push(e),
  });
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A raw HTTP request, so that Host can be anything (fetch sets it from the URL). */
function raw(path: string, headers: Record<string, string>, method = 'GET'): Promise<{ status: number; body: string }> {
  const u = new URL(svc.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, method, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => { body += d; }).on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject).end();
  });
}

/** Opens a WebSocket: 'open', or the HTTP status it was refused with. */
function upgrade(url: string, headers: Record<string, string>, protocols?: string[]): Promise<number | 'open'> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { headers });
    ws.once('open', () => { ws.close(); resolve('open'); });
    ws.once('unexpected-response', (_req, res) => { res.resume(); resolve(res.statusCode!); });
    ws.once('error', (e) => { if (!/Unexpected server response/.test(e.message)) reject(e); });
  });
}

describe('DNS rebinding: the Host allow-list', () => {
  it('a foreign Host is refused with 421 WMRL_MISDIRECTED; loopback names, IP addresses and allowed hosts are answered', async () => {
    const port = new URL(svc.url).port;
    const evil = await raw('/api/health', { host: `evil.example:${port}` });
    expect(evil.status).toBe(421);
    expect(JSON.parse(evil.body)).toMatchObject({ code: 'WMRL_MISDIRECTED', message: expect.stringContaining("host 'evil.example:") });
    // Not even which routes exist, nor the token check, are reachable through a rebound name.
    expect((await raw('/api/robots/arm/estop', { host: 'evil.example' }, 'POST')).status).toBe(421);
    expect((await raw('/', { host: 'evil.example' })).status).toBe(421);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, `app.localhost:${port}`, `192.168.1.20:${port}`, `robot.lab:${port}`, `ROBOT.LAB.:${port}`]) {
      expect([host, (await raw('/api/health', { host })).status]).toEqual([host, 200]);
    }
    expect(await upgrade(svc.foxglove!.url, { host: `evil.example:${svc.foxglove!.port}` }, [FoxgloveClient.SUPPORTED_SUBPROTOCOL])).toBe(421);
  });
});

describe('browser pages of other origins: WebSocket upgrades', () => {
  const stream = () => `${svc.url.replace(/^http/, 'ws')}/api/stream?topics=run`;
  it('/api/stream: a foreign Origin is refused with 403; no Origin and the service\'s own origin are accepted', async () => {
    expect(await upgrade(stream(), { origin: 'http://evil.example' })).toBe(403);
    expect(await upgrade(stream(), { origin: `http://evil.example:${new URL(svc.url).port}` })).toBe(403);
    expect(await upgrade(stream(), { origin: 'null' })).toBe(403);
    expect(await upgrade(stream(), {})).toBe('open');
    expect(await upgrade(stream(), { origin: svc.url })).toBe('open');
  });

  it('Foxglove: a foreign Origin is refused with 403; no Origin, the service\'s own pages and allowed origins are accepted', async () => {
    const fx = [FoxgloveClient.SUPPORTED_SUBPROTOCOL];
    expect(await upgrade(svc.foxglove!.url, { origin: 'http://evil.example' }, fx)).toBe(403);
    expect(await upgrade(svc.foxglove!.url, { origin: 'http://127.0.0.1:1' }, fx)).toBe(403);
    expect(await upgrade(svc.foxglove!.url, {}, fx)).toBe('open');
    expect(await upgrade(svc.foxglove!.url, { origin: svc.url }, fx)).toBe('open');
    expect(await upgrade(svc.foxglove!.url, { origin: 'https://app.foxglove.dev' }, fx)).toBe('open');
  });
});

describe('URDF files stay inside the robot\'s package', () => {
  const get = async (path: string) => {
    const r = await fetch(`${svc.url}/api/robots/arm/urdf/${path}`);
    return { status: r.status, body: await r.text() };
  };
  it('its own files and its own and declared packages are served', async () => {
    expect((await get('arm.urdf')).status).toBe(200);
    expect(await get('package/arm_description/meshes/tip.stl')).toEqual({ status: 200, body: STL });
    expect(await get('package/shared_meshes/common.stl')).toEqual({ status: 200, body: STL });
  });
  it('package://NAME/ never means just any folder of that name above the URDF: 404', async () => {
    const escape = await get('package/outer/private.stl');
    expect(escape.status).toBe(404);
    expect(escape.body).not.toContain('private');
    expect(JSON.parse(escape.body).message).toMatch(/package:\/\/outer\/ is neither declared for it \(shared_meshes\) nor its URDF's own package/);
    expect((await get(`package/${basename(dir)}/secret.stl`)).status).toBe(404);
  });
  it('a symbolic link inside the URDF folder pointing outside is refused: 400', async () => {
    for (const path of ['link.stl', 'up/secret.stl', 'package/arm_description/urdf/link.stl']) {
      const r = await get(path);
      expect([path, r.status]).toEqual([path, 400]);
      expect(r.body).not.toContain('secret"');
      expect(JSON.parse(r.body).message).toMatch(/links outside the folder of robot 'arm''s URDF/);
    }
  });
});

describe('error replies', () => {
  it('a 500 carries a generic message and an error id; the full message goes to the error sink only', async () => {
    const runs = svc.ctx.runs as { list: RunManager['list'] };
    const list = runs.list;
    runs.list = () => { throw new Error('disk /srv/secret/runs.db is corrupt'); };
    try {
      const r = await fetch(`${svc.url}/api/runs`);
      expect(r.status).toBe(500);
      const body = (await r.json()) as { code: string; message: string; errorId: string };
      expect(body.code).toBe('WMRL_INTERNAL');
      expect(body.errorId).toMatch(/^[0-9a-f]{12}$/);
      expect(body.message).toContain(body.errorId);
      expect(JSON.stringify(body)).not.toMatch(/secret|corrupt/);
      const logged = errors.find((e) => e.message.includes(body.errorId));
      expect(logged?.message).toMatch(/GET \/api\/runs: disk \/srv\/secret\/runs\.db is corrupt/);
    } finally {
      runs.list = list;
    }
  });

  it('GET with a 5,000-character id answers 4xx on the robots, runs, policies and episodes routes', async () => {
    const id = 'a'.repeat(5000);
    for (const path of [`robots/${id}`, `robots/${id}/scene`, `runs/${id}`, `runs/${id}/metrics`, `policies/${id}`, `policies/${id}/download`, `episodes/${id}`, `episodes/${id}/mcap`, `robots/${'b'.repeat(200)}`]) {
      const r = await fetch(`${svc.url}/api/${path}`);
      const body = (await r.json()) as { code: string; message: string };
      expect([path.slice(0, 20), r.status]).toEqual([path.slice(0, 20), 400]);
      expect(body).toMatchObject({ code: 'WMRL_VALIDATION', message: expect.stringMatching(/^params\.id: must NOT have more than 128 characters/) });
    }
    // Longer than any route parameter may be: still a client error, never a 500.
    expect((await fetch(`${svc.url}/api/robots/${'c'.repeat(9000)}`)).status).toBeLessThan(500);
    expect(errors.filter((e) => !/corrupt/.test(e.message))).toEqual([]);
  });
});

describe('failed logins do not lock the operator out', () => {
  let own: Service;
  beforeAll(async () => {
    own = await startService({ dataDir: join(dir, 'data-auth'), port: 0, foxglovePort: null, mqttPort: null, robots: [{ id: 'sim', task: 'reach', profile: 'nominal' }], auth: { maxFailures: 5, windowMs: 60_000 } });
  });
  afterAll(async () => { await own?.close(); });
  const post = (path: string, token: string) => fetch(`${own.url}/api/${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });

  it('after 1000 failed logins from its address, the right token still e-stops the robot and drives the other routes', async () => {
    const statuses: number[] = [];
    for (let k = 0; k < 40; k++) {
      const batch = await Promise.all(Array.from({ length: 25 }, (_, i) => post(k % 2 ? 'robots/sim/reset' : 'runs/nope/stop', `guess-${k}-${i}`)));
      statuses.push(...batch.map((r) => r.status));
    }
    expect(statuses).toHaveLength(1000);
    expect(statuses.filter((s) => s === 401)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(995);

    const stop = await post('robots/sim/estop', own.token);
    expect(stop.status).toBe(200);
    expect(((await stop.json()) as RobotStatus).estopped).toBe(true);
    // A wrong token at the e-stop is 401 there, never 429; elsewhere the budget still holds.
    expect((await post('robots/sim/estop', 'still-guessing')).status).toBe(401);
    expect((await post('robots/sim/reset', 'still-guessing')).status).toBe(429);
    const reset = await post('robots/sim/reset', own.token);
    expect(reset.status).toBe(200);
    expect(((await reset.json()) as RobotStatus).estopped).toBe(false);
  }, 60_000);
});

describe('Foxglove endpoint bounds', () => {
  it('a client message above the max payload closes its connection (1009)', async () => {
    const ws = new WebSocket(svc.foxglove!.url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
    await new Promise((r) => ws.once('open', r));
    // Without a bound the server keeps the connection open: -1 after 5 s.
    const closed = new Promise<number>((r) => { ws.once('close', (code) => r(code)); setTimeout(() => r(-1), 5000).unref(); });
    ws.send(JSON.stringify({ op: 'subscribe', subscriptions: [], pad: 'x'.repeat(256 * 1024) }));
    expect(await closed).toBe(1009);
    expect(errors.at(-1)?.message).toMatch(/^foxglove client .*: Max payload size exceeded; connection closed$/);
  });

  it('frames to a client whose socket buffers too much are dropped and counted; the client recovers', async () => {
    const events = new EventEmitter();
    const robot = { id: 'r', spec: { joints: ['a'], action: { names: ['a'] } }, events } as unknown as RobotHost;
    const runs = { events: new EventEmitter() } as unknown as RunManager;
    const fx = await startFoxglove({ host: '127.0.0.1', port: 0, robots: [robot], runs, onError: (e) => errors.push(e), maxBufferedBytes: 256 * 1024 });
    const ws = new WebSocket(fx.url, [FoxgloveClient.SUPPORTED_SUBPROTOCOL]);
    ws.binaryType = 'arraybuffer';
    const client = new FoxgloveClient({ ws: ws as unknown as ConstructorParameters<typeof FoxgloveClient>[0]['ws'] });
    try {
      const channels = await new Promise<Array<{ id: number; topic: string }>>((resolve) => client.on('advertise', resolve));
      client.subscribe(channels.find((c) => c.topic === '/joint_states')!.id);
      let received = 0;
      client.on('message', () => received++);
      await new Promise((r) => setTimeout(r, 100));
      // The client stops reading: its socket fills, then the server's buffer for it.
      (ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();
      const q = Array.from({ length: 4000 }, (_, i) => i / 7);
      for (let k = 0; k < 4000 && fx.dropped() === 0; k++) {
        events.emit('step', { q, command: [0] });
        await new Promise((r) => setImmediate(r));
      }
      expect(fx.dropped()).toBeGreaterThan(0);
      const dropped = fx.dropped();
      for (let k = 0; k < 50; k++) {
        events.emit('step', { q, command: [0] });
        await new Promise((r) => setImmediate(r));
      }
      expect(fx.dropped()).toBeGreaterThan(dropped);
      (ws as unknown as { _socket: { resume(): void } })._socket.resume();
      await new Promise((r) => setTimeout(r, 500));
      const before = received;
      events.emit('step', { q: [1], command: [0] });
      await new Promise((r) => setTimeout(r, 300));
      expect(received).toBeGreaterThan(before);
    } finally {
      ws.close();
      await fx.close();
    }
  }, 60_000);
});
