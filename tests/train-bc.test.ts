// wmrl/train_bc.ts on the sim robot under the gap profile: every update's robot time — standard GRPO's at most — goes
// to demonstrator episodes on the robot (recorded, charged, never past the budget), and the clone, refitted on the
// pretraining's demonstrations and the robot's where it is measured, follows the demonstrator more closely.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeEnv } from '../sim/index.js';
import { DEFAULT_PRETRAIN, SimPrompts, pretrain, simRobotTarget } from '../wmrl/sim-setup.js';
import { DEFAULT_BC_MORE, trainBcMore } from '../wmrl/train_bc.js';

const dir = mkdtempSync(join(tmpdir(), 'train-bc-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('BC with more demonstrations at the same robot time', () => {
  it('spends each update on demonstrator episodes within its budget and refits the clone toward the demonstrator', async () => {
    const pre = await pretrain({ ...DEFAULT_PRETRAIN, task: 'reach', bcEpisodes: 4, bcEpochs: 2, daggerRounds: 0, wmEpisodes: 6, wmEpochs: 1, wmHidden: [32, 32], wmMembers: 2, wmRolloutEpochs: 0, policyHidden: [32] });
    expect(pre.demos.label.length).toBe((pre.demos.obs.length / pre.policy.obsDim) * pre.policy.actDim);
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'bc.db') });
    const env = await makeEnv({ task: 'reach', profile: 'nominal' });
    using prompts = await SimPrompts.create('reach');
    // The clone's distance from the demonstrator on the robot's demonstration states, before and after the run.
    const seen: Array<{ state: Float32Array; label: Float32Array }> = [];
    const demonstrator = () => {
      const d = env.demonstrator({ latencySteps: 3 });
      return { act: (o: { state: Float32Array; instruction: string }) => { const a = d.act(o); seen.push({ state: Float32Array.from(o.state), label: a.map((v) => Math.max(-1, Math.min(1, v))) }); return a; }, executed: (a: ArrayLike<number>) => d.executed(a) };
    };
    const gap = async () => {
      let s = 0;
      for (const { state, label } of seen) {
        const m = (await pre.policy.act(state, new Float32Array(label.length))).mean;
        s += m.reduce((a, v, j) => a + (v - label[j]!) ** 2, 0);
      }
      return s / seen.length;
    };
    try {
      // keepBest false: the run hands back its refit, whatever the stub evaluation measures.
      const config = { updates: 2, prompts: 2, groupSize: 2, evalEvery: 2, promptSeed0: 1_000_000, seed: 3, ...DEFAULT_BC_MORE, epochs: 30, lr: 3e-3, batchSize: 64, keepBest: false as const };
      const losses: Array<number | null> = [];
      const st = await trainBcMore({ config, policy: pre.policy, target, prompts, demos: { obs: pre.demos.obs, action: pre.demos.label }, demonstrator, evaluate: async () => ({ success: 0, meanReturn: 0, episodes: 1 }), hooks: { onUpdate: (r) => losses.push(r.loss) } });
      const full = target.maxSteps / target.robot.spec.controlHz + 5, budget = config.prompts * config.groupSize * full;
      st.rows.forEach((r, u) => {
        // Within the budget standard GRPO's updates have had, short of it by less than one full episode.
        expect(r.robotSeconds).toBeLessThanOrEqual((u + 1) * budget + 1e-6);
        expect(r.robotSeconds).toBeGreaterThan((u + 1) * budget - full);
      });
      const episodes = st.rows.at(-1)!.robotEpisodes;
      expect(episodes).toBeGreaterThanOrEqual(2 * config.prompts * config.groupSize);
      expect(target.store!.list()).toHaveLength(episodes);
      const steps = target.store!.list().reduce((a, e) => a + e.steps, 0);
      expect(seen).toHaveLength(steps);
      expect(target.clock.robotSeconds).toBeCloseTo(steps / target.robot.spec.controlHz + episodes * 5, 6);
      // Refitted only where measured: no loss before the first evaluation.
      expect(losses[0]).toBeNull();
      expect(Number.isFinite(losses[1])).toBe(true);
      expect(st.rows[1]!.evalSuccess).toBe(0);
      const after = await gap();
      // The pretraining's clone, restored, is further from the demonstrator on the robot's states than the refit.
      const refit = pre.policy.paramNames().map((n) => Float32Array.from(pre.policy.store.get(n).data));
      const clone = await pretrain({ ...DEFAULT_PRETRAIN, task: 'reach', bcEpisodes: 4, bcEpochs: 2, daggerRounds: 0, wmEpisodes: 6, wmEpochs: 1, wmHidden: [32, 32], wmMembers: 2, wmRolloutEpochs: 0, policyHidden: [32] });
      pre.policy.paramNames().forEach((n) => pre.policy.store.set(n, clone.policy.store.get(n).data));
      const before = await gap();
      expect(after).toBeLessThan(0.7 * before);
      expect(refit.some((p, i) => p.some((v, j) => v !== clone.policy.store.get(pre.policy.paramNames()[i]!).data[j]))).toBe(true);
    } finally {
      env.dispose();
      await target.close();
    }
  }, 180_000);
});
