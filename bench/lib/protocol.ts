// The evidence protocol every learning benchmark follows: disjoint train / validation / test splits declared in one
// place, two keys (the computation key: a hash of the code a benchmark's cells run and the cells' options, per variant
// where the variants are trainers of their own; the report key: those and the code that writes its report), results
// cached per (bench, task, seed, variant) under the cell's computation key so a full run can span sessions, a variant
// can be added, and a report's wording can change without voiding the other cells, the
// test-split ledger that makes a second look at a test set visible, and `--check`, which vouches for a committed
// report only under its report key.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ledger, type LedgerEntry } from './ledger.js';
import { RESULTS_DIR, type BenchOptions } from './report.js';

/** The repository's root folder. */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** Cached cells, committed so a full run spans checkouts: bench/results/cells/<bench>/<computation key>/… */
export const CACHE_ROOT = join(REPO_ROOT, 'bench', 'results', 'cells');

export class ProtocolError extends Error {
  override name = 'ProtocolError';
}

// ── Splits ──────────────────────────────────────────────────────────────────────────────────────
export const SPLIT_NAMES = ['train', 'validation', 'test'] as const;
export type SplitName = (typeof SPLIT_NAMES)[number];

/** One kind of item (start-state seeds, instruction-target combinations, research-task seeds) split three ways. */
export interface SplitSets<T = unknown> {
  train: readonly T[];
  validation: readonly T[];
  test: readonly T[];
}

/** A benchmark's splits, checked disjoint: `sets[kind][split]` lists the items. */
export interface Splits<S extends Record<string, SplitSets>> {
  bench: string;
  sets: S;
  /** Which split `item` of `kind` is in, or null where it is in none. */
  splitOf<K extends keyof S & string>(kind: K, item: S[K]['test'][number]): SplitName | null;
}

/** Key of an item: equal items (numbers, strings, arrays, objects with the same fields) get the same key. */
function itemKey(x: unknown): string {
  if (x === null || typeof x !== 'object') {
    if (typeof x === 'number' && !Number.isFinite(x)) throw new ProtocolError(`split item ${x} is not a finite number`);
    return JSON.stringify(x);
  }
  if (Array.isArray(x)) return `[${x.map(itemKey).join(',')}]`;
  return `{${Object.keys(x).sort().map((k) => `${JSON.stringify(k)}:${itemKey((x as Record<string, unknown>)[k])}`).join(',')}}`;
}

/**
 * Declares a benchmark's splits: for every kind of item, train, validation and test lists that share no item (an
 * item twice in one list is refused too); test may not be empty. Throws a ProtocolError naming the bench, the kind,
 * the item and both splits.
 */
export function defineSplits<S extends Record<string, SplitSets>>(bench: string, sets: S): Splits<S> {
  const where = new Map<string, Map<string, SplitName>>();
  for (const [kind, split] of Object.entries(sets)) {
    const seen = new Map<string, SplitName>();
    for (const name of SPLIT_NAMES) {
      const items = split[name];
      if (!Array.isArray(items)) throw new ProtocolError(`bench ${bench}: splits.${kind}.${name} must be a list`);
      for (const item of items) {
        const k = itemKey(item);
        const before = seen.get(k);
        if (before === name) throw new ProtocolError(`bench ${bench}: ${kind}: ${k} is listed twice in ${name}`);
        if (before) throw new ProtocolError(`bench ${bench}: ${kind}: ${k} is in both ${before} and ${name}; train, validation and test must be disjoint`);
        seen.set(k, name);
      }
    }
    if (split.test.length === 0) throw new ProtocolError(`bench ${bench}: ${kind}: the test split is empty`);
    where.set(kind, seen);
  }
  return {
    bench,
    sets,
    splitOf(kind, item) {
      const m = where.get(kind);
      if (!m) throw new ProtocolError(`bench ${bench}: no split of '${kind}' is declared (${[...where.keys()].join(', ')})`);
      return m.get(itemKey(item)) ?? null;
    },
  };
}

// ── Run keys ────────────────────────────────────────────────────────────────────────────────────
export interface RunKeySpec {
  /** The benchmark's file (a path or file URL): it and every file it imports, transitively, by relative import. */
  entry: string;
  /** Repository folders hashed whole (code loaded by path, not import: sandboxed programs, workers). */
  dirs?: readonly string[];
  /** More repository files. */
  files?: readonly string[];
  /** The benchmark's options (sizes, seeds, variants): JSON, keys sorted. */
  options?: unknown;
  /** The repository's root; default this one. */
  root?: string;
}

