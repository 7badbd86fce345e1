// The robot-side services node (hardware/robot-services.ts, `wmrl robot-services`) against the in-process rclnodejs
// stand-in (ROS 2 cannot be installed here): a robot whose controller manager switches as ros2_control's does and
// whose trajectory controller reaches a trajectory's end when it is active; the node's reset, latched e-stop and
// operator's clear through its Trigger services; its outcome from the declared rule; and the bridge's Ros2Robot
// reading the same robot YAML, reaching the robot only through the node.
import { afterEach, describe, expect, it } from 'vitest';
import { parseRobotConfig } from '../hardware/config.js';
import { RobotServices } from '../hardware/robot-services.js';
import { Ros2Robot } from '../hardware/robots/ros2.js';
import type { SwitchControllerRequest } from '../hardware/robots/ros-control.js';
import { Graph } from './helpers/rcl-graph.js';

const ENV = { ROS_DISTRO: 'jazzy', AMENT_PREFIX_PATH: '/opt/ros/jazzy' };
const YAML = `name: bench-arm
transport: ros2
joints: [j, k]
position_limits: [[-2, 2], [-2, 2]]
velocity_limits: [10, 10]
control_hz: 50
action: {kind: joint_position, low: [-2, -2], high: [2, 2]}
command: {mode: joint_trajectory, topic: /arm/joint_trajectory}
features: {topic: /task, names: [dx, dy]}
outcome_topic: /wmrl/outcome
services: {reset: /wmrl/reset, estop: /wmrl/estop}
home: {positions: [0.5, -0.5], topic: /arm/joint_trajectory, min_duration_s: 0.1, tolerance: 0.01, timeout_s: 1}
controller_manager: {command_controllers: [arm]}
outcome_rule:
  success: {entries: [dx, dy], goal: [0, 0], tolerance: 0.05}
  reward: negative_distance
  episode_s: 0.4
`;
const config = parseRobotConfig(YAML, 'bench-arm.yaml');

/** The robot: joint states and features at 100 Hz; its controller manager; its trajectory controller. */
function robotSide(g: Graph) {
  const s = { q: [1, 1], task: [0.3, 0.4], active: new Set(['arm']), switches: [] as SwitchControllerRequest[] };
  let t = 10;
  const tick = setInterval(() => {
    t += 0.01;
    g.publish('/joint_states', 'sensor_msgs/msg/JointState', { header: { stamp: { sec: Math.floor(t), nanosec: Math.round((t % 1) * 1e9) }, frame_id: '' }, name: ['k', 'j'], position: [s.q[1], s.q[0]], velocity: [0, 0], effort: [] });
    g.publish('/task', 'std_msgs/msg/Float32MultiArray', { layout: { dim: [], data_offset: 0 }, data: [...s.task] });
  }, 10);
  g.subs.set('/arm/joint_trajectory', [{
    type: 'trajectory_msgs/msg/JointTrajectory',
    cb: (m) => {
      const msg = m as { joint_names: string[]; points: Array<{ positions: number[]; time_from_start: { sec: number; nanosec: number } }> };
      const p = msg.points.at(-1)!;
      // an inactive controller ignores its topic
      if (s.active.has('arm')) setTimeout(() => msg.joint_names.forEach((n, i) => (s.q[n === 'j' ? 0 : 1] = p.positions[i]!)), p.time_from_start.sec * 1000 + p.time_from_start.nanosec / 1e6);
    },
  }]);
  g.services.set('/controller_manager/switch_controller', {
    type: 'controller_manager_msgs/srv/SwitchController',
    handler: (r) => {
      const req = r as SwitchControllerRequest;
      s.switches.push(req);
      const bad = [...req.deactivate_controllers.filter((c) => !s.active.has(c)).map((c) => `${c} is not active`), ...req.activate_controllers.filter((c) => s.active.has(c)).map((c) => `${c} is already active`)];
      if (req.strictness === 2 && bad.length) return { ok: false, message: bad.join('; ') };
      req.deactivate_controllers.forEach((c) => s.active.delete(c));
      req.activate_controllers.forEach((c) => s.active.add(c));
      return { ok: true, message: '' };
    },
  });
  return { s, stop: () => clearInterval(tick) };
}

