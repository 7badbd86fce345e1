// Static shapes with symbolic dimensions (e.g. 'batch'), checked when the graph is built.

/** A dimension: a size, or a symbol (e.g. 'batch') bound when the graph runs. */
export type Dim = number | string;
export type Shape = readonly Dim[];

export const fmtShape = (s: Shape): string => `[${s.join(', ')}]`;

/** A shape error found while building a graph; names the op and the shapes involved. */
export class ShapeError extends Error {
  constructor(op: string, message: string, shapes: Shape[] = []) {
    super(`${op}: ${message}${shapes.length ? ` (shapes ${shapes.map(fmtShape).join(', ')})` : ''}`);
    this.name = 'ShapeError';
  }
}

export const isConcrete = (s: Shape): s is readonly number[] => s.every((d) => typeof d === 'number');

export function numel(s: Shape, op = 'numel'): number {
  if (!isConcrete(s)) throw new ShapeError(op, 'needs a concrete shape', [s]);
  return s.reduce<number>((a, b) => a * b, 1);
}

export function sameShape(a: Shape, b: Shape): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}

/** NumPy broadcasting; a symbol broadcasts against 1 or itself only. */
export function broadcastShapes(op: string, ...shapes: Shape[]): Dim[] {
  const rank = Math.max(...shapes.map((s) => s.length));
  const out: Dim[] = [];
  for (let i = 0; i < rank; i++) {
    let d: Dim = 1;
    for (const s of shapes) {
      const e = s[s.length - rank + i] ?? 1;
      if (e === 1 || e === d) continue;
      if (d === 1) d = e;
      else throw new ShapeError(op, `cannot broadcast dimension ${String(d)} with ${String(e)}`, shapes);
    }
    out.push(d);
  }
  return out;
}

/** Normalizes a possibly negative axis. */
export function normAxis(op: string, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (!Number.isInteger(a) || a < 0 || a >= rank) throw new ShapeError(op, `axis ${axis} out of range for rank ${rank}`);
  return a;
}
