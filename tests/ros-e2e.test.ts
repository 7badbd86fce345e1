// End to end over real sockets: the sim stand-in in its own process serving rosbridge v2, the
// real roslib client in RosRobot, and the safety layer on top — as a policy would drive a robot.
import { Ros, Topic } from 'roslib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../common/config.js';
import { loadRobotConfig, parseRobotConfig, type RobotConfig } from '../hardware/config.js';
import { NotConnectedError, RosRobot } from '../hardware/robots/ros.js';
import { SafetyLayer, SafetyStop } from '../hardware/safety.js';
import { RosbridgeServer } from '../bridge/rosbridge/server.js';
import { spawnStandIn, type StandInProcess } from './helpers/standin-process.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('policy → safety → roslib → rosbridge WebSocket → sim stand-in process', () => {
  let standIn: StandInProcess;
  let cfg: RobotConfig;
  let robot: RosRobot;
  let safe: SafetyLayer;
  let monitor: Ros;
  const applied: number[][] = [];
  beforeAll(async () => {
    standIn = await spawnStandIn(['--task', 'reach', '--camera-hz', '5']);
    cfg = loadRobotConfig('launch/robots/sim-reach.yaml');
    cfg.url = `ws://127.0.0.1:${standIn.port}`;
    robot = await RosRobot.connect(cfg, { reconnectMinMs: 50 });
    safe = new SafetyLayer(robot, { ...cfg.safety, watchdogMs: 500 });
    // An independent observer of what the robot actually applied.
    monitor = new Ros({});
    const up = new Promise<void>((r) => monitor.once('connection', () => r()));
    await monitor.connect(cfg.url);
    await up;
    new Topic<{ data: number[] }>({ ros: monitor, name: '/wmrl/applied_command', messageType: 'std_msgs/msg/Float64MultiArray' }).subscribe((m) => applied.push(m.data));
    await sleep(100);
  }, 90_000);
  afterAll(async () => {
    monitor?.close();
    await safe?.[Symbol.asyncDispose]();
    await standIn?.stop();
  });

  it('resets, then drives the arm at 50 Hz: every command arrives as sent and the joints move', async () => {
    const o0 = await safe.reset();
    expect(o0.instruction).toMatch(/^reach the (red|green|blue) target$/);
    expect(o0.features).toHaveLength(cfg.spec.features!.length);
    const before = applied.length;
    const sent: number[][] = [];
    for (let i = 0; i < 100; i++) {
      const a = await safe.act(Float32Array.of(0.6 * Math.sin(i / 8), 0.4));
      sent.push(Array.from(a));
      await sleep(20);
    }
    await sleep(100);
    const o1 = await safe.observe();
    expect(applied.slice(before)).toEqual(sent);
    expect(Math.hypot(o1.position[0]! - o0.position[0]!, o1.position[1]! - o0.position[1]!)).toBeGreaterThan(0.1);
    expect(o1.stamp).toBeGreaterThan(o0.stamp);
    expect(o1.image?.encoding).toBe('png');
    expect(Buffer.from(o1.image!.data.subarray(1, 4)).toString()).toBe('PNG');
  });

  it('commands issued while the link is down are refused, not queued: nothing stale reaches the robot after reconnect', async () => {
    await safe.reset();
    await safe.act(Float32Array.of(0.1, 0.1));
    await sleep(100);
    const before = applied.length;
    const connections = robot.connections;
    robot.simulateDrop();
    await sleep(10);
    for (let i = 0; i < 10; i++) await expect(safe.act(Float32Array.of(0.9, -0.9))).rejects.toBeInstanceOf(NotConnectedError);
    await robot.waitFor(() => robot.connections > connections && robot.isConnected, 10_000, 'reconnect');
    await sleep(300);
    expect(applied.length).toBe(before);
    expect(applied.some((a) => a[0] === 0.9)).toBe(false);
    const a = await safe.act(Float32Array.of(0.2, 0.2));
    await sleep(100);
    expect(applied.at(-1)).toEqual(Array.from(a));
  });

  it("the e-stop stays latched through reconnects; only the operator's clear on the robot, then reset, resume", async () => {
    await safe.reset();
    await safe.estop('test');
    const before = applied.length;
    for (let k = 0; k < 3; k++) {
      const c = robot.connections;
      robot.simulateDrop();
      await robot.waitFor(() => robot.connections > c && robot.isConnected, 10_000, 'reconnect');
      await expect(safe.act(Float32Array.of(0.5, 0.5))).rejects.toBeInstanceOf(SafetyStop);
      await expect(safe.reset()).rejects.toThrow(/clearEstop/);
    }
    await sleep(200);
    expect(applied.length).toBe(before);
    const p0 = (await safe.observe()).position;
    await sleep(200);
    const p1 = (await safe.observe()).position;
    expect(Math.abs(p1[1]! - p0[1]!)).toBeLessThan(0.05); // the stopped arm applies no effort
    // Clearing the client's latch is not enough: the robot's own stop holds until its operator clears it.
    safe.clearEstop();
    await expect(safe.reset()).rejects.toThrow(/reset failed: e-stopped: reset does not clear the stop/);
    expect(await standIn.clearEstop()).toMatch(/^e-stop cleared by the operator/);
    await safe.reset();
    await safe.act(Float32Array.of(0.3, 0));
    await sleep(100);
    expect(applied.length).toBe(before + 1);
  });

  it("the stand-in echoes the command it applies: clipped to its actuators' range and its per-step change cap", async () => {
    // Bypassing the safety layer on purpose, as a misbehaving client would.
    const raw = new Topic<{ layout: { dim: never[]; data_offset: number }; data: number[] }>({ ros: monitor, name: cfg.command.topic, messageType: 'std_msgs/msg/Float64MultiArray' });
    await sleep(300); // past the command timeout: the arm gets no effort
    const before = applied.length;
    raw.publish({ layout: { dim: [], data_offset: 0 }, data: [3, -7] });
    const end = Date.now() + 2000;
    while (applied.length === before && Date.now() < end) await sleep(10);
    // At most max_delta (0.5) from the no effort the arm had.
    expect(applied.slice(before)).toEqual([[0.5, -0.5]]);
  });

  it('the scripted expert runs on the stand-in as a rosbridge action with feedback', async () => {
    const { Action } = await import('roslib');
    await safe.reset();
    const act = new Action<{ max_steps: number }, { steps: number }, { success: boolean; steps: number }>({ ros: monitor, name: '/wmrl/run_expert', actionType: 'wmrl_msgs/action/RunExpert' });
    const feedback: number[] = [];
    const result = await new Promise<{ success: boolean; steps: number }>((resolve, reject) => act.sendGoal({ max_steps: 30 }, resolve, (f) => feedback.push(f.steps), reject));
    expect(result.steps).toBeGreaterThanOrEqual(30);
    expect(feedback.length).toBeGreaterThan(5);
    expect(typeof result.success).toBe('boolean');
  });
});

