// A command's flags from a recipe's TypeBox schema: one flag per option (`groupSize` → `--group-size`; a boolean
// defaulting to true → `--no-NAME`), its default, choices and description from the schema, and every value checked
// against the option's schema with an error naming the flag.
import { InvalidArgumentError, Option, type Command } from 'commander';
import { Kind, type TObject, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';

/** The flag of an option key (`resetSeconds` → `--reset-seconds`). */
export const flagOf = (key: string) => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

const choicesOf = (s: TSchema): string[] | null => {
  const any = s.anyOf as TSchema[] | undefined;
  return any && any.every((c) => c.const !== undefined) ? any.map((c) => String(c.const)) : null;
};

/** Why `value` does not fit the option's schema, as this CLI words it, or null. */
function problem(s: TSchema, value: unknown): string | null {
  const e = [...Value.Errors(s, value)][0];
  if (!e) return null;
  const choices = choicesOf(s);
  return choices ? `must be ${choices.join(' or ')}` : `${e.message.charAt(0).toLowerCase()}${e.message.slice(1)}`;
}

/** A value parser for an option: numbers parsed and range-checked, strings checked (choices are commander's). */
function parser(flag: string, s: TSchema) {
  return (raw: string) => {
    const v = s[Kind] === 'Integer' || s[Kind] === 'Number' ? (raw.trim() === '' ? NaN : Number(raw)) : raw;
    const bad = problem(s, v);
    if (bad) throw new InvalidArgumentError(`${flag}: ${bad}, got '${raw}'`);
    return v;
  };
}

/**
 * Adds a flag for every option of `schema` but those in `skip` (options a command words its own way). Nested
 * objects and arrays have no flag. Returns the keys that got one.
 */
export function addSchemaFlags(cmd: Command, schema: TObject, skip: readonly string[] = []): string[] {
  const keys: string[] = [];
  for (const [key, s] of Object.entries(schema.properties) as Array<[string, TSchema]>) {
    if (skip.includes(key) || s[Kind] === 'Object' || s[Kind] === 'Array') continue;
    const flag = flagOf(key);
    const desc = (s.description as string | undefined) ?? key;
    if (s[Kind] === 'Boolean') {
      // commander's --no-NAME sets NAME false and defaults it to true.
      cmd.addOption(s.default === true ? new Option(`--no-${flag.slice(2)}`, `turn off: ${desc}`) : new Option(flag, desc));
    } else {
      const choices = choicesOf(s);
      const opt = new Option(`${flag} <${choices ? 'C' : s[Kind] === 'Integer' ? 'N' : s[Kind] === 'Number' ? 'X' : 'S'}>`, desc);
      if (choices) opt.choices(choices);
      else opt.argParser(parser(flag, s));
      if (s.default !== undefined) opt.default(s.default);
      cmd.addOption(opt);
    }
    keys.push(key);
  }
  return keys;
}

/** The options of `schema` that `values` (commander's, camel-cased) holds, defaults filled in, checked against the whole schema. */
export function schemaValues<T extends TObject>(schema: T, values: Record<string, unknown>, keys: readonly string[]): Record<string, unknown> {
  const o = Value.Default(schema, Object.fromEntries(keys.filter((k) => values[k] !== undefined).map((k) => [k, values[k]])));
  const bad = [...Value.Errors(schema, o)].map((e) => `${flagOf(e.path.slice(1))}: ${problem(e.schema, e.value) ?? e.message}, got '${String(e.value)}'`);
  if (bad.length) throw new Error(bad.join('; '));
  return o as Record<string, unknown>;
}
