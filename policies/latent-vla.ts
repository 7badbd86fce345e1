// A VLA's latent face, for imagination: the VLA (vla.ts) with its frozen conv image encoder replaced by a map
// distilled from it — an MLP from the observation vector to the image features the encoder gives on the
// digital twin's render of that state. The twin renders from the state alone (sim/twin.ts), so those
// features are a function of the state, which the map learns; the instruction's features stay exact (the
// VLA's own word embeddings). An imagined rollout then needs neither a render nor a conv per step:
//
//   predicted obs ─ (obs − mean) / std ─ map MLP ─────┐
//   tokens ─ the VLA's word embeddings, mean-pooled ───┼─ concat ─ the VLA's head → mean, logStd
//   predicted obs ──────────────────────────────────────┘
//
// The map reads the whole state, scene entries included, because it stands in for the camera, which sees the
// scene; the head reads the VLA's own proprioception (VlaConfig.proprio), as on the robot.
//
// The head is the VLA's own: the face reads and trains the same parameters in the same store, so a policy-
// gradient step on the face moves the VLA that acts on the robot from its camera. The face is for
// post-training with the encoder frozen (its trainable parameters are the head's); the map's parameters live
// in the VLA's store under `<vla>.latent.*`, which the VLA's own graphs (and its exported artifact) never
// read. The price is the map's error: `distill` reports it on held-out states, relative to the features'
// variance, and how far the face's mean actions are from the VLA's on the twin's renders.
import { Graph, MLP, Program, Rng, Trainer, add, concat, div, exp, f32, gaussianLogProb, mean, mul, square, sub, tensor, type AdamConfig, type Tensor, type ort } from '../nn/index.js';
import type { SceneTwin } from '../sim/twin.js';
import { tokenize } from './tokenizer.js';
import { type Policy, type PolicyActResult, type PolicyContext, type PolicyGraphContext, type PolicyInputs } from './types.js';
import type { VlaPolicy } from './vla.js';

export interface LatentDistillOptions {
  /** The map's hidden layers (default 128 x 128, relu). */
  hidden?: number[];
  epochs?: number;
  minibatch?: number;
  optimizer?: AdamConfig;
  /** Fraction of the states held out to measure the map's error (default 0.1). */
  valFraction?: number;
  /** States rendered and encoded per call (default 256). */
  chunk?: number;
  seed?: number;
  onEpoch?: (epoch: number, epochs: number, loss: number) => void;
}

/** How well the map stands in for the encoder, on held-out states. */
export interface LatentDistillReport {
  states: number;
  heldOut: number;
  /** Mean squared error per feature, held-out states. */
  valMse: number;
  /** valMse over the features' mean variance about their training mean (1 − pooled R²): 0 = exact, 1 = no better than that mean. */
  valRelMse: number;
  /** Mean absolute difference between the face's and the VLA's mean actions (VLA on the twin's renders), held-out states, per action entry. */
  actionGap: number;
  /** The same for a face whose map outputs the features' training mean: the scale actionGap is read against. */
  actionGapConstant: number;
}

export class LatentVla implements Policy {
  readonly kind = 'vla_latent';
  private actProgram: Program | null = null;
  private logProbProgram: Program | null = null;

  private constructor(readonly vla: VlaPolicy, readonly map: MLP) {}

