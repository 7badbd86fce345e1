// Imagination in the sim a calibration identified (wmrl/calibrate.ts): the task's MuJoCo scene under the identified
// profile — a physics world model whose few parameters were fitted to the robot's own episodes — without sensor noise
// or control jitter, stepped as the learned ensemble's ModelEnv is (reset from observation vectors, then a batch of
// actions a step), so a trainer can imagine its groups in it from start states the robot reported.
//
// A start is written into the scene from its observation alone: the layout's joint positions and velocities into
// qpos and qvel, the task's `pose` for the objects and targets it declares, the goal from the rollout's instruction.
// What the layout does not hold (an object's height, orientation and spin) stays as the task's reset leaves it, so a
// start at rest is restored exactly and one in motion only as far as its observation says.
import { layoutDim } from '../common/layout.js';
import { MjEnv, loadTaskModel } from '../sim/env.js';
import type { SimModel } from '../sim/mujoco.js';
import { NOMINAL, type HardwareProfile } from '../sim/profiles.js';
import { taskDef } from '../sim/registry.js';
import type { BoundTask, TaskDef } from '../sim/task.js';
import type { Policy } from '../policies/types.js';
import { collapse } from '../worldmodel/index.js';
import type { ImaginedArrays } from './imagine-policy.js';

export interface IdentifiedSimStep {
  /** Shape N x D. */
  obs: Float32Array;
  /** Shape N. */
  reward: Float32Array;
  /** Shape N: 1 at a step where the task succeeds, else 0. */
  success: Float32Array;
}

export class IdentifiedSim {
  private readonly envs: MjEnv[] = [];
  private readonly bound: BoundTask;
  private readonly qposAdr: Int32Array;
  private readonly dofAdr: Int32Array;
  private live = 0;
  /** The live rollouts' latest observations (Shape N x D). */
  private last: Float32Array = new Float32Array(0);
  private disposed = false;
  /** The end of the latest rollout or replay: each waits for the one before, as they share the envs. */
  private busy: Promise<unknown> = Promise.resolve();
  /** Entries of the task's own layout, before the command history. */
  private readonly sceneDim: number;
  readonly dObs: number;
  readonly dAct: number;

  /** Takes `model` (freed by dispose) and `first`, an env on it. */
  private constructor(readonly task: string, readonly profile: HardwareProfile, readonly commandHistory: number, private readonly def: TaskDef, private readonly model: SimModel, first: MjEnv) {
    this.bound = def.bind(model);
    try {
      if (this.bound.layout.features.length > 0 && !this.bound.pose) throw new Error(`identified sim: task '${task}' declares features but no pose(): a start cannot be written into its scene`);
    } catch (e) {
      this.bound.dispose?.();
      throw e;
    }
    const qa = model.raw.jnt_qposadr as Int32Array, da = model.raw.jnt_dofadr as Int32Array;
    const ids = first.layout.joints.map((j) => model.id('mjOBJ_JOINT', j.name));
    this.qposAdr = Int32Array.from(ids, (id) => qa[id]!);
    this.dofAdr = Int32Array.from(ids, (id) => da[id]!);
    this.sceneDim = layoutDim(this.bound.layout);
    this.dObs = layoutDim(first.layout);
    this.dAct = first.actionSpace.shape[0]!;
    this.envs.push(first);
  }

  /** The task's sim under `profile` (its sensor noise and control jitter set to none), reporting `commandHistory` commands; its envs share one model. */
  static async create(task: string, profile: HardwareProfile, opts: { commandHistory?: number } = {}): Promise<IdentifiedSim> {
    const quiet: HardwareProfile = { ...profile, obs_noise_std: 0, control_jitter_substeps: 0 };
    const def = taskDef(task);
    const model = await loadTaskModel(def, quiet);
    const history = opts.commandHistory ?? 0;
    let first: MjEnv | null = null;
    try {
      first = new MjEnv(def, model, quiet, { commandHistory: history }, false);
      return new IdentifiedSim(task, quiet, history, def, model, first);
    } catch (e) {
      first?.dispose();
      model.dispose();
      throw e;
    }
  }

  /** The sim a calibration identified (wmrl/calibrate.ts): the nominal profile with its actuation delay and scales. */
  static fromCalibration(task: string, cal: { delay: number; scales: Partial<HardwareProfile> }, opts: { commandHistory?: number } = {}): Promise<IdentifiedSim> {
    return IdentifiedSim.create(task, { ...NOMINAL, ...cal.scales, name: 'identified', description: 'the sim as the calibration identified it', action_latency_steps: cal.delay }, opts);
  }

  /** Rollouts started by the last reset. */
  get size(): number {
    return this.live;
  }

