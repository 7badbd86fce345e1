// A frozen external backbone with a trainable head. The backbone is any user-provided `.onnx` mapping
// (image, instruction tokens) to features: inputs `image` float32 [batch, H, W, 3] (RGB / 255) and/or
// `tokens` int64 [batch, T] (its metadata `vocabulary` says how to tokenize, policies/tokenizer.ts),
// output `features` float32 [batch, F]. It runs in onnxruntime-node and is never trained; its features
// are cached per step (keyed by the step's image and instruction), so a step seen again — a replayed
// demonstration, the anchor episode scored twice — costs one lookup. The head is a Gaussian policy of
// the one interface (types.ts) over [features, normalized observation vector].
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { InferenceSession, Tensor as OrtTensor } from 'onnxruntime-node';
import {
  Graph, MLP, ParamStore, Program, add, clip, composeModels, concat, div, exp, exportModel, exportOnnx, f32, gaussianLogProb, mul, readModelInfo, sub, tanh, tensor,
  writeFileAtomic, type ModelInfo, type Tensor, type ort,
} from '../nn/index.js';
import { LOG_STD_MAX, LOG_STD_MIN, type GaussianHeadOptions } from './gaussian.js';
import { tokenize } from './tokenizer.js';
import { diagonalGaussianEntropy, type Policy, type PolicyActResult, type PolicyContext, type PolicyGraphContext, type PolicyInputs } from './types.js';
import type { VlaPolicy } from './vla.js';
import { ARTIFACT_KEYS, TOKENIZER_DOC, policyArtifactSpec, type ArtifactMeta } from './artifact.js';

/** Exports the VLA's image + instruction encoder alone as a backbone `.onnx` (image, tokens → features). */
export function exportVlaEncoder(vla: VlaPolicy, path: string): ModelInfo {
  const g = new Graph();
  const c = vla.config;
  const ctx = vla.graphContext(g, 'batch');
  return exportOnnx(path, {
    inputs: [{ name: 'image', tensor: ctx.image, doc: `camera image [batch, ${c.image.height}, ${c.image.width}, 3]: RGB / 255` }, { name: 'tokens', tensor: ctx.tokens, doc: 'instruction token ids' }],
    outputs: [{ name: 'features', tensor: vla.features(ctx.image, ctx.tokens), doc: `features [batch, ${vla.featureDim}]` }],
    store: vla.store,
    graphName: 'backbone',
    docString: 'WMRL Bridge VLA encoder: image and instruction features.',
    metadata: { kind: 'wmrl.backbone', vocabulary: c.vocabulary, tokenizer: { doc: TOKENIZER_DOC, max_tokens: c.maxTokens } },
  });
}

export class FrozenBackbone {
  private readonly cache = new Map<string, Float32Array>();
  /** Feature computations that ran / that the cache answered. */
  readonly stats = { runs: 0, hits: 0 };

  private constructor(
    private readonly session: InferenceSession,
    readonly path: string,
    readonly featureDim: number,
    readonly image: { height: number; width: number } | undefined,
    readonly instruction: { vocabulary: string[]; maxTokens: number } | undefined,
    /** Cached steps kept (oldest dropped first). */
    readonly cacheSize: number,
  ) {}

  static async load(path: string, opts: { cacheSize?: number } = {}): Promise<FrozenBackbone> {
    const info = readModelInfo(readFileSync(path));
    const names = info.inputs.map((i) => i.name);
    const unknown = names.filter((n) => n !== 'image' && n !== 'tokens');
    if (unknown.length || !names.length) throw new Error(`${path}: a backbone takes inputs 'image' and/or 'tokens' (has [${names.join(', ')}])`);
    const out = info.outputs.find((o) => o.name === 'features');
    if (!out || out.shape.length !== 2 || typeof out.shape[1] !== 'number') throw new Error(`${path}: a backbone gives an output 'features' [batch, F] (has [${info.outputs.map((o) => `${o.name} [${o.shape.join(', ')}]`).join(', ')}])`);
    const img = info.inputs.find((i) => i.name === 'image');
    let image: { height: number; width: number } | undefined;
    if (img) {
      const [, h, w, ch] = img.shape;
      if (img.shape.length !== 4 || typeof h !== 'number' || typeof w !== 'number' || ch !== 3) throw new Error(`${path}: input 'image' must be [batch, H, W, 3], is [${img.shape.join(', ')}]`);
      image = { height: h, width: w };
    }
    const tok = info.inputs.find((i) => i.name === 'tokens');
    let instruction: { vocabulary: string[]; maxTokens: number } | undefined;
    if (tok) {
      let vocabulary: unknown;
      try {
        vocabulary = JSON.parse(info.metadata.vocabulary ?? 'null');
      } catch (e) {
        throw new Error(`${path}: metadata 'vocabulary' is not JSON (${(e as Error).message})`);
      }
      if (!Array.isArray(vocabulary) || !vocabulary.every((w) => typeof w === 'string')) throw new Error(`${path}: reads 'tokens' but metadata 'vocabulary' is not a list of words`);
      const T = tok.shape[1];
      if (typeof T !== 'number') throw new Error(`${path}: input 'tokens' must be [batch, T] with T fixed`);
      instruction = { vocabulary, maxTokens: T };
    }
    return new FrozenBackbone(await InferenceSession.create(path), path, out.shape[1], image, instruction, opts.cacheSize ?? 100_000);
  }

