// The generic MuJoCo env: a TaskDef plus a hardware profile -> the Env contract of DESIGN.md §4.
import type { DerivedEntries } from '../common/derived.js';
import { commandHistoryFeatures, defineLayout, layoutDim, layoutEntries, type ObservationLayout } from '../common/layout.js';
import { SimData, SimModel } from './mujoco.js';
import { applyProfileToModel, loadProfile, type HardwareProfile } from './profiles.js';
import { Rng } from './rng.js';
import { defaultView, renderImage, type CameraView } from './render.js';
import { sceneStatic, bodyPoses, type SceneStatic } from './scene.js';
import { jointUnit, type BoundTask, type TaskDef } from './task.js';
import type { BoxSpace, Demonstrator, DemonstratorOptions, Env, EnvState, Expert, Obs, ObservationSpace, SimRobotLayout, StepResult } from './types.js';

export interface EnvOptions {
  seed?: number;
  /** Image side in pixels (square); omit for no image observation. */
  image?: number;
  /**
   * Report the last K commands sent (after clipping to -1..1), newest first, as K x actuators features appended to
   * the task's layout (`<actuator> command t-k`, unit 1; the reset's holding command before any is sent). Under
   * actuation latency the commands still in flight are part of the robot's state that no sensor shows: a policy
   * that reads them can act as a latency-compensating controller does (bench bc-scale). Default 0: none.
   */
  commandHistory?: number;
}

/** The task's layout with `k` steps of command history (newest first) appended as features. */
export function withCommandHistory(layout: ObservationLayout, actuators: readonly string[], k: number): ObservationLayout {
  // The sim's commands are normalized to -1..1: dimensionless.
  const history = commandHistoryFeatures(actuators.map((name) => ({ name, unit: '1' })), k);
  return k === 0 ? layout : defineLayout(layout.joints, [...layout.features, ...history]);
}

/** A model with the profile applied, shared by every env of a vectorized batch. */
export async function loadTaskModel(task: TaskDef, profile: HardwareProfile): Promise<SimModel> {
  const model = await SimModel.load(task.scene, { worldbody: task.worldbody });
  applyProfileToModel(model, profile);
  return model;
}

/** A declared joint must exist in the model and be a hinge ('rad') or a slide ('m'). */
function checkJointUnits(task: string, model: SimModel, layout: ObservationLayout): void {
  for (const j of layout.joints) {
    const { type, unit: want } = jointUnit(model, j.name);
    if (want !== j.unit) throw new Error(`${task}: layout declares joint '${j.name}' in ${j.unit}, but the model's joint is a ${type} joint${want ? ` (measured in ${want})` : ' (only hinge and slide joints can be observed as joints)'}`);
  }
}

export class MjEnv implements Env {
  readonly observationSpace: ObservationSpace;
  readonly actionSpace: BoxSpace;
  readonly spec: SimRobotLayout;
  readonly layout: ObservationLayout;
  readonly derived?: DerivedEntries;
  readonly horizon: number;
  readonly data: SimData;
  private readonly bound: BoundTask;
  private readonly rng: Rng;
  private readonly actIds: Int32Array;
  private readonly ctrlLo: Float64Array;
  private readonly ctrlHi: Float64Array;
  private readonly nu: number;
  private queue: Float32Array[] = [];
  private goal = 0;
  private t = 0;
  private readonly stateBuf: Float32Array;
  /** The last `commandHistory` commands sent, newest first (empty without the option). */
  private commands: Float32Array[] = [];
  private readonly historySteps: number;
  private view?: string | CameraView;

