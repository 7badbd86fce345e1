// A robot the service owns, behind the always-on safety layer, with every applied command reported (joint positions,
// command, body poses) to the service's streams: the in-process sim robot, or any robot a robot YAML declares
// (rosbridge, native ROS 2, MQTT). What only the sim has — its scene, body poses, physics state, its own scoring of
// each step — is a capability the host has or has not; a robot YAML that names its sim task gets a kinematic copy
// of that task for the scene, the poses and the imagined rollouts' start state. A robot over rosbridge or MQTT is
// hosted in its own control thread (server/control-worker.ts), behind the same RobotHost interface.
import { EventEmitter } from 'node:events';
import { existsSync, statSync } from 'node:fs';
import { basename, resolve } from 'node:path';
import { layoutMismatch, layoutOf } from '../common/layout.js';
import type { RobotObservation, RobotDeclaration } from '../common/robot.js';
import type { RobotConfig } from '../hardware/config.js';
import type { Scorer } from '../hardware/record.js';
import { openRobot, type RobotLink } from '../hardware/robots/index.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { SafetyLayer, DEFAULT_SAFETY, type InterventionEvent } from '../hardware/safety.js';
import type { ResetOptions, Robot } from '../hardware/types.js';
import { MjEnv, makeEnv, type EnvState, type SceneStatic } from '../sim/index.js';
import { ApiError } from './errors.js';
import { EstopLatch } from './estop-latch.js';
import type { JobContext } from './runs.js';
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

/** How a host reaches its robot: the in-process sim, or a robot YAML's transport. */
export type RobotKind = 'sim' | RobotConfig['transport'];

/** Steps of an episode on a robot whose YAML names no sim task (whose horizon would say): `wmrl drive`'s default too. */
export const ROBOT_EPISODE_STEPS = 500;

/** How often a robot's link is looked at, ms: a change shows in its status within this. */
const LINK_POLL_MS = 200;

const round = (x: number) => Math.round(x * 1e5) / 1e5;

/** Sits between the safety layer and the robot: keeps the robot's latest observation and reports each command it applies. */
class ReportingRobot implements Robot {
  /** The latest observation the robot gave (null before the first). */
  last: RobotObservation | null = null;
  constructor(
    private readonly inner: Robot,
    private readonly report: (command: Float32Array) => void,
    private readonly onReset: (options?: ResetOptions) => void = () => {},
    private readonly guard: (what: 'act' | 'reset') => void = () => {},
  ) {}
  get spec(): RobotDeclaration {
    return this.inner.spec;
  }
  async observe(): Promise<RobotObservation> {
    return (this.last = await this.inner.observe());
  }
  async act(action: Float32Array): Promise<Float32Array> {
    this.guard('act');
    const applied = await this.inner.act(action);
    this.report(action);
    return applied;
  }
  async reset(options?: ResetOptions): Promise<RobotObservation> {
    this.guard('reset');
    this.last = await this.inner.reset(options);
    this.onReset(options);
    return this.last;
  }
  estop(): Promise<void> {
    return this.inner.estop();
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.inner[Symbol.asyncDispose]();
  }
}

/**
 * A robot over a transport seen in its task's sim: its joint positions set in a nominal copy of the task and MuJoCo's
 * kinematics run, for the body poses the viewer draws and the physics state imagined rollouts start from. Bodies its
 * joints do not move (targets, objects) stay where that copy's reset put them: the episode's seed when it has one.
 */
class KinematicMirror {
  private constructor(
    readonly env: MjEnv,
    /** qpos address of each of the robot's joints in `env`. */
    private readonly qposAdr: number[],
  ) {}