  private key(image: Uint8Array | undefined, instruction: string | undefined): string {
    const h = createHash('sha1');
    if (image) h.update(image);
    h.update('\0');
    if (instruction !== undefined) h.update(instruction);
    return h.digest('base64');
  }

  /** N x F features of N steps (images N x H x W x 3 uint8, N instructions); each distinct step runs once. */
  async features(ctx: PolicyContext, n: number): Promise<Float32Array> {
    const px = this.image ? this.image.height * this.image.width * 3 : 0;
    if (this.image && ctx.images?.length !== n * px) throw new Error(`${this.path}: needs ${n} images of ${this.image.height}x${this.image.width}x3, got ${ctx.images?.length ?? 0} bytes`);
    if (this.instruction && ctx.instructions?.length !== n) throw new Error(`${this.path}: needs ${n} instructions, got ${ctx.instructions?.length ?? 0}`);
    const out = new Float32Array(n * this.featureDim);
    const keys: string[] = [];
    const todo: number[] = [];
    for (let i = 0; i < n; i++) {
      const k = this.key(this.image ? ctx.images!.subarray(i * px, (i + 1) * px) : undefined, this.instruction ? ctx.instructions![i] : undefined);
      keys.push(k);
      const hit = this.cache.get(k);
      if (hit) {
        out.set(hit, i * this.featureDim);
        this.stats.hits++;
      } else todo.push(i);
    }
    if (todo.length) {
      const m = todo.length;
      const feeds: Record<string, OrtTensor> = {};
      if (this.image) {
        const x = new Float32Array(m * px);
        todo.forEach((i, r) => {
          for (let j = 0; j < px; j++) x[r * px + j] = ctx.images![i * px + j]! / 255;
        });
        feeds.image = new OrtTensor('float32', x, [m, this.image.height, this.image.width, 3]);
      }
      if (this.instruction) {
        feeds.tokens = new OrtTensor('int64', tokenize(todo.map((i) => ctx.instructions![i]!), this.instruction.vocabulary, this.instruction.maxTokens), [m, this.instruction.maxTokens]);
      }
      const f = (await this.session.run(feeds)).features!.data as Float32Array;
      todo.forEach((i, r) => {
        const row = f.slice(r * this.featureDim, (r + 1) * this.featureDim);
        out.set(row, i * this.featureDim);
        if (this.cache.size >= this.cacheSize) this.cache.delete(this.cache.keys().next().value!);
        this.cache.set(keys[i]!, row);
      });
      this.stats.runs += m;
    }
    return out;
  }

  async release(): Promise<void> {
    await this.session.release();
    this.cache.clear();
  }
}

export interface BackboneHeadConfig extends GaussianHeadOptions {
  obsDim: number;
}


/** A Gaussian head on a frozen backbone's features and the observation vector; only the head trains. */
export class BackboneHeadPolicy implements Policy {
  readonly kind = 'backbone_head';
  readonly chunk = 1;
  readonly store: ParamStore;
  readonly net: MLP;
  readonly obsDim: number;
  readonly actDim: number;
  private readonly obsMean: number[];
  private readonly obsStd: number[];
  private readonly actLow: number[];
  private readonly actHigh: number[];
  private programs: { act?: Program; logProb?: Program } = {};

