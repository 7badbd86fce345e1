// The digital twin of a task's scene: renders the task's camera image from an observation vector alone
// (the task's declared layout), never from a simulator's physics state. An image policy imagining inside
// a world model sees these renders of the model's *predicted* states (wmrl/imagine-policy.ts).
//
// Per state: the keyframe pose, then the layout's joint positions written into qpos (layout joints are the
// model's hinge/slide joints, by construction of the task), then the task's `pose` writes the object and
// target positions it declares; mj_forward (no physics step) and the ray caster (render.ts). What the
// layout does not declare stays at the keyframe: velocities (invisible), an object's height and
// orientation (push's cube turns, the twin draws it unturned), and derived features (the tip position is
// drawn where the joint angles put it, whatever the state vector says).
import { layoutDim, type ObservationLayout } from '../common/layout.js';
import { loadTaskModel, resolveProfile, taskCamera, withCommandHistory } from './env.js';
import { SimData, type SimModel } from './mujoco.js';
import { taskDef } from './registry.js';
import { renderImage, type CameraView } from './render.js';
import type { BoundTask, TaskDef } from './task.js';

export class SceneTwin implements Disposable {
  readonly layout: ObservationLayout;
  readonly dim: number;
  private readonly bound: BoundTask;
  private readonly data: SimData;
  private readonly camera: string | CameraView;
  /** qpos address of each layout joint. */
  private readonly jointAdr: Int32Array;

  private constructor(readonly task: TaskDef, private readonly model: SimModel, readonly size: number, commandHistory: number) {
    this.bound = task.bind(model);
    this.layout = withCommandHistory(this.bound.layout, this.bound.actuatorNames, commandHistory);
    this.dim = layoutDim(this.layout);
    if (this.bound.layout.features.length > 0 && !this.bound.pose) {
      this.bound.dispose?.();
      throw new Error(`twin: task '${task.name}' declares features but no pose(): the twin cannot place its objects`);
    }
    const adr = model.raw.jnt_qposadr as Int32Array;
    this.jointAdr = Int32Array.from(this.layout.joints, (j) => adr[model.id('mjOBJ_JOINT', j.name)]!);
    this.camera = taskCamera(task, model, this.bound.keyframe);
    this.data = new SimData(model);
  }

  /**
   * A twin of a task (a built-in name, a mapping file, or a TaskDef) rendering `size` x `size` images.
   * `commandHistory`: the states it renders end with the robot's last this many commands (sim/env.ts
   * EnvOptions.commandHistory), which the camera does not see.
   */
  static async create(task: string | TaskDef, size: number, opts: { commandHistory?: number } = {}): Promise<SceneTwin> {
    if (!Number.isInteger(size) || size < 1 || size > 1024) throw new Error(`twin: size must be an integer in [1, 1024] px, got ${size}`);
    const k = opts.commandHistory ?? 0;
    if (!(Number.isInteger(k) && k >= 0)) throw new Error(`twin: commandHistory must be a whole number >= 0, got ${k}`);
    const def = typeof task === 'string' ? taskDef(task) : task;
    // Profiles change masses, gains and latency, never what the camera sees.
    const model = await loadTaskModel(def, resolveProfile('nominal'));
    try {
      return new SceneTwin(def, model, size, k);
    } catch (e) {
      model.dispose();
      throw e;
    }
  }

  /** Bytes of one image (size x size x 3). */
  get imageBytes(): number {
    return this.size * this.size * 3;
  }

  /**
   * Images of N states (Shape N x D, the task's layout) → Shape N x size x size x 3 RGB, row-major.
   * `out` (N x size x size x 3) is filled when given.
   */
  render(states: Float32Array, out?: Uint8Array): Uint8Array {
    const D = this.dim, px = this.imageBytes;
    const n = states.length / D;
    if (!Number.isInteger(n) || n < 1) throw new Error(`twin: states have ${states.length} values, not a positive multiple of the layout's ${D}`);
    const img = out ?? new Uint8Array(n * px);
    if (img.length !== n * px) throw new Error(`twin: output has ${img.length} bytes, expected ${n} x ${this.size} x ${this.size} x 3`);
    for (let i = 0; i < n; i++) {
      const s = states.subarray(i * D, (i + 1) * D);
      const bad = s.findIndex((v) => !Number.isFinite(v));
      if (bad >= 0) throw new Error(`twin: state ${i} entry ${bad} is ${s[bad]}`);
      this.pose(s);
      renderImage(this.model, this.data, this.camera, this.size, this.size, img.subarray(i * px, (i + 1) * px));
    }
    return img;
  }

  /** Sets the twin's data to one state (Shape D) with kinematics, cameras and lights current. */
  private pose(state: Float32Array): void {
    this.data.reset(this.bound.keyframe);
    const q = this.data.raw.qpos as Float64Array;
    this.jointAdr.forEach((a, j) => (q[a] = state[j]!));
    this.bound.pose?.(this.data, state);
    this.data.forward();
  }

  dispose(): void {
    this.bound.dispose?.();
    this.data.dispose();
    this.model.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