  /**
   * Distills the map from `vla`'s frozen image encoder on `twin`'s renders of `states` (N x D, the task's layout):
   * the states the face will imagine from and through, e.g. the world model's training data and the clone's own
   * episodes; `instructions` (one per state, or one for all) are what the action gap is measured under. Creates
   * the map's parameters in the VLA's store (`<vla>.latent.*`; once per VLA).
   */
  static async distill(vla: VlaPolicy, twin: SceneTwin, states: Float32Array, instructions: string | readonly string[], o: LatentDistillOptions = {}): Promise<{ policy: LatentVla; report: LatentDistillReport }> {
    const c = vla.config, D = c.obsDim, F = c.imageFeatures;
    if (twin.dim !== D) throw new Error(`latent vla: the twin's layout has ${twin.dim} entries, the VLA reads ${D}`);
    if (twin.size !== c.image.height || twin.size !== c.image.width) throw new Error(`latent vla: the twin renders ${twin.size}x${twin.size}, the VLA reads ${c.image.width}x${c.image.height}`);
    const N = states.length / D;
    if (!Number.isInteger(N) || N < 10) throw new Error(`latent vla: states have ${states.length} values: need at least 10 states of ${D}`);
    const bad = states.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) throw new Error(`latent vla: states[${bad}] is ${states[bad]}`);
    if (typeof instructions !== 'string' && instructions.length !== N) throw new Error(`latent vla: ${instructions.length} instructions for ${N} states (give one per state, or one for all)`);
    const instructionOf = (j: number) => (typeof instructions === 'string' ? instructions : instructions[j]!);
    const valFraction = o.valFraction ?? 0.1, minibatch = o.minibatch ?? 256, epochs = o.epochs ?? 60;
    if (!(valFraction > 0 && valFraction < 1)) throw new Error(`latent vla: valFraction must be in (0, 1), got ${valFraction}`);
    if (!(Number.isInteger(minibatch) && minibatch >= 1) || !(Number.isInteger(epochs) && epochs >= 1)) throw new Error(`latent vla: minibatch and epochs must be positive integers, got ${minibatch} and ${epochs}`);
    const name = `${vla.name}.latent`;
    if (vla.store.has(`${name}.l0.weight`)) throw new Error(`latent vla: the VLA's store already holds a map '${name}' (distill once per VLA)`);
    const rng = new Rng(o.seed ?? 0);

    // Targets: the encoder's features of the twin's render of every state.
    const images = await imageFeatureProgram(vla);
    const target = new Float32Array(N * F);
    const chunk = o.chunk ?? 256, px = twin.imageBytes;
    try {
      for (let s = 0; s < N; s += chunk) {
        const n = Math.min(chunk, N - s);
        const img = twin.render(states.subarray(s * D, (s + n) * D));
        const x = new Float32Array(n * px);
        for (let i = 0; i < x.length; i++) x[i] = img[i]! / 255;
        target.set(f32((await images.run({ image: tensor(x, [n, c.image.height, c.image.width, 3]), ...feedsOf(vla, encoderNames(vla)) })).features!), s * F);
      }
    } finally {
      await images.release();
    }

    // Held-out states: a seeded random fraction.
    const order = Array.from({ length: N }, (_, i) => i);
    rng.shuffle(order);
    const nVal = Math.max(1, Math.round(N * valFraction));
    const val = order.slice(0, nVal), train = order.slice(nVal);
    if (!train.length) throw new Error(`latent vla: valFraction ${valFraction} of ${N} states leaves none to train on`);
    const rows = (idx: readonly number[], src: Float32Array, w: number) => {
      const out = new Float32Array(idx.length * w);
      idx.forEach((j, r) => out.set(src.subarray(j * w, (j + 1) * w), r * w));
      return out;
    };

    // The features' training mean: the map starts there (its last bias) and learns the rest.
    const trainMean = new Float64Array(F);
    for (const j of train) for (let f = 0; f < F; f++) trainMean[f]! += target[j * F + f]! / train.length;
    const map = new MLP(vla.store, name, { sizes: [D, ...(o.hidden ?? [128, 128]), F], activation: 'relu' });
    vla.store.set(`${map.layers.at(-1)!.name}.bias`, trainMean);
    const face = new LatentVla(vla, map);
    const g = new Graph();
    const obs = g.input('obs', ['M', D]);
    const y = g.input('target', ['M', F]);
    const trainer = await Trainer.create({ loss: mean(square(sub(face.mapForward(obs), y))), store: vla.store, optimizer: o.optimizer ?? { lr: 1e-3, clipNorm: 1 }, trainable: map.paramNames() }, { threads: 1 });
    const mb = Math.min(minibatch, train.length);
    try {
      for (let e = 0; e < epochs; e++) {
        rng.shuffle(train);
        let sum = 0, k = 0;
        for (let s = 0; s + mb <= train.length; s += mb) {
          const idx = train.slice(s, s + mb);
          sum += (await trainer.step({ obs: tensor(rows(idx, states, D), [mb, D]), target: tensor(rows(idx, target, F), [mb, F]) })).loss;
          k++;
        }
        o.onEpoch?.(e + 1, epochs, sum / k);
      }
      trainer.syncToStore();
    } finally {
      await trainer.release();
    }

