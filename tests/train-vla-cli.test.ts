// `wmrl train --policy vla` at a tiny budget: the VLA recipe runs from the command line and leaves an artifact that
// `wmrl drive` runs on the robot it was trained for; bad flags are refused naming the flag.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { drive } from '../bin/commands/drive.js';
import { trainVla } from '../bin/commands/train-vla.js';
import { EpisodeStore } from '../episodes/store/store.js';

const dir = mkdtempSync(join(tmpdir(), 'train-vla-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('wmrl train --policy vla', () => {
  it('refuses a robot the recipe does not train for, and bad numbers, naming the flag', async () => {
    await expect(trainVla(['--policy', 'vla', '--robot', 'sim:reach', '--out', dir])).rejects.toThrow(/--robot must be sim:reach:gap or sim:push:gap, got 'sim:reach'/);
    await expect(trainVla(['--policy', 'vla', '--robot', 'sim:lift:gap', '--out', dir])).rejects.toThrow(/--robot must be/);
    await expect(trainVla(['--policy', 'vla', '--updates', 'x', '--out', dir])).rejects.toThrow(/--updates must be a whole number, got 'x'/);
    await expect(trainVla(['--policy', 'vla', '--kl-coef=-1', '--out', dir])).rejects.toThrow(/--kl-coef must be a number >= 0/);
    await expect(trainVla(['--policy', 'vla', '--updates', '0', '--out', dir])).rejects.toThrow(/updates must be >= 1/);
    await expect(trainVla(['--policy', 'vla'])).rejects.toThrow(/needs --out DIR/);
  });

  it('trains the VLA and exports an artifact drive runs on the gap robot', async () => {
    const out = join(dir, 'run');
    await trainVla(['--policy', 'vla', '--robot', 'sim:reach:gap', '--quick', '--updates', '1', '--out', out]);
    const policy = join(out, 'policy.onnx');
    expect(existsSync(policy)).toBe(true);
    const store = join(dir, 'drive.db');
    await drive({ robot: 'sim:reach:gap', policy, episodes: 1, steps: 5, store, fast: true, commandHistory: 3 });
    const s = EpisodeStore.open(store);
    try {
      expect(s.list().length).toBe(1);
    } finally {
      s.close();
    }
  }, 300_000);
});
