// Behaviour cloning for a scripted session's checkpoint: an MLP fitted to the (observation, commanded
// action) pairs the session recorded, exported as a deployable policy .onnx (input obs, output action,
// normalization inside the graph). Until the WMRL trainer lands it is the policy a run leaves behind.
import * as nn from '../nn/index.js';

export interface BcData {
  obs: Float32Array[];
  act: Float32Array[];
}

export interface BcResult {
  bytes: Uint8Array;
  /** Mean squared action error on the training pairs after fitting. */
  loss: number;
  samples: number;
}

export async function fitBehaviourCloning(d: BcData, o: { steps?: number; seed?: number; metadata?: Record<string, unknown> } = {}): Promise<BcResult> {
  const n = d.obs.length;
  if (n === 0 || n !== d.act.length) throw new Error(`behaviour cloning needs matching, non-empty pairs (got ${n} observations, ${d.act.length} actions)`);
  const D = d.obs[0]!.length, A = d.act[0]!.length;
  const mean = new Float32Array(D), std = new Float32Array(D);
  for (const x of d.obs) for (let i = 0; i < D; i++) mean[i]! += x[i]! / n;
  for (const x of d.obs) for (let i = 0; i < D; i++) std[i]! += (x[i]! - mean[i]!) ** 2 / n;
  for (let i = 0; i < D; i++) std[i] = Math.sqrt(std[i]!) + 1e-3; // constant features stay finite

  const store = new nn.ParamStore(o.seed ?? 0);
  const mlp = new nn.MLP(store, 'policy', { sizes: [D, 64, 64, A], activation: 'tanh', outActivation: 'tanh' });
  const normalized = (g: nn.Graph, x: nn.Tensor) => nn.div(nn.sub(x, g.constant(mean, [D])), g.constant(std, [D]));
  const g = new nn.Graph();
  const x = g.input('x', ['batch', D]);
  const y = g.input('y', ['batch', A]);
  const loss = nn.mean(nn.square(nn.sub(mlp.forward(normalized(g, x)), y)));
  const trainer = await nn.Trainer.create({ loss, store, optimizer: { lr: 3e-3 } });
  const rng = new nn.Rng(o.seed ?? 0);
  const B = Math.min(256, n);
  let last = Infinity;
  try {
    for (let s = 0; s < (o.steps ?? 400); s++) {
      const xb = new Float32Array(B * D), yb = new Float32Array(B * A);
      for (let k = 0; k < B; k++) {
        const i = Math.floor(rng.uniform(0, n)) % n;
        xb.set(d.obs[i]!, k * D);
        yb.set(d.act[i]!, k * A);
      }
      last = (await trainer.step({ x: nn.tensor(xb, [B, D]), y: nn.tensor(yb, [B, A]) })).loss;
    }
    trainer.syncToStore();
  } finally {
    await trainer.release();
  }
  const gi = new nn.Graph();
  const obs = gi.input('obs', ['batch', D]);
  const bytes = nn.exportModel({
    inputs: [{ name: 'obs', tensor: obs, doc: `[batch, ${D}]: joint positions, joint velocities, task features` }],
    outputs: [{ name: 'action', tensor: mlp.forward(normalized(gi, obs)), doc: `[batch, ${A}]: normalized action in [-1, 1]` }],
    store,
    graphName: 'policy',
    metadata: { kind: 'policy', source: 'behaviour-cloning', samples: n, train_mse: last, ...o.metadata },
  });
  return { bytes, loss: last, samples: n };
}