  static async create(task: string, spec: RobotDeclaration, commandHistory: number, who: string): Promise<KinematicMirror> {
    const env = await makeEnv({ task, profile: 'nominal', commandHistory });
    try {
      if (!(env instanceof MjEnv)) throw new Error(`${who}: its task '${task}' has no MuJoCo model to draw it in`);
      const mismatch = layoutMismatch(env.layout, layoutOf(spec), `task '${task}'`, 'the robot');
      if (mismatch) throw new Error(`${who}: its task '${task}' observes another robot (the task's policies could not drive it): ${mismatch}`);
      const adr = env.model.raw.jnt_qposadr as Int32Array;
      return new KinematicMirror(env, spec.joints.map((j) => adr[env.model.id('mjOBJ_JOINT', j)]!));
    } catch (e) {
      env.dispose();
      throw e;
    }
  }

  reset(seed: number | undefined): void {
    if (seed !== undefined) this.env.reset(seed);
  }

  private pose(q: ArrayLike<number>): void {
    // A fresh view each time: views into WASM memory go stale when the heap grows.
    const qpos = this.env.data.raw.qpos as Float64Array;
    this.qposAdr.forEach((a, j) => (qpos[a] = q[j] ?? 0));
    this.env.data.kinematics();
  }

  poses(q: ArrayLike<number>): number[] {
    this.pose(q);
    return Array.from(this.env.poses(), round);
  }

  state(q: ArrayLike<number>): EnvState {
    this.pose(q);
    return this.env.getState();
  }

  dispose(): void {
    this.env.dispose();
  }
}

interface HostCommon {
  /** Safety watchdog (off in tests that step the robot without a control loop). */
  watchdog?: boolean;
  /** The robot's URDF (its joints named as the robot's), which the viewer draws it from; meshes beside it or in its ROS package. */
  urdf?: string;
  onIntervention?: (e: InterventionEvent) => void;
  /**
   * Keeps the e-stop latch in this file across restarts: a latch found there is restored at start.
   * `onError` hears of a latch that could not be written (the e-stop itself still holds).
   */
  latch?: { file: string; onError(e: Error): void };
  /**
   * Called as each command or reset leaves for the robot, below the safety layer; it may latch the e-stop and throw
   * SafetyStop (the control thread's shared e-stop flag, server/control-worker.ts).
   */
  guard?: (what: 'act' | 'reset') => void;
  /** Hears each control tick as it is logged (the control thread sends them to the service's log). */
  onTick?: (t: ControlTick) => void;
}

export interface RobotHostOptions extends HostCommon {
  id: string;
  task: string;
  profile: string;
  seed?: number;
  /** The robot's observation also reports its last this many commands sent (sim/env.ts commandHistory); default 0. */
  commandHistory?: number;
  /** Side of the robot's square camera image, px, in its observation (a VLA reads it); omit for no camera. */
  image?: number;
}

export interface ConfiguredHostOptions extends HostCommon {
  id: string;
  /** The robot YAML, parsed (hardware/config.ts). */
  config: RobotConfig;
  /** Where the config came from, for messages. */
  source?: string;
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
  constructor(
    private readonly cap = 200_000,
    private readonly onPush?: (t: ControlTick) => void,
  ) {}
  push(t: ControlTick): void {
    this.onPush?.(t);
    this.buf.push(t);
    if (this.buf.length > this.cap) this.buf.splice(0, this.buf.length - this.cap);
  }
  between(from: number, to: number): ControlTick[] {
    return this.buf.filter((t) => t.at >= from && t.at < to);
  }
}

const checkedUrdf = (id: string, path: string | undefined): string | null => {
  const urdf = path === undefined ? null : resolve(path);
  if (urdf !== null && !(existsSync(urdf) && statSync(urdf).isFile())) throw new Error(`robot '${id}': its URDF ${urdf} is not a file`);
  return urdf;
};

/** The restored e-stop latch a host reports until its reset. */
export interface RestoredLatch {
  reason: string;
  at: string | null;
  unreadable: boolean;
}