const trigger = (g: Graph, name: string) => g.call(name, 'std_srvs/srv/Trigger') as Promise<{ success: boolean; message: string }>;
const outcomes = (g: Graph) => g.published.filter((p) => p.topic === '/wmrl/outcome').map((p) => (p.msg as { data: number[] }).data);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('wmrl robot-services', () => {
  const cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  async function start(g: Graph, cfg = config) {
    const side = robotSide(g);
    cleanup.push(side.stop);
    const node = await RobotServices.start(cfg, { env: ENV, importer: async () => g.module() });
    cleanup.push(() => node[Symbol.asyncDispose]());
    await sleep(40);
    return { side, node };
  }

  it('offers reset, e-stop and clear as Trigger services: the e-stop latches until the operator clears it', async () => {
    const g = new Graph();
    const { side, node } = await start(g);
    expect(node.offer).toEqual({ reset: '/wmrl/reset', estop: '/wmrl/estop', clear: '/wmrl/clear_estop', outcome: '/wmrl/outcome' });
    expect(await trigger(g, '/wmrl/reset')).toEqual({ success: true, message: 'home: 2 joints within 0.01' });
    expect(side.s.q).toEqual([0.5, -0.5]);
    const traj = g.published.filter((p) => p.topic === '/arm/joint_trajectory');
    expect(traj).toHaveLength(1);
    expect(traj[0]!.msg).toMatchObject({ header: { stamp: { sec: 0, nanosec: 0 } }, joint_names: ['j', 'k'], points: [{ positions: [0.5, -0.5], velocities: [0, 0] }] });

    expect(await trigger(g, '/wmrl/estop')).toEqual({ success: true, message: 'stopped: arm deactivated; the operator calls /wmrl/clear_estop to resume' });
    expect(side.s.active.size).toBe(0);
    expect(side.s.switches.at(-1)).toMatchObject({ activate_controllers: [], deactivate_controllers: ['arm'], strictness: 2 });
    // latched: a reset is refused, a second e-stop switches nothing
    expect(await trigger(g, '/wmrl/reset')).toEqual({ success: false, message: 'e-stopped: a reset does not clear the stop; the operator calls /wmrl/clear_estop (ros2 service call /wmrl/clear_estop std_srvs/srv/Trigger), then resets' });
    expect(await trigger(g, '/wmrl/estop')).toEqual({ success: true, message: 'already stopped' });
    expect(side.s.switches).toHaveLength(1);
    expect(node.isEstopped).toBe(true);
    // the operator clears: the controller is active again, and a reset goes home
    expect(await trigger(g, '/wmrl/clear_estop')).toEqual({ success: true, message: 'cleared: arm active again; reset to start an episode' });
    expect(side.s.switches.at(-1)).toMatchObject({ activate_controllers: ['arm'], deactivate_controllers: [], strictness: 2 });
    expect(await trigger(g, '/wmrl/clear_estop')).toEqual({ success: true, message: 'not e-stopped' });
    side.s.q.splice(0, 2, 1, 1);
    expect((await trigger(g, '/wmrl/reset')).success).toBe(true);

    // a controller that stays inactive: the reset answers why, naming the joints
    side.s.active.clear();
    side.s.q.splice(0, 2, 1, 1);
    const r = await trigger(g, '/wmrl/reset');
    expect(r.success).toBe(false);
    expect(r.message).toMatch(/bench-arm: reset: not home within 1 s \(tolerance 0\.01\): j at 1\.000, home 0\.500; k at 1\.000, home -0\.500 — is the controller on \/arm\/joint_trajectory active\?/);
    // a controller manager that refuses: the e-stop answers the refusal, and stays latched
    const e = await trigger(g, '/wmrl/estop');
    expect(e.success).toBe(false);
    expect(e.message).toMatch(/refused \(STRICT\) to deactivate \[arm\]: arm is not active; a BEST_EFFORT deactivation of \[arm\] then answered ok/);
    expect((await trigger(g, '/wmrl/reset')).message).toMatch(/^e-stopped/);
  });

  it('publishes [t, reward, success, terminated, truncated] from the rule, t counted from its last reset', async () => {
    const g = new Graph();
    const { side } = await start(g);
    await sleep(50);
    const far = outcomes(g).at(-1)!;
    // the features (0.3, 0.4) are 0.5 from the goal (0, 0): reward -0.5, no success
    expect(far[1]).toBeCloseTo(-0.5, 6);
    expect(far.slice(2)).toEqual([0, 0, 0]);
    side.s.task.splice(0, 2, 0.03, 0.04);
    await sleep(50);
    const near = outcomes(g).at(-1)!;
    expect(near[1]).toBeCloseTo(-0.05, 6);
    expect(near.slice(2)).toEqual([1, 1, 0]);
    // past episode_s (0.4 s) the episode is truncated; a reset starts the count again
    await sleep(400);
    expect(outcomes(g).at(-1)![4]).toBe(1);
    await trigger(g, '/wmrl/reset');
    await sleep(30);
    const fresh = outcomes(g).at(-1)!;
    expect(fresh[0]).toBeLessThan(0.2);
    expect(fresh[4]).toBe(0);
    // one outcome per features message (one per control tick), after the joint state of that tick
    const n = outcomes(g).length;
    await sleep(100);
    expect(outcomes(g).length - n).toBeGreaterThanOrEqual(5);
    expect(outcomes(g).length - n).toBeLessThanOrEqual(12);
  });

  it('the bridge reads the same robot YAML: its reset, e-stop and outcome reach the robot through the node', async () => {
    const g = new Graph();
    const { side, node } = await start(g);
    const robot = await Ros2Robot.connect(config, ENV, async () => g.module(), { timeoutMs: 2000 });
    cleanup.push(() => robot[Symbol.asyncDispose]());
    await sleep(40);
    const o = await robot.reset();
    expect(Array.from(o.position)).toEqual([0.5, -0.5]);
    side.s.task.splice(0, 2, 0, 0.01);
    await sleep(30);
    await robot.act(Float32Array.of(0.5, -0.5));
    const out = await robot.outcomeOfLastCommand();
    expect(out.reward).toBeCloseTo(-0.01, 6);
    expect([out.success, out.done]).toEqual([true, true]);
    await robot.estop();
    expect(node.isEstopped).toBe(true);
    expect(side.s.active.size).toBe(0);
    await expect(robot.reset()).rejects.toThrow(/bench-arm: reset failed: e-stopped: a reset does not clear the stop/);
  });

  it('refuses a robot YAML that gives it nothing to do, or asks for seeded resets', async () => {
    const bare = parseRobotConfig(YAML.replace(/^home:.*\n/m, '').replace(/^controller_manager:.*\n/m, '').replace(/^outcome_rule:\n( {2}.*\n)+/m, ''), 'bare.yaml');
    await expect(RobotServices.start(bare, { env: ENV, importer: async () => new Graph().module() })).rejects.toThrow(/bench-arm: wmrl robot-services offers reset from 'home', e-stop from 'controller_manager' and an outcome from 'outcome_rule'; the robot YAML declares none of them/);
    const seeded = parseRobotConfig(YAML.replace('services: {reset: /wmrl/reset, estop: /wmrl/estop}', 'services: {reset: /wmrl/reset, estop: /wmrl/estop, reset_seed_topic: /wmrl/seed}'), 's.yaml');
    await expect(RobotServices.start(seeded, { env: ENV, importer: async () => new Graph().module() })).rejects.toThrow(/cannot apply a seed; remove services\.reset_seed_topic/);
    await expect(RobotServices.start(config, { env: {} })).rejects.toThrow(/native ROS 2 is unavailable: ROS_DISTRO is not set/);
  });
});
