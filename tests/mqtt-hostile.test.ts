// The embedded MQTT broker is closed: anonymous clients and wrong passwords are refused (by the
// broker alone and by the service's), each role stays on its topics (a robot on its own, a sandbox
// worker on the job topics), a login cannot take over another's client id, and it will not listen
// off loopback without authentication. Behind it, the MQTT robot server treats what arrives as
// hostile: a flood of out-of-range commands is clamped by the safety layer and cut by the rate cap,
// and a reset over MQTT does not clear a latched e-stop.
import { mkdtempSync, rmSync, statSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateMqttCredentials, robotLogin, type MqttCredentials } from '../bridge/mqtt/auth.js';
import { INSECURE_ANONYMOUS, startEmbeddedBroker, type EmbeddedBroker } from '../bridge/mqtt/broker.js';
import { connect, endClient, onMessages, publish, subscribe, type ConnectOptions } from '../bridge/mqtt/client.js';
import type { CommandMsg } from '../bridge/mqtt/messages.js';
import { JOBS_TOPIC, RESULTS_TOPIC, robotTopic, sharedJobsFilter } from '../bridge/mqtt/topics.js';
import { serveRobotOverMqtt } from '../hardware/robots/mqtt-server.js';
import { startService } from '../server/service.js';
import { FakeRobot } from './helpers/mqtt-fake-robot.js';
import { sleep, until } from './helpers/until.js';

/** A SUBACK failure code (0x80): mqtt.js 5 reports it as a subscribe error. */
const REFUSED = /subscribe .* failed: Subscribe error: Unspecified error|subscribe refused by broker/;

