// The summary table a long command prints at its end: aligned columns, numbers right-aligned.

export type Cell = string | number | boolean | undefined;

export function formatTable(rows: Array<Record<string, Cell>>): string {
  if (!rows.length) return '';
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const text = (v: Cell) => (v === undefined ? '' : typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(3)) : String(v));
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => text(r[c]).length)));
  const line = (cells: string[], numeric: boolean[]) => cells.map((s, i) => (numeric[i] ? s.padStart(width[i]!) : s.padEnd(width[i]!))).join('  ').trimEnd();
  const numeric = cols.map((c) => rows.every((r) => typeof r[c] === 'number' || r[c] === undefined));
  return [line(cols, numeric), line(width.map((w) => '-'.repeat(w)), numeric.map(() => false)), ...rows.map((r) => line(cols.map((c) => text(r[c])), numeric))].join('\n');
}

export function printTable(title: string, rows: Array<Record<string, Cell>>): void {
  console.log(`\n${title}\n${formatTable(rows)}`);
}
