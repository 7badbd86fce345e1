// The one loader for YAML configuration files (robot YAML, hardware profiles, custom-robot
// mappings): a TypeBox schema in, the typed value out, or a ConfigError naming the file, the line
// and the key. Unknown keys are errors (a typo must not silently fall back to a default).
import { readFileSync } from 'node:fs';
import type { Static, TSchema } from '@sinclair/typebox';
import { Kind } from '@sinclair/typebox';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { Value } from '@sinclair/typebox/value';
import { isMap, isSeq, LineCounter, parseDocument, type Document, type Node as YamlNode } from 'yaml';
import { problem } from './schema.js';

export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly detail: string,
    readonly line?: number,
    /** Dotted path of the offending key: `action.low`, `position_limits[1]`. */
    readonly key?: string,
  ) {
    super(`${file}${line ? `:${line}` : ''}: ${key ? `key '${key}': ` : ''}${detail}`);
    this.name = 'ConfigError';
  }
}

export type ConfigPath = ReadonlyArray<string | number>;

export interface Config<T> {
  value: T;
  /** Throws a ConfigError for a check beyond the schema, at the line of the key at `path`. */
  fail(path: ConfigPath, detail: string): never;
}

const keyName = (path: ConfigPath): string =>
  path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');

/** The line where the key at `path` is written; for a key that is absent, the line of its mapping. */
function lineOf(doc: Document, lc: LineCounter, path: ConfigPath): number | undefined {
  const line = (n: YamlNode | null | undefined) => (n?.range ? lc.linePos(n.range[0]).line : undefined);
  if (path.length === 0) return line(doc.contents as YamlNode);
  const parent = doc.getIn(path.slice(0, -1), true) as YamlNode | undefined;
  const last = path[path.length - 1];
  if (isMap(parent)) {
    const pair = parent.items.find((it) => String((it.key as { value?: unknown } | null)?.value ?? it.key) === String(last));
    if (pair) return line(pair.key as YamlNode);
  } else if (isSeq(parent) && typeof last === 'number' && last < parent.items.length) {
    return line(parent.items[last] as YamlNode);
  }
  return lineOf(doc, lc, path.slice(0, -1));
}

/** The schema of the value at `path` below `root`, through objects, arrays and tuples. */
function schemaAt(root: TSchema, path: ConfigPath): TSchema | undefined {
  let s: TSchema | undefined = root;
  for (const p of path) {
    const kind: string | undefined = s?.[Kind];
    if (kind === 'Object') s = s!.properties[p];
    else if (kind === 'Array') s = s!.items;
    else if (kind === 'Tuple') s = s!.items?.[p as number];
    else return undefined;
  }
  return s;
}

/**
 * The error to report: a wrong value or an unknown key before a missing key (a typo'd key shows up
 * as both, and the typo is the useful half), earliest in the file first. The nearest `errorMessage`
 * on the way down speaks for what is below it (a list's or tuple's for its items, so `goal: [0.2, 'x',
 * 0]` is "key 'goal': must be [x, y, z]"); a mapping's only for the mapping itself.
 */
function pick(schema: TSchema, value: unknown, errors: ValueError[], doc: Document, lc: LineCounter): { path: ConfigPath; detail: string } {
  const toPath = (p: string): ConfigPath => p.split('/').slice(1).map((s) => (/^\d+$/.test(s) ? Number(s) : s.replace(/~1/g, '/').replace(/~0/g, '~')));
  const missing = new Set(errors.filter((e) => e.type === ValueErrorType.ObjectRequiredProperty).map((e) => e.path));
  const wrong = errors.filter((e) => !missing.has(e.path));
  const byLine = (es: ValueError[]) => es.map((e, i) => ({ e, i, line: lineOf(doc, lc, toPath(e.path)) ?? 0 })).sort((a, b) => a.line - b.line || a.i - b.i);
  const e = (wrong.length ? byLine(wrong) : byLine(errors))[0]!.e;
  const path = toPath(e.path);
  if (e.type === ValueErrorType.ObjectAdditionalProperties || e.type === ValueErrorType.ObjectRequiredProperty) return { path, detail: problem(e) };
  let at = path;
  let detail = problem(e);
  for (let n = path.length; n >= 1; n--) {
    const s = schemaAt(schema, path.slice(0, n));
    // A mapping's own message covers a wrong mapping, not what is wrong inside it.
    if (n < path.length && s?.[Kind] === 'Object') continue;
    if (typeof s?.errorMessage === 'string') {
      at = path.slice(0, n);
      detail = s.errorMessage;
      break;
    }
  }
  const v = at.reduce<unknown>((x, k) => (x as Record<string | number, unknown>)[k], value);
  const scalar = v === null || ['string', 'number', 'boolean'].includes(typeof v);
  return { path: at, detail: scalar && !detail.includes(', got ') ? `${detail}, got ${typeof v === 'string' ? `'${v}'` : String(v)}` : detail };
}

/**
 * Parses YAML `text` (from `file`, named in errors) against `schema`. `what` names the kind of
 * file in errors about the file as a whole ("robot mapping", "profile", "robot config").
 */
export function parseConfig<T extends TSchema>(schema: T, text: string, file: string, what: string): Config<Static<T>> {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false });
  if (doc.errors.length) {
    const e = doc.errors[0]!;
    throw new ConfigError(file, `YAML syntax: ${e.message.split('\n')[0]}`, lc.linePos(e.pos[0]).line);
  }
  const fail = (path: ConfigPath, detail: string): never => {
    throw new ConfigError(file, detail, lineOf(doc, lc, path), path.length ? keyName(path) : undefined);
  };
  if (!isMap(doc.contents)) fail([], `a ${what} is a mapping of key: value`);
  const value: unknown = doc.toJS();
  const errors = [...Value.Errors(schema, value)];
  if (errors.length) {
    const { path, detail } = pick(schema, value, errors, doc, lc);
    fail(path, detail);
  }
  return { value: value as Static<T>, fail };
}

/** The text of a configuration file, or a ConfigError saying which `what` could not be read. */
export function readConfigFile(file: string, what: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(file, `cannot read ${what} (${(e as Error).message})`);
  }
}
