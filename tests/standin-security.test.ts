// The stand-in trusts no rosbridge client, over real WebSockets: a client cannot take over the services
// it provides, a hostile command stream stays inside its own limits, /wmrl/reset does not clear its
// e-stop (the operator does), and beyond loopback it requires rosbridge's auth op with a shared secret
// naming this server. Web pages of other origins and DNS-rebinding hosts cannot connect at all.
import { hostname } from 'node:os';
import { Ros, Service } from 'roslib';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { AuthChecker, authOp, rosauthMac } from '../bridge/rosbridge/auth.js';
import { toRosTime } from '../bridge/ros/msgs.js';
import { RosbridgeServer } from '../bridge/rosbridge/server.js';
import { parseRobotConfig } from '../hardware/config.js';
import { RosRobot } from '../hardware/robots/ros.js';
import { standInConfig, startStandIn, STANDIN, type StandIn } from '../hardware/standin.js';
import { spawnStandIn } from './helpers/standin-process.js';
import { sleep, until } from './helpers/until.js';

type Frame = Record<string, unknown>;
/** `p`, or a rejection naming `what` after `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, j) => (t = setTimeout(() => j(new Error(`${what}: nothing within ${ms} ms`)), ms)))]).finally(() => clearTimeout(t));
}
/** A raw rosbridge client; everything it receives lands in `inbox`. */
async function raw(port: number, headers: Record<string, string> = {}): Promise<{ ws: WebSocket; inbox: Frame[]; send(f: Frame | string): void; closed: Promise<number> }> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}`, { headers });
  const inbox: Frame[] = [];
  ws.on('message', (d) => inbox.push(JSON.parse(d.toString()) as Frame));
  const closed = within(new Promise<number>((r) => ws.once('close', (code) => r(code))), 5000, 'socket close');
  closed.catch(() => undefined); // awaited by the tests that expect it
  await new Promise((r, j) => ws.once('open', r).once('error', j));
  return { ws, inbox, send: (f) => ws.send(typeof f === 'string' ? f : JSON.stringify(f)), closed };
}

async function rosClient(port: number, secret?: string): Promise<Ros> {
  const ros = new Ros({});
  const up = new Promise<void>((r) => ros.once('connection', () => r()));
  await ros.connect(`ws://127.0.0.1:${port}`);
  await up;
  if (secret) {
    const a = authOp(secret, { dest: `ws://127.0.0.1:${port}` });
    ros.authenticate(a.mac, a.client, a.dest, a.rand, a.t, a.level, a.end);
  }
  return ros;
}

const trigger = (ros: Ros, name: string) =>
  within(
    new Promise<{ success: boolean; message: string }>((resolve, reject) =>
      new Service<Record<string, never>, { success: boolean; message: string }>({ ros, name, serviceType: 'std_srvs/srv/Trigger' }).callService({}, resolve, (e) => reject(new Error(e))),
    ),
    5000,
    `${name} answer`,
  );