/** The CPU priority a control thread runs at: the nice value it asked for, the one it has, and why the OS refused, if it did. */
export interface ThreadPriority {
  asked: number | null;
  nice: number;
  refused: string | null;
  /** The CPU the thread was to run on alone (null: not asked), the CPUs it may run on as the OS says, and why the pin was refused. */
  cpu: { asked: number; allowed: number[]; refused: string | null } | null;
}

/** A robot's own control thread, which runs a deployed policy on it. */
export interface ControlThread {
  readonly priority: ThreadPriority;
  /** Runs the policy job's session (jobs.ts policySession) in the robot's thread; resolves with its checkpoint. */
  runPolicy(o: PolicySessionRequest, ctx: JobContext): Promise<string | null>;
}

/** A deployed policy's session: the policy file, its id (the episodes' policy version) and how many episodes. */
export interface PolicySessionRequest {
  policyPath: string;
  policy: string;
  episodes: number;
}

/**
 * A robot the service hosts: in this thread (LocalRobotHost: the in-process sim, a native ROS 2 robot), or in a
 * control thread of its own (server/control-worker.ts: a robot over rosbridge or MQTT), so that serving cannot make its
 * control loop late.
 */
export interface RobotHost {
  readonly id: string;
  readonly kind: RobotKind;
  /** The sim task the robot performs: the sim's, or the one its YAML names (null: none). */
  readonly task: string | null;
  /** The sim's hardware profile; 'real' for a robot over a transport. */
  readonly profile: string;
  /** Absolute path of the robot's URDF, or null. */
  readonly urdf: string | null;
  /** The last commands its observation reports (a policy for it reads them; its jobs' sims, models and prompts do too). */
  readonly commandHistory: number;
  /** Its reset reproduces the start state a seed selects (the sim; a ROS robot with services.reset_seed_topic; an MQTT robot's reset request carries the seed). */
  readonly seededResets: boolean;
  /** The robot's 3D scene (its sim's, or its task's), or null for a robot whose YAML names no sim task. */
  readonly scene: SceneStatic | null;
  /** Timing of the control ticks of the runs driving it. */
  readonly ticks: TickLog;
  readonly events: EventEmitter<{ step: [AppliedStep]; status: [RobotStatus] }>;
  /** The run driving the robot, if any (one at a time). */
  run: string | null;
  /** Commands applied since the host started. */
  readonly stepsApplied: number;
  /** The latch restored from disk at start, while it holds (null once reset, or when none was found). */
  readonly restoredLatch: RestoredLatch | null;
  /** The safety layer every command to the robot goes through. */
  readonly safety: SafetyLayer;
  /** The robot's declared spec (the safety layer's: the YAML's limits, not the robot's own claim). */
  readonly spec: RobotDeclaration;
  /** The in-process sim robot, or null for a robot over a transport. */
  readonly simulated: SimRobot | null;
  /** The in-process sim robot; throws, naming the robot, for a robot over a transport (look at `simulated` first). */
  readonly sim: SimRobot;
  /** Its link is up and its state arrives (always, for the sim). */
  readonly connected: boolean;
  /** Control steps of one episode: its task's horizon, else ROBOT_EPISODE_STEPS. */
  readonly horizon: number;
  /** The robot's own control thread, where a deployed policy's episodes run; null: this thread drives the robot. */
  readonly controlThread: ControlThread | null;
  /**
   * The reward, success and episode end of the step just taken (the sim's step, or the robot's outcome topic), or null
   * for a robot that reports none: its episodes are recorded unscored and run to their step limit.
   */
  scorer(): Scorer | null;
  /** The robot's joint positions now (its latest state, for a robot over a transport), in its joint order. */
  positions(): number[];
  /** Body poses (nbody x 7) of the robot's scene now; empty without a scene. */
  poses(): number[];
  /** The sim state the robot is in (for imagined rollouts from it): the sim's, the task copy's posed at its joints, or null. */
  physicsState(): EnvState | null;
  status(): RobotStatus;
  /** Latches the e-stop, then tells the robot; a robot that does not confirm (its link down) is an error, the latch holding. */
  estop(reason: string): Promise<void>;
  /** Clears a latched e-stop and brings the robot to its start state; the latch is set again when the robot does not come back. */
  reset(): Promise<void>;
  dispose(): Promise<void>;
}

