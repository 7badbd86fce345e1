// An ensemble of action-value critics Q_e(s, a) with layer normalization, as off-policy learners from demonstrations
// use them (RLPD, Ball et al. 2023; HIL-SERL): every member an MLP over the normalized observation and the action,
// Dense → LayerNorm → ReLU per hidden layer (layer norm keeps the values of actions far from the data bounded), the
// members batched in one weight tensor so one graph evaluates all of them.
import { EnsembleLinear, concat, div, layerNorm, relu, squeeze, sub, type ParamStore, type Tensor } from '../nn/index.js';

export interface QEnsembleConfig {
  members: number;
  obsDim: number;
  actDim: number;
  hidden: number[];
  /** Fixed observation normalization (obs − mean) / std, as the policy's. */
  obsMean: readonly number[];
  obsStd: readonly number[];
}

/** The members' parameters live in `store` under `name`; `forward` emits all members into any graph. */
export class QEnsemble {
  private readonly layers: EnsembleLinear[];
  private readonly norms: string[];

  constructor(readonly store: ParamStore, readonly name: string, readonly config: QEnsembleConfig) {
    const { members: E, obsDim: D, actDim: A, hidden } = config;
    if (!(Number.isInteger(E) && E >= 1)) throw new Error(`q-ensemble: members must be a positive integer, got ${E}`);
    if (config.obsMean.length !== D || config.obsStd.length !== D) throw new Error(`q-ensemble: obsMean/obsStd have ${config.obsMean.length}/${config.obsStd.length} entries, obsDim is ${D}`);
    if (!hidden.length) throw new Error('q-ensemble: at least one hidden layer');
    const sizes = [D + A, ...hidden, 1];
    this.layers = sizes.slice(1).map((o, i) => new EnsembleLinear(store, `${name}.l${i}`, E, sizes[i]!, o));
    this.norms = hidden.flatMap((h, i) => {
      store.create(`${name}.ln${i}.gamma`, [E, 1, h], 'ones');
      store.create(`${name}.ln${i}.beta`, [E, 1, h], 'zeros');
      return [`${name}.ln${i}.gamma`, `${name}.ln${i}.beta`];
    });
  }

  /** obs [N, D], action [N, A] → Q of every member [E, N]. */
  forward(obs: Tensor, action: Tensor): Tensor {
    const c = this.config, g = obs.graph;
    const z = div(sub(obs, g.constant([...c.obsMean], [c.obsDim])), g.constant([...c.obsStd], [c.obsDim]));
    let h = concat([z, action], -1);
    this.layers.forEach((l, i) => {
      h = l.forward(h);
      if (i < this.layers.length - 1) {
        const shape = [c.members, 1, c.hidden[i]!];
        h = relu(layerNorm(h, g.param(`${this.name}.ln${i}.gamma`, shape), g.param(`${this.name}.ln${i}.beta`, shape)));
      }
    });
    return squeeze(h, [2]);
  }

  paramNames(): string[] {
    return [...this.layers.flatMap((l) => l.paramNames()), ...this.norms];
  }
}