    // The map's error on the held-out states, and what it does to the mean action.
    const valStates = rows(val, states, D), valTarget = rows(val, target, F);
    const predicted = await face.predictFeatures(valStates);
    const variance = new Float64Array(F);
    for (let i = 0; i < nVal; i++) for (let f = 0; f < F; f++) variance[f]! += (valTarget[i * F + f]! - trainMean[f]!) ** 2 / nVal;
    let mse = 0, totalVariance = 0;
    for (let f = 0; f < F; f++) {
      for (let i = 0; i < nVal; i++) mse += (predicted[i * F + f]! - valTarget[i * F + f]!) ** 2 / nVal / F;
      totalVariance += variance[f]! / F;
    }
    const rel = totalVariance > 0 ? mse / totalVariance : mse > 0 ? Infinity : 0;
    const valInstructions = val.map(instructionOf);
    const zeros = new Float32Array(nVal * vla.actDim * vla.chunk);
    const truth = (await vla.act(valStates, zeros, { images: twin.render(valStates), instructions: valInstructions })).mean;
    const viaMap = (await face.act(valStates, zeros, { instructions: valInstructions })).mean;
    const gap = (a: Float32Array) => a.reduce((s, v, i) => s + Math.abs(v - truth[i]!), 0) / a.length;
    // The reference scale: the head fed the features' training mean in place of every state's own.
    const constant = await headOn(vla, valStates, Float32Array.from({ length: nVal * F }, (_, i) => trainMean[i % F]!), valInstructions);
    return { policy: face, report: { states: N, heldOut: nVal, valMse: mse, valRelMse: rel, actionGap: gap(viaMap), actionGapConstant: gap(constant) } };
  }

  /**
   * The face of a VLA whose map is to be loaded rather than distilled: declares the map's parameters (`hidden` as the
   * distilled map's) in the VLA's store, freshly initialized, for `vla.store.load` of a store saved after `distill` to
   * fill. Refused where the store already holds a map.
   */
  static declare(vla: VlaPolicy, hidden: number[] = [128, 128]): LatentVla {
    const name = `${vla.name}.latent`;
    if (vla.store.has(`${name}.l0.weight`)) throw new Error(`latent vla: the VLA's store already holds a map '${name}'`);
    return new LatentVla(vla, new MLP(vla.store, name, { sizes: [vla.config.obsDim, ...hidden, vla.config.imageFeatures], activation: 'relu' }));
  }

  get obsDim(): number {
    return this.vla.obsDim;
  }

  get actDim(): number {
    return this.vla.actDim;
  }

  get chunk(): number {
    return this.vla.chunk;
  }

  get store() {
    return this.vla.store;
  }

  inputs(): PolicyInputs {
    const c = this.vla.config;
    return { obsDim: c.obsDim, obsMean: c.obsMean, obsStd: c.obsStd, instruction: { vocabulary: c.vocabulary, maxTokens: c.maxTokens } };
  }

  /** The VLA's head (what post-training with the encoder frozen moves). */
  paramNames(): string[] {
    return this.vla.headParamNames();
  }

  meanParamNames(): string[] {
    return this.vla.net.paramNames();
  }

  /** obs [N, D] → the map's image features [N, imageFeatures]. */
  mapForward(obs: Tensor): Tensor {
    const c = this.vla.config, g = obs.graph;
    return this.map.forward(div(sub(obs, g.constant(c.obsMean, [c.obsDim])), g.constant(c.obsStd, [c.obsDim])));
  }

  forward(obs: Tensor, ctx?: PolicyGraphContext): { mean: Tensor; logStd: Tensor } {
    if (!ctx?.tokens) throw new Error('latent vla.forward: needs the tokens graph input');
    return this.vla.head(obs, concat([this.mapForward(obs), this.vla.wordFeatures(ctx.tokens)], -1));
  }

  contextFeeds(ctx: PolicyContext | undefined, n: number): Record<string, ort.Tensor> {
    return { tokens: this.vla.tokenFeed(ctx?.instructions, n, 'latent vla') };
  }

  /** N x D states → the map's N x imageFeatures. */
  async predictFeatures(states: Float32Array): Promise<Float32Array> {
    const D = this.obsDim, n = this.rows(states, 'predictFeatures');
    const g = new Graph();
    const obs = g.input('obs', ['N', D]);
    const features = this.mapForward(obs);
    const p = await Program.fromSpec({ inputs: [{ name: 'obs', tensor: obs }, ...paramInputs(g, this.map.paramNames())], outputs: [{ name: 'features', tensor: features }], graphName: 'latent_features' }, { threads: 1 });
    try {
      return Float32Array.from(f32((await p.run({ obs: tensor(states, [n, D]), ...feedsOf(this.vla, this.map.paramNames()) })).features!));
    } finally {
      await p.release();
    }
  }

  private rows(obs: Float32Array, what: string): number {
    const n = obs.length / this.obsDim;
    if (!Number.isInteger(n) || n < 1) throw new Error(`latent vla.${what}: obs has ${obs.length} values, not a multiple of obsDim ${this.obsDim}`);
    for (let i = 0; i < obs.length; i++) if (!Number.isFinite(obs[i]!)) throw new Error(`latent vla.${what}: obs[${i}] is ${obs[i]}`);
    return n;
  }

  /** Every parameter the face's graph reads: the map, the word embeddings, the head. */
  private graphParams(): string[] {
    return [...this.map.paramNames(), ...this.vla.embedding.paramNames(), ...this.vla.headParamNames()];
  }

  private async program(kind: 'act' | 'logProb'): Promise<Program> {
    const cached = kind === 'act' ? this.actProgram : this.logProbProgram;
    if (cached) return cached;
    const g = new Graph();
    const k = this.chunk * this.actDim, c = this.vla.config;
    const obs = g.input('obs', ['N', this.obsDim]);
    const tokens = g.input('tokens', ['N', c.maxTokens], 'int64');
    const second = g.input(kind === 'act' ? 'noise' : 'action', ['N', k]);
    const { mean: mu, logStd } = this.forward(obs, { tokens });
    const inputs = [{ name: 'obs', tensor: obs }, { name: 'tokens', tensor: tokens }, { name: String(second.attrs.name), tensor: second }, ...paramInputs(g, this.graphParams())];
    if (kind === 'act') {
      const action = add(mu, mul(exp(logStd), second));
      this.actProgram = await Program.fromSpec({ inputs, outputs: [{ name: 'action', tensor: action }, { name: 'mean', tensor: mu }, { name: 'log_prob', tensor: gaussianLogProb(action, mu, logStd) }], graphName: 'vla_latent_act' }, { threads: 1 });
      return this.actProgram;
    }
    this.logProbProgram = await Program.fromSpec({ inputs, outputs: [{ name: 'log_prob', tensor: gaussianLogProb(second, mu, logStd) }], graphName: 'vla_latent_log_prob' }, { threads: 1 });
    return this.logProbProgram;
  }

  /** obs N x D, noise N x (chunk·A) standard normal (zeros: the mean), ctx: N instructions (no image: the map stands in for it). */
  async act(obs: Float32Array, noise: Float32Array, ctx?: PolicyContext): Promise<PolicyActResult> {
    const n = this.rows(obs, 'act'), k = this.chunk * this.actDim;
    if (noise.length !== n * k) throw new Error(`latent vla.act: noise has ${noise.length} values, expected ${n} x ${k}`);
    const out = await (await this.program('act')).run({ obs: tensor(obs, [n, this.obsDim]), noise: tensor(noise, [n, k]), ...this.contextFeeds(ctx, n), ...feedsOf(this.vla, this.graphParams()) });
    return { action: Float32Array.from(f32(out.action!)), mean: Float32Array.from(f32(out.mean!)), logProb: Float32Array.from(f32(out.log_prob!)) };
  }

  async logProb(obs: Float32Array, action: Float32Array, ctx?: PolicyContext): Promise<Float32Array> {
    const n = this.rows(obs, 'logProb'), k = this.chunk * this.actDim;
    if (action.length !== n * k) throw new Error(`latent vla.logProb: action has ${action.length} values, expected ${n} x ${k}`);
    const out = await (await this.program('logProb')).run({ obs: tensor(obs, [n, this.obsDim]), action: tensor(action, [n, k]), ...this.contextFeeds(ctx, n), ...feedsOf(this.vla, this.graphParams()) });
    return Float32Array.from(f32(out.log_prob!));
  }

  entropy(): number {
    return this.vla.entropy();
  }

  async release(): Promise<void> {
    await this.actProgram?.release();
    await this.logProbProgram?.release();
    this.actProgram = this.logProbProgram = null;
  }
}