  constructor(
    readonly taskDef: TaskDef,
    readonly model: SimModel,
    readonly profileDef: HardwareProfile,
    private readonly opts: EnvOptions = {},
    /** Whether dispose() also frees the model (false when a vectorized env shares it). */
    private readonly ownsModel = true,
  ) {
    this.bound = taskDef.bind(model);
    this.data = new SimData(model);
    this.rng = new Rng(opts.seed ?? 0);
    this.horizon = taskDef.horizon;
    const b = this.bound;
    this.nu = b.actuatorNames.length;
    this.actIds = Int32Array.from(b.actuatorNames.map((n) => model.id('mjOBJ_ACTUATOR', n)));
    const cr = model.raw.actuator_ctrlrange as Float64Array;
    this.ctrlLo = Float64Array.from(this.actIds, (id) => cr[2 * id]!);
    this.ctrlHi = Float64Array.from(this.actIds, (id) => cr[2 * id + 1]!);
    this.historySteps = opts.commandHistory ?? 0;
    this.layout = withCommandHistory(b.layout, b.actuatorNames, this.historySteps);
    // The command tail comes after the task's entries: their indices stand.
    if (b.derived) this.derived = b.derived;
    checkJointUnits(taskDef.name, model, b.layout);
    const nTask = layoutDim(b.layout), ns = layoutDim(this.layout);
    this.stateBuf = new Float32Array(nTask);
    const bounds = (task: Float32Array | undefined, fill: number, history: number) => {
      const v = new Float32Array(ns).fill(history);
      v.fill(fill, 0, nTask);
      if (task) v.set(task);
      return v;
    };
    this.observationSpace = {
      state: {
        kind: 'box',
        shape: [ns],
        low: bounds(b.stateLow, -Infinity, -1),
        high: bounds(b.stateHigh, Infinity, 1),
        names: layoutEntries(this.layout).map((e) => e.label),
      },
      instructions: b.instructions,
      ...(opts.image ? { image: { kind: 'image' as const, shape: [opts.image, opts.image, 3] as [number, number, 3] } } : {}),
    };
    this.actionSpace = {
      kind: 'box',
      shape: [this.nu],
      low: new Float32Array(this.nu).fill(-1),
      high: new Float32Array(this.nu).fill(1),
      names: b.actuatorNames.map((n, i) => `${n} (-1..1 -> ctrl ${this.ctrlLo[i]}..${this.ctrlHi[i]})`),
    };
    const jr = model.raw.jnt_range as Float64Array;
    const limited = model.raw.jnt_limited as Uint8Array;
    const jointNames = b.layout.joints.map((j) => j.name);
    this.spec = {
      jointNames,
      jointLimits: jointNames.map((n) => {
        const j = model.id('mjOBJ_JOINT', n);
        return limited[j] ? [jr[2 * j]!, jr[2 * j + 1]!] : [-Infinity, Infinity];
      }),
      actuatorNames: b.actuatorNames,
      controlHz: 1 / (model.timestep * taskDef.substeps),
    };
  }

  get task(): string {
    return this.taskDef.name;
  }

  get profile(): string {
    return this.profileDef.name;
  }

  reset(seed?: number): Obs {
    if (seed !== undefined) this.rng.seed(seed);
    this.data.reset(this.bound.keyframe);
    this.goal = this.bound.resetEpisode(this.data, this.rng);
    this.data.forward();
    this.t = 0;
    // The latency queue starts full of the action that holds the reset controls.
    const hold = this.actionFromCtrl();
    this.queue = Array.from({ length: this.profileDef.action_latency_steps }, () => hold.slice());
    this.commands = Array.from({ length: this.historySteps }, () => hold.slice());
    return this.observe();
  }

  /**
   * Reseeds the stream the episode draws its sensor noise and control jitter from, keeping the state: the
   * same start and the same actions then meet other noise (how far the robot's own randomness moves an outcome).
   */
  reseedNoise(seed: number): void {
    this.rng.seed(seed);
  }

  step(action: ArrayLike<number>): StepResult {
    if (action.length !== this.nu) throw new Error(`${this.task}: action has ${action.length} entries, expected ${this.nu}`);
    const a = new Float32Array(this.nu);
    for (let i = 0; i < this.nu; i++) {
      const v = action[i]!;
      a[i] = Number.isNaN(v) ? 0 : v < -1 ? -1 : v > 1 ? 1 : v;
    }
    this.queue.push(a);
    if (this.historySteps) {
      this.commands.pop();
      this.commands.unshift(a.slice());
    }
    const applied = this.queue.shift()!;
    const ctrl = this.data.raw.ctrl as Float64Array;
    const dead = this.profileDef.actuator_deadband;
    for (let i = 0; i < this.nu; i++) {
      const lo = this.ctrlLo[i]!;
      const v = applied[i]!;
      const u = dead > 0 ? (Math.abs(v) <= dead ? 0 : v - Math.sign(v) * dead) : v;
      ctrl[this.actIds[i]!] = lo + ((u + 1) / 2) * (this.ctrlHi[i]! - lo);
    }
    const j = this.profileDef.control_jitter_substeps;
    const substeps = Math.max(1, this.taskDef.substeps + (j > 0 ? this.rng.intIn(-j, j) : 0));
    this.data.step(substeps);
    this.t++;
    // mj_step leaves positions one substep stale; observations and rewards need only kinematics (cheaper than
    // mj_forward; render() runs the full mj_forward for cameras and lights)
    this.data.kinematics();
    const { reward, success } = this.bound.evaluate(this.data, this.goal, applied);
    const instruction = this.bound.instructions[this.goal]!;
    return {
      obs: this.observe(),
      reward,
      terminated: success,
      truncated: !success && this.t >= this.horizon,
      info: { success, instruction, appliedAction: applied, command: a.slice(), substeps, t: this.t },
    };
  }

