// The options that bring robots to the service: `serve --robot` (which robots, which ids, which flags go where),
// `sim-robot --transport mqtt`'s broker login (bridge/mqtt/auth.ts), the robot YAML keys for a hosted robot (task,
// mqtt.max_state_age_ms), and the MQTT stand-in's real-time clock.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generateMqttCredentials, robotLogin } from '../bridge/mqtt/auth.js';
import { serveRobots } from '../bin/commands/serve.js';
import { SIM_COMMAND_HISTORY } from '../recipes/options.js';
import { standInLogin } from '../bin/commands/sim-robot.js';
import { parseRobotConfig } from '../hardware/config.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { RealTimeSim } from '../hardware/standin-mqtt.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-robot-options-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('serve --robot', () => {
  it('without --robot: the built-in sim robot of --task and --profile (reach, gap), with the sim flags', () => {
    // The sim robot reports its last SIM_COMMAND_HISTORY commands unless told otherwise.
    expect(serveRobots({})).toEqual([{ id: 'sim', task: 'reach', profile: 'gap', commandHistory: SIM_COMMAND_HISTORY }]);
    expect(serveRobots({ commandHistory: 0 })).toEqual([{ id: 'sim', task: 'reach', profile: 'gap', commandHistory: 0 }]);
    expect(serveRobots({ task: 'push', profile: 'nominal', commandHistory: 3, camera: 32, urdf: 'r.urdf' })).toEqual([{ id: 'sim', task: 'push', profile: 'nominal', commandHistory: 3, image: 32, urdf: 'r.urdf' }]);
  });

  it('YAMLs and sims in order; sims are sim, sim-2, ... (profile nominal unless given) and take the sim flags', () => {
    expect(serveRobots({ robot: ['a.yaml', 'sim:reach:gap', 'b.yaml', 'sim:push'], commandHistory: 2 })).toEqual([
      { yaml: 'a.yaml' },
      { id: 'sim', task: 'reach', profile: 'gap', commandHistory: 2 },
      { yaml: 'b.yaml' },
      { id: 'sim-2', task: 'push', profile: 'nominal', commandHistory: 2 },
    ]);
    expect(serveRobots({ robot: ['arm.yaml'], urdf: 'arm.urdf', urdfPackage: { arm: '/pkgs/arm' } })).toEqual([{ yaml: 'arm.yaml', urdf: 'arm.urdf', packages: { arm: '/pkgs/arm' } }]);
  });

  it('flags that contradict --robot are errors naming them', () => {
    expect(() => serveRobots({ robot: ['a.yaml'], task: 'reach' })).toThrow(/^--task and --profile set the built-in sim robot; with --robot, name a sim robot as sim:TASK\[:PROFILE\]$/);
    expect(() => serveRobots({ robot: ['a.yaml', 'b.yaml'], urdf: 'x.urdf' })).toThrow(/--urdf and --urdf-package draw one robot/);
    expect(() => serveRobots({ robot: ['a.yaml'], camera: 32 })).toThrow(/--command-history and --camera are the sim robot's; a robot YAML sets command_history and camera itself/);
    expect(() => serveRobots({ robot: ['sim:'] })).toThrow(/--robot sim:: a sim robot is sim:TASK\[:PROFILE\]/);
    expect(() => serveRobots({ robot: ['sim:reach:gap:x'] })).toThrow(/--robot sim:reach:gap:x: a sim robot is sim:TASK\[:PROFILE\]/);
  });
});

describe('sim-robot --transport mqtt: its broker login', () => {
  it("--credentials: logs in as robot:ID with the password the service's broker derives from its robot key", () => {
    const creds = generateMqttCredentials();
    const file = join(dir, 'mqtt-credentials.json');
    writeFileSync(file, JSON.stringify(creds));
    expect(standInLogin({ credentials: file }, 'arm-7')).toEqual(robotLogin(creds, 'arm-7'));
    expect(robotLogin(creds, 'arm-7').username).toBe('robot:arm-7');
  });

  it('--username with the password from --password-env; no login without either', () => {
    expect(standInLogin({ username: 'arm-b', passwordEnv: 'PW' }, 'arm-b', { PW: 's3cret' })).toEqual({ username: 'arm-b', password: 's3cret' });
    expect(standInLogin({}, 'arm-b', {})).toEqual({});
  });

  it('a login given wrong is an error naming the flag', () => {
    expect(() => standInLogin({ username: 'u' }, 'r', {})).toThrow(/--username u needs --password-env VAR/);
    expect(() => standInLogin({ username: 'u', passwordEnv: 'PW' }, 'r', {})).toThrow(/--password-env PW: the environment variable PW is not set or empty/);
    expect(() => standInLogin({ passwordEnv: 'PW' }, 'r', { PW: 'x' })).toThrow(/--password-env needs --username/);
    expect(() => standInLogin({ credentials: 'c.json', username: 'u' }, 'r', {})).toThrow(/--credentials and --username are two ways to log in/);
    expect(() => standInLogin({ credentials: join(dir, 'none.json') }, 'r', {})).toThrow(/cannot read the MQTT credentials .*none\.json/);
    writeFileSync(join(dir, 'bad.json'), '{"robotKey": "short"}');
    expect(() => standInLogin({ credentials: join(dir, 'bad.json') }, 'r', {})).toThrow(/bad\.json: robotKey must be 64 hex digits/);
  });
});

describe('robot YAML keys of a hosted robot', () => {
  const base = 'name: arm\njoints: [a]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\n';
  it('task: the sim task the robot performs; mqtt.max_state_age_ms: how stale its state may get', () => {
    expect(parseRobotConfig(`${base}task: reach\ncommand: {mode: forward_command, topic: /c}\n`).task).toBe('reach');
    expect(parseRobotConfig(`${base}command: {mode: forward_command, topic: /c}\n`).task).toBeUndefined();
    const mqtt = parseRobotConfig(`${base}transport: mqtt\nurl: mqtt://127.0.0.1:1883\nmqtt: {robot_id: arm, max_state_age_ms: 1500}\n`);
    expect(mqtt.mqtt).toMatchObject({ robotId: 'arm', maxStateAgeMs: 1500 });
    expect(() => parseRobotConfig(`${base}transport: mqtt\nurl: mqtt://127.0.0.1:1883\nmqtt: {robot_id: arm, max_state_age_ms: 0}\n`, 'arm.yaml')).toThrow(/mqtt\.max_state_age_ms.*must be a positive number of milliseconds/);
    expect(() => parseRobotConfig(`${base}task: ''\ncommand: {mode: forward_command, topic: /c}\n`, 'arm.yaml')).toThrow(/task.*must name a sim task/);
  });
});

describe("the MQTT stand-in's clock", () => {
  it('steps the sim at its control rate with the latest command, and with no effort once the command is older than its timeout', async () => {
    const sim = await SimRobot.create({ task: 'reach', seed: 1 });
    const errors: Error[] = [];
    const robot = new RealTimeSim(sim, 100, (e) => errors.push(e));
    try {
      await robot.reset({ seed: 1 });
      const t0 = performance.now();
      const s0 = robot.steps;
      const moving = setInterval(() => void robot.act(Float32Array.of(0.8, -0.6)), 20);
      await new Promise((r) => setTimeout(r, 400));
      clearInterval(moving);
      const hz = (robot.steps - s0) / ((performance.now() - t0) / 1000);
      // Steps come from its own clock, not from the commands: about 50 a second (timers run late on a loaded machine).
      expect(hz).toBeGreaterThan(25);
      expect(hz).toBeLessThan(60);
      expect(sim.lastStep!.info.command[0]).toBeCloseTo(0.8, 5);
      await new Promise((r) => setTimeout(r, 300));
      expect(Array.from(sim.lastStep!.info.command)).toEqual([0, 0]);
      expect(errors).toEqual([]);
    } finally {
      await robot[Symbol.asyncDispose]();
    }
  });
});