/** A host's status; `robotStopped`: the robot's own refusal of effort, where it reports one (the sim). */
export function hostStatus(h: RobotHost, robotStopped: boolean | null): RobotStatus {
  const s = h.spec;
  const estopped = h.safety.isEstopped;
  return {
    id: h.id,
    name: s.name,
    kind: h.kind,
    connected: h.connected,
    task: h.task,
    profile: h.profile,
    commandHistory: h.commandHistory,
    camera: s.camera ? s.camera.width : null,
    joints: s.joints,
    controlHz: s.controlHz,
    state: estopped ? 'estopped' : h.run ? 'running' : 'idle',
    estopped,
    robotStopped,
    run: h.run,
    stepsApplied: h.stepsApplied,
    position: h.positions(),
    interventions: Object.fromEntries(Object.entries(h.safety.counts).filter(([, v]) => v > 0)),
    urdf: h.urdf === null ? null : `/api/robots/${h.id}/urdf/${basename(h.urdf)}`,
  };
}

/** A robot hosted in this thread. */
export class LocalRobotHost implements RobotHost {
  readonly ticks: TickLog;
  readonly events = new EventEmitter<{ step: [AppliedStep]; status: [RobotStatus] }>();
  run: string | null = null;
  stepsApplied = 0;
  readonly scene: SceneStatic | null;
  restoredLatch: RestoredLatch | null = null;
  readonly controlThread = null;
  private latch: { store: EstopLatch; onError(e: Error): void } | null = null;
  private restoring = false;
  private linkUp = true;
  private watch?: NodeJS.Timeout;
  private readonly scoreStep: Scorer | null;

  private constructor(
    readonly id: string,
    readonly kind: RobotKind,
    readonly safety: SafetyLayer,
    private readonly reporting: ReportingRobot,
    private readonly simRobot: SimRobot | null,
    private readonly mirror: KinematicMirror | null,
    private readonly link: RobotLink,
    readonly task: string | null,
    readonly profile: string,
    readonly urdf: string | null,
    readonly commandHistory: number,
    readonly seededResets: boolean,
    onTick: ((t: ControlTick) => void) | undefined,
  ) {
    this.ticks = new TickLog(undefined, onTick);
    this.scene = simRobot ? simRobot.env.sceneStatic() : (mirror?.env.sceneStatic() ?? null);
    this.scoreStep = link.outcome;
  }

  /** The in-process sim robot of a task under a hardware profile. */
  static async create(o: RobotHostOptions): Promise<LocalRobotHost> {
    const urdf = checkedUrdf(o.id, o.urdf);
    const sim = await SimRobot.create({ task: o.task, profile: o.profile, seed: o.seed, commandHistory: o.commandHistory, ...(o.image ? { image: o.image } : {}) });
    const ref: { host?: LocalRobotHost } = {};
    const reporting = new ReportingRobot(sim, (command) => ref.host?.applied(command), undefined, o.guard);
    // The sim's actions are normalized efforts in [-1, 1]: a per-step change cap of 2 never binds.
    const safety = new SafetyLayer(reporting, { ...DEFAULT_SAFETY, maxDelta: 2 }, { watchdog: o.watchdog !== false, log: LocalRobotHost.logger(ref, o) });
    const link: RobotLink = {
      connected: () => true,
      outcome: () => {
        const l = sim.lastStep;
        return { reward: l?.reward ?? 0, done: !!(l?.terminated || l?.truncated), success: l?.info.success };
      },
    };
    const host = new LocalRobotHost(o.id, 'sim', safety, reporting, sim, null, link, o.task, o.profile, urdf, o.commandHistory ?? 0, true, o.onTick);
    ref.host = host;
    await host.restoreLatch(o.latch);
    return host;
  }

