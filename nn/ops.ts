// The op set: for each op, shape inference (at build time), ONNX emission, a float64 reference
// evaluation, and the vector-Jacobian product expressed in ops of this same set.
import { Graph, Tensor, concreteShape, type Attrs, type DType } from './graph.js';
import * as N from './ndarray.js';
import { broadcastShapes, fmtShape, normAxis, sameShape, ShapeError, type Dim, type Shape } from './shape.js';

export type OnnxAttr =
  | { type: 'int'; v: number }
  | { type: 'float'; v: number }
  | { type: 'ints'; v: readonly number[] }
  | { type: 'string'; v: string };

export interface EmitCtx {
  /** Value names of the node's inputs, in order. */
  readonly inputs: readonly string[];
  /** The value name this node must produce. */
  readonly output: string;
  node(opType: string, inputs: readonly string[], outputs: readonly string[], attrs?: Record<string, OnnxAttr>): void;
  /** An int64 constant (1-D, or 0-D when `scalar`). */
  i64(values: readonly number[], scalar?: boolean): string;
  f32(v: number): string;
  tmp(hint: string): string;
}

export interface OpDef {
  emit(t: Tensor, ctx: EmitCtx): void;
  eval(t: Tensor, xs: N.ND[]): N.ND;
  /** Gradients for each input, possibly still broadcast (autodiff sums them to shape); null: none. */
  vjp?: (t: Tensor, g: Tensor) => Array<Tensor | null>;
}

export const OPS: Record<string, OpDef> = {};
const int = (v: number): OnnxAttr => ({ type: 'int', v });
const ints = (v: readonly number[]): OnnxAttr => ({ type: 'ints', v });
const str = (v: string): OnnxAttr => ({ type: 'string', v });
const num = (a: Attrs, k: string): number => a[k] as number;
const list = (a: Attrs, k: string): readonly number[] => a[k] as readonly number[];

export type TensorLike = Tensor | number;

function graphOf(xs: TensorLike[]): Graph {
  const t = xs.find((x): x is Tensor => x instanceof Tensor);
  if (!t) throw new Error('op needs at least one Tensor argument');
  return t.graph;
}
const lift = (g: Graph, x: TensorLike): Tensor => (x instanceof Tensor ? x : g.scalar(x));

function expectFloat(op: string, ...ts: Tensor[]): void {
  for (const t of ts) if (t.dtype !== 'float32') throw new ShapeError(op, `expects float32 input, got ${t.dtype}`, [t.shape]);
}

// ---------------------------------------------------------------- elementwise

function binary(op: string, onnx: string, f: (a: number, b: number) => number, out: DType, vjp?: OpDef['vjp']): (a: TensorLike, b: TensorLike) => Tensor {
  OPS[op] = {
    emit: (_t, c) => c.node(onnx, c.inputs, [c.output]),
    eval: (_t, [a, b]) => N.nary([a!, b!], f),
    vjp,
  };
  return (a, b) => {
    const g = graphOf([a, b]);
    const [x, y] = [lift(g, a), lift(g, b)];
    expectFloat(op, x, y);
    return g.add(op, [x, y], {}, broadcastShapes(op, x.shape, y.shape), out);
  };
}

export const add = binary('add', 'Add', (a, b) => a + b, 'float32', (_t, g) => [g, g]);
export const sub = binary('sub', 'Sub', (a, b) => a - b, 'float32', (_t, g) => [g, neg(g)]);
export const mul = binary('mul', 'Mul', (a, b) => a * b, 'float32', (t, g) => [mul(g, t.inputs[1]!), mul(g, t.inputs[0]!)]);
export const div = binary('div', 'Div', (a, b) => a / b, 'float32', (t, g) => {
  const b = t.inputs[1]!;
  return [div(g, b), neg(div(mul(g, t), b))];
});
export const pow = binary('pow', 'Pow', (a, b) => a ** b, 'float32', (t, g) => {
  const [a, b] = t.inputs as [Tensor, Tensor];
  return [mul(g, mul(b, pow(a, sub(b, 1)))), mul(g, mul(t, log(a)))];
});
export const minimum = binary('minimum', 'Min', Math.min, 'float32', (t, g) => {
  const bLess = greater(t.inputs[0]!, t.inputs[1]!);
  return [where(bLess, 0, g), where(bLess, g, 0)];
});
export const maximum = binary('maximum', 'Max', Math.max, 'float32', (t, g) => {
  const bMore = greater(t.inputs[1]!, t.inputs[0]!);
  return [where(bMore, 0, g), where(bMore, g, 0)];
});
export const greater = binary('greater', 'Greater', (a, b) => +(a > b), 'bool');
export const less = binary('less', 'Less', (a, b) => +(a < b), 'bool');
export const equal = binary('equal', 'Equal', (a, b) => +(a === b), 'bool');

