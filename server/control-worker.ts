// A robot over rosbridge or MQTT hosted in a control thread of its own (a worker_threads Worker running
// control-worker-thread.ts): its connection, safety layer, watchdog and a deployed policy's episodes (inference,
// stepping) run there, so HTTP, WebSocket streaming and exports on the service's thread cannot make its control loop
// late. The service's side is a RobotHost like any other: it keeps what the API, the viewers and Foxglove read (the
// robot's state, its applied steps) from the thread's messages, and sends it the calls a trainer on this thread makes
// (observe, act, reset, outcome) through a SafetyLayer-typed proxy.
//
// Recording: the thread hands each step of an episode to this thread, which commits it to the episode store (its one
// writer connection), so neither a disk's fsync nor another writer's lock can hold up the control loop. Steps in
// flight when the thread dies are what it handed over; the episode is then finished here as partial.
//
// E-stop: the reason and a generation counter go into shared memory first, which the thread reads before every
// command and reset it sends, so the latch never waits behind its message queue; the message that follows carries
// the robot's own confirmation back.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { EventEmitter } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { RobotDeclaration, RobotObservation } from '../common/robot.js';
import type { EpisodeRecorder, EpisodeStore } from '../episodes/store/store.js';
import type { EpisodeMeta, EpisodeStep } from '../episodes/types.js';
import type { RobotConfig } from '../hardware/config.js';
import type { StepOutcome } from '../hardware/record.js';
import { SafetyLayer, SafetyStop, type ActOptions, type Intervention, type InterventionEvent } from '../hardware/safety.js';
import type { ResetOptions, Robot } from '../hardware/types.js';
import type { EnvState, SceneStatic } from '../sim/index.js';
import { ApiError } from './errors.js';
import { EstopLatch } from './estop-latch.js';
import {
  TickLog, hostStatus, type AppliedStep, type ConfiguredHostOptions, type ControlThread, type ControlTick, type PolicySessionRequest, type RestoredLatch, type RobotHost, type RobotKind, type ThreadPriority,
} from './robot-host.js';
import { RunFailure, type JobContext } from './runs.js';
import type { ErrorCode, JobEvent, RobotStatus } from './schemas.js';

/**
 * The transports whose robots get a control thread. Native ROS 2 stays on the service's thread: rclnodejs keeps one
 * ROS context per process and is not known to load in a worker thread.
 */
export const THREADED_TRANSPORTS: ReadonlySet<RobotConfig['transport']> = new Set(['rosbridge', 'mqtt']);

const HERE = dirname(fileURLToPath(import.meta.url));
/** The thread's module beside this one: .ts from the sources, .js from the build. */
const THREAD_MODULE = join(HERE, `control-worker-thread${extname(fileURLToPath(import.meta.url))}`);
const TYPESCRIPT = /\.[cm]?tsx?$/;
/** How long a closing thread may take to stop its robot link and store before it is terminated. */
const CLOSE_MS = 10_000;

/** tsx's ESM API (its `register()` hooks the thread's own imports), by absolute URL from tsx's export map. */
function tsxEsmApi(forWhat: string): string {
  let pkgFile: string;
  try {
    pkgFile = createRequire(import.meta.url).resolve('tsx/package.json');
  } catch (e) {
    throw new Error(`${forWhat} is TypeScript, which runs under tsx, and tsx is not installed (${(e as Error).message.split('\n')[0]}); install the dev dependencies or run the build in dist/`, { cause: e });
  }
  const exports = (JSON.parse(readFileSync(pkgFile, 'utf8')) as { exports?: Record<string, { import?: { default?: string } }> }).exports;
  const api = exports?.['./esm/api']?.import?.default;
  if (!api) throw new Error(`${forWhat} is TypeScript, and the installed tsx (${pkgFile}) exports no ESM API ('tsx/esm/api') to load it with`);
  return pathToFileURL(join(dirname(pkgFile), api)).href;
}

