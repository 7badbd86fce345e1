// A robot the service owns: the in-process sim robot, behind the always-on safety layer, with every
// applied command reported (joint positions, command, body poses) to the service's streams.
import { EventEmitter } from 'node:events';
import { existsSync, statSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { SafetyLayer, DEFAULT_SAFETY, type InterventionEvent } from '../hardware/safety.js';
import { SimRobot } from '../hardware/robots/sim.js';
import type { ResetOptions, Robot } from '../hardware/types.js';
import type { RobotObservation, RobotDeclaration } from '../common/robot.js';
import type { SceneStatic } from '../sim/index.js';
import { EstopLatch } from './estop-latch.js';
import type { RobotStatus } from './schemas.js';

/** One applied control step, on the robot's side. */
export interface AppliedStep {
  robot: string;
  /** Commands applied since the host started. */
  step: number;
  q: number[];
  command: number[];
  poses: number[];
}

const round = (x: number) => Math.round(x * 1e5) / 1e5;

/** Sits between the safety layer and the sim: reports each command the robot applies. */
class ReportingRobot implements Robot {
  constructor(
    private readonly inner: SimRobot,
    private readonly report: (command: Float32Array) => void,
  ) {}
  get spec(): RobotDeclaration {
    return this.inner.spec;
  }
  observe(): Promise<RobotObservation> {
    return this.inner.observe();
  }
  async act(action: Float32Array): Promise<Float32Array> {
    const applied = await this.inner.act(action);
    this.report(action);
    return applied;
  }
  reset(options?: ResetOptions): Promise<RobotObservation> {
    return this.inner.reset(options);
  }
  estop(): Promise<void> {
    return this.inner.estop();
  }
  [Symbol.asyncDispose](): Promise<void> {
    return this.inner[Symbol.asyncDispose]();
  }
}

export interface RobotHostOptions {
  id: string;
  task: string;
  profile: string;
  seed?: number;
  /** Safety watchdog (off in tests that step the robot without a control loop). */
  watchdog?: boolean;
  /** The robot's URDF (its joints named as the robot's), which the viewer draws it from; meshes beside it or in its ROS package. */
  urdf?: string;
  /** The robot's observation also reports its last this many commands sent (sim/env.ts commandHistory); default 0. */
  commandHistory?: number;
  /** Side of the robot's square camera image, px, in its observation (a VLA reads it); omit for no camera. */
  image?: number;
  onIntervention?: (e: InterventionEvent) => void;
  /**
   * Keeps the e-stop latch in this file across restarts: a latch found there is restored at start.
   * `onError` hears of a latch that could not be written (the e-stop itself still holds).
   */
  latch?: { file: string; onError(e: Error): void };
}

/** Timing of control steps, as the job driving the robot saw them (ms, performance.now clock). */
export interface ControlTick {
  /** When the action was applied on the robot. */
  at: number;
  /** From the observation the action was computed from to the action applied. */
  obsToApplied: number;
  /** From the tick's slot on the control clock (episode start + k periods) to the action applied. */
  late: number;
}

/** A bounded log of the latest control ticks. */
export class TickLog {
  private buf: ControlTick[] = [];
  constructor(private readonly cap = 200_000) {}
  push(t: ControlTick): void {
    this.buf.push(t);
    if (this.buf.length > this.cap) this.buf.splice(0, this.buf.length - this.cap);
  }
  between(from: number, to: number): ControlTick[] {
    return this.buf.filter((t) => t.at >= from && t.at < to);
  }
}

export class RobotHost {
  readonly ticks = new TickLog();
  readonly events = new EventEmitter<{ step: [AppliedStep]; status: [RobotStatus] }>();
  /** The run driving the robot, if any (one at a time). */
  run: string | null = null;
  stepsApplied = 0;
  readonly scene: SceneStatic;
  /** The latch restored from disk at start, while it holds (null once reset, or when none was found). */
  restoredLatch: { reason: string; at: string | null; unreadable: boolean } | null = null;
  private latch: { store: EstopLatch; onError(e: Error): void } | null = null;
  private restoring = false;

  private constructor(
    readonly id: string,
    readonly sim: SimRobot,
    readonly safety: SafetyLayer,
    readonly task: string,
    readonly profile: string,
    /** Absolute path of the robot's URDF, or null. */
    readonly urdf: string | null,
    /** The last commands its observation reports (a policy for it reads them; its jobs' sims, models and prompts do too). */
    readonly commandHistory: number,
  ) {
    this.scene = sim.env.sceneStatic();
  }

  static async create(o: RobotHostOptions): Promise<RobotHost> {
    const urdf = o.urdf === undefined ? null : resolve(o.urdf);
    if (urdf !== null && !(existsSync(urdf) && statSync(urdf).isFile())) throw new Error(`robot '${o.id}': its URDF ${urdf} is not a file`);
    const sim = await SimRobot.create({ task: o.task, profile: o.profile, seed: o.seed, commandHistory: o.commandHistory, ...(o.image ? { image: o.image } : {}) });
    const ref: { host?: RobotHost } = {};
    const reporting = new ReportingRobot(sim, (command) => ref.host?.applied(command));
    // Every latch goes through the layer's log (the API's e-stop, a watchdog that stops), so it is persisted here.
    const log = (e: InterventionEvent) => {
      if (e.kind === 'estop') ref.host?.persistLatch(e.detail);
      o.onIntervention?.(e);
    };
    // The sim's actions are normalized efforts in [-1, 1]: a per-step change cap of 2 never binds.
    const safety = new SafetyLayer(reporting, { ...DEFAULT_SAFETY, maxDelta: 2 }, { watchdog: o.watchdog !== false, log });
    const host = new RobotHost(o.id, sim, safety, o.task, o.profile, urdf, o.commandHistory ?? 0);
    ref.host = host;
    if (o.latch) {
      const store = new EstopLatch(o.id, o.latch.file);
      host.latch = { store, onError: o.latch.onError };
      const state = store.read();
      if (state.latched) {
        host.restoredLatch = { reason: state.reason, at: state.at, unreadable: state.unreadable };
        // The file stays as it is (an unreadable one included) until the operator's reset.
        host.restoring = true;
        try {
          await safety.estop(`restored at start: ${state.reason}`);
        } finally {
          host.restoring = false;
        }
      }
    }
    return host;
  }

  /** Called as the latch sets: a failed write must not stop the e-stop itself, so it is reported, not thrown. */
  private persistLatch(reason: string): void {
    if (!this.latch || this.restoring) return;
    try {
      this.latch.store.set(reason);
    } catch (e) {
      this.latch.onError(new Error(`robot '${this.id}': e-stopped, but its latch could not be saved to ${this.latch.store.file} (a restart would release it): ${(e as Error).message}`, { cause: e }));
    }
  }

  private applied(command: Float32Array): void {
    this.stepsApplied++;
    if (this.events.listenerCount('step') === 0) return;
    this.events.emit('step', {
      robot: this.id,
      step: this.stepsApplied,
      q: this.positions(),
      command: Array.from(command, round),
      poses: Array.from(this.sim.env.poses(), round),
    });
  }

  /** The robot's joint positions now, in its joint order. */
  positions(): number[] {
    return Array.from(this.sim.toRobotObservation(this.sim.lastObs, 0).position, round);
  }

  status(): RobotStatus {
    const s = this.sim.spec;
    const estopped = this.safety.isEstopped;
    return {
      id: this.id,
      name: s.name,
      kind: 'sim',
      task: this.task,
      profile: this.profile,
      commandHistory: this.commandHistory,
      camera: s.camera ? s.camera.width : null,
      joints: s.joints,
      controlHz: s.controlHz,
      state: estopped ? 'estopped' : this.run ? 'running' : 'idle',
      estopped,
      robotStopped: this.sim.isStopped,
      run: this.run,
      stepsApplied: this.stepsApplied,
      position: this.positions(),
      interventions: Object.fromEntries(Object.entries(this.safety.counts).filter(([, v]) => v > 0)),
      urdf: this.urdf === null ? null : `/api/robots/${this.id}/urdf/${basename(this.urdf)}`,
    };
  }

  async estop(reason: string): Promise<void> {
    await this.safety.estop(reason);
    this.events.emit('status', this.status());
  }

  /** Clears a latched e-stop and brings the robot to its start state. */
  async reset(): Promise<void> {
    // On disk first: when that fails the robot stays latched, in memory too.
    this.latch?.store.clear();
    this.restoredLatch = null;
    this.safety.clearEstop();
    await this.safety.reset();
    this.events.emit('status', this.status());
  }

  async dispose(): Promise<void> {
    await this.safety[Symbol.asyncDispose]();
  }
}