describe('the stand-in against hostile rosbridge clients', () => {
  // A fresh stand-in per test: what one attack leaves behind must not decide the next test.
  let standIn: StandIn;
  beforeEach(async () => {
    // A low declared joint speed, so a full-effort stream would exceed it without enforcement (≈ 6 rad/s).
    standIn = await startStandIn({ task: 'reach', port: 0, velocityLimit: 2 });
  });
  afterEach(() => standIn?.stop());

  it('a client cannot advertise the services, actions or topics the stand-in provides; the e-stop works after it leaves', async () => {
    const attacker = await raw(standIn.port);
    attacker.send({ op: 'advertise_service', service: STANDIN.estop, type: 'std_srvs/srv/Trigger' });
    attacker.send({ op: 'advertise_service', service: STANDIN.reset, type: 'std_srvs/srv/Trigger' });
    attacker.send({ op: 'advertise_action', action: STANDIN.runExpert, type: 'wmrl_msgs/action/RunExpert' });
    attacker.send({ op: 'advertise', id: 'a1', topic: STANDIN.jointStates, type: 'sensor_msgs/msg/JointState' });
    await until(() => attacker.inbox.length >= 4, 'four refusals', 3000).finally(() => attacker.inbox.length < 4 && attacker.ws.close());
    expect(attacker.inbox.map((m) => [m.level, m.msg])).toEqual([
      ['error', `advertise_service: ${STANDIN.estop} is provided by this server; a client cannot replace it`],
      ['error', `advertise_service: ${STANDIN.reset} is provided by this server; a client cannot replace it`],
      ['error', `advertise_action: ${STANDIN.runExpert} is provided by this server; a client cannot replace it`],
      ['error', `advertise: ${STANDIN.jointStates} is published by this server; a client cannot publish on it`],
    ]);
    const operator = await rosClient(standIn.port);
    try {
      // The call reaches the stand-in's own handler, not the attacker.
      await expect(trigger(operator, STANDIN.estop)).resolves.toMatchObject({ success: true, message: expect.stringMatching(/^stopped/) });
      expect(attacker.inbox.filter((m) => m.op === 'call_service')).toEqual([]);
      expect(standIn.isEstopped).toBe(true);
      attacker.ws.close();
      await attacker.closed;
      await sleep(50);
      await expect(trigger(operator, STANDIN.estop)).resolves.toMatchObject({ success: true });
      expect(standIn.isEstopped).toBe(true);
    } finally {
      operator.close();
      attacker.ws.close();
      standIn.clearEstop();
    }
  });

  it('/wmrl/reset does not clear the e-stop; only the operator does, then reset resumes', async () => {
    const ros = await rosClient(standIn.port);
    const attacker = await raw(standIn.port);
    attacker.send({ op: 'advertise', topic: STANDIN.forwardCommand, type: 'std_msgs/msg/Float64MultiArray' });
    const publish = (data: number[]) => attacker.send({ op: 'publish', topic: STANDIN.forwardCommand, msg: { data } });
    try {
      await trigger(ros, STANDIN.estop);
      const r = await trigger(ros, STANDIN.reset);
      expect(r).toMatchObject({ success: false, message: expect.stringMatching(/e-stopped: reset does not clear the stop; the operator clears it/) });
      expect(standIn.isEstopped).toBe(true);
      expect(standIn.robot.isStopped).toBe(true);
      const commands = standIn.counters.commands, refused = standIn.counters.refusedStopped;
      publish([0.5, 0.5]);
      await until(() => standIn.counters.refusedStopped > refused, 'the command refused', 3000);
      expect(standIn.counters.commands).toBe(commands);
      standIn.clearEstop();
      expect(standIn.isEstopped).toBe(false);
      await expect(trigger(ros, STANDIN.reset)).resolves.toMatchObject({ success: true });
      expect(standIn.robot.isStopped).toBe(false);
      publish([0.3, 0.3]);
      await until(() => standIn.counters.commands > commands, 'the command accepted', 3000);
    } finally {
      ros.close();
      attacker.ws.close();
    }
  });

  it('a hostile command stream (huge, non-finite, wrong lengths, 1 kHz, big jumps) keeps the robot inside its own limits', async () => {
    const ros = await rosClient(standIn.port);
    await trigger(ros, STANDIN.reset);
    const spec = standIn.robot.spec;
    const monitor = await raw(standIn.port);
    monitor.send({ op: 'subscribe', topic: STANDIN.jointStates });
    monitor.send({ op: 'subscribe', topic: STANDIN.appliedCommand });
    const attacker = await raw(standIn.port);
    attacker.send({ op: 'advertise', topic: STANDIN.forwardCommand, type: 'std_msgs/msg/Float64MultiArray' });
    attacker.send({ op: 'advertise', topic: STANDIN.trajectory, type: 'trajectory_msgs/msg/JointTrajectory' });
    const fwd = (data: string) => attacker.send(`{"op":"publish","topic":"${STANDIN.forwardCommand}","msg":{"data":${data}}}`);
    // Stamped now: an unstamped trajectory is refused as stale before any limit is reached.
    const traj = (effort: number[]) => attacker.send({ op: 'publish', topic: STANDIN.trajectory, msg: { header: { stamp: toRosTime(Date.now() / 1000) }, joint_names: spec.joints, points: [{ effort, time_from_start: { sec: 0, nanosec: 0 } }] } });
    await sleep(50);
    const c0 = { ...standIn.counters };
    const t0 = performance.now();
    let sent = 0;
    // 1 kHz for 3 s: first full effort one way (huge values), then big jumps, with garbage throughout.
    while (performance.now() - t0 < 3000) {
      for (; sent < performance.now() - t0; sent++) {
        const phase = performance.now() - t0 < 1500;
        const s = sent % 2 ? 1 : -1;
        switch (sent % 7) {
          case 0: fwd('[1e999, -1e999]'); break; // parses to ±Infinity
          case 1: fwd('[1, 1, 1]'); break;
          case 2: fwd('[]'); break;
          case 3: traj([1e6 * s, -1e6 * s]); break;
          default: fwd(phase ? '[1e308, 1e308]' : JSON.stringify([s * 50, -s * 50]));
        }
      }
      await sleep(5);
    }
    const elapsedS = (performance.now() - t0) / 1000;
    await sleep(200);
    const c = standIn.counters;
    const accepted = c.commands - c0.commands;
    expect(sent).toBeGreaterThan(2900);
    // At most one command per control period on average (plus the burst), whatever the rate sent.
    expect(accepted).toBeLessThanOrEqual(spec.controlHz * elapsedS + 10);
    // 4 in 7 commands are valid; the invalid ones are refused before they take a token.
    expect(c.refusedRate - c0.refusedRate).toBeGreaterThan(sent / 3);
    expect(c.refusedInvalid - c0.refusedInvalid).toBeGreaterThan(0);

    const applied = monitor.inbox.filter((m) => m.topic === STANDIN.appliedCommand).map((m) => (m.msg as { data: number[] }).data);
    const states = monitor.inbox.filter((m) => m.topic === STANDIN.jointStates).map((m) => m.msg as { position: number[]; velocity: number[]; effort: number[] });
    expect(applied.length).toBe(accepted);
    expect(states.length).toBeGreaterThan(100);
    const inRange = (a: number[]) => a.length === spec.action.names.length && a.every((v, i) => Number.isFinite(v) && v >= spec.action.low[i]! && v <= spec.action.high[i]!);
    expect(applied.every(inRange)).toBe(true);
    // Rate limit: what the actuators get changes by at most max_delta (0.5) per control step, except to zero
    // effort (the hold); an accepted command is within max_delta of what they got on the step before it.
    let lastEffort: number[] | undefined;
    for (const m of monitor.inbox) {
      if (m.topic === STANDIN.jointStates) lastEffort = (m.msg as { effort: number[] }).effort;
      else if (m.topic === STANDIN.appliedCommand && lastEffort) {
        const a = (m.msg as { data: number[] }).data;
        for (let i = 0; i < 2; i++) expect(Math.abs(a[i]! - lastEffort[i]!)).toBeLessThanOrEqual(0.5 + 1e-6);
      }
    }
    for (let k = 1; k < states.length; k++) {
      const [a, b] = [states[k - 1]!.effort, states[k]!.effort];
      expect(inRange(b)).toBe(true);
      for (let i = 0; i < 2; i++) if (b[i] !== 0) expect(Math.abs(b[i]! - a[i]!)).toBeLessThanOrEqual(0.5 + 1e-6);
    }
    // Velocity and position limits: the declared 2 rad/s, overshot by at most one control step of full effort.
    const vmax = Math.max(...states.flatMap((s) => s.velocity.map(Math.abs)));
    expect(vmax).toBeLessThan(spec.velocityLimits[0]! + 1);
    expect(c.limited - c0.limited).toBeGreaterThan(0);
    const [lo, hi] = spec.positionLimits[1]!;
    const elbow = states.map((s) => s.position[1]!);
    expect(Math.min(...elbow)).toBeGreaterThanOrEqual(lo - 0.05);
    expect(Math.max(...elbow)).toBeLessThanOrEqual(hi + 0.05);
    ros.close();
    monitor.ws.close();
    attacker.ws.close();
  }, 30_000);

  it("invalid commands do not use up the command rate: a valid one right after a flood of garbage is applied", async () => {
    const attacker = await raw(standIn.port);
    const operator = await raw(standIn.port);
    for (const c of [attacker, operator]) c.send({ op: 'advertise', topic: STANDIN.forwardCommand, type: 'std_msgs/msg/Float64MultiArray' });
    await sleep(50);
    const c0 = { ...standIn.counters };
    // Far more than the burst (5), all in one go: wrong length, non-finite, empty.
    for (let i = 0; i < 60; i++) attacker.send(`{"op":"publish","topic":"${STANDIN.forwardCommand}","msg":{"data":${['[1]', '[1e999, 0]', '[]'][i % 3]}}}`);
    await until(() => standIn.counters.refusedInvalid - c0.refusedInvalid >= 60, 'the garbage refused', 3000);
    operator.send({ op: 'publish', topic: STANDIN.forwardCommand, msg: { data: [0.1, -0.1] } });
    await until(() => standIn.counters.commands + standIn.counters.refusedRate > c0.commands + c0.refusedRate, 'the valid command handled', 3000);
    expect(standIn.counters.refusedRate - c0.refusedRate).toBe(0);
    expect(standIn.counters.commands - c0.commands).toBe(1);
    attacker.ws.close();
    operator.ws.close();
  });

  it('trajectories are taken as a joint_trajectory_controller takes them: stamped 0 or now applied, ended or far ahead refused', async () => {
    const c = await raw(standIn.port);
    c.send({ op: 'advertise', topic: STANDIN.trajectory, type: 'trajectory_msgs/msg/JointTrajectory' });
    const joints = standIn.robot.spec.joints;
    const traj = (stamp: { sec: number; nanosec: number } | undefined, point: Record<string, unknown> = { positions: [0, 0], effort: [0.1, -0.1] }) =>
      c.send({ op: 'publish', topic: STANDIN.trajectory, msg: { ...(stamp ? { header: { stamp } } : {}), joint_names: joints, points: [{ ...point, time_from_start: { sec: 0, nanosec: 20_000_000 } }] } });
    await sleep(50);
    const c0 = { ...standIn.counters };
    traj(toRosTime(Date.now() / 1000 + 3600)); // would be fresh for an hour if queued
    traj(toRosTime(Date.now() / 1000 - 10)); // ended ten seconds ago
    await until(() => standIn.counters.refusedStale - c0.refusedStale >= 2, 'two refused as stale', 3000);
    traj({ sec: 0, nanosec: 0 }, { effort: [0.1, -0.1] }); // no positions: a controller drops it
    await until(() => standIn.counters.refusedInvalid - c0.refusedInvalid >= 1, 'the point without positions refused', 3000);
    expect(standIn.counters.commands).toBe(c0.commands);
    traj({ sec: 0, nanosec: 0 }); // zero stamp: start on receipt
    await until(() => standIn.counters.commands > c0.commands, 'the zero-stamped trajectory applied', 3000);
    await sleep(60); // the command rate
    traj(undefined); // no header: the stamp defaults to 0
    await until(() => standIn.counters.commands > c0.commands + 1, 'the unstamped trajectory applied', 3000);
    await sleep(60);
    traj(toRosTime(Date.now() / 1000));
    await until(() => standIn.counters.commands > c0.commands + 2, 'the trajectory stamped now applied', 3000);
    expect(standIn.counters.refusedStale - c0.refusedStale).toBe(2);
    c.ws.close();
  });

  it('/wmrl/run_expert: max_steps is clamped to the episode horizon; a non-finite one is refused, naming it', async () => {
    const horizon = standIn.robot.env.horizon;
    const c = await raw(standIn.port);
    c.send({ op: 'send_action_goal', id: 'huge', action: STANDIN.runExpert, action_type: 'wmrl_msgs/action/RunExpert', args: { max_steps: 1e12 } });
    const ms = (horizon / standIn.robot.spec.controlHz) * 1000 + 5000;
    await until(() => c.inbox.some((m) => m.op === 'action_result' && m.id === 'huge'), 'the expert stopped at the horizon', ms);
    const done = c.inbox.find((m) => m.op === 'action_result' && m.id === 'huge')!;
    expect(done).toMatchObject({ result: true, values: { steps: expect.any(Number) } });
    expect((done.values as { steps: number }).steps).toBeLessThanOrEqual(horizon + 1);
    c.send(`{"op":"send_action_goal","id":"inf","action":"${STANDIN.runExpert}","action_type":"wmrl_msgs/action/RunExpert","args":{"max_steps":1e999}}`);
    c.send({ op: 'send_action_goal', id: 'nan', action: STANDIN.runExpert, action_type: 'wmrl_msgs/action/RunExpert', args: { max_steps: 'lots' } });
    await until(() => c.inbox.filter((m) => m.op === 'action_result').length === 3, 'both refused', 3000);
    expect(c.inbox.find((m) => m.id === 'inf')).toMatchObject({ result: false, values: `max_steps Infinity is not a finite number of steps (1 to ${horizon})` });
    expect(c.inbox.find((m) => m.id === 'nan')).toMatchObject({ result: false, values: expect.stringMatching(/^max_steps lots is not a finite number/) });
    c.ws.close();
  }, 30_000);
});