const IMPORT_RE = /(?:\bfrom\s*|\bimport\s*\(?\s*)['"](\.{1,2}\/[^'"]+)['"]/g;
const CODE_EXT = /\.(?:ts|mts|js|mjs)$/;

/** Resolves a relative import as tsx does: `x.js` is `x.ts` where that exists. */
function resolveImport(root: string, from: string, spec: string): string {
  const p = resolve(dirname(from), spec);
  const candidates = [p, p.replace(/\.js$/, '.ts'), p.replace(/\.mjs$/, '.mts'), `${p}.ts`, join(p, 'index.ts')];
  const hit = candidates.find((c) => existsSync(c) && statSync(c).isFile());
  if (!hit) throw new ProtocolError(`run key: ${relative(root, from)} imports '${spec}', which resolves to no file`);
  return hit;
}

/** `entry` and every repository file it reaches through relative imports (comments included: a stray match only adds a file). */
export function importClosure(entry: string, root: string = REPO_ROOT): string[] {
  const start = entry.startsWith('file:') ? fileURLToPath(entry) : resolve(root, entry);
  const seen = new Set<string>();
  const todo = [start];
  while (todo.length) {
    const f = todo.pop()!;
    if (seen.has(f)) continue;
    seen.add(f);
    if (!CODE_EXT.test(f)) continue;
    const text = readFileSync(f, 'utf8');
    for (const m of text.matchAll(IMPORT_RE)) {
      const target = resolveImport(root, f, m[1]!);
      if (!relative(root, target).startsWith('..')) todo.push(target);
    }
  }
  return [...seen].map((f) => relative(root, f)).sort();
}

/** The repository files a run key hashes, sorted: the entry's import closure, the folders, the files, package-lock.json. */
export function runKeySources(spec: RunKeySpec): string[] {
  const root = spec.root ?? REPO_ROOT;
  const inside = (p: string, what: string) => {
    if (isAbsolute(p) || p.split(/[\\/]/).includes('..')) throw new ProtocolError(`run key: ${what} '${p}' must be a path inside the repository`);
    if (!existsSync(join(root, p))) throw new ProtocolError(`run key: ${what} '${p}' does not exist`);
    return p;
  };
  const inDir = (d: string) => (readdirSync(join(root, inside(d, 'folder')), { recursive: true }) as string[]).map((f) => join(d, f)).filter((f) => statSync(join(root, f)).isFile());
  const files = (spec.files ?? []).map((f) => inside(f, 'file'));
  return [...new Set([...importClosure(spec.entry, root), ...(spec.dirs ?? []).flatMap(inDir), ...files, inside('package-lock.json', 'file')])].sort();
}

/** JSON with object keys sorted, so equal options hash equally whatever order they were written in. */
export function stableJson(x: unknown): string {
  if (x === undefined) return 'null';
  if (x === null || typeof x !== 'object') {
    if (typeof x === 'number' && !Number.isFinite(x)) return JSON.stringify(String(x));
    return JSON.stringify(x);
  }
  if (Array.isArray(x)) return `[${x.map(stableJson).join(',')}]`;
  return `{${Object.keys(x).sort().filter((k) => (x as Record<string, unknown>)[k] !== undefined).map((k) => `${JSON.stringify(k)}:${stableJson((x as Record<string, unknown>)[k])}`).join(',')}}`;
}

/**
 * A run key: a hash of every file runKeySources lists (each by its path and bytes), the options, and the Node major
 * version and CPU architecture. A change to any of them is a new key; the key says nothing of edits elsewhere.
 */
export function runKey(spec: RunKeySpec): string {
  const root = spec.root ?? REPO_ROOT;
  const h = createHash('sha256');
  for (const f of runKeySources(spec)) h.update(`${f}\0`).update(readFileSync(join(root, f))).update('\0');
  h.update(stableJson({ options: spec.options ?? null, node: process.versions.node.split('.')[0], arch: process.arch }));
  return h.digest('hex').slice(0, 24);
}

/** A variant's own code and options, for a benchmark whose cells differ by variant in code (a trainer each). */
export interface VariantKeySpec {
  /** The variant's code (a path or file URL): it and every file it imports, transitively; the shared setup's files may be among them. */
  entry: string;
  dirs?: readonly string[];
  files?: readonly string[];
  /** The variant's options (its trainer's configuration, its grid point): JSON, keys sorted. */
  options?: unknown;
}

/** A benchmark's run keys. */
export interface ProtocolKeys {
  /**
   * What its cached cells depend on: the code the cells run and the cells' own options. With per-variant keys, the
   * shared setup alone (what every cell runs: pretraining, evaluation, the cell options); cells of a variant without a
   * key of its own, and ledger entries of them, are kept under it.
   */
  compute: string;
  /** Per variant, the computation key its cells are cached and recorded under: the shared key with the variant's own code and options. */
  variants?: Record<string, string>;
  /** What its report depends on: the computation keys, the benchmark's file with all it imports, and the run's options. `--check` compares it. */
  report: string;
}

const fileOf = (root: string, entry: string) => relative(root, entry.startsWith('file:') ? fileURLToPath(entry) : resolve(root, entry));

/**
 * The keys of a benchmark whose cells are computed by `compute.entry` (a module the benchmark's file imports, which
 * does not import the report's code) and reported by `report.entry` (the benchmark's file): editing only the
 * report's wording moves the report key and keeps the cached cells. With `variants`, `compute` is the setup every
 * cell shares and each variant's cells get a key of their own, covering the shared key and the variant's own code
 * (its entry's import closure) and options: adding a variant, or editing one variant's trainer, keeps the other
 * variants' cells. The shared code must import no variant's entry, and no variant another's, or an edit of one would
 * move the others' keys; the report key covers every variant key, so a report is vouched for only while every cell
 * it used keeps its key.
 */
export function protocolKeys(spec: { compute: RunKeySpec; variants?: Readonly<Record<string, VariantKeySpec>>; report: RunKeySpec }): ProtocolKeys {
  const root = spec.report.root ?? REPO_ROOT;
  const reportFile = fileOf(root, spec.report.entry);
  const shared = runKeySources(spec.compute);
  if (shared.includes(reportFile)) throw new ProtocolError(`protocol keys: the cells' code (${spec.compute.entry}) imports the report's file ${reportFile}; the computation key must not hash the report`);
  const compute = runKey(spec.compute);
  const variants = Object.entries(spec.variants ?? {});
  const entries = new Map(variants.map(([name, v]) => [name, fileOf(root, v.entry)]));
  const variantKeys: Record<string, string> = {};
  for (const [name, v] of variants) {
    const own = entries.get(name)!;
    if (shared.includes(own)) throw new ProtocolError(`protocol keys: the shared setup (${spec.compute.entry}) imports variant ${name}'s code ${own}; an edit of it would move every variant's key`);
    const vspec: RunKeySpec = { entry: v.entry, root, ...(v.dirs ? { dirs: v.dirs } : {}), ...(v.files ? { files: v.files } : {}), options: { shared: compute, variant: v.options ?? null } };
    const sources = runKeySources(vspec);
    if (sources.includes(reportFile)) throw new ProtocolError(`protocol keys: variant ${name}'s code (${own}) imports the report's file ${reportFile}; the computation key must not hash the report`);
    for (const [other, theirs] of entries) {
      if (theirs !== own && sources.includes(theirs)) throw new ProtocolError(`protocol keys: variant ${name}'s code (${own}) imports variant ${other}'s ${theirs}; an edit of ${other}'s code would move ${name}'s key`);
    }
    variantKeys[name] = runKey(vspec);
  }
  const keys = variants.length ? { compute, variants: variantKeys } : { compute };
  return { ...keys, report: runKey({ ...spec.report, options: { ...keys, report: spec.report.options ?? null } }) };
}

/** The computation key a variant's cells are cached and recorded under: its own, or the shared one. */
export const variantKey = (keys: Pick<ProtocolKeys, 'compute' | 'variants'>, variant: string): string => keys.variants?.[variant] ?? keys.compute;

// ── Results as JSON ─────────────────────────────────────────────────────────────────────────────
/** JSON that keeps NaN and ±Infinity (a level never reached stays Infinity). */
export const toJson = (x: unknown, space?: number) => JSON.stringify(x, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? { nonFinite: String(v) } : v), space);
export const fromJson = <T>(text: string): T => JSON.parse(text, (_k, v: unknown) => (v !== null && typeof v === 'object' && 'nonFinite' in v ? Number((v as { nonFinite: string }).nonFinite) : v)) as T;

