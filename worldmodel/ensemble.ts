// The probabilistic ensemble dynamics model (PETS / mbrl-lib style): E members batched in one weight tensor
// per layer, each predicting from (obs, action) a Gaussian over the next-observation delta, a dense reward
// and a success logit. Inputs and targets are standardized with statistics stored beside the weights.
import * as nn from '../nn/index.js';
import { validateDerived, type DerivedEntries } from '../common/derived.js';
import { bootstrapIndices, checkRows, contextLength, deltaRows, firstNonFinite, fitNormalizer, historyLength, repeatContext, inputRows, selectTransitions, splitIndices, validateTransitions, type Normalizer, type Transitions } from './dataset.js';

const PREFIX = 'wm';
const P = {
  maxLogVar: `${PREFIX}.max_logvar`,
  minLogVar: `${PREFIX}.min_logvar`,
  inMean: `${PREFIX}.norm.in_mean`,
  inStd: `${PREFIX}.norm.in_std`,
  deltaMean: `${PREFIX}.norm.delta_mean`,
  deltaStd: `${PREFIX}.norm.delta_std`,
  reward: `${PREFIX}.norm.reward`,
  context: `${PREFIX}.context`,
};
const HALF_LOG_2PI = 0.5 * Math.log(2 * Math.PI);

export interface EnsembleConfig {
  dObs: number;
  dAct: number;
  /** Ensemble members E (default 5). */
  members?: number;
  /** Hidden layer widths of the dynamics network (default [200, 200, 200]). */
  hidden?: number[];
  /** Hidden layer widths of the reward and success network (default: `hidden`). */
  rewardHidden?: number[];
  activation?: nn.Activation;
  /** Names of the observation entries (with units), written into the exported model. */
  obsNames?: string[];
  actionNames?: string[];
  /**
   * Past actions the model sees besides the current one (default 0): with h > 0 it conditions on the h
   * actions sent before, so it can learn actuation latency from a robot's episodes. Transitions then carry
   * `history`, and the model env keeps each rollout's last h actions.
   */
  actionHistory?: number;
  /**
   * The observation ends with the last this many commands sent, newest first, dAct entries each, clipped to
   * [-1, 1] (a robot made with sim/env.ts `commandHistory`): they are not dynamics, so the model env sets them
   * from the actions it takes instead of taking the model's prediction, identification does not score them
   * (`dynamicsDims`), and the model does not read them (`heads`). Default 0.
   */
  commandHistory?: number;
  /**
   * The observation's identities (common/derived.ts), as the task declares them: entries held constant within an
   * episode and entries computed from others (a tip from the joint angles). The model still predicts every entry;
   * imagination (the model env) restores these after each predicted step. Default: none.
   */
  derived?: DerivedEntries;
  /**
   * Names of the context entries, with their unit (e.g. 'log mass_scale'): the model is then conditioned on a
   * context of that many values — physical parameters the observation does not show, varied across the sim
   * data it is fitted on (Transitions.context). Imagination uses the model's current context (`setContext`),
   * identified from robot episodes by `identifyContext`. Default: none.
   */
  contextNames?: string[];
  /** Seed of the weight initialization. */
  seed?: number;
}

export interface FitOptions {
  /** Maximum passes over the training set (default 50). */
  epochs?: number;
  /** Stop after this many epochs without a better validation loss and keep the best epoch's parameters; omit to run all epochs and keep the last. */
  patience?: number;
  /** Rows per member per step (default 256). */
  batchSize?: number;
  lr?: number;
  weightDecay?: number;
  /** Held-out fraction of `data` when `val` is not given (default 0.1). */
  valFraction?: number;
  /** An explicit validation set (e.g. whole held-out episodes); then all of `data` is trained on. */
  val?: Transitions;
  /** Each member trains on its own resample with replacement (default true); off: every member sees all rows, in its own order. */
  bootstrap?: boolean;
  /** Refit the normalization statistics to `data` (default: only on a model's first fit, so a refit continues in the same units). */
  renormalize?: boolean;
  /** Seed of the split, the bootstrap and the minibatch order (default 0). */
  seed?: number;
  /**
   * false: fit the reward and success heads only, the dynamics left as they are (a refit whose dynamics
   * multi-step fitting continues, worldmodel/multistep.ts). Default true.
   */
  dynamics?: boolean;
  onEpoch?: (r: EpochReport) => void;
}

/** Held-out metrics; weight-averaged over rows when the transitions carry weights. */
export interface EvalReport {
  /** Gaussian NLL per next-obs dimension in normalized delta units, averaged over members, rows and the modeled dims. */
  nll: number;
  /** The same, per dimension: Shape dObs; NaN for dims not modeled (constant in the training data). */
  nllPerDim: Float32Array;
  /** Squared error of the members' mean next observation, raw units, averaged over all dims. */
  mse: number;
  /** The same in normalized delta units (each dim divided by its delta std), over the modeled dims. */
  mseNorm: number;
  /**
   * `nll` and `mseNorm` over the dynamics entries alone (`dynamicsDims`: not the command tail), what identification
   * scores; NaN for a model without one.
   */
  dynamics: { nll: number; mseNorm: number };
  /** Squared error of the members' mean reward, raw units. */
  rewardMse: number;
  /** Binary cross-entropy of the members' mean success probability. */
  successBce: number;
  /** The training objective (NLL + normalized reward MSE + success BCE, members averaged), used for early stopping. */
  loss: number;
}

