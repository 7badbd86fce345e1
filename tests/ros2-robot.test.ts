// Ros2Robot's own logic (subscriptions, reset waiting for the new episode's joint state and
// features, command messages, Trigger services, errors) against an in-process stand-in for the
// rclnodejs API: ROS 2 and rclnodejs cannot be installed on these machines, so the real peer is out
// of reach here (tests/ros-e2e.test.ts covers the same robot contract over a real rosbridge socket).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cameraRgb } from '../common/image.js';
import { loadRobotConfig, type RobotConfig } from '../hardware/config.js';
import { Ros2Robot } from '../hardware/robots/ros2.js';
import { SafetyLayer } from '../hardware/safety.js';
import { Graph } from './helpers/rcl-graph.js';
import { trajectoryRefusal, type JointTrajectoryMsg } from '../bridge/ros/trajectory.js';

const ENV = { ROS_DISTRO: 'jazzy', AMENT_PREFIX_PATH: '/opt/ros/jazzy' };

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

  it('reads the camera (a 640x480 JPEG, a raw bgr8 Image), the outcome, with sensor streams best-effort, and times out', async () => {
    const g = new Graph();
    const side = robotSide(g, cfg);
    const jpeg = new Uint8Array(readFileSync(new URL('./fixtures/camera-640x480.jpg', import.meta.url)));
    const robot = await Ros2Robot.connect(cfg, ENV, async () => g.module(), { timeoutMs: 300 });
    // QoS per topic: state, features and camera best-effort; outcome and instruction reliable.
    const qosOf = (t: string) => g.subs.get(t)![0]!.qos;
    expect([qosOf(cfg.stateTopic), qosOf(cfg.featuresTopic!), qosOf(cfg.cameraTopic!)]).toEqual(['qos_profile_sensor_data', 'qos_profile_sensor_data', 'qos_profile_sensor_data']);
    expect([qosOf(cfg.outcomeTopic!), qosOf(cfg.instructionTopic!)]).toEqual(['qos_profile_default', 'qos_profile_default']);
    side.state();
    g.publish(cfg.cameraTopic!, 'sensor_msgs/msg/CompressedImage', { header: { stamp: { sec: 1, nanosec: 0 }, frame_id: 'cam' }, format: 'rgb8; jpeg compressed bgr8', data: jpeg });
    await new Promise((r) => setTimeout(r, 80));
    const o = await robot.observe();
    expect([o.image!.width, o.image!.height, o.image!.encoding]).toEqual([640, 480, 'jpeg']);
    // what a policy trained at the declared 64x64 reads of it: the red square lands right of centre
    const rgb = cameraRgb(o.image!, { width: 64, height: 64 }, 'cam');
    const at = (x: number, y: number) => Array.from(rgb.subarray((y * 64 + x) * 3, (y * 64 + x) * 3 + 3));
    expect(at(48, 18)[0]).toBeGreaterThan(200);
    expect(at(48, 18)[1]).toBeLessThan(60);
    // an outcome after a command; none within the timeout is an error naming the topic
    await robot.act(Float32Array.of(0, 0));
    g.publish(cfg.outcomeTopic!, 'std_msgs/msg/Float64MultiArray', { layout: { dim: [], data_offset: 0 }, data: [3, 0.25, 1, 1, 0] }, 5);
    expect(await robot.outcomeOfLastCommand()).toEqual({ reward: 0.25, success: true, done: true });
    await robot.act(Float32Array.of(0, 0));
    await expect(robot.outcomeOfLastCommand()).rejects.toThrow(/sim-reach: timed out after 300 ms: an outcome on \/wmrl\/step after the last command/);
    // a service that never answers
    g.services.set(cfg.services.estop!, { type: 'std_srvs/srv/Trigger', handler: () => undefined });
    await expect(robot.estop()).rejects.toThrow(/e-stop service \/wmrl\/estop did not answer in 300 ms/);
    await robot[Symbol.asyncDispose]();

    // a camera declared rgb8 reads sensor_msgs/Image: bgr8 with row padding becomes rgb8
    const raw: RobotConfig = { ...cfg, spec: { ...cfg.spec, camera: { width: 2, height: 1, encoding: 'rgb8' } } };
    const g2 = new Graph();
    robotSide(g2, raw).state();
    const r2 = await Ros2Robot.connect(raw, ENV, async () => g2.module());
    expect(g2.subs.get(cfg.cameraTopic!)![0]!.type).toBe('sensor_msgs/msg/Image');
    g2.publish(cfg.cameraTopic!, 'sensor_msgs/msg/Image', { height: 1, width: 2, encoding: 'bgr8', is_bigendian: 0, step: 8, data: Uint8Array.of(1, 2, 3, 4, 5, 6, 0, 0) });
    await new Promise((r) => setTimeout(r, 80));
    expect(Array.from((await r2.observe()).image!.data)).toEqual([3, 2, 1, 6, 5, 4]);
    g2.publish(cfg.cameraTopic!, 'sensor_msgs/msg/Image', { height: 1, width: 2, encoding: '16UC1', is_bigendian: 0, step: 4, data: Uint8Array.of(1, 2, 3, 4) });
    await new Promise((r) => setTimeout(r, 80));
    await expect(r2.observe()).rejects.toThrow(/sim-reach camera \/camera\/image\/compressed: Image encoding '16UC1'/);
    await r2[Symbol.asyncDispose]();
  });
});
