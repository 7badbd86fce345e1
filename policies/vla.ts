// A small vision-language-action policy: a conv encoder of the camera image, an instruction encoder
// (token embeddings over a vocabulary built from the task's instructions, mean-pooled over the words),
// and the proprioceptive observation vector (the robot's declared layout), fused by an MLP into the mean
// of a diagonal Gaussian over actions — one action, or a chunk of `chunk` consecutive ones — squashed
// into the action bounds, with a state-independent log-std. Implements the one Policy interface (types.ts).
// With `proprio: 'robot'` the proprioception is the robot's own state alone (common/layout.ts
// robotEntries): the scene entries are zeroed after normalization, so the goal reaches the policy only
// through its camera and instruction while its graph still takes the robot's whole observation vector.
//
//   image [N, H, W, 3] in [0, 1] ─ ConvEncoder ─ relu ─┐
//   tokens [N, T] int64 ─ Embedding ─ masked mean ─────┼─ concat ─ MLP ─ tanh ─ scale → mean [N, chunk·A]
//   obs [N, D] ─ (obs − mean) / std (· robot mask) ────┘
import {
  ConvEncoder, Embedding, Graph, MLP, ParamStore, Program, add, clip, concat, div, exp, f32, gaussianLogProb, greater, maximum, mul, relu, sub, sum,
  tanh, tensor, toFloat, unsqueeze, type Tensor, type ort,
} from '../nn/index.js';
import { layoutDim, robotEntries, type ObservationLayout } from '../common/layout.js';
import { LOG_STD_MAX, LOG_STD_MIN, configVector, type GaussianHeadOptions } from './gaussian.js';
import { buildVocabulary, tokenize } from './tokenizer.js';
import { diagonalGaussianEntropy, type EncoderSplit, type Policy, type PolicyActResult, type PolicyContext, type PolicyGraphContext, type PolicyInputs } from './types.js';

/** What the VLA's proprioceptive branch reads: the whole observation vector, or the robot's own entries alone. */
export type VlaProprio = 'all' | 'robot';

export interface VlaConfig extends GaussianHeadOptions {
  /** The robot's observation layout: the proprioceptive input is its vector. */
  layout: ObservationLayout;
  /** 'all' (default): every entry of the layout; 'robot': its robot entries alone (robotEntries), the scene's zeroed. */
  proprio?: VlaProprio;
  /** Actions per decision (default 1). */
  chunk?: number;
  image: { height: number; width: number };
  /** The vocabulary is built from these (or given as `vocabulary`). */
  instructions?: readonly string[];
  vocabulary?: readonly string[];
  /** Words read per instruction (default 8). */
  maxTokens?: number;
  embedDim?: number;
  convChannels?: number[];
  imageFeatures?: number;
  /** Per-step action bounds (repeated over the chunk); default ±1. */
  actLow?: ArrayLike<number>;
  actHigh?: ArrayLike<number>;
}

export interface ResolvedVlaConfig {
  obsDim: number;
  actDim: number;
  chunk: number;
  image: { height: number; width: number };
  vocabulary: string[];
  maxTokens: number;
  embedDim: number;
  convChannels: number[];
  imageFeatures: number;
  hidden: number[];
  initLogStd: number;
  obsMean: number[];
  obsStd: number[];
  actLow: number[];
  actHigh: number[];
  seed: number;
  proprio: VlaProprio;
  /** The observation entries the proprioceptive branch reads, in vector order (every one under 'all'). */
  proprioEntries: number[];
}

const vec = (name: string, v: ArrayLike<number> | undefined, n: number, fill: number) => configVector('vla', name, v, n, fill);