describe('the embedded broker is closed', () => {
  let broker: EmbeddedBroker;
  let creds: MqttCredentials;
  const brokerErrors: Error[] = [];
  const clients: MqttClient[] = [];
  const open = async (o: Partial<ConnectOptions> & { clientId: string }) => {
    const c = await connect({ url: broker.url, protocolVersion: 4, clean: true, connectTimeoutMs: 3000, reconnectPeriodMs: 100, onError: () => {}, ...o });
    clients.push(c);
    return c;
  };
  /** Everything the service receives on `filter`. */
  const listen = async (c: MqttClient, filter: string) => {
    const got: string[] = [];
    c.on('message', (t, p) => got.push(`${t} ${p.toString()}`));
    await subscribe(c, filter, 1);
    return got;
  };

  beforeAll(async () => {
    creds = generateMqttCredentials();
    broker = await startEmbeddedBroker({ port: 0, auth: creds, onError: (e) => brokerErrors.push(e) });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => endClient(c, true)));
    await broker?.close();
    expect(brokerErrors).toEqual([]);
  });

  it('refuses anonymous clients and wrong passwords at once, saying why', async () => {
    const t0 = Date.now();
    await expect(open({ clientId: 'anon' })).rejects.toThrow(/as anon failed: .*Not authorized/i);
    await expect(open({ clientId: 'guess', username: creds.service.username, password: 'guess' })).rejects.toThrow(/Bad user ?name or password/i);
    await expect(open({ clientId: 'robot-guess', username: 'robot:r1', password: creds.robotKey })).rejects.toThrow(/Bad user ?name or password/i);
    await expect(open({ clientId: 'worker-as-service', username: creds.service.username, password: creds.worker.password })).rejects.toThrow(/Bad user ?name or password/i);
    expect(Date.now() - t0).toBeLessThan(2500);
    await expect(open({ clientId: 'svc', ...creds.service })).resolves.toBeDefined();
  });

  it("a robot login uses its own topics only: not another robot's, not the job topics", async () => {
    const service = await open({ clientId: 'svc-robots', ...creds.service });
    const seen = await listen(service, '#');
    const r1 = await open({ clientId: 'r1-side', ...robotLogin(creds, 'r1') });
    await subscribe(r1, robotTopic('r1', 'cmd'));
    await subscribe(r1, 'wmrl/robots/r1/+');
    for (const f of [robotTopic('r2', 'cmd'), 'wmrl/robots/+/cmd', 'wmrl/#', '#', JOBS_TOPIC, sharedJobsFilter('sandbox'), RESULTS_TOPIC]) {
      await expect(subscribe(r1, f), f).rejects.toThrow(REFUSED);
    }
    await r1.publishAsync(robotTopic('r1', 'state'), 'own state', { qos: 1 });
    await until(() => seen.includes('wmrl/robots/r1/state own state'), 'own state');
    // Each forbidden publish costs the client its connection; mqtt.js reconnects.
    for (const [t, p] of [[robotTopic('r2', 'cmd'), 'forged command'], [RESULTS_TOPIC, 'forged score'], [JOBS_TOPIC, 'forged job'], [robotTopic('r2', 'episodes'), 'injected episode']] as const) {
      await until(() => r1.connected, 'r1 reconnected');
      r1.publish(t, p, { qos: 0 });
    }
    await sleep(300);
    expect(seen.filter((m) => m.includes('forged') || m.includes('injected'))).toEqual([]);
  });

  it('a worker login takes jobs and answers results, and can neither command robots nor watch them', async () => {
    const service = await open({ clientId: 'svc-workers', ...creds.service });
    const seen = await listen(service, 'wmrl/#');
    const worker = await open({ clientId: 'w1', ...creds.worker });
    const jobs: string[] = [];
    worker.on('message', (t, p) => jobs.push(`${t} ${p.toString()}`));
    await subscribe(worker, sharedJobsFilter('sandbox'));
    for (const f of [robotTopic('r1', 'state'), 'wmrl/robots/+/cmd', '#', `$share/g/${robotTopic('r1', 'cmd')}`]) {
      await expect(subscribe(worker, f), f).rejects.toThrow(REFUSED);
    }
    await service.publishAsync(JOBS_TOPIC, 'job 1', { qos: 1 });
    await until(() => jobs.length === 1, 'the job through the share');
    expect(jobs).toEqual([`${JOBS_TOPIC} job 1`]);
    await worker.publishAsync(RESULTS_TOPIC, 'result 1', { qos: 1 });
    await until(() => seen.includes(`${RESULTS_TOPIC} result 1`), 'the result');
    for (const [t, p] of [[robotTopic('r1', 'cmd'), 'forged command'], [JOBS_TOPIC, 'forged job']] as const) {
      await until(() => worker.connected, 'worker reconnected');
      worker.publish(t, p, { qos: 0 });
    }
    await sleep(300);
    expect(seen.filter((m) => m.includes('forged'))).toEqual([]);
  });

  it("a login cannot take over another login's client id (and so its session's subscriptions)", async () => {
    await open({ clientId: 'svc-session', ...creds.service, clean: false });
    await expect(open({ clientId: 'svc-session', ...creds.worker, clean: false })).rejects.toThrow(/Identifier rejected/i);
  });

  it('a client id is free again once its clean session ends; a live or stored session keeps it', async () => {
    const gone = async (id: string) => {
      await until(() => !(broker.aedes as unknown as { clients: Record<string, unknown> }).clients[id], `${id} disconnected`);
      await sleep(20);
    };
    // A rogue robot grabs a guessable service id once and leaves: the service can use it afterwards.
    const rogue = await open({ clientId: 'wmrl-arm-4242', ...robotLogin(creds, 'r3') });
    // Live: not to be taken.
    await expect(open({ clientId: 'wmrl-arm-4242', ...creds.service, reconnectPeriodMs: 0 })).rejects.toThrow(/Identifier rejected/i);
    await endClient(rogue, true);
    await gone('wmrl-arm-4242');
    const svc = await open({ clientId: 'wmrl-arm-4242', ...creds.service });
    expect(svc.connected).toBe(true);
    // A persistent session stays its login's while the broker keeps it, connected or not ...
    const kept = await open({ clientId: 'r3-kept', ...robotLogin(creds, 'r3'), clean: false });
    await endClient(kept, true);
    await gone('r3-kept');
    await expect(open({ clientId: 'r3-kept', ...creds.service, reconnectPeriodMs: 0 })).rejects.toThrow(/Identifier rejected/i);
    // ... until that login ends it with a clean session.
    await endClient(await open({ clientId: 'r3-kept', ...robotLogin(creds, 'r3'), clean: true }), true);
    await gone('r3-kept');
    expect((await open({ clientId: 'r3-kept', ...creds.service })).connected).toBe(true);
  });

  it('holds at most maxClientIds ids: clean sessions that ended make room, stored ones do not', async () => {
    const small = await startEmbeddedBroker({ port: 0, auth: creds, onError: (e) => brokerErrors.push(e), maxClientIds: 2 });
    const mine: MqttClient[] = [];
    const at = async (o: Partial<ConnectOptions> & { clientId: string }) => {
      const c = await connect({ url: small.url, protocolVersion: 4, clean: true, connectTimeoutMs: 3000, reconnectPeriodMs: 0, onError: () => {}, ...o });
      mine.push(c);
      return c;
    };
    try {
      for (let i = 0; i < 5; i++) await endClient(await at({ clientId: `gone-${i}`, ...robotLogin(creds, 'r3') }), true);
      await sleep(50);
      await endClient(await at({ clientId: 'stored-1', ...robotLogin(creds, 'r3'), clean: false }), true);
      await at({ clientId: 'live-1', ...creds.service });
      await expect(at({ clientId: 'one-too-many', ...creds.service })).rejects.toThrow(/Server unavailable/i);
      await expect(startEmbeddedBroker({ port: 0, auth: creds, onError: () => {}, maxClientIds: 0 })).rejects.toThrow(/maxClientIds 0 must be a positive integer/);
    } finally {
      await Promise.all(mine.map((c) => endClient(c, true)));
      await small.close();
    }
  });

  it('will not listen off loopback without authentication, nor start without an auth decision', async () => {
    await expect(startEmbeddedBroker({ host: '0.0.0.0', port: 0, auth: INSECURE_ANONYMOUS, onError: () => {} })).rejects.toThrow(
      /refusing to bind the MQTT broker to 0\.0\.0\.0 without authentication/,
    );
    await expect(startEmbeddedBroker({ port: 0, onError: () => {} } as never)).rejects.toThrow(/`auth` is required/);
    // The loopback-only opt-out lets anyone in.
    const open = await startEmbeddedBroker({ port: 0, auth: INSECURE_ANONYMOUS, onError: () => {} });
    try {
      const c = await connect({ url: open.url, clientId: 'anyone', protocolVersion: 4, onError: () => {} });
      await endClient(c, true);
    } finally {
      await open.close();
    }
  });
});

