// A Gaussian MLP policy over a flat observation vector: mean = squash(MLP(normalized obs)) into the
// action bounds, state-independent log-std. The same module emits its forward pass into the acting
// graph, the training loss (pg.ts), the world model's fused imagination and the exported artifact.
import {
  Graph, MLP, ParamStore, Program, add, clip, div, exp, gaussianLogProb, maximum, minimum, mul, sub, tanh, tensor, f32,
  exportOnnx, type Activation, type ModelInfo, type Tensor, type ort,
} from '../nn/index.js';
import { diagonalGaussianEntropy, type FusedGraphPolicy, type Policy, type PolicyInputs } from './types.js';

/** What every Gaussian policy of the project (MLP, VLA, backbone head) is configured with besides its inputs. */
export interface GaussianHeadOptions {
  actDim: number;
  /** Hidden layer sizes (default [64, 64]). */
  hidden?: number[];
  /** Initial log standard deviation of every action dimension (default -0.5). */
  initLogStd?: number;
  /** Fixed observation normalization (obs − mean) / std, baked into every graph (default 0 / 1). */
  obsMean?: ArrayLike<number>;
  obsStd?: ArrayLike<number>;
  /** Action bounds the mean is squashed into (default ±1). Samples are not squashed: the robot clips. */
  actLow?: ArrayLike<number>;
  actHigh?: ArrayLike<number>;
  seed?: number;
}

export interface GaussianPolicyConfig extends GaussianHeadOptions {
  obsDim: number;
  activation?: Activation;
}

/** The parts of a config that fix the graph, resolved and stored with the parameters. */
export interface ResolvedPolicyConfig {
  obsDim: number;
  actDim: number;
  hidden: number[];
  activation: Activation;
  initLogStd: number;
  obsMean: number[];
  obsStd: number[];
  actLow: number[];
  actHigh: number[];
  seed: number;
}

export interface PolicyOutputs {
  /** Shape [..., A]: the squashed mean action. */
  mean: Tensor;
  /** Shape [A]. */
  logStd: Tensor;
}

export interface ActResult {
  /** Shape N x A: mean + std · noise (deterministic: the mean). */
  action: Float32Array;
  /** Shape N x A. */
  mean: Float32Array;
  /** Shape N: log-probability of `action` under the policy. */
  logProb: Float32Array;
}

/** Bounds every Gaussian policy of the project clamps its log standard deviation to. */
export const LOG_STD_MIN = -5;
export const LOG_STD_MAX = 1;

/** A per-dimension config vector (normalization, bounds): `fill` when absent, else n finite entries; `who` names the policy kind in errors. */
export function configVector(who: string, name: string, v: ArrayLike<number> | undefined, n: number, fill: number): number[] {
  if (v === undefined) return new Array<number>(n).fill(fill);
  if (v.length !== n) throw new Error(`${who}: ${name} has ${v.length} entries, expected ${n}`);
  const out = Array.from(v);
  if (!out.every(Number.isFinite)) throw new Error(`${who}: ${name} has a non-finite entry`);
  return out;
}
const vec = (name: string, v: ArrayLike<number> | undefined, n: number, fill: number) => configVector('policy', name, v, n, fill);

export function resolvePolicyConfig(c: GaussianPolicyConfig): ResolvedPolicyConfig {
  for (const k of ['obsDim', 'actDim'] as const) {
    if (!Number.isInteger(c[k]) || c[k] < 1) throw new Error(`policy: ${k} must be a positive integer, got ${c[k]}`);
  }
  const r: ResolvedPolicyConfig = {
    obsDim: c.obsDim,
    actDim: c.actDim,
    hidden: c.hidden ?? [64, 64],
    activation: c.activation ?? 'tanh',
    initLogStd: c.initLogStd ?? -0.5,
    obsMean: vec('obsMean', c.obsMean, c.obsDim, 0),
    obsStd: vec('obsStd', c.obsStd, c.obsDim, 1),
    actLow: vec('actLow', c.actLow, c.actDim, -1),
    actHigh: vec('actHigh', c.actHigh, c.actDim, 1),
    seed: c.seed ?? 0,
  };
  if (r.obsStd.some((s) => !(s > 0))) throw new Error('policy: obsStd entries must be > 0');
  if (r.actLow.some((lo, i) => !(lo < r.actHigh[i]!))) throw new Error('policy: actLow must be below actHigh in every dimension');
  return r;
}

export class GaussianPolicy implements Policy {
  readonly kind = 'gaussian_mlp';
  /** One action per decision. */
  readonly chunk = 1;
  readonly config: ResolvedPolicyConfig;
  readonly store: ParamStore;
  readonly net: MLP;
  private actProgram: Program | null = null;
  private logProbProgram: Program | null = null;

