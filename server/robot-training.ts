// A training job on the service's own robot (server/wmrl-train.ts, server/vla-train.ts): the trainer's robot episodes
// run through the robot's safety layer (so the viewer's e-stop stops them), recorded in the service's store and
// streamed as real frames (and, where the job imagines them, the world model's rollouts as imagined frames); the
// trainer's rows become the run's metrics.
import { buildObservation, layoutOf } from '../common/layout.js';
import type { RobotObservation } from '../common/robot.js';
import type { EpisodeMeta } from '../episodes/types.js';
import type { EpisodeStore } from '../episodes/store/store.js';
import { SafetyStop, type ActOptions, type SafetyLayer } from '../hardware/safety.js';
import type { ResetOptions } from '../hardware/types.js';
import type { EnvState } from '../sim/index.js';
import { RobotClock, type RobotEpisode, type RobotTarget } from '../wmrl/embodied.js';
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

/** The world model's rollouts of the policy from an episode's start, streamed before the episode's real frames. */
export interface ImaginedRollouts {
  /** `start`: the observation the robot starts from; `physics`: the robot's sim state then; `H`: steps. */
  rollout(start: Float32Array, physics: EnvState, H: number): Promise<ImaginedStep[]>;
}

/** What a training job's checkpoint.json holds beside the trainer's own files (state.json, pg.safetensors, world_model.safetensors, history.json). */
export interface RobotRunCheckpoint {
  run: string;
  task: string;
  profile: string;
  updates: number;
  robotSeconds: number;
  /** The robot's episodes in the store, in order. */
  episodes: string[];
  /** The policy left in the library (null when the run stopped before pretraining ended). */
  policy: { id: string; updates: number } | null;
  metrics: MetricsPoint[];
  stoppedEarly: boolean;
  stoppedDuring: 'pretraining' | 'training' | null;
}

/** A trainer's update as the run's metrics; `evalEpisodes`: the held-out episodes its true success is measured on. */
export function updateMetrics(r: RunRow, evalEpisodes: number): MetricsPoint {
  return {
    step: r.update,
    robotSeconds: round(r.robotSeconds),
    trueSuccess: r.evalSuccess === undefined ? null : round(r.evalSuccess),
    anchorFraction: round(r.realGroups / r.groups),
    biasReduction: r.biasReduction === undefined || r.biasReduction === null ? null : round(r.biasReduction),
    anchorWeight: r.anchorWeight === undefined ? null : round(r.anchorWeight),
    ppi: r.evalSuccess === undefined ? null : successInterval(r.evalSuccess, evalEpisodes),
    trueScore: r.trueMean ? [round(r.trueMean[0]), round(r.trueMean[1])] : null,
  };
}

/**
 * Each robot episode the trainer runs, seen from the service: `reset` waits while the e-stop is latched (the
 * viewer's "reset robot" clears it; the e-stopped episode ended as partial and the trainer leaves it unscored),
 * refuses once the run is stopping, and imagines the episode from its start state; `begin` (the store's) makes
 * the episode id known, which every frame carries; `act` streams the step as the robot applied it.
 */
export class AnchorEpisodes {
  private episode: string | null = null;
  private t = 0;
  private pending: ImaginedStep[] = [];
  /** Why the run failed (failed()): episodes the trainer still had queued must not start. */
  private dead: Error | null = null;
  /** Ids of the episodes recorded, in order. */
  readonly ids: string[] = [];

  constructor(
    private readonly ctx: JobContext,
    private readonly host: RobotHost,
    private readonly imaginer: ImaginedRollouts | null,
    private readonly horizon: number,
  ) {}