function unary(op: string, onnx: string, f: (x: number) => number, vjp?: OpDef['vjp']): (x: Tensor) => Tensor {
  OPS[op] = { emit: (_t, c) => c.node(onnx, c.inputs, [c.output]), eval: (_t, [x]) => N.unary(x!, f), vjp };
  return (x) => {
    expectFloat(op, x);
    return x.graph.add(op, [x], {}, x.shape, 'float32');
  };
}

const sigm = (x: number) => 1 / (1 + Math.exp(-x));
export const neg = unary('neg', 'Neg', (x) => -x, (_t, g) => [neg(g)]);
// Mask by multiplication: ORT's Where with a broadcast scalar is several times slower than Mul.
export const relu = unary('relu', 'Relu', (x) => Math.max(x, 0), (t, g) => [mul(g, toFloat(greater(t, 0)))]);
export const tanh = unary('tanh', 'Tanh', Math.tanh, (t, g) => [mul(g, sub(1, mul(t, t)))]);
export const sigmoid = unary('sigmoid', 'Sigmoid', sigm, (t, g) => [mul(g, mul(t, sub(1, t)))]);
export const exp = unary('exp', 'Exp', Math.exp, (t, g) => [mul(g, t)]);
export const log = unary('log', 'Log', Math.log, (t, g) => [div(g, t.inputs[0]!)]);
export const softplus = unary('softplus', 'Softplus', (x) => (x > 0 ? x + Math.log1p(Math.exp(-x)) : Math.log1p(Math.exp(x))), (t, g) => [mul(g, sigmoid(t.inputs[0]!))]);
export const sqrt = unary('sqrt', 'Sqrt', Math.sqrt, (t, g) => [div(g, mul(t, 2))]);
export const abs = unary('abs', 'Abs', Math.abs, (t, g) => [where(greater(t.inputs[0]!, 0), g, neg(g))]);
export const sin = unary('sin', 'Sin', Math.sin, (t, g) => [mul(g, cos(t.inputs[0]!))]);
export const cos = unary('cos', 'Cos', Math.cos, (t, g) => [neg(mul(g, sin(t.inputs[0]!)))]);
/** Identity in the forward pass; blocks gradients. */
export const stopGradient = unary('stopGradient', 'Identity', (x) => x, () => [null]);

OPS.cast = { emit: (_t, c) => c.node('Cast', c.inputs, [c.output], { to: int(1) }), eval: (_t, [x]) => N.unary(x!, (v) => v) };
/** bool or int64 → float32. */
export function toFloat(x: Tensor): Tensor {
  return x.dtype === 'float32' ? x : x.graph.add('cast', [x], {}, x.shape, 'float32');
}

OPS.where = {
  emit: (_t, c) => c.node('Where', c.inputs, [c.output]),
  eval: (_t, [c, a, b]) => N.nary([c!, a!, b!], (k, x, y) => (k ? x : y)),
  vjp: (t, g) => [null, where(t.inputs[0]!, g, 0), where(t.inputs[0]!, 0, g)],
};
/** cond ? a : b, with broadcasting. */
export function where(cond: Tensor, a: TensorLike, b: TensorLike): Tensor {
  if (cond.dtype !== 'bool') throw new ShapeError('where', `condition must be bool, got ${cond.dtype}`);
  const [x, y] = [lift(cond.graph, a), lift(cond.graph, b)];
  expectFloat('where', x, y);
  return cond.graph.add('where', [cond, x, y], {}, broadcastShapes('where', cond.shape, x.shape, y.shape), 'float32');
}

