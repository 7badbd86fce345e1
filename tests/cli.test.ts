// Tiny-budget smoke runs of every CLI verb, through the real entry point.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnStandIn } from './helpers/standin-process.js';

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
    const h = wmrl('drive', '--help');
    expect(h.status).toBe(0);
    expect(h.stdout).toMatch(/^usage: wmrl drive --robot YAML\|sim:TASK\[:PROFILE\] .*--fast\]/);
        const c = wmrl('frobnicate');
    expect(c.status).toBe(2);
    expect(c.stderr).toMatch(/unknown command 'frobnicate'/);
  });
});

describe('wmrl drive and episodes', () => {
  const db = join(dir, 'episodes.db');

  it('drive records expert episodes on the in-process sim; episodes lists, exports to MCAP and imports them', () => {
    const d = wmrl('drive', '--robot', 'sim:reach', '--episodes', '2', '--fast', '--store', db);
    expect(d.status, d.stderr).toBe(0);
    expect(d.stdout).toMatch(/2 episode\(s\) recorded .*; success 2\/2/);
    const l = wmrl('episodes', 'list', '--store', db);
    const lines = l.stdout.trim().split('\n');
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/complete\s+\d+ steps\s+success\s+sim-reach-nominal \(nominal\)\s+policy expert/);
    const id = lines[0]!.split(/\s+/)[0]!;
    const out = join(dir, 'e.mcap');
    expect(wmrl('episodes', 'export', id, out, '--store', db, '--lz4').status).toBe(0);
    const db2 = join(dir, 'imported.db');
    const i = wmrl('episodes', 'import', out, '--store', db2);
    expect(i.status, i.stderr).toBe(0);
    expect(wmrl('episodes', 'list', '--store', db2).stdout).toContain(id);
    const bad = wmrl('episodes', 'export', 'no-such-id', out, '--store', db);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/no-such-id/);
  });

  it('drive --policy demonstrator records the robust demonstrator on a gap sim robot, where the expert fails', () => {
    const gapDb = join(dir, 'gap.db');
    const successes = (policy: string) => {
      const r = wmrl('drive', '--robot', 'sim:reach:gap', '--policy', policy, '--episodes', '4', '--fast', '--store', gapDb);
      expect(r.status, r.stderr).toBe(0);
      return Number(/success (\d)\/4/.exec(r.stdout)![1]);
    };
    const demo = successes('demonstrator'), expert = successes('expert');
    expect(demo).toBeGreaterThanOrEqual(3);
    expect(demo).toBeGreaterThan(expert);
    expect(wmrl('episodes', 'list', '--store', gapDb).stdout).toMatch(/sim-reach-gap \(gap\)\s+policy demonstrator/);
  });

  it('drive runs a robot YAML over rosbridge against the stand-in process, through the safety layer', async () => {
    const standIn = await spawnStandIn(['--task', 'reach']);
    try {
      const yaml = readFileSync('launch/robots/sim-reach.yaml', 'utf8').replace('ws://127.0.0.1:9090', `ws://127.0.0.1:${standIn.port}`);
      const robotFile = join(dir, 'robot.yaml');
      writeFileSync(robotFile, yaml);
      const r = spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', 'drive', '--robot', robotFile, '--policy', 'hold', '--steps', '25', '--store', db], { encoding: 'utf8', timeout: 60_000 });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/1 episode\(s\) recorded/);
      const l = wmrl('episodes', 'list', '--store', db).stdout;
      expect(l).toMatch(/complete\s+25 steps\s+sim-reach\s+\(real\)\s+policy hold/);
      const e = wmrl('drive', '--robot', robotFile, '--policy', 'expert', '--store', db);
      expect(e.status).toBe(1);
      expect(e.stderr).toMatch(/needs --robot sim:TASK/);
      const d = wmrl('drive', '--robot', robotFile, '--policy', 'demonstrator', '--store', db);
      expect(d.status).toBe(1);
      expect(d.stderr).toMatch(/robust demonstrator; it needs --robot sim:TASK/);
    } finally {
      await standIn.stop();
    }
  });
});
