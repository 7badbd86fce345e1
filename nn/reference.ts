// Evaluates a graph in float64 TypeScript: the oracle for gradient checks and equivalence tests.
import { topoSort, type Tensor } from './graph.js';
import { nd, type ND } from './ndarray.js';
import { OPS } from './ops.js';
import type { ParamStore } from './params.js';

/**
 * Values of `outputs` given data-input values by name and parameter values (float64 overrides
 * by name take precedence over the store's float32 values).
 */
export function evaluate(
  outputs: readonly Tensor[],
  inputs: Readonly<Record<string, ND>>,
  store?: ParamStore,
  paramOverrides: Readonly<Record<string, ND>> = {},
): ND[] {
  const vals = new Map<number, ND>();
  for (const t of topoSort(outputs)) {
    if (t.op === 'input' || t.op === 'param') {
      const name = t.attrs.name as string;
      const v = t.op === 'input' ? inputs[name] : (paramOverrides[name] ?? (store ? toND(store.get(name)) : undefined));
      if (!v) throw new Error(`evaluate: no value for ${t.op} '${name}'`);
      vals.set(t.id, v);
    } else if (t.op === 'constant') {
      vals.set(t.id, nd(t.shape as number[], t.value!));
    } else {
      vals.set(t.id, OPS[t.op]!.eval(t, t.inputs.map((i) => vals.get(i.id)!)));
    }
  }
  return outputs.map((o) => vals.get(o.id)!);
}

const toND = (v: { shape: number[]; data: Float32Array }): ND => nd(v.shape, v.data);
