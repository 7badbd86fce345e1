// A small policy .onnx with the deployment contract (input obs [batch, D], output action [batch, A]),
// made with the nn/ engine: an untrained MLP with a tanh output.
import * as nn from '../../nn/index.js';

export function policyOnnx(obsDim: number, actDim: number, seed = 0): Uint8Array {
  const store = new nn.ParamStore(seed);
  const mlp = new nn.MLP(store, 'pi', { sizes: [obsDim, 16, actDim], activation: 'tanh', outActivation: 'tanh' });
  const g = new nn.Graph();
  const obs = g.input('obs', ['batch', obsDim]);
  return nn.exportModel({ inputs: [{ name: 'obs', tensor: obs }], outputs: [{ name: 'action', tensor: mlp.forward(obs) }], store, graphName: 'policy', metadata: { kind: 'test_policy' } });
}
