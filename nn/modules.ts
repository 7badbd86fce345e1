// Layers. Each owns named parameters in a ParamStore and emits its forward pass into any graph,
// so the same module serves the training graph and the exported inference graph.
import type { Graph, Tensor } from './graph.js';
import { add, conv2d, gather, layerNorm, matmul, relu, reshape, sigmoid, silu, tanh, transpose } from './ops.js';
import type { Init, ParamStore } from './params.js';
import { ShapeError } from './shape.js';

export type Activation = 'relu' | 'tanh' | 'silu' | 'sigmoid' | 'none';

export function activate(x: Tensor, act: Activation): Tensor {
  switch (act) {
    case 'relu': return relu(x);
    case 'tanh': return tanh(x);
    case 'silu': return silu(x);
    case 'sigmoid': return sigmoid(x);
    case 'none': return x;
  }
}

abstract class Module {
  private readonly shapes = new Map<string, number[]>();

  constructor(readonly store: ParamStore, readonly name: string) {}

  protected create(local: string, shape: number[], init: Init): void {
    this.store.create(`${this.name}.${local}`, shape, init);
    this.shapes.set(local, shape);
  }

  protected p(g: Graph, local: string): Tensor {
    return g.param(`${this.name}.${local}`, this.shapes.get(local)!);
  }

  /** Names of this module's parameters in the store. */
  paramNames(): string[] {
    return [...this.shapes.keys()].map((k) => `${this.name}.${k}`);
  }
}

/** y = x W + b; x [..., in] → [..., out]. Init as PyTorch: U(±1/√in). */
export class Linear extends Module {
  constructor(store: ParamStore, name: string, readonly inDim: number, readonly outDim: number, bias = true) {
    super(store, name);
    const bound = 1 / Math.sqrt(inDim);
    this.create('weight', [inDim, outDim], { uniform: bound });
    if (bias) this.create('bias', [outDim], { uniform: bound });
    this.hasBias = bias;
  }
  private readonly hasBias: boolean;

  forward(x: Tensor): Tensor {
    if (x.shape[x.rank - 1] !== this.inDim) throw new ShapeError(`${this.name} (Linear)`, `expects last dim ${this.inDim}`, [x.shape]);
    const y = x.rank === 1 ? matmul(reshape(x, [1, this.inDim]), this.p(x.graph, 'weight')) : matmul(x, this.p(x.graph, 'weight'));
    const out = this.hasBias ? add(y, this.p(x.graph, 'bias')) : y;
    return x.rank === 1 ? reshape(out, [this.outDim]) : out;
  }
}

export interface MLPConfig {
  sizes: number[];
  activation?: Activation;
  /** Applied to the last layer's output. */
  outActivation?: Activation;
}

/** Linear layers with an activation between; sizes = [in, hidden..., out]. */
export class MLP extends Module {
  readonly layers: Linear[];
  constructor(store: ParamStore, name: string, readonly config: MLPConfig) {
    super(store, name);
    if (config.sizes.length < 2) throw new Error(`${name}: MLP needs at least [in, out] sizes`);
    this.layers = config.sizes.slice(1).map((o, i) => new Linear(store, `${name}.l${i}`, config.sizes[i]!, o));
  }

  forward(x: Tensor): Tensor {
    let h = x;
    this.layers.forEach((l, i) => {
      h = l.forward(h);
      h = activate(h, i < this.layers.length - 1 ? (this.config.activation ?? 'relu') : (this.config.outActivation ?? 'none'));
    });
    return h;
  }

  override paramNames(): string[] {
    return this.layers.flatMap((l) => l.paramNames());
  }
}

/**
 * E independent linear layers batched in one weight tensor [E, in, out] (bias [E, 1, out]).
 * x [B, in] (shared by all members) or [E, B, in] → [E, B, out].
 */
export class EnsembleLinear extends Module {
  constructor(store: ParamStore, name: string, readonly members: number, readonly inDim: number, readonly outDim: number) {
    super(store, name);
    const bound = 1 / Math.sqrt(inDim);
    this.create('weight', [members, inDim, outDim], { uniform: bound });
    this.create('bias', [members, 1, outDim], { uniform: bound });
  }

  forward(x: Tensor): Tensor {
    const ok = x.shape[x.rank - 1] === this.inDim && (x.rank === 2 || (x.rank === 3 && x.shape[0] === this.members));
    if (!ok) throw new ShapeError(`${this.name} (EnsembleLinear)`, `expects [B, ${this.inDim}] or [${this.members}, B, ${this.inDim}]`, [x.shape]);
    return add(matmul(x, this.p(x.graph, 'weight')), this.p(x.graph, 'bias'));
  }
}

