// The sim robot served over MQTT, driven through a robot YAML with transport: mqtt — the same
// path a fleet robot takes — on the embedded broker and on Mosquitto.
//
// Timings: each test sets the safety timings it is about and makes the others generous, so a
// test process starved on a loaded CI machine neither trips the watchdog nor outlives a command
// where that is not the point. The shipped YAML keeps timings for a real network.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseRobotConfig, type RobotConfig } from '../hardware/config.js';
import { connectRobot } from '../hardware/robots/index.js';
import { serveRobotOverMqtt, type RobotServer } from '../hardware/robots/mqtt-server.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { SafetyStop, type InterventionEvent, type SafetyConfig, type SafetyLayer } from '../hardware/safety.js';
import { BROKERS, withServiceLogin, type BrokerKind, type TestBroker } from './helpers/mqtt-brokers.js';
import { sleep, until } from './helpers/until.js';

const ARM_YAML = 'launch/robots/mqtt-arm.yaml';

/** The shipped mqtt-arm.yaml, pointed at the test broker and the sim's normalized action range, with `safety` overriding its timings. */
function armConfig(broker: TestBroker, safety: Partial<SafetyConfig>): RobotConfig {
  const yaml = readFileSync(ARM_YAML, 'utf8')
    .replace('mqtt://127.0.0.1:1883', broker.url)
    .replace('protocol_version: 5', `protocol_version: ${broker.protocolVersion}`)
    .replace('kind: joint_velocity\n  low: [-2, -2]\n  high: [2, 2]', 'kind: normalized\n  low: [-1, -1]\n  high: [1, 1]');
  const cfg = parseRobotConfig(yaml, 'mqtt-arm.yaml');
  return withServiceLogin({ ...cfg, safety: { ...cfg.safety, ...safety } }, broker);
}

interface Arm {
  robot: SafetyLayer;
  served: RobotServer;
  interventions: InterventionEvent[];
}

/** Serves a fresh sim robot as arm-7, connects to it through the YAML config, runs `body`, disposes everything. */
async function withArm(kind: BrokerKind, safety: Partial<SafetyConfig>, body: (arm: Arm) => Promise<void>): Promise<void> {
  const broker = await kind.start();
  const sim = await SimRobot.create({ task: 'reach', seed: 3 });
  const errors: Error[] = [];
  const served = await serveRobotOverMqtt(sim, await broker.client('sim-robot'), 'arm-7', { onError: (e) => errors.push(e) });
  const interventions: InterventionEvent[] = [];
  const robot = await connectRobot(armConfig(broker, safety), (e) => interventions.push(e));
  try {
    await body({ robot, served, interventions });
    expect(errors).toEqual([]);
  } finally {
    await robot[Symbol.asyncDispose]();
    await served.stop();
    await sim[Symbol.asyncDispose]();
    await broker.close();
  }
}

it('the shipped mqtt-arm.yaml stops on its watchdog, which outlasts a command (act() may wait that long for the broker)', () => {
  const { safety } = parseRobotConfig(readFileSync(ARM_YAML, 'utf8'), 'mqtt-arm.yaml');
  expect(safety.watchdogAction).toBe('stop');
  expect(safety.watchdogMs).toBeGreaterThan(safety.maxCommandAgeMs);
});

describe.each(BROKERS)('sim robot over MQTT ($name)', (kind) => {
  it('a YAML-configured MQTT robot is driven through the safety layer; commands reach the sim; e-stop latches', async () => {
    // Not a timing test: no watchdog or command expiry while the loop runs, however late its timers fire.
    await withArm(kind, { watchdogMs: 10_000, maxCommandAgeMs: 5_000 }, async ({ robot, served }) => {
      expect(robot.spec.name).toBe('arm-7');
      const o0 = await robot.reset();
      for (let i = 0; i < 40; i++) {
        await robot.act(Float32Array.of(0.8, -0.6));
        await sleep(20);
      }
      expect(served.stats.refused.stale).toBe(0);
      const o1 = await robot.observe();
      expect(Math.abs(o1.position[0]! - o0.position[0]!)).toBeGreaterThan(0.05);
      await expect(robot.act(Float32Array.of(NaN, 0))).resolves.toEqual(Float32Array.of(0, 0));
      expect(robot.counts.rejected_nonfinite).toBe(1);
      expect(robot.counts.watchdog).toBe(0);

      await robot.estop('test');
      expect(served.stats.estops).toBe(1);
      await expect(robot.act(Float32Array.of(0.5, 0.5))).rejects.toBeInstanceOf(SafetyStop);
      // The robot side latches too: a command that bypasses the safety layer is refused there.
      const applied = served.stats.applied;
      await robot.inner.act(Float32Array.of(0.5, 0.5));
      await until(() => served.stats.refused.estopped === 1, 'robot-side refusal', 10_000);
      expect(served.stats.applied).toBe(applied);
    });
  });

  it('with no commands the watchdog (action stop, from the YAML) latches the e-stop on both sides', async () => {
    // A tight watchdog is the point here; a command's lifetime is not.
    await withArm(kind, { watchdogMs: 100, maxCommandAgeMs: 5_000 }, async ({ robot, served, interventions }) => {
      expect(robot.config.watchdogAction).toBe('stop');
      await until(() => robot.isEstopped, 'watchdog e-stop', 10_000);
      expect(robot.counts.watchdog).toBe(1);
      expect(robot.counts.estop).toBe(1);
      expect(interventions.find((e) => e.kind === 'estop')?.detail).toBe('watchdog');
      await until(() => served.stats.estops === 1, 'e-stop reaching the robot', 10_000);
      await expect(robot.act(Float32Array.of(0.5, 0.5))).rejects.toBeInstanceOf(SafetyStop);
      await expect(robot.reset()).rejects.toBeInstanceOf(SafetyStop);
      expect(robot.counts.refused_estopped).toBe(1);
    });
  });
});