  private actionFromCtrl(): Float32Array {
    const ctrl = this.data.raw.ctrl as Float64Array;
    return Float32Array.from(this.actIds, (id, i) => {
      const lo = this.ctrlLo[i]!;
      const hi = this.ctrlHi[i]!;
      return hi > lo ? Math.max(-1, Math.min(1, (2 * (ctrl[id]! - lo)) / (hi - lo) - 1)) : 0;
    });
  }

  private observe(): Obs {
    this.bound.observe(this.data, this.goal, this.stateBuf);
    const n = this.stateBuf.length;
    const state = new Float32Array(n + this.historySteps * this.nu);
    state.set(this.stateBuf);
    // Sensor noise is the sensors': the commands are what was sent, known exactly.
    const sd = this.profileDef.obs_noise_std;
    if (sd > 0) for (let i = 0; i < n; i++) state[i]! += sd * this.rng.normal();
    this.commands.forEach((c, k) => state.set(c, n + k * this.nu));
    const obs: Obs = { state, instruction: this.bound.instructions[this.goal]! };
    if (this.opts.image) obs.image = this.render();
    return obs;
  }

  render(size = this.opts.image ?? 64): Uint8Array {
    if (!Number.isInteger(size) || size < 1 || size > 1024) throw new Error(`render: size must be an integer in [1, 1024] px, got ${size}`);
    this.data.forward();
    return renderImage(this.model, this.data, this.camera(), size, size);
  }

  private camera(): string | CameraView {
    this.view ??= taskCamera(this.taskDef, this.model, this.bound.keyframe);
    return this.view;
  }

  /** The goal of the current episode: its index among the instructions and where it lies (when the task says). */
  goalOf(): { goal: number; position?: [number, number] } {
    return { goal: this.goal, ...(this.bound.goalPosition ? { position: this.bound.goalPosition(this.data, this.goal) } : {}) };
  }

  sceneStatic(): SceneStatic {
    return sceneStatic(this.model, this.data);
  }

  poses(): Float32Array {
    return bodyPoses(this.data);
  }

  expert(): Expert {
    return this.bound.expert();
  }

  get hasDemonstrator(): boolean {
    return this.bound.demonstrator !== undefined;
  }

  demonstrator(o: DemonstratorOptions): Demonstrator {
    if (!this.bound.demonstrator) throw new Error(`${this.task}: the task has no robust demonstrator (only its scripted expert); tasks with one: reach, push`);
    if (!(Number.isInteger(o.latencySteps) && o.latencySteps >= 0)) throw new Error(`${this.task}: demonstrator latencySteps must be a whole number >= 0, got ${o.latencySteps}`);
    return this.bound.demonstrator({ ...o, controlDt: 1 / this.spec.controlHz });
  }

  getState(): EnvState {
    return {
      physics: this.data.getState(),
      goal: this.goal,
      t: this.t,
      queue: this.queue.map((q) => q.slice()),
      ...(this.historySteps ? { commands: this.commands.map((c) => c.slice()) } : {}),
      rng: this.rng.getState(),
    };
  }

  setState(s: EnvState): void {
    this.data.setState(s.physics);
    this.goal = s.goal;
    this.t = s.t;
    this.queue = s.queue.map((q) => q.slice());
    if (this.historySteps) {
      if (s.commands?.length !== this.historySteps) throw new Error(`${this.task}: setState needs the last ${this.historySteps} commands (this env reports a command history), the state holds ${s.commands?.length ?? 0}`);
      this.commands = s.commands.map((c) => c.slice());
    }
    this.rng.setState(s.rng);
  }

  dispose(): void {
    this.bound.dispose?.();
    this.data.dispose();
    if (this.ownsModel) this.model.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** The task's camera; a scene without any gets a fixed view framing the robot in its reset pose. */
export function taskCamera(task: TaskDef, model: SimModel, keyframe: string | undefined): string | CameraView {
  if (task.camera !== '' || model.raw.ncam > 0) return task.camera;
  const d = new SimData(model);
  try {
    d.reset(keyframe);
    d.forward();
    return defaultView(model, d);
  } finally {
    d.dispose();
  }
}

export function resolveProfile(p: string | HardwareProfile | undefined): HardwareProfile {
  return typeof p === 'object' ? p : loadProfile(p ?? 'nominal');
}

/** Compiles a task's model under a profile and wraps it in an Env; the model is freed if that fails. */
export async function envForTask(task: TaskDef, o: { profile?: string | HardwareProfile; seed?: number; image?: number; commandHistory?: number }): Promise<Env> {
  const profile = resolveProfile(o.profile);
  const model = await loadTaskModel(task, profile);
  try {
    return new MjEnv(task, model, profile, { seed: o.seed, image: o.image, commandHistory: o.commandHistory });
  } catch (e) {
    model.dispose();
    throw e;
  }
}