export interface EpochReport {
  epoch: number;
  steps: number;
  trainLoss: number;
  val: EvalReport;
}

export interface FitReport {
  epochs: number;
  steps: number;
  /** The epoch whose parameters the model now holds (1-based). */
  keptEpoch: number;
  trainSize: number;
  valSize: number;
  history: EpochReport[];
  /** Validation metrics of the kept parameters. */
  val: EvalReport;
}

/** Per-member predictions for n rows, in raw units. */
export interface Prediction {
  /** Shape E x n x dObs: obs + predicted delta mean. */
  nextObsMean: Float32Array;
  /** Shape E x n x dObs: predicted (aleatoric) variance of the next observation. */
  nextObsVar: Float32Array;
  /** Shape E x n. */
  reward: Float32Array;
  /** Shape E x n. */
  successProb: Float32Array;
}

/** Graph tensors of one model evaluation; E members, batch B. */
export interface Heads {
  /** Normalized delta mean: [E, B, dObs]. */
  mu: nn.Tensor;
  /** Soft-bounded log-variance of the normalized delta: [E, B, dObs]. */
  logVar: nn.Tensor;
  /** Normalized reward: [E, B]. */
  reward: nn.Tensor;
  /** Success logit: [E, B]. */
  successLogit: nn.Tensor;
}

/** Graph tensors of one model-env step for B rollouts. */
export interface StepTensors {
  /** [B, dObs] */
  nextObs: nn.Tensor;
  /** [B] */
  reward: nn.Tensor;
  /** [B] */
  successProb: nn.Tensor;
  /** [B]: members' variance of the normalized delta mean, averaged over the modeled dims. */
  disagreement: nn.Tensor;
  /** [E, B]: every member's reward prediction at the same (obs, action). */
  memberReward: nn.Tensor;
}

export class EnsembleModel {
  readonly store: nn.ParamStore;
  readonly members: number;
  readonly hidden: number[];
  readonly rewardHidden: number[];
  /** Dynamics: [delta mean, raw log-variance] per member. */
  readonly net: nn.EnsembleMLP;
  /**
   * Reward and success logit per member: a network apart from the dynamics, whose precision-weighted NLL
   * gradients would otherwise swamp a shared trunk and leave the reward head almost untrained.
   */
  readonly rewardNet: nn.EnsembleMLP;
  private normalized = false;
  private forwardProgram: Promise<{ prog: nn.Program; params: string[] }> | null = null;

  constructor(readonly config: EnsembleConfig) {
    const { dObs, dAct } = config;
    for (const [k, v] of [['dObs', dObs], ['dAct', dAct]] as const) if (!(Number.isInteger(v) && v > 0)) throw new Error(`ensemble: ${k} must be a positive integer, got ${v}`);
    if (config.obsNames && config.obsNames.length !== dObs) throw new Error(`ensemble: ${config.obsNames.length} obsNames for dObs ${dObs}`);
    if (config.actionNames && config.actionNames.length !== dAct) throw new Error(`ensemble: ${config.actionNames.length} actionNames for dAct ${dAct}`);
    const h = config.actionHistory ?? 0;
    if (!(Number.isInteger(h) && h >= 0)) throw new Error(`ensemble: actionHistory must be a non-negative integer, got ${h}`);
    const k = config.commandHistory ?? 0;
    if (!(Number.isInteger(k) && k >= 0)) throw new Error(`ensemble: commandHistory must be a non-negative integer, got ${k}`);
    if (k * dAct > dObs) throw new Error(`ensemble: commandHistory ${k} x dAct ${dAct} entries do not fit in dObs ${dObs}`);
    if (config.derived) validateDerived(config.derived, dObs, dObs - k * dAct);
    const c = config.contextNames?.length ?? 0;
    const dIn = dObs + dAct * (1 + h) + c;
    this.members = config.members ?? 5;
    this.hidden = config.hidden ?? [200, 200, 200];
    this.store = new nn.ParamStore(config.seed ?? 0);
    this.rewardHidden = config.rewardHidden ?? this.hidden;
    const activation = config.activation ?? 'silu';
    this.net = new nn.EnsembleMLP(this.store, `${PREFIX}.net`, this.members, { sizes: [dIn, ...this.hidden, 2 * dObs], activation });
    this.rewardNet = new nn.EnsembleMLP(this.store, `${PREFIX}.reward_net`, this.members, { sizes: [dIn, ...this.rewardHidden, 2], activation });
    // PETS bounds: log-variance is softly kept within learned [min, max].
    this.store.create(P.maxLogVar, [1, dObs], 'zeros').data.fill(0.5);
    this.store.create(P.minLogVar, [1, dObs], 'zeros').data.fill(-10);
    this.store.create(P.inMean, [dIn], 'zeros');
    this.store.create(P.inStd, [dIn], 'ones');
    this.store.create(P.deltaMean, [dObs], 'zeros');
    this.store.create(P.deltaStd, [dObs], 'ones');
    this.store.create(P.reward, [2], 'zeros').data[1] = 1;
    if (c > 0) this.store.create(P.context, [1, c], 'zeros');
  }

