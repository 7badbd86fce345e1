// `wmrl train --policy vla` at a tiny budget: the VLA recipe runs from the command line and leaves an artifact that
// `wmrl drive` runs on the robot it was trained for; flags the recipe does not take are refused, naming them.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EpisodeStore } from '../episodes/store/store.js';

const dir = mkdtempSync(join(tmpdir(), 'train-vla-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 240_000 });

describe('wmrl train --policy vla', () => {
  it('refuses a robot the recipe does not train for, and flags it does not take, naming them', () => {
    const robot = wmrl('train', '--policy', 'vla', '--robot', 'sim:reach', '--out', dir);
    expect(robot.status).not.toBe(0);
    expect(robot.stderr).toMatch(/--robot must be sim:reach:gap or sim:push:gap, got 'sim:reach'/);
    const other = wmrl('train', '--policy', 'vla', '--prompts', '4', '--algo', 'standard', '--out', dir);
    expect(other.status).not.toBe(0);
    expect(other.stderr).toMatch(/--policy vla takes .*; not --algo, --prompts|not --prompts, --algo/);
    const out = wmrl('train', '--policy', 'vla');
    expect(out.stderr).toMatch(/needs --out DIR/);
    // --proprio, the recipe's own setting (recipes/vla-options.ts): the VLA's alone, one of its schema's values
    const gaussian = wmrl('train', '--proprio', 'all', '--out', dir);
    expect(gaussian.status).not.toBe(0);
    expect(gaussian.stderr).toMatch(/--proprio: the VLA recipe's option; give --policy vla/);
    const bad = wmrl('train', '--policy', 'vla', '--proprio', 'scene', '--out', dir);
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toMatch(/'scene' is invalid\. Allowed choices are robot, all/);
    expect(wmrl('train', '--help').stdout).toMatch(/--proprio <C>[\s\S]*?default:\s+"robot"/);
  }, 120_000);

  it('trains the VLA and exports an artifact drive runs on the gap robot', () => {
    const out = join(dir, 'run');
    const r = wmrl('train', '--policy', 'vla', '--robot', 'sim:reach:gap', '--quick', '--updates', '1', '--out', out);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/\| vla \(reach\) \| 1 \| 2 \|/);
    const policy = join(out, 'policy.onnx');
    expect(existsSync(policy)).toBe(true);
    const store = join(dir, 'drive.db');
    const d = wmrl('drive', '--policy', policy, '--robot', 'sim:reach:gap', '--command-history', '3', '--episodes', '1', '--steps', '5', '--store', store, '--fast');
    expect(d.status, d.stderr).toBe(0);
    const s = EpisodeStore.open(store);
    try {
      expect(s.list()).toHaveLength(1);
    } finally {
      s.close();
    }
  }, 300_000);
});
