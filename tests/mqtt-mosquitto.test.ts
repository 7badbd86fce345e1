// A persistent session keeps its promises: a QoS 1 message queued for an offline subscriber is
// delivered after a broker restart (Mosquitto's persistence file must be written: a broker started
// as root once dropped to the 'mosquitto' user and could not write its private temp dir), and it
// reaches the handler even when the handler is registered well after CONNACK (mqtt.js acknowledges
// messages nobody listens to; the client holds them for the first matching onMessages).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, endClient, onMessages, subscribe } from '../bridge/mqtt/client.js';
import { startMosquitto, type Mosquitto } from '../bridge/mqtt/mosquitto.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('persistent sessions on Mosquitto', () => {
  let broker: Mosquitto;
  beforeAll(async () => {
    broker = await startMosquitto();
  });
  afterAll(() => broker?.dispose());
  const open = (clientId: string, clean: boolean) =>
    connect({ url: broker.url, clientId, clean, protocolVersion: 5, connectTimeoutMs: 5000, reconnectPeriodMs: 100, onError: () => {} });

  /** Subscribes `clientId` persistently, goes offline, and has `texts` published to it meanwhile. */
  async function queue(clientId: string, topic: string, texts: string[]): Promise<void> {
    const sub = await open(clientId, false);
    await subscribe(sub, topic);
    await endClient(sub);
    const pub = await open(`${clientId}-publisher`, true);
    for (const t of texts) await pub.publishAsync(topic, t, { qos: 1 });
    await endClient(pub);
  }

  it('a message queued for an offline session survives a broker restart and reaches a handler registered late', async () => {
    await queue('restart-subscriber', 'wmrl/test/restart', ['kept']);
    await broker.stop(); // SIGTERM: Mosquitto writes its persistence file
    expect(existsSync(join(broker.dir, 'mosquitto.db'))).toBe(true);
    await broker.start();
    const again = await open('restart-subscriber', false);
    await sleep(300); // setup work between connecting and registering the handler
    const got: string[] = [];
    const stop = onMessages(again, (t) => t === 'wmrl/test/restart', (t) => got.push(t));
    await sleep(50);
    stop();
    await endClient(again);
    expect(got).toEqual(['wmrl/test/restart']);
  });

  it('held messages go once, in order, to the first matching registration; live ones are never replayed', async () => {
    await queue('order-subscriber', 'wmrl/test/order/+', []);
    const pub = await open('order-publisher', true);
    for (let i = 0; i < 5; i++) await pub.publishAsync(`wmrl/test/order/${i}`, `m${i}`, { qos: 1 });
    const c = await open('order-subscriber', false);
    await sleep(300);
    const first: string[] = [];
    const stopFirst = onMessages(c, (t) => t.startsWith('wmrl/test/order/'), (t) => first.push(t));
    await sleep(20);
    await pub.publishAsync('wmrl/test/order/live', 'live', { qos: 1 });
    await sleep(200);
    const second: string[] = [];
    const stopSecond = onMessages(c, (t) => t.startsWith('wmrl/test/order/'), (t) => second.push(t));
    await sleep(50);
    stopFirst();
    stopSecond();
    await endClient(c);
    await endClient(pub);
    expect(first).toEqual(['0', '1', '2', '3', '4', 'live'].map((s) => `wmrl/test/order/${s}`));
    expect(second).toEqual([]);
  });
});
