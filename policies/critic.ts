// A learned state-value baseline (critic) and generalized advantage estimation (GAE, Schulman et al. 2016):
// per-step advantages A_t = Σ_k (γλ)^k δ_{t+k}, δ_t = r_t + γ V(s_{t+1}) − V(s_t), for on-policy training that
// credits each step rather than whole episodes (GRPO's group advantages, wmrl/advantages.ts). The critic is an
// MLP over the normalized observation vector, fitted by mean squared error to the λ-returns A_t + V(s_t).
import { Graph, MLP, ParamStore, Program, Rng, Trainer, div, f32, mean, square, sub, tensor, type AdamConfig } from '../nn/index.js';

/** One episode's steps in a flat step array: `start`, `length`; `terminal` = it ended in a terminal state (no bootstrap). */
export interface EpisodeSpan {
  start: number;
  length: number;
  /** True when the episode ended in a terminal state (success, failure); false when cut by a time limit. */
  terminal: boolean;
  /** V of the state after the last step, the bootstrap of a time-limited episode (ignored when terminal). */
  bootstrap: number;
}

/**
 * GAE over episodes laid out in flat arrays: `reward` and `value` (V(s_t)) per step. Returns the advantages and the
 * λ-returns (advantage + value, the critic's regression target). A terminal episode bootstraps 0 after its last step,
 * a time-limited one its `bootstrap` value.
 */
export function gae(reward: ArrayLike<number>, value: ArrayLike<number>, episodes: readonly EpisodeSpan[], gamma: number, lambda: number): { advantage: Float32Array; returns: Float32Array } {
  if (reward.length !== value.length) throw new Error(`gae: ${reward.length} rewards but ${value.length} values`);
  if (!(gamma >= 0 && gamma <= 1 && lambda >= 0 && lambda <= 1)) throw new Error(`gae: gamma and lambda must be in [0, 1], got ${gamma}, ${lambda}`);
  const advantage = new Float32Array(reward.length), returns = new Float32Array(reward.length);
  for (const ep of episodes) {
    if (ep.start < 0 || ep.length < 1 || ep.start + ep.length > reward.length) throw new Error(`gae: episode [${ep.start}, ${ep.start + ep.length}) is outside the ${reward.length} steps`);
    let next = ep.terminal ? 0 : ep.bootstrap, acc = 0;
    for (let t = ep.length - 1; t >= 0; t--) {
      const j = ep.start + t;
      acc = reward[j]! + gamma * next - value[j]! + gamma * lambda * acc;
      advantage[j] = acc;
      returns[j] = acc + value[j]!;
      next = value[j]!;
    }
  }
  return { advantage, returns };
}

export interface CriticConfig {
  obsDim: number;
  /** Fixed observation normalization (obs − mean) / std, as the policy's. */
  obsMean: readonly number[];
  obsStd: readonly number[];
  hidden?: number[];
  optimizer?: AdamConfig;
  seed?: number;
}

/** V(s): an MLP (tanh) over the normalized observation. */
export class ValueCritic {
  private constructor(
    readonly obsDim: number,
    private readonly store: ParamStore,
    private readonly names: string[],
    private readonly trainer: Trainer,
    private readonly program: Program,
  ) {}

  static async create(c: CriticConfig): Promise<ValueCritic> {
    const D = c.obsDim;
    if (c.obsMean.length !== D || c.obsStd.length !== D) throw new Error(`critic: obsMean/obsStd have ${c.obsMean.length}/${c.obsStd.length} entries, obsDim is ${D}`);
    const store = new ParamStore(c.seed ?? 0);
    const net = new MLP(store, 'value', { sizes: [D, ...(c.hidden ?? [128, 128]), 1], activation: 'tanh' });
    const emit = (g: Graph) => {
      const obs = g.input('obs', ['M', D]);
      return { obs, v: net.forward(div(sub(obs, g.constant([...c.obsMean], [D])), g.constant([...c.obsStd], [D]))) };
    };
    const tg = new Graph();
    const { v } = emit(tg);
    const target = tg.input('target', ['M', 1]);
    const trainer = await Trainer.create({ loss: mean(square(sub(v, target))), store, optimizer: c.optimizer ?? { lr: 1e-3, clipNorm: 1 }, trainable: net.paramNames() }, { threads: 1 });
    const pg = new Graph();
    const p = emit(pg);
    const params = net.paramNames().map((name) => ({ name, tensor: pg.params.get(name)! }));
    const program = await Program.fromSpec({ inputs: [{ name: 'obs', tensor: p.obs }, ...params], outputs: [{ name: 'value', tensor: p.v }], graphName: 'value' }, { threads: 1 });
    return new ValueCritic(D, store, net.paramNames(), trainer, program);
  }

  /** V of N observations (N x D). */
  async predict(obs: Float32Array): Promise<Float32Array> {
    const n = obs.length / this.obsDim;
    if (!Number.isInteger(n) || n < 1) throw new Error(`critic: obs has ${obs.length} values, not a positive multiple of obsDim ${this.obsDim}`);
    const feeds: Record<string, ReturnType<typeof tensor>> = { obs: tensor(obs, [n, this.obsDim]) };
    for (const name of this.names) { const p = this.store.get(name); feeds[name] = tensor(p.data, p.shape); }
    return Float32Array.from(f32((await this.program.run(feeds)).value!));
  }

  /** `epochs` shuffled passes of minibatch regression onto `target` (N); returns the last epoch's mean loss. */
  async fit(obs: Float32Array, target: Float32Array, o: { epochs: number; minibatch: number; rng: Rng }): Promise<number> {
    const D = this.obsDim, M = target.length;
    if (obs.length !== M * D) throw new Error(`critic: obs has ${obs.length} values, expected ${M} x ${D}`);
    const bad = target.findIndex((x) => !Number.isFinite(x));
    if (bad >= 0) throw new Error(`critic: target[${bad}] is ${target[bad]}`);
    const mb = Math.min(o.minibatch, M), order = Array.from({ length: M }, (_, i) => i);
    let last = NaN;
    for (let e = 0; e < o.epochs; e++) {
      o.rng.shuffle(order);
      let sum = 0, n = 0;
      for (let s = 0; s + mb <= M; s += mb) {
        const x = new Float32Array(mb * D), y = new Float32Array(mb);
        for (let r = 0; r < mb; r++) { const j = order[s + r]!; x.set(obs.subarray(j * D, (j + 1) * D), r * D); y[r] = target[j]!; }
        sum += (await this.trainer.step({ obs: tensor(x, [mb, D]), target: tensor(y, [mb, 1]) })).loss;
        n++;
      }
      last = sum / n;
    }
    this.trainer.syncToStore();
    return last;
  }

  async release(): Promise<void> {
    await this.trainer.release();
    await this.program.release();
  }
}
