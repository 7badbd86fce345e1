// bench embodied's calibration cache: what a calibration computes after its robot episodes (the identification and the
// clone learned again, wmrl/calibrate.ts) is deterministic in those episodes, the clone and world model it started from
// and the calibration's code, so every process that calibrates the same seed reads back what the first one computed
// instead of cloning again (push's takes a quarter of an hour of one core). The robot episodes run, and are charged, each time.
import { createHash } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { readTensorFile, writeTensorFile, type ParamValue } from '../../../nn/index.js';
import type { Calibration, CalibrationMemo } from '../../../wmrl/calibration.js';
import { hashSources, setupCache, toJson } from '../../lib/setup-cache.js';
import { pretrainCacheRoot } from './pretrain-cache.js';

const { writeCached, readJson, loadCached } = setupCache('bench embodied');
type Entry = CalibrationMemo extends Map<string, infer E> ? E : never;

const FILES = { marker: 'calibration.json', params: 'params.safetensors' } as const;

let code: string | null = null;
/**
 * What a calibration's computation depends on besides its memo key (which hashes its inputs): every file under common/,
 * nn/, sim/, policies/ and worldmodel/, the calibration's own files and this cache's, package-lock.json, Node's major
 * version and the CPU architecture. Hashed once per process: the code that runs is the code loaded then.
 */
export function calibrationCodeKey(): string {
  if (code === null) {
    const h = createHash('sha256');
    hashSources(h, ['common', 'nn', 'sim', 'policies', 'worldmodel'], ['wmrl/calibrate.ts', 'wmrl/calibration.ts', 'wmrl/embodied.ts', 'bench/lib/setup-cache.ts', 'bench/cells/embodied/calibration-cache.ts', 'package-lock.json']);
    h.update(JSON.stringify({ node: process.versions.node.split('.')[0], arch: process.arch }));
    code = h.digest('hex').slice(0, 16);
  }
  return code;
}

/** The folder of one calibration's cached result, beside the pretrainings (`EMBODIED_SETUP_CACHE`). */
export const calibrationDir = (key: string) => join(pretrainCacheRoot(), 'calibration', `${calibrationCodeKey()}-${key.slice(0, 32)}`);

/**
 * A calibration memo that keeps each entry on disk too: `get` reads an entry another process wrote; `set` writes it
 * whole or not at all. A cached entry that does not load is refused, naming the folder to delete.
 */
export class DiskCalibrationMemo extends Map<string, Entry> implements CalibrationMemo {
  override get(key: string): Entry | undefined {
    const held = super.get(key);
    if (held) return held;
    const dir = calibrationDir(key);
    const saved = readJson<{ key: string; calibration: Calibration; policy: number }>(join(dir, FILES.marker));
    if (!saved) return undefined;
    if (saved.key !== key) throw new Error(`bench embodied: the cached calibration in ${dir} is of key ${saved.key}, not ${key}; delete ${dir} to calibrate afresh`);
    const entry = loadCached(join(dir, FILES.params), (f) => {
      const { tensors } = readTensorFile(f);
      const get = (name: string) => {
        const t = tensors.get(name);
        if (!t) throw new Error(`no tensor '${name}'`);
        return Float32Array.from(t.data);
      };
      return { calibration: saved.calibration, policy: Array.from({ length: saved.policy }, (_, i) => get(`policy.${i}`)), context: get('context') };
    });
    super.set(key, entry);
    return entry;
  }

  override set(key: string, entry: Entry): this {
    super.set(key, entry);
    const dir = calibrationDir(key);
    if (existsSync(join(dir, FILES.marker))) return this;
    writeCached(dir, FILES.marker, (part) => {
      const column = (data: Float32Array): ParamValue => ({ shape: [data.length], data });
      writeTensorFile(join(part, FILES.params), [...entry.policy.map((p, i): [string, ParamValue] => [`policy.${i}`, column(p)]), ['context', column(entry.context)]]);
      writeFileSync(join(part, FILES.marker), toJson({ key, calibration: entry.calibration, policy: entry.policy.length }));
    });
    return this;
  }
}