  get dObs(): number {
    return this.config.dObs;
  }

  get dAct(): number {
    return this.config.dAct;
  }

  /** The observation's identities imagination restores after each step (EnsembleConfig.derived); undefined: none. */
  get derived(): DerivedEntries | undefined {
    return this.config.derived;
  }

  /** Past actions per input (0: none). */
  get actionHistory(): number {
    return this.config.actionHistory ?? 0;
  }

  /** Commands sent at the end of each observation, newest first (0: none; EnsembleConfig.commandHistory). */
  get commandHistory(): number {
    return this.config.commandHistory ?? 0;
  }

  /**
   * The entries whose prediction is dynamics, what identification (identifyDelay, identifyContext) scores: every
   * modeled entry (not constant in the training data) but the command tail, which the model env sets from the
   * actions sent (a robot reports the commands it was sent, whatever its actuators applied when).
   */
  get dynamicsDims(): number[] {
    const tail = this.dObs - this.commandHistory * this.dAct;
    return Array.from(this.normalizer.deltaStd, (sd, j) => (sd > 0 && j < tail ? j : -1)).filter((j) => j >= 0);
  }

  /** Context entries the model is conditioned on (0: none). */
  get contextDim(): number {
    return this.config.contextNames?.length ?? 0;
  }

  /** The context imagination and prediction use where none is given per row (a copy; c values). */
  get context(): Float32Array {
    return this.contextDim > 0 ? this.store.get(P.context).data.slice() : new Float32Array(0);
  }

  /** Sets the context every later prediction and imagination uses where none is given per row (the robot's identified one). */
  setContext(values: ArrayLike<number>): void {
    if (values.length !== this.contextDim) throw new Error(`ensemble: a context of ${values.length} values for a model of ${this.contextDim} (${(this.config.contextNames ?? []).join(', ') || 'none'})`);
    const v = Float32Array.from(values);
    const bad = firstNonFinite(v);
    if (bad >= 0) throw new Error(`ensemble: context entry ${bad} (${this.config.contextNames![bad]}) is not finite (${v[bad]})`);
    this.store.set(P.context, v);
  }

  /** Input width: observation, action, the past actions and the context. */
  get dIn(): number {
    return this.dObs + this.dAct * (1 + this.actionHistory) + this.contextDim;
  }

  get normalizer(): Normalizer {
    const g = (n: string) => this.store.get(n).data;
    return { inMean: g(P.inMean), inStd: g(P.inStd), deltaMean: g(P.deltaMean), deltaStd: g(P.deltaStd), rewardMean: g(P.reward)[0]!, rewardStd: g(P.reward)[1]! };
  }

  private setNormalizer(n: Normalizer): void {
    this.store.set(P.inMean, n.inMean);
    this.store.set(P.inStd, n.inStd);
    this.store.set(P.deltaMean, n.deltaMean);
    this.store.set(P.deltaStd, n.deltaStd);
    this.store.set(P.reward, [n.rewardMean, n.rewardStd]);
    this.normalized = true;
  }

  // ---------------------------------------------------------------- graph pieces

  /**
   * The members' heads for already-normalized inputs x: [B, dIn] or [E, B, dIn]. The observation's command tail
   * (commandHistory) is not an input: it reports the commands sent, the actions and history report those applied,
   * and on the sim the model learns from the two are the same, so a model that read both would meet a combination
   * it never saw on every step of a robot with latency (the commands it reports ahead of those its actuators apply).
   */
  heads(x: nn.Tensor): Heads {
    const { dObs, dAct, commandHistory: k } = this;
    const g = x.graph;
    if (k > 0) x = nn.mul(x, g.constant(Array.from({ length: this.dIn }, (_, j) => (j >= dObs - k * dAct && j < dObs ? 0 : 1)), [this.dIn]));
    const out = this.net.forward(x);
    const rs = this.rewardNet.forward(x);
    const raw = nn.slice(out, 2, dObs, 2 * dObs);
    const hi = g.param(P.maxLogVar, [1, dObs]);
    const lo = g.param(P.minLogVar, [1, dObs]);
    const logVar = nn.add(lo, nn.softplus(nn.sub(nn.sub(hi, nn.softplus(nn.sub(hi, raw))), lo)));
    return {
      mu: nn.slice(out, 2, 0, dObs),
      logVar,
      reward: nn.squeeze(nn.slice(rs, 2, 0, 1), [2]),
      successLogit: nn.squeeze(nn.slice(rs, 2, 1, 2), [2]),
    };
  }

  /**
   * Normalizes raw obs [B, dObs], action [B, dAct], (with action history h) history [B, h·dAct] and (with a
   * context) context [B, c] — omitted: the model's current context for every row — in the graph, then `heads`.
   */
  rawHeads(obs: nn.Tensor, action: nn.Tensor, history?: nn.Tensor, context?: nn.Tensor): Heads {
    const g = obs.graph;
    const dIn = this.dIn;
    const parts = [obs, action, ...this.historyPart(history), ...this.contextPart(obs, context)];
    const x = nn.div(nn.sub(nn.concat(parts, 1), g.param(P.inMean, [dIn])), g.param(P.inStd, [dIn]));
    return this.heads(x);
  }