  constructor(config: GaussianPolicyConfig, readonly name = 'policy') {
    this.config = resolvePolicyConfig(config);
    const c = this.config;
    this.store = new ParamStore(c.seed);
    this.net = new MLP(this.store, `${name}.mlp`, { sizes: [c.obsDim, ...c.hidden, c.actDim], activation: c.activation });
    this.store.create(`${name}.log_std`, [c.actDim], 'zeros');
    this.store.set(`${name}.log_std`, new Array<number>(c.actDim).fill(c.initLogStd));
    // Small last layer: the initial mean sits near the middle of the action range.
    const last = this.net.layers.at(-1)!;
    const w = this.store.get(`${last.name}.weight`);
    this.store.set(`${last.name}.weight`, w.data.map((x) => x * 0.01));
  }

  get obsDim(): number {
    return this.config.obsDim;
  }

  get actDim(): number {
    return this.config.actDim;
  }

  paramNames(): string[] {
    return [...this.net.paramNames(), `${this.name}.log_std`];
  }

  meanParamNames(): string[] {
    return this.net.paramNames();
  }

  inputs(): PolicyInputs {
    return { obsDim: this.obsDim, obsMean: this.config.obsMean, obsStd: this.config.obsStd };
  }

  /** The observation vector is all this policy reads. */
  contextFeeds(): Record<string, ort.Tensor> {
    return {};
  }

  /** N: log-probability of `action` (N x A) under the policy at `obs` (N x D). */
  async logProb(obs: Float32Array, action: Float32Array): Promise<Float32Array> {
    const n = obs.length / this.obsDim;
    if (!Number.isInteger(n) || n < 1) throw new Error(`policy.logProb: obs has ${obs.length} values, not a multiple of obsDim ${this.obsDim}`);
    if (action.length !== n * this.actDim) throw new Error(`policy.logProb: action has ${action.length} values, expected ${n} x ${this.actDim}`);
    if (!this.logProbProgram) {
      const g = new Graph();
      const o = g.input('obs', ['N', this.obsDim]);
      const a = g.input('action', ['N', this.actDim]);
      const { mean, logStd } = this.forward(o);
      const params = this.paramNames().map((name) => ({ name, tensor: g.params.get(name)! }));
      this.logProbProgram = await Program.fromSpec({
        inputs: [{ name: 'obs', tensor: o }, { name: 'action', tensor: a }, ...params],
        outputs: [{ name: 'log_prob', tensor: gaussianLogProb(a, mean, logStd) }],
        graphName: 'policy_log_prob',
      }, { threads: 1 });
    }
    const out = await this.logProbProgram.run({ obs: tensor(obs, [n, this.obsDim]), action: tensor(action, [n, this.actDim]), ...this.paramFeeds() });
    return Float32Array.from(f32(out.log_prob));
  }

  /** Entropy of the action distribution (log-std is state-independent), with log-std clamped as in forward. */
  entropy(): number {
    return diagonalGaussianEntropy(Array.from(this.store.get(`${this.name}.log_std`).data, (v) => Math.min(LOG_STD_MAX, Math.max(LOG_STD_MIN, v))));
  }

  /** obs [..., D] → mean [..., A] in the action bounds, logStd [A] (clamped). */
  forward(obs: Tensor): PolicyOutputs {
    const c = this.config, g = obs.graph;
    const z = div(sub(obs, g.constant(c.obsMean, [c.obsDim])), g.constant(c.obsStd, [c.obsDim]));
    const half = c.actHigh.map((h, i) => (h - c.actLow[i]!) / 2);
    const mid = c.actHigh.map((h, i) => (h + c.actLow[i]!) / 2);
    const mean = add(mul(tanh(this.net.forward(z)), g.constant(half, [c.actDim])), g.constant(mid, [c.actDim]));
    const logStd = clip(g.param(`${this.name}.log_std`, [c.actDim]), LOG_STD_MIN, LOG_STD_MAX);
    return { mean, logStd };
  }

  /** Clamps [..., A] into the action bounds, per dimension. */
  clipToBounds(a: Tensor): Tensor {
    const c = this.config, g = a.graph;
    return minimum(maximum(a, g.constant(c.actLow, [c.actDim])), g.constant(c.actHigh, [c.actDim]));
  }

  /** Emits sampling: action = mean + exp(logStd) · noise, and its log-probability. */
  sample(obs: Tensor, noise: Tensor): { action: Tensor; mean: Tensor; logProb: Tensor } {
    const { mean, logStd } = this.forward(obs);
    const action = add(mean, mul(exp(logStd), noise));
    return { action, mean, logProb: gaussianLogProb(action, mean, logStd) };
  }

  /**
   * The policy as a graph for the world model's fused imagination (worldmodel's GraphPolicy, matched
   * structurally). Per step: `action` — the sample clipped to the action bounds, as a robot's safety
   * layer would send it (the model steps with it); `action_raw` — the sample itself, whose `logProb` the
   * policy gradient needs; `mean`. Without noise: the mean action only.
   */
  graphPolicy(): FusedGraphPolicy {
    return {
      store: this.store,
      noiseDim: this.actDim,
      build: (obs, noise): Record<string, Tensor> => {
        if (!noise) return { action: this.forward(obs).mean };
        const s = this.sample(obs, noise);
        return { action: this.clipToBounds(s.action), action_raw: s.action, logProb: s.logProb, mean: s.mean };
      },
    };
  }

