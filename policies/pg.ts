// The clipped policy-gradient update both trainers share (GRPO: one advantage per rollout, given to
// each of its steps). Per step i: w_i · min(r_i A_i, clip(r_i, 1 ± ε) A_i) with r_i = π(a|s) / π_old(a|s);
// the loss is minus its mean over the batch (not over Σw: weights add to an anchor group's pull
// without shrinking the others), minus an entropy bonus. One ONNX graph per step (nn/ Trainer).
// Any policy of the one interface (types.ts): the graph declares the context inputs the policy reads
// (declareContext: image, tokens, features), and the batch carries each step's context; a policy whose
// encoder stays frozen (Policy.encoderSplit) is trained as its head on features encoded once per update.
// Optionally GRPO's KL penalty to the policy the update started from (klCoef).
import { existsSync } from 'node:fs';
import {
  Graph, Program, Rng, Trainer, abs, add, readTensorFile, writeTensorFile, clip, exp, gaussianEntropy, gaussianLogProb, greater, mean, minimum, mul, neg, sub, tensor, toFloat,
  type AdamConfig,
} from '../nn/index.js';
import { declareContext, type EncoderSplit, type Policy, type PolicyContext } from './types.js';

/** The graph input of a frozen encoder's features (EncoderSplit): named apart from a backbone head's `features`. */
const ENCODED = 'encoded_features';
/** Rows per run of the reference policy's log-probabilities. */
const REFERENCE_ROWS = 4096;

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
  /**
   * Early stop (PPO's target KL): once a minibatch measures an approximate KL from the acting policy above
   * 1.5 × this, the update takes no further minibatch steps (that minibatch's own step is already applied: the
   * Trainer measures and steps in one call). Omit for every epoch, always. A small log-std makes each step move
   * the policy's distribution more, so fixed epochs can overshoot where a KL target holds the step size.
   */
  targetKl?: number;
  /**
   * β of GRPO's KL penalty to the reference policy: the trainable parameters as `create` found them (a
   * behaviour-cloned policy, say; the frozen ones are read from the store as always). Per step the k3 estimate of
   * KL(π ‖ π_ref) at the taken action, exp(d) − d − 1 with d = log π_ref(a|s) − log π(a|s) clipped to ±20 (as verl
   * does), averaged over the batch unweighted (a zero-weight step still pulls back) and added to the loss times β.
   * Its gradient is zero at the reference; as a loss on the acting policy's samples it is the gradient of
   * KL(π_ref ‖ π), which has the same minimum. The update measures π_ref's log-probabilities once per batch with the
   * reference's values swapped into the store for that pass, so nothing else may read the store during an update (on a
   * frozen encoder's features, the head's program is fed the reference's values instead and the store is untouched).
   * A checkpoint carries the reference. Omit or 0 for none.
   */
  klCoef?: number;
}

export const DEFAULT_PG_CONFIG: PgConfig = {
  clipRatio: 0.2,
  entropyCoef: 0,
  optimizer: { lr: 3e-4, clipNorm: 0.5 },
  epochs: 4,
  minibatch: 512,
};

/** Steps of many rollouts, flattened. M = number of steps, K = chunk · A. */
export interface PgBatch {
  /** M x D. */
  obs: Float32Array;
  /** M x K: the actions taken (unclipped samples). */
  action: Float32Array;
  /** M: log-probabilities under the policy that acted. */
  oldLogProb: Float32Array;
  /** M: the rollout's advantage, repeated over its steps. */
  advantage: Float32Array;
  /** M: the rollout's weight (1 for plain GRPO; anchor and inverse-variance weights otherwise). */
  weight: Float32Array;
  /** M x H x W x 3 uint8: the camera image each step's action was taken on (policies that read images). */
  images?: Uint8Array;
  /** M: each step's instruction (policies that read instructions). */
  instructions?: readonly string[];
  /** M x F: each step's frozen-backbone features (a head on a backbone). */
  features?: Float32Array;
}

