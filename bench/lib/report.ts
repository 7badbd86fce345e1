// Shared pieces of every benchmark: statistics, the markdown table, the SVG plot, the report file.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The key lines a full report of a benchmark under the protocol carries; `--check` reads back the report key. */
export const keyLines = (keys: { compute: string; report: string }) => [
  `Report key: \`${keys.report}\` (a hash of the code this report and its numbers depend on and of the run's options; \`--check\` compares it with the code's).`,
  `Computation key: \`${keys.compute}\` (a hash of the code the cells ran and of their options — where a benchmark keys its variants apart, of the setup they share, each variant's own key listed in the notes: the cells are cached under bench/.cache/ and the test cells recorded in bench/results/ledger.jsonl under their key).`,
];

export interface BenchOptions {
  quick: boolean;
  /** `--all`: every task a benchmark knows, where it runs one by default (embodied: push beside reach). */
  all: boolean;
  /** `--task NAME`: that one task of those `--all` runs, instead of the default (embodied: push). */
  task?: string;
  /** `--seed N`: what it varies is the benchmark's `seeded` export (vla: its RL rows' seed); omitted: the benchmark's default. */
  seed?: number;
  /**
   * `--combine`: no run; the report is built from the results earlier full runs wrote (`BenchReport.files`), where a
   * benchmark declares what it combines (its `combines` export; vla: its `--task` runs into the two-task report).
   */
  combine?: boolean;
  /**
   * `--split validation`: a benchmark under the protocol (its `protocol` export) runs its validation split, where
   * choices are made, instead of the test split a full run reports; report <name>-validation.
   */
  split?: 'validation' | 'test';
  /** `--relook`: evaluate test cells again even where the ledger holds them under this run key (recorded as a second look). */
  relook?: boolean;
  /** Progress line sink; the harness draws it as a bar on a TTY. */
  progress: (done: number, total: number, label: string) => void;
}

export interface Series {
  label: string;
  points: Array<[number, number]>;
}

export interface Plot {
  title: string;
  xLabel: string;
  yLabel: string;
  /** Bars (one value per label) or lines (series of points). */
  bars?: Array<{ label: string; value: number }>;
  lines?: Series[];
  logY?: boolean;
  /** Lines only: a log-scaled x axis (points at x <= 0 are not drawn). */
  logX?: boolean;
}

export interface BenchReport {
  title: string;
  /** Free text above the table: what is compared, on what, with which seeds. */
  summary: string;
  header: string[];
  rows: Array<Array<string | number>>;
  /** Extra markdown (more tables, notes) appended to the full report. */
  notes?: string;
  plot: Plot;
  result: Record<string, number | string>;
  /** Files written beside the full report under bench/results/ (name → text): a run's raw results, which a later `--combine` reads. */
  files?: Record<string, string>;
  /** A benchmark under the protocol: the keys of the code its numbers and this report came from, written into the report for `--check`. */
  keys?: { compute: string; report: string };
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new Error('median of an empty list');
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export function quantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) throw new Error('quantile of an empty list');
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return s[lo]! + (s[hi]! - s[lo]!) * (pos - lo);
}

export function fmt(x: number | string, digits = 3): string {
  if (typeof x === 'string') return x;
  if (!Number.isFinite(x)) return String(x);
  if (x !== 0 && (Math.abs(x) >= 1e5 || Math.abs(x) < 1e-3)) return x.toExponential(2);
  return Number(x.toPrecision(digits + 1)).toString();
}

