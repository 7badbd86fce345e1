// The robot-side policy node (hardware/policy-node.ts): the robot read from a real exported artifact's metadata,
// its actions at the artifact's rate through the safety layer onto the controller's topic over the rclnodejs API
// (an in-process stand-in: ROS 2 cannot be installed here), and the robot held when its joint states stop.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { layoutOf } from '../common/layout.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { Ros2Robot } from '../hardware/robots/ros2.js';
import { withCommandHistorySpec } from '../hardware/command-history.js';
import { declarationFromArtifact, firstObservation, policyNodeConfig, runPolicyNode, splitCommandHistory, startPolicyNode } from '../hardware/policy-node.js';
import { exportPolicyArtifact } from '../policies/artifact.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import { toRosTime } from '../bridge/ros/msgs.js';
import { Graph } from './helpers/rcl-graph.js';

const ENV = { ROS_DISTRO: 'jazzy', AMENT_PREFIX_PATH: '/opt/ros/jazzy' };
const dir = mkdtempSync(join(tmpdir(), 'wmrl-policy-node-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the robot-side policy node', async () => {
  const sim = await SimRobot.create({ task: 'reach' });
  const spec = sim.spec;
  const layout = layoutOf(spec);
  const D = layout.joints.length * 2 + layout.features.length;
  const policy = new GaussianPolicy({ obsDim: D, actDim: 2, hidden: [16], seed: 3 });
  const path = join(dir, 'reach.onnx');
  exportPolicyArtifact(policy, path, { layout, action: spec.action, controlHz: spec.controlHz, policyVersion: 'v7', runId: 'r1' });
  await sim[Symbol.asyncDispose]?.();

  it('reads joints, features, action limits and rate from the artifact, and asks for the topics it needs', () => {
    const d = declarationFromArtifact(path);
    expect([d.joints, d.features, d.action, d.controlHz, d.name]).toEqual([spec.joints, spec.features, spec.action, spec.controlHz, 'policy v7']);
    expect(() => policyNodeConfig(path, { state: '/joint_states', command: { mode: 'forward_command', topic: '/cmd', trajectoryField: 'positions' } })).toThrow(/reads 13 task features \(tip x, tip y, red target x…\); give the features topic/);
    const bare = join(dir, 'bare.onnx');
    exportPolicyArtifact(policy, bare, { layout, action: spec.action, controlHz: spec.controlHz, policyVersion: 'v', runId: 'r' });
    const c = policyNodeConfig(path, { state: '/joint_states', features: '/task', command: { mode: 'forward_command', topic: '/cmd', trajectoryField: 'positions' } });
    expect(c.safety).toMatchObject({ watchdogMs: 60, watchdogAction: 'stop' });
  });

  it('waits for the first complete observation (joint state and features), or says what is missing', async () => {
    const config = policyNodeConfig(path, { state: '/joint_states', features: '/task', command: { mode: 'forward_command', topic: '/cmd', trajectoryField: 'positions' } });
    const g = new Graph();
    const raw = await Ros2Robot.connect(config, ENV, async () => g.module());
    await expect(firstObservation(raw, 100)).rejects.toThrow(/policy v7: no complete observation within 0\.1 s: policy v7: no joint state received yet on \/joint_states/);
    setTimeout(() => g.publish('/joint_states', 'sensor_msgs/msg/JointState', { header: { stamp: toRosTime(1), frame_id: '' }, name: ['shoulder', 'elbow'], position: [0.1, 0.2], velocity: [0, 0], effort: [] }), 50);
    setTimeout(() => g.publish('/task', 'std_msgs/msg/Float32MultiArray', { layout: { dim: [], data_offset: 0 }, data: new Array(13).fill(0) }), 150);
    const o = await firstObservation(raw, 2000);
    expect([Array.from(o.position), o.features?.length]).toEqual([[0.1, 0.2], 13]);
    await raw[Symbol.asyncDispose]();
  });

  it('streams the policy\'s actions at the artifact\'s rate and holds the robot when joint states stop', async () => {
    const config = policyNodeConfig(path, { state: '/joint_states', features: '/task', command: { mode: 'forward_command', topic: '/forward_command_controller/commands', trajectoryField: 'positions' } });
    const g = new Graph();
    // The robot side: joint states and features at 50 Hz until told to stop.
    let t = 100, publishing = true;
    const tick = setInterval(() => {
      if (!publishing) return;
      t += 0.02;
      g.publish('/joint_states', 'sensor_msgs/msg/JointState', { header: { stamp: toRosTime(t), frame_id: '' }, name: ['elbow', 'shoulder'], position: [0.3, -0.2], velocity: [0, 0], effort: [] });
      g.publish('/task', 'std_msgs/msg/Float32MultiArray', { layout: { dim: [], data_offset: 0 }, data: Array.from({ length: 13 }, (_, i) => i / 20) });
    }, 20);
    try {
      const raw = await Ros2Robot.connect(config, ENV, async () => g.module());
      await new Promise((r) => setTimeout(r, 100));
      const { robot, policy: runner } = await startPolicyNode(path, raw, config);
      const t0 = performance.now();
      const first = await runPolicyNode(robot, runner, { maxSteps: 25 });
      const seconds = (performance.now() - t0) / 1000;
      expect(first.steps).toBe(25);
      expect(first.heldStale).toBe(0);
      // at the artifact's 50 Hz: 25 steps take about half a second (timers run late on a busy machine, never early)
      expect(seconds).toBeGreaterThan(0.45);
      const cmds = g.published.filter((p) => p.topic === '/forward_command_controller/commands');
      expect(cmds).toHaveLength(25);
      // the commands are the policy's mean action on the observation, within the action range
      const obs = Float32Array.from([-0.2, 0.3, 0, 0, ...Array.from({ length: 13 }, (_, i) => i / 20)]);
      const mean = (await policy.act(obs, new Float32Array(2))).mean;
      const last = (cmds.at(-1)!.msg as { data: number[] }).data;
      last.forEach((v, i) => expect(v).toBeCloseTo(Math.min(1, Math.max(-1, mean[i]!)), 4));
      // joint states stop: after the watchdog's 60 ms every tick holds (zero effort for a normalized action)
      publishing = false;
      const second = await runPolicyNode(robot, runner, { maxSteps: 15 });
      expect(second.heldStale).toBeGreaterThanOrEqual(10);
      expect((g.published.at(-1)!.msg as { data: number[] }).data).toEqual([0, 0]);
      await robot[Symbol.asyncDispose]();
    } finally {
      clearInterval(tick);
    }
  });

  it('a policy over the last commands sent (wmrl train on the sim, by default): the node reports them itself from what it sends', async () => {
    const withHistory = withCommandHistorySpec(spec, 2);
    const hl = layoutOf(withHistory);
    const hp = new GaussianPolicy({ obsDim: hl.joints.length * 2 + hl.features.length, actDim: 2, hidden: [16], seed: 4 });
    const hpath = join(dir, 'history.onnx');
    exportPolicyArtifact(hp, hpath, { layout: hl, action: spec.action, controlHz: spec.controlHz, policyVersion: 'h', runId: 'r' });
    const config = policyNodeConfig(hpath, { state: '/joint_states', features: '/task', command: { mode: 'forward_command', topic: '/cmd', trajectoryField: 'positions' } });
    // The robot's topics carry its task features alone; the node adds the 2 × 2 commands.
    expect(config.commandHistory).toBe(2);
    expect(config.spec.features).toEqual(spec.features);
    expect(splitCommandHistory(spec)).toEqual({ spec, commandHistory: 0 });
    const g = new Graph();
    const publish = () => {
      g.publish('/joint_states', 'sensor_msgs/msg/JointState', { header: { stamp: toRosTime(200 + performance.now() / 1000), frame_id: '' }, name: ['shoulder', 'elbow'], position: [0.1, 0.2], velocity: [0, 0], effort: [] });
      g.publish('/task', 'std_msgs/msg/Float32MultiArray', { layout: { dim: [], data_offset: 0 }, data: Array.from({ length: 13 }, () => 0.1) });
    };
    const tick = setInterval(publish, 20);
    try {
      const raw = await Ros2Robot.connect(config, ENV, async () => g.module());
      await new Promise((r) => setTimeout(r, 100));
      const { robot, policy: runner } = await startPolicyNode(hpath, raw, config);
      expect(layoutOf(robot.spec)).toEqual(hl);
      const s = await runPolicyNode(robot, runner, { maxSteps: 3 });
      expect(s.steps).toBe(3);
      // The observation's last entries are the commands sent, newest first.
      const sent = g.published.filter((p) => p.topic === '/cmd').map((p) => (p.msg as { data: number[] }).data);
      const o = await robot.observe();
      expect(Array.from(o.features!.subarray(13, 15))).toEqual(sent.at(-1)!.map((v) => Math.fround(v)));
      await robot[Symbol.asyncDispose]();
    } finally {
      clearInterval(tick);
    }
  });
});