OPS.clip = {
  emit: (t, c) => c.node('Clip', [c.inputs[0]!, c.f32(num(t.attrs, 'lo')), c.f32(num(t.attrs, 'hi'))], [c.output]),
  eval: (t, [x]) => N.unary(x!, (v) => Math.min(Math.max(v, num(t.attrs, 'lo')), num(t.attrs, 'hi'))),
  vjp: (t, g) => {
    const x = t.inputs[0]!;
    return [where(less(x, num(t.attrs, 'lo')), 0, where(greater(x, num(t.attrs, 'hi')), 0, g))];
  },
};
export function clip(x: Tensor, lo: number, hi: number): Tensor {
  expectFloat('clip', x);
  if (!(lo <= hi)) throw new ShapeError('clip', `lower bound ${lo} exceeds upper bound ${hi}`);
  return x.graph.add('clip', [x], { lo, hi }, x.shape, 'float32');
}

// ---------------------------------------------------------------- reductions

function axesOf(op: string, x: Tensor, axes?: number | readonly number[]): number[] {
  const as = axes === undefined ? x.shape.map((_, i) => i) : typeof axes === 'number' ? [axes] : [...axes];
  const norm = as.map((a) => normAxis(op, a, x.rank));
  if (new Set(norm).size !== norm.length) throw new ShapeError(op, `repeated axis in [${as.join(', ')}]`, [x.shape]);
  return norm.sort((a, b) => a - b);
}
function reducedShape(x: Tensor, axes: readonly number[], keepdims: boolean): Dim[] {
  return keepdims ? x.shape.map((d, i) => (axes.includes(i) ? 1 : d)) : x.shape.filter((_, i) => !axes.includes(i));
}
/** The gradient of a reduction, restored to the input's rank and broadcast to its shape. */
function unreduce(t: Tensor, g: Tensor): Tensor {
  const axes = list(t.attrs, 'axes');
  const kept = t.attrs.keepdims ? g : axes.length ? unsqueeze(g, axes) : g;
  return broadcastTo(kept, t.inputs[0]!);
}

function reduction(op: 'sum' | 'mean' | 'max', onnx: string, vjp: OpDef['vjp']) {
  OPS[op] = {
    emit: (t, c) => {
      const axes = list(t.attrs, 'axes');
      if (!axes.length) return c.node('Identity', c.inputs, [c.output]);
      const keepdims = int(t.attrs.keepdims ? 1 : 0);
      // opset 17: ReduceSum takes axes as an input; ReduceMean/ReduceMax still as an attribute.
      if (op === 'sum') c.node(onnx, [c.inputs[0]!, c.i64(axes)], [c.output], { keepdims });
      else c.node(onnx, c.inputs, [c.output], { axes: ints(axes), keepdims });
    },
    eval: (t, [x]) => N.reduce(x!, list(t.attrs, 'axes'), !!t.attrs.keepdims, op),
    vjp,
  };
  return (x: Tensor, axes?: number | readonly number[], keepdims = false): Tensor => {
    expectFloat(op, x);
    const as = axesOf(op, x, axes);
    return x.graph.add(op, [x], { axes: as, keepdims }, reducedShape(x, as, keepdims), 'float32');
  };
}

/** Sum over `axes` (all when omitted). */
export const sum = reduction('sum', 'ReduceSum', (t, g) => [unreduce(t, g)]);
export const mean = reduction('mean', 'ReduceMean', (t, g) => [mul(unreduce(t, g), numelRatio(t, t.inputs[0]!))]);
/** Max over `axes`; its gradient goes to every position equal to the max (ties are measure-zero). */
export const max = reduction('max', 'ReduceMax', (t, g) => {
  const x = t.inputs[0]!;
  const m = broadcastTo(t.attrs.keepdims ? t : unsqueeze(t, list(t.attrs, 'axes')), x);
  return [where(equal(x, m), unreduce(t, g), 0)];
});

// ---------------------------------------------------------------- shape ops