/** Starts module `file` in a worker thread: plain node for the build's .js; for a TypeScript source, under tsx's hooks registered inside the thread. */
export function moduleWorker(file: string, workerData: unknown): Worker {
  if (!TYPESCRIPT.test(file)) return new Worker(pathToFileURL(file), { workerData });
  // A loader given in execArgv does not reach a worker thread's imports: the thread registers tsx itself.
  const boot = `const tsx = await import(${JSON.stringify(tsxEsmApi(file))}); tsx.register(); await import(${JSON.stringify(pathToFileURL(file).href)});`;
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), { workerData });
}

/** Room for an e-stop's reason in the shared flag, bytes of UTF-8 (the API allows 200 characters). */
const REASON_BYTES = 1024;

/**
 * The e-stop flag shared between the service's thread and a robot's control thread: a generation counter each
 * raise increments and the latest reason. The service raises it; the control thread takes each new raise before any
 * command leaves.
 */
export class EstopFlag {
  private readonly words: Int32Array;
  private readonly bytes: Uint8Array;
  private seen = 0;

  constructor(readonly buffer = new SharedArrayBuffer(8 + REASON_BYTES)) {
    this.words = new Int32Array(buffer, 0, 2);
    this.bytes = new Uint8Array(buffer, 8);
  }

  /** Raises it with `reason` (cut to the room there is); returns the new generation. */
  raise(reason: string): number {
    const text = new TextEncoder().encode(reason).subarray(0, this.bytes.length);
    this.bytes.set(text);
    Atomics.store(this.words, 1, text.length);
    // The generation last: a thread that sees it sees the reason written before it.
    return Atomics.add(this.words, 0, 1) + 1;
  }

  /** Raises so far. */
  get generation(): number {
    return Atomics.load(this.words, 0);
  }

  /** Raises this side has taken. */
  get taken(): number {
    return this.seen;
  }

  /** The reason of the latest raise not taken yet on this side, or null when there is none. */
  take(): string | null {
    const g = Atomics.load(this.words, 0);
    if (g === this.seen) return null;
    this.seen = g;
    // A copy: TextDecoder reads no shared memory.
    return new TextDecoder().decode(this.bytes.slice(0, Atomics.load(this.words, 1)));
  }
}

// ── The messages between the threads ────────────────────────────────────────────────────────────

/** What the thread starts from. */
export interface ThreadData {
  id: string;
  config: RobotConfig;
  source?: string;
  urdf?: string;
  watchdog: boolean;
  /** The robot's e-stop latch file, or null for none. */
  latchFile: string | null;
  /** The nice value the thread asks for before it connects (null: the service's). */
  nice: number | null;
  /** The CPU the thread moves itself onto before it connects (null: the service's CPUs). */
  cpu: number | null;
  /** performance.timeOrigin of the service's thread, which the thread converts its clock to and from. */
  timeOrigin: number;
  estop: SharedArrayBuffer;
}

/** What changes in the thread that the service shows; sent with every reply, on every status change and every LINK_POLL. */
export interface ThreadState {
  connected: boolean;
  estopped: boolean;
  /** Raises of the e-stop flag the thread had taken. */
  estopGen: number;
  counts: Record<Intervention, number>;
  position: number[];
  restoredLatch: RestoredLatch | null;
}

/** What the thread reports once its robot is connected behind its safety layer. */
export interface ThreadInfo {
  kind: RobotKind;
  spec: RobotDeclaration;
  task: string | null;
  profile: string;
  urdf: string | null;
  commandHistory: number;
  seededResets: boolean;
  scene: SceneStatic | null;
  horizon: number;
  /** The robot reports the outcome of each step. */
  scored: boolean;
  /** The URL of the module the thread runs. */
  module: string;
  priority: ThreadPriority;
  state: ThreadState;
}


/** Each call the service makes of the thread: [argument, result]. */
export interface ThreadOps {
  observe: [undefined, RobotObservation];
  /** `stamp` on the service's clock. */
  act: [{ action: Float32Array; stamp?: number }, Float32Array];
  reset: [ResetOptions | undefined, { obs: RobotObservation; physics: EnvState | null }];
  outcome: [undefined, StepOutcome];
  /** Confirms the e-stop the flag raised: the robot's own stop. */
  estop: [undefined, void];
  resetRobot: [undefined, void];
  runPolicy: [{ runId: string; dir: string; request: PolicySessionRequest }, string | null];
  close: [undefined, void];
}
export type ThreadOp = keyof ThreadOps;