describe('web pages and DNS rebinding', () => {
  /** 'open', or the HTTP status the upgrade was refused with and its body. */
  function upgrade(port: number, headers: Record<string, string>): Promise<'open' | { status: number; body: string }> {
    return within(
      new Promise((resolve, reject) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}`, { headers });
        ws.once('open', () => {
          ws.close();
          resolve('open');
        });
        ws.once('unexpected-response', (_req, res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        ws.once('error', (e) => reject(e));
      }),
      5000,
      'the upgrade',
    );
  }

  it('a page of another origin or a rebinding Host is refused before any op; no-Origin clients, its own pages and allowed origins connect', async () => {
    const standIn = await startStandIn({ task: 'reach', port: 0, allowedOrigins: ['https://app.foxglove.dev'], allowedHosts: ['robot.lab'] });
    const p = standIn.port;
    try {
      expect(await upgrade(p, { Origin: 'http://evil.example' })).toEqual({ status: 403, body: expect.stringMatching(/origin 'http:\/\/evil\.example' may not connect \(WMRL_FORBIDDEN_ORIGIN\); sim-robot --allowed-origin adds one/) });
      // DNS rebinding: the page's own name resolves to 127.0.0.1, so its Origin matches its Host.
      expect(await upgrade(p, { Host: `evil.example:${p}`, Origin: `http://evil.example:${p}` })).toEqual({ status: 421, body: expect.stringMatching(/host 'evil\.example:\d+' not allowed \(WMRL_MISDIRECTED\)/) });
      expect(await upgrade(p, { Host: `evil.example:${p}` })).toMatchObject({ status: 421 });
      expect(await upgrade(p, { Origin: `http://localhost:${p + 1}`, Host: `localhost:${p}` })).toMatchObject({ status: 403 });
      expect(await upgrade(p, {})).toBe('open');
      expect(await upgrade(p, { Origin: 'https://app.foxglove.dev' })).toBe('open');
      expect(await upgrade(p, { Origin: `http://127.0.0.1:${p}` })).toBe('open');
      expect(await upgrade(p, { Host: `robot.lab:${p}` })).toBe('open');
      expect(standIn.counters.resets).toBe(0);
      await expect(startStandIn({ task: 'reach', port: 0, allowedOrigins: ['app.foxglove.dev/x'] })).rejects.toThrow(/allowed origin 'app\.foxglove\.dev\/x': not an origin/);
    } finally {
      await standIn.stop();
    }
  });

  it('sim-robot --allowed-origin and --allowed-host (repeatable) reach the server', async () => {
    const proc = await spawnStandIn(['--allowed-origin', 'https://app.foxglove.dev', '--allowed-origin', 'http://lab.example:8080', '--allowed-host', 'robot.lab']);
    try {
      expect(await upgrade(proc.port, { Origin: 'http://lab.example:8080' })).toBe('open');
      expect(await upgrade(proc.port, { Origin: 'https://app.foxglove.dev', Host: `robot.lab:${proc.port}` })).toBe('open');
      expect(await upgrade(proc.port, { Origin: 'http://evil.example' })).toMatchObject({ status: 403 });
      expect(await upgrade(proc.port, { Host: `other.lab:${proc.port}` })).toMatchObject({ status: 421 });
    } finally {
      await proc.stop();
    }
  }, 90_000);
});