export interface PgStats {
  loss: number;
  /** Mean of (old − new) log-prob over the last epoch's minibatches (each measured before its step): a cheap KL estimate. */
  approxKl: number;
  /** Fraction of steps whose ratio was clipped, last epoch. */
  clipFraction: number;
  entropy: number;
  gradNorm: number;
  minibatches: number;
  /** The update stopped early on the KL target (config.targetKl). */
  stoppedEarly: boolean;
  /** Mean k3 estimate of KL(π ‖ π_ref) over the last epoch's minibatches; null without the penalty (config.klCoef). */
  refKl: number | null;
}

export class ClippedPolicyGradient {
  private constructor(
    readonly policy: Policy,
    readonly trainer: Trainer,
    readonly config: PgConfig,
    /** The reference policy's values of the trainable parameters (config.klCoef), by name; a checkpoint restores them. */
    private readonly reference: Map<string, Float32Array> | null,
    /**
     * The policy's encoder when none of its parameters trains (Policy.encoderSplit): each update encodes every step
     * once and the graph is the head alone on those features; null: the graph runs the whole policy.
     */
    private readonly frozen: { split: EncoderSplit; reference: Program | null } | null,
  ) {}

  /**
   * `trainable`: the parameters the update moves (default every one of the policy's); the rest stay as they are,
   * e.g. a VLA's image and instruction encoder while its head is post-trained. A policy that offers its encoder
   * apart (Policy.encoderSplit) and none of whose encoder parameters is trainable is trained as its head on each
   * step's features, encoded once per update: the same loss and gradient, without running the encoder in every
   * epoch's minibatches.
   */
  static async create(policy: Policy, config: PgConfig = DEFAULT_PG_CONFIG, opts: { trainable?: readonly string[] } = {}): Promise<ClippedPolicyGradient> {
    const all = policy.paramNames();
    const trainable = opts.trainable ?? all;
    const unknown = trainable.filter((n) => !all.includes(n));
    if (unknown.length) throw new Error(`pg: trainable names parameters the ${policy.kind} policy does not have: ${unknown.join(', ')}`);
    if (!trainable.length) throw new Error('pg: no trainable parameters');
    if (!(config.clipRatio > 0 && config.clipRatio < 1)) throw new Error(`pg: clipRatio must be in (0, 1), got ${config.clipRatio}`);
    if (!(config.epochs >= 1 && config.minibatch >= 1)) throw new Error('pg: epochs and minibatch must be ≥ 1');
    if (config.targetKl !== undefined && !(config.targetKl > 0 && Number.isFinite(config.targetKl))) throw new Error(`pg: targetKl must be a positive number, got ${config.targetKl}`);
    if (config.klCoef !== undefined && !(config.klCoef >= 0 && Number.isFinite(config.klCoef))) throw new Error(`pg: klCoef must be a number ≥ 0, got ${config.klCoef}`);
    const klCoef = config.klCoef ?? 0;
    const g = new Graph();
    const D = policy.obsDim, K = policy.chunk * policy.actDim;
    const obs = g.input('obs', ['M', D]);
    const action = g.input('action', ['M', K]);
    const oldLogProb = g.input('old_log_prob', ['M']);
    const adv = g.input('advantage', ['M']);
    const weight = g.input('weight', ['M']);
    const split = policy.encoderSplit?.() ?? null;
    const encoder = split && !split.paramNames.some((n) => trainable.includes(n)) ? split : null;
    const { mean: mu, logStd } = encoder ? encoder.head(obs, g.input(ENCODED, ['M', encoder.dim])) : policy.forward(obs, declareContext(policy, g, 'M'));
    const logProb = gaussianLogProb(action, mu, logStd);
    const ratio = exp(sub(logProb, oldLogProb));
    const eps = config.clipRatio;
    const surrogate = minimum(mul(ratio, adv), mul(clip(ratio, 1 - eps, 1 + eps), adv));
    const entropy = gaussianEntropy(logStd);
    let loss = sub(neg(mean(mul(weight, surrogate))), mul(entropy, config.entropyCoef));
    // GRPO's KL to the reference, k3 estimate at the taken action (d clipped so one far-off step cannot overflow).
    const refKl = klCoef > 0 ? (() => {
      const d = clip(sub(g.input('ref_log_prob', ['M']), logProb), -20, 20);
      return mean(sub(sub(exp(d), d), 1));
    })() : null;
    if (refKl) loss = add(loss, mul(refKl, klCoef));
    const trainer = await Trainer.create({
      loss,
      store: policy.store,
      optimizer: config.optimizer,
      trainable: [...trainable],
      metrics: {
        approx_kl: mean(sub(oldLogProb, logProb)),
        clip_fraction: mean(toFloat(greater(abs(sub(ratio, 1)), eps))),
        entropy: add(entropy, 0),
        ...(refKl ? { ref_kl: refKl } : {}),
      },
    }, { threads: 1 });
    const reference = klCoef > 0 ? new Map(trainable.map((n) => [n, Float32Array.from(policy.store.get(n).data)])) : null;
    return new ClippedPolicyGradient(policy, trainer, config, reference, encoder ? { split: encoder, reference: reference ? await headLogProbProgram(encoder, D, K) : null } : null);
  }

