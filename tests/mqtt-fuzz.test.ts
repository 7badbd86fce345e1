// Acceptance: ≥ 10⁵ malformed payloads into parsePayload → 0 throws, every one rejected with an
// error naming the topic, heap bounded; and thousands of malformed payloads through a real
// broker leave a subscribed service working. Seed fixed; reproduce a failure with it.

import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EpisodeIngest, EpisodeUploader } from '../bridge/mqtt/episodes.js';
import { parsePayload } from '../bridge/mqtt/messages.js';
import { robotTopic } from '../bridge/mqtt/topics.js';
import { serveRobotOverMqtt, type RobotServer } from '../hardware/robots/mqtt-server.js';
import { MqttRobot } from '../hardware/robots/mqtt.js';
import { BROKERS, type TestBroker } from './helpers/mqtt-brokers.js';
import { FakeRobot } from './helpers/mqtt-fake-robot.js';
import { malformed, nastyCases, VALID } from './helpers/mqtt-malformed.js';
import { MemorySink } from './helpers/mqtt-sink.js';

const SEED = 424242;
const RUNS = 100_000;
const HEAP_BOUND_MB = 16;

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

function heapMB(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

describe('parsePayload under fuzz', () => {
  it('accepts the valid reference messages (the fuzz mutates these)', () => {
    for (const { channel, msg } of VALID) {
      const r = parsePayload(robotTopic('r', channel), new TextEncoder().encode(JSON.stringify(msg)));
      expect(r, JSON.stringify(r)).toEqual({ ok: true, msg });
    }
  });

  it(`${RUNS} generated + hand-written malformed payloads: 0 throws, all rejected with a clear error, heap bounded`, () => {
    const heap0 = heapMB();
    let count = 0;
    let slowest = 0;
    const check = (channel: 'state' | 'cmd' | 'episodes' | 'ack' | 'spec', bytes: Uint8Array, maxBytes?: number) => {
      const topic = robotTopic('fuzz-bot', channel);
      const t = performance.now();
      const r = parsePayload(topic, bytes, maxBytes ? { maxBytes } : {}); // a throw fails the property
      slowest = Math.max(slowest, performance.now() - t);
      count++;
      if (r.ok) throw new Error(`accepted malformed payload: ${Buffer.from(bytes.slice(0, 300)).toString()}`);
      if (!r.error.startsWith(`MQTT payload on "${topic}": `) || r.error.length > 400) throw new Error(`unclear error: ${r.error.slice(0, 500)}`);
    };
    fc.assert(fc.property(malformed, ({ channel, bytes }) => check(channel, bytes)), { seed: SEED, numRuns: RUNS, endOnFailure: true });
    const nasty = nastyCases();
    for (const c of nasty) check(c.channel, c.bytes, c.maxBytes);
    // Non-robot topics and non-bytes input are refused too.
    expect(parsePayload('other/topic', new Uint8Array(2)).ok).toBe(false);
    expect(parsePayload('wmrl/jobs/rollout', 'x' as unknown as Uint8Array)).toMatchObject({ ok: false, error: expect.stringMatching(/not bytes/) });
    const growth = heapMB() - heap0;
    console.log(`[fuzz] payloads=${count} (generated ${RUNS}, hand-written ${nasty.length}) throws=0 heap_growth_MB=${growth.toFixed(2)} slowest_ms=${slowest.toFixed(1)}`);
    expect(count).toBeGreaterThanOrEqual(100_000);
    expect(growth).toBeLessThan(HEAP_BOUND_MB);
  }, 120_000);
});

describe.each(BROKERS)('malformed payloads through $name', (kind) => {
  let broker: TestBroker;
  let server: RobotServer;
  beforeAll(async () => {
    broker = await kind.start();
  });
  afterAll(async () => {
    await server?.stop();
    await broker?.close();
  });

  it('a subscribed service survives thousands of malformed messages; valid ones still arrive', async () => {
    const sink = new MemorySink();
    const errors: Error[] = [];
    const onError = (e: Error) => errors.push(e);
    const ingest = await EpisodeIngest.create(await broker.client('svc-fuzz-ingest'), sink, { onError });
    const fake = new FakeRobot();
    // Counts every command the robot gets: no watchdog holds in between.
    server = await serveRobotOverMqtt(fake, await broker.client('robot-fuzz-side'), 'fz', { watchdog: false, onError });
    const robot = await MqttRobot.connect(await broker.client('svc-fuzz-robot'), 'fz');
    let robotInvalid = 0;
    robot.events.on('invalid', () => robotInvalid++);
    await robot.observe();

    const attacker = await broker.client('attacker');
    // Spread over three subscribed topics; a payload that would be valid on its new topic
    // (a well-formed message generated for another topic) is left out.
    const payloads = fc
      .sample(malformed, { seed: SEED + 1, numRuns: 3300 })
      .map(({ bytes }, i) => ({ ch: (['episodes', 'state', 'cmd'] as const)[i % 3], bytes }))
      .filter(({ ch, bytes }) => !parsePayload(robotTopic('fz', ch), bytes).ok)
      .slice(0, 3000);
    expect(payloads.length).toBe(3000);
    const perTopic = { episodes: 0, state: 0, cmd: 0 };
    await Promise.all(
      payloads.map(({ ch, bytes }) => {
        perTopic[ch]++;
        return new Promise<void>((resolve, reject) =>
          attacker.publish(robotTopic('fz', ch), Buffer.from(bytes), { qos: 1 }, (err) => (err ? reject(err) : resolve())),
        );
      }),
    );
    // QoS 1 end to end: wait until every malformed message has been seen and refused.
    const deadline = Date.now() + 20_000;
    while ((ingest.stats.invalid < perTopic.episodes || robotInvalid < perTopic.state || server.stats.refused.invalid < perTopic.cmd) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(ingest.stats.invalid).toBe(perTopic.episodes);
    expect(robotInvalid).toBe(perTopic.state);
    expect(server.stats.refused.invalid).toBe(perTopic.cmd);

    // Still working: an episode uploads and is acknowledged, commands and state flow.
    const uploader = await EpisodeUploader.create(await broker.client('robot-fuzz-uploader'), 'fz', { resendMs: 300, onError });
    uploader.begin({ id: 'after-fuzz', robot: 'fz', policyVersion: 'p', hardwareProfile: 'h', startedAt: 0 });
    uploader.step('after-fuzz', { seq: 0, tObs: 0, tAct: 0, obs: await robot.observe(), action: Float32Array.of(0, 0), reward: 1, done: true });
    await uploader.end('after-fuzz');
    expect(sink.has('after-fuzz', 0)).toBe(true);
    await robot.act(Float32Array.of(0.25, 0.25));
    const until = Date.now() + 3000;
    while (fake.actions.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
    expect(fake.actions.map((a) => Array.from(a))).toEqual([[0.25, 0.25]]);
    expect(errors).toEqual([]);
    uploader.close();
    ingest.close();
    await robot[Symbol.asyncDispose]();
    console.log(`[fuzz via ${kind.name}] malformed=${payloads.length} (episodes ${perTopic.episodes}, state ${perTopic.state}, cmd ${perTopic.cmd}); all refused, valid traffic afterwards OK`);
  }, 60_000);
});
