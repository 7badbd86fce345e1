// Ros2Robot's own logic (subscriptions, reset waiting for the new episode's joint state and
// features, command messages, Trigger services, errors) against an in-process stand-in for the
// rclnodejs API: ROS 2 and rclnodejs cannot be installed on these machines, so the real peer is out
// of reach here (tests/ros-e2e.test.ts covers the same robot contract over a real rosbridge socket).
import { describe, expect, it } from 'vitest';
import type { RclNode, Rclnodejs } from '../bridge/ros2native.js';
import { loadRobotConfig, type RobotConfig } from '../hardware/config.js';
import { Ros2Robot } from '../hardware/robots/ros2.js';
import { SafetyLayer } from '../hardware/safety.js';
import { trajectoryRefusal, type JointTrajectoryMsg } from '../bridge/ros/trajectory.js';

const ENV = { ROS_DISTRO: 'jazzy', AMENT_PREFIX_PATH: '/opt/ros/jazzy' };

/** A ROS graph in one process: topics deliver asynchronously, as DDS does; services answer once advertised. */
class Graph {
  readonly subs = new Map<string, Array<{ type: string; cb: (m: unknown) => void }>>();
  readonly published: Array<{ topic: string; type: string; msg: unknown }> = [];
  readonly services = new Map<string, { type: string; handler: (req: unknown) => unknown }>();
  destroyed = 0;
  shutdowns = 0;

  publish(topic: string, type: string, msg: unknown, delayMs = 0): void {
    this.published.push({ topic, type, msg });
    setTimeout(() => {
      for (const s of this.subs.get(topic) ?? []) {
        if (s.type !== type) throw new Error(`type mismatch on ${topic}: ${s.type} vs ${type}`);
        s.cb(structuredClone(msg));
      }
    }, delayMs);
  }

  node(): RclNode {
    return {
      createPublisher: (type, topic) => ({ publish: (msg) => this.publish(topic, type, msg) }),
      createSubscription: (type, topic, cb) => {
        const list = this.subs.get(topic) ?? [];
        list.push({ type, cb });
        this.subs.set(topic, list);
        return {};
      },
      createClient: (type, name) => ({
        waitForService: async () => this.services.get(name)?.type === type,
        sendRequest: (req, cb) => setTimeout(() => cb(this.services.get(name)!.handler(req)), 1),
      }),
      destroy: () => void this.destroyed++,
    };
  }

  module(): Rclnodejs {
    return { init: async () => {}, createNode: () => this.node(), spin: () => {}, shutdown: () => void this.shutdowns++ };
  }
}

/** The robot side: joint states at once, task features 60 ms later (a different topic), as after each reset. */
function robotSide(g: Graph, cfg: RobotConfig) {
  let episode = 0;
  let t = 100;
  const state = () => {
    const e = episode;
    g.publish(cfg.stateTopic, 'sensor_msgs/msg/JointState', { header: { stamp: { sec: t++, nanosec: 0 }, frame_id: '' }, name: ['elbow', 'shoulder'], position: Float64Array.of(-e, e), velocity: Float64Array.of(0, 0), effort: Float64Array.of() });
    g.publish(cfg.featuresTopic!, 'std_msgs/msg/Float32MultiArray', { layout: { dim: [], data_offset: 0 }, data: Float32Array.from({ length: cfg.spec.features!.length }, () => e) }, 60);
  };
  g.services.set(cfg.services.reset!, { type: 'std_srvs/srv/Trigger', handler: () => (episode++, setTimeout(state, 2), { success: true, message: 'reset' }) });
  return { state, episode: () => episode };
}