/** An ensemble of MLPs with members batched: one session evaluates all of them. */
export class EnsembleMLP extends Module {
  readonly layers: EnsembleLinear[];
  constructor(store: ParamStore, name: string, readonly members: number, readonly config: MLPConfig) {
    super(store, name);
    this.layers = config.sizes.slice(1).map((o, i) => new EnsembleLinear(store, `${name}.l${i}`, members, config.sizes[i]!, o));
  }

  /** x [B, in] or [E, B, in] → [E, B, out]. */
  forward(x: Tensor): Tensor {
    let h = x;
    this.layers.forEach((l, i) => {
      h = activate(l.forward(h), i < this.layers.length - 1 ? (this.config.activation ?? 'relu') : (this.config.outActivation ?? 'none'));
    });
    return h;
  }

  override paramNames(): string[] {
    return this.layers.flatMap((l) => l.paramNames());
  }
}

/** Token embedding: int64 ids [...] → [..., dim]. */
export class Embedding extends Module {
  constructor(store: ParamStore, name: string, readonly vocab: number, readonly dim: number) {
    super(store, name);
    this.create('table', [vocab, dim], { normal: 1 / Math.sqrt(dim) });
  }

  forward(ids: Tensor): Tensor {
    return gather(this.p(ids.graph, 'table'), ids);
  }
}

/** Layer normalization over the last axis, with learned scale and shift. */
export class LayerNorm extends Module {
  constructor(store: ParamStore, name: string, readonly dim: number, readonly eps = 1e-5) {
    super(store, name);
    this.create('gamma', [dim], 'ones');
    this.create('beta', [dim], 'zeros');
  }

  forward(x: Tensor): Tensor {
    if (x.shape[x.rank - 1] !== this.dim) throw new ShapeError(`${this.name} (LayerNorm)`, `expects last dim ${this.dim}`, [x.shape]);
    return layerNorm(x, this.p(x.graph, 'gamma'), this.p(x.graph, 'beta'), this.eps);
  }
}

export interface ConvEncoderConfig {
  /** Input image [H, W, C] (channels last, values in [0, 1]). */
  height: number;
  width: number;
  inChannels: number;
  /** Output channels of each conv layer (kernel `kernel`, stride 2, padding 1). */
  channels: number[];
  kernel?: number;
  outDim: number;
  activation?: Activation;
}

/** A small CNN image encoder: [N, H, W, C] in [0, 1] → [N, outDim]. */
export class ConvEncoder extends Module {
  readonly head: Linear;
  private readonly k: number;
  private readonly flat: number;

  constructor(store: ParamStore, name: string, readonly config: ConvEncoderConfig) {
    super(store, name);
    this.k = config.kernel ?? 3;
    let [h, w, c] = [config.height, config.width, config.inChannels];
    config.channels.forEach((o, i) => {
      const bound = 1 / Math.sqrt(c * this.k * this.k);
      this.create(`conv${i}.weight`, [o, c, this.k, this.k], { uniform: bound });
      this.create(`conv${i}.bias`, [o, 1, 1], { uniform: bound });
      h = Math.floor((h + 2 - this.k) / 2) + 1;
      w = Math.floor((w + 2 - this.k) / 2) + 1;
      c = o;
      if (h < 1 || w < 1) throw new Error(`${name}: image ${config.height}x${config.width} is too small for ${config.channels.length} stride-2 layers`);
    });
    this.flat = h * w * c;
    this.head = new Linear(store, `${name}.head`, this.flat, config.outDim);
  }

  forward(img: Tensor): Tensor {
    const { height, width, inChannels } = this.config;
    if (img.rank !== 4 || img.shape[1] !== height || img.shape[2] !== width || img.shape[3] !== inChannels) {
      throw new ShapeError(`${this.name} (ConvEncoder)`, `expects [N, ${height}, ${width}, ${inChannels}]`, [img.shape]);
    }
    let h = transpose(img, [0, 3, 1, 2]);
    this.config.channels.forEach((_, i) => {
      h = conv2d(h, this.p(img.graph, `conv${i}.weight`), { stride: 2, pad: 1 });
      h = activate(add(h, this.p(img.graph, `conv${i}.bias`)), this.config.activation ?? 'relu');
    });
    return this.head.forward(reshape(h, [img.shape[0]!, this.flat]));
  }

  override paramNames(): string[] {
    return [...super.paramNames(), ...this.head.paramNames()];
  }
}
