// What both embodied trainers share (train_standard.ts, train_wmrl.ts): prompts, the robot clock,
// policy episodes on a Robot through the safety layer (recorded in the episode store as they happen),
// the policy-gradient batch, and evaluation on held-out start states. The trainers read top to bottom
// in their own files; nothing here decides anything about world models. Any policy of the one interface
// (policies/types.ts): one that reads the camera image and the instruction gets the robot's own, each
// step, and keeps them with the step for the policy gradient.
import { Rng } from '../nn/index.js';
import { buildObservation, layoutDim, layoutOf, type ObservationLayout } from '../common/layout.js';
import { cameraRgb } from '../common/image.js';
import type { RobotObservation } from '../common/robot.js';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { EpisodeStore, type StoreOptions } from '../episodes/store/store.js';
import type { Episode, EpisodeStatus } from '../episodes/types.js';
import { runEpisode, type Scorer } from '../hardware/record.js';
import type { SafetyLayer } from '../hardware/safety.js';
import type { PgBatch } from '../policies/pg.js';
import type { Policy, PolicyContext, PolicyInputs } from '../policies/types.js';
import { VecEnv, makeEnv, type Env } from '../sim/index.js';
import { RobotFleet, watchedRobot, type TargetRobot } from './fleet.js';
import { MEASUREMENT_VERSION } from './reported-starts.js';

/** A GRPO prompt: a start state the robot's seeded reset reproduces, with its instruction. */
export interface Prompt {
  seed: number;
  /** Shape D: the observation right after the reset. */
  startObs: Float32Array;
  instruction: string;
}

/** Where a trainer's prompts come from: prompt number k of a run (SimPrompts: the seeded reset k itself). */
export interface PromptSource {
  get(k: number): Prompt;
}

/** Start states of prompts from seeded resets of the task's sim (the robot's reset with the same seed starts there). */
export class SimPrompts implements Disposable, PromptSource {
  private constructor(private readonly env: Env) {}

  /** `commandHistory`: the robot's observation reports its last commands (sim/env.ts), so the start states do too. */
  static async create(task: string, profile = 'nominal', opts: { commandHistory?: number } = {}): Promise<SimPrompts> {
    return new SimPrompts(await makeEnv({ task, profile, commandHistory: opts.commandHistory }));
  }

  /** The task's episode length in control steps. */
  static async horizon(task: string): Promise<number> {
    const env = await makeEnv({ task, profile: 'nominal' });
    const h = env.horizon;
    env.dispose();
    return h;
  }

  get(seed: number): Prompt {
    const o = this.env.reset(seed);
    return { seed, startObs: o.state, instruction: o.instruction };
  }

  [Symbol.dispose](): void {
    this.env.dispose();
  }
}

/**
 * Prompt k of a run = seed k - k0 of `seeds` (a split's training seeds: never a held-out combination, never an
 * evaluation seed); `wrap`: past the last seed, start over from the first.
 */
export class SplitPrompts implements PromptSource {
  constructor(private readonly sim: SimPrompts, private readonly seeds: readonly number[], private readonly k0: number, private readonly wrap = false) {}

  get(k: number): Prompt {
    const seed = this.seeds[this.wrap ? (k - this.k0) % this.seeds.length : k - this.k0];
    if (seed === undefined) throw new Error(`prompt ${k} is past the ${this.seeds.length} training seeds left for prompts`);
    return this.sim.get(seed);
  }
}

/**
 * Robot time. Every robot episode costs its steps × control period plus the reset; robots are
 * exclusive, so an episode goes to the robot that frees up first. `robotSeconds` is the total
 * robot time spent (the budget a lab pays); `wallSeconds` the time until the last robot is done.
 */
export class RobotClock {
  private readonly busy: number[];
  episodes = 0;

  constructor(readonly robots: number, readonly resetSeconds: number) {
    if (!(Number.isInteger(robots) && robots >= 1)) throw new Error(`robot clock: robots must be a positive integer, got ${robots}`);
    if (!(resetSeconds >= 0)) throw new Error(`robot clock: resetSeconds must be ≥ 0, got ${resetSeconds}`);
    this.busy = new Array<number>(robots).fill(0);
  }

  /** Charges one episode of `steps` control steps at `controlHz` to robot `robot`, or to the robot that frees up first. */
  charge(steps: number, controlHz: number, robot?: number): void {
    const i = robot ?? this.busy.indexOf(Math.min(...this.busy));
    if (!(Number.isInteger(i) && i >= 0 && i < this.robots)) throw new Error(`robot clock: robot ${i} is not one of its ${this.robots} robots`);
    this.busy[i]! += steps / controlHz + this.resetSeconds;
    this.episodes++;
  }

