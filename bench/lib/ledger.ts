// The test-split ledger: bench/results/ledger.jsonl, committed and append-only, one line per test-split evaluation
// ever made, so a second look at a test set is visible in the history of one file.
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { RESULTS_DIR } from './report.js';

export const LEDGER_PATH = join(RESULTS_DIR, 'ledger.jsonl');

/** What identifies one test-split cell: the same cell under the same computation key is the same evaluation. */
export interface LedgerCell {
  bench: string;
  task: string;
  variant: string;
  seed: number | string;
  /** The computation key (bench/lib/protocol.ts protocolKeys) of the code that evaluated it. */
  computeKey: string;
}

export interface LedgerEntry extends LedgerCell {
  /** When the evaluation finished (ISO 8601). */
  date: string;
  /** Test episodes (start states, evaluation seeds) the result was measured on. */
  episodes: number;
  /** The cell's headline figures (a failed measurement is null). */
  result: Record<string, number | string | null>;
  /** Set where this cell had been evaluated under this computation key before: a deliberate second look (`--relook`). */
  relook?: true;
}

const sameCell = (a: LedgerCell, b: LedgerCell) => a.bench === b.bench && a.task === b.task && a.variant === b.variant && a.seed === b.seed && a.computeKey === b.computeKey;

function checkEntry(e: unknown, where: string): LedgerEntry {
  const o = e as Partial<LedgerEntry> | null;
  const bad = (what: string): never => {
    throw new Error(`${where}: not a ledger entry (${what})`);
  };
  if (!o || typeof o !== 'object' || Array.isArray(o)) return bad('not an object');
  for (const k of ['bench', 'task', 'variant', 'computeKey', 'date'] as const) if (typeof o[k] !== 'string' || !o[k]) bad(`${k} must be a non-empty string`);
  if (typeof o.seed !== 'number' && typeof o.seed !== 'string') bad('seed must be a number or a string');
  if (!(Number.isInteger(o.episodes) && o.episodes! >= 1)) bad('episodes must be a positive integer');
  if (!o.result || typeof o.result !== 'object' || Array.isArray(o.result)) bad('result must be an object');
  for (const [k, v] of Object.entries(o.result!)) {
    if (typeof v === 'number' ? !Number.isFinite(v) : v !== null && typeof v !== 'string') bad(`result.${k} is ${String(v)}: a finite number, a string ('never') or null`);
  }
  return o as LedgerEntry;
}

/** The ledger file: read whole, appended one line at a time, never rewritten. */
export class Ledger {
  constructor(readonly path: string = LEDGER_PATH) {}

  /** Every entry, in the order they were made; throws naming the line of one that does not parse. */
  entries(): LedgerEntry[] {
    if (!existsSync(this.path)) return [];
    const text = readFileSync(this.path, 'utf8');
    return text.split('\n').flatMap((line, i) => {
      if (!line.trim()) return [];
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch (e) {
        throw new Error(`${this.path}:${i + 1}: not JSON (${(e as Error).message})`, { cause: e });
      }
      return [checkEntry(parsed, `${this.path}:${i + 1}`)];
    });
  }

  /** The earlier evaluations of this cell under this computation key. */
  find(cell: LedgerCell): LedgerEntry[] {
    return this.entries().filter((e) => sameCell(e, cell));
  }

  /** Appends one entry; throws where the file does not end in a newline (edited by hand: a torn or merged line). */
  append(entry: LedgerEntry): void {
    checkEntry(entry, 'ledger append');
    if (existsSync(this.path)) {
      const text = readFileSync(this.path, 'utf8');
      if (text.length > 0 && !text.endsWith('\n')) throw new Error(`${this.path}: the last line does not end in a newline; the ledger is append-only: repair the line by hand, then run again`);
    } else {
      mkdirSync(dirname(this.path), { recursive: true });
    }
    appendFileSync(this.path, JSON.stringify(entry) + '\n');
  }
}
