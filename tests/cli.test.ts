// Tiny-budget smoke runs of every CLI verb, through the real entry point.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 120_000 });

describe('wmrl CLI', () => {
  it('demo trains for a few steps, exports an ONNX model and weights; inspect reads it back', () => {
    const r = wmrl('demo', '--steps', '5', '--out', dir);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/held-out MSE of the ensemble mean: \S+/);
    expect(existsSync(join(dir, 'world_model.onnx'))).toBe(true);
    expect(existsSync(join(dir, 'world_model.safetensors'))).toBe(true);
    const i = wmrl('inspect', join(dir, 'world_model.onnx'));
    expect(i.status, i.stderr).toBe(0);
    expect(i.stdout).toMatch(/input state_action: float32 \[batch, 3\]/);
    expect(i.stdout).toMatch(/output delta: float32 \[5, batch, 2\]/);
    expect(i.stdout).toMatch(/metadata kind = ensemble_dynamics/);
  });

  it('bad input gives a clear error and a non-zero exit', () => {
    const a = wmrl('demo', '--steps', 'many', '--out', dir);
    expect(a.status).toBe(1);
    expect(a.stderr).toMatch(/--steps must be a positive integer, got 'many'/);
    const b = wmrl('inspect', join(dir, 'missing.onnx'));
    expect(b.status).toBe(1);
    expect(b.stderr).toMatch(/ENOENT.*missing\.onnx/);
    const c = wmrl('frobnicate');
    expect(c.status).toBe(2);
    expect(c.stderr).toMatch(/unknown command 'frobnicate'/);
  });
});
