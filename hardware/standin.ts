// The hardware stand-in: a sim robot with a hardware profile, stepped in real time at its control
// rate and served over rosbridge v2 exactly as a ros2_control robot behind rosbridge_server would be.
// Run it as its own process: `npm start -- sim-robot --task reach --profile gap --port 9090`.
// Like a real robot it trusts no client: whatever arrives on its command topics passes its own
// length, finiteness, range, rate, per-step change, velocity and position limits, and its e-stop
// is cleared only by the operator on the stand-in itself (clearEstop(), the sim-robot terminal). Its controllers
// switch as ros2_control's do (a controller manager's SwitchController), and its trajectory controller tracks
// a long trajectory (a move home) rather than taking it as one command.
import { encodePng, MjEnv } from '../sim/index.js';
import { fromRosTime, toRosTime } from '../bridge/ros/msgs.js';
import { trajectoryRefusal, type JointTrajectoryMsg } from '../bridge/ros/trajectory.js';
import { RosbridgeServer } from '../bridge/rosbridge/server.js';
import { SimRobot, type SimRobotOptions } from './robots/sim.js';
import type { RobotConfig } from './config.js';
import { DEFAULT_SAFETY } from './safety.js';
import type { RobotDeclaration } from '../common/robot.js';

/** Topic, service and action names the stand-in serves (the example robot YAML uses the same). */
export const STANDIN = {
  jointStates: '/joint_states',
  forwardCommand: '/forward_command_controller/commands',
  trajectory: '/joint_trajectory_controller/joint_trajectory',
  appliedCommand: '/wmrl/applied_command',
  taskState: '/wmrl/task_state',
  step: '/wmrl/step',
  instruction: '/wmrl/instruction',
  camera: '/camera/image/compressed',
  reset: '/wmrl/reset',
  resetSeed: '/wmrl/reset_seed',
  estop: '/wmrl/estop',
  runExpert: '/wmrl/run_expert',
  followTrajectory: '/joint_trajectory_controller/follow_joint_trajectory',
  switchController: '/controller_manager/switch_controller',
} as const;

/** The stand-in's controllers (as a controller manager names them): both active at start. */
export const STANDIN_CONTROLLERS = { forward: 'forward_command_controller', trajectory: 'joint_trajectory_controller' } as const;

/** The trajectory controller's PD gains on a joint's position error (rad) and velocity, in normalized effort. */
const TRACK_KP = 2.5;
const TRACK_KD = 0.5;

export interface StandInOptions extends SimRobotOptions {
  host?: string;
  port?: number;
  /** Camera frames per second (rendering is the costly part); 0 = off. */
  cameraHz?: number;
  /** Like a ros2_control command timeout: with no command this recent, the arm gets zero effort. */
  commandTimeoutMs?: number;
  /** A trajectory command whose start is further ahead than this is refused (a controller would queue it). */
  maxCommandAgeMs?: number;
  /** Largest change of any actuator command per control step (default: DEFAULT_SAFETY.maxDelta). */
  maxDelta?: number;
  /** Commands accepted in a burst above the control rate; beyond it, at most one per control period on average. */
  commandBurst?: number;
  /** Shared secret for rosbridge's auth op; required to listen on anything but loopback. */
  secret?: string;
  /** Host names clients reach the stand-in by, besides loopback, IP addresses and `host` (see RosbridgeServerOptions). */
  allowedHosts?: readonly string[];
  /** Browser origins that may connect, e.g. https://app.foxglove.dev; other web pages are refused. */
  allowedOrigins?: readonly string[];
}

/** The robot config of a stand-in serving `spec` at `url`: the topics and services above, the safety defaults. */
export function standInConfig(spec: RobotDeclaration, url: string): RobotConfig {
  return {
    spec,
    transport: 'rosbridge',
    url,
    command: { mode: 'forward_command', topic: STANDIN.forwardCommand, trajectoryField: 'positions' },
    stateTopic: STANDIN.jointStates,
    featuresTopic: STANDIN.taskState,
    instructionTopic: STANDIN.instruction,
    services: { reset: STANDIN.reset, estop: STANDIN.estop, resetSeed: STANDIN.resetSeed },
    safety: { ...DEFAULT_SAFETY },
  };
}

export interface StandIn {
  server: RosbridgeServer;
  robot: SimRobot;
  port: number;
  counters: StandInCounters;
  /** The e-stop latch: set by /wmrl/estop, cleared only by clearEstop(). */
  readonly isEstopped: boolean;
  /** The operator's explicit action on the stand-in itself: releases the latch; /wmrl/reset then starts a new episode. */
  clearEstop(): void;
  /** The controllers (STANDIN_CONTROLLERS) now active, as `ros2 control list_controllers` would show them. */
  activeControllers(): string[];
  stop(): Promise<void>;
}

