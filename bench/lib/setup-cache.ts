// The disk caches of the benches' setups (bench vla's clone and world model, bench embodied's pretraining): what a
// setup's key hashes, and how a cached folder is written whole or not at all and read back, refusing a file that does
// not fit by naming the folder to delete. A setup is an intermediate, not a result: a failed write costs a rebuild.
import type { Hash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Hashes every file under the repository's folders `dirs` and the files `files`, in sorted order, each by its path and bytes. */
export function hashSources(h: Hash, dirs: readonly string[], files: readonly string[]): void {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const all = [...dirs.flatMap((d) => (readdirSync(join(root, d), { recursive: true }) as string[]).map((f) => join(d, f))), ...files].filter((f) => statSync(join(root, f)).isFile()).sort();
  for (const f of all) h.update(`${f}\0`).update(readFileSync(join(root, f))).update('\0');
}

/** JSON that keeps NaN and ±Infinity (a measurement that could not be made stays NaN). */
export const toJson = (x: unknown) => JSON.stringify(x, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? { nonFinite: String(v) } : v));
export const fromJson = <T>(text: string): T => JSON.parse(text, (_k, v: unknown) => (v !== null && typeof v === 'object' && 'nonFinite' in v ? Number((v as { nonFinite: string }).nonFinite) : v)) as T;

/** A bench's cache helpers, each message naming the bench. */
export interface SetupCache {
  /**
   * Writes `write`'s files into a folder of their own, then renames it to `dir` (whose `marker` file says it is whole): a
   * reader never sees half of it, and of two processes caching the same thing the second finds it there and leaves it.
   * Caching is a saving, not a result: a write that fails (a full disk, a read-only folder) is reported on stderr, naming
   * the folder and why, and the run goes on with what it built.
   */
  writeCached(dir: string, marker: string, write: (part: string) => void): void;
  /** A cached JSON file, or null where there is none; a file that does not parse is refused, naming it. */
  readJson<T>(path: string): T | null;
  /** Loads a cached file with `load`, naming the folder to delete where it does not fit. */
  loadCached<T>(path: string, load: (path: string) => T): T;
}

/** The cache helpers of the bench `who` names ('vla bench'), which starts every message they give. */
export function setupCache(who: string): SetupCache {
  return {
    writeCached(dir, marker, write) {
      let part: string | null = null;
      try {
        mkdirSync(dirname(dir), { recursive: true });
        part = mkdtempSync(`${dir}.part-`);
        write(part);
        renameSync(part, dir);
        part = null;
      } catch (e) {
        if (!existsSync(join(dir, marker))) console.error(`${who}: the setup was not cached in ${dir} (${e instanceof Error ? e.message : String(e)})${existsSync(dir) ? `: the folder is there without its ${marker}; delete it` : ''}`);
      } finally {
        if (part) rmSync(part, { recursive: true, force: true });
      }
    },
    readJson<T>(path: string): T | null {
      if (!existsSync(path)) return null;
      try {
        return fromJson<T>(readFileSync(path, 'utf8'));
      } catch (e) {
        throw new Error(`${who}: the cached ${path} does not parse (${e instanceof Error ? e.message : String(e)}); delete ${dirname(path)} to build it afresh`);
      }
    },
    loadCached<T>(path: string, load: (path: string) => T): T {
      try {
        return load(path);
      } catch (e) {
        throw new Error(`${who}: the cached ${path} does not fit this run: ${e instanceof Error ? e.message : String(e)}; delete ${dirname(path)} to build it afresh`);
      }
    },
  };
}
