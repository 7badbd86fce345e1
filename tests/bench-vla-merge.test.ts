// bench vla runs one task's RL rows in two processes (WMRL then sparse only; dense only), each building the same
// setup: `merge` takes the rows of one into the other's result, what only WMRL's run measures from whichever ran it,
// and refuses two results whose setups differ (`sameSetup`, which the parent also runs as soon as both have a setup).
import { describe, expect, it } from 'vitest';
import { merge, sameSetup, setupPrint, type SetupPrint, type TaskResult } from '../bench/vla.js';

const ev = (success: number) => ({ success, return: success, episodes: 100 });
const SETUP: SetupPrint = { bcStates: 0.23, bcCombinations: 0.14, bcLoss: 0.5, wmValLoss: -1.5, latentValMse: 0.01 };

/**
 * A task result as a process of `rows` returns it, every row's figures derived from `k` so the test can tell whose
 * they are; what only WMRL's run measures is filled where it ran and left as runTask starts it elsewhere.
 */
function result(rows: readonly string[], k: number, setup: SetupPrint = SETUP): TaskResult {
  const per = <T>(f: (row: string) => T) => Object.fromEntries(['bc', ...rows].map((row) => [row, f(row)]));
  const ranWmrl = rows.includes('wmrl');
  return {
    eval: per((row) => (row === 'bc' ? { heldOutStates: ev(setup.bcStates), heldOutCombinations: ev(setup.bcCombinations) } : { heldOutStates: ev(k), heldOutCombinations: ev(k / 2) })),
    curve: Object.fromEntries(rows.map((row) => [row, [{ update: 150, success: k }]])),
    robotEpisodes: per(() => 10 * k), robotHours: per(() => k), computeSeconds: per(() => 100 * k), robotSuccesses: per(() => 3 * k),
    bcLoss: setup.bcLoss, wmValLoss: setup.wmValLoss, latent: { valMse: setup.latentValMse },
    anchorGroups: ranWmrl ? 300 : 0, biasReduction: ranWmrl ? 0.4 : null, anchorWeight: ranWmrl ? 2.5 : 1,
    guard: ranWmrl ? { updatesFlagged: 7, maxFlagged: 2 } : { updatesFlagged: 0, maxFlagged: 0 },
    identified: ranWmrl ? { context: [0.5, -0.7], delay: 3 } : { context: [], delay: 0 },
    agreement: ranWmrl ? { nominal: 0.2, identified: 0.3, faceOnRobot: -0.1, repeatability: 0.7, firstSteps: { steps: [25, 50], nominal: [0.8, 0.5], identified: [0.9, 0.6] } } : { nominal: NaN, identified: NaN, faceOnRobot: NaN, repeatability: NaN, firstSteps: { steps: [], nominal: [], identified: [] } },
    latency: ranWmrl ? [1, 2, 3] : [4, 5],
  } as unknown as TaskResult;
}

const wmrlOf = (m: TaskResult) => ({ anchorGroups: m.anchorGroups, biasReduction: m.biasReduction, anchorWeight: m.anchorWeight, guard: m.guard, identified: m.identified, agreement: m.agreement, latency: m.latency });

describe('bench vla: merging one task\'s rows from two processes', () => {
  it('takes the named rows from the part and what only WMRL measures from the process that ran it, in either order', () => {
    const a = result(['wmrl', 'sparse_only'], 0.3), b = result(['dense_only'], 0.2);
    const before = JSON.stringify(a);
    const m = merge(a, b, ['dense_only']);
    expect(m.eval.dense_only.heldOutStates.success).toBe(0.2);
    expect(m.eval.wmrl.heldOutStates.success).toBe(0.3);
    expect(m.eval.sparse_only.heldOutStates.success).toBe(0.3);
    expect(m.curve.dense_only).toEqual([{ update: 150, success: 0.2 }]);
    expect(m.robotEpisodes.dense_only).toBe(2);
    expect(m.robotSuccesses.dense_only).toBeCloseTo(0.6);
    expect(m.computeSeconds.dense_only).toBe(20);
    expect(wmrlOf(m)).toEqual(wmrlOf(a));
    // the other order: the WMRL process's figures still win
    const r = merge(b, a, ['wmrl', 'sparse_only']);
    expect(wmrlOf(r)).toEqual(wmrlOf(a));
    expect(r.eval.dense_only.heldOutStates.success).toBe(0.2);
    expect(r.eval.wmrl.heldOutStates.success).toBe(0.3);
    expect(r.curve.sparse_only).toEqual([{ update: 150, success: 0.3 }]);
    // the inputs are not changed
    expect(JSON.stringify(a)).toBe(before);
    expect(b.eval.wmrl).toBeUndefined();
  });

  it('refuses parts whose setups differ, naming what differs', () => {
    const a = result(['wmrl', 'sparse_only'], 0.3);
    const differing: Array<[Partial<SetupPrint>, RegExp]> = [
      [{ bcStates: 0.24 }, /different setups: the clone's held-out-state success 0.23 in one, 0.24 in the other/],
      [{ bcCombinations: 0.15 }, /the clone's held-out-combination success/],
      [{ bcLoss: 0.51 }, /the clone's final loss/],
      [{ wmValLoss: -1.4 }, /the world model's validation loss/],
      [{ latentValMse: 0.02 }, /the latent face's held-out error/],
    ];
    for (const [change, message] of differing) expect(() => merge(a, result(['dense_only'], 0.2, { ...SETUP, ...change }), ['dense_only'])).toThrow(message);
  });

  it('sameSetup: NaN agrees with NaN only', () => {
    expect(() => sameSetup({ ...SETUP, wmValLoss: NaN }, { ...SETUP, wmValLoss: NaN })).not.toThrow();
    expect(() => sameSetup({ ...SETUP, wmValLoss: NaN }, SETUP)).toThrow(/validation loss NaN in one, -1.5/);
    expect(setupPrint(result(['dense_only'], 0.2))).toEqual(SETUP);
  });

  it('refuses a part without the row it should hold', () => {
    expect(() => merge(result(['wmrl', 'sparse_only'], 0.3), result(['wmrl'], 0.2), ['dense_only'])).toThrow(/the process for dense_only returned no result for it/);
  });
});
