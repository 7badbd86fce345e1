// package.json's `bin` entry (`npx wmrl`, the launch file) runs the CLI with plain node, no tsx on the command line.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string; bin: Record<string, string> };
const run = (...args: string[]) => spawnSync(process.execPath, [pkg.bin.wmrl!, ...args], { encoding: 'utf8', timeout: 60_000 });

describe('the wmrl bin entry', () => {
  it('is a file that plain node runs', () => {
    expect(pkg.bin.wmrl).toBe('bin/wmrl.mjs');
    expect(readFileSync(pkg.bin.wmrl!, 'utf8')).toMatch(/^#!\/usr\/bin\/env node\n/);
  });

  it('--version and -V print package.json\'s version', () => {
    for (const flag of ['--version', '-V']) {
      const r = run(flag);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout.trim()).toBe(pkg.version);
    }
  });

  it('--help lists the verbs', () => {
    const r = run('--help');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^usage: wmrl /);
    for (const verb of ['serve', 'drive', 'episodes', 'export', 'deploy', 'bc', 'train', 'bench', 'demo', 'inspect']) expect(r.stdout).toMatch(new RegExp(`^  ${verb} `, 'm'));
    expect(r.stdout).toMatch(/-V, --version/);
  });
});