  /**
   * Starts N rollouts (`obs` Shape N x D, one instruction each, the task's own): each env reset, then the start written
   * into its scene. Returns the starts as the sim observes them (equal to `obs` where the layout holds the whole state).
   */
  async reset(obs: Float32Array, instructions: readonly string[]): Promise<Float32Array> {
    if (this.envs.length === 0) throw new Error('identified sim: used after dispose');
    const D = this.dObs, n = obs.length / D;
    if (!(Number.isInteger(n) && n >= 1)) throw new Error(`identified sim: ${obs.length} start values are not a positive multiple of the layout's ${D}`);
    if (instructions.length !== n) throw new Error(`identified sim: ${instructions.length} instructions for ${n} starts`);
    while (this.envs.length < n) this.envs.push(new MjEnv(this.def, this.model, this.profile, { commandHistory: this.commandHistory }, false));
    const bound = this.bound, J = this.qposAdr.length, A = this.dAct, out = new Float32Array(n * D);
    for (let i = 0; i < n; i++) {
      const s = obs.subarray(i * D, (i + 1) * D);
      const bad = s.findIndex((v) => !Number.isFinite(v));
      if (bad >= 0) throw new Error(`identified sim: start ${i} entry ${bad} is ${s[bad]}`);
      const goal = bound.instructions.indexOf(instructions[i]!);
      if (goal < 0) throw new Error(`identified sim: '${instructions[i]}' is not an instruction of ${this.task} (${bound.instructions.map((x) => `'${x}'`).join(', ')})`);
      const env = this.envs[i]!;
      env.reset(0);
      env.setState({ ...env.getState(), goal });
      const q = env.data.raw.qpos as Float64Array, qd = env.data.raw.qvel as Float64Array;
      for (let j = 0; j < J; j++) {
        q[this.qposAdr[j]!] = s[j]!;
        qd[this.dofAdr[j]!] = s[J + j]!;
      }
      bound.pose?.(env.data, s);
      env.data.forward();
      // The start as the sim's sensors would read it, then the commands the reset holds (the env reports them newest first).
      const o = out.subarray(i * D, (i + 1) * D);
      bound.observe(env.data, goal, o.subarray(0, this.sceneDim));
      (env.getState().commands ?? []).forEach((c, k) => o.set(c, this.sceneDim + k * A));
    }
    this.live = n;
    this.last = out;
    return out;
  }

  /**
   * One step of every live rollout (`actions` Shape N x A, clipped to the actuators' range as the robot clips them);
   * where `ended` is 1 the rollout stays as it was (its last observation again, reward 0, success 1).
   */
  step(actions: Float32Array, ended?: Uint8Array): IdentifiedSimStep {
    const n = this.live, D = this.dObs, A = this.dAct;
    if (this.envs.length === 0) throw new Error('identified sim: used after dispose');
    if (n === 0) throw new Error('identified sim: step before reset');
    if (actions.length !== n * A) throw new Error(`identified sim: ${actions.length} action values for ${n} rollouts of ${A}`);
    const r: IdentifiedSimStep = { obs: new Float32Array(n * D), reward: new Float32Array(n), success: new Float32Array(n) };
    for (let i = 0; i < n; i++) {
      if (ended?.[i]) {
        r.obs.set(this.last.subarray(i * D, (i + 1) * D), i * D);
        r.success[i] = 1;
        continue;
      }
      const s = this.envs[i]!.step(actions.subarray(i * A, (i + 1) * A));
      r.obs.set(s.obs.state, i * D);
      r.reward[i] = s.reward;
      r.success[i] = s.info.success ? 1 : 0;
    }
    this.last = r.obs;
    return r;
  }

  /** Another sim of the same task, profile and command history, with envs of its own (for work that interleaves with this one's). */
  fork(): Promise<IdentifiedSim> {
    return IdentifiedSim.create(this.task, this.profile, { commandHistory: this.commandHistory });
  }

  /**
   * N rollouts of `horizon` steps of `policy` from `start` (Shape N x D, an instruction each) under the standard-normal
   * `noise` (Shape N x H x A), each sample clipped to the action bounds before the sim steps with it: the arrays a
   * trainer takes from imagineRollouts, the sim's reward and success (0 or 1) in place of the model's predictions, one
   * member. A rollout ends at its first success, as the robot's episode does and as imaginedRollouts reads it: the
   * steps after it are not simulated (its last observation, reward 0, success 1). A policy that reads camera images is
   * refused: this sim does not render.
   */
  imagine(policy: Policy, start: { obs: Float32Array; instructions: readonly string[] }, horizon: number, opts: { noise: Float32Array; actLow: ArrayLike<number>; actHigh: ArrayLike<number> }): Promise<ImaginedArrays> {
    return this.exclusive(() => this.imagineNow(policy, start, horizon, opts));
  }

  /** Runs `f` once every rollout or replay started before it has ended. */
  private exclusive<T>(f: () => Promise<T>): Promise<T> {
    if (this.disposed) return Promise.reject(new Error('identified sim: used after dispose'));
    const r = this.busy.then(f, f);
    this.busy = r.catch(() => undefined);
    return r;
  }