OPS.reshape = {
  emit: (t, c) => {
    const x = t.inputs[0]!;
    // Symbolic dims: 0 copies the input's dim at that index; at most one other is inferred (-1).
    const spec = t.shape.map((d, i) => (typeof d === 'number' ? d : x.shape[i] === d ? 0 : -1));
    c.node('Reshape', [c.inputs[0]!, c.i64(spec)], [c.output]);
  },
  eval: (t, [x]) => {
    const known = t.shape.filter((d): d is number => typeof d === 'number').reduce((a, b) => a * b, 1);
    const shape = t.shape.map((d, i) => (typeof d === 'number' ? d : t.inputs[0]!.shape[i] === d ? x!.shape[i]! : -1));
    const copied = shape.reduce((a, d, i) => (typeof t.shape[i] !== 'number' && d !== -1 ? a * d : a), 1);
    return { shape: shape.map((d) => (d === -1 ? x!.data.length / (known * copied) : d)), data: x!.data };
  },
  vjp: (t, g) => [reshape(g, t.inputs[0]!.shape)],
};
export function reshape(x: Tensor, shape: Shape): Tensor {
  const conc = (s: Shape) => s.filter((d): d is number => typeof d === 'number').reduce((a, b) => a * b, 1);
  const syms = (s: Shape) => s.filter((d) => typeof d === 'string').sort().join();
  const inferred = shape.filter((d, i) => typeof d === 'string' && x.shape[i] !== d).length;
  if (conc(x.shape) !== conc(shape) || syms(x.shape) !== syms(shape) || inferred > 1 || shape.some((d) => typeof d === 'number' && d < 1)) {
    throw new ShapeError('reshape', `cannot reshape ${fmtShape(x.shape)} to ${fmtShape(shape)}`);
  }
  return x.graph.add('reshape', [x], {}, [...shape], x.dtype);
}

OPS.transpose = {
  emit: (t, c) => c.node('Transpose', c.inputs, [c.output], { perm: ints(list(t.attrs, 'perm')) }),
  eval: (t, [x]) => N.transpose(x!, list(t.attrs, 'perm')),
  vjp: (t, g) => {
    const perm = list(t.attrs, 'perm');
    const inv = perm.map((_, i) => perm.indexOf(i));
    return [transpose(g, inv)];
  },
};
/** Permutes axes; default reverses the last two (matrix transpose). */
export function transpose(x: Tensor, perm?: readonly number[]): Tensor {
  const r = x.rank;
  const p = perm ? perm.map((a) => normAxis('transpose', a, r)) : [...Array(r).keys()].map((i) => (i < r - 2 ? i : i === r - 2 ? r - 1 : r - 2));
  if (p.length !== r || new Set(p).size !== r) throw new ShapeError('transpose', `invalid permutation [${perm?.join(', ')}]`, [x.shape]);
  return x.graph.add('transpose', [x], { perm: p }, p.map((a) => x.shape[a]!), x.dtype);
}

OPS.concat = {
  emit: (t, c) => c.node('Concat', c.inputs, [c.output], { axis: int(num(t.attrs, 'axis')) }),
  eval: (t, xs) => N.concat(xs, num(t.attrs, 'axis')),
  vjp: (t, g) => {
    const axis = num(t.attrs, 'axis');
    let at = 0;
    return t.inputs.map((x) => {
      const d = x.shape[axis] as number;
      at += d;
      return slice(g, axis, at - d, at);
    });
  },
};
export function concat(xs: readonly Tensor[], axis: number): Tensor {
  if (!xs.length) throw new ShapeError('concat', 'needs at least one tensor');
  const x0 = xs[0]!;
  const ax = normAxis('concat', axis, x0.rank);
  let total = 0;
  for (const x of xs) {
    const d = x.shape[ax];
    if (x.rank !== x0.rank || x.dtype !== x0.dtype || x.shape.some((e, i) => i !== ax && e !== x0.shape[i]) || typeof d !== 'number') {
      throw new ShapeError('concat', `tensors differ outside axis ${ax} (or that axis is symbolic)`, xs.map((t) => t.shape));
    }
    total += d;
  }
  const shape = [...x0.shape];
  shape[ax] = total;
  return x0.graph.add('concat', xs, { axis: ax }, shape, x0.dtype);
}

