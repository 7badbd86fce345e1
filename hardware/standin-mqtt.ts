// The hardware stand-in served over MQTT: the sim robot stepped in real time at its control rate, as a robot's
// controller runs whatever its clients last sent, exposed on wmrl/robots/{id}/… through a broker
// (hardware/robots/mqtt-server.ts), so a robot YAML with transport mqtt reaches it as it would a fleet robot.
// Run it as its own process: `npm start -- sim-robot --transport mqtt --broker mqtt://host:1883 --robot-id arm-7`.
// Whatever arrives passes the robot-side safety layer, rate cap and freshness checks there; its e-stop is cleared
// only by the operator on the stand-in itself (clearEstop(), the sim-robot terminal).
import type { MqttClient } from 'mqtt';
import type { RobotDeclaration, RobotObservation } from '../common/robot.js';
import { serveRobotOverMqtt, type RobotServer } from './robots/mqtt-server.js';
import { SimRobot, type SimRobotOptions } from './robots/sim.js';
import type { ResetOptions, Robot } from './types.js';
import type { StepResult } from '../sim/index.js';

/**
 * A sim robot stepped by its own clock at its control rate, not by its callers: act() sets the command the next
 * steps apply, and a command older than `commandTimeoutMs` gives way to no effort (a ros2_control command timeout).
 */
export class RealTimeSim implements Robot {
  private command: Float32Array;
  private commandAt = -Infinity;
  private timer?: NodeJS.Timeout;
  private tick = 0;
  private readonly t0 = performance.now();
  /** Control steps taken. */
  steps = 0;

  /** Hears of each control step taken (the sim's step result: reward, success, termination). */
  onStep?: (r: StepResult) => void;

  constructor(
    readonly sim: SimRobot,
    private readonly commandTimeoutMs: number,
    private readonly onError: (e: Error) => void,
  ) {
    this.command = new Float32Array(sim.spec.action.names.length);
    this.schedule();
  }

  get spec(): RobotDeclaration {
    return this.sim.spec;
  }

  private schedule(): void {
    // Scheduled from the start time, not the last tick: no drift.
    const period = 1000 / this.spec.controlHz;
    this.timer = setTimeout(() => {
      this.tick++;
      this.step().catch((e: unknown) => this.onError(e instanceof Error ? e : new Error(String(e))));
      this.schedule();
    }, Math.max(0, this.t0 + (this.tick + 1) * period - performance.now()));
  }

  private async step(): Promise<void> {
    const fresh = performance.now() - this.commandAt <= this.commandTimeoutMs;
    await this.sim.act(fresh ? this.command : new Float32Array(this.command.length));
    this.steps++;
    this.onStep?.(this.sim.lastStep!);
  }

  observe(): Promise<RobotObservation> {
    return this.sim.observe();
  }

  async act(action: Float32Array): Promise<Float32Array> {
    this.command = Float32Array.from(action);
    this.commandAt = performance.now();
    return this.command;
  }

  reset(options?: ResetOptions): Promise<RobotObservation> {
    this.commandAt = -Infinity;
    return this.sim.reset(options);
  }

  estop(): Promise<void> {
    this.commandAt = -Infinity;
    return this.sim.estop();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    clearTimeout(this.timer);
    await this.sim[Symbol.asyncDispose]();
  }
}

export interface MqttStandInOptions extends SimRobotOptions {
  /** A connected client, logged in as the robot (bridge/mqtt/auth.ts: robot:{id} on the service's broker). */
  client: MqttClient;
  /** The robot's id in wmrl/robots/{id}/…: a robot YAML's mqtt.robot_id. */
  robotId: string;
  /** With no command this recent, the arm gets no effort (default 100 ms). */
  commandTimeoutMs?: number;
  /** A step, a robot call or a publish failed. */
  onError(e: Error): void;
}

export interface MqttStandIn {
  robot: RealTimeSim;
  served: RobotServer;
  /** The e-stop latch: set by an e-stop request, cleared only by clearEstop(). */
  readonly isEstopped: boolean;
  /** The operator's explicit action on the stand-in itself: releases the latch; a reset request then starts a new episode. */
  clearEstop(): void;
  /** Stops serving and the robot's clock; the client stays open (its owner ends it). */
  stop(): Promise<void>;
}

export async function startMqttStandIn(o: MqttStandInOptions): Promise<MqttStandIn> {
  const { client, robotId, commandTimeoutMs, onError, ...simOptions } = o;
  const robot = new RealTimeSim(await SimRobot.create(simOptions), commandTimeoutMs ?? 100, onError);
  let served: RobotServer;
  try {
    served = await serveRobotOverMqtt(robot, client, robotId, { onError, reportsOutcome: true });
  } catch (e) {
    await robot[Symbol.asyncDispose]();
    throw e;
  }
  // Every step's outcome, as the rosbridge stand-in publishes it on its outcome topic: training scores its episodes by it.
  robot.onStep = (r) => served.outcome({ t: r.info.t, reward: r.reward, success: r.info.success, terminated: r.terminated, truncated: r.truncated });
  return {
    robot,
    served,
    get isEstopped() {
      return served.safety.isEstopped;
    },
    clearEstop: () => served.clearEstop(),
    async stop() {
      await served.stop();
      await robot[Symbol.asyncDispose]();
    },
  };
}
