// Parameter values live here, outside any graph; graphs refer to them by name.
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { Rng } from './rng.js';

export type Init = 'zeros' | 'ones' | { uniform: number } | { normal: number };

export interface ParamValue {
  shape: number[];
  data: Float32Array;
}

export class ParamStore {
  private readonly values = new Map<string, ParamValue>();
  readonly rng: Rng;

  constructor(seed = 0) {
    this.rng = new Rng(seed);
  }

  /** Creates a parameter; names are unique within a store. */
  create(name: string, shape: readonly number[], init: Init): ParamValue {
    if (this.values.has(name)) throw new Error(`params: '${name}' already exists`);
    if (!shape.every((d) => Number.isInteger(d) && d > 0)) throw new Error(`params: '${name}' has an invalid shape [${shape.join(', ')}]`);
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    if (init === 'ones') data.fill(1);
    else if (init !== 'zeros') {
      for (let i = 0; i < n; i++) data[i] = 'uniform' in init ? this.rng.uniform(-init.uniform, init.uniform) : init.normal * this.rng.normal();
    }
    const v = { shape: [...shape], data };
    this.values.set(name, v);
    return v;
  }

  get(name: string): ParamValue {
    const v = this.values.get(name);
    if (!v) throw new Error(`params: no parameter '${name}'`);
    return v;
  }

  has(name: string): boolean {
    return this.values.has(name);
  }

  names(): string[] {
    return [...this.values.keys()];
  }

  entries(): Array<[string, ParamValue]> {
    return [...this.values.entries()];
  }

  count(): number {
    let n = 0;
    for (const v of this.values.values()) n += v.data.length;
    return n;
  }

  /** Replaces a parameter's values (same length). */
  set(name: string, data: ArrayLike<number>): void {
    const v = this.get(name);
    if (data.length !== v.data.length) throw new Error(`params: '${name}' needs ${v.data.length} values, got ${data.length}`);
    v.data.set(data);
  }

  /** Writes all parameters to one safetensors file, atomically. */
  save(path: string, metadata: Record<string, string> = {}): void {
    writeTensorFile(path, this.entries(), metadata);
  }

  /** Loads values for the parameters of this store; names and shapes must match exactly. */
  load(path: string): Record<string, string> {
    const file = readTensorFile(path);
    const missing = this.names().filter((n) => !file.tensors.has(n));
    const extra = [...file.tensors.keys()].filter((n) => !this.values.has(n));
    if (missing.length || extra.length) {
      throw new Error(`params: ${path} does not match this model (missing: [${missing.join(', ')}], unexpected: [${extra.join(', ')}])`);
    }
    for (const [n, t] of file.tensors) {
      const v = this.get(n);
      if (t.shape.join() !== v.shape.join()) throw new Error(`params: ${path}: '${n}' has shape [${t.shape}], model expects [${v.shape}]`);
    }
    for (const [n, t] of file.tensors) this.get(n).data.set(t.data);
    return file.metadata;
  }
}

/**
 * Writes a file then renames it into place, so a crash never leaves a half-written file: a temp file in
 * the same folder, fsynced, renamed over the target, the folder fsynced. The file is created with
 * `mode` (default 0600: run state, checkpoints and policies are the owner's). A failed write leaves the
 * previous file as it was and removes its temp file.
 */
export function writeFileAtomic(path: string, chunks: ReadonlyArray<Uint8Array | string>, mode = 0o600): void {
  // A random name: a pid (reused across restarts in containers) and a counter could name a temp
  // file a crashed earlier process left behind, and `wx` would then refuse every write.
  let tmp = '';
  let fd = -1;
  for (let attempt = 0; fd < 0; attempt++) {
    tmp = `${path}.${randomBytes(8).toString('hex')}.tmp`;
    try {
      fd = openSync(tmp, 'wx', mode);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 4) throw e;
    }
  }
  try {
    try {
      for (const c of chunks) {
        const b = typeof c === 'string' ? Buffer.from(c) : c;
        let off = 0;
        while (off < b.length) off += writeSync(fd, b, off, b.length - off);
      }
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  fsyncDir(dirname(path));
}

/** Makes a rename durable. Some platforms cannot open or fsync a folder; there the rename is still atomic. */
function fsyncDir(dir: string): void {
  let dfd: number;
  try {
    dfd = openSync(dir, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EISDIR' || (e as NodeJS.ErrnoException).code === 'EPERM') return; // Windows
    throw e;
  }
  try {
    fsyncSync(dfd);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code !== 'EINVAL' && code !== 'ENOTSUP' && code !== 'EPERM') throw e;
  } finally {
    closeSync(dfd);
  }
}

/** The safetensors layout: u64 header length, JSON header, raw little-endian data. */
export function writeTensorFile(path: string, tensors: ReadonlyArray<[string, ParamValue]>, metadata: Record<string, string> = {}): void {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let off = 0;
  for (const [name, v] of tensors) {
    header[name] = { dtype: 'F32', shape: v.shape, data_offsets: [off, off + v.data.byteLength] };
    off += v.data.byteLength;
  }
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const hb = new TextEncoder().encode(json);
  const len = new Uint8Array(8);
  new DataView(len.buffer).setBigUint64(0, BigInt(hb.length), true);
  const chunks = [len, hb, ...tensors.map(([, v]) => new Uint8Array(v.data.buffer, v.data.byteOffset, v.data.byteLength))];
  writeFileAtomic(path, chunks);
}

export function readTensorFile(path: string): { tensors: Map<string, ParamValue>; metadata: Record<string, string> } {
  const buf = readFileSync(path);
  const fail = (why: string): never => {
    throw new Error(`params: ${path} is not a valid tensor file: ${why}`);
  };
  if (buf.length < 8) fail('shorter than its header');
  const hlen = Number(buf.readBigUInt64LE(0));
  if (8 + hlen > buf.length) fail('header length exceeds file');
  let header: Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] } | Record<string, string>>;
  try {
    header = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8'));
  } catch (e) {
    return fail(`bad header JSON (${(e as Error).message})`);
  }
  const base = 8 + hlen;
  const tensors = new Map<string, ParamValue>();
  for (const [name, h] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const t = h as { dtype: string; shape: number[]; data_offsets: [number, number] };
    if (t.dtype !== 'F32') fail(`'${name}' has dtype ${t.dtype}, only F32 is supported`);
    const [a, b] = t.data_offsets;
    const n = t.shape.reduce((x, y) => x * y, 1);
    if (b - a !== n * 4 || base + b > buf.length) fail(`'${name}' data range is inconsistent`);
    const data = new Float32Array(n);
    new Uint8Array(data.buffer).set(buf.subarray(base + a, base + b));
    tensors.set(name, { shape: t.shape, data });
  }
  return { tensors, metadata: (header.__metadata__ as Record<string, string>) ?? {} };
}