OPS.slice = {
  emit: (t, c) => c.node('Slice', [c.inputs[0]!, c.i64([num(t.attrs, 'start')]), c.i64([num(t.attrs, 'end')]), c.i64([num(t.attrs, 'axis')])], [c.output]),
  eval: (t, [x]) => N.slice(x!, num(t.attrs, 'axis'), num(t.attrs, 'start'), num(t.attrs, 'end')),
  vjp: (t, g) => {
    const d = t.inputs[0]!.shape[num(t.attrs, 'axis')] as number;
    return [pad(g, num(t.attrs, 'axis'), num(t.attrs, 'start'), d - num(t.attrs, 'end'))];
  },
};
/** x[..., start:end, ...] along one axis (step 1). */
export function slice(x: Tensor, axis: number, start: number, end: number): Tensor {
  const ax = normAxis('slice', axis, x.rank);
  const d = x.shape[ax];
  if (typeof d !== 'number') throw new ShapeError('slice', `axis ${ax} is symbolic`, [x.shape]);
  if (!(Number.isInteger(start) && Number.isInteger(end) && 0 <= start && start < end && end <= d)) {
    throw new ShapeError('slice', `range [${start}, ${end}) out of bounds for axis ${ax} of size ${d}`, [x.shape]);
  }
  const shape = [...x.shape];
  shape[ax] = end - start;
  return x.graph.add('slice', [x], { axis: ax, start, end }, shape, x.dtype);
}

OPS.pad = {
  emit: (t, c) => {
    const r = t.rank;
    const pads = new Array<number>(2 * r).fill(0);
    pads[num(t.attrs, 'axis')] = num(t.attrs, 'before');
    pads[r + num(t.attrs, 'axis')] = num(t.attrs, 'after');
    c.node('Pad', [c.inputs[0]!, c.i64(pads)], [c.output], { mode: str('constant') });
  },
  eval: (t, [x]) => N.pad(x!, num(t.attrs, 'axis'), num(t.attrs, 'before'), num(t.attrs, 'after')),
  vjp: (t, g) => {
    const ax = num(t.attrs, 'axis');
    const b = num(t.attrs, 'before');
    return [slice(g, ax, b, b + (t.inputs[0]!.shape[ax] as number))];
  },
};
/** Zero padding along one axis. */
export function pad(x: Tensor, axis: number, before: number, after: number): Tensor {
  const ax = normAxis('pad', axis, x.rank);
  const d = x.shape[ax];
  if (typeof d !== 'number' || before < 0 || after < 0) throw new ShapeError('pad', `cannot pad axis ${ax} by (${before}, ${after})`, [x.shape]);
  expectFloat('pad', x);
  const shape = [...x.shape];
  shape[ax] = d + before + after;
  return x.graph.add('pad', [x], { axis: ax, before, after }, shape, 'float32');
}

OPS.unsqueeze = {
  emit: (t, c) => c.node('Unsqueeze', [c.inputs[0]!, c.i64(list(t.attrs, 'axes'))], [c.output]),
  eval: (t, [x]) => ({ shape: unsqueezeShape(x!.shape, list(t.attrs, 'axes')) as number[], data: x!.data }),
  vjp: (t, g) => [squeeze(g, list(t.attrs, 'axes'))],
};
function unsqueezeShape(s: Shape, axes: readonly number[]): Dim[] {
  const out: Dim[] = [...s];
  for (const a of [...axes].sort((p, q) => p - q)) out.splice(a, 0, 1);
  return out;
}
/** Inserts size-1 axes; `axes` index the output. */
export function unsqueeze(x: Tensor, axes: readonly number[]): Tensor {
  const r = x.rank + axes.length;
  const as = axes.map((a) => normAxis('unsqueeze', a, r)).sort((p, q) => p - q);
  return x.graph.add('unsqueeze', [x], { axes: as }, unsqueezeShape(x.shape, as), x.dtype);
}

OPS.squeeze = {
  emit: (t, c) => c.node('Squeeze', [c.inputs[0]!, c.i64(list(t.attrs, 'axes'))], [c.output]),
  eval: (t, [x]) => ({ shape: x!.shape.filter((_, i) => !list(t.attrs, 'axes').includes(i)), data: x!.data }),
  vjp: (t, g) => [unsqueeze(g, list(t.attrs, 'axes'))],
};
export function squeeze(x: Tensor, axes: readonly number[]): Tensor {
  const as = axes.map((a) => normAxis('squeeze', a, x.rank));
  if (as.some((a) => x.shape[a] !== 1)) throw new ShapeError('squeeze', `axes [${axes.join(', ')}] are not all of size 1`, [x.shape]);
  return x.graph.add('squeeze', [x], { axes: as }, x.shape.filter((_, i) => !as.includes(i)), x.dtype);
}

