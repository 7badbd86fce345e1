// The command messages against the rules a stock ros2_controllers controller applies (bridge/ros/trajectory.ts):
// each rule refuses what it should, and what the adapters send passes under ±0.5 s of clock skew — where a
// trajectory stamped with the sender's clock, as the adapters used to send, is dropped.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { toRosTime } from '../bridge/ros/msgs.js';
import { trajectoryRefusal, type JointTrajectoryMsg } from '../bridge/ros/trajectory.js';
import { parseRobotConfig } from '../hardware/config.js';
import { commandMessage } from '../hardware/robots/ros-messages.js';

const arm = readFileSync('launch/robots/ros2_control_arm.yaml', 'utf8');
const joints = ['shoulder_pan_joint', 'shoulder_lift_joint', 'elbow_joint', 'wrist_1_joint', 'wrist_2_joint', 'wrist_3_joint'];
const withCommand = (command: string) => parseRobotConfig(arm.replace(/command:\n( {2}.*\n)+/, `command:\n${command}`), 'arm.yaml');
const q = [0.1, -1.2, 1.5, -0.3, 1.57, 0];
const action = Float32Array.of(0.5, -0.25, 0.1, 0, 1, -1);

describe('joint_trajectory_controller conformance', () => {
  it('velocity actions: zero stamp, positions one period on, no final velocity; accepted under ±0.5 s skew', () => {
    const c = withCommand('  mode: joint_trajectory\n  topic: /joint_trajectory_controller/joint_trajectory\n  trajectory_field: velocities\n');
    const msg = commandMessage(c, action, q) as JointTrajectoryMsg;
    expect(msg.header!.stamp).toEqual({ sec: 0, nanosec: 0 });
    const p = msg.points![0]!;
    Array.from(p.positions!).forEach((v, i) => expect(v).toBeCloseTo(q[i]! + action[i]! / 50, 12));
    expect(p.time_from_start).toEqual({ sec: 0, nanosec: 20_000_000 });
    const now = Date.now() / 1000;
    for (const skew of [-0.5, -0.02, 0, 0.02, 0.5]) expect(trajectoryRefusal(msg, { joints, now: now + skew }), `skew ${skew}`).toBeNull();
    // What the adapters sent before: stamped with the sender's clock, ending one period later — late by any skew above it.
    const stamped: JointTrajectoryMsg = { ...msg, header: { stamp: toRosTime(now) }, points: [{ ...p, positions: [], velocities: Array.from(action) }] };
    expect(trajectoryRefusal(stamped, { joints, now: now + 0.5 })).toMatch(/positions has 0 values for 6 joints/);
    expect(trajectoryRefusal({ ...stamped, points: [{ ...p }] }, { joints, now: now + 0.5 })).toMatch(/ends in the past/);
  });

  it('position actions are the positions; a velocity action cannot be sent before a joint state', () => {
    const c = withCommand('  mode: joint_trajectory\n  topic: /jtc/joint_trajectory\n  trajectory_field: positions\n');
    const msg = commandMessage(c, action) as JointTrajectoryMsg;
    expect(Array.from(msg.points![0]!.positions!)).toEqual(Array.from(action));
    expect(trajectoryRefusal(msg, { joints, now: Date.now() / 1000 })).toBeNull();
    const v = withCommand('  mode: joint_trajectory\n  topic: /jtc/joint_trajectory\n  trajectory_field: velocities\n');
    expect(() => commandMessage(v, action)).toThrow(/ur-arm: a velocity command as a joint trajectory needs the robot's current joint positions/);
  });

  it('each rule of the controller refuses what it should', () => {
    const ok: JointTrajectoryMsg = { joint_names: ['a', 'b'], points: [{ positions: [0, 1], time_from_start: { sec: 0, nanosec: 1e7 } }] };
    const view = { joints: ['a', 'b'], now: 1000 };
    expect(trajectoryRefusal(ok, view)).toBeNull();
    const cases: Array<[JointTrajectoryMsg, RegExp]> = [
      [{ ...ok, points: [] }, /empty trajectory/],
      [{ ...ok, joint_names: ['a', 'a'] }, /duplicate joint names/],
      [{ ...ok, joint_names: ['a', 'c'] }, /joint c is not one of the controller's joints/],
      [{ joint_names: ['a'], points: [{ positions: [0], time_from_start: { sec: 1, nanosec: 0 } }] }, /names 1 of the controller's 2 joints/],
      [{ ...ok, points: [{ positions: [0], time_from_start: { sec: 1, nanosec: 0 } }] }, /positions has 1 values for 2 joints/],
      [{ ...ok, points: [{ positions: [0, NaN], time_from_start: { sec: 1, nanosec: 0 } }] }, /positions\[1\] is not finite/],
      [{ ...ok, points: [{ positions: [0, 1], velocities: [1], time_from_start: { sec: 1, nanosec: 0 } }] }, /velocities has 1 values/],
      [{ ...ok, points: [{ positions: [0, 1], time_from_start: { sec: 1, nanosec: 0 } }, { positions: [0, 1], time_from_start: { sec: 1, nanosec: 0 } }] }, /point 1: time_from_start is not strictly increasing/],
      [{ ...ok, points: [{ positions: [0, 1], velocities: [0, 0.5], time_from_start: { sec: 1, nanosec: 0 } }] }, /last point's velocity is not zero/],
      [{ ...ok, header: { stamp: { sec: 998, nanosec: 0 } } }, /ends in the past/],
    ];
    for (const [msg, why] of cases) expect(trajectoryRefusal(msg, view), JSON.stringify(msg)).toMatch(why);
    expect(trajectoryRefusal({ ...ok, points: [{ positions: [0, 1], velocities: [0, 0.5], time_from_start: { sec: 1, nanosec: 0 } }] }, { ...view, allowNonzeroVelocityAtEnd: true })).toBeNull();
    expect(trajectoryRefusal({ ...ok, header: { stamp: { sec: 999, nanosec: 995_000_000 } } }, view)).toBeNull();
  });

  it('a robot file that streams efforts or non-joint actions as trajectories is refused at load, naming the key', () => {
    expect(() => withCommand('  mode: joint_trajectory\n  topic: /jtc/joint_trajectory\n  trajectory_field: effort\n')).toThrow(/trajectory_field.*effort cannot be streamed to a joint_trajectory_controller.*forward_command/);
    const renamed = arm.replace('kind: joint_velocity', 'kind: joint_velocity\n  names: [a, b, c, d, e, f]').replace(/command:\n( {2}.*\n)+/, 'command:\n  mode: joint_trajectory\n  topic: /jtc/joint_trajectory\n');
    expect(() => parseRobotConfig(renamed, 'arm.yaml')).toThrow(/action.*names.*a is not one of the joints/);
  });
});