describe('reset waits for the whole first observation', () => {
  it('features published later than the joint state still belong to the new episode', async () => {
    // A robot whose task features arrive 80 ms after its joint state: the observation that reset()
    // returns must carry the new episode's features, never none and never the old episode's.
    const nFeatures = loadRobotConfig('launch/robots/sim-reach.yaml').spec.features!.length;
    const server = new RosbridgeServer({ port: 0 });
    const port = await server.listen();
    const joints = server.advertise('/joint_states', 'sensor_msgs/msg/JointState');
    const feats = server.advertise('/wmrl/task_state', 'std_msgs/msg/Float32MultiArray');
    let episode = 0;
    let t = 1;
    const publish = (delayMs: number) => {
      const e = episode;
      joints({ header: { stamp: { sec: t++, nanosec: 0 }, frame_id: '' }, name: ['shoulder', 'elbow'], position: [e, e], velocity: [0, 0], effort: [] });
      setTimeout(() => feats({ layout: { dim: [], data_offset: 0 }, data: Array(nFeatures).fill(e) }), delayMs);
    };
    server.advertiseService('/wmrl/reset', 'std_srvs/srv/Trigger', () => {
      episode++;
      setTimeout(() => publish(80), 5);
      return { success: true, message: 'reset' };
    });
    const cfg = loadRobotConfig('launch/robots/sim-reach.yaml');
    cfg.url = `ws://127.0.0.1:${port}`;
    const warm = setInterval(() => publish(0), 20); // connect() waits for a first joint state
    const robot = await RosRobot.connect(cfg).finally(() => clearInterval(warm));
    try {
      await sleep(150);
      expect(Array.from((await robot.observe()).features ?? [])).toEqual(Array(nFeatures).fill(0));
      for (let i = 1; i <= 3; i++) {
        const o = await robot.reset();
        expect(Array.from(o.position)).toEqual([i, i]);
        expect(Array.from(o.features ?? [])).toEqual(Array(nFeatures).fill(i));
      }
    } finally {
      await robot[Symbol.asyncDispose]();
      await server.close();
    }
  });
});

