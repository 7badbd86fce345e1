// Float64 reference arrays: the plain, slow evaluator that checks the ONNX path (gradient checks,
// equivalence tests). Row-major; int64 and bool values are stored as float64 numbers.

export interface ND {
  shape: number[];
  data: Float64Array;
}

export const size = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

export function nd(shape: readonly number[], data?: ArrayLike<number>): ND {
  const n = size(shape);
  if (data && data.length !== n) throw new Error(`nd: ${data.length} values for shape [${shape.join(', ')}]`);
  return { shape: [...shape], data: data ? Float64Array.from(data) : new Float64Array(n) };
}

export function strides(shape: readonly number[]): number[] {
  const s = new Array<number>(shape.length);
  let acc = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    s[i] = acc;
    acc *= shape[i]!;
  }
  return s;
}

export function broadcastShape(a: readonly number[], b: readonly number[]): number[] {
  const r = Math.max(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < r; i++) {
    const x = a[a.length - r + i] ?? 1;
    const y = b[b.length - r + i] ?? 1;
    if (x !== y && x !== 1 && y !== 1) throw new Error(`nd: cannot broadcast [${a.join(', ')}] with [${b.join(', ')}]`);
    out.push(x === 1 ? y : x);
  }
  return out;
}

/** Materializes `a` broadcast to `shape`. */
export function expand(a: ND, shape: readonly number[]): ND {
  const out = nd(shape);
  const r = shape.length;
  const as = strides(a.shape);
  const eff = shape.map((_, i) => {
    const ai = i - (r - a.shape.length);
    return ai < 0 || a.shape[ai] === 1 ? 0 : as[ai]!;
  });
  const idx = new Array<number>(r).fill(0);
  for (let o = 0; o < out.data.length; o++) {
    let off = 0;
    for (let i = 0; i < r; i++) off += idx[i]! * eff[i]!;
    out.data[o] = a.data[off]!;
    for (let i = r - 1; i >= 0; i--) {
      if (++idx[i]! < shape[i]!) break;
      idx[i] = 0;
    }
  }
  return out;
}

export function unary(a: ND, f: (x: number) => number): ND {
  const out = nd(a.shape);
  for (let i = 0; i < a.data.length; i++) out.data[i] = f(a.data[i]!);
  return out;
}

export function nary(args: ND[], f: (...xs: number[]) => number): ND {
  const shape = args.reduce<number[]>((s, a) => broadcastShape(s, a.shape), []);
  const ex = args.map((a) => expand(a, shape));
  const out = nd(shape);
  const xs = new Array<number>(args.length);
  for (let i = 0; i < out.data.length; i++) {
    for (let k = 0; k < ex.length; k++) xs[k] = ex[k]!.data[i]!;
    out.data[i] = f(...xs);
  }
  return out;
}

export function reduce(a: ND, axes: readonly number[], keepdims: boolean, kind: 'sum' | 'mean' | 'max'): ND {
  const keepShape = a.shape.map((d, i) => (axes.includes(i) ? 1 : d));
  const out = nd(keepShape).data.fill(kind === 'max' ? -Infinity : 0);
  const os = strides(keepShape);
  const idx = new Array<number>(a.shape.length).fill(0);
  for (let i = 0; i < a.data.length; i++) {
    let off = 0;
    for (let k = 0; k < idx.length; k++) if (!axes.includes(k)) off += idx[k]! * os[k]!;
    const v = a.data[i]!;
    out[off] = kind === 'max' ? Math.max(out[off]!, v) : out[off]! + v;
    for (let k = idx.length - 1; k >= 0; k--) {
      if (++idx[k]! < a.shape[k]!) break;
      idx[k] = 0;
    }
  }
  if (kind === 'mean') {
    const n = axes.reduce((p, ax) => p * a.shape[ax]!, 1);
    for (let i = 0; i < out.length; i++) out[i]! /= n;
  }
  return { shape: keepdims ? keepShape : a.shape.filter((_, i) => !axes.includes(i)), data: out };
}

