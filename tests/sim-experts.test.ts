// Scripted experts: >= 95% success on `nominal` over 100 seeded episodes; clearly lower on `gap`.
// (The bench `npm run bench -- sim` reports the gap rates over 100 episodes too.)
import { describe, expect, it } from 'vitest';
import { makeEnv } from '../sim/registry.js';
import { expertSuccess } from '../sim/rollout.js';

describe('scripted experts', () => {
  for (const task of ['reach', 'push', 'pick']) {
    it(`${task}: >= 95% on nominal over 100 episodes, at least 40 points lower on gap (30 episodes)`, async () => {
      const nominal = await makeEnv({ task, profile: 'nominal' });
      const gap = await makeEnv({ task, profile: 'gap' });
      try {
        const sNom = expertSuccess(nominal, 100);
        const sGap = expertSuccess(gap, 30);
        expect(sNom).toBeGreaterThanOrEqual(0.95);
        expect(sGap).toBeLessThanOrEqual(sNom - 0.4);
      } finally {
        nominal.dispose();
        gap.dispose();
      }
    });
  }
});
