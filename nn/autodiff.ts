// Reverse-mode autodiff: the backward pass is emitted as more nodes of the same graph.
import { topoSort, type Tensor } from './graph.js';
import { add, OPS, sum } from './ops.js';
import { fmtShape, ShapeError, type Shape } from './shape.js';

/** Sums a broadcast gradient back down to `shape` (the adjoint of broadcasting). */
export function sumToShape(g: Tensor, shape: Shape): Tensor {
  const lead = g.rank - shape.length;
  if (lead < 0) throw new ShapeError('sumToShape', `gradient rank below target`, [g.shape, shape]);
  const keep: number[] = [];
  shape.forEach((d, i) => {
    const e = g.shape[lead + i];
    if (d === 1 && e !== 1) keep.push(lead + i);
    else if (d !== e) throw new ShapeError('sumToShape', `dimension ${i} differs`, [g.shape, shape]);
  });
  let r = keep.length ? sum(g, keep, true) : g;
  if (lead > 0) r = sum(r, [...Array(lead).keys()], false);
  return r;
}

/**
 * Gradients of a scalar `loss` with respect to each of `wrt` (params or inputs), as graph tensors.
 * An unreachable target gets `null`.
 */
export function grad(loss: Tensor, wrt: readonly Tensor[]): Array<Tensor | null> {
  if (loss.rank !== 0) throw new ShapeError('grad', `loss must be a scalar, got ${fmtShape(loss.shape)}`);
  if (loss.dtype !== 'float32') throw new ShapeError('grad', `loss must be float32, got ${loss.dtype}`);
  const order = topoSort([loss]);
  // Only nodes on a path to a target need gradients.
  const targets = new Set(wrt.map((t) => t.id));
  const needed = new Set<number>();
  for (const t of order) if (targets.has(t.id) || t.inputs.some((i) => needed.has(i.id))) needed.add(t.id);

  const grads = new Map<number, Tensor>([[loss.id, loss.graph.scalar(1)]]);
  for (let k = order.length - 1; k >= 0; k--) {
    const t = order[k]!;
    const g = grads.get(t.id);
    if (!g || !t.inputs.some((i) => needed.has(i.id))) continue;
    const def = OPS[t.op];
    if (!def?.vjp) throw new ShapeError('grad', `op '${t.op}' is not differentiable but lies between the loss and a target`);
    const gs = def.vjp(t, g);
    t.inputs.forEach((inp, i) => {
      const gi = gs[i];
      if (!gi || !needed.has(inp.id)) return;
      const shaped = sumToShape(gi, inp.shape);
      const prev = grads.get(inp.id);
      grads.set(inp.id, prev ? add(prev, shaped) : shaped);
    });
  }
  return wrt.map((t) => grads.get(t.id) ?? null);
}