  /** The robot a robot YAML declares, connected over its transport behind the safety layer the YAML configures. */
  static async connect(o: ConfiguredHostOptions): Promise<LocalRobotHost> {
    const cfg = o.config;
    const who = `robot '${o.id}'${o.source ? ` (${o.source})` : ''}`;
    const urdf = checkedUrdf(o.id, o.urdf);
    const opened = await openRobot(cfg).catch((e: Error) => {
      throw new Error(`${who}: cannot reach it over ${cfg.transport} at ${cfg.url}: ${e.message}`, { cause: e });
    });
    let mirror: KinematicMirror | null = null;
    try {
      if (cfg.task !== undefined) mirror = await KinematicMirror.create(cfg.task, opened.robot.spec, cfg.commandHistory ?? 0, who);
      const m = mirror;
      const ref: { host?: LocalRobotHost } = {};
      const reporting = new ReportingRobot(opened.robot, (command) => ref.host?.applied(command), (options) => m?.reset(options?.seed), o.guard);
      const safety = new SafetyLayer(reporting, cfg.safety, { watchdog: o.watchdog !== false, log: LocalRobotHost.logger(ref, o) });
      const seeded = cfg.transport === 'mqtt' || cfg.services.resetSeed !== undefined;
      const host = new LocalRobotHost(o.id, cfg.transport, safety, reporting, null, mirror, opened.link, cfg.task ?? null, 'real', urdf, cfg.commandHistory ?? 0, seeded, o.onTick);
      ref.host = host;
      // Its joint positions from the start, for the status and the viewer.
      await safety.observe().catch((e: Error) => {
        throw new Error(`${who}: connected, but it sends no state: ${e.message}`, { cause: e });
      });
      host.linkUp = opened.link.connected();
      host.watch = setInterval(() => host.checkLink(), LINK_POLL_MS);
      host.watch.unref();
      await host.restoreLatch(o.latch);
      return host;
    } catch (e) {
      mirror?.dispose();
      await opened.robot[Symbol.asyncDispose]();
      throw e;
    }
  }

  /** Every latch goes through the layer's log (the API's e-stop, a watchdog that stops), so it is persisted here. */
  private static logger(ref: { host?: LocalRobotHost }, o: HostCommon) {
    return (e: InterventionEvent) => {
      if (e.kind === 'estop') ref.host?.persistLatch(e.detail);
      o.onIntervention?.(e);
    };
  }