export interface StandInCounters {
  steps: number;
  commands: number;
  /** A trajectory that ends in the past, or starts more than maxCommandAgeMs ahead. */
  refusedStale: number;
  refusedStopped: number;
  /** Wrong length or a non-finite value. */
  refusedInvalid: number;
  /** Above the command rate. */
  refusedRate: number;
  /** Control steps where a velocity or position limit zeroed an actuator's effort. */
  limited: number;
  resets: number;
  /** Commands and trajectory goals for a controller that is not active. */
  refusedInactive: number;
}

/**
 * Per actuator, the joint (index into spec.joints) it drives with a plain torque or force (no bias, a symmetric
 * control range, so command 0 is no effort) and the sign of its gear; null for servos and anything else, whose
 * own dynamics bound them.
 */
function effortActuators(robot: SimRobot): Array<{ joint: number; sign: number } | null> {
  const env = robot.env;
  if (!(env instanceof MjEnv)) return robot.spec.action.names.map(() => null);
  const m = env.model, raw = m.raw;
  const trntype = raw.actuator_trntype as Int32Array, biastype = raw.actuator_biastype as Int32Array, trnid = raw.actuator_trnid as Int32Array;
  const gear = raw.actuator_gear as Float64Array, range = raw.actuator_ctrlrange as Float64Array;
  return env.spec.actuatorNames.map((name) => {
    const id = m.id('mjOBJ_ACTUATOR', name);
    if (trntype[id] !== 0 || biastype[id] !== 0 || range[2 * id] !== -range[2 * id + 1]!) return null;
    const joint = robot.spec.joints.indexOf(m.name('mjOBJ_JOINT', trnid[2 * id]!));
    return joint < 0 || !gear[6 * id] ? null : { joint, sign: Math.sign(gear[6 * id]!) };
  });
}

