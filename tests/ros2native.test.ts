// Native ROS 2 (rclnodejs) is optional: it is imported only where ROS 2 is sourced, and otherwise
// the error says so plainly. (ROS 2 itself cannot be installed on these machines.)
import { describe, expect, it } from 'vitest';
import { loadRclnodejs, ros2Status, Ros2UnavailableError } from '../bridge/ros2native.js';
import { parseRobotConfig } from '../hardware/config.js';
import { connectRobot } from '../hardware/robots/index.js';

describe('native ROS 2 loader', () => {
  it('without a sourced ROS 2 it refuses before importing rclnodejs', async () => {
    let imported = false;
    const importer = async () => {
      imported = true;
      return {};
    };
    await expect(loadRclnodejs({}, importer)).rejects.toThrow(/native ROS 2 is unavailable: ROS_DISTRO is not set.*transport: rosbridge/);
    await expect(loadRclnodejs({ ROS_DISTRO: 'jazzy' }, importer)).rejects.toThrow(/AMENT_PREFIX_PATH is empty/);
    expect(imported).toBe(false);
  });

  it('with ROS 2 sourced but rclnodejs missing or broken it says which', async () => {
    const env = { ROS_DISTRO: 'jazzy', AMENT_PREFIX_PATH: '/opt/ros/jazzy' };
    expect(ros2Status(env)).toEqual({ available: true, distro: 'jazzy' });
    await expect(loadRclnodejs(env, () => Promise.reject(new Error("Cannot find package 'rclnodejs'")))).rejects.toThrow(/ROS 2 jazzy is sourced but rclnodejs could not be loaded \(Cannot find package 'rclnodejs'\)/);
    await expect(loadRclnodejs(env, async () => ({ default: { hello: 1 } }))).rejects.toBeInstanceOf(Ros2UnavailableError);
  });

  it('a robot YAML with transport: ros2 fails clearly on this machine', async () => {
    const yaml = 'name: a\ntransport: ros2\njoints: [j]\nposition_limits: [[-1, 1]]\nvelocity_limits: [1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1], high: [1]}\ncommand: {mode: forward_command, topic: /c}\n';
    const saved = process.env.ROS_DISTRO;
    delete process.env.ROS_DISTRO;
    try {
      await expect(connectRobot(parseRobotConfig(yaml, 'a.yaml'))).rejects.toThrow(Ros2UnavailableError);
    } finally {
      if (saved !== undefined) process.env.ROS_DISTRO = saved;
    }
  });
});