/** An error as it crosses between the threads. */
export interface WireError {
  name: string;
  message: string;
  /** SafetyStop's reason. */
  reason?: 'estop' | 'episode_timeout';
  /** ApiError's code. */
  code?: ErrorCode;
  /** RunFailure's checkpoint. */
  checkpoint?: string | null;
}

/** An episode's recording as the thread hands it over. */
export type RecordMessage =
  | { t: 'record'; op: 'begin'; meta: EpisodeMeta }
  | { t: 'record'; op: 'append'; id: string; step: EpisodeStep }
  | { t: 'record'; op: 'finish'; id: string; outcome: { success?: boolean; status?: 'complete' | 'partial' } };

export type ToThread =
  | { t: 'call'; id: number; op: ThreadOp; arg: unknown }
  | { t: 'abort' }
  /** The store refused a step of the episode: its next step fails with this. */
  | { t: 'recordFault'; episode: string; message: string };
export type FromThread =
  | { t: 'ready'; info: ThreadInfo }
  | { t: 'failed'; error: WireError }
  | { t: 'reply'; id: number; ok: true; value: unknown; state: ThreadState }
  | { t: 'reply'; id: number; ok: false; error: WireError; state: ThreadState }
  | { t: 'state'; state: ThreadState; status: boolean }
  | { t: 'step'; step: AppliedStep }
  | { t: 'tick'; tick: ControlTick }
  | { t: 'job'; ev: JobEvent }
  | { t: 'progress'; done: number; total: number; phase?: string }
  | { t: 'intervention'; e: InterventionEvent }
  | { t: 'latchFault'; message: string }
  | RecordMessage;

export function toWire(e: unknown): WireError {
  if (!(e instanceof Error)) return { name: 'Error', message: String(e) };
  const w: WireError = { name: e.name, message: e.message };
  if (e instanceof SafetyStop) w.reason = e.reason;
  if (e instanceof ApiError) w.code = e.code;
  if (e instanceof RunFailure) w.checkpoint = e.checkpoint;
  return w;
}

/** The error as the service's code tells it: a SafetyStop, an ApiError and a RunFailure stay what they were. */
export function fromWire(w: WireError): Error {
  if (w.name === 'SafetyStop' && w.reason) return new SafetyStop(w.reason, w.message);
  if (w.name === 'ApiError' && w.code) return new ApiError(w.code, w.message);
  if (w.name === 'RunFailure' && w.checkpoint !== undefined) return new RunFailure(w.message, w.checkpoint);
  const e = new Error(w.message);
  e.name = w.name;
  return e;
}

// ── The service's side ──────────────────────────────────────────────────────────────────────────

export interface ThreadHostOptions extends ConfiguredHostOptions {
  /** The service's episode store, which the thread's episodes are committed to on this thread. */
  store: EpisodeStore;
  /** The nice value the thread asks for (Linux: a thread's own; below 0 needs root or CAP_SYS_NICE); unset: the service's. */
  nice?: number;
  /** The CPU the thread moves itself onto, which the service keeps its other threads off (cpu-affinity.ts); unset: the service's CPUs. */
  cpu?: number;
  /** Hears that the control thread died (the robot is then shown disconnected and a run on it fails). */
  onError(e: Error): void;
}

/** A robot that cannot be reached through its thread: the message every refused call carries. */
const stubRobot = (spec: RobotDeclaration, who: string): Robot => {
  const refuse = () => Promise.reject(new Error(`${who}: its robot is driven from its control thread`));
  return { spec, observe: refuse, act: refuse, reset: refuse, estop: refuse, [Symbol.asyncDispose]: async () => {} };
};

/**
 * The safety layer of a robot in its control thread, as the service's thread sees it: every call goes to the layer in
 * the thread, the only one that moves the robot. A SafetyLayer in type, so a trainer here takes it where it takes
 * any robot's layer (its episodes step from this thread, the watchdog still in the robot's).
 */