export function markdownTable(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number>>): string {
  const cells = rows.map((r) => r.map((c) => fmt(c)));
  const widths = header.map((h, i) => Math.max(h.length, 3, ...cells.map((r) => (r[i] ?? '').length)));
  const line = (cs: readonly string[]) => `| ${cs.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

export function resultLine(name: string, result: Record<string, number | string>): string {
  const kv = Object.entries(result).map(([k, v]) => `${k}=${typeof v === 'number' ? fmt(v, 4) : v}`);
  return `RESULT ${name} ${kv.join(' ')}`;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];

/** A small dependency-free SVG chart: bars, or lines with a legend. */
export function svgPlot(p: Plot): string {
  const W = 720, H = 420, L = 80, R = 180, T = 40, B = 60;
  const pw = W - L - R, ph = H - T - B;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${esc(p.title)}</text>`,
    `<text x="${L + pw / 2}" y="${H - 12}" text-anchor="middle">${esc(p.xLabel)}</text>`,
    `<text transform="translate(18,${T + ph / 2}) rotate(-90)" text-anchor="middle">${esc(p.yLabel)}</text>`,
  ];
  const tY = (v: number) => (p.logY ? Math.log10(Math.max(v, 1e-12)) : v);
  // Only the points drawn: with a log x axis, those at x <= 0 are not.
  const ys = p.bars ? p.bars.map((b) => tY(b.value)) : (p.lines ?? []).flatMap((s) => s.points.filter(([x]) => !p.logX || x > 0).map(([, y]) => tY(y)));
  let yMin = p.bars && !p.logY ? 0 : Math.min(...ys);
  let yMax = Math.max(...ys);
  if (!(yMax > yMin)) { yMax = yMin + 1; yMin -= 1; }
  const pad = (yMax - yMin) * 0.05;
  if (!(p.bars && !p.logY)) yMin -= pad;
  yMax += pad;
  const sy = (v: number) => T + ph - ((tY(v) - yMin) / (yMax - yMin)) * ph;
  for (let i = 0; i <= 5; i++) {
    const tv = yMin + ((yMax - yMin) * i) / 5;
    const y = T + ph - (ph * i) / 5;
    const label = p.logY ? fmt(10 ** tv, 2) : fmt(tv, 2);
    out.push(`<line x1="${L}" x2="${L + pw}" y1="${y}" y2="${y}" stroke="#ddd"/>`);
    out.push(`<text x="${L - 6}" y="${y + 4}" text-anchor="end">${label}</text>`);
  }
  out.push(`<line x1="${L}" x2="${L}" y1="${T}" y2="${T + ph}" stroke="black"/>`);
  out.push(`<line x1="${L}" x2="${L + pw}" y1="${T + ph}" y2="${T + ph}" stroke="black"/>`);
  if (p.bars) {
    const n = p.bars.length;
    const bw = (pw / n) * 0.7;
    p.bars.forEach((b, i) => {
      const x = L + (pw / n) * (i + 0.15);
      const y = sy(b.value);
      out.push(`<rect x="${x}" y="${y}" width="${bw}" height="${T + ph - y}" fill="${PALETTE[i % PALETTE.length]}"/>`);
      out.push(`<text x="${x + bw / 2}" y="${y - 4}" text-anchor="middle">${esc(fmt(b.value, 3))}</text>`);
      out.push(`<text x="${x + bw / 2}" y="${T + ph + 16}" text-anchor="middle">${esc(b.label)}</text>`);
    });
  } else {
    const lines = (p.lines ?? []).map((s) => ({ ...s, points: p.logX ? s.points.filter(([x]) => x > 0) : s.points }));
    const tX = (v: number) => (p.logX ? Math.log10(v) : v);
    const xs = lines.flatMap((s) => s.points.map(([x]) => tX(x)));
    const xMin = Math.min(...xs);
    const xMax = Math.max(...xs) > xMin ? Math.max(...xs) : xMin + 1;
    const sx = (v: number) => L + ((tX(v) - xMin) / (xMax - xMin)) * pw;
    for (let i = 0; i <= 5; i++) {
      const tv = xMin + ((xMax - xMin) * i) / 5, xv = p.logX ? 10 ** tv : tv;
      out.push(`<text x="${sx(xv)}" y="${T + ph + 16}" text-anchor="middle">${fmt(xv, 2)}</text>`);
    }
    lines.forEach((s, i) => {
      const c = PALETTE[i % PALETTE.length];
      const d = s.points.map(([x, y], j) => `${j ? 'L' : 'M'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ');
      out.push(`<path d="${d}" fill="none" stroke="${c}" stroke-width="2"/>`);
      out.push(`<rect x="${L + pw + 12}" y="${T + i * 18}" width="12" height="12" fill="${c}"/>`);
      out.push(`<text x="${L + pw + 30}" y="${T + i * 18 + 10}">${esc(s.label)}</text>`);
    });
  }
  out.push('</svg>');
  return out.join('\n');
}

export const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'results');

/** Writes bench/results/<name>.md and <name>.svg, and the report's `files` beside them; returns the markdown path. */
export function writeReport(name: string, report: BenchReport, command: string): string {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const svgName = `${name}.svg`;
  writeFileSync(join(RESULTS_DIR, svgName), svgPlot(report.plot));
  const md = [
    `# ${report.title}`,
    '',
    `Reproduce: \`${command}\``,
    '',
    `Run on ${new Date().toISOString()}, Node ${process.version}, ${process.platform}/${process.arch}.`,
    '',
    ...(report.keys ? [...keyLines(report.keys), ''] : []),
    report.summary,
    '',
    markdownTable(report.header, report.rows),
    '',
    report.notes ?? '',
    '',
    `![${report.plot.title}](${svgName})`,
    '',
    '```',
    resultLine(name, report.result),
    '```',
    '',
  ].join('\n');
  const path = join(RESULTS_DIR, `${name}.md`);
  writeFileSync(path, md);
  for (const [file, text] of Object.entries(report.files ?? {})) writeFileSync(join(RESULTS_DIR, file), text);
  return path;
}
