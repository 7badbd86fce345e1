// Gradient checking: float32 analytic gradients from the ONNX graph run by ONNX Runtime, against
// float64 central finite differences of the TypeScript reference evaluator.
import { evaluate, grad, nd, Program, Rng, tensor, type ND, type ParamStore, type Tensor } from '../../nn/index.js';

/** A fresh seed per run (reproduce a failure with GRADCHECK_SEED=<seed>). */
export const gradSeed = (): number => Number(process.env.GRADCHECK_SEED ?? (Date.now() ^ (process.pid << 8)) >>> 0);

export type Kind = 'float' | 'pos' | { int: number } | 'bool';

/** Random values that are never zero: |x| in [0.2, 1.5] with random sign, or positive in [0.5, 2]. */
export function randomValues(rng: Rng, n: number, kind: Kind): number[] {
  return Array.from({ length: n }, () => {
    if (kind === 'bool') return rng.next() < 0.5 ? 1 : 0;
    if (typeof kind === 'object') return rng.int(kind.int);
    const m = kind === 'pos' ? rng.uniform(0.5, 2) : rng.uniform(0.2, 1.5) * (rng.next() < 0.5 ? -1 : 1);
    return Math.fround(m);
  });
}

export interface GradCase {
  /** Float inputs are differentiated; int and bool inputs are fixed. */
  inputs: Array<{ name: string; shape: number[]; kind: Kind }>;
  params?: ParamStore;
  loss: Tensor;
  wrt: Tensor[];
  wrtNames: string[];
}

export interface GradReport {
  name: string;
  relError: number;
  analytic: number[];
  numeric: number[];
}

const dtypeOf = (k: Kind) => (k === 'bool' ? 'bool' : typeof k === 'object' ? 'int64' : 'float32');

/**
 * Returns the relative error ‖a − n‖ / max(‖a‖, ‖n‖) per target. A draw where a one-sided difference
 * disagrees with the other (a tie in max, a ReLU at 0: the loss has a kink within h) is redrawn,
 * since the finite difference there measures the kink, not the gradient (CI seed 1316201001).
 */
export async function checkGradients(c: GradCase, rng: Rng, h = 1e-5, maxDraws = 8): Promise<GradReport[]> {
  const grads = grad(c.loss, c.wrt);
  const g = c.loss.graph;
  // Params are fed as inputs so this checks exactly the tensors a Trainer differentiates.
  const paramInputs = [...g.params.entries()].filter(([n]) => c.params?.has(n));
  const prog = await Program.fromSpec({
    inputs: [...c.inputs.map((i) => ({ name: i.name, tensor: g.inputs.get(i.name)! })), ...paramInputs.map(([name, tensor]) => ({ name, tensor }))],
    outputs: grads.map((d, k) => {
      if (!d) throw new Error(`no gradient path to ${c.wrtNames[k]}`);
      return { name: `grad_${k}`, tensor: d };
    }),
  });
  try {
    for (let draw = 0; draw < maxDraws; draw++) {
      const reports = await checkOnce(c, rng, h, prog, paramInputs.map(([n]) => n));
      if (reports) return reports;
    }
  } finally {
    await prog.release();
  }
  throw new Error(`gradient check: ${maxDraws} draws in a row sat within h=${h} of a kink`);
}

async function checkOnce(c: GradCase, rng: Rng, h: number, prog: Program, paramNames: string[]): Promise<GradReport[] | null> {
  const values: Record<string, ND> = {};
  const feeds: Record<string, ReturnType<typeof tensor>> = {};
  for (const i of c.inputs) {
    const v = randomValues(rng, i.shape.reduce((a, b) => a * b, 1), i.kind);
    values[i.name] = nd(i.shape, v);
    feeds[i.name] = tensor(v, i.shape, dtypeOf(i.kind));
  }
  for (const n of paramNames) feeds[n] = tensor(c.params!.get(n).data, c.params!.get(n).shape);
  const out = await prog.run(feeds);

  const overrides: Record<string, ND> = {};
  for (const n of paramNames) overrides[n] = nd(c.params!.get(n).shape, c.params!.get(n).data);
  const lossAt = () => evaluate([c.loss], values, undefined, overrides)[0]!.data[0]!;
  const at0 = lossAt();
  let kink = false;
  const reports = c.wrt.map((w, k) => {
    const name = c.wrtNames[k]!;
    const target = w.op === 'param' ? overrides[name]! : values[name]!;
    const numeric = Array.from(target.data, (x0, i) => {
      target.data[i] = x0 + h;
      const up = lossAt();
      target.data[i] = x0 - h;
      const down = lossAt();
      target.data[i] = x0;
      const central = (up - down) / (2 * h);
      if (Math.abs((up - at0) / h - (at0 - down) / h) > 5e-3 * Math.max(1, Math.abs(central))) kink = true;
      return central;
    });
    const analytic = Array.from(out[`grad_${k}`]!.data as Float32Array);
    let diff = 0, na = 0, nn = 0;
    analytic.forEach((a, i) => {
      diff += (a - numeric[i]!) ** 2;
      na += a * a;
      nn += numeric[i]! ** 2;
    });
    const relError = Math.sqrt(diff) / Math.max(Math.sqrt(na), Math.sqrt(nn), 1e-12);
    return { name, relError, analytic, numeric };
  });
  return kink ? null : reports;
}
