// MQTT with credentials, ACLs and TLS against a real Mosquitto: a certificate authority and a broker
// certificate made with openssl, a password file made with mosquitto_passwd, and an ACL that keeps
// each robot on its own topics. Bad credentials and an untrusted broker fail at once with a clear
// error; a robot YAML with username, password_env and ca_file drives a robot over mqtts://.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, endClient, subscribe, type ConnectOptions } from '../bridge/mqtt/client.js';
import { startMosquitto, type Mosquitto } from '../bridge/mqtt/mosquitto.js';
import { ConfigError } from '../common/config.js';
import { parseRobotConfig } from '../hardware/config.js';
import { serveRobotOverMqtt, type RobotServer } from '../hardware/robots/mqtt-server.js';
import { connectRobot, mqttSecurity } from '../hardware/robots/index.js';
import { FakeRobot } from './helpers/mqtt-fake-robot.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-mqtt-tls-'));
const pem = (name: string) => join(dir, name);

/** A throwaway CA and a broker certificate for 127.0.0.1 (EC keys: fast to make). */
function makeCertificates(): void {
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=wmrl test CA');
  ssl('req', ...ec, '-keyout', 'broker.key', '-out', 'broker.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(pem('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  ssl('x509', '-req', '-in', 'broker.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'broker.crt', '-days', '2', '-extfile', 'san.ext');
  // A second CA that signed nothing the broker has: trusting it must not be enough.
  ssl('req', '-x509', ...ec, '-keyout', 'other.key', '-out', 'other.crt', '-days', '2', '-subj', '/CN=some other CA');
}

describe('MQTT security on Mosquitto: passwords, ACLs, TLS', () => {
  let broker: Mosquitto;
  const clients: MqttClient[] = [];
  const open = async (o: Partial<ConnectOptions> & { clientId: string }) => {
    const c = await connect({ url: broker.url, protocolVersion: 5, connectTimeoutMs: 3000, reconnectPeriodMs: 100, onError: () => {}, ...o });
    clients.push(c);
    return c;
  };
  const ca = () => ({ ca: readFileSync(pem('ca.crt')) });

  beforeAll(async () => {
    makeCertificates();
    broker = await startMosquitto({
      users: { r1: 'r1-secret', r2: 'r2-secret', trainer: 'trainer-secret' },
      // Robots only on their own subtree; the trainer everywhere under wmrl/.
      acl: ['user trainer', 'topic readwrite wmrl/#', '', 'pattern readwrite wmrl/robots/%u/#', ''].join('\n'),
      tls: { cafile: pem('ca.crt'), certfile: pem('broker.crt'), keyfile: pem('broker.key') },
    });
  }, 30_000);

  afterAll(async () => {
    await Promise.all(clients.map((c) => endClient(c, true)));
    await broker?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves mqtts:// to clients with the right CA and credentials', async () => {
    expect(broker.url).toMatch(/^mqtts:\/\/127\.0\.0\.1:\d+$/);
    const trainer = await open({ clientId: 'trainer-1', username: 'trainer', password: 'trainer-secret', tls: ca() });
    const r1 = await open({ clientId: 'r1-1', username: 'r1', password: 'r1-secret', tls: ca() });
    const got: string[] = [];
    trainer.on('message', (topic, payload) => got.push(`${topic} ${payload.toString()}`));
    await subscribe(trainer, 'wmrl/robots/+/state');
    await r1.publishAsync('wmrl/robots/r1/state', '{"hello":1}', { qos: 1 });
    const end = Date.now() + 3000;
    while (got.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    expect(got).toEqual(['wmrl/robots/r1/state {"hello":1}']);
  });

  it('refuses a wrong password and anonymous clients at once, saying why', async () => {
    const t0 = Date.now();
    await expect(open({ clientId: 'bad-1', username: 'r1', password: 'guess', tls: ca() })).rejects.toThrow(/MQTT connect to mqtts:.* as bad-1 failed: .*(Not authorized|Bad User Name or Password)/i);
    await expect(open({ clientId: 'anon-1', tls: ca() })).rejects.toThrow(/Not authorized|Bad User Name or Password/i);
    expect(Date.now() - t0).toBeLessThan(2500); // not retried until the 3 s timeout
  });

  it('refuses a broker whose certificate no trusted CA signed', async () => {
    await expect(open({ clientId: 'r1-untrusted', username: 'r1', password: 'r1-secret', tls: { ca: readFileSync(pem('other.crt')) } })).rejects.toThrow(/certificate|self.signed|unable to verify/i);
    await expect(open({ clientId: 'r1-nocafile', username: 'r1', password: 'r1-secret' })).rejects.toThrow(/certificate|self.signed|unable to verify/i);
  });

  it("the ACL keeps a robot off another robot's topics: its publishes are refused, nothing of the other robot reaches it", async () => {
    const r1 = await open({ clientId: 'r1-2', username: 'r1', password: 'r1-secret', tls: ca() });
    const r2 = await open({ clientId: 'r2-1', username: 'r2', password: 'r2-secret', tls: ca() });
    const trainer = await open({ clientId: 'trainer-2', username: 'trainer', password: 'trainer-secret', tls: ca() });
    const seen = { r1: [] as string[], r2: [] as string[] };
    r1.on('message', (_t, p) => seen.r1.push(p.toString()));
    r2.on('message', (_t, p) => seen.r2.push(p.toString()));
    await subscribe(r1, 'wmrl/robots/r1/cmd');
    // Mosquitto grants the subscription and enforces read access per message.
    await subscribe(r2, 'wmrl/robots/r1/cmd');
    // MQTT 5: a forbidden QoS 1 publish is answered "not authorized" (reason 135).
    await expect(r2.publishAsync('wmrl/robots/r1/cmd', 'forged by r2', { qos: 1 })).rejects.toThrow(/not authori[sz]ed/i);
    await trainer.publishAsync('wmrl/robots/r1/cmd', 'from the trainer', { qos: 1 });
    const end = Date.now() + 3000;
    while (seen.r1.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 100));
    expect(seen.r1).toEqual(['from the trainer']);
    expect(seen.r2).toEqual([]);
  });

  it('a robot YAML with username, password_env and ca_file drives a robot over mqtts://', async () => {
    const fake = new FakeRobot();
    const robotSide = await open({ clientId: 'r1-robot', username: 'r1', password: 'r1-secret', tls: ca() });
    let server: RobotServer | undefined;
    try {
      // The test reads the last command the robot got: no robot-side watchdog holds after it.
      server = await serveRobotOverMqtt(fake, robotSide, 'r1', { watchdog: false, onError: () => {} });
      const yamlFile = join(dir, 'r1.yaml');
      writeFileSync(
        yamlFile,
        [
          'name: r1-over-tls',
          'transport: mqtt',
          `url: ${broker.url}`,
          'mqtt: {robot_id: r1, username: trainer, password_env: WMRL_TEST_MQTT_PASSWORD, ca_file: ca.crt}',
          'joints: [j0, j1]',
          'position_limits: [[-.inf, .inf], [-1, 1]]',
          'velocity_limits: [2, 2]',
          'control_hz: 50',
          'action: {kind: joint_velocity, low: [-1, -1], high: [1, 1]}',
          '',
        ].join('\n'),
      );
      const cfg = parseRobotConfig(readFileSync(yamlFile, 'utf8'), yamlFile);
      expect(cfg.mqtt?.caFile).toBe(pem('ca.crt')); // relative to the YAML's folder
      expect(() => mqttSecurity('r1-over-tls', cfg.mqtt!, {})).toThrow(/mqtt\.password_env names WMRL_TEST_MQTT_PASSWORD, which is not set/);
      process.env.WMRL_TEST_MQTT_PASSWORD = 'trainer-secret';
      const robot = await connectRobot(cfg);
      try {
        await robot.reset();
        const sent = await robot.act(Float32Array.of(0.25, -0.5));
        expect(Array.from(sent)).toEqual([0.25, -0.5]);
        const end = Date.now() + 3000;
        while (fake.actions.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
        expect(Array.from(fake.actions.at(-1)!)).toEqual([0.25, -0.5]);
      } finally {
        await robot[Symbol.asyncDispose]();
      }
    } finally {
      delete process.env.WMRL_TEST_MQTT_PASSWORD;
      await server?.stop();
    }
  });
});

describe('robot YAML mqtt security keys', () => {
  const head = 'name: a\ntransport: mqtt\nurl: mqtts://b:8883\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\n';
  it.each([
    ['password without a user', 'mqtt: {robot_id: r, password_env: PW}\n', /r\.yaml:9: key 'mqtt\.password_env': needs 'mqtt\.username'/],
    ['a password in the file', 'mqtt: {robot_id: r, username: u, password_env: "hunter2!"}\n', /r\.yaml:9: key 'mqtt\.password_env': must name an environment variable/],
    ['cert without key', 'mqtt:\n  robot_id: r\n  cert_file: c.pem\n', /r\.yaml:11: key 'mqtt\.cert_file': goes with 'mqtt\.key_file' \(mutual TLS\)/],
    ['unknown key', 'mqtt: {robot_id: r, pasword: x}\n', /r\.yaml:9: key 'mqtt\.pasword': unknown key/],
  ])('%s is an error naming the file, line and key', (_n, tail, msg) => {
    expect(() => parseRobotConfig(head + tail, 'r.yaml')).toThrow(ConfigError);
    expect(() => parseRobotConfig(head + tail, 'r.yaml')).toThrow(msg);
  });

  it('a missing PEM file is an error naming the key and the path', () => {
    const cfg = parseRobotConfig(head + 'mqtt: {robot_id: r, ca_file: /nonexistent/ca.pem}\n', 'r.yaml');
    expect(() => mqttSecurity('a', cfg.mqtt!, {})).toThrow(/a: cannot read mqtt\.ca_file \/nonexistent\/ca\.pem: ENOENT/);
  });
});