  get robotSeconds(): number {
    return this.busy.reduce((a, b) => a + b, 0);
  }

  get wallSeconds(): number {
    return Math.max(...this.busy);
  }

  state(): { busy: number[]; episodes: number } {
    return { busy: [...this.busy], episodes: this.episodes };
  }

  restore(s: { busy: number[]; episodes: number }): void {
    if (s.busy.length !== this.robots) throw new Error(`robot clock: state has ${s.busy.length} robots, this clock ${this.robots}`);
    s.busy.forEach((b, i) => (this.busy[i] = b));
    this.episodes = s.episodes;
  }
}

/** Where real episodes run: a robot behind its safety layer, the robot's own outcome signal, the store. */
export interface RobotTarget {
  /** The robot (a fleet's first): its spec is the one every robot of the target shares. */
  robot: SafetyLayer;
  /** Reward, done and success of the step just taken, as the robot reports them. */
  outcome: Scorer;
  maxSteps: number;
  /** Pace control ticks at the robot's rate (a real robot); false for the in-process sim. */
  realTime: boolean;
  store?: EpisodeStore;
  meta: { robot: string; hardwareProfile: string; task?: string };
  clock: RobotClock;
  signal?: AbortSignal;
  /**
   * Several robots (`robot` the first), each running its own episodes at once, charged to its own robot of `clock`
   * (wmrl/fleet.ts): a group's episodes run in parallel, and a robot lost mid-run leaves the fleet.
   */
  fleet?: RobotFleet;
}

export type ClosableTarget = RobotTarget & { close(): Promise<void> };

/** A trainer's target for `robot`: the store opened (its folder made) when a path is given; `close()` closes both. */
export function robotTarget(robot: SafetyLayer, o: Omit<RobotTarget, 'robot' | 'store' | 'clock'> & { store?: string; storeOptions?: StoreOptions; robots: number; resetSeconds: number }): ClosableTarget {
  let store: EpisodeStore | undefined;
  if (o.store) {
    mkdirSync(dirname(o.store), { recursive: true });
    store = EpisodeStore.open(o.store, o.storeOptions);
  }
  return {
    robot,
    outcome: o.outcome,
    maxSteps: o.maxSteps,
    realTime: o.realTime,
    store,
    meta: o.meta,
    clock: new RobotClock(o.robots, o.resetSeconds),
    signal: o.signal,
    async close() {
      store?.close();
      await robot[Symbol.asyncDispose]();
    },
  };
}

/**
 * A trainer's target of several robots, `robots[0]` the lead (`robot`, `outcome`, `meta`), each charged to its own robot
 * of the clock; `onLost` hears of each robot lost. `store`: a path (opened here, its folder made) or an open store.
 * `close()` closes every robot, and the store where it opened it.
 */
export function fleetTarget(robots: readonly TargetRobot[], o: Pick<RobotTarget, 'maxSteps' | 'realTime' | 'signal'> & { store?: string | EpisodeStore; resetSeconds: number; onLost?: ConstructorParameters<typeof RobotFleet>[1] }): ClosableTarget {
  const fleet = new RobotFleet(robots, o.onLost);
  const own = typeof o.store === 'string';
  if (typeof o.store === 'string') mkdirSync(dirname(o.store), { recursive: true });
  const store = typeof o.store === 'string' ? EpisodeStore.open(o.store) : o.store;
  const lead = robots[0]!;
  return {
    robot: lead.robot,
    outcome: lead.outcome,
    maxSteps: o.maxSteps,
    realTime: o.realTime,
    store,
    meta: lead.meta,
    clock: new RobotClock(robots.length, o.resetSeconds),
    signal: o.signal,
    fleet,
    async close() {
      if (own) store?.close();
      const closed = await Promise.allSettled(robots.map((r) => r.robot[Symbol.asyncDispose]()));
      const bad = closed.find((c) => c.status === 'rejected');
      if (bad) throw (bad as PromiseRejectedResult).reason;
    },
  };
}

/** Plain robots (each behind its safety layer, with its own outcome signal) as a fleet's robots: their own failures watched. */
export function fleetRobots(robots: ReadonlyArray<{ robot: SafetyLayer; outcome: Scorer; meta: TargetRobot['meta'] }>): TargetRobot[] {
  return robots.map((r) => watchedRobot(r.robot, r.outcome, r.meta));
}

