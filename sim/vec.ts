// N envs of one task and profile stepped per call, sharing one model (one MjData arena each).
import { MjEnv, loadTaskModel } from './env.js';
import type { SimModel } from './mujoco.js';
import { resolveProfile, taskDef, type MakeEnvOptions } from './registry.js';
import type { BoxSpace, ObservationSpace } from './types.js';

export interface VecStep {
  /** N x stateDim, row per env; rows of finished envs already hold the next episode's first observation. */
  obs: Float32Array;
  reward: Float32Array;
  terminated: Uint8Array;
  truncated: Uint8Array;
  success: Uint8Array;
  /** Last observation of each env that finished this step (null where it did not). */
  finalObs: Array<Float32Array | null>;
  instructions: string[];
}

/**
 * Finished envs reset in the same call (seeded `seed + n*episode + i`, so a run is reproducible), and
 * `finalObs` keeps what they saw last. Images are not batched; call `envs[i].render()` where needed.
 */
export class VecEnv implements Disposable {
  readonly envs: MjEnv[];
  readonly observationSpace: ObservationSpace;
  readonly actionSpace: BoxSpace;
  private episodes: number[];

  private constructor(
    private readonly model: SimModel,
    envs: MjEnv[],
    private readonly seed: number,
  ) {
    this.envs = envs;
    this.observationSpace = envs[0]!.observationSpace;
    this.actionSpace = envs[0]!.actionSpace;
    this.episodes = envs.map(() => 0);
  }

  static async create(n: number, o: Omit<MakeEnvOptions, 'image'>): Promise<VecEnv> {
    if (!(n >= 1)) throw new Error('VecEnv needs n >= 1');
    const task = taskDef(o.task);
    const profile = resolveProfile(o.profile);
    const model = await loadTaskModel(task, profile);
    const seed = o.seed ?? 0;
    const envs = Array.from({ length: n }, (_, i) => new MjEnv(task, model, profile, { seed: seed + i, commandHistory: o.commandHistory }, false));
    return new VecEnv(model, envs, seed);
  }

  get n(): number {
    return this.envs.length;
  }

  private episodeSeed(i: number): number {
    return this.seed + this.n * this.episodes[i]! + i;
  }

  reset(): Float32Array {
    const s = this.observationSpace.state.shape[0];
    const out = new Float32Array(this.n * s);
    this.envs.forEach((e, i) => {
      this.episodes[i] = 0;
      out.set(e.reset(this.episodeSeed(i)).state, i * s);
    });
    return out;
  }

  /** `actions`: N x actionDim, row per env. */
  step(actions: Float32Array): VecStep {
    const a = this.actionSpace.shape[0];
    const s = this.observationSpace.state.shape[0];
    if (actions.length !== this.n * a) throw new Error(`VecEnv.step: expected ${this.n * a} numbers, got ${actions.length}`);
    const r: VecStep = {
      obs: new Float32Array(this.n * s),
      reward: new Float32Array(this.n),
      terminated: new Uint8Array(this.n),
      truncated: new Uint8Array(this.n),
      success: new Uint8Array(this.n),
      finalObs: new Array<Float32Array | null>(this.n).fill(null),
      instructions: new Array<string>(this.n),
    };
    for (let i = 0; i < this.n; i++) {
      const env = this.envs[i]!;
      const res = env.step(actions.subarray(i * a, (i + 1) * a));
      r.reward[i] = res.reward;
      r.terminated[i] = res.terminated ? 1 : 0;
      r.truncated[i] = res.truncated ? 1 : 0;
      r.success[i] = res.info.success ? 1 : 0;
      r.instructions[i] = res.info.instruction;
      let obs = res.obs;
      if (res.terminated || res.truncated) {
        r.finalObs[i] = res.obs.state;
        this.episodes[i]!++;
        obs = env.reset(this.episodeSeed(i));
        r.instructions[i] = obs.instruction;
      }
      r.obs.set(obs.state, i * s);
    }
    return r;
  }

  dispose(): void {
    for (const e of this.envs) e.dispose();
    this.model.dispose();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