const encoderNames = (vla: VlaPolicy) => vla.encoder.paramNames();

/** Graph inputs for `names`, declared as the params they are in `g` (each must be read by the graph). */
function paramInputs(g: Graph, names: readonly string[]): Array<{ name: string; tensor: Tensor }> {
  return names.map((name) => {
    const t = g.params.get(name);
    if (!t) throw new Error(`latent vla: the graph does not read parameter '${name}'`);
    return { name, tensor: t };
  });
}

function feedsOf(vla: VlaPolicy, names: readonly string[]): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  for (const n of names) { const v = vla.store.get(n); feeds[n] = tensor(v.data, v.shape); }
  return feeds;
}

/** The VLA's image encoder alone: image [N, H, W, 3] in [0, 1] → features [N, imageFeatures]. */
async function imageFeatureProgram(vla: VlaPolicy): Promise<Program> {
  const g = new Graph(), c = vla.config;
  const image = g.input('image', ['N', c.image.height, c.image.width, 3]);
  const features = vla.imageFeatures(image);
  return Program.fromSpec({ inputs: [{ name: 'image', tensor: image }, ...paramInputs(g, encoderNames(vla))], outputs: [{ name: 'features', tensor: features }], graphName: 'vla_image_features' }, { threads: 1 });
}

/** The VLA's mean action with the given image features (N x imageFeatures) in place of its encoder's. */
async function headOn(vla: VlaPolicy, obs: Float32Array, imageFeatures: Float32Array, instructions: readonly string[]): Promise<Float32Array> {
  const g = new Graph(), c = vla.config, n = obs.length / c.obsDim;
  const o = g.input('obs', ['N', c.obsDim]);
  const feats = g.input('image_features', ['N', c.imageFeatures]);
  const tokens = g.input('tokens', ['N', c.maxTokens], 'int64');
  const { mean: mu } = vla.head(o, concat([feats, vla.wordFeatures(tokens)], -1));
  const names = [...vla.embedding.paramNames(), ...vla.headParamNames()];
  const p = await Program.fromSpec({ inputs: [{ name: 'obs', tensor: o }, { name: 'image_features', tensor: feats }, { name: 'tokens', tensor: tokens }, ...paramInputs(g, names)], outputs: [{ name: 'mean', tensor: mu }], graphName: 'vla_head' }, { threads: 1 });
  try {
    const out = await p.run({ obs: tensor(obs, [n, c.obsDim]), image_features: tensor(imageFeatures, [n, c.imageFeatures]), tokens: tensor(tokenize(instructions, c.vocabulary, c.maxTokens), [n, c.maxTokens], 'int64'), ...feedsOf(vla, names) });
    return Float32Array.from(f32(out.mean!));
  } finally {
    await p.release();
  }
}