class ThreadSafety extends SafetyLayer {
  constructor(
    private readonly host: WorkerRobotHost,
    spec: RobotDeclaration,
    config: RobotConfig['safety'],
  ) {
    super(stubRobot(spec, `robot '${host.id}'`), config, { watchdog: false });
  }

  override get isEstopped(): boolean {
    return this.host.latched;
  }

  override sanitize(): Float32Array | null {
    throw new Error(`robot '${this.host.id}': its commands are made safe in its control thread, not here`);
  }

  override act(action: Float32Array, opts: ActOptions = {}): Promise<Float32Array> {
    return this.host.call('act', { action, ...(opts.stamp === undefined ? {} : { stamp: opts.stamp }) });
  }

  override observe(): Promise<RobotObservation> {
    return this.host.call('observe', undefined);
  }

  override async reset(options?: ResetOptions): Promise<RobotObservation> {
    const r = await this.host.call('reset', options);
    this.host.resetAt(r.physics);
    return r.obs;
  }

  override estop(reason = 'requested'): Promise<void> {
    return this.host.estop(reason);
  }

  override clearEstop(): void {
    throw new Error(`robot '${this.host.id}': its e-stop is cleared by its host's reset(), which resets the robot in its control thread`);
  }

  override async [Symbol.asyncDispose](): Promise<void> {
    await this.host.dispose();
  }
}

export class WorkerRobotHost implements RobotHost {
  readonly ticks = new TickLog();
  readonly events = new EventEmitter<{ step: [AppliedStep]; status: [RobotStatus] }>();
  run: string | null = null;
  stepsApplied = 0;
  readonly safety: ThreadSafety;
  readonly simulated = null;
  readonly controlThread: ControlThread;
  readonly kind: RobotKind;
  readonly task: string | null;
  readonly profile: string;
  readonly urdf: string | null;
  readonly commandHistory: number;
  readonly seededResets: boolean;
  readonly scene: SceneStatic | null;
  readonly horizon: number;
  /** The URL of the module the control thread runs (the build's .js, or the .ts source under tsx). */
  readonly threadModule: string;
  private state: ThreadState;
  private q: number[];
  private bodyPoses: number[] = [];
  private physics: EnvState | null = null;
  private readonly outcome: (() => Promise<StepOutcome>) | null;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();
  private nextCall = 1;
  /** The deployed policy's run in the thread. */
  private job: JobContext | null = null;
  /** The episodes the thread is recording, by id. */
  private readonly recording = new Map<string, EpisodeRecorder>();
  /** Why the thread is gone, once it is. */
  private dead: Error | null = null;
  /** The episodes the thread was recording when it died (kept as partial). */
  private lost: string[] = [];
  private closing: Promise<void> | null = null;

  private constructor(
    readonly id: string,
    private readonly worker: Worker,
    private readonly flag: EstopFlag,
    info: ThreadInfo,
    private readonly o: ThreadHostOptions,
  ) {
    this.kind = info.kind;
    this.task = info.task;
    this.profile = info.profile;
    this.urdf = info.urdf;
    this.commandHistory = info.commandHistory;
    this.seededResets = info.seededResets;
    this.scene = info.scene;
    this.horizon = info.horizon;
    this.threadModule = info.module;
    this.controlThread = { priority: info.priority, runPolicy: (req, ctx) => this.runPolicy(req, ctx) };
    this.state = info.state;
    this.q = info.state.position;
    this.safety = new ThreadSafety(this, info.spec, o.config.safety);
    Object.assign(this.safety.counts, info.state.counts);
    this.outcome = info.scored ? () => this.call('outcome', undefined) : null;
    worker.on('message', (m: FromThread) => this.onMessage(m));
    worker.on('error', (e) => this.gone(new Error(`robot '${id}': its control thread failed: ${e.message}`, { cause: e })));
    worker.on('exit', (code) => this.gone(new Error(`robot '${id}': its control thread exited (code ${code})`)));
  }