/** One policy episode on the robot, as the trainers need it. T = steps. */
export interface RobotEpisode {
  seed: number;
  /** Episode id in the store. */
  id: string;
  status: EpisodeStatus;
  /** Shape (T+1) x D: every observation, the one after the last action included. */
  obs: Float32Array;
  /** Shape T x A: the policy's samples (before the safety layer's clipping). */
  action: Float32Array;
  /** Shape T x A: what the robot actually received. */
  sent: Float32Array;
  /** Shape T. */
  logProb: Float32Array;
  reward: Float32Array;
  success: boolean;
  steps: number;
  return: number;
  /** Shape T x H x W x 3: the camera image each action was taken on (policies that read images). */
  images?: Uint8Array;
  /** Shape T: the instruction each action was taken on (policies that read instructions). */
  instructions?: string[];
}

/**
 * What `reads` asks of a robot observation besides its vector: the camera image (decoded and brought to the
 * policy's image size, common/image.ts) and the instruction. Undefined for a policy that reads neither.
 */
export function robotContext(reads: PolicyInputs, o: RobotObservation, robot: string): PolicyContext | undefined {
  if (!reads.image && !reads.instruction) return undefined;
  const ctx: PolicyContext = {};
  if (reads.image) {
    const { height, width } = reads.image;
    const img = o.image;
    if (!img) throw new Error(`robot episode: the policy reads the camera image; robot ${robot}'s observation has none`);
    ctx.images = cameraRgb(img, { width, height }, `robot episode: robot ${robot}'s camera image`);
  }
  if (reads.instruction) {
    if (o.instruction === undefined) throw new Error(`robot episode: the policy reads the instruction; robot ${robot}'s observation has none`);
    ctx.instructions = [o.instruction];
  }
  return ctx;
}

/** `meanAction`: the robot runs the policy's mean action (no sampling; an evaluation's episode). */
interface EpisodeOptions {
  meanAction?: boolean;
}

/** The episode each robot is running or will run last: robotEpisode's queue, one per robot. */
const robotTurns = new WeakMap<SafetyLayer, Promise<unknown>>();

/**
 * Runs `policy` (sampling with `rng`) for one episode from the seeded reset `seed`. The episode is
 * recorded in the store step by step and charged to the robot clock. On a fleet it runs on the robot
 * that frees up first (wmrl/fleet.ts). Episodes on one robot take turns in the order they were asked
 * for (WMRL's anchor groups of one update are scored concurrently; on one robot, a reset for one group
 * mid-way through another's episode would run both groups' commands in one episode).
 */
export function robotEpisode(target: RobotTarget, policy: Policy, seed: number, rng: Rng, policyVersion: string, o: EpisodeOptions = {}): Promise<RobotEpisode> {
  const fleet = target.fleet;
  if (fleet) return fleet.run((on, i) => runRobotEpisode(target, on, i, policy, seed, rng, policyVersion, o));
  // Wait for the robot's previous episode to end, however it ended: its outcome, or its error, goes to its own caller.
  const turn = (robotTurns.get(target.robot) ?? Promise.resolve()).then(() => undefined, () => undefined);
  const mine = turn.then(() => runRobotEpisode(target, target, undefined, policy, seed, rng, policyVersion, o));
  robotTurns.set(target.robot, mine);
  return mine;
}

/**
 * The `n` episodes of one group, each from the seeded reset `seed`, episode k sampling with `noise(k, g)` (default g
 * itself). On one robot they take turns in order, g the trainer's `rng`, drawn from as they go. On a fleet they run
 * at once, each on the robot that frees up first, g a generator of its own seeded from `rng` in order, so an
 * episode's noise does not depend on which episode ends first. `ended` hears of each episode as it ends; on a fleet
 * an episode that fails lets the others end before its error is thrown.
 */
export async function groupEpisodes(target: RobotTarget, policy: Policy, seed: number, n: number, rng: Rng, policyVersion: string, o: { noise?: (k: number, g: Rng) => Rng; ended?: (ep: RobotEpisode, k: number) => void } = {}): Promise<RobotEpisode[]> {
  const noise = o.noise ?? ((_k: number, g: Rng) => g);
  if (!target.fleet) {
    const eps: RobotEpisode[] = [];
    for (let k = 0; k < n; k++) {
      const ep = await robotEpisode(target, policy, seed, noise(k, rng), policyVersion);
      o.ended?.(ep, k);
      eps.push(ep);
    }
    return eps;
  }
  const own = Array.from({ length: n }, (_, k) => noise(k, new Rng(rng.int(2 ** 31))));
  const settled = await Promise.allSettled(own.map(async (g, k) => {
    const ep = await robotEpisode(target, policy, seed, g, policyVersion);
    o.ended?.(ep, k);
    return ep;
  }));
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
  return settled.map((s) => (s as PromiseFulfilledResult<RobotEpisode>).value);
}