OPS.broadcastTo = {
  emit: (_t, c) => {
    const s = c.tmp('shape');
    c.node('Shape', [c.inputs[1]!], [s]);
    c.node('Expand', [c.inputs[0]!, s], [c.output]);
  },
  eval: (_t, [x, like]) => N.expand(x!, N.broadcastShape(x!.shape, like!.shape)),
  vjp: (_t, g) => [g, null],
};
/** `x` broadcast to the (runtime) shape of `like`. */
export function broadcastTo(x: Tensor, like: Tensor): Tensor {
  const shape = broadcastShapes('broadcastTo', x.shape, like.shape);
  if (!sameShape(shape, like.shape)) throw new ShapeError('broadcastTo', 'target must contain the input shape', [x.shape, like.shape]);
  return x.graph.add('broadcastTo', [x, like], {}, like.shape, x.dtype);
}

OPS.numelRatio = {
  emit: (_t, c) => {
    const [sa, sb, fa, fb] = ['sa', 'sb', 'fa', 'fb'].map((h) => c.tmp(h)) as [string, string, string, string];
    c.node('Size', [c.inputs[0]!], [sa]);
    c.node('Size', [c.inputs[1]!], [sb]);
    c.node('Cast', [sa], [fa], { to: int(1) });
    c.node('Cast', [sb], [fb], { to: int(1) });
    c.node('Div', [fa, fb], [c.output]);
  },
  eval: (_t, [a, b]) => N.nd([], [a!.data.length / b!.data.length]),
};
/** numel(a) / numel(b) as a float scalar, computed at run time (works with symbolic dims). */
export function numelRatio(a: Tensor, b: Tensor): Tensor {
  return a.graph.add('numelRatio', [a, b], {}, [], 'float32');
}

// ---------------------------------------------------------------- linear algebra and nn

OPS.matmul = {
  emit: (_t, c) => c.node('MatMul', c.inputs, [c.output]),
  eval: (_t, [a, b]) => N.matmul(a!, b!),
  vjp: (t, g) => {
    const [a, b] = t.inputs as [Tensor, Tensor];
    return [matmul(g, transpose(b)), matmul(transpose(a), g)];
  },
};
/** Batched matrix product [..., n, k] @ [..., k, m]; batch dims broadcast (ensemble members). */
export function matmul(a: Tensor, b: Tensor): Tensor {
  expectFloat('matmul', a, b);
  if (a.rank < 2 || b.rank < 2) throw new ShapeError('matmul', 'both operands need rank ≥ 2', [a.shape, b.shape]);
  const k1 = a.shape[a.rank - 1]!, k2 = b.shape[b.rank - 2]!;
  if (k1 !== k2) throw new ShapeError('matmul', `inner dimensions differ (${k1} vs ${k2})`, [a.shape, b.shape]);
  const batch = broadcastShapes('matmul', a.shape.slice(0, -2), b.shape.slice(0, -2));
  return a.graph.add('matmul', [a, b], {}, [...batch, a.shape[a.rank - 2]!, b.shape[b.rank - 1]!], 'float32');
}

OPS.gather = {
  emit: (_t, c) => c.node('Gather', c.inputs, [c.output], { axis: int(0) }),
  eval: (_t, [table, idx]) => N.gather(table!, idx!),
  vjp: (t, g) => [scatterAddRows(g, t.inputs[1]!, concreteShape(t.inputs[0]!, 'gather')), null],
};
/** Rows of `table` at int64 `indices` (embedding lookup): [...idx, ...table.shape[1:]]. */
export function gather(table: Tensor, indices: Tensor): Tensor {
  expectFloat('gather', table);
  if (indices.dtype !== 'int64') throw new ShapeError('gather', `indices must be int64, got ${indices.dtype}`, [indices.shape]);
  if (table.rank < 1) throw new ShapeError('gather', 'table needs rank ≥ 1', [table.shape]);
  return table.graph.add('gather', [table, indices], {}, [...indices.shape, ...table.shape.slice(1)], 'float32');
}

