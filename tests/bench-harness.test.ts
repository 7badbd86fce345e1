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

  it('computes a subset of cells only for a benchmark that can, of seeds and variants its split runs, never in a quick run', () => {
    const other = bench('sim', '--seeds', '1');
    expect(other.status).toBe(2);
    expect(other.stderr).toContain("benchmark 'sim' computes no subset of its cells");
    const seed = bench('embodied', '--split', 'validation', '--seeds', '1,99');
    expect(seed.status).toBe(2);
    expect(seed.stderr).toContain("--seeds 99: not among the validation split's seeds (1, 2, 3, 4, 5)");
    const quick = bench('embodied', '--quick', '--seeds', '0');
    expect(quick.status).toBe(2);
    expect(quick.stderr).toContain('--seeds and --variants cache cells for a full run: not with --quick');
    expect(bench('embodied', '--seeds', 'x').stderr).toContain('--seeds needs non-negative integers, got x');
  }, 180_000);
});