export function resolveVlaConfig(c: VlaConfig): ResolvedVlaConfig {
  const obsDim = layoutDim(c.layout);
  const vocabulary = c.vocabulary ? [...c.vocabulary] : buildVocabulary(c.instructions ?? []);
  if (!vocabulary.length) throw new Error('vla: no vocabulary (give the task instructions or a vocabulary)');
  if (!Number.isInteger(c.actDim) || c.actDim < 1) throw new Error(`vla: actDim must be a positive integer, got ${c.actDim}`);
  const proprio = c.proprio ?? 'all';
  if (proprio !== 'all' && proprio !== 'robot') throw new Error(`vla: proprio must be 'all' or 'robot', got ${String(proprio)}`);
  const r: ResolvedVlaConfig = {
    obsDim,
    actDim: c.actDim,
    chunk: c.chunk ?? 1,
    image: { height: c.image.height, width: c.image.width },
    vocabulary,
    maxTokens: c.maxTokens ?? 8,
    embedDim: c.embedDim ?? 16,
    convChannels: c.convChannels ?? [16, 32, 32],
    imageFeatures: c.imageFeatures ?? 64,
    hidden: c.hidden ?? [128, 128],
    initLogStd: c.initLogStd ?? -0.5,
    obsMean: vec('obsMean', c.obsMean, obsDim, 0),
    obsStd: vec('obsStd', c.obsStd, obsDim, 1),
    actLow: vec('actLow', c.actLow, c.actDim, -1),
    actHigh: vec('actHigh', c.actHigh, c.actDim, 1),
    seed: c.seed ?? 0,
    proprio,
    proprioEntries: proprio === 'robot' ? robotEntries(c.layout) : Array.from({ length: obsDim }, (_, i) => i),
  };
  if (!Number.isInteger(r.chunk) || r.chunk < 1) throw new Error(`vla: chunk must be a positive integer, got ${r.chunk}`);
  if (r.obsStd.some((s) => !(s > 0))) throw new Error('vla: obsStd entries must be > 0');
  if (r.actLow.some((lo, i) => !(lo < r.actHigh[i]!))) throw new Error('vla: actLow must be below actHigh in every dimension');
  return r;
}

/** Rows per run of the encoder (VlaPolicy.encode): a batch of many steps runs in pieces of this many. */
const ENCODE_ROWS = 4096;

export class VlaPolicy implements Policy {
  readonly kind = 'vla';
  readonly config: ResolvedVlaConfig;
  readonly store: ParamStore;
  readonly encoder: ConvEncoder;
  readonly embedding: Embedding;
  readonly net: MLP;
  private actProgram: Program | null = null;
  private logProbProgram: Program | null = null;
  private encodeProgram: Program | null = null;

  constructor(config: VlaConfig, readonly name = 'vla') {
    const c = (this.config = resolveVlaConfig(config));
    this.store = new ParamStore(c.seed);
    this.encoder = new ConvEncoder(this.store, `${name}.image`, {
      height: c.image.height, width: c.image.width, inChannels: 3, channels: c.convChannels, outDim: c.imageFeatures,
    });
    this.embedding = new Embedding(this.store, `${name}.words`, c.vocabulary.length + 2, c.embedDim);
    this.net = new MLP(this.store, `${name}.mlp`, { sizes: [this.featureDim + c.obsDim, ...c.hidden, c.chunk * c.actDim], activation: 'relu' });
    this.store.create(`${name}.log_std`, [c.chunk * c.actDim], 'zeros');
    this.store.set(`${name}.log_std`, new Array<number>(c.chunk * c.actDim).fill(c.initLogStd));
    // Small last layer: the initial mean sits near the middle of the action range.
    const last = this.net.layers.at(-1)!;
    this.store.set(`${last.name}.weight`, this.store.get(`${last.name}.weight`).data.map((x) => x * 0.01));
  }

  get obsDim(): number {
    return this.config.obsDim;
  }

  get actDim(): number {
    return this.config.actDim;
  }

  get chunk(): number {
    return this.config.chunk;
  }

  /** Width of the image + instruction features. */
  get featureDim(): number {
    return this.config.imageFeatures + this.config.embedDim;
  }