  /** `epochs` passes over the batch in shuffled minibatches; the policy's store holds the result. */
  async update(batch: PgBatch, rng: Rng): Promise<PgStats> {
    const D = this.policy.obsDim, K = this.policy.chunk * this.policy.actDim;
    const M = batch.advantage.length;
    if (M === 0) throw new Error('pg: empty batch');
    const reads = this.policy.inputs();
    const px = reads.image ? reads.image.height * reads.image.width * 3 : 0, F = reads.features?.dim ?? 0;
    const sizes: Array<[string, number, number]> = [['obs', batch.obs.length, M * D], ['action', batch.action.length, M * K], ['oldLogProb', batch.oldLogProb.length, M], ['weight', batch.weight.length, M]];
    if (px) sizes.push(['images', batch.images?.length ?? 0, M * px]);
    if (reads.instruction) sizes.push(['instructions', batch.instructions?.length ?? 0, M]);
    if (F) sizes.push(['features', batch.features?.length ?? 0, M * F]);
    for (const [k, got, want] of sizes) if (got !== want) throw new Error(`pg: ${k} has ${got} values, expected ${want} (M = ${M}, policy ${this.policy.kind})`);
    for (const [k, arr] of Object.entries({ obs: batch.obs, action: batch.action, oldLogProb: batch.oldLogProb, advantage: batch.advantage, weight: batch.weight, ...(F ? { features: batch.features! } : {}) })) {
      const bad = arr.findIndex((v) => !Number.isFinite(v));
      if (bad >= 0) throw new Error(`pg: ${k}[${bad}] is ${arr[bad]}`);
    }
    // A frozen encoder's features of every step, once: the minibatches feed them in place of the context.
    const encoded = this.frozen ? await this.frozen.split.encode(contextRows(batch, 0, M, px, F, !!reads.instruction), M) : null;
    const E = this.frozen?.split.dim ?? 0;
    const refLogProb = this.reference ? await this.referenceLogProb(batch, M, px, F, encoded) : null;
    const mb = Math.min(this.config.minibatch, M);
    const order = Array.from({ length: M }, (_, i) => i);
    let last = { loss: 0, kl: 0, clip: 0, ent: 0, norm: 0, refKl: 0, n: 0 };
    let minibatches = 0, stoppedEarly = false;
    const klLimit = this.config.targetKl === undefined ? Infinity : 1.5 * this.config.targetKl;
    for (let e = 0; e < this.config.epochs && !stoppedEarly; e++) {
      rng.shuffle(order);
      last = { loss: 0, kl: 0, clip: 0, ent: 0, norm: 0, refKl: 0, n: 0 };
      for (let s = 0; s + mb <= M && !stoppedEarly; s += mb) {
        const idx = order.slice(s, s + mb);
        const n = idx.length;
        const o = new Float32Array(n * D), a = new Float32Array(n * K), lp = new Float32Array(n), ad = new Float32Array(n), w = new Float32Array(n);
        const rlp = refLogProb ? new Float32Array(n) : null;
        const enc = encoded ? new Float32Array(n * E) : null;
        const images = px && !enc ? new Uint8Array(n * px) : undefined, features = F && !enc ? new Float32Array(n * F) : undefined;
        const instructions: string[] = [];
        idx.forEach((j, r) => {
          o.set(batch.obs.subarray(j * D, (j + 1) * D), r * D);
          a.set(batch.action.subarray(j * K, (j + 1) * K), r * K);
          lp[r] = batch.oldLogProb[j]!;
          ad[r] = batch.advantage[j]!;
          w[r] = batch.weight[j]!;
          if (rlp) rlp[r] = refLogProb![j]!;
          if (enc) enc.set(encoded!.subarray(j * E, (j + 1) * E), r * E);
          if (images) images.set(batch.images!.subarray(j * px, (j + 1) * px), r * px);
          if (features) features.set(batch.features!.subarray(j * F, (j + 1) * F), r * F);
          if (reads.instruction && !enc) instructions.push(batch.instructions![j]!);
        });
        const ctx: PolicyContext | undefined = px || F || reads.instruction ? { images, features, ...(reads.instruction ? { instructions } : {}) } : undefined;
        const res = await this.trainer.step({
          obs: tensor(o, [n, D]), action: tensor(a, [n, K]), old_log_prob: tensor(lp, [n]), advantage: tensor(ad, [n]), weight: tensor(w, [n]),
          ...(rlp ? { ref_log_prob: tensor(rlp, [n]) } : {}),
          ...(enc ? { [ENCODED]: tensor(enc, [n, E]) } : this.policy.contextFeeds(ctx, n)),
        });
        const m = (k: string) => (res.metrics[k]!.data as Float32Array)[0]!;
        last.loss += res.loss; last.kl += m('approx_kl'); last.clip += m('clip_fraction'); last.ent += m('entropy'); last.norm += res.gradNorm; last.n++;
        if (rlp) last.refKl += m('ref_kl');
        minibatches++;
        if (m('approx_kl') > klLimit) stoppedEarly = true;
      }
    }
    this.trainer.syncToStore();
    const k = Math.max(last.n, 1);
    return { loss: last.loss / k, approxKl: last.kl / k, clipFraction: last.clip / k, entropy: last.ent / k, gradNorm: last.norm / k, minibatches, stoppedEarly, refKl: refLogProb ? last.refKl / k : null };
  }