  /** The history tensor as an input part, checked against the model's action history. */
  private historyPart(history?: nn.Tensor): nn.Tensor[] {
    const hw = this.actionHistory * this.dAct;
    if (hw === 0) {
      if (history) throw new Error('ensemble: a history was given to a model without action history');
      return [];
    }
    if (!history) throw new Error(`ensemble: the model conditions on ${this.actionHistory} past actions; pass history [B, ${hw}]`);
    if (history.rank !== 2 || history.shape[1] !== hw) throw new Error(`ensemble: history has shape [${history.shape.join(', ')}], expected [B, ${hw}]`);
    return [history];
  }

  /** The context as an input part: the given rows, or the model's current context broadcast over obs's rows. */
  private contextPart(obs: nn.Tensor, context?: nn.Tensor): nn.Tensor[] {
    const c = this.contextDim;
    if (c === 0) {
      if (context) throw new Error('ensemble: a context was given to a model without one');
      return [];
    }
    if (context) {
      if (context.rank !== 2 || context.shape[1] !== c) throw new Error(`ensemble: context has shape [${context.shape.join(', ')}], expected [B, ${c}]`);
      return [context];
    }
    // [B, 1] zeros + [1, c] → [B, c]
    return [nn.add(nn.mul(nn.slice(obs, 1, 0, 1), 0), obs.graph.param(P.context, [1, c]))];
  }

  /** Raw-unit delta mean [E, B, dObs] from normalized `mu`. */
  private denormDelta(mu: nn.Tensor): nn.Tensor {
    const g = mu.graph;
    return nn.add(nn.mul(mu, g.param(P.deltaStd, [this.dObs])), g.param(P.deltaMean, [this.dObs]));
  }

  private denormReward(r: nn.Tensor): nn.Tensor {
    const g = r.graph;
    const s = g.param(P.reward, [2]);
    return nn.add(nn.mul(r, nn.squeeze(nn.slice(s, 0, 1, 2), [0])), nn.squeeze(nn.slice(s, 0, 0, 1), [0]));
  }

  /**
   * One model-env step for B rollouts, emitted into obs's graph.
   * `obs` [B, dObs], `action` [B, dAct], `mix` [E, B] member weights per rollout (one-hot: that member;
   * 1/E everywhere: the members' mean), `noise` [B, dObs] standard normal (zeros: no aleatoric sampling)
   * scaled by the mixed members' predicted standard deviation.
   */
  stepGraph(obs: nn.Tensor, action: nn.Tensor, mix: nn.Tensor, noise: nn.Tensor, history?: nn.Tensor): StepTensors {
    const h = this.rawHeads(obs, action, history);
    const w = nn.unsqueeze(mix, [2]);
    const mu = nn.sum(nn.mul(w, h.mu), 0);
    const std = nn.exp(nn.mul(nn.sum(nn.mul(w, h.logVar), 0), 0.5));
    const deltaN = nn.add(mu, nn.mul(std, noise));
    const nextObs = nn.add(obs, nn.add(nn.mul(deltaN, obs.graph.param(P.deltaStd, [this.dObs])), obs.graph.param(P.deltaMean, [this.dObs])));
    const memberReward = this.denormReward(h.reward);
    const centered = nn.sub(h.mu, nn.mean(h.mu, 0, true));
    // Unmodeled (constant) dims have arbitrary member outputs: they do not count.
    const modeled = nn.toFloat(nn.greater(obs.graph.param(P.deltaStd, [this.dObs]), 0));
    const perDim = nn.mul(nn.mean(nn.square(centered), 0), modeled);
    return {
      nextObs,
      reward: nn.sum(nn.mul(mix, memberReward), 0),
      successProb: nn.sum(nn.mul(mix, nn.sigmoid(h.successLogit)), 0),
      disagreement: nn.div(nn.sum(perDim, -1), nn.maximum(nn.sum(modeled), 1)),
      memberReward,
    };
  }

  /** Names of every parameter a graph of this model may read (weights, log-variance bounds, normalization). */
  paramNames(): string[] {
    return this.store.names();
  }

  /** ORT tensors of the current parameter values, by name, for graphs that take parameters as inputs. */
  paramFeeds(names: readonly string[] = this.paramNames()): Record<string, nn.ort.Tensor> {
    const feeds: Record<string, nn.ort.Tensor> = {};
    for (const n of names) {
      const v = this.store.get(n);
      feeds[n] = new nn.ort.Tensor('float32', v.data, v.shape);
    }
    return feeds;
  }

  // ---------------------------------------------------------------- prediction