  private async imagineNow(policy: Policy, start: { obs: Float32Array; instructions: readonly string[] }, horizon: number, opts: { noise: Float32Array; actLow: ArrayLike<number>; actHigh: ArrayLike<number> }): Promise<ImaginedArrays> {
    const reads = policy.inputs(), D = this.dObs, A = this.dAct, H = horizon;
    if (reads.image || reads.features) throw new Error(`identified sim: the ${policy.kind} policy reads camera images, which the identified sim does not render`);
    if (policy.obsDim !== D || policy.actDim !== A) throw new Error(`identified sim: the policy reads ${policy.obsDim} entries and acts with ${policy.actDim}; the sim observes ${D} and takes ${A}`);
    if (!(Number.isInteger(H) && H > 0)) throw new Error(`identified sim: horizon must be a positive integer, got ${H}`);
    let obs = await this.reset(start.obs, start.instructions);
    const n = this.live;
    if (opts.noise.length !== n * H * A) throw new Error(`identified sim: noise has ${opts.noise.length} values, expected N x H x A = ${n} x ${H} x ${A}`);
    const res = { obs: new Float32Array(n * (H + 1) * D), actionRaw: new Float32Array(n * H * A), logProb: new Float32Array(n * H), reward: new Float32Array(n * H), successProb: new Float32Array(n * H) };
    const stepNoise = new Float32Array(n * A), sent = new Float32Array(n * A), instructions = [...start.instructions];
    const ended = new Uint8Array(n);
    for (let t = 0; t < H; t++) {
      for (let i = 0; i < n; i++) {
        res.obs.set(obs.subarray(i * D, (i + 1) * D), (i * (H + 1) + t) * D);
        stepNoise.set(opts.noise.subarray((i * H + t) * A, (i * H + t + 1) * A), i * A);
      }
      const a = await policy.act(obs, stepNoise, { instructions });
      for (let j = 0; j < n * A; j++) sent[j] = Math.min(opts.actHigh[j % A]!, Math.max(opts.actLow[j % A]!, a.action[j]!));
      const s = this.step(sent, ended);
      for (let i = 0; i < n; i++) {
        res.actionRaw.set(a.action.subarray(i * A, (i + 1) * A), (i * H + t) * A);
        res.logProb[i * H + t] = a.logProb[i]!;
        res.reward[i * H + t] = s.reward[i]!;
        res.successProb[i * H + t] = s.success[i]!;
        ended[i] = s.success[i]!;
      }
      obs = s.obs;
      if (ended.every((e) => e === 1)) {
        // Every rollout has ended: the steps left hold each one's last observation and success, as step() would.
        for (let i = 0; i < n; i++) {
          for (let u = t + 1; u < H; u++) res.obs.set(obs.subarray(i * D, (i + 1) * D), (i * (H + 1) + u) * D);
          res.successProb.fill(1, i * H + t + 1, (i + 1) * H);
        }
        break;
      }
    }
    for (let i = 0; i < n; i++) res.obs.set(obs.subarray(i * D, (i + 1) * D), (i * (H + 1) + H) * D);
    return { ...res, memberReward: res.reward, images: null, imageBytes: 0, instructions };
  }

  /**
   * The sim's score of a recorded episode as imagination scores a rollout: its commands (Shape T x A, as the policy
   * sent them; the sim applies its own delay) replayed open loop from its start, ended at the first step the task
   * succeeds, collapsed as `collapse`.
   */
  replayScore(startObs: Float32Array, instruction: string, actions: Float32Array, o: { mode: 'return' | 'last-minus-first'; k: number }): Promise<number> {
    return this.exclusive(() => this.replayNow(startObs, instruction, actions, o));
  }

  private async replayNow(startObs: Float32Array, instruction: string, actions: Float32Array, o: { mode: 'return' | 'last-minus-first'; k: number }): Promise<number> {
    const A = this.dAct, T = actions.length / A;
    if (!(Number.isInteger(T) && T >= 1)) throw new Error(`identified sim: ${actions.length} action values are not a positive multiple of ${A}`);
    await this.reset(startObs, [instruction]);
    const reward = new Float32Array(T);
    let end = T;
    for (let t = 0; t < T; t++) {
      const s = this.step(actions.subarray(t * A, (t + 1) * A));
      reward[t] = s.reward[0]!;
      if (s.success[0]) {
        end = t + 1;
        break;
      }
    }
    return collapse(reward, end, o.mode, o.k);
  }

  /**
   * Refuses new rollouts and replays; those already started or queued (a trainer's anchors still scoring when it ends)
   * run to their end first, then the envs and the model are freed.
   */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    void this.busy.then(() => {
      this.bound.dispose?.();
      for (const e of this.envs) e.dispose();
      this.envs.length = 0;
      this.live = 0;
      this.model.dispose();
    });
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
