// bench embodied's calibration cache (bench/cells/embodied/calibration-cache.ts): an entry one memo sets is read back
// by a fresh memo (another process) bit for bit; a key nobody set reads nothing; a cached file that does not load is
// refused naming the folder to delete; an entry already on disk is not written again.
import { readdirSync, rmSync, statSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { DiskCalibrationMemo, calibrationDir } from '../bench/cells/embodied/calibration-cache.js';
import type { Calibration } from '../wmrl/calibration.js';
import { NOMINAL } from '../sim/profiles.js';

const root = mkdtempSync(join(tmpdir(), 'embodied-calibration-'));
const before = process.env.EMBODIED_SETUP_CACHE;
process.env.EMBODIED_SETUP_CACHE = root;
afterAll(() => {
  if (before === undefined) delete process.env.EMBODIED_SETUP_CACHE;
  else process.env.EMBODIED_SETUP_CACHE = before;
  rmSync(root, { recursive: true, force: true });
});

const calibration: Calibration = { delay: 3, scales: { mass_scale: 1.81, friction_scale: 0.8 }, profile: { ...NOMINAL, name: 'identified', action_latency_steps: 3 }, robotEpisodes: 16, demoSuccess: Number.NaN, cloneLoss: 0.125, roundSuccess: [0.5, 0.25], round: 0 };
const entry = () => ({ calibration, policy: [Float32Array.from([1.5, -2, Math.PI]), Float32Array.from({ length: 300 }, (_, i) => Math.sin(i))], context: Float32Array.from([0.1, -0.2, 0.3, 0.4]) });
const bytes = (x: Float32Array) => Buffer.from(x.buffer, x.byteOffset, x.byteLength);

it('reads back in a fresh memo what another set, bit for bit; a key nobody set reads nothing', () => {
  const key = 'a'.repeat(64);
  const e = entry();
  new DiskCalibrationMemo().set(key, e);
  const got = new DiskCalibrationMemo().get(key)!;
  expect(got).toBeDefined();
  expect(got.calibration).toEqual(calibration);
  expect(got.policy).toHaveLength(2);
  got.policy.forEach((p, i) => expect(bytes(p).equals(bytes(e.policy[i]!))).toBe(true));
  expect(bytes(got.context).equals(bytes(e.context))).toBe(true);
  expect(new DiskCalibrationMemo().get('b'.repeat(64))).toBeUndefined();
});

it('writes an entry once, and refuses a cached file that does not load, naming the folder', () => {
  const key = 'c'.repeat(64);
  new DiskCalibrationMemo().set(key, entry());
  const dir = calibrationDir(key);
  const stamp = statSync(join(dir, 'params.safetensors')).mtimeMs;
  new DiskCalibrationMemo().set(key, { ...entry(), context: Float32Array.from([9]) });
  expect(statSync(join(dir, 'params.safetensors')).mtimeMs).toBe(stamp);
  expect(readdirSync(join(root, 'calibration')).filter((d) => d.includes('.part-'))).toEqual([]);
  writeFileSync(join(dir, 'params.safetensors'), 'not a tensor file');
  expect(() => new DiskCalibrationMemo().get(key)).toThrow(new RegExp(`delete ${dir.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
});