  private async forward(): Promise<{ prog: nn.Program; params: string[] }> {
    this.forwardProgram ??= (async () => {
      const g = new nn.Graph();
      const obs = g.input('obs', ['batch', this.dObs]);
      const action = g.input('action', ['batch', this.dAct]);
      const history = this.actionHistory > 0 ? g.input('history', ['batch', this.actionHistory * this.dAct]) : undefined;
      const context = this.contextDim > 0 ? g.input('context', ['batch', this.contextDim]) : undefined;
      const h = this.rawHeads(obs, action, history, context);
      const params = [...g.params.keys()];
      const prog = await nn.Program.fromSpec({
        inputs: [{ name: 'obs', tensor: obs }, { name: 'action', tensor: action }, ...(history ? [{ name: 'history', tensor: history }] : []), ...(context ? [{ name: 'context', tensor: context }] : []), ...params.map((n) => ({ name: n, tensor: g.params.get(n)! }))],
        outputs: [
          { name: 'mu', tensor: h.mu },
          { name: 'log_var', tensor: h.logVar },
          { name: 'reward', tensor: h.reward },
          { name: 'success_logit', tensor: h.successLogit },
        ],
      });
      return { prog, params };
    })();
    return this.forwardProgram;
  }

  /** Normalized head outputs for raw rows: mu, logVar Shape E x n x dObs; reward (normalized), successLogit Shape E x n. */
  private async rawPredict(obs: Float32Array, action: Float32Array, history?: Float32Array, context?: Float32Array): Promise<{ n: number; mu: Float32Array; logVar: Float32Array; reward: Float32Array; successLogit: Float32Array }> {
    const n = checkRows('predict obs', obs, this.dObs);
    checkRows('predict action', action, this.dAct, n);
    const hw = this.actionHistory * this.dAct;
    if (hw > 0 && !history) throw new Error(`predict: the model conditions on ${this.actionHistory} past actions; pass history (Shape n x ${hw})`);
    if (hw === 0 && history) throw new Error('predict: a history was given to a model without action history');
    if (history) checkRows('predict history', history, hw, n);
    const c = this.contextDim;
    if (c === 0 && context) throw new Error('predict: a context was given to a model without one');
    if (context) checkRows('predict context', context, c, n);
    const ctx = c > 0 ? context ?? repeatContext(this.context, n) : null;
    const { prog, params } = await this.forward();
    const out = await prog.run({ obs: nn.tensor(obs, [n, this.dObs]), action: nn.tensor(action, [n, this.dAct]), ...(history ? { history: nn.tensor(history, [n, hw]) } : {}), ...(ctx ? { context: nn.tensor(ctx, [n, c]) } : {}), ...this.paramFeeds(params) });
    return { n, mu: nn.f32(out.mu), logVar: nn.f32(out.log_var), reward: nn.f32(out.reward), successLogit: nn.f32(out.success_logit) };
  }

  /**
   * Every member's prediction for rows (obs Shape n x dObs, action Shape n x dAct, with action history h:
   * history Shape n x h·dAct; with a context: context Shape n x c, omitted: the model's current one), in raw units.
   */
  async predict(obs: Float32Array, action: Float32Array, history?: Float32Array, context?: Float32Array): Promise<Prediction> {
    const r = await this.rawPredict(obs, action, history, context);
    const { dObs, members: E } = this;
    const nz = this.normalizer;
    const nextObsMean = new Float32Array(E * r.n * dObs);
    const nextObsVar = new Float32Array(E * r.n * dObs);
    for (let e = 0; e < E; e++) {
      for (let i = 0; i < r.n; i++) {
        for (let j = 0; j < dObs; j++) {
          const k = (e * r.n + i) * dObs + j;
          nextObsMean[k] = obs[i * dObs + j]! + r.mu[k]! * nz.deltaStd[j]! + nz.deltaMean[j]!;
          nextObsVar[k] = Math.exp(r.logVar[k]!) * nz.deltaStd[j]! ** 2;
        }
      }
    }
    return {
      nextObsMean,
      nextObsVar,
      reward: Float32Array.from(r.reward, (v) => v * nz.rewardStd + nz.rewardMean),
      successProb: Float32Array.from(r.successLogit, (z) => 1 / (1 + Math.exp(-z))),
    };
  }

