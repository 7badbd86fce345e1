// Reset and e-stop as a ros2_control robot has them (hardware/robots/ros-control.ts): the robot YAML's home pose
// reached with one trajectory a stock joint_trajectory_controller accepts (its topic or its FollowJointTrajectory
// action), and the e-stop through the controller manager's SwitchController (STRICT). Over rosbridge against the
// stand-in, whose controllers switch as ros2_control's do; over rclnodejs against the in-process stand-in graph.
import { Ros, Service } from 'roslib';
import { afterEach, describe, expect, it } from 'vitest';
import { trajectoryRefusal } from '../bridge/ros/trajectory.js';
import { ConfigError } from '../common/config.js';
import { loadRobotConfig, parseRobotConfig, type RobotConfig } from '../hardware/config.js';
import { RosRobot } from '../hardware/robots/ros.js';
import { Ros2Robot } from '../hardware/robots/ros2.js';
import { homeDuration, homeTrajectory, jointsNotHome, STRICT, type SwitchControllerRequest } from '../hardware/robots/ros-control.js';
import { SafetyLayer } from '../hardware/safety.js';
import { standInConfig, startStandIn, STANDIN, STANDIN_CONTROLLERS, type StandIn } from '../hardware/standin.js';
import { UnseededResetError } from '../hardware/types.js';
import { GOAL_STATUS, Graph } from './helpers/rcl-graph.js';

const ENV = { ROS_DISTRO: 'jazzy', AMENT_PREFIX_PATH: '/opt/ros/jazzy' };
const BASE = 'name: a\njoints: [j, k]\nposition_limits: [[-1, 1], [-2, 2]]\nvelocity_limits: [1, 1]\ncontrol_hz: 50\naction: {kind: joint_velocity, low: [-1, -1], high: [1, 1]}\ncommand: {mode: forward_command, topic: /c}\n';

