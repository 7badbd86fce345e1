// The sim robot served over MQTT, driven through a robot YAML with transport: mqtt — the same
// path a fleet robot takes — on the embedded broker and on Mosquitto.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseRobotConfig } from '../hardware/config.js';
import { connectRobot } from '../hardware/robots/index.js';
import { serveRobotOverMqtt } from '../hardware/robots/mqtt-server.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { SafetyStop } from '../hardware/safety.js';
import { BROKERS } from './helpers/mqtt-brokers.js';

describe.each(BROKERS)('sim robot over MQTT ($name)', (kind) => {
  it('a YAML-configured MQTT robot is driven through the safety layer; commands reach the sim; e-stop latches', async () => {
    const broker = await kind.start();
    const sim = await SimRobot.create({ task: 'reach', seed: 3 });
    const errors: Error[] = [];
    const served = await serveRobotOverMqtt(sim, await broker.client('sim-robot'), 'arm-7', { onError: (e) => errors.push(e) });
    const yaml = readFileSync('launch/robots/mqtt-arm.yaml', 'utf8')
      .replace('mqtt://127.0.0.1:1883', broker.url)
      .replace('protocol_version: 5', `protocol_version: ${broker.protocolVersion}`)
      .replace('kind: joint_velocity\n  low: [-2, -2]\n  high: [2, 2]', 'kind: normalized\n  low: [-1, -1]\n  high: [1, 1]');
    const cfg = parseRobotConfig(yaml, 'mqtt-arm.yaml');
    const robot = await connectRobot(cfg);
    try {
      expect(robot.spec.name).toBe('arm-7');
      const o0 = await robot.reset();
      for (let i = 0; i < 40; i++) {
        await robot.act(Float32Array.of(0.8, -0.6));
        await new Promise((r) => setTimeout(r, 20));
      }
      const o1 = await robot.observe();
      expect(Math.abs(o1.position[0]! - o0.position[0]!)).toBeGreaterThan(0.05);
      await expect(robot.act(Float32Array.of(NaN, 0))).resolves.toEqual(Float32Array.of(0, 0));
      await robot.estop('test');
      await expect(robot.act(Float32Array.of(0.5, 0.5))).rejects.toBeInstanceOf(SafetyStop);
      expect(robot.counts.rejected_nonfinite).toBe(1);
    } finally {
      await robot[Symbol.asyncDispose]();
      await served.stop();
      await sim[Symbol.asyncDispose]();
      await broker.close();
    }
  });
});