export function transpose(a: ND, perm: readonly number[]): ND {
  const shape = perm.map((p) => a.shape[p]!);
  const out = nd(shape);
  const as = strides(a.shape);
  const idx = new Array<number>(shape.length).fill(0);
  for (let o = 0; o < out.data.length; o++) {
    let off = 0;
    for (let i = 0; i < shape.length; i++) off += idx[i]! * as[perm[i]!]!;
    out.data[o] = a.data[off]!;
    for (let i = shape.length - 1; i >= 0; i--) {
      if (++idx[i]! < shape[i]!) break;
      idx[i] = 0;
    }
  }
  return out;
}

/** Batched matmul with broadcast batch dims; both ranks ≥ 2. */
export function matmul(a: ND, b: ND): ND {
  const n = a.shape[a.shape.length - 2]!, k = a.shape[a.shape.length - 1]!, m = b.shape[b.shape.length - 1]!;
  const batch = broadcastShape(a.shape.slice(0, -2), b.shape.slice(0, -2));
  const ea = expand(a, [...batch, n, k]);
  const eb = expand(b, [...batch, k, m]);
  const nb = size(batch);
  const out = nd([...batch, n, m]);
  for (let q = 0; q < nb; q++) {
    const ao = q * n * k, bo = q * k * m, oo = q * n * m;
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < m; j++) {
        let s = 0;
        for (let t = 0; t < k; t++) s += ea.data[ao + i * k + t]! * eb.data[bo + t * m + j]!;
        out.data[oo + i * m + j] = s;
      }
    }
  }
  return out;
}

/** Splits the shape around `axis` into (outer, dim, inner) extents. */
function around(shape: readonly number[], axis: number): [number, number, number] {
  return [size(shape.slice(0, axis)), shape[axis]!, size(shape.slice(axis + 1))];
}

export function concat(arrs: ND[], axis: number): ND {
  const total = arrs.reduce((s, a) => s + a.shape[axis]!, 0);
  const shape = [...arrs[0]!.shape];
  shape[axis] = total;
  const out = nd(shape);
  const [outer, , inner] = around(shape, axis);
  let at = 0;
  for (const a of arrs) {
    const d = a.shape[axis]!;
    for (let o = 0; o < outer; o++) {
      for (let i = 0; i < d * inner; i++) out.data[(o * total + at) * inner + i] = a.data[o * d * inner + i]!;
    }
    at += d;
  }
  return out;
}

export function slice(a: ND, axis: number, start: number, end: number): ND {
  const [outer, d, inner] = around(a.shape, axis);
  const shape = [...a.shape];
  shape[axis] = end - start;
  const out = nd(shape);
  const len = (end - start) * inner;
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < len; i++) out.data[o * len + i] = a.data[(o * d + start) * inner + i]!;
  }
  return out;
}

export function pad(a: ND, axis: number, before: number, after: number): ND {
  const [outer, d, inner] = around(a.shape, axis);
  const shape = [...a.shape];
  shape[axis] = d + before + after;
  const out = nd(shape);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < d * inner; i++) out.data[(o * shape[axis]! + before) * inner + i] = a.data[o * d * inner + i]!;
  }
  return out;
}

/** Rows of `table` (axis 0) at integer `idx`. */
export function gather(table: ND, idx: ND): ND {
  const [rows, width] = [table.shape[0]!, size(table.shape.slice(1))];
  const out = nd([...idx.shape, ...table.shape.slice(1)]);
  for (let i = 0; i < idx.data.length; i++) {
    const r = idx.data[i]!;
    if (!Number.isInteger(r) || r < 0 || r >= rows) throw new Error(`gather: index ${r} out of range [0, ${rows})`);
    out.data.set(table.data.subarray(r * width, (r + 1) * width), i * width);
  }
  return out;
}

