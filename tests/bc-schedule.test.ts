// Behaviour cloning's step schedule (policies/bc.ts BcOptions.schedule): constant by default; 'cosine' decays the
// Adam step from optimizer.lr toward 0 along a half cosine over the fit's steps; anything else is refused.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Trainer } from '../nn/index.js';
import { behaviourClone } from '../policies/bc.js';
import { GaussianPolicy } from '../policies/gaussian.js';

const demos = (M: number, D: number, A: number) => ({ obs: Float32Array.from({ length: M * D }, (_, i) => Math.sin(i)), action: Float32Array.from({ length: M * A }, (_, i) => 0.5 * Math.cos(i)) });

describe('behaviour cloning\'s step schedule', () => {
  afterEach(() => vi.restoreAllMocks());

  it("'cosine' sets the step before every batch, from lr down a half cosine; constant sets none", async () => {
    const set = vi.spyOn(Trainer.prototype, 'setLearningRate');
    const policy = new GaussianPolicy({ obsDim: 3, actDim: 2, hidden: [8], seed: 1 });
    // 8 rows in batches of 4, 2 epochs: 4 steps.
    await behaviourClone(policy, demos(8, 3, 2), { epochs: 2, batchSize: 4, schedule: 'cosine', optimizer: { lr: 0.01 } });
    const lrs = set.mock.calls.map((c) => c[0]);
    expect(lrs).toHaveLength(4);
    [1, (1 + Math.cos(Math.PI / 4)) / 2, 0.5, (1 + Math.cos((3 * Math.PI) / 4)) / 2].forEach((f, i) => expect(lrs[i]).toBeCloseTo(0.01 * f, 12));
    set.mockClear();
    await behaviourClone(policy, demos(8, 3, 2), { epochs: 2, batchSize: 4, optimizer: { lr: 0.01 } });
    expect(set).not.toHaveBeenCalled();
  });

  it('the two schedules fit differently from the same start, and an unknown one is refused by name', async () => {
    const fit = async (schedule: 'constant' | 'cosine') => {
      const p = new GaussianPolicy({ obsDim: 3, actDim: 2, hidden: [8], seed: 1 });
      await behaviourClone(p, demos(16, 3, 2), { epochs: 3, batchSize: 4, schedule, optimizer: { lr: 0.01 } });
      return p.paramNames().map((n) => Array.from(p.store.get(n).data));
    };
    expect(await fit('cosine')).not.toEqual(await fit('constant'));
    const p = new GaussianPolicy({ obsDim: 3, actDim: 2, hidden: [8], seed: 1 });
    await expect(behaviourClone(p, demos(8, 3, 2), { schedule: 'step' as 'cosine' })).rejects.toThrow(/schedule must be 'constant' or 'cosine', got step/);
  });
});
