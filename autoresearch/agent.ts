// The built-in research agent's policy (the model; the algorithms that train it are
// train_standard.ts and train_wmrl.ts): a factorized categorical distribution over a task's
// structured proposals, one softmax per field, per context (prompt). Its policy-gradient step takes
// a GRPO step's weighted advantages: θ += lr · mean over scored rollouts of w·A·∇log π(proposal).
import type { Rng } from '../nn/rng.js';
import type { Score } from '../wmrl/advantages.js';
import type { Field, Proposal, ResearchTask } from './task.js';

/** One rollout of the agent: a proposal for a context, and the training seed its execution uses. */
export interface ResearchRollout {
  context: string;
  proposal: Proposal;
  /** Index of each field's choice, in field order. */
  choice: number[];
  seed: number;
}

export class ProposalPolicy {
  /** context → logits, fields concatenated. */
  private readonly logits = new Map<string, Float64Array>();
  private readonly offsets: number[];
  private readonly width: number;

  constructor(readonly task: ResearchTask) {
    let o = 0;
    this.offsets = task.fields.map((f) => { const at = o; o += f.choices.length; return at; });
    this.width = o;
  }

  private theta(context: string): Float64Array {
    let t = this.logits.get(context);
    if (!t) this.logits.set(context, (t = new Float64Array(this.width)));
    return t;
  }

  /** π over one field's choices. */
  probs(context: string, field: number): Float64Array {
    const f = this.task.fields[field]!;
    const t = this.theta(context);
    const o = this.offsets[field]!;
    const p = new Float64Array(f.choices.length);
    let m = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < p.length; i++) m = Math.max(m, t[o + i]!);
    let s = 0;
    for (let i = 0; i < p.length; i++) { p[i] = Math.exp(t[o + i]! - m); s += p[i]!; }
    for (let i = 0; i < p.length; i++) p[i]! /= s;
    return p;
  }

  sample(context: string, rng: Rng): ResearchRollout {
    const choice = this.task.fields.map((_, fi) => {
      const p = this.probs(context, fi);
      let u = rng.next();
      let i = 0;
      while (i < p.length - 1 && u >= p[i]!) { u -= p[i]!; i++; }
      return i;
    });
    return { context, proposal: this.proposalOf(choice), choice, seed: rng.int(this.task.seeds) };
  }

  /** The most probable proposal. */
  greedy(context: string): Proposal {
    return this.proposalOf(this.task.fields.map((_, fi) => {
      const p = this.probs(context, fi);
      let best = 0;
      for (let i = 1; i < p.length; i++) if (p[i]! > p[best]!) best = i;
      return best;
    }));
  }

  /** Mean entropy per field, nats. */
  entropy(context: string): number {
    let h = 0;
    this.task.fields.forEach((_, fi) => { for (const q of this.probs(context, fi)) if (q > 0) h -= q * Math.log(q); });
    return h / this.task.fields.length;
  }

  /**
   * One policy-gradient step from a GRPO step: `advantages` and `weights` [group][rollout] as the
   * Corrector or StandardGrpo returned them (null = excluded). Per context, the mean over its scored
   * rollouts of w·A·(onehot − π) per field.
   */
  update(groups: ReadonlyArray<readonly ResearchRollout[]>, advantages: readonly Score[][], weights: readonly number[][], lr: number): void {
    const grads = new Map<string, { g: Float64Array; n: number }>();
    groups.forEach((grp, gi) => grp.forEach((r, i) => {
      const a = advantages[gi]![i];
      if (a === null || a === undefined) return;
      const w = weights[gi]![i]!;
      let e = grads.get(r.context);
      if (!e) grads.set(r.context, (e = { g: new Float64Array(this.width), n: 0 }));
      e.n++;
      this.task.fields.forEach((_, fi) => {
        const p = this.probs(r.context, fi);
        const o = this.offsets[fi]!;
        for (let c = 0; c < p.length; c++) e!.g[o + c]! += w * a * ((c === r.choice[fi] ? 1 : 0) - p[c]!);
      });
    }));
    for (const [ctx, { g, n }] of grads) {
      const t = this.theta(ctx);
      for (let i = 0; i < t.length; i++) t[i]! += (lr * g[i]!) / n;
    }
  }

  private proposalOf(choice: readonly number[]): Proposal {
    return Object.fromEntries(this.task.fields.map((f: Field, fi) => [f.name, f.choices[choice[fi]!]!]));
  }
}