/** `on`: the robot it runs on (the target itself, or one of its fleet's, charged to the clock's robot `index`). */
async function runRobotEpisode(target: RobotTarget, on: Pick<TargetRobot, 'robot' | 'outcome' | 'meta' | 'store'>, index: number | undefined, policy: Policy, seed: number, rng: Rng, policyVersion: string, opts: EpisodeOptions): Promise<RobotEpisode> {
  const D = policy.obsDim, A = policy.actDim;
  if (policy.chunk !== 1) throw new Error(`robot episode: one action per control step (chunk 1); the ${policy.kind} policy gives chunks of ${policy.chunk}`);
  const reads = policy.inputs();
  const obs: Float32Array[] = [], action: Float32Array[] = [], sent: Float32Array[] = [], logProb: number[] = [], reward: number[] = [];
  const images: Uint8Array[] = [], instructions: string[] = [];
  let success = false;
  const layout = layoutOf(on.robot.spec);
  const out = await runEpisode({
    robot: on.robot,
    reset: { seed },
    maxSteps: target.maxSteps,
    store: on.store ?? target.store,
    realTime: target.realTime,
    signal: target.signal,
    meta: { ...on.meta, policyVersion, extra: { seed } },
    policy: async (o) => {
      const x = buildObservation(layout, o);
      if (x.length !== D) throw new Error(`robot episode: the robot's observation has ${x.length} entries, the policy takes ${D}`);
      const ctx = robotContext(reads, o, on.robot.spec.name);
      const noise = opts.meanAction ? new Float32Array(A) : Float32Array.from({ length: A }, () => rng.normal());
      const r = await policy.act(x, noise, ctx);
      const a = opts.meanAction ? r.mean : r.action;
      if (ctx?.images) images.push(Uint8Array.from(ctx.images));
      if (ctx?.instructions) instructions.push(ctx.instructions[0]!);
      obs.push(x);
      action.push(a);
      logProb.push(r.logProb[0]!);
      return a;
    },
    score: async () => {
      const s = await on.outcome();
      reward.push(s.reward);
      if (s.success !== undefined) success = s.success;
      return s;
    },
    onSent: (a: Float32Array) => sent.push(Float32Array.from(a)),
  });
  obs.push(buildObservation(layout, await on.robot.observe()));
  target.clock.charge(out.steps, on.robot.spec.controlHz, index);
  const T = out.steps;
  const flat = (rows: Float32Array[], w: number, n: number) => {
    const f = new Float32Array(n * w);
    for (let i = 0; i < n; i++) f.set(rows[i]!, i * w);
    return f;
  };
  const px = reads.image ? reads.image.height * reads.image.width * 3 : 0;
  const img = new Uint8Array(px * T);
  for (let i = 0; i < T && px; i++) img.set(images[i]!, i * px);
  return {
    seed,
    id: out.id,
    status: out.status,
    obs: flat(obs, D, T + 1),
    action: flat(action, A, T),
    sent: flat(sent, A, T),
    logProb: Float32Array.from(logProb.slice(0, T)),
    reward: Float32Array.from(reward.slice(0, T)),
    success: out.success ?? success,
    steps: T,
    return: out.return,
    ...(px ? { images: img } : {}),
    ...(reads.instruction ? { instructions: instructions.slice(0, T) } : {}),
  };
}

/**
 * A robot episode as the policy acted it, as the world model takes it: the policy's commands clipped to the action
 * range [low, high], as imagination feeds them (not what a safety layer may have sent instead), success at its last step.
 */
export function actedEpisode(ep: RobotEpisode, low: ArrayLike<number>, high: ArrayLike<number>): { states: Float32Array; actions: Float32Array; rewards: Float32Array; success: Float32Array } {
  const A = low.length;
  return {
    states: ep.obs,
    actions: ep.action.subarray(0, ep.steps * A).map((v, j) => Math.min(high[j % A]!, Math.max(low[j % A]!, v))),
    rewards: ep.reward,
    success: Float32Array.from({ length: ep.steps }, (_, t) => (t === ep.steps - 1 && ep.success ? 1 : 0)),
  };
}