  /**
   * log π_ref(a|s) of every step. On a frozen encoder's features: the head's log-probability program fed the
   * reference's values. Otherwise the reference's parameters go into the store for this pass and the trained ones
   * come back after it (the trainer holds its own copy; the store equals it between updates).
   */
  private async referenceLogProb(batch: PgBatch, M: number, px: number, F: number, encoded: Float32Array | null): Promise<Float32Array> {
    const store = this.policy.store, D = this.policy.obsDim, K = this.policy.chunk * this.policy.actDim;
    const out = new Float32Array(M);
    if (encoded) {
      const program = this.frozen!.reference!, E = this.frozen!.split.dim;
      const params = Object.fromEntries(program.session.inputNames.filter((n) => !['obs', 'action', ENCODED].includes(n)).map((n) => {
        const v = store.get(n);
        return [n, tensor(this.reference!.get(n) ?? v.data, v.shape)];
      }));
      for (let s = 0; s < M; s += REFERENCE_ROWS) {
        const e = Math.min(M, s + REFERENCE_ROWS);
        const r = await program.run({ obs: tensor(batch.obs.subarray(s * D, e * D), [e - s, D]), action: tensor(batch.action.subarray(s * K, e * K), [e - s, K]), [ENCODED]: tensor(encoded.subarray(s * E, e * E), [e - s, E]), ...params });
        out.set(r.log_prob!.data as Float32Array, s);
      }
    } else {
      const current = new Map([...this.reference!.keys()].map((n) => [n, Float32Array.from(store.get(n).data)]));
      try {
        for (const [n, v] of this.reference!) store.set(n, v);
        for (let s = 0; s < M; s += REFERENCE_ROWS) {
          const e = Math.min(M, s + REFERENCE_ROWS);
          out.set(await this.policy.logProb(batch.obs.subarray(s * D, e * D), batch.action.subarray(s * K, e * K), contextRows(batch, s, e, px, F, !!this.policy.inputs().instruction)), s);
        }
      } finally {
        for (const [n, v] of current) store.set(n, v);
      }
    }
    const bad = out.findIndex((v) => !Number.isFinite(v));
    if (bad >= 0) throw new Error(`pg: the reference policy's log-probability of step ${bad} is ${out[bad]}`);
    return out;
  }

