// Emits a graph as an ONNX ModelProto (opset 17, IR version 8, which older runtimes and Debian's
// onnx 1.12 checker read) and reads back the parts of a model a deployer needs.
import { topoSort, type DType, type Tensor } from './graph.js';
import { OPS, type EmitCtx, type OnnxAttr } from './ops.js';
import { ProtoWriter, readFields } from './protobuf.js';
import type { Shape } from './shape.js';

export const OPSET = 17;
export const IR_VERSION = 8;
const ELEM: Record<DType, number> = { float32: 1, int64: 7, bool: 9 };
const ELEM_NAME: Record<number, string> = { 1: 'float32', 7: 'int64', 9: 'bool', 6: 'int32', 11: 'float64', 2: 'uint8' };
const ATTR_TYPE = { float: 1, int: 2, string: 3, ints: 7 } as const;

export interface NamedTensor {
  name: string;
  tensor: Tensor;
  doc?: string;
}

export interface OnnxModelSpec {
  /** Graph inputs fed at run time: data inputs and, for training graphs, params and optimizer state. */
  inputs: NamedTensor[];
  outputs: NamedTensor[];
  /** Parameter values baked into the model (inference export). */
  initializers?: ReadonlyMap<string, { shape: readonly number[]; data: Float32Array }>;
  graphName?: string;
  docString?: string;
  metadata?: Readonly<Record<string, string>>;
}

function writeShape(w: ProtoWriter, dtype: DType, shape: Shape): void {
  // TypeProto { tensor_type { elem_type, shape { dim { dim_value | dim_param } } } }
  w.message(1, (tt) => {
    tt.int(1, ELEM[dtype]);
    tt.message(2, (sh) => {
      for (const d of shape) sh.message(1, (dim) => (typeof d === 'number' ? dim.int(1, d) : dim.string(2, d)));
    });
  });
}

function valueInfo(w: ProtoWriter, field: number, name: string, dtype: DType, shape: Shape, doc?: string): void {
  w.message(field, (vi) => {
    vi.string(1, name);
    vi.message(2, (tp) => writeShape(tp, dtype, shape));
    if (doc) vi.string(3, doc);
  });
}

function tensorProto(w: ProtoWriter, field: number, name: string, dtype: DType, dims: readonly number[], raw: Uint8Array): void {
  w.message(field, (t) => {
    if (dims.length) t.packedInts(1, dims);
    t.int(2, ELEM[dtype]);
    t.string(8, name);
    t.bytes(9, raw);
  });
}

const rawF32 = (d: Float32Array | readonly number[]) => {
  const f = d instanceof Float32Array ? d : Float32Array.from(d);
  return new Uint8Array(f.buffer.slice(f.byteOffset, f.byteOffset + f.byteLength));
};
const rawI64 = (vs: readonly number[]) => new Uint8Array(BigInt64Array.from(vs.map((v) => BigInt(v))).buffer);
const rawBool = (vs: readonly number[]) => Uint8Array.from(vs.map((v) => (v ? 1 : 0)));

function writeAttr(w: ProtoWriter, name: string, a: OnnxAttr): void {
  w.message(5, (at) => {
    at.string(1, name);
    if (a.type === 'int') at.int(3, a.v);
    else if (a.type === 'float') at.float(2, a.v);
    else if (a.type === 'string') at.string(4, a.v);
    else at.packedInts(8, a.v);
    at.int(20, ATTR_TYPE[a.type]);
  });
}