  /** Held-out metrics on `data` (see EvalReport). */
  async evaluate(data: Transitions): Promise<EvalReport> {
    this.checkDims(data);
    const n = validateTransitions(data, 'evaluate');
    if (n === 0) throw new Error('evaluate: no transitions');
    const { dObs, members: E } = this;
    const nz = this.normalizer;
    const r = await this.rawPredict(data.obs, data.action, data.history, data.context);
    const delta = deltaRows(data);
    const w = data.weight ?? new Float32Array(n).fill(1);
    const wSum = w.reduce((a, b) => a + b, 0);
    // The reward metrics average over the rows whose reward is the dense signal (rewardKnown).
    const known = data.rewardKnown ?? new Float32Array(n).fill(1);
    const wKnown = w.reduce((a, b, i) => a + b * known[i]!, 0);
    const modeled = Array.from({ length: dObs }, (_, j) => j).filter((j) => nz.deltaStd[j]! > 0);
    const nllPerDim = new Float64Array(dObs).fill(NaN), msePerDim = new Float64Array(dObs).fill(NaN);
    for (const j of modeled) nllPerDim[j] = msePerDim[j] = 0;
    const dyn = this.dynamicsDims;
    let mse = 0, mseNorm = 0, rewardMse = 0, rewardMseNorm = 0, bce = 0, memberBce = 0;
    for (let i = 0; i < n; i++) {
      const wi = w[i]! / wSum;
      for (let j = 0; j < dObs; j++) {
        const d = delta[i * dObs + j]! - nz.deltaMean[j]!;
        if (nz.deltaStd[j] === 0) {
          mse += (wi * d ** 2) / dObs;
          continue;
        }
        const y = d / nz.deltaStd[j]!;
        let muMean = 0;
        for (let e = 0; e < E; e++) {
          const k = (e * n + i) * dObs + j;
          nllPerDim[j]! += (wi * (0.5 * ((r.mu[k]! - y) ** 2 * Math.exp(-r.logVar[k]!) + r.logVar[k]!) + HALF_LOG_2PI)) / E;
          muMean += r.mu[k]! / E;
        }
        mseNorm += (wi * (muMean - y) ** 2) / modeled.length;
        msePerDim[j]! += wi * (muMean - y) ** 2;
        mse += (wi * ((muMean - y) * nz.deltaStd[j]!) ** 2) / dObs;
      }
      const yr = (data.reward[i]! - nz.rewardMean) / nz.rewardStd;
      const wr = wKnown > 0 ? (w[i]! * known[i]!) / wKnown : 0;
      let rMean = 0, pMean = 0;
      const s = data.success[i]!;
      for (let e = 0; e < E; e++) {
        const z = r.successLogit[e * n + i]!;
        rMean += r.reward[e * n + i]! / E;
        pMean += 1 / (1 + Math.exp(-z)) / E;
        rewardMseNorm += (wr * (r.reward[e * n + i]! - yr) ** 2) / E;
        memberBce += (wi * (softplus(z) - s * z)) / E;
      }
      rewardMse += wr * ((rMean - yr) * nz.rewardStd) ** 2;
      const p = Math.min(Math.max(pMean, 1e-7), 1 - 1e-7);
      bce += -wi * (s * Math.log(p) + (1 - s) * Math.log(1 - p));
    }
    const nll = modeled.length ? modeled.reduce((a, j) => a + nllPerDim[j]!, 0) / modeled.length : 0;
    const over = (perDim: Float64Array) => (dyn.length ? dyn.reduce((a, j) => a + perDim[j]!, 0) / dyn.length : NaN);
    return { nll, nllPerDim: Float32Array.from(nllPerDim), mse, mseNorm, dynamics: { nll: over(nllPerDim), mseNorm: over(msePerDim) }, rewardMse, successBce: bce, loss: nll - HALF_LOG_2PI + 0.5 * rewardMseNorm + memberBce };
  }

  private checkDims(t: Transitions): void {
    if (t.dObs !== this.dObs || t.dAct !== this.dAct) throw new Error(`ensemble: transitions have dims (obs ${t.dObs}, action ${t.dAct}), the model (obs ${this.dObs}, action ${this.dAct})`);
    if (t.reward.length > 0 && historyLength(t) !== this.actionHistory) throw new Error(`ensemble: transitions carry ${historyLength(t)} past actions per row, the model conditions on ${this.actionHistory}`);
    // Without a per-row context, evaluation uses the model's current one; fitting needs every row's.
    if (t.context && contextLength(t) !== this.contextDim) throw new Error(`ensemble: transitions carry ${contextLength(t)} context entries per row, the model is conditioned on ${this.contextDim}`);
  }

  // ---------------------------------------------------------------- fitting