// ── Cells and their cache ───────────────────────────────────────────────────────────────────────
/** One unit of a benchmark's work: a variant trained and measured on one task at one seed of one split. */
export interface Cell {
  task: string;
  variant: string;
  seed: number;
  split: SplitName;
}

const SAFE = /^[A-Za-z0-9._-]+$/;

/** Each cell's result as a JSON file: <root>/<bench>/<computation key>/<split>/<task>/<variant>/seed-<seed>.json. */
export class CellCache {
  constructor(readonly bench: string, readonly computeKey: string, readonly root: string = CACHE_ROOT) {
    for (const [what, v] of [['bench', bench], ['computation key', computeKey]] as const) if (!SAFE.test(v)) throw new ProtocolError(`cell cache: ${what} '${v}' may hold only letters, digits, '.', '_' and '-'`);
  }

  path(c: Cell): string {
    for (const [what, v] of [['task', c.task], ['variant', c.variant]] as const) if (!SAFE.test(v)) throw new ProtocolError(`cell cache: ${what} '${v}' may hold only letters, digits, '.', '_' and '-'`);
    if (!Number.isInteger(c.seed)) throw new ProtocolError(`cell cache: seed ${c.seed} must be an integer`);
    return join(this.root, this.bench, this.computeKey, c.split, c.task, c.variant, `seed-${c.seed}.json`);
  }

