// `npm run bench -- <name> --check`: exits 0 printing the committed RESULT line only where the committed report's
// run key is this code's, else exits 1 naming both keys and the command that re-runs it; the protocol's flags are
// refused for a benchmark that is not under the protocol.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { protocol } from '../bench/autoresearch.js';
import { protocol as embodied } from '../bench/embodied.js';
import { protocol as vla } from '../bench/vla.js';
import { checkCommitted } from '../bench/lib/protocol.js';

const bench = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { encoding: 'utf8', timeout: 60_000 });
const full = { quick: false, all: false, progress: () => {} };

describe('bench --check', () => {
  it("answers for autoresearch's committed report as checkCommitted does with this code's run key", () => {
    const key = protocol.keys(full).report;
    const expected = checkCommitted('autoresearch', key, 'npm run bench -- autoresearch');
    const r = bench('autoresearch', '--check');
    if (expected.ok) {
      expect(r.status).toBe(0);
      expect(r.stdout.trim()).toBe(expected.resultLine);
      expect(readFileSync('bench/results/autoresearch.md', 'utf8')).toContain(`Report key: \`${key}\``);
    } else {
      expect(r.status).toBe(1);
      expect(r.stderr).toContain('bench autoresearch --check: refused');
      expect(r.stderr).toContain(`this code's report key is ${key}`);
      expect(r.stderr).toContain('re-run `npm run bench -- autoresearch`');
    }
  }, 60_000);

  it("answers for embodied's committed reports, one task or both, as checkCommitted does", () => {
    for (const [args, report, opts] of [[[], 'embodied', full], [['--all'], 'embodied-all', { ...full, all: true }]] as const) {
      const key = embodied.keys(opts).report;
      const expected = checkCommitted(report, key, `npm run bench -- embodied${args.length ? ' --all' : ''}`);
      const r = bench('embodied', ...args, '--check');
      expect(r.status).toBe(expected.ok ? 0 : 1);
      if (expected.ok) expect(r.stdout.trim()).toBe(expected.resultLine);
      else expect(r.stderr).toContain(`bench embodied --check: refused: ${expected.message}`);
    }
  }, 60_000);

  it("answers for vla's committed reports, both tasks or one, as checkCommitted does", () => {
    for (const [args, report, opts] of [[[], 'vla', full], [['--task', 'reach'], 'vla-reach', { ...full, task: 'reach' }]] as const) {
      const key = vla.keys(opts).report;
      const expected = checkCommitted(report, key, `npm run bench -- vla${args.length ? ' --task reach' : ''}`);
      const r = bench('vla', ...args, '--check');
      expect(r.status).toBe(expected.ok ? 0 : 1);
      if (expected.ok) expect(r.stdout.trim()).toBe(expected.resultLine);
      else expect(r.stderr).toContain(`bench vla --check: refused: ${expected.message}`);
    }
  }, 60_000);

  it('gives the quick, validation and test runs different keys of both kinds', () => {
    const runs = [protocol.keys(full), protocol.keys({ ...full, split: 'validation' }), protocol.keys({ ...full, quick: true })];
    expect(new Set(runs.map((k) => k.report)).size).toBe(3);
    expect(new Set(runs.map((k) => k.compute)).size).toBe(3);
    expect(protocol.keys({ ...full, split: 'test' })).toEqual(protocol.keys(full));
  });

  it("refuses the protocol's flags for a benchmark not under it, and bad combinations", () => {
    const r = bench('wmrl-core', '--split', 'validation');
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("benchmark 'wmrl-core' is not under the evidence protocol");
    expect(r.stderr).toContain('--split is only for one that is');
    const badSplit = bench('autoresearch', '--split', 'train');
    expect(badSplit.status).toBe(2);
    expect(badSplit.stderr).toContain('--split needs validation or test, got train');
    const quickCheck = bench('autoresearch', '--check', '--quick');
    expect(quickCheck.status).toBe(2);
    expect(quickCheck.stderr).toContain('not with --quick');
  }, 60_000);
});