  /**
   * Fits (or, called again, continues fitting) the ensemble: per-member bootstrap resamples, minibatch Adam
   * on the Gaussian NLL of the normalized delta + reward MSE + success BCE, each row's loss times its weight
   * (the reward MSE only on rows whose `rewardKnown` is 1).
   * Parameters continue from their current values; the optimizer state starts fresh on each call.
   */
  async fit(data: Transitions, opts: FitOptions = {}): Promise<FitReport> {
    this.checkDims(data);
    if (this.contextDim > 0 && !data.context) throw new Error(`fit: the model is conditioned on a context (${this.config.contextNames!.join(', ')}); every transition must carry its own`);
    const n = validateTransitions(data, 'fit');
    const rng = new nn.Rng(opts.seed ?? 0);
    let train = data, val: Transitions;
    if (opts.val) {
      this.checkDims(opts.val);
      if (validateTransitions(opts.val, 'fit val') === 0) throw new Error('fit: the validation set is empty');
      val = opts.val;
    } else {
      const split = splitIndices(n, opts.valFraction ?? 0.1, rng);
      train = selectTransitions(data, split.train);
      val = selectTransitions(data, split.val);
    }
    const nTrain = train.reward.length;
    if (nTrain === 0) throw new Error('fit: no training transitions');
    if (opts.renormalize || !this.normalized) this.setNormalizer(fitNormalizer(train));
    const { dObs, members: E, dIn } = this;
    const batch = Math.min(opts.batchSize ?? 256, nTrain);
    const epochs = opts.epochs ?? 50;

    // Standardized rows, computed once; minibatches gather from them.
    const nz = this.normalizer;
    const X = inputRows(train).map((v, k) => (v - nz.inMean[k % dIn]!) / nz.inStd[k % dIn]!);
    const Y = deltaRows(train).map((v, k) => (v - nz.deltaMean[k % dObs]!) / (nz.deltaStd[k % dObs]! || 1));
    const R = train.reward.map((v) => (v - nz.rewardMean) / nz.rewardStd);
    const wRaw = train.weight ?? new Float32Array(nTrain).fill(1);
    const wMean = wRaw.reduce((a, b) => a + b, 0) / nTrain;
    if (!(wMean > 0)) throw new Error('fit: the training rows all have weight 0');
    const W = wRaw.map((v) => v / wMean);
    const K = train.rewardKnown ?? new Float32Array(nTrain).fill(1);

    const trainer = await this.trainer(opts);
    const rows: Int32Array[] = opts.bootstrap === false ? Array.from({ length: E }, () => Int32Array.from({ length: nTrain }, (_, i) => i)) : bootstrapIndices(E, nTrain, rng);
    const history: EpochReport[] = [];
    let best: { loss: number; epoch: number; values: Map<string, Float32Array> } | null = null;
    let steps = 0;
    try {
      for (let epoch = 1; epoch <= epochs; epoch++) {
        for (const r of rows) rng.shuffle(r);
        let lossSum = 0, batches = 0;
        for (let start = 0; start < nTrain; start += batch) {
          const b = Math.min(batch, nTrain - start);
          const x = new Float32Array(E * b * dIn), y = new Float32Array(E * b * dObs);
          const r = new Float32Array(E * b), s = new Float32Array(E * b), w = new Float32Array(E * b), k = new Float32Array(E * b);
          for (let e = 0; e < E; e++) {
            for (let i = 0; i < b; i++) {
              const src = rows[e]![start + i]!, dst = e * b + i;
              x.set(X.subarray(src * dIn, (src + 1) * dIn), dst * dIn);
              y.set(Y.subarray(src * dObs, (src + 1) * dObs), dst * dObs);
              r[dst] = R[src]!;
              s[dst] = train.success[src]!;
              w[dst] = W[src]!;
              k[dst] = K[src]!;
            }
          }
          const res = await trainer.step({
            x: nn.tensor(x, [E, b, dIn]),
            y: nn.tensor(y, [E, b, dObs]),
            r: nn.tensor(r, [E, b]),
            s: nn.tensor(s, [E, b]),
            w: nn.tensor(w, [E, b]),
            k: nn.tensor(k, [E, b]),
          });
          lossSum += res.loss;
          batches++;
          steps++;
        }
        trainer.syncToStore();
        const ev = await this.evaluate(val);
        const rep = { epoch, steps, trainLoss: lossSum / batches, val: ev };
        history.push(rep);
        opts.onEpoch?.(rep);
        if (opts.patience !== undefined) {
          if (!best || ev.loss < best.loss) best = { loss: ev.loss, epoch, values: new Map(this.store.entries().map(([k, v]) => [k, v.data.slice()])) };
          else if (epoch - best.epoch >= opts.patience) break;
        }
      }
    } finally {
      await trainer.release();
    }
    let keptEpoch = history.length;
    let finalVal = history[history.length - 1]!.val;
    if (best && best.epoch !== keptEpoch) {
      for (const [k, v] of best.values) this.store.set(k, v);
      keptEpoch = best.epoch;
      finalVal = history[best.epoch - 1]!.val;
    }
    return { epochs: history.length, steps, keptEpoch, trainSize: nTrain, valSize: val.reward.length, history, val: finalVal };
  }

  /** The training step graph: inputs x [E, b, dIn], y [E, b, dObs], r, s, w, k (reward known) [E, b], all standardized. */
  private async trainer(opts: FitOptions): Promise<nn.Trainer> {
    const { dObs, dIn, members: E } = this;
    const g = new nn.Graph();
    const x = g.input('x', [E, 'batch', dIn]);
    const y = g.input('y', [E, 'batch', dObs]);
    const r = g.input('r', [E, 'batch']);
    const s = g.input('s', [E, 'batch']);
    const w = g.input('w', [E, 'batch']);
    const k = g.input('k', [E, 'batch']);
    const h = this.heads(x);
    // Gaussian NLL (constants dropped) over the modeled dims, reward regression, success BCE with logits.
    // Unmodeled (constant) dims stay out: their log-variance would sink to its bound and its e^10 precision
    // would swamp every other gradient.
    const mask = Array.from(this.normalizer.deltaStd, (sd) => (sd > 0 ? 1 : 0));
    const modeled = Math.max(1, mask.reduce<number>((a, b) => a + b, 0));
    const sqErr = nn.mul(nn.square(nn.sub(h.mu, y)), nn.exp(nn.neg(h.logVar)));
    const nll = nn.div(nn.sum(nn.mul(nn.add(sqErr, h.logVar), g.constant(mask, [dObs])), -1), modeled);
    const rew = nn.mul(nn.mul(nn.square(nn.sub(h.reward, r)), 0.5), k);
    const bce = nn.sub(nn.softplus(h.successLogit), nn.mul(s, h.successLogit));
    const dynamics = opts.dynamics ?? true;
    const perRow = nn.mul(w, dynamics ? nn.add(nn.mul(nll, 0.5), nn.add(rew, bce)) : nn.add(rew, bce));
    // Sum over members: each member's gradient is its own mean loss.
    const bound = nn.mul(nn.sum(nn.mul(nn.sub(g.param(P.maxLogVar, [1, dObs]), g.param(P.minLogVar, [1, dObs])), g.constant(mask, [1, dObs]))), 0.01);
    const loss = dynamics ? nn.add(nn.sum(nn.mean(perRow, 1)), bound) : nn.sum(nn.mean(perRow, 1));
    const heads = new Set(this.rewardNet.paramNames());
    const trainable = [...g.params.keys()].filter((p) => dynamics || heads.has(p));
    return nn.Trainer.create({ loss, store: this.store, trainable, optimizer: { lr: opts.lr ?? 1e-3, weightDecay: opts.weightDecay ?? 0 } });
  }