describe('Ros2Robot through the rclnodejs API', () => {
  const cfg = loadRobotConfig('launch/robots/sim-reach.yaml');

  it('reset waits for the new episode on both topics; act publishes the configured command; e-stop calls its service', async () => {
    const g = new Graph();
    const side = robotSide(g, cfg);
    let estops = 0;
    g.services.set(cfg.services.estop!, { type: 'std_srvs/srv/Trigger', handler: () => (estops++, { success: true, message: 'stopped' }) });
    const robot = await Ros2Robot.connect(cfg, ENV, async () => ({ default: g.module() }));
    await expect(robot.observe()).rejects.toThrow(/no joint state received yet on \/joint_states/);
    side.state();
    await new Promise((r) => setTimeout(r, 100));
    for (let i = 1; i <= 3; i++) {
      const o = await robot.reset();
      expect(side.episode()).toBe(i);
      // Joint order follows the robot's spec (shoulder, elbow), not the message's.
      expect(Array.from(o.position)).toEqual([i, -i]);
      expect(Array.from(o.features ?? [])).toEqual(Array(cfg.spec.features!.length).fill(i));
    }
    // a seeded reset publishes the seed on services.reset_seed_topic before calling the reset service
    await robot.reset({ seed: 77 });
    const seedAt = g.published.findIndex((p) => p.topic === cfg.services.resetSeed);
    expect(g.published[seedAt]).toMatchObject({ type: 'std_msgs/msg/UInt32', msg: { data: 77 } });
    expect(side.episode()).toBe(4);
    await expect(robot.reset({ seed: -3 })).rejects.toThrow(/reset seed must be an integer/);
    g.published.length = 0;
    const safe = new SafetyLayer(robot, { ...cfg.safety, watchdogMs: 10_000 });
    const sent = await safe.act(Float32Array.of(0.25, -0.5));
    const cmd = g.published.filter((p) => p.topic === cfg.command.topic);
    expect(cmd).toHaveLength(1);
    expect(cmd[0]!.type).toBe('std_msgs/msg/Float64MultiArray');
    expect(cmd[0]!.msg).toEqual({ layout: { dim: [], data_offset: 0 }, data: Array.from(sent) });
    await robot.estop();
    expect(estops).toBe(1);
    await safe[Symbol.asyncDispose]();
    expect(g.destroyed).toBe(1);
    expect(g.shutdowns).toBe(1);
  });

  it('joint_trajectory mode sends what a stock joint_trajectory_controller accepts under any clock skew', async () => {
    const g = new Graph();
    const side = robotSide(g, cfg);
    const traj: RobotConfig = { ...cfg, command: { mode: 'joint_trajectory', topic: '/arm_controller/joint_trajectory', trajectoryField: 'velocities' } };
    const robot = await Ros2Robot.connect(traj, ENV, async () => g.module());
    await expect(robot.act(Float32Array.of(0.5, 0.125))).rejects.toThrow(/needs the robot's current joint positions, and none has arrived yet/);
    side.state();
    await new Promise((r) => setTimeout(r, 100));
    const q = (await robot.observe()).position;
    await robot.act(Float32Array.of(0.5, 0.125));
    const p = g.published.filter((x) => x.topic === '/arm_controller/joint_trajectory').at(-1)!;
    expect(p.type).toBe('trajectory_msgs/msg/JointTrajectory');
    const msg = p.msg as JointTrajectoryMsg;
    expect(msg.joint_names).toEqual(['shoulder', 'elbow']);
    // the position one 50 Hz period on; no final velocity (Jazzy's default refuses one)
    expect(Array.from(msg.points![0]!.positions!)).toEqual([q[0]! + 0.5 / 50, q[1]! + 0.125 / 50]);
    expect(msg.points![0]!.velocities).toEqual([]);
    expect(msg.points![0]!.time_from_start).toEqual({ sec: 0, nanosec: 20_000_000 });
    for (const skew of [-0.5, 0, 0.5]) expect(trajectoryRefusal(msg, { joints: ['elbow', 'shoulder'], now: Date.now() / 1000 + skew })).toBeNull();
    await robot[Symbol.asyncDispose]();
  });

  it('a missing, failing or mistyped service gives an error that says which', async () => {
    const g = new Graph();
    const robot = await Ros2Robot.connect(cfg, ENV, async () => g.module());
    await expect(robot.reset()).rejects.toThrow(/sim-reach: reset service \/wmrl\/reset is not available/);
    g.services.set(cfg.services.reset!, { type: 'std_srvs/srv/Trigger', handler: () => ({ success: false, message: 'robot is e-stopped' }) });
    await expect(robot.reset()).rejects.toThrow(/sim-reach: reset failed: robot is e-stopped/);
    g.services.set(cfg.services.estop!, { type: 'std_srvs/srv/SetBool', handler: () => ({ success: true, message: '' }) });
    await expect(robot.estop()).rejects.toThrow(/e-stop service \/wmrl\/estop is not available/); // wrong type
    await robot[Symbol.asyncDispose]();
  });
});
