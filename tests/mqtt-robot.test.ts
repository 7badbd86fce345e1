// MqttRobot (service side) against serveRobotOverMqtt (robot side) through a real broker:
// spec and state arrive, commands round-trip clipped, stale and duplicate commands are refused,
// e-stop is honoured and latches until an operator at the robot clears it (a reset over MQTT does not).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publish } from '../bridge/mqtt/client.js';
import type { CommandMsg } from '../bridge/mqtt/messages.js';
import { robotTopic } from '../bridge/mqtt/topics.js';
import { serveRobotOverMqtt, type RobotServer } from '../hardware/robots/mqtt-server.js';
import { DEFAULT_SAFETY } from '../hardware/safety.js';
import { MqttRobot } from '../hardware/robots/mqtt.js';
import { BROKERS, type TestBroker } from './helpers/mqtt-brokers.js';
import { FakeRobot } from './helpers/mqtt-fake-robot.js';
import { sleep, until } from './helpers/until.js';

describe.each(BROKERS)('MQTT robot over $name', (kind) => {
  let broker: TestBroker;
  let fake: FakeRobot;
  let server: RobotServer;
  let robot: MqttRobot;
  const serverErrors: Error[] = [];

  beforeAll(async () => {
    broker = await kind.start();
    fake = new FakeRobot();
    const robotClient = await broker.client('robot-side-r1');
    // These tests count the commands the robot gets: no robot-side watchdog holds in between, and a
    // change cap that lets the test's steps through (the safety layer's clamps: mqtt-hostile.test.ts).
    server = await serveRobotOverMqtt(fake, robotClient, 'r1', { watchdog: false, safety: { ...DEFAULT_SAFETY, maxDelta: 2 }, onError: (e) => serverErrors.push(e) });
    const serviceClient = await broker.client('service-r1');
    robot = await MqttRobot.connect(serviceClient, 'r1', { commandTtlMs: 500 });
  });

  afterAll(async () => {
    await robot?.[Symbol.asyncDispose]();
    await server?.stop();
    await broker?.close();
  });

  it('announces the spec, limits (±Infinity included) intact', () => {
    expect(robot.spec).toEqual(fake.spec);
  });

  it('state and commands round-trip; the returned action is the clipped one actually sent', async () => {
    const obs0 = await robot.reset();
    expect(Array.from(obs0.position)).toEqual([0, 0]);
    const sent = await robot.act(Float32Array.of(0.5, 3));
    expect(Array.from(sent)).toEqual([0.5, 1]);
    await until(() => fake.actions.length === 1, 'the first action at the robot');
    expect(Array.from(fake.actions[0])).toEqual([0.5, 1]);
    for (let i = 0; i < 9; i++) await robot.act(Float32Array.of(0.5, -0.25));
    await until(() => fake.actions.length === 10, 'ten actions at the robot');
    // The state published at the control rate catches up with the integrator.
    await until(() => fake.position[0] > 0 && Math.abs(fake.position[0] - 0.1) < 1e-9, 'the integrated position');
    let obs = await robot.observe();
    const deadline = Date.now() + 2000;
    while (Math.abs(obs.position[0] - 0.1) > 1e-9 && Date.now() < deadline) {
      await sleep(20);
      obs = await robot.observe();
    }
    expect(obs.position[0]).toBeCloseTo(0.1, 9);
    expect(obs.position[1]).toBeCloseTo((1 - 9 * 0.25) / 50, 9);
    expect(obs.features?.length).toBe(1);
    expect(obs.instruction).toBe('hold');
    await expect(robot.act(Float32Array.of(1))).rejects.toThrow(/takes 2 action values/);
    expect(serverErrors).toEqual([]);
  });

  it('refuses stale and duplicate commands', async () => {
    const injector = await broker.client('injector-r1');
    const before = fake.actions.length;
    const now = Date.now();
    const base: CommandMsg = { type: 'command', session: 'inj', seq: 5, stamp: now, deadline: now + 1000, action: [0.1, 0.1] };
    await publish(injector, robotTopic('r1', 'cmd'), base);
    await until(() => fake.actions.length === before + 1, 'the injected command applied');
    const staleBefore = server.stats.refused.stale;
    const dupBefore = server.stats.refused.duplicate;
    await publish(injector, robotTopic('r1', 'cmd'), { ...base, seq: 6, stamp: now - 5000, deadline: now - 4000 });
    await publish(injector, robotTopic('r1', 'cmd'), { ...base, seq: 5, deadline: Date.now() + 1000 });
    await publish(injector, robotTopic('r1', 'cmd'), { ...base, seq: 4, deadline: Date.now() + 1000 });
    await until(() => server.stats.refused.stale === staleBefore + 1 && server.stats.refused.duplicate === dupBefore + 2, 'the stale and duplicate refusals');
    await sleep(50);
    expect(fake.actions.length).toBe(before + 1);
    // A newer seq is applied again.
    await publish(injector, robotTopic('r1', 'cmd'), { ...base, seq: 7, deadline: Date.now() + 1000, action: [0.2, 0.2] });
    await until(() => fake.actions.length === before + 2, 'the newer seq applied');
  });

  it('honours e-stop, refuses motion and reset over MQTT until an operator clears it at the robot', async () => {
    await robot.act(Float32Array.of(1, 1));
    await robot.estop();
    expect(fake.estopped).toBe(true);
    const n = fake.actions.length;
    const refused = server.stats.refused.estopped;
    await robot.act(Float32Array.of(1, 1));
    await until(() => server.stats.refused.estopped === refused + 1, 'the refusal while e-stopped');
    expect(fake.actions.length).toBe(n);
    // E-stop is honoured even when it is a redelivered/old request.
    const injector = await broker.client('injector2-r1');
    await publish(injector, robotTopic('r1', 'cmd'), { type: 'request', id: 'old-estop', op: 'estop', stamp: 0, deadline: 0 });
    const estops = server.stats.estops;
    await robot.estop();
    expect(server.stats.estops).toBeGreaterThanOrEqual(estops + 1);
    // A stale reset is refused (it would move the robot late), and the latch stays.
    const staleBefore = server.stats.refused.stale;
    await publish(injector, robotTopic('r1', 'cmd'), { type: 'request', id: 'old-reset', op: 'reset', stamp: 0, deadline: 1 });
    await until(() => server.stats.refused.stale === staleBefore + 1, 'the stale reset refused');
    expect(fake.estopped).toBe(true);
    // A fresh reset over MQTT does not clear the latch either: only an operator at the robot does.
    await expect(robot.reset()).rejects.toThrow(/e-stop latched; a reset over MQTT does not clear it/);
    expect(server.safety.isEstopped).toBe(true);
    expect(server.stats.refused.estopped).toBe(refused + 2);
    await robot.act(Float32Array.of(0.3, 0.3));
    await until(() => server.stats.refused.estopped === refused + 3, 'the third refusal while e-stopped');
    expect(fake.actions.length).toBe(n);
    server.clearEstop();
    const obs = await robot.reset();
    expect(Array.from(obs.position)).toEqual([0, 0]);
    expect(fake.estopped).toBe(false);
    await robot.act(Float32Array.of(0.3, 0.3));
    await until(() => fake.actions.length === n + 1, 'the action after the operator cleared the e-stop');
  });

  it('publishes state at the control rate', async () => {
    const n0 = server.stats.statesPublished;
    await sleep(1000);
    const rate = server.stats.statesPublished - n0;
    // 50 Hz nominal; timers on two loaded cores run late, never early.
    expect(rate).toBeGreaterThan(20);
    expect(rate).toBeLessThanOrEqual(52);
  });

  it('a dispose while a request is in flight rejects it with a clear error (never an unhandled one), and later calls too', async () => {
    const c = await broker.client('service-r1-dispose');
    const r = await MqttRobot.connect(c, 'r1');
    // Disposed before the broker can have acknowledged the request's publish.
    const inFlight = r.reset();
    await r[Symbol.asyncDispose]();
    await expect(inFlight).rejects.toThrow('robot r1 disposed');
    await expect(r.estop()).rejects.toThrow('robot r1 disposed');
    await expect(r.act(Float32Array.of(0, 0))).rejects.toThrow('robot r1 disposed');
  });

  it('gives clear errors when the robot is absent', async () => {
    const c = await broker.client('service-ghost');
    await expect(MqttRobot.connect(c, 'ghost', { requestTimeoutMs: 300 })).rejects.toThrow(/no spec from robot ghost/);
  });

  it('observe() rejects once the robot stops publishing state', async () => {
    const c = await broker.client('service-r1-age');
    const r = await MqttRobot.connect(c, 'r1', { maxStateAgeMs: 200, requestTimeoutMs: 300 });
    await r.observe();
    await server.stop();
    await sleep(400);
    await expect(r.observe()).rejects.toThrow(/ms old \(limit 200 ms\)/);
    await expect(r.reset()).rejects.toThrow(/reset on robot r1 got no reply within 300 ms/); // nobody answers
    await r[Symbol.asyncDispose]();
  }, 15_000);
});