  // ---------------------------------------------------------------- persistence

  /** Saves parameters and normalization in one safetensors file, the config in its metadata. */
  save(path: string): void {
    this.store.save(path, { kind: 'wmrl.worldmodel.ensemble', config: JSON.stringify({ ...this.config, members: this.members, hidden: this.hidden, rewardHidden: this.rewardHidden }), normalized: String(this.normalized) });
  }

  static load(path: string): EnsembleModel {
    const { metadata } = nn.readTensorFile(path);
    if (metadata.kind !== 'wmrl.worldmodel.ensemble' || !metadata.config) throw new Error(`ensemble: ${path} is not a saved world-model ensemble (metadata kind '${metadata.kind}')`);
    const m = new EnsembleModel(JSON.parse(metadata.config) as EnsembleConfig);
    m.store.load(path);
    m.normalized = metadata.normalized === 'true';
    return m;
  }

  /**
   * Writes a standalone ONNX model: inputs obs [batch, dObs] and action [batch, dAct]; outputs, per member
   * and in raw units, next_obs_mean and next_obs_var [E, batch, dObs], reward and success_prob [E, batch].
   */
  exportOnnx(path: string): nn.ModelInfo {
    const g = new nn.Graph();
    const obs = g.input('obs', ['batch', this.dObs]);
    const action = g.input('action', ['batch', this.dAct]);
    const hw = this.actionHistory * this.dAct;
    const history = hw > 0 ? g.input('action_history', ['batch', hw]) : undefined;
    const c = this.contextDim;
    const context = c > 0 ? g.input('context', ['batch', c]) : undefined;
    const h = this.rawHeads(obs, action, history, context);
    const ds = g.param(P.deltaStd, [this.dObs]);
    const E = this.members;
    return nn.exportOnnx(path, {
      inputs: [
        { name: 'obs', tensor: obs, doc: `observation, [batch, ${this.dObs}]${this.config.obsNames ? `: ${this.config.obsNames.join(', ')}` : ''}` },
        { name: 'action', tensor: action, doc: `action, [batch, ${this.dAct}]${this.config.actionNames ? `: ${this.config.actionNames.join(', ')}` : ''}` },
        ...(history ? [{ name: 'action_history', tensor: history, doc: `the ${this.actionHistory} actions sent before 'action', most recent first, zeros before an episode's first step: [batch, ${hw}]` }] : []),
        ...(context ? [{ name: 'context', tensor: context, doc: `the system's context, [batch, ${c}]: ${this.config.contextNames!.join(', ')}` }] : []),
      ],
      outputs: [
        { name: 'next_obs_mean', tensor: nn.add(obs, this.denormDelta(h.mu)), doc: `[${E}, batch, ${this.dObs}]: each member's mean next observation` },
        { name: 'next_obs_var', tensor: nn.mul(nn.exp(h.logVar), nn.square(ds)), doc: `[${E}, batch, ${this.dObs}]: each member's predicted variance of the next observation` },
        { name: 'reward', tensor: this.denormReward(h.reward), doc: `[${E}, batch]: each member's predicted reward` },
        { name: 'success_prob', tensor: nn.sigmoid(h.successLogit), doc: `[${E}, batch]: each member's predicted success probability` },
      ],
      store: this.store,
      graphName: 'world_model',
      docString: 'Probabilistic ensemble dynamics model (delta parameterization) exported by wmrl-bridge worldmodel/',
      metadata: {
        kind: 'ensemble_dynamics',
        members: E,
        obs_dim: this.dObs,
        action_dim: this.dAct,
        action_history: this.actionHistory,
        ...(c > 0 ? { context_names: this.config.contextNames!, context: Array.from(this.context) } : {}),
        hidden: this.hidden,
        reward_hidden: this.rewardHidden,
        parameterization: 'delta',
        ...(this.config.obsNames ? { obs_names: this.config.obsNames } : {}),
        ...(this.config.actionNames ? { action_names: this.config.actionNames } : {}),
      },
    });
  }

  async release(): Promise<void> {
    const f = this.forwardProgram;
    this.forwardProgram = null;
    if (f) await (await f).prog.release();
  }
}

const softplus = (x: number) => (x > 0 ? x + Math.log1p(Math.exp(-x)) : Math.log1p(Math.exp(x)));