/** A rollout's steps for the policy gradient. */
export interface Trajectory {
  /** Shape ≥ T x D (rows past T ignored). */
  obs: Float32Array;
  /** Shape ≥ T x A: the sampled actions. */
  action: Float32Array;
  logProb: Float32Array;
  steps: number;
  /** Shape T x H x W x 3: the image each step's action was taken on, for policies that read images. */
  images?: Uint8Array;
  /** Shape ≥ T: each step's instruction, for policies that read instructions. */
  instructions?: readonly string[];
}

/**
 * Flattens rollouts into one batch; each rollout's advantage and weight go to every one of its steps. Null
 * advantages are left out. The steps' images and instructions come along where the rollouts carry them
 * (every rollout, or none).
 */
export function pgBatch(trajs: readonly Trajectory[], advantages: ReadonlyArray<number | null>, weights: readonly number[], D: number, A: number): PgBatch | null {
  let M = 0;
  trajs.forEach((t, i) => (M += advantages[i] === null ? 0 : t.steps));
  if (M === 0) return null;
  const kept = trajs.filter((_, i) => advantages[i] !== null);
  const withImages = kept.filter((t) => t.images).length, withInstructions = kept.filter((t) => t.instructions).length;
  if (withImages % kept.length || withInstructions % kept.length) throw new Error(`pg batch: ${withImages} of ${kept.length} rollouts carry images and ${withInstructions} instructions: every rollout, or none`);
  const first = kept.find((t) => t.steps > 0)!;
  const px = withImages ? first.images!.length / first.steps : 0;
  for (const t of withImages ? kept : []) if (t.images!.length !== t.steps * px) throw new Error(`pg batch: a rollout of ${t.steps} steps carries ${t.images!.length} image bytes, expected ${t.steps} x ${px}`);
  const b: PgBatch = { obs: new Float32Array(M * D), action: new Float32Array(M * A), oldLogProb: new Float32Array(M), advantage: new Float32Array(M), weight: new Float32Array(M) };
  if (withImages) b.images = new Uint8Array(M * px);
  const instructions: string[] = [];
  let m = 0;
  trajs.forEach((t, i) => {
    const adv = advantages[i];
    if (adv === null || adv === undefined) return;
    b.obs.set(t.obs.subarray(0, t.steps * D), m * D);
    b.action.set(t.action.subarray(0, t.steps * A), m * A);
    b.oldLogProb.set(t.logProb.subarray(0, t.steps), m);
    b.advantage.fill(adv, m, m + t.steps);
    b.weight.fill(weights[i]!, m, m + t.steps);
    if (b.images) b.images.set(t.images!.subarray(0, t.steps * px), m * px);
    if (withInstructions) instructions.push(...t.instructions!.slice(0, t.steps));
    m += t.steps;
  });
  if (withInstructions) b.instructions = instructions;
  return b;
}

export interface Evaluation {
  /** Fraction of episodes that ended in success. */
  success: number;
  meanReturn: number;
  episodes: number;
  /** Per episode, in start-state order: 1 where it ended in success, else 0; where the evaluation keeps them, so two policies can be compared state by state. */
  outcomes?: number[];
}

/** The first seed of the evaluation start states, apart from every training prompt's. */
export const EVAL_SEED0 = 9_000_000;

/**
 * The policy's success measured on the robot itself, for a robot with no sim twin to evaluate in: its mean action (no
 * sampling) for `episodes` episodes from the robot's seeded resets seed0, seed0+1, … (the same start states at every
 * evaluation of a run), each recorded in the store and charged to the robot clock like every robot episode. A fleet
 * runs them at once; an episode that ended early (a safety stop, a lost link) counts as a failure.
 */
export function robotEvaluation(target: RobotTarget, episodes: number, seed0 = EVAL_SEED0): (policy: Policy) => Promise<Evaluation> {
  if (!(Number.isInteger(episodes) && episodes >= 1)) throw new Error(`robot evaluation: episodes must be a positive whole number, got ${episodes}`);
  // Mean actions draw no noise: a generator of its own, so evaluating leaves the trainer's draws as they were.
  const rng = new Rng(0);
  let n = 0;
  return async (policy) => {
    const version = `${MEASUREMENT_VERSION}${n++}`;
    const settled = await Promise.allSettled(Array.from({ length: episodes }, (_, i) => robotEpisode(target, policy, seed0 + i, rng, version, { meanAction: true })));
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
    const eps = settled.map((s) => (s as PromiseFulfilledResult<RobotEpisode>).value);
    const outcomes = eps.map((ep): number => (ep.success ? 1 : 0));
    return { success: outcomes.reduce((a, x) => a + x, 0) / episodes, meanReturn: eps.reduce((a, ep) => a + ep.return, 0) / episodes, episodes, outcomes };
  };
}