  inputs(): PolicyInputs {
    const c = this.config;
    return { obsDim: c.obsDim, obsMean: c.obsMean, obsStd: c.obsStd, image: c.image, instruction: { vocabulary: c.vocabulary, maxTokens: c.maxTokens } };
  }

  /** The encoder's parameters (image and words): what a frozen backbone holds. */
  encoderParamNames(): string[] {
    return [...this.encoder.paramNames(), ...this.embedding.paramNames()];
  }

  /** The head's parameters (the fusion MLP and the log-std): what post-training moves when the encoder stays frozen. */
  headParamNames(): string[] {
    return [...this.net.paramNames(), `${this.name}.log_std`];
  }

  /** Sets every entry of the log-std (the actions' noise) to `value`, e.g. the exploration an RL run starts from. */
  setLogStd(value: number): void {
    if (!Number.isFinite(value)) throw new Error(`vla: log-std must be a finite number, got ${value}`);
    const n = `${this.name}.log_std`;
    this.store.set(n, new Array<number>(this.store.get(n).data.length).fill(value));
  }

  meanParamNames(): string[] {
    return [...this.encoderParamNames(), ...this.net.paramNames()];
  }

  paramNames(): string[] {
    return [...this.meanParamNames(), `${this.name}.log_std`];
  }

  /** image [N, H, W, 3] in [0, 1], tokens [N, T] int64 → features [N, featureDim]: the image's, then the instruction's. */
  features(image: Tensor, tokens: Tensor): Tensor {
    return concat([this.imageFeatures(image), this.wordFeatures(tokens)], -1);
  }

  /** image [N, H, W, 3] in [0, 1] → the conv encoder's features [N, imageFeatures] (after relu). */
  imageFeatures(image: Tensor): Tensor {
    return relu(this.encoder.forward(image));
  }

  /** tokens [N, T] int64 → the instruction's features [N, embedDim]: word embeddings averaged over the words. */
  wordFeatures(tokens: Tensor): Tensor {
    const mask = toFloat(greater(toFloat(tokens), 0.5)); // [N, T]: 1 for words, 0 for padding
    const emb = mul(this.embedding.forward(tokens), unsqueeze(mask, [2]));
    return div(sum(emb, 1), maximum(sum(mask, 1, true), 1));
  }

  /** obs [N, D] → the proprioception the head reads [N, D]: normalized, its entries outside `proprioEntries` zeroed. */
  proprioception(obs: Tensor): Tensor {
    const c = this.config, g = obs.graph;
    const z = div(sub(obs, g.constant(c.obsMean, [c.obsDim])), g.constant(c.obsStd, [c.obsDim]));
    if (c.proprioEntries.length === c.obsDim) return z;
    const keep = new Set(c.proprioEntries);
    return mul(z, g.constant(Array.from({ length: c.obsDim }, (_, i) => (keep.has(i) ? 1 : 0)), [c.obsDim]));
  }

  /** obs [N, D] and features [N, featureDim] → mean [N, chunk·A], logStd [chunk·A]. */
  head(obs: Tensor, features: Tensor): { mean: Tensor; logStd: Tensor } {
    const c = this.config, g = obs.graph, k = c.chunk * c.actDim;
    const z = this.proprioception(obs);
    const half = Array.from({ length: k }, (_, i) => (c.actHigh[i % c.actDim]! - c.actLow[i % c.actDim]!) / 2);
    const mid = Array.from({ length: k }, (_, i) => (c.actHigh[i % c.actDim]! + c.actLow[i % c.actDim]!) / 2);
    const mean = add(mul(tanh(this.net.forward(concat([features, z], -1))), g.constant(half, [k])), g.constant(mid, [k]));
    const logStd = clip(g.param(`${this.name}.log_std`, [k]), LOG_STD_MIN, LOG_STD_MAX);
    return { mean, logStd };
  }

  forward(obs: Tensor, ctx?: PolicyGraphContext): { mean: Tensor; logStd: Tensor } {
    if (!ctx?.image || !ctx.tokens) throw new Error('vla.forward: needs the image and tokens graph inputs');
    return this.head(obs, this.features(ctx.image, ctx.tokens));
  }