  /** Starts the robot's control thread, which connects to it; resolves once the robot is connected behind its safety layer. */
  static async start(o: ThreadHostOptions): Promise<WorkerRobotHost> {
    const flag = new EstopFlag();
    const data: ThreadData = {
      id: o.id, config: o.config, ...(o.source !== undefined ? { source: o.source } : {}), ...(o.urdf !== undefined ? { urdf: o.urdf } : {}),
      watchdog: o.watchdog !== false, latchFile: o.latch?.file ?? null, nice: o.nice ?? null, cpu: o.cpu ?? null, timeOrigin: performance.timeOrigin, estop: flag.buffer,
    };
    const worker = moduleWorker(THREAD_MODULE, data);
    const info = await new Promise<ThreadInfo>((resolve, reject) => {
      const onMessage = (m: FromThread) => {
        if (m.t === 'latchFault') o.latch?.onError(new Error(m.message));
        if (m.t !== 'ready' && m.t !== 'failed') return;
        off();
        if (m.t === 'ready') resolve(m.info);
        else reject(fromWire(m.error));
      };
      const onError = (e: Error) => {
        off();
        reject(new Error(`robot '${o.id}': its control thread failed to start: ${e.message}`, { cause: e }));
      };
      const onExit = (code: number) => {
        off();
        reject(new Error(`robot '${o.id}': its control thread exited at start (code ${code})`));
      };
      const off = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
    }).catch(async (e: unknown) => {
      // A thread that failed to connect ends itself; one that is stuck does not.
      await worker.terminate();
      throw e;
    });
    return new WorkerRobotHost(o.id, worker, flag, info, o);
  }

  /** The e-stop is latched: raised here and not yet cleared by a reset the thread has seen, or latched in the thread. */
  get latched(): boolean {
    return this.state.estopped || this.flag.generation !== this.state.estopGen;
  }

  get spec(): RobotDeclaration {
    return this.safety.spec;
  }

  get sim(): never {
    throw new Error(`robot '${this.id}' is a ${this.kind} robot, not the in-process sim`);
  }

  get connected(): boolean {
    return !this.dead && this.state.connected;
  }

  get restoredLatch(): RestoredLatch | null {
    return this.state.restoredLatch;
  }

  scorer(): (() => Promise<StepOutcome>) | null {
    return this.outcome;
  }

  positions(): number[] {
    return this.q;
  }

  poses(): number[] {
    return this.bodyPoses;
  }

  /** The robot's sim state as of its last reset: what imagined rollouts of an episode start from. */
  physicsState(): EnvState | null {
    return this.physics;
  }

  /** Called by the layer as a reset it asked for returns. */
  resetAt(physics: EnvState | null): void {
    this.physics = physics;
  }

  status(): RobotStatus {
    return hostStatus(this, null);
  }

