// TypeBox schemas described in words, for error messages that say what a field must be.
import { Kind, type TSchema } from '@sinclair/typebox';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';

/** What a schema accepts: "a string", "a mapping", "'info', 'warning' or 'error'"; its `expected` option wins. */
export function expected(s: TSchema): string {
  if (typeof s.expected === 'string') return s.expected;
  const kind = s[Kind] as string;
  if (kind === 'Union') {
    const parts = (s.anyOf as TSchema[]).filter((m) => m[Kind] !== 'Null').map(expected);
    return parts.length > 1 ? `${parts.slice(0, -1).join(', ')} or ${parts.at(-1)}` : parts[0]!;
  }
  if (kind === 'Literal') return typeof s.const === 'string' ? `'${s.const}'` : String(s.const);
  if (kind === 'Integer') return 'an integer';
  if (kind === 'Record' || kind === 'Object') return 'a mapping';
  if (kind === 'Array') return 'a list';
  return `a ${kind.toLowerCase()}`;
}

const RANGE = new Set([
  ValueErrorType.NumberMinimum, ValueErrorType.NumberMaximum, ValueErrorType.NumberExclusiveMinimum, ValueErrorType.NumberExclusiveMaximum,
  ValueErrorType.IntegerMinimum, ValueErrorType.IntegerMaximum, ValueErrorType.IntegerExclusiveMinimum, ValueErrorType.IntegerExclusiveMaximum,
]);

/**
 * One schema error as the tail of a sentence about the field: "missing", "unknown key",
 * "must be a number", "must be in [0, 10], got -1". A schema's own `errorMessage` option wins.
 */
export function problem(e: ValueError): string {
  if (e.type === ValueErrorType.ObjectRequiredProperty) return 'missing';
  if (e.type === ValueErrorType.ObjectAdditionalProperties) return 'unknown key';
  if (typeof e.schema.errorMessage === 'string') return e.schema.errorMessage;
  if (RANGE.has(e.type)) {
    const s = e.schema;
    const lo = s.minimum !== undefined ? `[${s.minimum}` : s.exclusiveMinimum !== undefined ? `(${s.exclusiveMinimum}` : undefined;
    const hi = s.maximum !== undefined ? `${s.maximum}]` : s.exclusiveMaximum !== undefined ? `${s.exclusiveMaximum})` : undefined;
    const range = lo && hi ? `in ${lo}, ${hi}` : lo ? `${lo[0] === '[' ? '>=' : '>'} ${lo.slice(1)}` : `${hi!.endsWith(']') ? '<=' : '<'} ${hi!.slice(0, -1)}`;
    return `must be ${range}, got ${e.value}`;
  }
  return `must be ${expected(e.schema)}`;
}