  constructor(readonly backbone: FrozenBackbone, c: BackboneHeadConfig, readonly name = 'head') {
    this.obsDim = c.obsDim;
    this.actDim = c.actDim;
    const fill = (v: ArrayLike<number> | undefined, n: number, x: number, what: string) => {
      if (v !== undefined && v.length !== n) throw new Error(`backbone head: ${what} has ${v.length} entries, expected ${n}`);
      return v ? Array.from(v) : new Array<number>(n).fill(x);
    };
    this.obsMean = fill(c.obsMean, c.obsDim, 0, 'obsMean');
    this.obsStd = fill(c.obsStd, c.obsDim, 1, 'obsStd');
    this.actLow = fill(c.actLow, c.actDim, -1, 'actLow');
    this.actHigh = fill(c.actHigh, c.actDim, 1, 'actHigh');
    this.store = new ParamStore(c.seed ?? 0);
    this.net = new MLP(this.store, `${name}.mlp`, { sizes: [backbone.featureDim + c.obsDim, ...(c.hidden ?? [64, 64]), c.actDim], activation: 'relu' });
    this.store.create(`${name}.log_std`, [c.actDim], 'zeros');
    this.store.set(`${name}.log_std`, new Array<number>(c.actDim).fill(c.initLogStd ?? -0.5));
    const last = this.net.layers.at(-1)!;
    this.store.set(`${last.name}.weight`, this.store.get(`${last.name}.weight`).data.map((x) => x * 0.01));
  }

  inputs(): PolicyInputs {
    return { obsDim: this.obsDim, obsMean: this.obsMean, obsStd: this.obsStd, features: { dim: this.backbone.featureDim } };
  }

  meanParamNames(): string[] {
    return this.net.paramNames();
  }

  paramNames(): string[] {
    return [...this.net.paramNames(), `${this.name}.log_std`];
  }

  forward(obs: Tensor, ctx?: PolicyGraphContext): { mean: Tensor; logStd: Tensor } {
    if (!ctx?.features) throw new Error('backbone head: forward needs the features graph input');
    const g = obs.graph, A = this.actDim;
    const z = div(sub(obs, g.constant(this.obsMean, [this.obsDim])), g.constant(this.obsStd, [this.obsDim]));
    const half = this.actHigh.map((h, i) => (h - this.actLow[i]!) / 2), mid = this.actHigh.map((h, i) => (h + this.actLow[i]!) / 2);
    const mean = add(mul(tanh(this.net.forward(concat([ctx.features, z], -1))), g.constant(half, [A])), g.constant(mid, [A]));
    return { mean, logStd: clip(g.param(`${this.name}.log_std`, [A]), LOG_STD_MIN, LOG_STD_MAX) };
  }

  /** Fills in the backbone features of a context that has images / instructions (cached per step). */
  async withFeatures(ctx: PolicyContext | undefined, n: number): Promise<PolicyContext> {
    if (ctx?.features) return ctx;
    return { ...ctx, features: await this.backbone.features(ctx ?? {}, n) };
  }

  contextFeeds(ctx: PolicyContext | undefined, n: number): Record<string, ort.Tensor> {
    const F = this.backbone.featureDim;
    if (ctx?.features?.length !== n * F) throw new Error(`backbone head: needs ${n} x ${F} backbone features (withFeatures computes them), got ${ctx?.features?.length ?? 0}`);
    return { features: tensor(ctx.features, [n, F]) };
  }

  private paramFeeds(): Record<string, ort.Tensor> {
    const feeds: Record<string, ort.Tensor> = {};
    for (const n of this.paramNames()) {
      const v = this.store.get(n);
      feeds[n] = tensor(v.data, v.shape);
    }
    return feeds;
  }

  private async program(kind: 'act' | 'logProb'): Promise<Program> {
    const have = this.programs[kind];
    if (have) return have;
    const g = new Graph();
    const obs = g.input('obs', ['N', this.obsDim]);
    const features = g.input('features', ['N', this.backbone.featureDim]);
    const second = g.input(kind === 'act' ? 'noise' : 'action', ['N', this.actDim]);
    const { mean, logStd } = this.forward(obs, { features });
    const params = this.paramNames().map((name) => ({ name, tensor: g.params.get(name)! }));
    const inputs = [{ name: 'obs', tensor: obs }, { name: 'features', tensor: features }, { name: String(second.attrs.name), tensor: second }, ...params];
    const action = add(mean, mul(exp(logStd), second));
    const outputs = kind === 'act'
      ? [{ name: 'action', tensor: action }, { name: 'mean', tensor: mean }, { name: 'log_prob', tensor: gaussianLogProb(action, mean, logStd) }]
      : [{ name: 'log_prob', tensor: gaussianLogProb(second, mean, logStd) }];
    const p = await Program.fromSpec({ inputs, outputs, graphName: `head_${kind}` }, { threads: 1 });
    this.programs[kind] = p;
    return p;
  }