describe('authentication beyond loopback', () => {
  const secret = 'correct horse battery staple 42';

  it('a server bound to a non-loopback host without a secret refuses to start, naming the problem', async () => {
    await expect(new RosbridgeServer({ host: '0.0.0.0', port: 0 }).listen()).rejects.toThrow(/refusing to listen on '0\.0\.0\.0' without a shared secret/);
    await expect(startStandIn({ task: 'reach', host: '0.0.0.0', port: 0 })).rejects.toThrow(/without a shared secret/);
    await expect(spawnStandIn(['--host', '0.0.0.0']).then(async (p) => (await p.stop(), p))).rejects.toThrow(/refusing to listen on '0\.0\.0\.0' without a shared secret/);
    expect(() => new RosbridgeServer({ secret: 'short' })).toThrow(/shared secret has 5 characters; use at least 16/);
  }, 90_000);

  describe('with a secret', () => {
    const server = new RosbridgeServer({ host: '0.0.0.0', port: 0, secret, authTimeoutMs: 300 });
    let port = 0;
    let publish: (m: Frame) => void;
    beforeAll(async () => {
      port = await server.listen();
      publish = server.advertise('/chatter', 'std_msgs/msg/String');
      server.advertiseService('/ping', 'std_srvs/srv/Trigger', () => ({ success: true, message: 'pong' }));
    });
    afterAll(() => server.close());

    it('a client whose first op is not auth is refused and disconnected; it receives nothing', async () => {
      const c = await raw(port);
      c.send({ op: 'subscribe', topic: '/chatter' });
      c.send({ op: 'call_service', id: 'x', service: '/ping' });
      expect(await c.closed).toBe(1008);
      publish({ data: 'secret plans' });
      expect(c.inbox).toEqual([{ op: 'status', level: 'error', msg: "not authenticated: op 'subscribe' refused; the first op must be auth" }]);
    });

    it('a wrong MAC, a stale time and a replayed auth op are refused', async () => {
      const bad = authOp('not the secret at all!!', { dest: 'x' });
      const stale = authOp(secret, { dest: `ws://127.0.0.1:${port}`, nowS: Date.now() / 1000 - 3600 });
      for (const [op, why] of [[bad, /MAC does not match/], [stale, /more than 30 s from the server's clock/]] as const) {
        const c = await raw(port);
        c.send(op);
        expect(await c.closed).toBe(1008);
        expect(c.inbox[0]).toMatchObject({ op: 'status', level: 'error', msg: expect.stringMatching(why) });
      }
      const good = authOp(secret, { dest: `ws://127.0.0.1:${port}` });
      const first = await raw(port);
      first.send(good);
      first.send({ op: 'call_service', id: 'p', service: '/ping' });
      await until(() => first.inbox.length > 0, 'the answer to the first auth');
      expect(first.inbox[0]).toMatchObject({ op: 'service_response', id: 'p', result: true });
      const replay = await raw(port);
      replay.send(good);
      expect(await replay.closed).toBe(1008);
      expect(replay.inbox[0]).toMatchObject({ msg: expect.stringMatching(/already used/) });
      first.ws.close();
    });

    it("an auth op for another server (dest) is refused; the URL of this one is accepted in its forms", async () => {
      const other = new RosbridgeServer({ port: 0, secret });
      const otherPort = await other.listen();
      try {
        // Captured on its way to the other server (same secret), replayed here.
        const forOther = authOp(secret, { dest: `ws://127.0.0.1:${otherPort}` });
        for (const op of [forOther, authOp(secret, { dest: 'rosbridge' }), authOp(secret, { dest: '127.0.0.1' })]) {
          const c = await raw(port);
          c.send(op);
          expect(await c.closed).toBe(1008);
          expect(c.inbox[0]).toMatchObject({ msg: `auth: dest '${op.dest}' does not name this server; send the URL the client connected to, e.g. ws://127.0.0.1:${port} (another name, or a proxy's: sim-robot --allowed-host)` });
        }
        // The Host header does not make it this server's: a replaying client chooses it.
        const spoof = await raw(port, { Host: `127.0.0.1:${otherPort}` });
        spoof.send(authOp(secret, { dest: `ws://127.0.0.1:${otherPort}` }));
        expect(await spoof.closed).toBe(1008);
        const there = await raw(otherPort);
        there.send(forOther);
        there.send({ op: 'call_service', id: 'x', service: '/nope' });
        await until(() => there.inbox.length > 0, 'the other server answering');
        expect(there.inbox[0]).toMatchObject({ op: 'service_response', id: 'x', result: false });
        there.ws.close();
        for (const dest of [`ws://127.0.0.1:${port}`, `127.0.0.1:${port}`, `ws://localhost:${port}/`, `wss://${hostname()}:${port}`]) {
          const c = await raw(port);
          c.send(authOp(secret, { dest }));
          c.send({ op: 'call_service', id: 'p', service: '/ping' });
          await until(() => c.inbox.length > 0, 'the answer after auth');
          expect(c.inbox[0], dest).toMatchObject({ op: 'service_response', id: 'p', result: true });
          c.ws.close();
        }
      } finally {
        await other.close();
      }
    });

    it('before auth, a frame over 4 KiB closes the connection (1009) without being parsed; auth fields are capped', async () => {
      const c = await raw(port);
      c.send({ ...authOp(secret, { dest: `ws://127.0.0.1:${port}` }), client: 'x'.repeat(64 * 1024) });
      expect(await c.closed).toBe(1009);
      expect(c.inbox).toEqual([{ op: 'status', level: 'error', msg: expect.stringMatching(/^not authenticated: a frame of \d+ bytes before auth; at most 4096 are accepted$/) }]);
      // A frame bigger than the byte budget is cut off as it arrives, before ws has assembled it. (Its own
      // server: building and sending 20 MiB here can outlast the 300 ms auth timeout of the one above.)
      const roomy = new RosbridgeServer({ port: 0, secret });
      const p = await roomy.listen();
      try {
        const frame = JSON.stringify({ ...authOp(secret, { dest: `ws://127.0.0.1:${p}` }), client: 'x'.repeat(20 * 1024 * 1024) });
        const big = await raw(p);
        big.send(frame);
        expect(await big.closed).toBe(1009);
        expect(big.inbox).toEqual([{ op: 'status', level: 'error', msg: expect.stringMatching(/^not authenticated: \d+ bytes received before auth; at most 262144 are accepted$/) }]);
      } finally {
        await roomy.close();
      }
      const op = authOp(secret, { dest: 'd', client: 'x'.repeat(300) });
      expect(new AuthChecker(secret).check(op)).toBe("auth: field 'client' has 300 characters; at most 256 are accepted");
      expect(new AuthChecker(secret).check({ ...op, client: 'c', mac: 'f'.repeat(129) })).toBe("auth: field 'mac' has 129 characters; at most 128 are accepted");
    });

    it('at most maxUnauthenticated connections wait to authenticate; one more is closed at once (1013)', async () => {
      const small = new RosbridgeServer({ port: 0, secret, maxUnauthenticated: 2 });
      const p = await small.listen();
      small.advertiseService('/ping', 'std_srvs/srv/Trigger', () => ({ success: true, message: 'pong' }));
      try {
        const [a, b] = [await raw(p), await raw(p)];
        const third = await raw(p);
        expect(await third.closed).toBe(1013);
        expect(third.inbox).toEqual([{ op: 'status', level: 'error', msg: 'too many connections waiting to authenticate (2); try again later' }]);
        // Once one has authenticated, there is room again.
        a.send(authOp(secret, { dest: `ws://127.0.0.1:${p}` }));
        a.send({ op: 'call_service', id: 'p', service: '/ping' });
        await until(() => a.inbox.length > 0, 'the answer to a');
        const next = await raw(p);
        next.send(authOp(secret, { dest: `ws://127.0.0.1:${p}` }));
        next.send({ op: 'call_service', id: 'p', service: '/ping' });
        await until(() => next.inbox.length > 0, 'the answer to next');
        expect(next.inbox[0]).toMatchObject({ op: 'service_response', result: true });
        for (const c of [a, b, next]) c.ws.close();
      } finally {
        await small.close();
      }
    });

    it('a client that never authenticates is disconnected after the auth timeout', async () => {
      const c = await raw(port);
      expect(await c.closed).toBe(1008);
      expect(c.inbox[0]).toMatchObject({ msg: expect.stringMatching(/not authenticated within 300 ms/) });
    });

    it("roslib's ros.authenticate() with rosauth's MAC is accepted: subscribe and call work", async () => {
      expect(rosauthMac('s', { client: 'c', dest: 'd', rand: 'r', t: 10.7, level: 'user', end: 20 })).toMatch(/^[0-9a-f]{128}$/);
      const ros = await rosClient(port, secret);
      await expect(trigger(ros, '/ping')).resolves.toEqual({ success: true, message: 'pong' });
      ros.close();
    });
  });

  it('robot YAML: rosbridge.secret_env names the variable, never the secret', () => {
    const base = 'name: a\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\ncommand: {mode: forward_command, topic: /c}\n';
    expect(parseRobotConfig(`${base}rosbridge: {secret_env: WMRL_ROSBRIDGE_SECRET}\n`, 'r.yaml').rosbridge).toEqual({ secretEnv: 'WMRL_ROSBRIDGE_SECRET' });
    expect(() => parseRobotConfig(`${base}rosbridge: {secret_env: 'hunter2 is my secret'}\n`, 'r.yaml')).toThrow(/r\.yaml:8: key 'rosbridge\.secret_env': must name an environment variable/);
  });

  it("the project's rosbridge robot sends the secret named by its config (rosbridge.secret_env) and drives an authenticated stand-in", async () => {
    const standIn = await startStandIn({ task: 'reach', port: 0, host: '0.0.0.0', secret });
    process.env.WMRL_TEST_ROSBRIDGE_SECRET = secret;
    try {
      const cfg = { ...standInConfig(standIn.robot.spec, `ws://127.0.0.1:${standIn.port}`), rosbridge: { secretEnv: 'WMRL_TEST_ROSBRIDGE_SECRET' } };
      const robot = await RosRobot.connect(cfg);
      try {
        await robot.reset();
        const before = standIn.counters.commands;
        await robot.act(Float32Array.of(0.2, -0.2));
        await until(() => standIn.counters.commands > before, 'the command applied', 3000);
      } finally {
        await robot[Symbol.asyncDispose]();
      }
      // Without the secret the same robot config gets nothing.
      await expect(RosRobot.connect({ ...cfg, rosbridge: undefined }, { timeoutMs: 1000 })).rejects.toThrow(/no joint states/);
      delete process.env.WMRL_TEST_ROSBRIDGE_SECRET;
      await expect(RosRobot.connect(cfg)).rejects.toThrow(/rosbridge\.secret_env names WMRL_TEST_ROSBRIDGE_SECRET, which is not set/);
    } finally {
      delete process.env.WMRL_TEST_ROSBRIDGE_SECRET;
      await standIn.stop();
    }
  }, 30_000);
});