OPS.scatterAddRows = {
  emit: (t, c) => {
    const [zeros, idx] = [c.tmp('zeros'), c.tmp('idx')];
    c.node('ConstantOfShape', [c.i64(list(t.attrs, 'tableShape'))], [zeros]);
    c.node('Unsqueeze', [c.inputs[1]!, c.i64([t.inputs[1]!.rank])], [idx]);
    c.node('ScatterND', [zeros, idx, c.inputs[0]!], [c.output], { reduction: str('add') });
  },
  eval: (t, [g, idx]) => N.scatterAddRows(g!, idx!, list(t.attrs, 'tableShape')),
};
function scatterAddRows(g: Tensor, indices: Tensor, tableShape: readonly number[]): Tensor {
  return g.graph.add('scatterAddRows', [g, indices], { tableShape }, tableShape, 'float32');
}

function softmaxOp(op: 'softmax' | 'logSoftmax', onnx: string, vjp: OpDef['vjp']) {
  OPS[op] = {
    emit: (t, c) => c.node(onnx, c.inputs, [c.output], { axis: int(num(t.attrs, 'axis')) }),
    eval: (t, [x]) => N.softmax(x!, num(t.attrs, 'axis'), op === 'logSoftmax'),
    vjp,
  };
  return (x: Tensor, axis = -1): Tensor => {
    expectFloat(op, x);
    return x.graph.add(op, [x], { axis: normAxis(op, axis, x.rank) }, x.shape, 'float32');
  };
}
export const softmax = softmaxOp('softmax', 'Softmax', (t, g) => [mul(t, sub(g, sum(mul(g, t), num(t.attrs, 'axis'), true)))]);
export const logSoftmax = softmaxOp('logSoftmax', 'LogSoftmax', (t, g) => [sub(g, mul(exp(t), sum(g, num(t.attrs, 'axis'), true)))]);

export interface Conv2dOptions {
  stride?: number;
  pad?: number;
}

OPS.conv2d = {
  emit: (t, c) => {
    const w = t.inputs[1]!;
    const [s, p, d] = [num(t.attrs, 'stride'), num(t.attrs, 'pad'), num(t.attrs, 'dilation')];
    c.node('Conv', c.inputs, [c.output], { kernel_shape: ints(w.shape.slice(2) as number[]), strides: ints([s, s]), pads: ints([p, p, p, p]), dilations: ints([d, d]) });
  },
  eval: (t, [x, w]) => N.conv2d(x!, w!, { stride: num(t.attrs, 'stride'), pad: num(t.attrs, 'pad'), dilation: num(t.attrs, 'dilation') }),
  vjp: (t, g) => {
    const [x, w] = t.inputs as [Tensor, Tensor];
    const [s, p] = [num(t.attrs, 'stride'), num(t.attrs, 'pad')];
    if (num(t.attrs, 'dilation') !== 1) throw new ShapeError('conv2d', 'gradient of a dilated convolution is not supported');
    const k = w.shape[2] as number;
    const outPad = [2, 3].map((a) => (x.shape[a] as number) - (s * ((t.shape[a] as number) - 1) + k - 2 * p)) as [number, number];
    const dx = convTranspose(g, w, s, p, outPad);
    // dW: correlate the input (batch as channels) with the output gradient dilated by the stride;
    // the result can overhang the kernel by up to stride - 1 rows and columns.
    const xT = transpose(x, [1, 0, 2, 3]);
    const gT = transpose(g, [1, 0, 2, 3]);
    let dw = conv2dRaw(xT, gT, 1, p, s);
    if ((dw.shape[2] as number) > k) dw = slice(dw, 2, 0, k);
    if ((dw.shape[3] as number) > k) dw = slice(dw, 3, 0, k);
    return [dx, transpose(dw, [1, 0, 2, 3])];
  },
};
function conv2dRaw(x: Tensor, w: Tensor, stride: number, pad: number, dilation: number): Tensor {
  const [Nn, C, H, W] = x.shape;
  const [O, Cw, kh, kw] = w.shape;
  if (x.rank !== 4 || w.rank !== 4 || C !== Cw) throw new ShapeError('conv2d', 'expects x [N,C,H,W] and w [O,C,k,k] with matching C', [x.shape, w.shape]);
  if (typeof H !== 'number' || typeof W !== 'number' || typeof kh !== 'number' || typeof kw !== 'number') {
    throw new ShapeError('conv2d', 'spatial and kernel dims must be concrete', [x.shape, w.shape]);
  }
  const out = (n: number, k: number) => Math.floor((n + 2 * pad - dilation * (k - 1) - 1) / stride) + 1;
  if (out(H, kh) < 1 || out(W, kw) < 1) throw new ShapeError('conv2d', `kernel ${kh}x${kw} larger than padded input`, [x.shape, w.shape]);
  return x.graph.add('conv2d', [x, w], { stride, pad, dilation }, [Nn!, O!, out(H, kh), out(W, kw)], 'float32');
}
/** 2-D convolution (ONNX Conv: cross-correlation), x [N,C,H,W], square kernel w [O,C,k,k]. */
export function conv2d(x: Tensor, w: Tensor, opts: Conv2dOptions = {}): Tensor {
  expectFloat('conv2d', x, w);
  if (w.shape[2] !== w.shape[3]) throw new ShapeError('conv2d', 'kernel must be square', [w.shape]);
  return conv2dRaw(x, w, opts.stride ?? 1, opts.pad ?? 0, 1);
}

