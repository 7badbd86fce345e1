// A robot YAML's `command_history: K` makes any robot report its last K commands as the sim does with
// `commandHistory: K` (sim/env.ts): the same layout, so a policy trained on the sim deploys on it, and the same
// values once K commands have gone out.
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { buildObservation, layoutMismatch, layoutOf } from '../common/layout.js';
import { CommandHistoryRobot, withCommandHistorySpec } from '../hardware/command-history.js';
import { parseRobotConfig } from '../hardware/config.js';
import { connectRobot } from '../hardware/robots/index.js';
import { serveRobotOverMqtt } from '../hardware/robots/mqtt-server.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { BROKERS, withServiceLogin } from './helpers/mqtt-brokers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it('wrapping a sim robot gives the layout and, after K commands, the observations of the sim made with the history', async () => {
  await using plain = await SimRobot.create({ task: 'reach', profile: 'gap', seed: 1 });
  await using native = await SimRobot.create({ task: 'reach', profile: 'gap', seed: 1, commandHistory: 3 });
  await using wrapped = new CommandHistoryRobot(plain, 3);
  expect(layoutMismatch(layoutOf(native.spec), layoutOf(wrapped.spec))).toBeNull();
  expect(wrapped.spec.features!.slice(-2)).toEqual(['shoulder command t-3', 'elbow command t-3']);
  expect(wrapped.spec.featureUnits!.slice(-6)).toEqual(new Array(6).fill('1'));

  const n = plain.spec.features!.length;
  const r0 = await wrapped.reset({ seed: 4 });
  await native.reset({ seed: 4 });
  // before any command: the hold of a normalized action (0) in every slot
  expect(Array.from(r0.features!.slice(n))).toEqual([0, 0, 0, 0, 0, 0]);
  const sent = [[0.5, -0.25], [2, -3], [-0.75, 0.125], [0.25, 0.5]];
  for (const a of sent) {
    await wrapped.act(Float32Array.from(a));
    await native.act(Float32Array.from(a));
  }
  const w = buildObservation(layoutOf(wrapped.spec), await wrapped.observe());
  const s = buildObservation(native.env.layout, await native.observe());
  expect(Array.from(w.slice(-6))).toEqual([0.25, 0.5, -0.75, 0.125, 1, -1]);
  expect(Array.from(w)).toEqual(Array.from(s));
});

it('a command the robot refuses is taken back from the history; NaN goes down as 0', async () => {
  await using plain = await SimRobot.create({ task: 'reach', seed: 1 });
  await using wrapped = new CommandHistoryRobot(plain, 2);
  const n = plain.spec.features!.length;
  await wrapped.reset({ seed: 2 });
  await wrapped.act(Float32Array.from([0.5, NaN]));
  const act = plain.act.bind(plain);
  plain.act = () => Promise.reject(new Error('link down'));
  await expect(wrapped.act(Float32Array.from([0.25, 0.25]))).rejects.toThrow(/link down/);
  plain.act = act;
  expect(Array.from((await wrapped.observe()).features!.slice(n))).toEqual([0.5, 0, 0, 0]);
});

it('a velocity-commanded robot reports its commands in its joints\' units per second', () => {
  const spec = withCommandHistorySpec({
    name: 'arm', joints: ['a', 'b'], jointUnits: ['rad', 'm'], positionLimits: [[-1, 1], [0, 0.5]], velocityLimits: [1, 1],
    action: { kind: 'joint_velocity', names: ['a', 'b'], low: [-1, -1], high: [1, 1] }, controlHz: 10,
  }, 2);
  expect(spec.features).toEqual(['a command t-1', 'b command t-1', 'a command t-2', 'b command t-2']);
  expect(spec.featureUnits).toEqual(['rad/s', 'm/s', 'rad/s', 'm/s']);
});

it('robot YAML command_history: parsed, checked by name, and applied by connectRobot below the safety layer (MQTT, aedes)', async () => {
  const yaml = readFileSync('launch/robots/mqtt-arm.yaml', 'utf8');
  expect(parseRobotConfig(yaml, 'arm.yaml').commandHistory).toBe(0);
  expect(() => parseRobotConfig(`${yaml}\ncommand_history: -1\n`, 'arm.yaml')).toThrow(/command_history.*whole number of steps/);
  expect(() => parseRobotConfig(`${yaml}\ncommand_history: 2.5\n`, 'arm.yaml')).toThrow(/command_history/);

  const broker = await BROKERS[0]!.start();
  const sim = await SimRobot.create({ task: 'reach', seed: 3 });
  const errors: Error[] = [];
  const served = await serveRobotOverMqtt(sim, await broker.client('sim-robot'), 'arm-7', { onError: (e) => errors.push(e) });
  const cfg = parseRobotConfig(
    yaml.replace('mqtt://127.0.0.1:1883', broker.url).replace('protocol_version: 5', `protocol_version: ${broker.protocolVersion}`)
      .replace('kind: joint_velocity\n  low: [-2, -2]\n  high: [2, 2]', 'kind: normalized\n  low: [-1, -1]\n  high: [1, 1]') + '\ncommand_history: 2\n',
    'arm.yaml',
  );
  expect(cfg.commandHistory).toBe(2);
  const robot = await connectRobot(withServiceLogin({ ...cfg, safety: { ...cfg.safety, watchdogMs: 60_000, maxCommandAgeMs: 10_000 } }, broker));
  try {
    expect(robot.spec.features).toEqual([...sim.spec.features!, 'shoulder command t-1', 'elbow command t-1', 'shoulder command t-2', 'elbow command t-2']);
    const o0 = await robot.reset({ seed: 9 });
    expect(Array.from(o0.features!.slice(-4))).toEqual([0, 0, 0, 0]);
    // max_delta 0.5: the first command is cut to 0.5 from the hold, and the history records what was sent
    await robot.act(Float32Array.from([0.9, -0.25]));
    await robot.act(Float32Array.from([0.75, -0.5]));
    while (served.stats.applied < 2) await sleep(5);
    const o = await robot.observe();
    expect(Array.from(o.features!.slice(-4))).toEqual([0.75, -0.5, 0.5, -0.25]);
    expect(robot.counts.clamped_delta).toBe(1);
    expect(errors).toEqual([]);
  } finally {
    await robot[Symbol.asyncDispose]();
    await served.stop();
    await sim[Symbol.asyncDispose]();
    await broker.close();
  }
});
