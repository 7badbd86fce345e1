// The policies the service can deploy: .onnx files under data/policies/, one per id.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readModelInfo } from '../nn/index.js';
import { ApiError } from './errors.js';
import type { PolicyInfo } from './schemas.js';

export class PolicyLibrary {
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  path(id: string): string {
    return join(this.dir, `${id}.onnx`);
  }

  has(id: string): boolean {
    return existsSync(this.path(id));
  }

  list(): PolicyInfo[] {
    return readdirSync(this.dir)
      .filter((f) => f.endsWith('.onnx'))
      .map((f) => this.info(f.slice(0, -5)));
  }

  info(id: string): PolicyInfo {
    if (!this.has(id)) throw new ApiError('WMRL_POLICY_NOT_FOUND', `no policy '${id}' (policies: ${this.list().map((p) => p.id).join(', ') || 'none'})`);
    const bytes = readFileSync(this.path(id));
    return describe(id, bytes, statSync(this.path(id)).mtimeMs);
  }

  bytes(id: string): Buffer {
    this.info(id);
    return readFileSync(this.path(id));
  }

  /** Stores a policy after checking it is an ONNX model with input `obs` and output `action`; replaces one with the same id. */
  save(id: string, bytes: Buffer): PolicyInfo {
    let info: PolicyInfo;
    try {
      info = describe(id, bytes, Date.now());
    } catch (e) {
      throw new ApiError('WMRL_POLICY_INVALID', `policy '${id}' is not a readable ONNX model: ${(e as Error).message}`);
    }
    if (!info.inputs.some((i) => i.name === 'obs') || !info.outputs.some((o) => o.name === 'action'))
      throw new ApiError('WMRL_POLICY_INVALID', `policy '${id}' needs an input 'obs' and an output 'action' (has inputs [${info.inputs.map((i) => i.name)}], outputs [${info.outputs.map((o) => o.name)}])`);
    const tmp = `${this.path(id)}.${process.pid}.tmp`;
    writeFileSync(tmp, bytes);
    renameSync(tmp, this.path(id));
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