/**
 * The policy's true success rate: its mean action (no sampling) on `episodes` held-out start states
 * (seeds seed0, seed0+1, …) of the task under `profile`, in the in-process sim. Measurement only: not
 * charged to the robot clock. A policy that reads the camera and the instruction gets each env's render
 * (at the policy's image size) and instruction every step.
 */
export async function evaluateSuccess(policy: Policy, task: string, profile: string, episodes: number, seed0: number, opts: { commandHistory?: number } = {}): Promise<Evaluation> {
  const vec = await VecEnv.create(episodes, { task, profile, seed: seed0, commandHistory: opts.commandHistory });
  try {
    const D = policy.obsDim, A = policy.actDim;
    if (policy.chunk !== 1) throw new Error(`evaluate: one action per control step (chunk 1); the ${policy.kind} policy gives chunks of ${policy.chunk}`);
    const reads = policy.inputs();
    const size = reads.image ? reads.image.height : 0;
    if (reads.image && reads.image.width !== size) throw new Error(`evaluate: the sim renders square images; the policy reads ${reads.image.width}x${reads.image.height}`);
    const px = size * size * 3;
    let obs = vec.reset();
    let instructions = vec.envs.map((e) => e.observationSpace.instructions[e.goalOf().goal]!);
    const done = new Uint8Array(episodes);
    const outcomes = new Array<number>(episodes).fill(0);
    let successes = 0, ret = 0;
    const zeros = new Float32Array(episodes * A);
    // Rows of finished episodes keep a blank image: their actions are never counted.
    const context = (): PolicyContext | undefined => {
      if (!reads.image && !reads.instruction) return undefined;
      const images = px ? new Uint8Array(episodes * px) : undefined;
      if (images) vec.envs.forEach((e, i) => { if (!done[i]) images.set(e.render(size), i * px); });
      return { images, instructions };
    };
    while (done.some((d) => !d)) {
      const r = await policy.act(obs, zeros, context());
      const st = vec.step(r.mean);
      for (let i = 0; i < episodes; i++) {
        if (done[i]) continue;
        ret += st.reward[i]!;
        if (st.terminated[i] || st.truncated[i]) {
          done[i] = 1;
          if (st.success[i]) { successes++; outcomes[i] = 1; }
        }
      }
      obs = st.obs;
      instructions = st.instructions;
      if (obs.length !== episodes * D) throw new Error(`evaluate: the env's state has ${obs.length / episodes} entries, the policy takes ${D}`);
    }
    return { success: successes / episodes, meanReturn: ret / episodes, episodes, outcomes };
  } finally {
    vec.dispose();
  }
}

/**
 * Transitions (obs, sent action, next obs, reward, success) of a recorded episode, for refitting the
 * world model. The record holds the observation before each action; `finalObs` (the observation after
 * the last action, which the trainer keeps with its checkpoint) completes the last transition, without
 * which it is left out.
 */
export function episodeTransitions(ep: Episode, layout: ObservationLayout, finalObs?: Float32Array): { states: Float32Array; actions: Float32Array; rewards: Float32Array; success: Float32Array } | null {
  const T = finalObs ? ep.steps.length : ep.steps.length - 1;
  if (T < 1) return null;
  const D = layoutDim(layout);
  const A = ep.steps[0]!.action.length;
  const states = new Float32Array((T + 1) * D), actions = new Float32Array(T * A), rewards = new Float32Array(T), success = new Float32Array(T);
  ep.steps.forEach((s, t) => {
    const x = buildObservation(layout, s.obs, `episode ${ep.meta.id} step ${t}`);
    states.set(x, t * D);
    if (t < T) {
      actions.set(s.action, t * A);
      rewards[t] = s.reward;
      success[t] = s.success ? 1 : 0;
    }
  });
  if (finalObs) {
    if (finalObs.length !== D) throw new Error(`episode ${ep.meta.id}: final observation has ${finalObs.length} entries, expected ${D}`);
    states.set(finalObs, T * D);
  }
  return { states, actions, rewards, success };
}
