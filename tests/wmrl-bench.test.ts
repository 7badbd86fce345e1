// The wmrl-core benchmark measures what it claims: each replicate of an estimator measurement draws
// its own anchors (paired configurations share them), and the report's result phrases follow the
// numbers they are built from.
import { describe, expect, it } from 'vitest';
import { change, replicateState, signed, than, verdict } from '../bench/wmrl-core.js';
import type { Score } from '../wmrl/advantages.js';
import { Corrector, correctorConfig, type WorldModelScorer } from '../wmrl/corrector.js';
import { Rng } from '../wmrl/rng.js';
import type { TrustedScorer } from '../wmrl/trusted.js';

interface R { r: number }
const wm: WorldModelScorer<R> = { score: async (groups) => groups.map((g) => ({ scores: g.map((x) => x.r ** 2) })) };
const real: TrustedScorer<R> = { score: async (rs): Promise<Score[]> => rs.map((x) => x.r) };
const groupsOf = (rng: Rng) => Array.from({ length: 32 }, () => Array.from({ length: 8 }, () => ({ r: rng.next() })));

describe('wmrl-core bench', () => {
  it('draws the anchors afresh in every replicate of a measurement, and the same ones for the same replicate', async () => {
    const cfg = correctorConfig({ debias: { minPairs: 64 }, seed: 4 });
    const trained = new Corrector<R>(cfg, wm, real);
    const rng = new Rng(8);
    for (let t = 0; t < 20; t++) await trained.step(groupsOf(rng));
    const state = trained.state();
    const groups = groupsOf(new Rng(99));
    const anchorsOf = async (r: number, config = cfg) => {
      const c = new Corrector<R>(config, wm, real);
      c.restore(replicateState(state, 1, 0, r));
      const res = await c.step(groups);
      return res.source.flatMap((s, g) => (s === 'real' ? [g] : [])).join(',');
    };
    const picks = new Set<string>();
    for (let r = 0; r < 12; r++) picks.add(await anchorsOf(r));
    // Restoring the saved scheduler state as it was would pick one set for all 12.
    expect(picks.size).toBeGreaterThan(8);
    // Paired: another configuration measured with the same replicate index picks the same anchors.
    expect(await anchorsOf(3, correctorConfig({ denoise: false }, cfg))).toBe(await anchorsOf(3));
  });

  it("builds the report's result phrases from the numbers: direction, size and whether a difference is resolved", () => {
    expect(change({ reduction: 0.123, se: 0.01 })).toBe('lowers it by 12.3% ± 1.0%');
    expect(change({ reduction: -0.05, se: 0.02 })).toBe('raises it by 5.0% ± 2.0%');
    expect(verdict({ diff: 0.011, se: 0.003 })).toMatch(/^more than two/);
    expect(verdict({ diff: -0.011, se: 0.003 })).toMatch(/^more than two/);
    expect(verdict({ diff: 0.005, se: 0.003 })).toMatch(/not resolved/);
    expect(than(0.74, 0.72, 'above', 'below')).toBe('above');
    expect(than(0.70, 0.72, 'above', 'below')).toBe('below');
    expect(signed(-0.0123)).toBe('−0.012');
  });
});
