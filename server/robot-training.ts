// A training job on the service's own robot (server/wmrl-train.ts, server/vla-train.ts): the trainer's robot episodes
// run through the robot's safety layer (so the viewer's e-stop stops them), recorded in the service's store and
// streamed as real frames (and, where the job imagines them, the world model's rollouts as imagined frames); the
// trainer's rows become the run's metrics.
import { buildObservation, layoutOf } from '../common/layout.js';
import type { RobotObservation } from '../common/robot.js';
import type { EpisodeMeta } from '../episodes/types.js';
import type { EpisodeStore } from '../episodes/store/store.js';
import type { StepOutcome } from '../hardware/record.js';
import { SafetyStop, type ActOptions, type SafetyLayer } from '../hardware/safety.js';
import type { ResetOptions } from '../hardware/types.js';
import type { EnvState } from '../sim/index.js';
import { RobotClock, fleetTarget, type RobotEpisode, type RobotTarget } from '../wmrl/embodied.js';
import type { RobotFleet, TargetRobot } from '../wmrl/fleet.js';
import type { RunRow } from '../wmrl/run-state.js';
import { episodeFailure, sleep, wilson } from './jobs.js';
import type { RobotHost } from './robot-host.js';
import type { JobContext } from './runs.js';
import type { MetricsPoint } from './schemas.js';

export const round = (x: number) => Math.round(x * 1e5) / 1e5;

/** The 95% interval of a success rate measured on n held-out episodes. */
export const successInterval = (rate: number, n: number) => wilson(Math.round(rate * n), n).map(round) as [number, number];

/** One step of an imagined rollout, for the viewer. */
export interface ImaginedStep {
  /** Joint positions per ensemble member. */
  members: number[][];
  /** Body poses (nbody x 7) per member. */
  poses: number[][];
}

/** Where an imagined rollout comes from: the learned world model, or the sim a calibration identified. */
export type ImaginedSource = 'world-model' | 'identified-sim';

/** The world model's rollouts of the policy from an episode's start, streamed before the episode's real frames. */
export interface ImaginedRollouts {
  /** `start`: the observation the robot starts from; `physics`: the robot's sim state then; `H`: steps. */
  rollout(start: Float32Array, physics: EnvState, H: number): Promise<{ source: ImaginedSource; steps: ImaginedStep[] }>;
}

/** What a training job's checkpoint.json holds beside the trainer's own files (state.json, pg.safetensors, world_model.safetensors, history.json). */
export interface RobotRunCheckpoint {
  run: string;
  task: string;
  profile: string;
  updates: number;
  /** Robot time, every robot summed. */
  robotSeconds: number;
  /** The robots' wall-clock: less than robot time where a fleet ran episodes at once. */
  robotWallSeconds: number;
  /** The robot's episodes in the store, in order (a fleet's: every robot's, the partial ones of robots lost included). */
  episodes: string[];
  /** A fleet's robots (the run's robot first); absent for one robot. */
  fleet?: string[];
  /** The fleet's robots lost mid-run, each with what happened to it. */
  lostRobots?: Array<{ robot: string; message: string }>;
  /**
   * The policy left in the library (null when the run stopped before pretraining ended): the run's updates, and the
   * update whose policy it is, that of the evaluation the run keeps (wmrl/keep-best.ts) (0: the starting policy; absent without an evaluation).
   */
  policy: { id: string; updates: number; keptUpdate?: number } | null;
  metrics: MetricsPoint[];
  stoppedEarly: boolean;
  /** Where a stop (or a robot's fault) ended the run; 'calibration' leaves the pretrained clone as the policy. */
  stoppedDuring: 'pretraining' | 'calibration' | 'training' | null;
}

