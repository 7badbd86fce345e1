// The two brokers every MQTT test runs against: the embedded aedes broker (MQTT 3.1.1) and a
// real Mosquitto process (MQTT 5). Tests take a BrokerKind and call start().

import type { MqttClient } from 'mqtt';
import { startEmbeddedBroker } from '../../bridge/mqtt/broker.js';
import { connector, endClient, type ConnectOptions } from '../../bridge/mqtt/client.js';
import { startMosquitto, type Mosquitto } from '../../bridge/mqtt/mosquitto.js';

export interface TestBroker {
  name: string;
  url: string;
  protocolVersion: 4 | 5;
  /** Connects a client; tracked so close() ends it. Errors are collected in `errors`. */
  client(clientId: string, opts?: Partial<ConnectOptions>): Promise<MqttClient>;
  errors: Error[];
  /** Present for Mosquitto only. */
  mosquitto?: Mosquitto;
  close(): Promise<void>;
}

export interface BrokerKind {
  name: string;
  start(): Promise<TestBroker>;
}

function harness(name: string, url: string, protocolVersion: 4 | 5, closeBroker: () => Promise<void>, errors: Error[], mosquitto?: Mosquitto): TestBroker {
  const clients: MqttClient[] = [];
  const open = connector(url, { protocolVersion, reconnectPeriodMs: 100, connectTimeoutMs: 3000 });
  return {
    name,
    url,
    protocolVersion,
    errors,
    mosquitto,
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
      const b = await startEmbeddedBroker({ port: 0, onError: (e) => errors.push(e) });
      return harness('aedes', b.url, 4, () => b.close(), errors);
    },
  },
  {
    name: 'mosquitto',
    async start() {
      const m = await startMosquitto();
      return harness('mosquitto', m.url, 5, () => m.dispose(), [], m);
    },
  },
];
