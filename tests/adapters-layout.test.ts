// Every task through every adapter: for reach, push, pick and the custom robot fixture, the observation
// vector the stand-in over rosbridge (RosRobot over a real WebSocket) and the MQTT path (serveRobotOverMqtt +
// MqttRobot on the embedded aedes broker) yield equals the env's state vector, after a seeded reset and
// after a few steps; the same seed reproduces the start observation over each transport, another differs.
// (The in-process SimRobot is covered per task in sim-robot.test.ts.)
import { describe, expect, it } from 'vitest';
import { buildObservation, layoutMismatch, layoutOf, type ObservationLayout } from '../common/layout.js';
import type { RobotObservation } from '../common/robot.js';
import { MqttRobot } from '../hardware/robots/mqtt.js';
import { serveRobotOverMqtt } from '../hardware/robots/mqtt-server.js';
import { RosRobot } from '../hardware/robots/ros.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { standInConfig, startStandIn } from '../hardware/standin.js';
import { UnseededResetError } from '../hardware/types.js';
import { BROKERS } from './helpers/mqtt-brokers.js';
import { TASKS } from './helpers/tasks.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const vec = (l: ObservationLayout, o: RobotObservation) => Array.from(buildObservation(l, o));
/** Largest |a - b| to the closest of `states`: 0 when the observation is one of the env's states. */
const distanceTo = (v: number[], states: Float32Array[]) => Math.min(...states.map((s) => (s.length === v.length ? Math.max(...v.map((x, i) => Math.abs(x - s[i]!))) : Infinity)));

describe.each(TASKS)('%s through every adapter', (task) => {
  it('stand-in over rosbridge: observations are env states in the declared layout; a seeded reset reproduces', async () => {
    const standIn = await startStandIn({ task, port: 0, host: '127.0.0.1' });
    // every state the stand-in's env passes through, recorded where the stand-in steps it
    const states: Float32Array[] = [];
    const act = standIn.robot.act.bind(standIn.robot);
    standIn.robot.act = async (a) => {
      const r = await act(a);
      states.push(standIn.robot.lastObs.state.slice());
      if (states.length > 500) states.shift();
      return r;
    };
    const robot = await RosRobot.connect(standInConfig(standIn.robot.spec, `ws://127.0.0.1:${standIn.port}`), { timeoutMs: 10_000 });
    try {
      const layout = robot.layout;
      expect(layoutMismatch(standIn.robot.env.layout, layout)).toBeNull();
      const a = await robot.reset({ seed: 9 });
      expect(distanceTo(vec(layout, a), states)).toBeLessThan(1e-6);
      const n = robot.spec.action.low.length;
      for (let t = 0; t < 5; t++) {
        await robot.act(Float32Array.from({ length: n }, (_, k) => 0.5 * Math.cos(t + k)));
        await sleep(25);
      }
      const moved = await robot.nextObservation();
      expect(distanceTo(vec(layout, moved), states)).toBeLessThan(1e-6);
      expect(vec(layout, moved)).not.toEqual(vec(layout, a));
      const b = await robot.reset({ seed: 9 });
      const c = await robot.reset({ seed: 10 });
      expect(vec(layout, b)).toEqual(vec(layout, a));
      expect(vec(layout, c)).not.toEqual(vec(layout, a));
      expect(standIn.counters.resets).toBe(3);
    } finally {
      await robot[Symbol.asyncDispose]();
      await standIn.stop();
    }
  }, 60_000);

  it('MQTT (aedes): reset and state observations are env states; the seed travels in the reset request', async () => {
    const broker = await BROKERS[0]!.start();
    const sim = await SimRobot.create({ task, seed: 1 });
    const errors: Error[] = [];
    // The stamp counts control steps: no robot-side watchdog holds stepping the sim in between.
    const served = await serveRobotOverMqtt(sim, await broker.client('robot-side'), 'r1', { watchdog: false, onError: (e) => errors.push(e) });
    const robot = await MqttRobot.connect(await broker.client('service-side'), 'r1');
    try {
      const layout = robot.layout;
      expect(layoutMismatch(sim.env.layout, layout)).toBeNull();
      const a = await robot.reset({ seed: 9 });
      expect(vec(layout, a)).toEqual(Array.from(sim.lastObs.state));
      const n = robot.spec.action.low.length;
      for (let t = 0; t < 5; t++) await robot.act(Float32Array.from({ length: n }, (_, k) => 0.5 * Math.cos(t + k)));
      while (served.stats.applied < 5) await sleep(5);
      // the robot's stamp counts control steps: wait for the state published after the fifth
      let moved = await robot.observe();
      for (let i = 0; i < 400 && moved.stamp !== 5 / robot.spec.controlHz; i++) {
        await sleep(5);
        moved = await robot.observe();
      }
      expect(moved.stamp).toBe(5 / robot.spec.controlHz);
      expect(vec(layout, moved)).toEqual(Array.from(sim.lastObs.state));
      expect(vec(layout, moved)).not.toEqual(vec(layout, a));
      const b = await robot.reset({ seed: 9 });
      const c = await robot.reset({ seed: 10 });
      expect(vec(layout, b)).toEqual(vec(layout, a));
      expect(vec(layout, c)).not.toEqual(vec(layout, a));
      expect(errors).toEqual([]);
    } finally {
      await robot[Symbol.asyncDispose]();
      await served.stop();
      await sim[Symbol.asyncDispose]();
      await broker.close();
    }
  }, 60_000);
});

describe('a seed given to a robot that cannot honour it', () => {
  it('is an UnseededResetError naming the robot (rosbridge config without services.reset_seed_topic)', async () => {
    const standIn = await startStandIn({ task: 'reach', port: 0, host: '127.0.0.1' });
    const cfg = standInConfig(standIn.robot.spec, `ws://127.0.0.1:${standIn.port}`);
    const robot = await RosRobot.connect({ ...cfg, services: { reset: cfg.services.reset } });
    try {
      await expect(robot.reset({ seed: 3 })).rejects.toThrow(new UnseededResetError(robot.spec.name, 'its robot config declares no services.reset_seed_topic'));
      expect(standIn.counters.resets).toBe(0);
      await expect(robot.reset()).resolves.toMatchObject({ instruction: expect.any(String) });
      expect(layoutOf(robot.spec).features).toEqual(layoutOf(standIn.robot.spec).features);
    } finally {
      await robot[Symbol.asyncDispose]();
      await standIn.stop();
    }
  });
});
