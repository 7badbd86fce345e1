// Runs emitted graphs with ONNX Runtime (onnxruntime-node, CPU).
import * as ort from 'onnxruntime-node';
import type { DType, Tensor } from './graph.js';
import { toOnnx, type NamedTensor, type OnnxModelSpec } from './onnx.js';
import type { ParamStore } from './params.js';

export { ort };
export type Feed = ort.Tensor;

export interface SessionOptions {
  /** Intra-op threads; default: ONNX Runtime's choice (one per physical core). */
  threads?: number;
}

export function sessionOptions(o: SessionOptions = {}): ort.InferenceSession.SessionOptions {
  return {
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    ...(o.threads ? { intraOpNumThreads: o.threads } : {}),
    // Idle pool threads sleep instead of spin-waiting for the next parallel op: on cores shared with other work the
    // spinning burns CPU time that the other work needs, and how the threads wait never changes a result.
    extra: { session: { intra_op: { allow_spinning: '0' }, inter_op: { allow_spinning: '0' } } },
  };
}

/** An ORT tensor from plain data: float32 by default, int64 from integers, bool from 0/1. */
export function tensor(data: ArrayLike<number> | Float32Array | BigInt64Array, shape: readonly number[], dtype: DType = 'float32'): ort.Tensor {
  const n = shape.reduce((a, b) => a * b, 1);
  if (data.length !== n) throw new Error(`tensor: ${data.length} values for shape [${shape.join(', ')}]`);
  if (dtype === 'float32') return new ort.Tensor('float32', data instanceof Float32Array ? data : Float32Array.from(data as ArrayLike<number>), [...shape]);
  if (dtype === 'int64') {
    const d = data instanceof BigInt64Array ? data : BigInt64Array.from(Array.from(data as ArrayLike<number>, (v) => BigInt(v)));
    return new ort.Tensor('int64', d, [...shape]);
  }
  return new ort.Tensor('bool', Uint8Array.from(data as ArrayLike<number>, (v) => (v ? 1 : 0)), [...shape]);
}

/** A compiled graph: named inputs in, named outputs out, one `session.run` per call. */
export class Program {
  private constructor(readonly session: ort.InferenceSession, readonly model: Uint8Array) {}

  static async fromSpec(spec: OnnxModelSpec, opts: SessionOptions = {}): Promise<Program> {
    const model = toOnnx(spec);
    return new Program(await ort.InferenceSession.create(model, sessionOptions(opts)), model);
  }

  /**
   * Compiles an inference graph: `inputs` fed by name, params baked in from `store`.
   */
  static async inference(inputs: NamedTensor[], outputs: NamedTensor[], store?: ParamStore, opts: SessionOptions = {}): Promise<Program> {
    return Program.fromSpec({ inputs, outputs, initializers: store ? new Map(store.entries()) : new Map() }, opts);
  }

  async run(feeds: Record<string, ort.Tensor>): Promise<Record<string, ort.Tensor>> {
    const missing = this.session.inputNames.filter((n) => !(n in feeds));
    if (missing.length) throw new Error(`run: missing inputs ${missing.join(', ')}`);
    return this.session.run(feeds);
  }

  async release(): Promise<void> {
    await this.session.release();
  }
}

/** Float32 data of an output. */
export function f32(t: ort.Tensor | undefined): Float32Array {
  if (!t) throw new Error('no such output');
  return t.data as Float32Array;
}

export type { NamedTensor, Tensor };