  private rows(obs: Float32Array): number {
    const n = obs.length / this.obsDim;
    if (!Number.isInteger(n) || n < 1) throw new Error(`backbone head: obs has ${obs.length} values, not a multiple of obsDim ${this.obsDim}`);
    return n;
  }

  async act(obs: Float32Array, noise: Float32Array, ctx?: PolicyContext): Promise<PolicyActResult> {
    const n = this.rows(obs);
    if (noise.length !== n * this.actDim) throw new Error(`backbone head: noise has ${noise.length} values, expected ${n} x ${this.actDim}`);
    const feeds = this.contextFeeds(await this.withFeatures(ctx, n), n);
    const out = await (await this.program('act')).run({ obs: tensor(obs, [n, this.obsDim]), noise: tensor(noise, [n, this.actDim]), ...feeds, ...this.paramFeeds() });
    return { action: Float32Array.from(f32(out.action)), mean: Float32Array.from(f32(out.mean)), logProb: Float32Array.from(f32(out.log_prob)) };
  }

  async logProb(obs: Float32Array, action: Float32Array, ctx?: PolicyContext): Promise<Float32Array> {
    const n = this.rows(obs);
    const feeds = this.contextFeeds(await this.withFeatures(ctx, n), n);
    const out = await (await this.program('logProb')).run({ obs: tensor(obs, [n, this.obsDim]), action: tensor(action, [n, this.actDim]), ...feeds, ...this.paramFeeds() });
    return Float32Array.from(f32(out.log_prob));
  }

  entropy(): number {
    return diagonalGaussianEntropy(Array.from(this.store.get(`${this.name}.log_std`).data, (v) => Math.min(LOG_STD_MAX, Math.max(LOG_STD_MIN, v))));
  }

  async release(): Promise<void> {
    await this.programs.act?.release();
    await this.programs.logProb?.release();
    this.programs = {};
  }
}

/**
 * The deployment artifact of a head on a frozen backbone as ONE `.onnx`: the backbone's graph, unchanged,
 * feeding its `features` into the head's graph (policies/artifact.ts: mean action clipped to the limits),
 * the head's internal names prefixed `head/` (nn/compose.ts). Inputs are the backbone's (`image`,
 * `tokens`) and `obs`; the output is `action`. metadata_props are exportPolicyArtifact's, with the
 * backbone's image format, vocabulary and tokenizer, and which backbone file it holds (name, sha256).
 */
export function exportBackboneHeadArtifact(policy: BackboneHeadPolicy, path: string, meta: ArtifactMeta): ModelInfo {
  const bb = policy.backbone;
  const backbone = readFileSync(bb.path);
  const spec = policyArtifactSpec(policy, meta);
  const normalization = { ...(spec.metadata![ARTIFACT_KEYS.normalization] as object), ...(bb.image ? { image: 'rgb8 / 255' } : {}) };
  const metadata: Record<string, unknown> = {
    ...spec.metadata,
    [ARTIFACT_KEYS.normalization]: normalization,
    ...(bb.instruction ? { [ARTIFACT_KEYS.vocabulary]: bb.instruction.vocabulary, [ARTIFACT_KEYS.tokenizer]: { doc: TOKENIZER_DOC, max_tokens: bb.instruction.maxTokens } } : {}),
    ...(bb.image ? { [ARTIFACT_KEYS.image]: { height: bb.image.height, width: bb.image.width, channels: 3, layout: 'NHWC', encoding: 'rgb', scale: 1 / 255 } } : {}),
    backbone: { file: basename(bb.path), sha256: createHash('sha256').update(backbone).digest('hex'), features: bb.featureDim },
  };
  const strings = Object.fromEntries(Object.entries(metadata).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]));
  const head = exportModel({ ...spec, metadata: {} });
  const bytes = composeModels(backbone, head, {
    prefix: 'head/',
    metadata: strings,
    graphName: 'policy',
    docString: `WMRL Bridge backbone_head policy: the frozen backbone ${basename(bb.path)} and the trained head in one graph; the mean action, clipped to the robot's action limits.`,
  });
  writeFileAtomic(path, [bytes]);
  return readModelInfo(bytes);
}
