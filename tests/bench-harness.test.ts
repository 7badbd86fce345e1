// The benchmark harness's options: `--seed N` reaches only a benchmark that says what its seed varies, and a bad
// value is refused before anything runs, naming the problem.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

const bench = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { encoding: 'utf8', timeout: 60_000 });

describe('bench harness', () => {
  it('refuses --seed for a benchmark without a seed, and a --seed that is not a non-negative integer', () => {
    const unseeded = bench('sim', '--quick', '--seed', '1');
    expect(unseeded.status).toBe(2);
    expect(unseeded.stderr).toContain("benchmark 'sim' takes no --seed");
    for (const bad of ['x', '-1', '1.5']) {
      const r = bench('vla', '--quick', '--seed', bad);
      expect(r.status).toBe(2);
      expect(r.stderr).toContain(`--seed needs a non-negative integer, got ${bad}`);
    }
    const missing = bench('vla', '--quick', '--seed');
    expect(missing.status).toBe(2);
    expect(missing.stderr).toContain('--seed needs a non-negative integer, got nothing');
  }, 120_000);
});