  /** The cell's cached result, or undefined; throws naming the file where it does not parse. */
  get<T>(c: Cell): T | undefined {
    const p = this.path(c);
    if (!existsSync(p)) return undefined;
    try {
      return fromJson<{ value: T }>(readFileSync(p, 'utf8')).value;
    } catch (e) {
      throw new ProtocolError(`${p}: not a cached cell (${(e as Error).message}); delete it to run the cell again`, { cause: e });
    }
  }

  /** Writes the cell's result whole or not at all (a temporary file renamed over it). */
  put<T>(c: Cell, value: T): void {
    const p = this.path(c);
    mkdirSync(dirname(p), { recursive: true });
    const tmp = `${p}.${process.pid}.tmp`;
    writeFileSync(tmp, toJson({ cell: c, date: new Date().toISOString(), value }));
    renameSync(tmp, p);
  }
}

// ── Evaluating a cell: the cache, and the ledger for the test split ─────────────────────────────
export interface ProtocolRun<S extends Record<string, SplitSets>> {
  bench: string;
  /** The computation key the cells are cached and recorded under, where their variant has none of its own. */
  computeKey: string;
  /** Per variant, the key its cells are cached and recorded under instead (ProtocolKeys.variants). */
  variantKeys?: Readonly<Record<string, string>>;
  splits: Splits<S>;
  /** The kind of item a cell's seed is (its split is checked against it); default 'seeds'. */
  seedKind?: keyof S & string;
  /** Where the cells are cached: <cacheRoot>/<bench>/<the cell's computation key>/… */
  cacheRoot: string;
  ledger: Ledger;
  /** Evaluate a test cell again even where the ledger holds it under its computation key (recorded as a second look). */
  relook?: boolean;
}

/**
 * A protocol run of a benchmark at its computation keys (one key for every cell, or ProtocolKeys with per-variant
 * keys), with the default cache (bench/results/cells) and ledger (bench/results/ledger.jsonl).
 */
export function protocolRun<S extends Record<string, SplitSets>>(splits: Splits<S>, keys: string | Pick<ProtocolKeys, 'compute' | 'variants'>, opts: { relook?: boolean; seedKind?: keyof S & string; cacheRoot?: string; ledger?: Ledger } = {}): ProtocolRun<S> {
  const k = typeof keys === 'string' ? { compute: keys } : keys;
  return {
    bench: splits.bench, computeKey: k.compute, ...(k.variants ? { variantKeys: k.variants } : {}), splits, ...(opts.seedKind ? { seedKind: opts.seedKind } : {}),
    cacheRoot: opts.cacheRoot ?? CACHE_ROOT, ledger: opts.ledger ?? new Ledger(), ...(opts.relook ? { relook: true } : {}),
  };
}

/** The cache a cell of `variant` is kept in: under its variant's key, or the run's. */
export function cellCache<S extends Record<string, SplitSets>>(run: ProtocolRun<S>, variant: string): CellCache {
  return new CellCache(run.bench, run.variantKeys?.[variant] ?? run.computeKey, run.cacheRoot);
}

export interface CellOutcome<T> {
  value: T;
  /** Reused from the cache (no new evaluation). */
  cached: boolean;
}

