// The hardware stand-in: a sim robot with a hardware profile, stepped in real time at its control
// rate and served over rosbridge v2 exactly as a ros2_control robot behind rosbridge_server would be.
// Run it as its own process: `npm start -- sim-robot --task reach --profile gap --port 9090`.
import { encodePng } from '../sim/index.js';
import { fromRosTime, toRosTime } from '../bridge/ros/msgs.js';
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
} as const;

export interface StandInOptions extends SimRobotOptions {
  host?: string;
  port?: number;
  /** Camera frames per second (rendering is the costly part); 0 = off. */
  cameraHz?: number;
  /** Like a ros2_control command timeout: with no command this recent, the arm gets zero effort. */
  commandTimeoutMs?: number;
  /** A trajectory command stamped longer ago than this is refused as stale. */
  maxCommandAgeMs?: number;
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
  counters: { steps: number; commands: number; refusedStale: number; refusedStopped: number; resets: number };
  stop(): Promise<void>;
}

export async function startStandIn(o: StandInOptions): Promise<StandIn> {
  // Frames are rendered at the camera rate below, not on every physics step.
  const robot = await SimRobot.create({ ...o, image: undefined });
  const spec = robot.spec;
  const n = spec.action.names.length;
  const server = new RosbridgeServer({ host: o.host, port: o.port ?? 9090 });
  const port = await server.listen();
  const counters = { steps: 0, commands: 0, refusedStale: 0, refusedStopped: 0, resets: 0 };
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

  const accept = (values: ArrayLike<number>) => {
    if (robot.isStopped) {
      counters.refusedStopped++;
      return;
    }
    // The robot's own controller clips to its actuator range; echo exactly what it will apply.
    command = Float32Array.from({ length: n }, (_, i) => Math.min(spec.action.high[i]!, Math.max(spec.action.low[i]!, Number(values[i] ?? 0) || 0)));
    commandAt = performance.now();
    counters.commands++;
    pubApplied({ layout: { dim: [], data_offset: 0 }, data: Array.from(command) });
  };
  server.subscribe(STANDIN.forwardCommand, 'std_msgs/msg/Float64MultiArray', (m) => accept(m.data as number[]));
  server.subscribe(STANDIN.trajectory, 'trajectory_msgs/msg/JointTrajectory', (m) => {
    const stamp = fromRosTime((m.header as { stamp: { sec: number; nanosec: number } }).stamp);
    if (stamp > 0 && (now() - stamp) * 1000 > (o.maxCommandAgeMs ?? 200)) {
      counters.refusedStale++;
      return;
    }
    const p = (m.points as Array<{ effort: number[]; velocities: number[] }>)[0];
    if (p) accept(p.effort.length ? p.effort : p.velocities);
  });

  const publishInstruction = () => pubInstr({ data: robot.lastObs.instruction });
  publishInstruction();
  // A seed published here is applied by the next reset call (and only that one).
  let seed: number | undefined;
  server.subscribe(STANDIN.resetSeed, 'std_msgs/msg/UInt32', (m) => (seed = Number(m.data)));
  server.advertiseService(STANDIN.reset, 'std_srvs/srv/Trigger', async () => {
    const s = seed;
    seed = undefined;
    await robot.reset(s === undefined ? undefined : { seed: s });
    command = new Float32Array(n);
    commandAt = -Infinity;
    counters.resets++;
    publishInstruction();
    return { success: true, message: `reset${s === undefined ? '' : ` (seed ${s})`}: ${robot.lastObs.instruction}` };
  });
  server.advertiseService(STANDIN.estop, 'std_srvs/srv/Trigger', async () => {
    await robot.estop();
    command = new Float32Array(n);
    return { success: true, message: 'stopped; reset to resume' };
  });
  server.advertiseAction(STANDIN.runExpert, 'wmrl_msgs/action/RunExpert', async (goal, ctx) => {
    const steps = Number(goal.max_steps ?? robot.env.horizon);
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
    let a: Float32Array = performance.now() - commandAt > (o.commandTimeoutMs ?? 100) ? new Float32Array(n) : command;
    if (expert) {
      a = expert.policy.act(robot.lastObs);
      expert.remaining--;
    }
    await robot.act(a);
    counters.steps++;
    const ro = await robot.observe();
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
  timer = setTimeout(() => void step(), period);

  return {
    server,
    robot,
    port,
    counters,
    async stop() {
      running = false;
      clearTimeout(timer);
      await server.close();
      await robot[Symbol.asyncDispose]();
    },
  };
}
