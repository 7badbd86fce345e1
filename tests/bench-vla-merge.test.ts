// bench vla runs one task's RL rows in two processes (WMRL then sparse only; dense only), each building the same
// setup: `merge` takes the rows of one into the other's result, and refuses two results whose setups differ.
import { describe, expect, it } from 'vitest';
import { merge, type TaskResult } from '../bench/vla.js';

const ev = (success: number) => ({ success, return: success, episodes: 100 });
/** A task result with the given rows, every row's figures derived from `k` so the test can tell whose they are. */
function result(rows: readonly string[], k: number, setup = { bc: 0.23, wmValLoss: -1.5, latent: 0.01 }): TaskResult {
  const per = <T>(f: (row: string) => T) => Object.fromEntries(['bc', ...rows].map((row) => [row, f(row)]));
  return {
    eval: per((row) => (row === 'bc' ? { heldOutStates: ev(setup.bc), heldOutCombinations: ev(setup.bc / 2) } : { heldOutStates: ev(k), heldOutCombinations: ev(k / 2) })),
    curve: Object.fromEntries(rows.map((row) => [row, [{ update: 150, success: k }]])),
    robotEpisodes: per(() => 10 * k), robotHours: per(() => k), computeSeconds: per(() => 100 * k), robotSuccesses: per(() => 3 * k),
    wmValLoss: setup.wmValLoss, latent: { valMse: setup.latent }, agreement: { nominal: k, identified: k, faceOnRobot: k, repeatability: k },
  } as unknown as TaskResult;
}

describe('bench vla: merging one task\'s rows from two processes', () => {
  it('takes the named rows from the part and keeps everything else of the first', () => {
    const a = result(['wmrl', 'sparse_only'], 0.3), b = result(['dense_only'], 0.2);
    const m = merge(a, b, ['dense_only']);
    expect(m.eval.dense_only.heldOutStates.success).toBe(0.2);
    expect(m.eval.wmrl.heldOutStates.success).toBe(0.3);
    expect(m.curve.dense_only).toEqual([{ update: 150, success: 0.2 }]);
    expect(m.robotEpisodes.dense_only).toBe(2);
    expect(m.robotSuccesses.dense_only).toBeCloseTo(0.6);
    expect(m.computeSeconds.dense_only).toBe(20);
    expect(m.agreement.identified).toBe(0.3);
    // the inputs are not changed
    expect(a.eval.dense_only).toBeUndefined();
  });

  it('refuses parts whose setups differ, naming what differs', () => {
    const a = result(['wmrl', 'sparse_only'], 0.3);
    expect(() => merge(a, result(['dense_only'], 0.2, { bc: 0.24, wmValLoss: -1.5, latent: 0.01 }), ['dense_only'])).toThrow(/different setups: the clone's held-out-state success 0.23 in one, 0.24/);
    expect(() => merge(a, result(['dense_only'], 0.2, { bc: 0.23, wmValLoss: -1.4, latent: 0.01 }), ['dense_only'])).toThrow(/world model's validation loss/);
    expect(() => merge(a, result(['dense_only'], 0.2, { bc: 0.23, wmValLoss: -1.5, latent: 0.02 }), ['dense_only'])).toThrow(/latent face's held-out error/);
  });

  it('refuses a part without the row it should hold', () => {
    expect(() => merge(result(['wmrl', 'sparse_only'], 0.3), result(['wmrl'], 0.2), ['dense_only'])).toThrow(/the process for dense_only returned no result for it/);
  });
});