/**
 * A cell's result: the cached one where it exists under its computation key (its variant's, or the run's), else
 * `compute()`'s, cached. A test cell is refused where the ledger says it was evaluated under that key already and its result is not cached (a second
 * look at the test set), unless `relook`; every test evaluation is appended to the ledger with `summarize`'s figures.
 */
export async function evaluateCell<S extends Record<string, SplitSets>, T>(
  run: ProtocolRun<S>,
  cell: Cell & { episodes: number },
  compute: () => Promise<T>,
  summarize: (value: T) => LedgerEntry['result'],
): Promise<CellOutcome<T>> {
  const kind = run.seedKind ?? 'seeds';
  const actual = run.splits.splitOf(kind, cell.seed);
  if (actual !== cell.split) throw new ProtocolError(`bench ${run.bench}: ${kind} ${cell.seed} is ${actual ? `a ${actual} item` : 'in no split'}, not ${cell.split}: a cell is evaluated only on its own split's items`);
  const cache = cellCache(run, cell.variant);
  const key = { bench: run.bench, task: cell.task, variant: cell.variant, seed: cell.seed, computeKey: cache.computeKey };
  const record = (value: T, relook: boolean) => run.ledger.append({ date: new Date().toISOString(), ...key, episodes: cell.episodes, result: summarize(value), ...(relook ? { relook: true as const } : {}) });
  const hit = cache.get<T>(cell);
  if (hit !== undefined) {
    // A cached test result the ledger lacks (a ledger from before it) is recorded now: every result a report uses is in the ledger.
    if (cell.split === 'test' && run.ledger.find(key).length === 0) record(hit, false);
    return { value: hit, cached: true };
  }
  const before = cell.split === 'test' ? run.ledger.find(key) : [];
  if (before.length && !run.relook) {
    throw new ProtocolError(
      `bench ${run.bench}: the test split of task ${cell.task}, variant ${cell.variant}, seed ${cell.seed} was evaluated under computation key ${cache.computeKey} ` +
        `on ${before.map((e) => e.date).join(', ')} (${run.ledger.path}), and its cached result is not in ${cache.path(cell)}: a second look at the test set is refused. ` +
        `Restore the cached result, or evaluate it again on purpose with --relook (recorded in the ledger as a second look).`,
    );
  }
  const value = await compute();
  cache.put(cell, value);
  if (cell.split === 'test') record(value, before.length > 0);
  return { value, cached: false };
}

// ── A benchmark under the protocol, and --check ─────────────────────────────────────────────────
/** What a benchmark under the protocol exports as `protocol`: its splits and its keys. */
export interface BenchProtocol {
  splits: Splits<Record<string, SplitSets>>;
  /** The keys of a run with these options (protocolKeys). */
  keys(opts: BenchOptions): ProtocolKeys;
}

export interface CheckOutcome {
  ok: boolean;
  /** The committed RESULT line (where the report has one). */
  resultLine: string | null;
  committedKey: string | null;
  currentKey: string;
  /** What to print: the RESULT line, or why it is refused and the command that re-runs it. */
  message: string;
}

/**
 * `--check`: the committed report `bench/results/<report>.md` vouches for this code only where its report key is
 * `currentKey`. Refuses (ok false) where the report is missing, carries no report key or RESULT line, or another key.
 */
export function checkCommitted(report: string, currentKey: string, rerun: string, dir: string = RESULTS_DIR): CheckOutcome {
  const path = join(dir, `${report}.md`);
  const refuse = (why: string, committedKey: string | null = null, resultLine: string | null = null): CheckOutcome => ({ ok: false, resultLine, committedKey, currentKey, message: `${why}: re-run \`${rerun}\` (this code's report key is ${currentKey})` });
  if (!existsSync(path)) return refuse(`no committed report ${relative(REPO_ROOT, path)}`);
  const text = readFileSync(path, 'utf8');
  const key = /^Report key: `([0-9a-f]+)`/m.exec(text)?.[1] ?? null;
  const line = /^RESULT .*$/m.exec(text)?.[0] ?? null;
  if (!key) return refuse(`${relative(REPO_ROOT, path)} carries no report key (run before the protocol, or before its report key)`, null, line);
  if (!line) return refuse(`${relative(REPO_ROOT, path)} carries no RESULT line`, key);
  if (key !== currentKey) return refuse(`${relative(REPO_ROOT, path)} was run by other code (its report key ${key}; this code's ${currentKey})`, key, line);
  return { ok: true, resultLine: line, committedKey: key, currentKey, message: line };
}