  /**
   * The trainer's robot: the host's, through this; its outcome the host's scoring of each step (the sim's step, or the
   * robot's outcome topic: a job checks the robot has one before it starts); one robot, `resetSeconds` charged per reset.
   */
  target(o: { realTime: boolean; resetSeconds: number; task: string }): RobotTarget {
    const { ctx, host } = this;
    const outcome = host.scorer();
    if (!outcome) throw new Error(`robot '${host.id}' reports no outcome of its steps: its episodes cannot score a trainer's rollouts`);
    return {
      robot: this.robot(),
      outcome,
      maxSteps: this.horizon,
      // A robot over a transport moves in real time whatever the trainer asks.
      realTime: o.realTime || !host.simulated,
      store: this.store(),
      meta: { robot: host.spec.name, hardwareProfile: host.profile, task: o.task },
      clock: new RobotClock(1, o.resetSeconds),
      signal: ctx.signal,
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
    const store = this.ctx.store;
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
    const { ctx, host } = this;
    while (host.safety.isEstopped && !ctx.signal.aborted) await sleep(50, ctx.signal);
    ctx.signal.throwIfAborted();
    if (this.dead) throw new Error(`robot '${host.id}': the run failed (${this.dead.message}); no further episode starts`);
    let obs = await this.fault(host.safety.reset(o));
    this.pending = [];
    const physics = this.imaginer && o?.seed !== undefined ? host.physicsState() : null;
    if (this.imaginer && physics) {
      this.pending = await this.imaginer.rollout(buildObservation(layoutOf(host.spec), obs), physics, this.horizon);
      // Imagining took a moment, in which the watchdog may have held the sim (one step per command): the same seed
      // starts it again. A robot over a transport held still in real time meanwhile.
      if (host.simulated) obs = await this.fault(host.safety.reset(o));
    }
    return obs;
  }

  private started(id: string): void {
    const { ctx, host } = this;
    this.episode = id;
    this.t = 0;
    ctx.emit({ type: 'episode', episode: id, phase: 'start', steps: 0, success: null, status: 'recording' });
    this.pending.forEach((s, t) => ctx.emit({ type: 'imagined', robot: host.id, episode: id, source: 'world-model', t, members: s.members, poses: s.poses }));
    this.pending = [];
  }

  /**
   * A robot call that fails other than by the safety layer's stop (the link lost) ends the run: marked at once, so that
   * no episode the trainer has queued behind the failing one starts before the trainer hears of the failure.
   */
  private fault<T>(p: Promise<T>): Promise<T> {
    return p.catch((e: unknown) => {
      if (!(e instanceof SafetyStop)) this.dead ??= e as Error;
      throw e;
    });
  }

  private async act(a: Float32Array, o?: ActOptions): Promise<Float32Array> {
    const { ctx, host } = this;
    const sent = await this.fault(host.safety.act(a, o));
    if (this.episode) ctx.emit({ type: 'real', robot: host.id, episode: this.episode, t: this.t++, q: host.positions(), command: Array.from(sent, round), poses: host.poses() });
    return sent;
  }

  /**
   * The trainer failed with `e`: the episode being recorded (if any) has its end reported (its record kept as partial)
   * and no queued episode starts. Returns the run's error naming the episode and the robot, or null when no episode was
   * running (the failure is not the robot's).
   */
  failed(e: Error): string | null {
    const { ctx, host } = this;
    this.dead ??= e;
    const ep = this.episode;
    if (!ep) return null;
    this.ids.push(ep);
    ctx.emit({ type: 'episode', episode: ep, phase: 'end', steps: this.t, success: null, status: `partial (${host.connected ? 'error' : 'disconnected'})` });
    this.episode = null;
    return episodeFailure(host, ep, e);
  }

  /** The trainer's report of the episode just run. */
  ended(ep: RobotEpisode): void {
    const { ctx, host } = this;
    this.ids.push(ep.id);
    const why = ep.status === 'complete' ? '' : host.safety.isEstopped ? ' (estop)' : ctx.signal.aborted ? ' (aborted)' : '';
    ctx.emit({ type: 'episode', episode: ep.id, phase: 'end', steps: ep.steps, success: ep.status === 'complete' ? ep.success : null, status: `${ep.status}${why}` });
    this.episode = null;
  }
}

