// Runs: a job (a training run, a scripted session, a deployed policy) started with options its
// TypeBox schema validates, emitting typed events, stopped through an AbortSignal and checkpointed
// when it stops. The WMRL trainer plugs in as one more JobDefinition.
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Static, TObject } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { EpisodeStore } from '../episodes/store/store.js';
import { ApiError } from './errors.js';
import type { RobotHost } from './robot-host.js';
import type { ImaginedFrame, JobEvent, MetricsPoint, RealFrame, RunStatus, StreamEvent } from './schemas.js';

/** What a running job gets: its signal, its emitter, and the service resources it may use. */
export interface JobContext {
  runId: string;
  signal: AbortSignal;
  emit(e: JobEvent): void;
  /** Progress of the run (`phase` says of what: pretraining, updates, episodes); viewers get it at most 4 times a second, and at every change of phase. */
  progress(done: number, total: number, phase?: string): void;
  robot(id: string): RobotHost;
  /** The robots the run drives: its options' `robot` first, then those its job's `fleet` added; all claimed (empty: no robot). */
  fleet: readonly RobotHost[];
  /** Claims the robot for this run (refused when another run drives it); released when the run ends. */
  claim(robot: RobotHost): void;
  store: EpisodeStore;
  /** The run's own folder under data/runs/, for checkpoints. */
  dir: string;
  policyPath(id: string): string;
}

export interface JobDefinition<S extends TObject = TObject> {
  kind: string;
  description: string;
  options: S;
  /** Checks across options the schema cannot state; the problem, named, or null. Runs before the run starts. */
  check?(options: Static<S>): string | null;
  /** Checks the options against the robot they name (their `robot`); the problem, naming the robot or the option, or null. Runs before the run starts. */
  checkRobot?(options: Static<S>, robot: RobotHost): string | null;
  /**
   * The robots the run drives besides its `robot` (`lead`), from its options; `robots`: every robot of the service.
   * Each is checked as `robot` is (busy, checkRobot, e-stopped, disconnected) and claimed before the run starts.
   */
  fleet?(options: Static<S>, lead: RobotHost, robots: readonly RobotHost[]): RobotHost[];
  /**
   * Runs until done or until `ctx.signal` aborts; on abort it finishes the episode being recorded and
   * returns. Returns the path of its checkpoint (written at the end, aborted or not), or null.
   */
  run(options: Static<S>, ctx: JobContext): Promise<string | null>;
}

/** A job's failure after it wrote its checkpoint: the run's status keeps the checkpoint with the error. */
export class RunFailure extends Error {
  constructor(
    message: string,
    readonly checkpoint: string | null,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'RunFailure';
  }
}

interface RunRecord {
  status: RunStatus;
  abort: AbortController;
  done: Promise<void>;
  metrics: MetricsPoint[];
  /** The last episodes' frames, for playback. */
  rollouts: Map<string, { real: RealFrame[]; imagined: ImaginedFrame[] }>;
}

const KEEP_ROLLOUTS = 20;
const KEEP_METRICS = 10000;
const PROGRESS_EVERY_MS = 250;

export class RunManager {
  readonly events = new EventEmitter<{ event: [StreamEvent] }>();
  private readonly jobs = new Map<string, JobDefinition>();
  private readonly runs = new Map<string, RunRecord>();

  constructor(
    private readonly deps: { store: EpisodeStore; robots: Map<string, RobotHost>; dataDir: string; policyPath(id: string): string; onError(e: Error): void },
  ) {}

  register<S extends TObject>(job: JobDefinition<S>): void {
    if (this.jobs.has(job.kind)) throw new Error(`job kind '${job.kind}' is already registered`);
    this.jobs.set(job.kind, job as unknown as JobDefinition);
  }

  jobKinds(): JobDefinition[] {
    return [...this.jobs.values()];
  }

  list(): RunStatus[] {
    return [...this.runs.values()].map((r) => r.status);
  }

  get(id: string): RunRecord {
    const r = this.runs.get(id);
    if (!r) throw new ApiError('WMRL_RUN_NOT_FOUND', `no run '${id}'`);
    return r;
  }

