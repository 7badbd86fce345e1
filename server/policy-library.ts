// The policies the service can deploy: .onnx files under data/policies/, one per id.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { readModelInfo, writeFileAtomic } from '../nn/index.js';
import { ApiError } from './errors.js';
import type { PolicyInfo } from './schemas.js';

export interface PolicyLibraryOptions {
  /** Reads a policy file (tests count the reads); default readFileSync. */
  readFile?: (file: string) => Buffer;
}

/** A file is read and hashed again only when one of these changed (a replaced file is a new inode). */
const fileKey = (st: Stats): string => `${st.ino}:${st.size}:${st.mtimeMs}`;

export class PolicyLibrary {
  private readonly readFile: (file: string) => Buffer;
  /** Each policy's description, by id, with the file version it describes. */
  private readonly described = new Map<string, { key: string; info: PolicyInfo }>();

  constructor(
    readonly dir: string,
    o: PolicyLibraryOptions = {},
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.readFile = o.readFile ?? ((f) => readFileSync(f));
  }

  path(id: string): string {
    return join(this.dir, `${id}.onnx`);
  }

  has(id: string): boolean {
    return existsSync(this.path(id));
  }

  list(): PolicyInfo[] {
    const ids = readdirSync(this.dir)
      .filter((f) => f.endsWith('.onnx'))
      .map((f) => f.slice(0, -5));
    const present = new Set(ids);
    for (const id of this.described.keys()) if (!present.has(id)) this.described.delete(id);
    return ids.map((id) => this.info(id));
  }

  info(id: string): PolicyInfo {
    if (!this.has(id)) throw new ApiError('WMRL_POLICY_NOT_FOUND', `no policy '${id}' (policies: ${this.list().map((p) => p.id).join(', ') || 'none'})`);
    const file = this.path(id);
    const st = statSync(file);
    const known = this.described.get(id);
    if (known?.key === fileKey(st)) return known.info;
    const info = describe(id, this.readFile(file), st.mtimeMs);
    this.described.set(id, { key: fileKey(st), info });
    return info;
  }

  bytes(id: string): Buffer {
    this.info(id);
    return this.readFile(this.path(id));
  }

  /** Stores a policy after checking it is an ONNX model with input `obs` and output `action`; replaces one with the same id. */
  save(id: string, bytes: Buffer): PolicyInfo {
    let checked: PolicyInfo;
    try {
      checked = describe(id, bytes, Date.now());
    } catch (e) {
      throw new ApiError('WMRL_POLICY_INVALID', `policy '${id}' is not a readable ONNX model: ${(e as Error).message}`);
    }
    if (!checked.inputs.some((i) => i.name === 'obs') || !checked.outputs.some((o) => o.name === 'action'))
      throw new ApiError('WMRL_POLICY_INVALID', `policy '${id}' needs an input 'obs' and an output 'action' (has inputs [${checked.inputs.map((i) => i.name)}], outputs [${checked.outputs.map((o) => o.name)}])`);
    writeFileAtomic(this.path(id), [bytes]);
    // Described on upload: listing it later reads nothing.
    const st = statSync(this.path(id));
    const info = { ...checked, createdAt: st.mtimeMs };
    this.described.set(id, { key: fileKey(st), info });
    return info;
  }
}

function describe(id: string, bytes: Buffer, createdAt: number): PolicyInfo {
  const m = readModelInfo(bytes);
  if (!m.inputs.length || !m.outputs.length) throw new Error('no graph inputs or outputs');
  const shape = (s: Array<number | string>) => s.map((d) => (typeof d === 'number' ? d : String(d)));
  return {
    id,
    bytes: bytes.length,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    createdAt,
    inputs: m.inputs.map((i) => ({ name: i.name, shape: shape(i.shape) })),
    outputs: m.outputs.map((o) => ({ name: o.name, shape: shape(o.shape) })),
    metadata: m.metadata,
  };
}
