// Behaviour cloning: the policy's mean regressed onto demonstrated actions (mean squared error),
// the starting point that WMRL post-trains. Only the mean trains (meanParamNames); log-std keeps its
// value. Any policy of the one interface (types.ts): the Gaussian MLP on observation vectors, the VLA
// on observation vectors, camera images and instructions.
import { Graph, Rng, Trainer, mean, square, sub, sum, tensor, type AdamConfig } from '../nn/index.js';
import { declareContext, type Policy } from './types.js';

export interface Demonstrations {
  /** M x D. */
  obs: Float32Array;
  /** M x (chunk · A): the demonstrator's actions (for a chunked policy, the next `chunk` of them). */
  action: Float32Array;
  /** M x H x W x 3 uint8, for policies that read images. */
  images?: Uint8Array;
  /** M instructions, for policies that read them. */
  instructions?: readonly string[];
  /** M x F frozen-backbone features, for policies on a backbone. */
  features?: Float32Array;
}

export interface BcOptions {
  epochs: number;
  batchSize: number;
  optimizer: AdamConfig;
  seed: number;
  /** The step's schedule: constant, or decayed from optimizer.lr to 0 along a half cosine over the fit's steps. */
  schedule: 'constant' | 'cosine';
  onEpoch?: (epoch: number, loss: number) => void;
}

export const DEFAULT_BC: BcOptions = { epochs: 30, batchSize: 256, optimizer: { lr: 1e-3, clipNorm: 1 }, seed: 0, schedule: 'constant' };

/** Fits the policy's mean to the demonstrations; returns the last epoch's mean loss. */
export async function behaviourClone(policy: Policy, demos: Demonstrations, opts: Partial<BcOptions> = {}): Promise<number> {
  const o = { ...DEFAULT_BC, ...opts };
  const D = policy.obsDim, A = policy.chunk * policy.actDim;
  const M = demos.obs.length / D;
  if (!Number.isInteger(M) || M < 1) throw new Error(`bc: obs has ${demos.obs.length} values, not a positive multiple of obsDim ${D}`);
  if (demos.action.length !== M * A) throw new Error(`bc: action has ${demos.action.length} values, expected ${M} x ${A}`);
  const spec = policy.inputs();
  const px = spec.image ? spec.image.height * spec.image.width * 3 : 0;
  if (spec.image && demos.images?.length !== M * px) throw new Error(`bc: the policy reads images; images have ${demos.images?.length ?? 0} bytes, expected ${M} x ${spec.image.height} x ${spec.image.width} x 3`);
  if (spec.instruction && demos.instructions?.length !== M) throw new Error(`bc: the policy reads instructions; got ${demos.instructions?.length ?? 0} for ${M} rows`);
  const F = spec.features?.dim ?? 0;
  if (F && demos.features?.length !== M * F) throw new Error(`bc: the policy reads backbone features; features have ${demos.features?.length ?? 0} values, expected ${M} x ${F}`);
  const g = new Graph();
  const obs = g.input('obs', ['M', D]);
  const ctx = declareContext(policy, g, 'M');
  const target = g.input('target', ['M', A]);
  const loss = mean(sum(square(sub(policy.forward(obs, ctx).mean, target)), -1));
  const trainer = await Trainer.create({ loss, store: policy.store, optimizer: o.optimizer, trainable: policy.meanParamNames() }, { threads: 1 });
  const rng = new Rng(o.seed);
  const order = Array.from({ length: M }, (_, i) => i);
  const bs = Math.min(o.batchSize, M);
  if (o.schedule !== 'constant' && o.schedule !== 'cosine') throw new Error(`bc: schedule must be 'constant' or 'cosine', got ${String(o.schedule)}`);
  const steps = o.epochs * Math.floor(M / bs);
  let last = NaN, step = 0;
  try {
    for (let e = 0; e < o.epochs; e++) {
      rng.shuffle(order);
      let total = 0, n = 0;
      for (let s = 0; s + bs <= M; s += bs) {
        const x = new Float32Array(bs * D), y = new Float32Array(bs * A);
        const images = spec.image ? new Uint8Array(bs * px) : undefined;
        const instructions: string[] = [];
        const features = F ? new Float32Array(bs * F) : undefined;
        for (let r = 0; r < bs; r++) {
          const k = order[s + r]!;
          // Plain loops: a subarray view per short row costs more than copying its entries.
          for (let j = 0; j < D; j++) x[r * D + j] = demos.obs[k * D + j]!;
          for (let j = 0; j < A; j++) y[r * A + j] = demos.action[k * A + j]!;
          if (images) images.set(demos.images!.subarray(k * px, (k + 1) * px), r * px);
          if (spec.instruction) instructions.push(demos.instructions![k]!);
          if (features) features.set(demos.features!.subarray(k * F, (k + 1) * F), r * F);
        }
        const feeds = policy.contextFeeds(spec.image || spec.instruction || F ? { images, instructions, features } : undefined, bs);
        if (o.schedule === 'cosine') trainer.setLearningRate(o.optimizer.lr * 0.5 * (1 + Math.cos((Math.PI * step++) / steps)));
        total += (await trainer.step({ obs: tensor(x, [bs, D]), target: tensor(y, [bs, A]), ...feeds })).loss;
        n++;
      }
      last = total / n;
      o.onEpoch?.(e, last);
    }
    trainer.syncToStore();
  } finally {
    await trainer.release();
  }
  return last;
}