  private async restoreLatch(latch: HostCommon['latch']): Promise<void> {
    if (!latch) return;
    const store = new EstopLatch(this.id, latch.file);
    this.latch = { store, onError: latch.onError };
    const state = store.read();
    if (!state.latched) return;
    this.restoredLatch = { reason: state.reason, at: state.at, unreadable: state.unreadable };
    // The file stays as it is (an unreadable one included) until the operator's reset.
    this.restoring = true;
    try {
      await this.safety.estop(`restored at start: ${state.reason}`);
    } catch (e) {
      // The layer latched before asking the robot: nothing of a run goes out, whatever the robot heard.
      latch.onError(new Error(`robot '${this.id}': its e-stop latch is restored, but the robot did not confirm its own stop: ${(e as Error).message}`, { cause: e }));
    } finally {
      this.restoring = false;
    }
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

  private checkLink(): void {
    const up = this.link.connected();
    if (up === this.linkUp) return;
    this.linkUp = up;
    this.events.emit('status', this.status());
  }

  private applied(command: Float32Array): void {
    this.stepsApplied++;
    if (this.events.listenerCount('step') === 0) return;
    this.events.emit('step', { robot: this.id, step: this.stepsApplied, q: this.positions(), command: Array.from(command, round), poses: this.poses() });
  }

  /** The robot's declared spec (the safety layer's: the YAML's limits, not the robot's own claim). */
  get spec(): RobotDeclaration {
    return this.safety.spec;
  }

  /** The in-process sim robot, or null for a robot over a transport. */
  get simulated(): SimRobot | null {
    return this.simRobot;
  }

  /** The in-process sim robot; throws, naming the robot, for a robot over a transport (look at `simulated` first). */
  get sim(): SimRobot {
    if (!this.simRobot) throw new Error(`robot '${this.id}' is a ${this.kind} robot, not the in-process sim`);
    return this.simRobot;
  }

  /** Its link is up and its state arrives (always, for the sim). */
  get connected(): boolean {
    return this.link.connected();
  }

  /** Control steps of one episode: its task's horizon, else ROBOT_EPISODE_STEPS. */
  get horizon(): number {
    return this.simRobot?.env.horizon ?? this.mirror?.env.horizon ?? ROBOT_EPISODE_STEPS;
  }

  /**
   * The reward, success and episode end of the step just taken (the sim's step, or the robot's outcome topic), or null
   * for a robot that reports none: its episodes are recorded unscored and run to their step limit.
   */
  scorer(): Scorer | null {
    return this.scoreStep;
  }

  /** The robot's joint positions now (its latest state, for a robot over a transport), in its joint order. */
  positions(): number[] {
    if (this.simRobot) return Array.from(this.simRobot.toRobotObservation(this.simRobot.lastObs, 0).position, round);
    return this.reporting.last ? Array.from(this.reporting.last.position, round) : [];
  }

  /** Body poses (nbody x 7) of the robot's scene now; empty without a scene. */
  poses(): number[] {
    if (this.simRobot) return Array.from(this.simRobot.env.poses(), round);
    return this.mirror && this.reporting.last ? this.mirror.poses(this.reporting.last.position) : [];
  }

  /** The sim state the robot is in now, for imagined rollouts from it: the sim's, the task copy's posed at its joints, or null. */
  physicsState(): EnvState | null {
    if (this.simRobot) return this.simRobot.env.getState();
    return this.mirror && this.reporting.last ? this.mirror.state(this.reporting.last.position) : null;
  }

  status(): RobotStatus {
    return hostStatus(this, this.simRobot ? this.simRobot.isStopped : null);
  }

  /** Latches the e-stop, then tells the robot; a robot that does not confirm (its link down) is an error, the latch holding. */
  async estop(reason: string): Promise<void> {
    try {
      await this.safety.estop(reason);
    } catch (e) {
      throw new ApiError('WMRL_ROBOT_UNAVAILABLE', `robot '${this.id}': e-stop latched in the service (nothing of a run goes out), but the robot did not confirm its own stop: ${(e as Error).message}`);
    } finally {
      this.events.emit('status', this.status());
    }
  }

  /**
   * Clears a latched e-stop and brings the robot to its start state. A robot that does not come back (its own e-stop
   * still holds, its link is down) leaves the latch set again, and the error says so.
   */
  async reset(): Promise<void> {
    const wasLatched = this.safety.isEstopped;
    // On disk first: when that fails the robot stays latched, in memory too.
    this.latch?.store.clear();
    this.restoredLatch = null;
    this.safety.clearEstop();
    try {
      await this.safety.reset();
    } catch (e) {
      let also = '';
      if (wasLatched) {
        try {
          await this.safety.estop(`reset failed: ${(e as Error).message}`);
        } catch (e2) {
          also = `; telling it to stop again failed too: ${(e2 as Error).message}`;
        }
      }
      throw new ApiError('WMRL_ROBOT_UNAVAILABLE', `robot '${this.id}' did not reset: ${(e as Error).message}${wasLatched ? `; it stays e-stopped${also} (a robot's own e-stop is cleared at the robot: "clear" in the sim-robot terminal)` : ''}`);
    } finally {
      this.events.emit('status', this.status());
    }
  }

  async dispose(): Promise<void> {
    clearInterval(this.watch);
    try {
      await this.safety[Symbol.asyncDispose]();
    } finally {
      this.mirror?.dispose();
    }
  }
}