/** Adjoint of gather: rows of `g` added into a zero table at `idx`. */
export function scatterAddRows(g: ND, idx: ND, tableShape: readonly number[]): ND {
  const width = size(tableShape.slice(1));
  const out = nd(tableShape);
  for (let i = 0; i < idx.data.length; i++) {
    const r = idx.data[i]!;
    for (let j = 0; j < width; j++) out.data[r * width + j]! += g.data[i * width + j]!;
  }
  return out;
}

export function softmax(a: ND, axis: number, log: boolean): ND {
  const [outer, d, inner] = around(a.shape, axis);
  const out = nd(a.shape);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      const at = (j: number) => (o * d + j) * inner + i;
      let mx = -Infinity;
      for (let j = 0; j < d; j++) mx = Math.max(mx, a.data[at(j)]!);
      let s = 0;
      for (let j = 0; j < d; j++) s += Math.exp(a.data[at(j)]! - mx);
      for (let j = 0; j < d; j++) {
        const z = a.data[at(j)]! - mx;
        out.data[at(j)] = log ? z - Math.log(s) : Math.exp(z) / s;
      }
    }
  }
  return out;
}

export interface Conv2dSpec {
  stride: number;
  pad: number;
  dilation: number;
}

/** x [N,C,H,W] * w [O,C,kh,kw] → [N,O,Ho,Wo] (cross-correlation, as ONNX Conv). */
export function conv2d(x: ND, w: ND, { stride, pad: p, dilation }: Conv2dSpec): ND {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const [O, , kh, kw] = w.shape as [number, number, number, number];
  const Ho = Math.floor((H + 2 * p - dilation * (kh - 1) - 1) / stride) + 1;
  const Wo = Math.floor((W + 2 * p - dilation * (kw - 1) - 1) / stride) + 1;
  const out = nd([N, O, Ho, Wo]);
  for (let n = 0; n < N; n++)
    for (let o = 0; o < O; o++)
      for (let i = 0; i < Ho; i++)
        for (let j = 0; j < Wo; j++) {
          let s = 0;
          for (let c = 0; c < C; c++)
            for (let a = 0; a < kh; a++) {
              const y = i * stride - p + a * dilation;
              if (y < 0 || y >= H) continue;
              for (let b = 0; b < kw; b++) {
                const xx = j * stride - p + b * dilation;
                if (xx < 0 || xx >= W) continue;
                s += x.data[((n * C + c) * H + y) * W + xx]! * w.data[((o * C + c) * kh + a) * kw + b]!;
              }
            }
          out.data[((n * O + o) * Ho + i) * Wo + j] = s;
        }
  return out;
}

/** Transposed convolution (ONNX ConvTranspose, group 1): dy [N,O,Ho,Wo], w [O,C,kh,kw] → [N,C,H,W]. */
export function convTranspose(dy: ND, w: ND, stride: number, p: number, outPad: readonly [number, number]): ND {
  const [N, O, Ho, Wo] = dy.shape as [number, number, number, number];
  const [, C, kh, kw] = w.shape as [number, number, number, number];
  const H = stride * (Ho - 1) + kh - 2 * p + outPad[0];
  const W = stride * (Wo - 1) + kw - 2 * p + outPad[1];
  const out = nd([N, C, H, W]);
  for (let n = 0; n < N; n++)
    for (let o = 0; o < O; o++)
      for (let i = 0; i < Ho; i++)
        for (let j = 0; j < Wo; j++) {
          const g = dy.data[((n * O + o) * Ho + i) * Wo + j]!;
          for (let c = 0; c < C; c++)
            for (let a = 0; a < kh; a++) {
              const y = i * stride - p + a;
              if (y < 0 || y >= H) continue;
              for (let b = 0; b < kw; b++) {
                const xx = j * stride - p + b;
                if (xx < 0 || xx >= W) continue;
                out.data[((n * C + c) * H + y) * W + xx]! += g * w.data[((o * C + c) * kh + a) * kw + b]!;
              }
            }
        }
  return out;
}