  /**
   * Parameters and optimizer state in `path`; with config.klCoef the reference policy too, in `<path>.reference`
   * (written first: the trainer's file is the one a resume looks for).
   */
  saveCheckpoint(path: string): void {
    if (this.reference) writeTensorFile(`${path}.reference`, [...this.reference].map(([n, data]) => [n, { shape: [...this.policy.store.get(n).shape], data }]));
    this.trainer.saveCheckpoint(path);
  }

  /** Restores parameters, optimizer state and (config.klCoef) the reference policy; the policy's store is updated too. */
  loadCheckpoint(path: string): void {
    if (this.reference) {
      const file = `${path}.reference`;
      if (!existsSync(file)) throw new Error(`pg: checkpoint ${path} has no reference policy (${file}), which klCoef needs: it was written by an update without the KL penalty`);
      const { tensors } = readTensorFile(file);
      for (const [n, cur] of this.reference) {
        const v = tensors.get(n);
        if (!v) throw new Error(`pg: reference ${file} lacks '${n}'`);
        if (v.data.length !== cur.length) throw new Error(`pg: reference ${file}: '${n}' has ${v.data.length} values, expected ${cur.length}`);
      }
      for (const n of this.reference.keys()) this.reference.set(n, Float32Array.from(tensors.get(n)!.data));
    }
    this.trainer.loadCheckpoint(path);
    this.trainer.syncToStore();
  }

  async release(): Promise<void> {
    await this.frozen?.reference?.release();
    await this.trainer.release();
  }
}

/** The context of the batch's steps s..e (images, backbone features, instructions: what the policy reads). */
function contextRows(batch: PgBatch, s: number, e: number, px: number, F: number, instruction: boolean): PolicyContext {
  return {
    ...(px ? { images: batch.images!.subarray(s * px, e * px) } : {}),
    ...(F ? { features: batch.features!.subarray(s * F, e * F) } : {}),
    ...(instruction ? { instructions: batch.instructions!.slice(s, e) } : {}),
  };
}

/** log π(action | obs, features) of the head on a frozen encoder's features, its parameters fed as inputs (the reference policy's). */
async function headLogProbProgram(encoder: EncoderSplit, D: number, K: number): Promise<Program> {
  const g = new Graph();
  const obs = g.input('obs', ['M', D]), action = g.input('action', ['M', K]), features = g.input(ENCODED, ['M', encoder.dim]);
  const { mean: mu, logStd } = encoder.head(obs, features);
  const params = [...g.params].map(([name, t]) => ({ name, tensor: t }));
  return Program.fromSpec({ inputs: [{ name: 'obs', tensor: obs }, { name: 'action', tensor: action }, { name: ENCODED, tensor: features }, ...params], outputs: [{ name: 'log_prob', tensor: gaussianLogProb(action, mu, logStd) }], graphName: 'pg_reference_head' }, { threads: 1 });
}
