// The one policy interface every policy here implements (the Gaussian MLP, the VLA, a head on a frozen
// external backbone): a diagonal Gaussian over actions — or over a chunk of `chunk` consecutive actions —
// whose mean comes from the observation vector (the robot's declared layout, common/layout.ts) and, for
// policies that read them, a camera image and the instruction's tokens.
//
// Two faces: `forward` emits the policy into any graph (behaviour cloning, the policy gradient, the world
// model's fused imagination, the exported artifact), and act / logProb / entropy run it on a batch.
import type { ParamStore, Tensor, ort } from '../nn/index.js';

/** What a policy reads besides the observation vector, one entry per batch row. */
export interface PolicyContext {
  /** N x H x W x 3 RGB, uint8, row-major (what sim/ renders and a robot camera gives as rgb8). */
  images?: Uint8Array;
  /** N instructions in words. */
  instructions?: readonly string[];
  /** N x F features of a frozen backbone (policies/backbone.ts), computed once per step. */
  features?: Float32Array;
}

/** The graph inputs `forward` reads besides `obs`. */
export interface PolicyGraphContext {
  /** [N, H, W, 3] float32 in [0, 1]. */
  image?: Tensor;
  /** [N, T] int64 token ids (0 = padding). */
  tokens?: Tensor;
  /** [N, F] float32 features of a frozen backbone. */
  features?: Tensor;
}

/** What a policy needs fed, so a trainer or a runner can prepare it. */
export interface PolicyInputs {
  obsDim: number;
  /** The fixed normalization (obs − mean) / std baked into the graph. */
  obsMean: readonly number[];
  obsStd: readonly number[];
  image?: { height: number; width: number };
  instruction?: { vocabulary: readonly string[]; maxTokens: number };
  /** Features of a frozen backbone, fed precomputed. */
  features?: { dim: number };
}

export interface PolicyActResult {
  /** N x (chunk · A): mean + std · noise (noise zero: the mean). */
  action: Float32Array;
  /** N x (chunk · A). */
  mean: Float32Array;
  /** N: log-probability of `action`. */
  logProb: Float32Array;
}

/**
 * A policy as a graph the world model's fused imagination unrolls (worldmodel's GraphPolicy, matched
 * structurally): per step `action` (the sample clipped to the bounds), `action_raw`, `logProb`, `mean`.
 */
export interface FusedGraphPolicy {
  store: ParamStore;
  noiseDim: number;
  build(obs: Tensor, noise: Tensor | null): Record<string, Tensor>;
}

export interface Policy {
  /** 'gaussian_mlp', 'vla', 'backbone_head': written into the artifact. */
  readonly kind: string;
  readonly obsDim: number;
  /** Action entries per control step. */
  readonly actDim: number;
  /** Actions per decision: outputs hold chunk x actDim per row (1: one action a step). */
  readonly chunk: number;
  readonly store: ParamStore;
  inputs(): PolicyInputs;
  /** Every trainable parameter (policy gradient). */
  paramNames(): string[];
  /** The parameters of the mean (behaviour cloning trains these and leaves log-std alone). */
  meanParamNames(): string[];
  /** obs [N, D] (+ context) → mean [N, chunk·A] in the action bounds, logStd [chunk·A]. */
  forward(obs: Tensor, ctx?: PolicyGraphContext): { mean: Tensor; logStd: Tensor };
  /** The feeds `forward`'s context inputs take for a batch of N rows: `image`, `tokens`. */
  contextFeeds(ctx: PolicyContext | undefined, n: number): Record<string, ort.Tensor>;
  act(obs: Float32Array, noise: Float32Array, ctx?: PolicyContext): Promise<PolicyActResult>;
  /** N: log π(action | obs, context). */
  logProb(obs: Float32Array, action: Float32Array, ctx?: PolicyContext): Promise<Float32Array>;
  /** Entropy of the action distribution (state-independent log-std: the same for every row). */
  entropy(): number;
  /** Policies that read the observation vector alone may offer the fused face (imagination in one graph). */
  graphPolicy?(): FusedGraphPolicy;
  /** Policies whose forward is a head on an encoder of the context may offer the split (a frozen encoder's features then run once a batch). */
  encoderSplit?(): EncoderSplit;
  release(): Promise<void>;
}

/**
 * A policy's forward as head(obs, encode(context)), the encoder's parameters apart: a trainer that leaves all of
 * them frozen (the policy gradient post-training a VLA's head) computes each step's features once per batch and
 * trains the head on them, rather than running the encoder again in every epoch's minibatches.
 */
export interface EncoderSplit {
  /** The encoder's parameters. */
  paramNames: string[];
  /** Width of the features. */
  dim: number;
  /** N x dim features of N steps' context, under the store's current encoder parameters. */
  encode(ctx: PolicyContext | undefined, n: number): Promise<Float32Array>;
  /** obs [N, D] and features [N, dim] → the mean and log-std forward gives for the context they were encoded from. */
  head(obs: Tensor, features: Tensor): { mean: Tensor; logStd: Tensor };
}

/** Entropy of a diagonal Gaussian with these log standard deviations. */
export function diagonalGaussianEntropy(logStd: ArrayLike<number>): number {
  let h = 0;
  for (let i = 0; i < logStd.length; i++) h += logStd[i]! + 0.5 + 0.5 * Math.log(2 * Math.PI);
  return h;
}

/** Declares in `g` the context inputs `policy` reads (`image` [batch, H, W, 3] float32, `tokens` [batch, T] int64). */
export function declareContext(policy: Policy, g: { input(name: string, shape: Array<string | number>, dtype?: 'float32' | 'int64'): Tensor }, batch: string | number): PolicyGraphContext {
  const i = policy.inputs();
  return {
    ...(i.image ? { image: g.input('image', [batch, i.image.height, i.image.width, 3]) } : {}),
    ...(i.instruction ? { tokens: g.input('tokens', [batch, i.instruction.maxTokens], 'int64') } : {}),
    ...(i.features ? { features: g.input('features', [batch, i.features.dim]) } : {}),
  };
}