/** A trainer's update as the run's metrics; `evalEpisodes`: the held-out episodes its true success is measured on. */
export function updateMetrics(r: RunRow, evalEpisodes: number): MetricsPoint {
  return {
    step: r.update,
    robotSeconds: round(r.robotSeconds),
    robotWallSeconds: round(r.robotWallSeconds),
    trueSuccess: r.evalSuccess === undefined ? null : round(r.evalSuccess),
    anchorFraction: round(r.realGroups / r.groups),
    biasReduction: r.biasReduction === undefined || r.biasReduction === null ? null : round(r.biasReduction),
    anchorWeight: r.anchorWeight === undefined ? null : round(r.anchorWeight),
    ppi: r.evalSuccess === undefined ? null : successInterval(r.evalSuccess, evalEpisodes),
    trueScore: r.trueMean ? [round(r.trueMean[0]), round(r.trueMean[1])] : null,
  };
}

/** What the robots of one run's anchor episodes share: the job, the imagined rollouts, the ids recorded. */
interface AnchorRun {
  ctx: JobContext;
  /** The world model's rollouts from a start state, one at a time (robots of a fleet reset at once); null: none imagined. */
  imagine: ((start: Float32Array, physics: EnvState) => Promise<{ source: ImaginedSource; steps: ImaginedStep[] }>) | null;
  /** Ids of the episodes recorded, in order. */
  ids: string[];
}

/**
 * One robot's episodes of a run, seen from the service: `reset` waits while the e-stop is latched (the viewer's "reset
 * robot" clears it; the e-stopped episode ended as partial and the trainer leaves it unscored), refuses once the run is
 * stopping, and imagines the episode from its start state; `begin` (the store's) makes the episode id known, which every
 * frame carries; `act` streams the step as the robot applied it.
 */
class RobotEpisodes {
  /** The episode being recorded on this robot, if any. */
  episode: string | null = null;
  private t = 0;
  private pending: { source: ImaginedSource; steps: ImaginedStep[] } | null = null;
  /** Why this robot's part of the run failed (fail(), or a robot call): episodes queued on it must not start. */
  dead: Error | null = null;

  constructor(
    private readonly run: AnchorRun,
    readonly host: RobotHost,
  ) {}

  /** The robot as a trainer's: the host's safety layer through this, scored by the host (a job checks it is). */
  unit(task: string): TargetRobot {
    const { host } = this;
    const outcome = host.scorer();
    if (!outcome) throw new Error(`robot '${host.id}' reports no outcome of its steps: its episodes cannot score a trainer's rollouts`);
    return {
      robot: this.robot(),
      outcome: () => this.fault(new Promise<StepOutcome>((resolve) => resolve(outcome()))),
      meta: { robot: host.spec.name, hardwareProfile: host.profile, task },
      store: this.store(),
      failure: () => this.dead,
    };
  }