describe("the service's broker", () => {
  const dir = mkdtempSync(join(tmpdir(), 'wmrl-mqtt-auth-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('makes credentials at first start beside the token (0600), keeps them, and refuses anonymous clients', async () => {
    const svc = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: 0, robots: [] });
    let file: string;
    try {
      file = svc.mqttCredentialsFile!;
      expect(file).toBe(join(dir, 'mqtt-credentials.json'));
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const creds = JSON.parse(readFileSync(file, 'utf8')) as MqttCredentials;
      const url = svc.broker!.url;
      await expect(connect({ url, clientId: 'anon', protocolVersion: 4, connectTimeoutMs: 3000, onError: () => {} })).rejects.toThrow(/Not authorized/i);
      const c = await connect({ url, clientId: 'svc-client', protocolVersion: 4, ...creds.service, onError: () => {} });
      await endClient(c, true);
      const r = await connect({ url, clientId: 'arm', protocolVersion: 4, ...robotLogin(creds, 'arm-7'), onError: () => {} });
      await expect(subscribe(r, robotTopic('sim', 'cmd'))).rejects.toThrow(REFUSED);
      await endClient(r, true);
    } finally {
      await svc.close();
    }
    const again = await startService({ dataDir: dir, port: 0, foxglovePort: null, mqttPort: 0, robots: [] });
    try {
      expect(readFileSync(again.mqttCredentialsFile!, 'utf8')).toBe(readFileSync(file, 'utf8'));
    } finally {
      await again.close();
    }
  }, 60_000);
});

