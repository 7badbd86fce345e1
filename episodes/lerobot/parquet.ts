// Parquet in and out for the LeRobot files, with the column types pyarrow writes for them: scalars,
// lists (`list<element>`, the three-level LIST layout, nested for image stats), the Image struct {bytes, path};
// every column nullable.
import { readFileSync, writeFileSync } from 'node:fs';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { parquetWriteBuffer, type ColumnSource, type SchemaElement } from 'hyparquet-writer';
import { LeRobotError } from './format.js';

type Leaf = 'float' | 'double' | 'int64' | 'bool' | 'string';
export type ColumnKind = Leaf | `list<${Leaf}>` | 'list<list<list<double>>>' | 'image';

export interface Column {
  name: string;
  kind: ColumnKind;
  data: unknown[];
}

const LEAF: Record<string, SchemaElement> = {
  float: { name: '', type: 'FLOAT' },
  double: { name: '', type: 'DOUBLE' },
  int64: { name: '', type: 'INT64' },
  bool: { name: '', type: 'BOOLEAN' },
  string: { name: '', type: 'BYTE_ARRAY', converted_type: 'UTF8' },
};

function schemaOf(c: Column): SchemaElement[] {
  const opt = { repetition_type: 'OPTIONAL' as const };
  if (c.kind === 'image') {
    return [
      { name: c.name, ...opt, num_children: 2 },
      { name: 'bytes', type: 'BYTE_ARRAY', ...opt },
      { name: 'path', type: 'BYTE_ARRAY', converted_type: 'UTF8', ...opt },
    ];
  }
  const list = /^list<(.+)>$/.exec(c.kind);
  if (list) {
    return [
      { name: c.name, ...opt, converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      ...schemaOf({ name: 'element', kind: list[1] as ColumnKind, data: [] }),
    ];
  }
  return [{ ...LEAF[c.kind]!, name: c.name, ...opt }];
}

/** Writes one parquet file; `kv` becomes key-value metadata (e.g. pandas' index description). */
export function writeParquet(file: string, columns: Column[], kv: Record<string, string> = {}): void {
  const schema: SchemaElement[] = [{ name: 'schema', num_children: columns.length }, ...columns.flatMap(schemaOf)];
  const columnData: ColumnSource[] = columns.map((c) => ({ name: c.name, data: c.data as ColumnSource['data'] }));
  const buf = parquetWriteBuffer({
    columnData,
    schema,
    kvMetadata: Object.entries(kv).map(([key, value]) => ({ key, value })),
    createdBy: 'wmrl-bridge (hyparquet-writer)',
  });
  writeFileSync(file, new Uint8Array(buf));
}

export interface ParquetTable {
  /** Top-level column names, in file order. */
  columns: string[];
  rows: Array<Record<string, unknown>>;
}

/** Reads a whole parquet file: binary stays Uint8Array, strings are strings, int64 are bigint. */
export async function readParquet(file: string): Promise<ParquetTable> {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (e) {
    throw new LeRobotError(`${file}: cannot read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  const ab = new Uint8Array(bytes).buffer;
  let columns: string[];
  try {
    const meta = parquetMetadata(ab);
    // Top-level columns: walk the flattened schema, skipping each element's descendants.
    columns = [];
    const skip = (i: number): number => {
      let next = i + 1;
      for (let k = 0; k < (meta.schema[i]!.num_children ?? 0); k++) next = skip(next);
      return next;
    };
    for (let i = 1; i < meta.schema.length; i = skip(i)) columns.push(meta.schema[i]!.name);
  } catch (e) {
    throw new LeRobotError(`${file}: not a parquet file (${(e as Error).message})`);
  }
  const rows = (await parquetReadObjects({ file: ab, utf8: false })) as Array<Record<string, unknown>>;
  return { columns, rows };
}

/** Throws naming the first of `want` that `t` lacks. */
export function requireColumns(t: ParquetTable, want: readonly string[], file: string): void {
  const missing = want.filter((c) => !t.columns.includes(c));
  if (missing.length) throw new LeRobotError(`${file}: missing column${missing.length > 1 ? 's' : ''} ${missing.map((m) => `'${m}'`).join(', ')} (has ${t.columns.join(', ')})`);
}