  /** Declares the context inputs in `g`: image [N, H, W, 3] float32, tokens [N, T] int64. */
  graphContext(g: Graph, batch: string | number = 'N'): { image: Tensor; tokens: Tensor } {
    const c = this.config;
    return { image: g.input('image', [batch, c.image.height, c.image.width, 3]), tokens: g.input('tokens', [batch, c.maxTokens], 'int64') };
  }

  contextFeeds(ctx: PolicyContext | undefined, n: number): Record<string, ort.Tensor> {
    const c = this.config, px = c.image.height * c.image.width * 3;
    if (!ctx?.images) throw new Error('vla: needs images (N x H x W x 3 uint8)');
    if (ctx.images.length !== n * px) throw new Error(`vla: images have ${ctx.images.length} bytes, expected ${n} x ${c.image.height} x ${c.image.width} x 3`);
    const tokens = this.tokenFeed(ctx.instructions, n, 'vla');
    const image = new Float32Array(n * px);
    for (let i = 0; i < image.length; i++) image[i] = ctx.images[i]! / 255;
    return { image: tensor(image, [n, c.image.height, c.image.width, 3]), tokens };
  }

  /** The `tokens` feed [n, maxTokens] of n instructions in this VLA's vocabulary; `who` names the caller in the error. */
  tokenFeed(instructions: readonly string[] | undefined, n: number, who: string): ort.Tensor {
    const c = this.config;
    if (!instructions || instructions.length !== n) throw new Error(`${who}: needs ${n} instructions, got ${instructions?.length ?? 0}`);
    return tensor(tokenize(instructions, c.vocabulary, c.maxTokens), [n, c.maxTokens], 'int64');
  }

  /** The image and instruction encoder apart from the head (pg.ts trains the head on cached features when the encoder is frozen). */
  encoderSplit(): EncoderSplit {
    return { paramNames: this.encoderParamNames(), dim: this.featureDim, encode: (ctx, n) => this.encode(ctx, n), head: (obs, f) => this.head(obs, f) };
  }

  /** N x featureDim: the encoder's features of N steps' images and instructions, in batches of ENCODE_ROWS. */
  async encode(ctx: PolicyContext | undefined, n: number): Promise<Float32Array> {
    const c = this.config, px = c.image.height * c.image.width * 3, F = this.featureDim;
    if (!ctx?.images || ctx.images.length !== n * px) throw new Error(`vla.encode: needs ${n} images of ${c.image.height}x${c.image.width}x3, got ${ctx?.images?.length ?? 0} bytes`);
    if (ctx.instructions?.length !== n) throw new Error(`vla.encode: needs ${n} instructions, got ${ctx.instructions?.length ?? 0}`);
    if (!this.encodeProgram) {
      const g = new Graph();
      const gc = this.graphContext(g);
      const features = this.features(gc.image, gc.tokens);
      const params = this.encoderParamNames().map((name) => ({ name, tensor: g.params.get(name)! }));
      this.encodeProgram = await Program.fromSpec({ inputs: [{ name: 'image', tensor: gc.image }, { name: 'tokens', tensor: gc.tokens }, ...params], outputs: [{ name: 'features', tensor: features }], graphName: 'vla_encode' }, { threads: 1 });
    }
    const params = this.paramFeeds(this.encoderParamNames());
    const out = new Float32Array(n * F);
    for (let s = 0; s < n; s += ENCODE_ROWS) {
      const e = Math.min(n, s + ENCODE_ROWS);
      const r = await this.encodeProgram.run({ ...this.contextFeeds({ images: ctx.images.subarray(s * px, e * px), instructions: ctx.instructions.slice(s, e) }, e - s), ...params });
      out.set(f32(r.features), s * F);
    }
    return out;
  }

