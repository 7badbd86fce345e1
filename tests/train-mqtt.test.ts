// Training on MQTT robots behind a real Mosquitto: two sim stand-ins served over MQTT (each stepped in real time,
// publishing every step's outcome and honouring seeded resets) as a trainer's fleet from their robot YAMLs: a group's
// episodes run on both at once, scored by the outcomes they publish; a robot that goes silent mid-episode leaves its
// episode partial and the fleet runs it again on the other; a robot that publishes no outcomes is refused for training.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MqttClient } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, endClient } from '../bridge/mqtt/client.js';
import { startMosquitto, type Mosquitto } from '../bridge/mqtt/mosquitto.js';
import { serveRobotOverMqtt } from '../hardware/robots/mqtt-server.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { startMqttStandIn, type MqttStandIn } from '../hardware/standin-mqtt.js';
import { Rng } from '../nn/index.js';
import type { Policy } from '../policies/types.js';
import { groupEpisodes } from '../wmrl/embodied.js';
import { yamlRobotTarget } from '../wmrl/robot-target.js';
import { reachOverMqtt } from './helpers/robot-yaml.js';

const dir = mkdtempSync(join(tmpdir(), 'train-mqtt-'));
let mosquitto: Mosquitto;
const clients: MqttClient[] = [];
const errors: Error[] = [];

/** A robot YAML for robot `id` on the test's broker; timings generous enough for a loaded machine. */
const yaml = (id: string) => {
  const file = join(dir, `${id}.yaml`);
  writeFileSync(file, reachOverMqtt({ id, url: mosquitto.url, maxStateAgeMs: 800 }));
  return file;
};

async function standIn(id: string): Promise<MqttStandIn> {
  const client = await connect({ url: mosquitto.url, clientId: `robot-${id}`, protocolVersion: 5, clean: true, onError: (e) => errors.push(e) });
  clients.push(client);
  return startMqttStandIn({ task: 'reach', profile: 'gap', seed: 0, client, robotId: id, onError: (e) => errors.push(e) });
}

/** A policy of the sim's observation that samples around zero. */
const noisePolicy: Policy = { kind: 'test', obsDim: 17, actDim: 2, chunk: 1, inputs: () => ({}), act: async (_x: Float32Array, noise: Float32Array) => ({ action: noise.map((v) => 0.3 * v), mean: new Float32Array(2), logProb: Float32Array.of(0) }) } as unknown as Policy;

beforeAll(async () => {
  mosquitto = await startMosquitto();
}, 30_000);
afterAll(async () => {
  await Promise.all(clients.map((c) => endClient(c, true)));
  await mosquitto?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

describe('training on MQTT robots', () => {
  it("a fleet of two MQTT robots from their YAMLs: a group's episodes run on both at once, from the seeded reset, scored by the outcomes they publish", async () => {
    const [a, b] = await Promise.all([standIn('mq-a'), standIn('mq-b')]);
    const target = await yamlRobotTarget({ config: [yaml('mq-a'), yaml('mq-b')], maxSteps: 30, store: join(dir, 'fleet.db'), robots: 1, resetSeconds: 2, task: 'reach' });
    try {
      expect(target.fleet?.robots.map((r) => r.meta.robot)).toEqual(['mq-a', 'mq-b']);
      const eps = await groupEpisodes(target, noisePolicy, 1_000_000, 2, new Rng(0), 'v1');
      const store = target.store!;
      const recorded = eps.map((ep) => store.get(ep.id));
      expect(recorded.map((e) => [e.meta.robot, e.meta.task, e.meta.hardwareProfile]).sort()).toEqual([['mq-a', 'reach', 'real'], ['mq-b', 'reach', 'real']]);
      // Scored: every step's reward is the robot's (the reach task's dense reward is negative), and the episode says whether it succeeded.
      for (const ep of eps) {
        expect(ep.status).toBe('complete');
        expect(typeof ep.success).toBe('boolean');
        expect(Array.from(ep.reward).every((r) => Number.isFinite(r) && r !== 0)).toBe(true);
      }
      // The seeded reset: both start where the seed puts the task, up to the gap profile's sensor noise.
      const [p, q] = recorded.map((e) => e.steps[0]!.obs.position);
      p!.forEach((v, i) => expect(Math.abs(v - q![i]!)).toBeLessThan(0.05));
      // Wall-clock is one robot's two episodes at most; robot time both robots'.
      expect(target.clock.state().busy.every((s) => s > 0)).toBe(true);
      expect(target.clock.wallSeconds).toBeLessThan(target.clock.robotSeconds);

      // mq-b goes silent mid-episode: its episode stays partial, and runs again on mq-a.
      const group = groupEpisodes(target, noisePolicy, 1_000_001, 2, new Rng(1), 'v2');
      await new Promise((r) => setTimeout(r, 250));
      await b.stop();
      const again = await group;
      expect(again.map((e) => e.status)).toEqual(['complete', 'complete']);
      expect(again.map((ep) => store.get(ep.id).meta.robot)).toEqual(['mq-a', 'mq-a']);
      expect(target.fleet!.lost.map((l) => l.robot.meta.robot)).toEqual(['mq-b']);
      const v2 = store.list().filter((e) => e.meta.policyVersion === 'v2');
      expect(v2.map((e) => [e.meta.robot, e.status]).sort()).toEqual([['mq-a', 'complete'], ['mq-a', 'complete'], ['mq-b', 'partial']]);
      expect(store.list()).toHaveLength(5);
    } finally {
      await target.close();
      await a.stop();
    }
    expect(errors).toEqual([]);
  }, 60_000);

  it('a robot that publishes no outcomes is refused for training, naming what its robot side must do', async () => {
    const sim = await SimRobot.create({ task: 'reach', seed: 0 });
    const client = await connect({ url: mosquitto.url, clientId: 'robot-mq-plain', protocolVersion: 5, clean: true, onError: (e) => errors.push(e) });
    clients.push(client);
    const served = await serveRobotOverMqtt(sim, client, 'mq-plain', { watchdog: false, onError: (e) => errors.push(e) });
    try {
      const file = yaml('mq-plain');
      await expect(yamlRobotTarget({ config: file, maxSteps: 30, robots: 1, resetSeconds: 2 })).rejects.toThrow(`${file}: robot 'mq-plain' reports no outcome of its steps, which training scores episodes by: its robot side publishes each control step's outcome on wmrl/robots/{id}/outcome and announces it in its spec`);
      await expect(yamlRobotTarget({ config: [file, file], maxSteps: 30, robots: 1, resetSeconds: 2 })).rejects.toThrow(/two robot YAMLs name robot 'mq-plain'/);
      await expect(yamlRobotTarget({ config: [file, yaml('mq-other')], maxSteps: 30, robots: 4, resetSeconds: 2 })).rejects.toThrow(/^robots 4 stands one robot in for several .* a fleet of 2 robot YAMLs is its own robots$/);
    } finally {
      await served.stop();
      await sim[Symbol.asyncDispose]();
    }
  }, 30_000);
});