  /** The host's own safety layer, with `reset` and `act` going through this. */
  private robot(): SafetyLayer {
    const safety = this.host.safety;
    const own: Partial<Record<keyof SafetyLayer, unknown>> = {
      reset: (o?: ResetOptions) => this.reset(o),
      act: (a: Float32Array, o?: ActOptions) => this.act(a, o),
      observe: () => this.fault(safety.observe()),
    };
    return new Proxy(safety, {
      get: (target, key) => {
        if (key in own) return own[key as keyof SafetyLayer];
        const v = Reflect.get(target, key, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  }

  /** The service's store, with `begin` telling this the id of the episode starting. */
  private store(): EpisodeStore {
    const store = this.run.ctx.store;
    const begin = (meta: EpisodeMeta) => {
      const rec = store.begin(meta);
      this.started(meta.id);
      return rec;
    };
    return new Proxy(store, {
      get: (target, key) => {
        if (key === 'begin') return begin;
        const v = Reflect.get(target, key, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
  }

  private async reset(o?: ResetOptions): Promise<RobotObservation> {
    const { run: { ctx, imagine }, host } = this;
    let obs: RobotObservation;
    for (;;) {
      while (host.safety.isEstopped && !ctx.signal.aborted) await sleep(50, ctx.signal);
      ctx.signal.throwIfAborted();
      if (this.dead) throw new Error(`robot '${host.id}': the run failed (${this.dead.message}); no further episode starts`);
      try {
        obs = await this.fault(host.safety.reset(o));
        break;
      } catch (e) {
        // Latched as the reset was to go out (a control thread's e-stop flag): the reset waits for the operator's, as above.
        if (!(e instanceof SafetyStop && e.reason === 'estop')) throw e;
      }
    }
    this.pending = null;
    const physics = imagine && o?.seed !== undefined ? host.physicsState() : null;
    if (imagine && physics) {
      this.pending = await imagine(buildObservation(layoutOf(host.spec), obs), physics);
      // Imagining took a moment, in which the watchdog may have held the sim (one step per command): the same seed
      // starts it again. A robot over a transport held still in real time meanwhile.
      if (host.simulated) obs = await this.fault(host.safety.reset(o));
    }
    return obs;
  }

  private started(id: string): void {
    const { run: { ctx }, host } = this;
    this.episode = id;
    this.t = 0;
    ctx.emit({ type: 'episode', episode: id, phase: 'start', steps: 0, success: null, status: 'recording' });
    const source = this.pending?.source;
    this.pending?.steps.forEach((s, t) => ctx.emit({ type: 'imagined', robot: host.id, episode: id, source: source!, t, members: s.members, poses: s.poses }));
    this.pending = null;
  }

  /**
   * A robot call that fails other than by the safety layer's stop (the link lost) ends the robot's part of the run:
   * marked at once, so that no episode the trainer has queued behind the failing one starts on it.
   */
  private fault<T>(p: Promise<T>): Promise<T> {
    return p.catch((e: unknown) => {
      if (!(e instanceof SafetyStop)) this.dead ??= e as Error;
      throw e;
    });
  }

  private async act(a: Float32Array, o?: ActOptions): Promise<Float32Array> {
    const { run: { ctx }, host } = this;
    const sent = await this.fault(host.safety.act(a, o));
    if (this.episode) ctx.emit({ type: 'real', robot: host.id, episode: this.episode, t: this.t++, q: host.positions(), command: Array.from(sent, round), poses: host.poses() });
    return sent;
  }

  /** Failed with `e`: the episode being recorded (if any) has its end reported (its record kept as partial); returns its id. */
  fail(e: Error): string | null {
    const { run: { ctx, ids }, host } = this;
    this.dead ??= e;
    const ep = this.episode;
    if (!ep) return null;
    ids.push(ep);
    ctx.emit({ type: 'episode', episode: ep, phase: 'end', steps: this.t, success: null, status: `partial (${host.connected ? 'error' : 'disconnected'})` });
    this.episode = null;
    return ep;
  }

  /** The trainer's report of the episode just run on this robot. */
  ended(ep: RobotEpisode): void {
    const { run: { ctx, ids }, host } = this;
    ids.push(ep.id);
    const why = ep.status === 'complete' ? '' : host.safety.isEstopped ? ' (estop)' : ctx.signal.aborted ? ' (aborted)' : '';
    ctx.emit({ type: 'episode', episode: ep.id, phase: 'end', steps: ep.steps, success: ep.status === 'complete' ? ep.success : null, status: `${ep.status}${why}` });
    this.episode = null;
  }
}

/**
 * The robot episodes a training job runs, on its robot or on a fleet of the service's robots (JobContext.fleet): each
 * robot's through its own safety layer, recorded in the service's store, streamed (RobotEpisodes). A robot of a fleet
 * lost mid-run leaves its episode partial (run again on another robot) and the run goes on with the others.
 */
export class AnchorEpisodes {
  /** Ids of the episodes recorded, in order. */
  readonly ids: string[] = [];
  /** The fleet's robots lost mid-run, each with what happened to it. */
  readonly lost: Array<{ robot: string; message: string }> = [];
  private readonly robots: RobotEpisodes[];
  private fleet: RobotFleet | null = null;
  private shown: { done: number; total: number } | null = null;

  /** `hosts`: the robot, or a fleet's robots (the first the lead); `imaginer`: the world model's rollouts streamed before each episode. */
  constructor(
    private readonly ctx: JobContext,
    hosts: RobotHost | readonly RobotHost[],
    imaginer: ImaginedRollouts | null,
    private readonly horizon: number,
  ) {
    let turn: Promise<unknown> = Promise.resolve();
    const imagine = imaginer && ((start: Float32Array, physics: EnvState) => {
      const mine = turn.then(() => imaginer.rollout(start, physics, horizon));
      turn = mine.catch(() => undefined);
      return mine;
    });
    const run: AnchorRun = { ctx, imagine, ids: this.ids };
    this.robots = (Array.isArray(hosts) ? hosts : [hosts as RobotHost]).map((h) => new RobotEpisodes(run, h));
  }

  /**
   * The trainer's robot target: the robot, or the fleet (each robot charged to its own robot of the clock);
   * `resetSeconds` charged per reset. A robot over a transport moves in real time whatever the trainer asks.
   */
  target(o: { realTime: boolean; resetSeconds: number; task: string }): RobotTarget {
    const { ctx, robots } = this;
    const realTime = o.realTime || robots.some((r) => !r.host.simulated);
    const units = robots.map((r) => r.unit(o.task));
    if (units.length === 1) {
      const u = units[0]!;
      return { robot: u.robot, outcome: u.outcome, maxSteps: this.horizon, realTime, store: u.store, meta: u.meta, clock: new RobotClock(1, o.resetSeconds), signal: ctx.signal };
    }
    const t = fleetTarget(units, { maxSteps: this.horizon, realTime, store: ctx.store, resetSeconds: o.resetSeconds, signal: ctx.signal, onLost: (u, e) => this.lose(units.indexOf(u), e) });
    this.fleet = t.fleet!;
    // The service's robots outlive the run: nothing here closes them.
    const { close: _close, ...target } = t;
    return target;
  }

  /** The run's progress, its phase naming the robots lost: shown again at once when one is lost. */
  progress(done: number, total: number, phase: string): void {
    this.shown = { done, total };
    const n = this.robots.length;
    const left = n - this.lost.length;
    this.ctx.progress(done, total, this.lost.length ? `${phase} on ${left} of ${n} robots (lost: ${this.lost.map((l) => l.robot).join(', ')})` : phase);
  }

  private lose(i: number, e: Error): void {
    const r = this.robots[i]!;
    const ep = r.fail(e);
    const { host } = r;
    this.lost.push({ robot: host.id, message: ep ? episodeFailure(host, ep, e) : `robot '${host.id}' (${host.kind}) ${host.connected ? 'failed' : 'disconnected'}: ${e.message}` });
    if (this.shown) this.progress(this.shown.done, this.shown.total, 'updates');
  }

  /**
   * The trainer failed with `e`: no queued episode starts, and the episodes being recorded have their ends reported
   * (their records kept as partial). Returns the run's error naming the robots and their episodes, or null when the
   * failure is not the robots' (no episode was running; a fleet with robots left).
   */
  failed(e: Error): string | null {
    if (!this.fleet) {
      const r = this.robots[0]!;
      const ep = r.fail(e);
      return ep ? episodeFailure(r.host, ep, e) : null;
    }
    for (const r of this.robots) r.fail(e);
    return this.fleet.left === 0 ? `no robot left to run episodes on: ${this.lost.map((l) => l.message).join('; ')}` : null;
  }

  /** The trainer's report of the episode just run, on whichever robot ran it. */
  ended(ep: RobotEpisode): void {
    (this.robots.find((r) => r.episode === ep.id) ?? this.robots[0]!).ended(ep);
  }
}