  /**
   * Starts a run. The options are checked against the job's schema and its defaults filled in here too,
   * so a caller inside the process (serve, a test, a trainer) gets exactly what the API would.
   */
  start(kind: string, given: Record<string, unknown>): RunStatus {
    const job = this.jobs.get(kind);
    if (!job) throw new ApiError('WMRL_JOB_NOT_FOUND', `no job kind '${kind}' (known: ${[...this.jobs.keys()].join(', ')})`);
    const options = Value.Default(job.options, structuredClone(given)) as Record<string, unknown>;
    const bad = [...Value.Errors(job.options, options)].map((e) => `options${e.path.replace(/\//g, '.')}: ${e.message}`);
    if (bad.length) throw new ApiError('WMRL_VALIDATION', bad.join('; '));
    const problem = job.check?.(options as Static<typeof job.options>) ?? null;
    if (problem) throw new ApiError('WMRL_VALIDATION', problem);
    const robotId = typeof options.robot === 'string' ? options.robot : null;
    const robot = robotId === null ? null : this.robot(robotId);
    const fleet = robot ? [robot, ...(job.fleet?.(options as Static<typeof job.options>, robot, [...this.deps.robots.values()]) ?? []).filter((r) => r !== robot)] : [];
    for (const r of fleet) {
      if (r.run) throw new ApiError('WMRL_ROBOT_BUSY', `robot '${r.id}' is driven by run '${r.run}'; stop it first`);
      const unfit = job.checkRobot?.(options as Static<typeof job.options>, r) ?? null;
      if (unfit) throw new ApiError('WMRL_VALIDATION', unfit);
      if (r.safety.isEstopped) throw new ApiError('WMRL_ROBOT_ESTOPPED', `robot '${r.id}' is e-stopped; reset it first (POST /api/robots/${r.id}/reset, or the viewer's reset button)`);
      if (!r.connected) throw new ApiError('WMRL_ROBOT_UNAVAILABLE', `robot '${r.id}' is disconnected (its ${r.kind} link is down or it sends no state); start the run once GET /api/robots/${r.id} shows it connected`);
    }
    const id = `${kind}-${new Date().toISOString().replace(/[:.]/g, '-')}-${randomUUID().slice(0, 6)}`;
    const dir = join(this.deps.dataDir, 'runs', id);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const abort = new AbortController();
    const status: RunStatus = { id, kind, state: 'running', robot: robotId, options, startedAt: Date.now(), endedAt: null, progress: { done: 0, total: 0, phase: '' }, error: null, checkpoint: null, lastMetrics: null };
    const rec: RunRecord = { status, abort, done: Promise.resolve(), metrics: [], rollouts: new Map() };
    this.runs.set(id, rec);
    // The run's robots are claimed now, before any await, so a second start cannot slip in.
    const claimed: RobotHost[] = [];
    for (const r of fleet) {
      r.run = id;
      claimed.push(r);
    }
    let lastProgress = -Infinity;
    const ctx: JobContext = {
      runId: id,
      signal: abort.signal,
      emit: (e) => this.onJobEvent(rec, e),
      progress: (done, total, phase = status.progress.phase) => {
        const changed = phase !== status.progress.phase || done >= total;
        status.progress = { done, total, phase };
        const now = performance.now();
        if (changed || now - lastProgress >= PROGRESS_EVERY_MS) {
          lastProgress = now;
          this.emitRun(rec);
        }
      },
      robot: (rid) => this.robot(rid),
      fleet,
      claim: (robot) => {
        if (robot.run && robot.run !== id) throw new ApiError('WMRL_ROBOT_BUSY', `robot '${robot.id}' is driven by run '${robot.run}'`);
        if (robot.run === id) return;
        robot.run = id;
        claimed.push(robot);
      },
      store: this.deps.store,
      dir,
      policyPath: (pid) => this.deps.policyPath(pid),
    };
    this.emitRun(rec);
    rec.done = (async () => {
      try {
        status.checkpoint = await job.run(options, ctx);
        status.state = abort.signal.aborted ? 'stopped' : 'finished';
      } catch (e) {
        status.state = 'failed';
        status.error = (e as Error).message;
        if (e instanceof RunFailure) status.checkpoint = e.checkpoint;
        this.deps.onError(new Error(`run ${id} failed: ${(e as Error).message}`, { cause: e }));
      } finally {
        for (const r of claimed) if (r.run === id) r.run = null;
        status.endedAt = Date.now();
        this.emitRun(rec);
      }
    })();
    return status;
  }

  private robot(id: string): RobotHost {
    const r = this.deps.robots.get(id);
    if (!r) throw new ApiError('WMRL_ROBOT_NOT_FOUND', `no robot '${id}' (robots: ${[...this.deps.robots.keys()].join(', ')})`);
    return r;
  }

  /** Asks the run to stop and waits until it has checkpointed. */
  async stop(id: string): Promise<RunStatus> {
    const rec = this.get(id);
    if (rec.status.state === 'running') {
      rec.status.state = 'stopping';
      this.emitRun(rec);
      rec.abort.abort(new Error('stopped'));
    }
    await rec.done;
    return rec.status;
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.runs.keys()].map((id) => this.stop(id)));
  }

  metrics(id: string): MetricsPoint[] {
    return this.get(id).metrics;
  }

  rollouts(id: string): string[] {
    return [...this.get(id).rollouts.keys()];
  }

  rollout(id: string, episode: string): { real: RealFrame[]; imagined: ImaginedFrame[] } | undefined {
    return this.get(id).rollouts.get(episode);
  }

  private emitRun(rec: RunRecord): void {
    this.events.emit('event', { type: 'run', status: rec.status });
  }

  private onJobEvent(rec: RunRecord, e: JobEvent): void {
    const ev = { ...e, run: rec.status.id } as StreamEvent;
    if (ev.type === 'metrics') {
      rec.metrics.push(ev.metrics);
      if (rec.metrics.length > KEEP_METRICS) rec.metrics.splice(0, rec.metrics.length - KEEP_METRICS);
      rec.status.lastMetrics = ev.metrics;
    } else if (ev.type === 'real' || ev.type === 'imagined') {
      let r = rec.rollouts.get(ev.episode);
      if (!r) {
        r = { real: [], imagined: [] };
        rec.rollouts.set(ev.episode, r);
        if (rec.rollouts.size > KEEP_ROLLOUTS) rec.rollouts.delete(rec.rollouts.keys().next().value!);
      }
      if (ev.type === 'real') r.real.push(ev);
      else r.imagined.push(ev);
    }
    this.events.emit('event', ev);
  }
}