describe('the MQTT robot server under a hostile command stream', () => {
  let broker: EmbeddedBroker;
  const creds = generateMqttCredentials();
  const brokerErrors: Error[] = [];
  const clients: MqttClient[] = [];
  beforeAll(async () => {
    broker = await startEmbeddedBroker({ port: 0, auth: creds, onError: (e) => brokerErrors.push(e) });
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => endClient(c, true)));
    await broker?.close();
    expect(brokerErrors).toEqual([]);
  });
  const open = async (clientId: string, login: { username: string; password: string }) => {
    const c = await connect({ url: broker.url, clientId, protocolVersion: 4, clean: true, ...login, onError: () => {} });
    clients.push(c);
    return c;
  };

  it('clamps every command through the safety layer and caps the rate; a reset over MQTT does not clear the e-stop', async () => {
    const fake = new FakeRobot(); // 50 Hz, velocities in [-1, 1], joint 1 within [-1, 1]
    const errors: Error[] = [];
    // Defaults, as a robot would run it: the safety layer's DEFAULT_SAFETY, its watchdog, the rate cap.
    const server = await serveRobotOverMqtt(fake, await open('robot', robotLogin(creds, 'h1')), 'h1', { onError: (e) => errors.push(e) });
    try {
      const attacker = await open('attacker', creds.service);
      const replies: unknown[] = [];
      onMessages(attacker, (t) => t === robotTopic('h1', 'reply'), (_t, r) => replies.push(r.ok ? r.msg : r.error));
      await subscribe(attacker, robotTopic('h1', 'reply'));
      const N = 300;
      const t0 = performance.now();
      const now = Date.now();
      await Promise.all(
        Array.from({ length: N }, (_, i) => {
          const m: CommandMsg = { type: 'command', session: 'evil', seq: i, stamp: now, deadline: now + 30_000, action: [1e6, 1e6] };
          return publish(attacker, robotTopic('h1', 'cmd'), m);
        }),
      );
      const handled = () => server.stats.applied + server.stats.refused.rate + server.stats.refused.timeout;
      await until(() => handled() === N, 'every command handled');
      const elapsedS = (performance.now() - t0) / 1000;
      expect(errors).toEqual([]);
      // 2 × 50 Hz after a burst of 10.
      expect(server.stats.refused.rate).toBeGreaterThan(0);
      expect(server.stats.applied).toBeLessThanOrEqual(10 + 100 * elapsedS + 1);
      // Range, change cap (0.5 per step), position limit: every value sent is in range and moves at
      // most 0.5 from the one before, unless it is the hold (0).
      // The first command moves 0.5 from the hold, not to the 1 its clamped range allows (the watchdog
      // may have sent holds before it).
      expect(Array.from(fake.actions.find((a) => a[0] !== 0)!)).toEqual([0.5, 0.5]);
      for (let i = 0; i < fake.actions.length; i++) {
        for (let j = 0; j < 2; j++) {
          const v = fake.actions[i]![j]!;
          expect(Math.abs(v)).toBeLessThanOrEqual(1);
          if (i > 0 && v !== 0) expect(Math.abs(v - fake.actions[i - 1]![j]!)).toBeLessThanOrEqual(0.5 + 1e-6);
        }
      }
      expect(server.safety.counts.clamped_range).toBeGreaterThan(0);
      expect(server.safety.counts.clamped_delta).toBeGreaterThan(0);

      // E-stop, then a fresh reset over MQTT: refused, the latch stays.
      const stamp = Date.now();
      await publish(attacker, robotTopic('h1', 'cmd'), { type: 'request', id: 'stop', op: 'estop', stamp, deadline: stamp + 5000 });
      await until(() => server.safety.isEstopped && fake.estopped, 'e-stop');
      await publish(attacker, robotTopic('h1', 'cmd'), { type: 'request', id: 'clear', op: 'reset', stamp, deadline: Date.now() + 5000 });
      await until(() => replies.some((r) => (r as { id?: string }).id === 'clear'), 'reset reply');
      expect(replies.find((r) => (r as { id?: string }).id === 'clear')).toMatchObject({ op: 'reset', ok: false, error: expect.stringMatching(/e-stop latched/) });
      expect(server.safety.isEstopped).toBe(true);
      expect(fake.estopped).toBe(true);
      const n = fake.actions.length;
      await publish(attacker, robotTopic('h1', 'cmd'), { type: 'command', session: 'evil2', seq: 0, stamp: Date.now(), deadline: Date.now() + 5000, action: [0.1, 0.1] });
      await until(() => server.stats.refused.estopped >= 2, 'command refused while e-stopped');
      expect(fake.actions.length).toBe(n);
      // The operator at the robot clears it; then a reset goes through.
      server.clearEstop();
      await publish(attacker, robotTopic('h1', 'cmd'), { type: 'request', id: 'again', op: 'reset', stamp, deadline: Date.now() + 5000 });
      await until(() => replies.some((r) => (r as { id?: string }).id === 'again'), 'second reset reply');
      expect(replies.find((r) => (r as { id?: string }).id === 'again')).toMatchObject({ op: 'reset', ok: true });
      expect(fake.estopped).toBe(false);
      expect(errors).toEqual([]);
    } finally {
      await server.stop();
    }
  }, 30_000);
});