export async function startStandIn(o: StandInOptions): Promise<StandIn> {
  // Built first: bad options (secret, allowed hosts or origins) fail before the sim is loaded.
  // Everything is served before the socket opens: no client can claim a name first.
  const server = new RosbridgeServer({ host: o.host, port: o.port ?? 9090, secret: o.secret, allowedHosts: o.allowedHosts, allowedOrigins: o.allowedOrigins });
  // Frames are rendered at the camera rate below, not on every physics step.
  const robot = await SimRobot.create({ ...o, image: undefined });
  const spec = robot.spec;
  const n = spec.action.names.length;
  const counters: StandInCounters = { steps: 0, commands: 0, refusedStale: 0, refusedStopped: 0, refusedInvalid: 0, refusedRate: 0, limited: 0, resets: 0, refusedInactive: 0 };
  const now = () => Date.now() / 1000;

  const pubJoints = server.advertise(STANDIN.jointStates, 'sensor_msgs/msg/JointState');
  const pubApplied = server.advertise(STANDIN.appliedCommand, 'std_msgs/msg/Float64MultiArray');
  const pubTask = server.advertise(STANDIN.taskState, 'std_msgs/msg/Float32MultiArray');
  const pubStep = server.advertise(STANDIN.step, 'std_msgs/msg/Float64MultiArray');
  const pubInstr = server.advertise(STANDIN.instruction, 'std_msgs/msg/String', { latch: true });
  const pubCam = server.advertise(STANDIN.camera, 'sensor_msgs/msg/CompressedImage');

  let command = new Float32Array(n);
  let commandAt = -Infinity;
  let expert: { remaining: number; policy: ReturnType<typeof robot.env.expert> } | null = null;
  let estopped = false;
  const maxDelta = o.maxDelta ?? DEFAULT_SAFETY.maxDelta;
  /** What the actuators got on the last control step: the change cap is measured from it. */
  let lastApplied: Float32Array = new Float32Array(n);
  let lastObs = await robot.observe();
  const efforts = effortActuators(robot);
  // Token bucket: refilled at the control rate, so a 1 kHz stream moves the robot no faster than a 50 Hz one.
  const burst = o.commandBurst ?? 5;
  let tokens = burst;
  let tokensAt = performance.now();
  const clamp = (v: number, lo: number, hi: number) => (v < lo ? lo : v > hi ? hi : v);
  const capChange = (v: number, i: number) => clamp(v, lastApplied[i]! - maxDelta, lastApplied[i]! + maxDelta);

  const accept = (values: unknown) => {
    if (estopped || robot.isStopped) {
      counters.refusedStopped++;
      return;
    }
    // Validated before a token is taken: garbage from one client must not use up another's command rate.
    const v = values as ArrayLike<unknown> | undefined;
    if (!v || v.length !== n || !Array.from(v).every((x) => typeof x === 'number' && Number.isFinite(x))) {
      counters.refusedInvalid++;
      return;
    }
    const t = performance.now();
    tokens = Math.min(burst, tokens + ((t - tokensAt) / 1000) * spec.controlHz);
    tokensAt = t;
    if (tokens < 1) {
      counters.refusedRate++;
      return;
    }
    tokens--;
    endTracking('pre-empted by a newer command');
    // The robot's own controller clips to its actuator range and caps the change per step; echo what it will apply.
    command = Float32Array.from({ length: n }, (_, i) => capChange(clamp(v[i] as number, spec.action.low[i]!, spec.action.high[i]!), i));
    commandAt = performance.now();
    counters.commands++;
    pubApplied({ layout: { dim: [], data_offset: 0 }, data: Array.from(command) });
  };
  /** The last word before the actuators, every step: change cap, then no effort past a velocity or position limit. */
  const limitStep = (a: Float32Array): Float32Array => {
    const out = Float32Array.from(a, (v, i) => (v === 0 ? 0 : capChange(clamp(v, spec.action.low[i]!, spec.action.high[i]!), i)));
    let limited = false;
    efforts.forEach((e, i) => {
      if (!e || out[i] === 0) return;
      const dir = Math.sign(out[i]!) * e.sign;
      const q = lastObs.position[e.joint]!, qd = lastObs.velocity[e.joint]!;
      const [lo, hi] = spec.positionLimits[e.joint] ?? [-Infinity, Infinity];
      const vmax = spec.velocityLimits[e.joint] ?? Infinity;
      if ((Math.abs(qd) >= vmax && Math.sign(qd) === dir) || (q >= hi && dir > 0) || (q <= lo && dir < 0)) {
        out[i] = 0;
        limited = true;
      }
    });
    if (limited) counters.limited++;
    return out;
  };
  // ros2_control's controller manager: a controller that is not active takes no command.
  const active = new Map<string, boolean>(Object.values(STANDIN_CONTROLLERS).map((c) => [c, true]));
  server.subscribe(STANDIN.forwardCommand, 'std_msgs/msg/Float64MultiArray', (m) => {
    if (!active.get(STANDIN_CONTROLLERS.forward)) return void counters.refusedInactive++;
    accept(m.data);
  });

  /**
   * A long trajectory (one whose end is more than two control periods ahead, positions only) is tracked as a
   * joint_trajectory_controller does: from where the joints are to its last point, a rest-to-rest cubic in time,
   * each effort actuator driven by a PD law on its joint; the last point is then held until another command.
   */
  let tracking: { from: number[]; to: number[]; t0: number; ms: number; done: (why: string | null) => void } | null = null;
  function endTracking(why: string): void {
    const t = tracking;
    tracking = null;
    t?.done(why);
  }
  const trackingAction = (): Float32Array | null => {
    const tr = tracking;
    if (!tr) return null;
    const s = Math.min(1, (performance.now() - tr.t0) / tr.ms), blend = s * s * (3 - 2 * s);
    if (s >= 1) tr.done(null);
    return Float32Array.from(efforts, (e, i) => {
      const ref = tr.from[i]! + (tr.to[i]! - tr.from[i]!) * blend;
      return clamp(TRACK_KP * (ref - lastObs.position[e!.joint]!) - TRACK_KD * lastObs.velocity[e!.joint]!, spec.action.low[i]!, spec.action.high[i]!);
    });
  };
  /** A trajectory as the controller takes it: why it is refused, or a promise of the end of its execution (null: reached). */
  const trajectory = (msg: JointTrajectoryMsg): { refused: string } | { done: Promise<string | null> } => {
    if (!active.get(STANDIN_CONTROLLERS.trajectory)) {
      counters.refusedInactive++;
      return { refused: `${STANDIN_CONTROLLERS.trajectory} is not active` };
    }
    const t = now(), refusal = trajectoryRefusal(msg, { joints: spec.action.names, now: t });
    const start = fromRosTime(msg.header?.stamp ?? { sec: 0, nanosec: 0 });
    if (refusal?.includes('ends in the past') || (start !== 0 && (start - t) * 1000 > (o.maxCommandAgeMs ?? 200))) {
      counters.refusedStale++;
      return { refused: refusal ?? 'the trajectory starts too far ahead' };
    }
    if (refusal) {
      counters.refusedInvalid++;
      return { refused: refusal };
    }
    if (estopped || robot.isStopped) {
      counters.refusedStopped++;
      return { refused: 'e-stopped' };
    }
    const names = msg.joint_names!, p = msg.points!.at(-1)!;
    const inOrder = (v: ArrayLike<number>) => spec.action.names.map((a) => v[names.indexOf(a)]!);
    const end = fromRosTime(p.time_from_start ?? { sec: 0, nanosec: 0 });
    const still = !p.effort?.length && !Array.from(p.velocities ?? []).some((v) => v !== 0);
    if (still && end > 2 / spec.controlHz) {
      if (efforts.some((e) => !e)) return { refused: "the stand-in's trajectory controller tracks positions on effort actuators only" };
      endTracking('pre-empted by a newer trajectory');
      return {
        done: new Promise((resolve) => {
          tracking = { from: efforts.map((e) => lastObs.position[e!.joint]!), to: inOrder(p.positions!), t0: performance.now(), ms: end * 1000, done: resolve };
          commandAt = performance.now();
        }),
      };
    }
    const first = msg.points![0]!;
    if (first.effort?.length) accept(inOrder(first.effort));
    else if (first.velocities?.length) accept(inOrder(first.velocities));
    else {
      const dt = Math.max(fromRosTime(first.time_from_start ?? { sec: 0, nanosec: 0 }), 1 / spec.controlHz);
      const q = inOrder(first.positions!);
      accept(spec.action.names.map((a, i) => (q[i]! - (lastObs.position[spec.joints.indexOf(a)] ?? q[i]!)) / dt));
    }
    return { done: Promise.resolve(null) };
  };
  // Taken as a stock joint_trajectory_controller takes it (bridge/ros/trajectory.ts), except that a start more than
  // maxCommandAgeMs ahead is refused rather than queued. A short one is one command: the point's effort, else its
  // velocities, else the rate that reaches its positions in its time_from_start.
  server.subscribe(STANDIN.trajectory, 'trajectory_msgs/msg/JointTrajectory', (m) => void trajectory(m as JointTrajectoryMsg));
  server.advertiseAction(STANDIN.followTrajectory, 'control_msgs/action/FollowJointTrajectory', async (goal, ctx) => {
    const r = trajectory((goal.trajectory ?? {}) as JointTrajectoryMsg);
    if ('refused' in r) throw new Error(`goal rejected: ${r.refused}`);
    ctx.signal.addEventListener('abort', () => endTracking('cancelled'));
    const why = await r.done;
    if (why !== null) throw new Error(`goal aborted: ${why}`);
    return { error_code: 0, error_string: '' };
  });
  server.advertiseService(STANDIN.switchController, 'controller_manager_msgs/srv/SwitchController', (req) => {
    const on = (req.activate_controllers ?? []) as string[], off = (req.deactivate_controllers ?? []) as string[];
    // A strictness of 0 is taken as BEST_EFFORT, as the controller manager does.
    const strict = req.strictness === 2;
    const problems = [
      ...off.filter((c) => active.get(c) !== true).map((c) => (active.has(c) ? `${c} is not active` : `no controller ${c}`)),
      ...on.filter((c) => active.get(c) !== false).map((c) => (active.has(c) ? `${c} is already active` : `no controller ${c}`)),
    ];
    if (strict && problems.length) return { ok: false, message: problems.join('; ') };
    for (const c of off.filter((x) => active.get(x) === true)) {
      active.set(c, false);
      // Deactivated, a velocity-style controller zeroes its commands; the trajectory controller drops its goal.
      if (c === STANDIN_CONTROLLERS.forward) {
        command = new Float32Array(n);
        commandAt = -Infinity;
      } else endTracking(`${c} deactivated`);
    }
    for (const c of on.filter((x) => active.get(x) === false)) active.set(c, true);
    return { ok: true, message: problems.length ? `done, ignoring: ${problems.join('; ')}` : 'switched' };
  });

  const publishInstruction = () => pubInstr({ data: robot.lastObs.instruction });
  publishInstruction();
  // A seed published here is applied by the next reset call (and only that one).
  let seed: number | undefined;
  server.subscribe(STANDIN.resetSeed, 'std_msgs/msg/UInt32', (m) => (seed = Number(m.data)));
  server.advertiseService(STANDIN.reset, 'std_srvs/srv/Trigger', async () => {
    if (estopped) return { success: false, message: 'e-stopped: reset does not clear the stop; the operator clears it on the stand-in (type "clear" in the sim-robot terminal)' };
    const s = seed;
    seed = undefined;
    endTracking('the robot was reset');
    await robot.reset(s === undefined ? undefined : { seed: s });
    command = new Float32Array(n);
    commandAt = -Infinity;
    lastApplied = new Float32Array(n);
    lastObs = await robot.observe();
    counters.resets++;
    publishInstruction();
    return { success: true, message: `reset${s === undefined ? '' : ` (seed ${s})`}: ${robot.lastObs.instruction}` };
  });
  server.advertiseService(STANDIN.estop, 'std_srvs/srv/Trigger', async () => {
    estopped = true;
    expert = null;
    endTracking('e-stopped');
    await robot.estop();
    command = new Float32Array(n);
    return { success: true, message: 'stopped; the operator clears the stop on the stand-in, then reset to resume' };
  });
  server.advertiseAction(STANDIN.runExpert, 'wmrl_msgs/action/RunExpert', async (goal, ctx) => {
    if (estopped || robot.isStopped) throw new Error('e-stopped: the expert does not run on a stopped robot');
    const asked = Number(goal.max_steps ?? robot.env.horizon);
    if (!Number.isFinite(asked)) throw new Error(`max_steps ${String(goal.max_steps)} is not a finite number of steps (1 to ${robot.env.horizon})`);
    // An episode is at most the horizon: a larger goal would keep the expert driving indefinitely.
    const steps = clamp(Math.floor(asked), 1, robot.env.horizon);
    expert = { remaining: steps, policy: robot.env.expert() };
    const startSteps = counters.steps;
    while (expert && expert.remaining > 0 && !ctx.signal.aborted) {
      await new Promise((r) => setTimeout(r, 1000 / spec.controlHz));
      ctx.feedback({ steps: counters.steps - startSteps });
    }
    expert = null;
    return { success: robot.lastStep?.info.success ?? false, steps: counters.steps - startSteps };
  });

  // Real-time loop without drift: each tick is scheduled from the start time, not the last tick.
  const period = 1000 / spec.controlHz;
  const t0 = performance.now();
  let tick = 0;
  let lastCam = -Infinity;
  let timer: NodeJS.Timeout | undefined;
  let running = true;
  const step = async () => {
    if (!running) return;
    let a: Float32Array = trackingAction() ?? (performance.now() - commandAt > (o.commandTimeoutMs ?? 100) ? new Float32Array(n) : command);
    if (expert) {
      a = expert.policy.act(robot.lastObs);
      expert.remaining--;
    }
    a = limitStep(a);
    lastApplied = a;
    await robot.act(a);
    counters.steps++;
    const ro = await robot.observe();
    lastObs = ro;
    const stamp = toRosTime(now());
    pubJoints({ header: { stamp, frame_id: '' }, name: spec.joints, position: Array.from(ro.position), velocity: Array.from(ro.velocity), effort: Array.from(a) });
    pubTask({ layout: { dim: [], data_offset: 0 }, data: Array.from(ro.features ?? []) });
    const r = robot.lastStep!;
    pubStep({ layout: { dim: [], data_offset: 0 }, data: [r.info.t, r.reward, r.info.success ? 1 : 0, r.terminated ? 1 : 0, r.truncated ? 1 : 0] });
    const camHz = o.cameraHz ?? 0;
    if (camHz > 0 && performance.now() - lastCam >= 1000 / camHz) {
      lastCam = performance.now();
      const side = o.image ?? 64;
      pubCam({ header: { stamp, frame_id: 'camera' }, format: 'png', data: encodePng(robot.env.render(side), side, side) });
    }
    tick++;
    timer = setTimeout(() => void step().catch((e) => server.emit('error', e)), Math.max(0, t0 + tick * period - performance.now()));
  };
  const port = await server.listen().catch(async (e: unknown) => {
    await robot[Symbol.asyncDispose]();
    throw e;
  });
  timer = setTimeout(() => void step(), period);

  return {
    server,
    robot,
    port,
    counters,
    get isEstopped() {
      return estopped;
    },
    clearEstop() {
      estopped = false;
    },
    activeControllers() {
      return [...active].filter(([, on]) => on).map(([c]) => c);
    },
    async stop() {
      running = false;
      clearTimeout(timer);
      await server.close();
      await robot[Symbol.asyncDispose]();
    },
  };
}