OPS.convTranspose = {
  emit: (t, c) => {
    const k = t.inputs[1]!.shape[2] as number;
    const [s, p] = [num(t.attrs, 'stride'), num(t.attrs, 'pad')];
    c.node('ConvTranspose', c.inputs, [c.output], { kernel_shape: ints([k, k]), strides: ints([s, s]), pads: ints([p, p, p, p]), output_padding: ints(list(t.attrs, 'outPad')) });
  },
  eval: (t, [g, w]) => N.convTranspose(g!, w!, num(t.attrs, 'stride'), num(t.attrs, 'pad'), list(t.attrs, 'outPad') as [number, number]),
};
/** The adjoint of conv2d with respect to its input (used by conv2d's gradient). */
function convTranspose(g: Tensor, w: Tensor, stride: number, pad: number, outPad: [number, number]): Tensor {
  const [Nn, , Ho, Wo] = g.shape as [Dim, Dim, number, number];
  const [, C, k] = w.shape as [number, number, number];
  const size = (n: number, op: number) => stride * (n - 1) + k - 2 * pad + op;
  return g.graph.add('convTranspose', [g, w], { stride, pad, outPad }, [Nn, C, size(Ho, outPad[0]), size(Wo, outPad[1])], 'float32');
}

// ---------------------------------------------------------------- composites (differentiated through their parts)

export const square = (x: Tensor): Tensor => mul(x, x);
export const silu = (x: Tensor): Tensor => mul(x, sigmoid(x));

/** log Σ exp(x) over `axis`, stable. */
export function logSumExp(x: Tensor, axis = -1, keepdims = false): Tensor {
  const m = stopGradient(max(x, axis, true));
  const s = add(log(sum(exp(sub(x, m)), axis, true)), m);
  return keepdims ? s : squeeze(s, [normAxis('logSumExp', axis, x.rank)]);
}

/** Normalizes over the last axis, then scales and shifts: gamma, beta [D]. */
export function layerNorm(x: Tensor, gamma: Tensor, beta: Tensor, eps = 1e-5): Tensor {
  const mu = mean(x, -1, true);
  const xc = sub(x, mu);
  const v = mean(square(xc), -1, true);
  return add(mul(div(xc, sqrt(add(v, eps))), gamma), beta);
}

const HALF_LOG_2PI = 0.5 * Math.log(2 * Math.PI);

/** log N(x; mu, exp(logStd)²) summed over the last axis (a diagonal Gaussian policy): [..., A] → [...]. */
export function gaussianLogProb(x: Tensor, mu: Tensor, logStd: Tensor): Tensor {
  const z = div(sub(x, mu), exp(logStd));
  const lp = sub(neg(add(mul(square(z), 0.5), logStd)), HALF_LOG_2PI);
  return sum(lp, -1);
}

/** Entropy of a diagonal Gaussian summed over the last axis: [..., A] → [...]. */
export function gaussianEntropy(logStd: Tensor): Tensor {
  return sum(add(logStd, 0.5 + HALF_LOG_2PI), -1);
}