  /** Param values as graph feeds (views, no copy): acting graphs take params as inputs so updates need no rebuild. */
  paramFeeds(): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = {};
    for (const n of this.paramNames()) {
      const v = this.store.get(n);
      feeds[n] = tensor(v.data, v.shape);
    }
    return feeds;
  }

  private async program(): Promise<Program> {
    if (this.actProgram) return this.actProgram;
    const g = new Graph();
    const obs = g.input('obs', ['N', this.obsDim]);
    const noise = g.input('noise', ['N', this.actDim]);
    const s = this.sample(obs, noise);
    const params = this.paramNames().map((name) => ({ name, tensor: g.params.get(name)! }));
    this.actProgram = await Program.fromSpec({
      inputs: [{ name: 'obs', tensor: obs }, { name: 'noise', tensor: noise }, ...params],
      outputs: [{ name: 'action', tensor: s.action }, { name: 'mean', tensor: s.mean }, { name: 'log_prob', tensor: s.logProb }],
      graphName: 'policy_act',
    }, { threads: 1 });
    return this.actProgram;
  }

  /**
   * Acts on a batch. `obs` N x D; `noise` N x A standard normal draws (zeros = the mean action).
   * The current store values are used, so call it after the trainer synced its parameters.
   */
  async act(obs: Float32Array, noise: Float32Array): Promise<ActResult> {
    const n = obs.length / this.obsDim;
    if (!Number.isInteger(n) || n < 1) throw new Error(`policy.act: obs has ${obs.length} values, not a multiple of obsDim ${this.obsDim}`);
    if (noise.length !== n * this.actDim) throw new Error(`policy.act: noise has ${noise.length} values, expected ${n} x ${this.actDim}`);
    for (let i = 0; i < obs.length; i++) if (!Number.isFinite(obs[i]!)) throw new Error(`policy.act: obs[${i}] is ${obs[i]}`);
    const p = await this.program();
    const out = await p.run({ obs: tensor(obs, [n, this.obsDim]), noise: tensor(noise, [n, this.actDim]), ...this.paramFeeds() });
    return { action: Float32Array.from(f32(out.action)), mean: Float32Array.from(f32(out.mean)), logProb: Float32Array.from(f32(out.log_prob)) };
  }

  /** Copies parameter values from another policy of the same shape (e.g. a reference or a checkpoint). */
  copyFrom(other: GaussianPolicy): void {
    if (JSON.stringify(other.config) !== JSON.stringify({ ...this.config, seed: other.config.seed })) {
      throw new Error('policy.copyFrom: the policies differ in shape or normalization');
    }
    const theirs = other.paramNames();
    this.paramNames().forEach((n, i) => this.store.set(n, other.store.get(theirs[i]!).data));
  }

  async release(): Promise<void> {
    await this.actProgram?.release();
    await this.logProbProgram?.release();
    this.actProgram = null;
    this.logProbProgram = null;
  }
}

/** Deployment facts written into an exported policy's metadata_props. */
export interface PolicyArtifactMeta {
  /** Observation entries with units, in the order of `obs`. */
  observationNames: string[];
  actionNames: string[];
  controlHz: number;
  policyVersion: string;
  runId: string;
  /** Anything else (e.g. the observation layout as JSON). */
  extra?: Record<string, unknown>;
}

/**
 * Writes the deployable artifact: one `.onnx` with input `obs` [batch, D] and output `action`
 * [batch, A] = the policy's mean action clipped to its bounds (deterministic, as a robot runs it).
 */
export function exportPolicy(policy: GaussianPolicy, path: string, meta: PolicyArtifactMeta): ModelInfo {
  const c = policy.config;
  if (meta.observationNames.length !== c.obsDim) throw new Error(`exportPolicy: ${meta.observationNames.length} observation names for obsDim ${c.obsDim}`);
  if (meta.actionNames.length !== c.actDim) throw new Error(`exportPolicy: ${meta.actionNames.length} action names for actDim ${c.actDim}`);
  const g = new Graph();
  const obs = g.input('obs', ['batch', c.obsDim]);
  const action = policy.clipToBounds(policy.forward(obs).mean);
  return exportOnnx(path, {
    inputs: [{ name: 'obs', tensor: obs, doc: `observation [batch, ${c.obsDim}]: ${meta.observationNames.join(', ')}` }],
    outputs: [{ name: 'action', tensor: action, doc: `action [batch, ${c.actDim}] in [${c.actLow.join(', ')}] .. [${c.actHigh.join(', ')}]: ${meta.actionNames.join(', ')}` }],
    store: policy.store,
    graphName: 'policy',
    docString: 'WMRL Bridge policy: the Gaussian policy\'s mean action, clipped to the action bounds.',
    metadata: {
      kind: 'wmrl.policy.gaussian_mlp',
      observation_names: meta.observationNames,
      action_names: meta.actionNames,
      action_low: c.actLow,
      action_high: c.actHigh,
      obs_mean: c.obsMean,
      obs_std: c.obsStd,
      control_hz: meta.controlHz,
      policy_version: meta.policyVersion,
      training_run: meta.runId,
      ...meta.extra,
    },
  });
}
