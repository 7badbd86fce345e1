// The two brokers every MQTT test runs against: the embedded aedes broker (MQTT 3.1.1) and a
// real Mosquitto process (MQTT 5). Tests take a BrokerKind and call start(). The aedes broker is
// closed as the service runs it: clients log in, by default with the service role's credentials.

import type { MqttClient } from 'mqtt';
import { generateMqttCredentials, type MqttCredentials } from '../../bridge/mqtt/auth.js';
import { startEmbeddedBroker } from '../../bridge/mqtt/broker.js';
import { connector, endClient, type ConnectOptions } from '../../bridge/mqtt/client.js';
import { startMosquitto, type Mosquitto } from '../../bridge/mqtt/mosquitto.js';
import type { MqttRobotConfig } from '../../hardware/config.js';

export interface TestBroker {
  name: string;
  url: string;
  protocolVersion: 4 | 5;
  /** Connects a client; tracked so close() ends it. Errors are collected in `errors`. */
  client(clientId: string, opts?: Partial<ConnectOptions>): Promise<MqttClient>;
  errors: Error[];
  /** Present for Mosquitto only. */
  mosquitto?: Mosquitto;
  /** Present for aedes only: its logins (clients default to the service's). */
  credentials?: MqttCredentials;
  close(): Promise<void>;
}

/**
 * A robot YAML config that logs in to `broker` as the service does (aedes only; the plain Mosquitto
 * broker takes anyone): the password travels through the environment, as password_env says.
 */
export function withServiceLogin<T extends { mqtt?: MqttRobotConfig }>(cfg: T, broker: TestBroker): T {
  if (!broker.credentials || !cfg.mqtt) return cfg;
  process.env.WMRL_TEST_SERVICE_PASSWORD = broker.credentials.service.password;
  return { ...cfg, mqtt: { ...cfg.mqtt, username: broker.credentials.service.username, passwordEnv: 'WMRL_TEST_SERVICE_PASSWORD' } };
}

export interface BrokerKind {
  name: string;
  start(): Promise<TestBroker>;
}

function harness(name: string, url: string, protocolVersion: 4 | 5, closeBroker: () => Promise<void>, errors: Error[], extra: { mosquitto?: Mosquitto; credentials?: MqttCredentials }): TestBroker {
  const clients: MqttClient[] = [];
  const open = connector(url, { protocolVersion, reconnectPeriodMs: 100, connectTimeoutMs: 3000, ...extra.credentials?.service });
  return {
    name,
    url,
    protocolVersion,
    errors,
    ...extra,
    async client(clientId, opts = {}) {
      const c = await open({ clientId, onError: (e) => errors.push(e), ...opts });
      clients.push(c);
      return c;
    },
    async close() {
      await Promise.all(clients.map((c) => endClient(c, true)));
      await closeBroker();
    },
  };
}

export const BROKERS: BrokerKind[] = [
  {
    name: 'aedes',
    async start() {
      const errors: Error[] = [];
      const credentials = generateMqttCredentials();
      const b = await startEmbeddedBroker({ port: 0, auth: credentials, onError: (e) => errors.push(e) });
      return harness('aedes', b.url, 4, () => b.close(), errors, { credentials });
    },
  },
  {
    name: 'mosquitto',
    async start() {
      const m = await startMosquitto();
      return harness('mosquitto', m.url, 5, () => m.dispose(), [], { mosquitto: m });
    },
  },
];