describe('robot YAML', () => {
  it('the shipped examples parse', () => {
    const arm = loadRobotConfig('launch/robots/ros2_control_arm.yaml');
    expect(arm.spec.joints).toHaveLength(6);
    expect(arm.spec.action.kind).toBe('joint_velocity');
    expect(arm.safety.watchdogAction).toBe('stop');
    expect(loadRobotConfig('launch/robots/sim-reach.yaml').spec.positionLimits[0]).toEqual([-Infinity, Infinity]);
    const mq = loadRobotConfig('launch/robots/mqtt-arm.yaml');
    expect(mq.transport).toBe('mqtt');
    expect(mq.url).toMatch(/^mqtts?:\/\//);
  });

  it.each([
    ['unknown key', 'name: a\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\ncommand: {mode: forward_command, topic: /c}\nsaftey: {}\n', /r\.yaml:8: key 'saftey': unknown key/],
    ['wrong count', 'name: a\njoints: [j, k]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1, 1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1, -1], high: [1, 1]}\ncommand: {mode: forward_command, topic: /c}\n', /r\.yaml:3: key 'position_limits': needs one \[lower, upper\] pair per joint \(2\)/],
    ['bad value', 'name: a\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: fast\n', /r\.yaml:5: key 'control_hz': must be a rate in \(0, 2000\] Hz, got 'fast'/],
    ['bad mode', 'name: a\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\ncommand: {mode: teleport, topic: /c}\n', /r\.yaml:7: key 'command\.mode': must be 'forward_command' or 'joint_trajectory', got 'teleport'/],
    ['yaml syntax', 'name: [a\n', /r\.yaml:\d+: YAML syntax/],
    ['bad limit', 'name: a\njoints: [j]\nposition_limits: [[-1, x]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\ncommand: {mode: forward_command, topic: /c}\n', /r\.yaml:3: key 'position_limits\[0\]\[1\]': must be a number, got 'x'/],
    ['limits reversed', 'name: a\njoints: [j]\nposition_limits:\n  - [1, -1]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\ncommand: {mode: forward_command, topic: /c}\n', /r\.yaml:4: key 'position_limits\[0\]': lower 1 exceeds upper -1/],
    ['a typo reported as the typo', 'naem: a\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\ncommand: {mode: forward_command, topic: /c}\n', /^r\.yaml:1: key 'naem': unknown key/],
    ['missing key', 'name: a\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, high: [1]}\n', /r\.yaml:6: key 'action\.low': missing/],
    ['missing mapping key', 'name: a\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\ncommand: {topic: /c}\n', /r\.yaml:7: key 'command\.mode': missing/],
    ['mqtt without a broker url', 'name: a\ntransport: mqtt\nmqtt: {robot_id: r}\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\n', /r\.yaml:1: key 'url': missing/],
    ['rosbridge with an mqtt url', 'name: a\nurl: mqtt://b:1883\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\ncommand: {mode: forward_command, topic: /c}\n', /r\.yaml:2: key 'url': must be a ws:\/\/ or wss:\/\/ URL for transport rosbridge, got 'mqtt:\/\/b:1883'/],
  ])('%s gives an error naming file, line and key', (_n, text, msg) => {
    expect(() => parseRobotConfig(text, 'r.yaml')).toThrow(ConfigError);
    expect(() => parseRobotConfig(text, 'r.yaml')).toThrow(msg);
  });
});
