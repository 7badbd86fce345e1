// The clipped policy-gradient update both trainers share (GRPO: one advantage per rollout, given to
// each of its steps). Per step i: w_i · min(r_i A_i, clip(r_i, 1 ± ε) A_i) with r_i = π(a|s) / π_old(a|s);
// the loss is minus its mean over the batch (not over Σw: weights add to an anchor group's pull
// without shrinking the others), minus an entropy bonus. One ONNX graph per step (nn/ Trainer).
import {
  Graph, Rng, Trainer, abs, add, clip, exp, gaussianEntropy, gaussianLogProb, greater, mean, minimum, mul, neg, sub, tensor, toFloat,
  type AdamConfig,
} from '../nn/index.js';
import type { GaussianPolicy } from './gaussian.js';

export interface PgConfig {
  /** Ratio clip ε. */
  clipRatio: number;
  /** Entropy bonus coefficient. */
  entropyCoef: number;
  optimizer: AdamConfig;
  /** Passes over each batch. */
  epochs: number;
  /** Steps per minibatch. */
  minibatch: number;
}

export const DEFAULT_PG_CONFIG: PgConfig = {
  clipRatio: 0.2,
  entropyCoef: 0,
  optimizer: { lr: 3e-4, clipNorm: 0.5 },
  epochs: 4,
  minibatch: 512,
};

/** Steps of many rollouts, flattened. M = number of steps. */
export interface PgBatch {
  /** M x D. */
  obs: Float32Array;
  /** M x A: the actions taken (unclipped samples). */
  action: Float32Array;
  /** M: log-probabilities under the policy that acted. */
  oldLogProb: Float32Array;
  /** M: the rollout's advantage, repeated over its steps. */
  advantage: Float32Array;
  /** M: the rollout's weight (1 for plain GRPO; anchor and inverse-variance weights otherwise). */
  weight: Float32Array;
}

export interface PgStats {
  loss: number;
  /** Mean of (old − new) log-prob over the last epoch: a cheap KL estimate. */
  approxKl: number;
  /** Fraction of steps whose ratio was clipped, last epoch. */
  clipFraction: number;
  entropy: number;
  gradNorm: number;
  minibatches: number;
}

export class ClippedPolicyGradient {
  private constructor(readonly policy: GaussianPolicy, readonly trainer: Trainer, readonly config: PgConfig) {}

  static async create(policy: GaussianPolicy, config: PgConfig = DEFAULT_PG_CONFIG): Promise<ClippedPolicyGradient> {
    if (!(config.clipRatio > 0 && config.clipRatio < 1)) throw new Error(`pg: clipRatio must be in (0, 1), got ${config.clipRatio}`);
    if (!(config.epochs >= 1 && config.minibatch >= 1)) throw new Error('pg: epochs and minibatch must be ≥ 1');
    const g = new Graph();
    const D = policy.obsDim, A = policy.actDim;
    const obs = g.input('obs', ['M', D]);
    const action = g.input('action', ['M', A]);
    const oldLogProb = g.input('old_log_prob', ['M']);
    const adv = g.input('advantage', ['M']);
    const weight = g.input('weight', ['M']);
    const { mean: mu, logStd } = policy.forward(obs);
    const logProb = gaussianLogProb(action, mu, logStd);
    const ratio = exp(sub(logProb, oldLogProb));
    const eps = config.clipRatio;
    const surrogate = minimum(mul(ratio, adv), mul(clip(ratio, 1 - eps, 1 + eps), adv));
    const entropy = gaussianEntropy(logStd);
    const loss = sub(neg(mean(mul(weight, surrogate))), mul(entropy, config.entropyCoef));
    const trainer = await Trainer.create({
      loss,
      store: policy.store,
      optimizer: config.optimizer,
      trainable: policy.paramNames(),
      metrics: {
        approx_kl: mean(sub(oldLogProb, logProb)),
        clip_fraction: mean(toFloat(greater(abs(sub(ratio, 1)), eps))),
        entropy: add(entropy, 0),
      },
    }, { threads: 1 });
    return new ClippedPolicyGradient(policy, trainer, config);
  }

  /** `epochs` passes over the batch in shuffled minibatches; the policy's store holds the result. */
  async update(batch: PgBatch, rng: Rng): Promise<PgStats> {
    const D = this.policy.obsDim, A = this.policy.actDim;
    const M = batch.advantage.length;
    if (M === 0) throw new Error('pg: empty batch');
    const sizes: Array<[string, number, number]> = [['obs', batch.obs.length, M * D], ['action', batch.action.length, M * A], ['oldLogProb', batch.oldLogProb.length, M], ['weight', batch.weight.length, M]];
    for (const [k, got, want] of sizes) if (got !== want) throw new Error(`pg: ${k} has ${got} values, expected ${want} (M = ${M})`);
    for (const [k, arr] of Object.entries(batch) as Array<[string, Float32Array]>) {
      const bad = arr.findIndex((v) => !Number.isFinite(v));
      if (bad >= 0) throw new Error(`pg: ${k}[${bad}] is ${arr[bad]}`);
    }
    const mb = Math.min(this.config.minibatch, M);
    const order = Array.from({ length: M }, (_, i) => i);
    let last = { loss: 0, kl: 0, clip: 0, ent: 0, norm: 0, n: 0 };
    let minibatches = 0;
    for (let e = 0; e < this.config.epochs; e++) {
      rng.shuffle(order);
      last = { loss: 0, kl: 0, clip: 0, ent: 0, norm: 0, n: 0 };
      for (let s = 0; s + mb <= M; s += mb) {
        const idx = order.slice(s, s + mb);
        const n = idx.length;
        const o = new Float32Array(n * D), a = new Float32Array(n * A), lp = new Float32Array(n), ad = new Float32Array(n), w = new Float32Array(n);
        idx.forEach((j, r) => {
          o.set(batch.obs.subarray(j * D, (j + 1) * D), r * D);
          a.set(batch.action.subarray(j * A, (j + 1) * A), r * A);
          lp[r] = batch.oldLogProb[j]!;
          ad[r] = batch.advantage[j]!;
          w[r] = batch.weight[j]!;
        });
        const res = await this.trainer.step({
          obs: tensor(o, [n, D]), action: tensor(a, [n, A]), old_log_prob: tensor(lp, [n]), advantage: tensor(ad, [n]), weight: tensor(w, [n]),
        });
        const m = (k: string) => (res.metrics[k]!.data as Float32Array)[0]!;
        last.loss += res.loss; last.kl += m('approx_kl'); last.clip += m('clip_fraction'); last.ent += m('entropy'); last.norm += res.gradNorm; last.n++;
        minibatches++;
      }
    }
    this.trainer.syncToStore();
    const k = Math.max(last.n, 1);
    return { loss: last.loss / k, approxKl: last.kl / k, clipFraction: last.clip / k, entropy: last.ent / k, gradNorm: last.norm / k, minibatches };
  }

  saveCheckpoint(path: string): void {
    this.trainer.saveCheckpoint(path);
  }

  /** Restores parameters and optimizer state; the policy's store is updated too. */
  loadCheckpoint(path: string): void {
    this.trainer.loadCheckpoint(path);
    this.trainer.syncToStore();
  }

  async release(): Promise<void> {
    await this.trainer.release();
  }
}