describe('robot YAML: home, controller_manager, outcome_rule', () => {
  it('the ros2_control example resets home through its trajectory controller and e-stops through the controller manager', () => {
    const arm = loadRobotConfig('launch/robots/ros2_control_arm.yaml');
    expect(arm.services).toEqual({});
    expect(arm.home).toMatchObject({ positions: [0, -1.57, 1.57, -1.57, -1.57, 0], topic: '/joint_trajectory_controller/joint_trajectory' });
    expect(arm.controllerManager).toEqual({ name: '/controller_manager', commandControllers: ['forward_velocity_controller'], homeController: 'joint_trajectory_controller' });
    const c = parseRobotConfig(`${BASE}home: {positions: [0, 1], action: /jtc/follow_joint_trajectory}\ncontroller_manager: {command_controllers: [jtc]}\n`, 'r.yaml');
    expect(c.home).toEqual({ positions: [0, 1], action: '/jtc/follow_joint_trajectory', minDurationS: 3, tolerance: 0.01, timeoutS: 13 });
    expect(c.controllerManager).toEqual({ name: '/controller_manager', commandControllers: ['jtc'] });
  });

  it.each([
    ['a position per joint', 'home: {positions: [0], topic: /t}\n', /r\.yaml:8: key 'home\.positions': needs 2 positions \(one per joint\), got 1/],
    ['within the limits', 'home:\n  positions: [0, 3]\n  topic: /t\n', /r\.yaml:9: key 'home\.positions\[1\]': k: 3 is outside its position limits \[-2, 2\]/],
    ['topic or action', 'home: {positions: [0, 0]}\n', /key 'home': needs exactly one of 'topic' .* and 'action'/],
    ['not both', 'home: {positions: [0, 0], topic: /t, action: /a}\n', /key 'home': needs exactly one of/],
    ['time to settle', 'home: {positions: [0, 0], topic: /t, min_duration_s: 5, timeout_s: 5}\n', /key 'home\.timeout_s': 5 s leaves no time to settle after a move of at least 5 s/],
    ['no typo', 'home: {positions: [0, 0], topic: /t, tolerence: 0.1}\n', /key 'home\.tolerence': unknown key/],
    ['a home controller needs home', 'controller_manager: {command_controllers: [f], home_controller: jtc}\n', /key 'controller_manager\.home_controller': needs 'home'/],
    ['a home controller is another controller', 'home: {positions: [0, 0], topic: /t}\ncontroller_manager: {command_controllers: [f], home_controller: f}\n', /f is also a command controller/],
    ['a controller to stop', 'controller_manager: {command_controllers: []}\n', /key 'controller_manager\.command_controllers': must name at least one controller/],
    ['a node name', 'controller_manager: {name: controller_manager, command_controllers: [f]}\n', /key 'controller_manager\.name': must be the controller manager's node name/],
    ['an outcome topic', 'outcome_rule: {episode_s: 10}\n', /key 'outcome_rule': needs 'outcome_topic'/],
    ['an end', 'outcome_topic: /o\noutcome_rule: {reward: sparse}\n', /key 'outcome_rule': needs 'success' or 'episode_s'/],
    ['known entries', 'outcome_topic: /o\noutcome_rule: {success: {entries: [j, z], goal: [0, 0], tolerance: 0.1}}\n', /key 'outcome_rule\.success\.entries': 'z' is neither a feature name/],
    ['a goal per entry', 'outcome_topic: /o\noutcome_rule: {success: {entries: [j], goal: [0, 0], tolerance: 0.1}}\n', /key 'outcome_rule\.success\.goal': needs 1 values/],
    ['a distance to measure', 'outcome_topic: /o\noutcome_rule: {reward: negative_distance, episode_s: 5}\n', /key 'outcome_rule\.reward': negative_distance needs 'success'/],
  ])('%s', (_n, extra, msg) => {
    expect(() => parseRobotConfig(BASE + extra, 'r.yaml')).toThrow(ConfigError);
    expect(() => parseRobotConfig(BASE + extra, 'r.yaml')).toThrow(msg);
  });
});

describe('the home trajectory', () => {
  const c = parseRobotConfig(`${BASE.replace('velocity_limits: [1, 1]', 'velocity_limits: [1, 0.5]')}home: {positions: [0.5, -1], topic: /t, min_duration_s: 2, tolerance: 0.05}\n`, 'r.yaml');

  it('names every joint, ends at rest at home, and is accepted by a stock controller under any clock skew', () => {
    const msg = homeTrajectory(c, 2.5);
    expect(msg.joint_names).toEqual(['j', 'k']);
    expect(msg.points).toEqual([{ positions: [0.5, -1], velocities: [0, 0], accelerations: [], effort: [], time_from_start: { sec: 2, nanosec: 500_000_000 } }]);
    for (const skew of [-0.5, 0, 0.5]) expect(trajectoryRefusal(msg, { joints: ['k', 'j'], now: Date.now() / 1000 + skew })).toBeNull();
  });

  it('takes min_duration_s, or longer where a joint would pass its velocity limit', () => {
    expect(homeDuration(c, [0.4, -0.9])).toBe(2);
    // k moves 2 rad at 0.5 rad/s: a cubic peaks at 1.5 times the mean speed, so 6 s
    expect(homeDuration(c, [0.5, 1])).toBeCloseTo(6, 9);
  });

  it('names the joints not home; a joint without limits counts modulo a turn', () => {
    expect(jointsNotHome(c, [0.52, -0.97])).toEqual([]);
    expect(jointsNotHome(c, [0.7, -1])).toEqual(['j at 0.700, home 0.500']);
    const turn = parseRobotConfig(BASE.replace('[[-1, 1], [-2, 2]]', '[[-.inf, .inf], [-2, 2]]') + 'home: {positions: [0.1, 0], topic: /t}\n', 'r.yaml');
    expect(jointsNotHome(turn, [0.1 + 2 * Math.PI, 0])).toEqual([]);
    expect(jointsNotHome(turn, [0.1 + Math.PI, 0])).toEqual(['j at 3.242, home 0.100']);
  });
});

/** A rosbridge client calling the controller manager, as `ros2 control switch_controllers` does. */
async function operator(port: number): Promise<{ ros: Ros; switch(activate: string[], deactivate: string[]): Promise<{ ok: boolean; message: string }> }> {
  const ros = new Ros({});
  await ros.connect(`ws://127.0.0.1:${port}`);
  const svc = new Service<SwitchControllerRequest, { ok: boolean; message: string }>({ ros, name: STANDIN.switchController, serviceType: 'controller_manager_msgs/srv/SwitchController' });
  return {
    ros,
    switch: (activate, deactivate) => new Promise((resolve, reject) => svc.callService({ activate_controllers: activate, deactivate_controllers: deactivate, strictness: STRICT, activate_asap: false, timeout: { sec: 0, nanosec: 0 } }, resolve, reject)),
  };
}

describe('over rosbridge, against the stand-in', () => {
  let standIn: StandIn | undefined;
  afterEach(async () => {
    await standIn?.stop();
    standIn = undefined;
  });
  const HOME = [0.5, 1.0];
  const near = (q: ArrayLike<number>, tol: number) => Array.from(q).every((v, i) => Math.abs(v - HOME[i]!) <= tol);

  it('a forward-command robot: reset switches to the trajectory controller, goes home, switches back; e-stop switches it off', async () => {
    standIn = await startStandIn({ task: 'reach', profile: 'nominal', port: 0 });
    const op = await operator(standIn.port);
    // The robot runs its forward controller; the trajectory controller claims the same joints, so it is inactive.
    expect(await op.switch([], [STANDIN_CONTROLLERS.trajectory])).toMatchObject({ ok: true });
    const base = standInConfig(standIn.robot.spec, `ws://127.0.0.1:${standIn.port}`);
    const cfg: RobotConfig = {
      ...base,
      services: {},
      home: { positions: HOME, topic: STANDIN.trajectory, minDurationS: 1, tolerance: 0.03, timeoutS: 8 },
      controllerManager: { name: '/controller_manager', commandControllers: [STANDIN_CONTROLLERS.forward], homeController: STANDIN_CONTROLLERS.trajectory },
      safety: { ...base.safety, watchdogMs: 200 },
    };
    const robot = new SafetyLayer(await RosRobot.connect(cfg), cfg.safety);
    try {
      for (let i = 0; i < 15; i++) {
        await robot.act(Float32Array.of(0.8, -0.8));
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(near((await robot.observe()).position, 0.03)).toBe(false);
      const o = await robot.reset();
      expect(near(o.position, 0.03), `reset ended at ${Array.from(o.position)}`).toBe(true);
      // back on the command controller, which takes commands again
      expect(standIn.activeControllers()).toEqual([STANDIN_CONTROLLERS.forward]);
      const commands = standIn.counters.commands;
      await robot.act(Float32Array.of(0.2, 0.2));
      await new Promise((r) => setTimeout(r, 100));
      expect(standIn.counters.commands).toBeGreaterThan(commands);

      await robot.estop();
      expect(standIn.activeControllers()).toEqual([]);
      // what still reaches the robot is refused by its controller manager, not only by the latched safety layer
      const refused = standIn.counters.refusedInactive;
      await robot.inner.act(Float32Array.of(0.5, 0.5));
      await new Promise((r) => setTimeout(r, 100));
      expect(standIn.counters.refusedInactive).toBe(refused + 1);
      // clearing the bridge's latch does not switch anything on: the reset says what the operator must do
      robot.clearEstop();
      await expect(robot.reset()).rejects.toThrow(/reset: switching to joint_trajectory_controller \(after an e-stop the operator reactivates forward_command_controller first\): the controller manager refused \(STRICT\).*forward_command_controller is not active/);
      expect(await op.switch([STANDIN_CONTROLLERS.forward], [])).toMatchObject({ ok: true });
      expect(near((await robot.reset()).position, 0.03)).toBe(true);

      // an e-stop during the move home ends it, and nothing is switched back on
      for (let i = 0; i < 15; i++) {
        await robot.act(Float32Array.of(0.8, -0.8));
        await new Promise((r) => setTimeout(r, 20));
      }
      const resetting = robot.reset().catch((e: Error) => e);
      await new Promise((r) => setTimeout(r, 200));
      await robot.estop();
      expect(await resetting).toMatchObject({ message: expect.stringMatching(/the home move was interrupted by an e-stop/) });
      expect(standIn.activeControllers()).toEqual([]);
    } finally {
      await robot[Symbol.asyncDispose]();
      op.ros.close();
    }
  }, 40_000);

  it('a trajectory-controller robot: reset through FollowJointTrajectory; after the e-stop its goals are refused', async () => {
    standIn = await startStandIn({ task: 'reach', profile: 'nominal', port: 0 });
    const op = await operator(standIn.port);
    expect(await op.switch([], [STANDIN_CONTROLLERS.forward])).toMatchObject({ ok: true });
    const base = standInConfig(standIn.robot.spec, `ws://127.0.0.1:${standIn.port}`);
    const cfg: RobotConfig = {
      ...base,
      command: { mode: 'joint_trajectory', topic: STANDIN.trajectory, trajectoryField: 'positions' },
      services: {},
      home: { positions: HOME, action: STANDIN.followTrajectory, minDurationS: 1, tolerance: 0.03, timeoutS: 8 },
      controllerManager: { name: '/controller_manager', commandControllers: [STANDIN_CONTROLLERS.trajectory] },
    };
    const robot = await RosRobot.connect(cfg);
    try {
      await expect(robot.reset({ seed: 3 })).rejects.toThrow(UnseededResetError);
      const o = await robot.reset();
      expect(near(o.position, 0.03), `reset ended at ${Array.from(o.position)}`).toBe(true);
      await robot.estop();
      expect(standIn.activeControllers()).toEqual([]);
      await expect(robot.reset()).rejects.toThrow(/follow_joint_trajectory: .*goal rejected: joint_trajectory_controller is not active/);
      // a second e-stop: STRICT refuses to deactivate what is inactive; the best-effort retry, and the refusal, are reported
      await expect(robot.estop()).rejects.toThrow(/e-stop: the controller manager refused \(STRICT\) to deactivate \[joint_trajectory_controller\]: joint_trajectory_controller is not active; a BEST_EFFORT deactivation of \[joint_trajectory_controller\] then answered ok/);
    } finally {
      await robot[Symbol.asyncDispose]();
      op.ros.close();
    }
  }, 30_000);
});

describe('over rclnodejs, against the stand-in graph', () => {
  const base = loadRobotConfig('launch/robots/sim-reach.yaml');
  const HOME = [0, 1];

  /** Joint states at 100 Hz from positions the test moves; a controller manager and a trajectory action. */
  function robotSide(g: Graph) {
    const q = [0.4, 0.2];
    let t = 100;
    const tick = setInterval(() => {
      t += 0.01;
      g.publish('/joint_states', 'sensor_msgs/msg/JointState', { header: { stamp: { sec: Math.floor(t), nanosec: Math.round((t % 1) * 1e9) }, frame_id: '' }, name: ['shoulder', 'elbow'], position: [...q], velocity: [0, 0], effort: [] });
      g.publish('/wmrl/task_state', 'std_msgs/msg/Float32MultiArray', { layout: { dim: [], data_offset: 0 }, data: new Array(13).fill(0) });
    }, 10);
    const switches: SwitchControllerRequest[] = [];
    let answer = (r: SwitchControllerRequest) => ({ ok: true, message: `switched ${r.deactivate_controllers.join(',')}` });
    g.services.set('/controller_manager/switch_controller', { type: 'controller_manager_msgs/srv/SwitchController', handler: (r) => (switches.push(r as SwitchControllerRequest), answer(r as SwitchControllerRequest)) });
    return { q, switches, stop: () => clearInterval(tick), answer: (f: typeof answer) => (answer = f) };
  }

  it('the FollowJointTrajectory result and the joints decide the reset; the e-stop falls back to BEST_EFFORT only to report', async () => {
    const g = new Graph();
    const side = robotSide(g);
    const goals: unknown[] = [];
    let code = 0;
    g.actions.set('/arm/follow_joint_trajectory', {
      type: 'control_msgs/action/FollowJointTrajectory',
      handler: (goal) => {
        goals.push(goal);
        if (code === 0) side.q.splice(0, 2, ...HOME);
        return Promise.resolve({ status: code === 0 ? GOAL_STATUS.SUCCEEDED : GOAL_STATUS.ABORTED, result: { error_code: code, error_string: code ? 'shoulder left its path' : '' } });
      },
    });
    const cfg: RobotConfig = { ...base, services: {}, home: { positions: HOME, action: '/arm/follow_joint_trajectory', minDurationS: 0.2, tolerance: 0.01, timeoutS: 0.6 }, controllerManager: { name: '/controller_manager', commandControllers: ['arm'] } };
    const robot = await Ros2Robot.connect(cfg, ENV, async () => g.module(), { timeoutMs: 500 });
    try {
      await new Promise((r) => setTimeout(r, 50));
      const o = await robot.reset();
      expect(Array.from(o.position)).toEqual(HOME);
      expect(goals).toHaveLength(1);
      expect((goals[0] as { trajectory: { joint_names: string[] } }).trajectory.joint_names).toEqual(['shoulder', 'elbow']);
      code = -4;
      side.q.splice(0, 2, 0.3, 0.3);
      await expect(robot.reset()).rejects.toThrow(/sim-reach: reset: \/arm\/follow_joint_trajectory answered PATH_TOLERANCE_VIOLATED \(-4\): shoulder left its path/);
      // a goal that succeeds but leaves a joint away from home: the timeout names it
      g.actions.get('/arm/follow_joint_trajectory')!.handler = () => Promise.resolve({ status: GOAL_STATUS.SUCCEEDED, result: { error_code: 0 } });
      await expect(robot.reset()).rejects.toThrow(/sim-reach: reset: not home within 0\.6 s \(tolerance 0\.01\): shoulder at 0\.300, home 0\.000; elbow at 0\.300, home 1\.000/);

      await robot.estop();
      expect(side.switches.at(-1)).toEqual({ activate_controllers: [], deactivate_controllers: ['arm'], strictness: 2, activate_asap: false, timeout: { sec: 0, nanosec: 0 } });
      side.answer((r) => (r.strictness === STRICT ? { ok: false, message: "Controller with name 'arm' can not be deactivated since it is not active." } : { ok: true, message: '' }));
      await expect(robot.estop()).rejects.toThrow(/e-stop: the controller manager refused \(STRICT\) to deactivate \[arm\]: Controller with name 'arm' can not be deactivated since it is not active\.; a BEST_EFFORT deactivation of \[arm\] then answered ok/);
      expect(side.switches.at(-1)!.strictness).toBe(1);
    } finally {
      side.stop();
      await robot[Symbol.asyncDispose]();
    }
  });

  it('the robot YAML chooses: its Trigger services where it names them, the home pose and controller manager otherwise', async () => {
    const g = new Graph();
    const side = robotSide(g);
    let triggered = 0;
    g.services.set('/wmrl/reset', { type: 'std_srvs/srv/Trigger', handler: () => (triggered++, side.q.splice(0, 2, ...HOME), { success: true, message: '' }) });
    const both: RobotConfig = { ...base, home: { positions: HOME, topic: '/jtc/joint_trajectory', minDurationS: 0.2, tolerance: 0.01, timeoutS: 1 }, controllerManager: { name: '/cm', commandControllers: ['arm'] } };
    const robot = await Ros2Robot.connect(both, ENV, async () => g.module(), { timeoutMs: 500 });
    try {
      await new Promise((r) => setTimeout(r, 50));
      await robot.reset();
      expect(triggered).toBe(1);
      expect(g.published.some((p) => p.topic === '/jtc/joint_trajectory')).toBe(false);
      await expect(robot.estop()).rejects.toThrow(/e-stop service \/wmrl\/estop is not available/);
      expect(side.switches).toEqual([]);
    } finally {
      side.stop();
      await robot[Symbol.asyncDispose]();
    }
    const bare = await Ros2Robot.connect({ ...base, services: {} }, ENV, async () => g.module(), { timeoutMs: 200 });
    await expect(bare.reset()).rejects.toThrow(/sim-reach: no reset service configured/);
    await bare[Symbol.asyncDispose]();
  });
});