  /** Sends a call to the thread; rejects with the thread's error, or when the thread is gone. */
  call<K extends ThreadOp>(op: K, arg: ThreadOps[K][0]): Promise<ThreadOps[K][1]> {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextCall++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.post({ t: 'call', id, op, arg });
    });
  }

  private post(m: ToThread): void {
    this.worker.postMessage(m);
  }

  async estop(reason: string): Promise<void> {
    this.flag.raise(reason);
    try {
      if (this.dead) {
        // Nothing can reach the robot now: the latch is kept on disk here, so a restart holds it too.
        if (this.o.latch) new EstopLatch(this.id, this.o.latch.file).set(reason);
        throw new ApiError('WMRL_ROBOT_UNAVAILABLE', `robot '${this.id}': e-stop latched in the service, but its control thread is not running to tell the robot (${this.dead.message})`);
      }
      await this.call('estop', undefined);
    } finally {
      this.events.emit('status', this.status());
    }
  }

  async reset(): Promise<void> {
    try {
      if (this.dead) throw new ApiError('WMRL_ROBOT_UNAVAILABLE', `robot '${this.id}' did not reset: its control thread is not running (${this.dead.message})`);
      await this.call('resetRobot', undefined);
    } finally {
      this.events.emit('status', this.status());
    }
  }

  private async runPolicy(request: PolicySessionRequest, ctx: JobContext): Promise<string | null> {
    this.job = ctx;
    const abort = () => this.post({ t: 'abort' });
    ctx.signal.addEventListener('abort', abort, { once: true });
    try {
      const p = this.call('runPolicy', { runId: ctx.runId, dir: ctx.dir, request });
      if (ctx.signal.aborted) abort();
      return await p;
    } catch (e) {
      if (!this.dead || e !== this.dead || this.lost.length === 0) throw e;
      throw new Error(`${this.dead.message} during episode ${this.lost.join(', ')}; the episode is kept as partial`, { cause: e });
    } finally {
      ctx.signal.removeEventListener('abort', abort);
      this.job = null;
    }
  }

  private apply(s: ThreadState): void {
    this.state = s;
    this.q = s.position;
    Object.assign(this.safety.counts, s.counts);
  }

  private onMessage(m: FromThread): void {
    switch (m.t) {
      case 'reply': {
        this.apply(m.state);
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        if (m.ok) p.resolve(m.value);
        else p.reject(fromWire(m.error));
        return;
      }
      case 'state':
        this.apply(m.state);
        if (m.status) this.events.emit('status', this.status());
        return;
      case 'step':
        this.stepsApplied++;
        this.q = m.step.q;
        this.bodyPoses = m.step.poses;
        if (this.events.listenerCount('step') > 0) this.events.emit('step', { ...m.step, step: this.stepsApplied });
        return;
      case 'tick':
        this.ticks.push(m.tick);
        return;
      case 'job':
        this.job?.emit(m.ev);
        return;
      case 'progress':
        this.job?.progress(m.done, m.total, m.phase);
        return;
      case 'record':
        this.record(m);
        return;
      case 'intervention':
        this.o.onIntervention?.(m.e);
        return;
      case 'latchFault':
        this.o.latch?.onError(new Error(m.message));
        return;
      case 'ready':
      case 'failed':
        return;
    }
  }

  /**
   * Commits what the thread handed over. A refusal is told to the thread, whose episode then fails at its next step
   * (and its run with it, naming it); a refused end has no next step and is reported here.
   */
  private record(m: RecordMessage): void {
    const id = m.op === 'begin' ? m.meta.id : m.id;
    try {
      if (m.op === 'begin') this.recording.set(id, this.o.store.begin(m.meta));
      else if (m.op === 'append') {
        const rec = this.recording.get(id);
        if (!rec) throw new Error('it was not begun here');
        rec.append(m.step);
      } else {
        this.recording.delete(id);
        this.o.store.finish(id, m.outcome);
      }
    } catch (e) {
      const message = `robot '${this.id}': episode ${id} could not be recorded (${m.op}): ${(e as Error).message}`;
      if (m.op === 'finish') this.o.onError(new Error(message, { cause: e }));
      else this.post({ t: 'recordFault', episode: id, message });
    }
  }

  /** The thread died or exited: calls fail, the robot shows disconnected, the episodes it was recording are kept as partial. */
  private gone(e: Error): void {
    if (this.dead) return;
    this.dead = e;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
    this.lost = [...this.recording.keys()];
    for (const ep of this.lost) {
      try {
        this.o.store.finish(ep, { status: 'partial' });
      } catch (e2) {
        this.o.onError(new Error(`robot '${this.id}': episode ${ep} could not be kept as partial after its control thread ended: ${(e2 as Error).message}`, { cause: e2 }));
      }
    }
    this.recording.clear();
    if (this.closing) return;
    this.o.onError(e);
    this.events.emit('status', this.status());
  }

  /** Stops the thread: its run aborted, its robot link and store closed. */
  dispose(): Promise<void> {
    this.closing ??= (async () => {
      if (this.dead) return;
      const exited = new Promise<void>((resolve) => this.worker.once('exit', () => resolve()));
      const timer = setTimeout(() => void this.worker.terminate(), CLOSE_MS);
      try {
        await this.call('close', undefined);
        await exited;
      } finally {
        clearTimeout(timer);
      }
    })();
    return this.closing;
  }
}