  paramFeeds(names: readonly string[] = this.paramNames()): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = {};
    for (const n of names) {
      const v = this.store.get(n);
      feeds[n] = tensor(v.data, v.shape);
    }
    return feeds;
  }

  private rows(obs: Float32Array, what: string): number {
    const n = obs.length / this.obsDim;
    if (!Number.isInteger(n) || n < 1) throw new Error(`vla.${what}: obs has ${obs.length} values, not a multiple of obsDim ${this.obsDim}`);
    for (let i = 0; i < obs.length; i++) if (!Number.isFinite(obs[i]!)) throw new Error(`vla.${what}: obs[${i}] is ${obs[i]}`);
    return n;
  }

  private async program(kind: 'act' | 'logProb'): Promise<Program> {
    const cached = kind === 'act' ? this.actProgram : this.logProbProgram;
    if (cached) return cached;
    const g = new Graph();
    const k = this.chunk * this.actDim;
    const obs = g.input('obs', ['N', this.obsDim]);
    const ctx = this.graphContext(g);
    const second = g.input(kind === 'act' ? 'noise' : 'action', ['N', k]);
    const { mean, logStd } = this.forward(obs, ctx);
    const params = this.paramNames().map((name) => ({ name, tensor: g.params.get(name)! }));
    const inputs = [{ name: 'obs', tensor: obs }, { name: 'image', tensor: ctx.image }, { name: 'tokens', tensor: ctx.tokens }, { name: second.attrs.name as string, tensor: second }, ...params];
    let p: Program;
    if (kind === 'act') {
      const action = add(mean, mul(exp(logStd), second));
      p = await Program.fromSpec({ inputs, outputs: [{ name: 'action', tensor: action }, { name: 'mean', tensor: mean }, { name: 'log_prob', tensor: gaussianLogProb(action, mean, logStd) }], graphName: 'vla_act' }, { threads: 1 });
      this.actProgram = p;
    } else {
      p = await Program.fromSpec({ inputs, outputs: [{ name: 'log_prob', tensor: gaussianLogProb(second, mean, logStd) }], graphName: 'vla_log_prob' }, { threads: 1 });
      this.logProbProgram = p;
    }
    return p;
  }

  /** obs N x D, noise N x (chunk·A) standard normal (zeros: the mean), ctx: N images and instructions. */
  async act(obs: Float32Array, noise: Float32Array, ctx?: PolicyContext): Promise<PolicyActResult> {
    const n = this.rows(obs, 'act'), k = this.chunk * this.actDim;
    if (noise.length !== n * k) throw new Error(`vla.act: noise has ${noise.length} values, expected ${n} x ${k}`);
    const p = await this.program('act');
    const out = await p.run({ obs: tensor(obs, [n, this.obsDim]), noise: tensor(noise, [n, k]), ...this.contextFeeds(ctx, n), ...this.paramFeeds() });
    return { action: Float32Array.from(f32(out.action)), mean: Float32Array.from(f32(out.mean)), logProb: Float32Array.from(f32(out.log_prob)) };
  }

  async logProb(obs: Float32Array, action: Float32Array, ctx?: PolicyContext): Promise<Float32Array> {
    const n = this.rows(obs, 'logProb'), k = this.chunk * this.actDim;
    if (action.length !== n * k) throw new Error(`vla.logProb: action has ${action.length} values, expected ${n} x ${k}`);
    const p = await this.program('logProb');
    const out = await p.run({ obs: tensor(obs, [n, this.obsDim]), action: tensor(action, [n, k]), ...this.contextFeeds(ctx, n), ...this.paramFeeds() });
    return Float32Array.from(f32(out.log_prob));
  }

  entropy(): number {
    return diagonalGaussianEntropy(Array.from(this.store.get(`${this.name}.log_std`).data, (v) => Math.min(LOG_STD_MAX, Math.max(LOG_STD_MIN, v))));
  }

  async release(): Promise<void> {
    await this.actProgram?.release();
    await this.logProbProgram?.release();
    await this.encodeProgram?.release();
    this.actProgram = this.logProbProgram = this.encodeProgram = null;
  }
}