/** Serializes the graph reachable from `spec.outputs` as an ONNX model. */
export function toOnnx(spec: OnnxModelSpec): Uint8Array {
  const fed = new Map(spec.inputs.map((i) => [i.tensor.id, i.name]));
  const init = spec.initializers ?? new Map();
  const outNames = new Set(spec.outputs.map((o) => o.name));
  for (const i of spec.inputs) if (outNames.has(i.name)) throw new Error(`onnx: '${i.name}' is both an input and an output`);
  if (outNames.size !== spec.outputs.length) throw new Error('onnx: duplicate output names');

  const g = new ProtoWriter();
  const names = new Map<number, string>();
  const consts = new Map<string, string>();
  let counter = 0;

  const constant = (key: string, dtype: DType, dims: readonly number[], raw: () => Uint8Array): string => {
    let n = consts.get(key);
    if (!n) {
      n = `c${consts.size}`;
      consts.set(key, n);
      tensorProto(g, 5, n, dtype, dims, raw());
    }
    return n;
  };

  // A computed tensor that is exactly one output writes that name directly: an Identity would copy
  // every updated parameter once more per training step.
  const direct = new Map<number, string>();
  const uses = new Map<number, number>();
  for (const o of spec.outputs) uses.set(o.tensor.id, (uses.get(o.tensor.id) ?? 0) + 1);
  for (const o of spec.outputs) {
    if (uses.get(o.tensor.id) === 1 && !['input', 'param', 'constant'].includes(o.tensor.op)) direct.set(o.tensor.id, o.name);
  }

  const order = topoSort(spec.outputs.map((o) => o.tensor));
  for (const t of order) {
    if (t.op === 'input' || t.op === 'param') {
      const name = t.attrs.name as string;
      if (fed.has(t.id)) names.set(t.id, fed.get(t.id)!);
      else if (t.op === 'param' && init.has(name)) {
        const v = init.get(name)!;
        if (v.shape.join() !== t.shape.join()) throw new Error(`onnx: value of param '${name}' has shape [${v.shape}] but the graph uses [${t.shape}]`);
        tensorProto(g, 5, name, 'float32', v.shape, rawF32(v.data));
        names.set(t.id, name);
      } else throw new Error(`onnx: ${t.op} '${name}' is neither fed nor given a value`);
      continue;
    }
    if (t.op === 'constant') {
      const dims = t.shape as number[];
      const v = t.value!;
      const raw = () => (t.dtype === 'float32' ? rawF32(v) : t.dtype === 'int64' ? rawI64([...v]) : rawBool([...v]));
      names.set(t.id, constant(`${t.dtype}:${dims.join('x')}:${Array.from(v).join(',')}`, t.dtype, dims, raw));
      continue;
    }
    const def = OPS[t.op];
    if (!def) throw new Error(`onnx: no emitter for op '${t.op}'`);
    const output = direct.get(t.id) ?? `v${t.id}`;
    const ctx: EmitCtx = {
      inputs: t.inputs.map((i) => names.get(i.id)!),
      output,
      node: (opType, inputs, outputs, attrs = {}) => {
        g.message(1, (n) => {
          for (const i of inputs) n.string(1, i);
          for (const o of outputs) n.string(2, o);
          n.string(3, `n${counter++}_${opType}`);
          n.string(4, opType);
          for (const [k, a] of Object.entries(attrs)) writeAttr(n, k, a);
        });
      },
      i64: (vs, scalar = false) => constant(`i64${scalar ? 's' : ''}:${vs.join(',')}`, 'int64', scalar ? [] : [vs.length], () => rawI64(vs)),
      f32: (v) => constant(`f32s:${v}`, 'float32', [], () => rawF32([v])),
      tmp: (hint) => `${output}_${hint}`,
    };
    def.emit(t, ctx);
    names.set(t.id, output);
  }
  for (const o of spec.outputs) {
    if (direct.has(o.tensor.id)) continue;
    g.message(1, (n) => {
      n.string(1, names.get(o.tensor.id)!);
      n.string(2, o.name);
      n.string(3, `out_${o.name}`);
      n.string(4, 'Identity');
    });
  }
  g.string(2, spec.graphName ?? 'wmrl');
  for (const i of spec.inputs) valueInfo(g, 11, i.name, i.tensor.dtype, i.tensor.shape, i.doc);
  for (const o of spec.outputs) valueInfo(g, 12, o.name, o.tensor.dtype, o.tensor.shape, o.doc);

  const m = new ProtoWriter();
  m.int(1, IR_VERSION);
  m.string(2, 'wmrl-bridge');
  m.string(3, '0.1.0');
  if (spec.docString) m.string(6, spec.docString);
  m.bytes(7, g.finish());
  m.message(8, (op) => op.string(1, '').int(2, OPSET));
  for (const [k, v] of Object.entries(spec.metadata ?? {})) m.message(14, (e) => e.string(1, k).string(2, v));
  return m.finish();
}

export interface ValueSummary {
  name: string;
  dtype: string;
  shape: Array<number | string>;
  doc?: string;
}

export interface ModelInfo {
  irVersion: number;
  opset: number;
  producer: string;
  inputs: ValueSummary[];
  outputs: ValueSummary[];
  metadata: Record<string, string>;
}

const text = (b: Uint8Array) => new TextDecoder().decode(b);
const sub = (fs: ReturnType<typeof readFields>, f: number) => fs.filter((x) => x.field === f).map((x) => x.value as Uint8Array);

function readValueInfo(b: Uint8Array): ValueSummary {
  const fs = readFields(b);
  const v: ValueSummary = { name: text(sub(fs, 1)[0] ?? new Uint8Array()), dtype: '?', shape: [] };
  const doc = sub(fs, 3)[0];
  if (doc) v.doc = text(doc);
  const tp = sub(fs, 2)[0];
  const tt = tp && sub(readFields(tp), 1)[0];
  if (tt) {
    const tf = readFields(tt);
    const et = tf.find((x) => x.field === 1);
    if (et) v.dtype = ELEM_NAME[Number(et.value)] ?? String(et.value);
    const sh = sub(tf, 2)[0];
    if (sh) {
      v.shape = sub(readFields(sh), 1).map((d) => {
        const df = readFields(d)[0];
        if (!df) return '?';
        return df.field === 1 ? Number(df.value) : text(df.value as Uint8Array);
      });
    }
  }
  return v;
}

/** Reads IR version, opset, input/output signatures and metadata_props of a serialized model. */
export function readModelInfo(bytes: Uint8Array): ModelInfo {
  const fs = readFields(bytes);
  const num = (f: number) => Number(fs.find((x) => x.field === f)?.value ?? 0);
  const graph = sub(fs, 7)[0];
  if (!graph) throw new Error('onnx: model has no graph');
  const gf = readFields(graph);
  const inits = new Set(sub(gf, 5).map((t) => text(sub(readFields(t), 8)[0] ?? new Uint8Array())));
  const metadata: Record<string, string> = {};
  for (const e of sub(fs, 14)) {
    const ef = readFields(e);
    metadata[text(sub(ef, 1)[0] ?? new Uint8Array())] = text(sub(ef, 2)[0] ?? new Uint8Array());
  }
  const opsets = sub(fs, 8).map((o) => readFields(o));
  const def = opsets.find((o) => !sub(o, 1)[0]?.length) ?? opsets[0];
  return {
    irVersion: num(1),
    opset: Number(def?.find((x) => x.field === 2)?.value ?? 0),
    producer: text(sub(fs, 2)[0] ?? new Uint8Array()),
    inputs: sub(gf, 11).map(readValueInfo).filter((v) => !inits.has(v.name)),
    outputs: sub(gf, 12).map(readValueInfo),
    metadata,
  };
}
