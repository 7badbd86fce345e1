// The graph: tensors are nodes of a DAG built in TypeScript, later emitted as ONNX.
import { fmtShape, isConcrete, numel, ShapeError, type Dim, type Shape } from './shape.js';

export type DType = 'float32' | 'int64' | 'bool';
export type AttrValue = number | string | boolean | readonly number[];
export type Attrs = Readonly<Record<string, AttrValue>>;

let nextId = 0;

/** A symbolic tensor: the output of one op (or a leaf: input, param, constant). */
export class Tensor {
  readonly id = nextId++;
  constructor(
    readonly graph: Graph,
    readonly op: string,
    readonly inputs: readonly Tensor[],
    readonly attrs: Attrs,
    readonly shape: Shape,
    readonly dtype: DType,
    /** Leaf data for constants. */
    readonly value?: Float32Array | readonly number[],
  ) {}

  get rank(): number {
    return this.shape.length;
  }

  toString(): string {
    return `Tensor(${this.op}#${this.id} ${fmtShape(this.shape)} ${this.dtype})`;
  }
}

export class Graph {
  /** Data inputs by name, fed at run time. */
  readonly inputs = new Map<string, Tensor>();
  /** Trainable parameters by name; values live in a ParamStore, not in the graph. */
  readonly params = new Map<string, Tensor>();
  private readonly scalars = new Map<string, Tensor>();

  add(op: string, inputs: readonly Tensor[], attrs: Attrs, shape: Shape, dtype: DType): Tensor {
    for (const t of inputs) {
      if (t.graph !== this) throw new ShapeError(op, `input ${t} belongs to another graph`);
    }
    return new Tensor(this, op, inputs, attrs, shape, dtype);
  }

  input(name: string, shape: Shape, dtype: DType = 'float32'): Tensor {
    if (this.inputs.has(name) || this.params.has(name)) throw new Error(`graph: name '${name}' is already used`);
    const t = new Tensor(this, 'input', [], { name }, shape, dtype);
    this.inputs.set(name, t);
    return t;
  }

  /** A parameter leaf; asking twice for the same name returns the same tensor. */
  param(name: string, shape: readonly number[]): Tensor {
    const prev = this.params.get(name);
    if (prev) {
      if (prev.shape.join() !== shape.join()) {
        throw new ShapeError('param', `'${name}' requested with shape ${fmtShape(shape)} but exists as ${fmtShape(prev.shape)}`);
      }
      return prev;
    }
    if (this.inputs.has(name)) throw new Error(`graph: name '${name}' is already used by an input`);
    const t = new Tensor(this, 'param', [], { name }, shape, 'float32');
    this.params.set(name, t);
    return t;
  }

  constant(value: Float32Array | readonly number[], shape: readonly number[], dtype: DType = 'float32'): Tensor {
    if (numel(shape, 'constant') !== value.length) {
      throw new ShapeError('constant', `${value.length} values do not fill shape`, [shape]);
    }
    return new Tensor(this, 'constant', [], {}, shape, dtype, dtype === 'float32' ? Float32Array.from(value) : [...value]);
  }

  /** A float32 scalar constant, shared per value. */
  scalar(v: number): Tensor {
    const key = Object.is(v, -0) ? '-0' : String(v);
    let t = this.scalars.get(key);
    if (!t) {
      t = this.constant([v], []);
      this.scalars.set(key, t);
    }
    return t;
  }
}

/** Nodes reachable from `outputs`, each after its inputs. */
export function topoSort(outputs: readonly Tensor[]): Tensor[] {
  const order: Tensor[] = [];
  const seen = new Set<number>();
  // Iterative DFS: graphs of deep models overflow a recursive walk.
  const stack: Array<[Tensor, number]> = outputs.map((t) => [t, 0]);
  while (stack.length) {
    const top = stack[stack.length - 1]!;
    const [t, i] = top;
    if (seen.has(t.id)) {
      stack.pop();
      continue;
    }
    if (i < t.inputs.length) {
      top[1] = i + 1;
      const c = t.inputs[i]!;
      if (!seen.has(c.id)) stack.push([c, 0]);
    } else {
      seen.add(t.id);
      order.push(t);
      stack.pop();
    }
  }
  return order;
}

export function concreteShape(t: Tensor, op: string): number[] {
  if (!isConcrete(t.shape)) throw new ShapeError(op, `needs a concrete shape, got symbolic ${fmtShape(t.shape)}`);
  return [...t.shape];
}

export type { Dim, Shape };