describe.each(BROKERS)('step outcomes over $name', (kind) => {
  it('a robot served with reportsOutcome announces it; the outcome of the step after the last command is read; one that does not is refused clearly', async () => {
    const broker = await kind.start();
    const errors: Error[] = [];
    const scored = await serveRobotOverMqtt(new FakeRobot(), await broker.client('robot-side-o1'), 'o1', { watchdog: false, reportsOutcome: true, onError: (e) => errors.push(e) });
    const plain = await serveRobotOverMqtt(new FakeRobot(), await broker.client('robot-side-o2'), 'o2', { watchdog: false, onError: (e) => errors.push(e) });
    const r1 = await MqttRobot.connect(await broker.client('service-o1'), 'o1', { commandTtlMs: 500, maxStateAgeMs: 300, requestTimeoutMs: 2000 });
    const r2 = await MqttRobot.connect(await broker.client('service-o2'), 'o2');
    try {
      expect([r1.reportsOutcome, r2.reportsOutcome]).toEqual([true, false]);
      await r1.reset();
      // An outcome from before the command is not the command's.
      scored.outcome({ t: 0, reward: 9, success: false, terminated: false, truncated: false });
      await sleep(100);
      await r1.act(Float32Array.of(0.1, 0.1));
      const pending = r1.outcomeOfLastCommand();
      setTimeout(() => scored.outcome({ t: 1, reward: 0.25, success: true, terminated: true, truncated: false }), 50);
      expect(await pending).toEqual({ reward: 0.25, success: true, done: true });
      await r1.act(Float32Array.of(0.1, 0.1));
      scored.outcome({ t: 2, reward: -1, success: false, terminated: false, truncated: true });
      expect(await r1.outcomeOfLastCommand()).toEqual({ reward: -1, success: false, done: true });
      await expect(r2.outcomeOfLastCommand()).rejects.toThrow('robot o2 reports no outcome of its steps (its spec announcement does not say outcome: true)');
      expect(() => plain.outcome({ t: 0, reward: 0, success: false, terminated: false, truncated: false })).toThrow(/served without reportsOutcome/);
      // A robot that goes silent: the wait ends as soon as its state is stale, not at the request timeout.
      await r1.act(Float32Array.of(0, 0));
      await scored.stop();
      const t0 = Date.now();
      await expect(r1.outcomeOfLastCommand()).rejects.toThrow('robot o1: its state stopped arriving (link or robot down) before it reported the outcome of the last command');
      expect(Date.now() - t0).toBeLessThan(1500);
      expect(errors).toEqual([]);
    } finally {
      await r1[Symbol.asyncDispose]();
      await r2[Symbol.asyncDispose]();
      await plain.stop();
      await broker.close();
    }
  }, 20_000);
});
