// wmrl/train_rlpd.ts: the soft actor-critic learns a one-step bandit from logged data alone (its critics the reward's
// shape, its actor the best action), and on the sim robot under the gap profile RLPD spends standard GRPO's robot
// episodes in its order, charges the clock, takes `utd` critic updates per robot step, and moves the cloned policy.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Rng } from '../nn/index.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import type { RobotEpisode } from '../wmrl/embodied.js';
import { DEFAULT_PRETRAIN, SimPrompts, pretrain, simRobotTarget } from '../wmrl/sim-setup.js';
import { DEFAULT_RLPD, SoftActorCritic, trainRlpd, type Batch } from '../wmrl/train_rlpd.js';

const dir = mkdtempSync(join(tmpdir(), 'train-rlpd-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const loop = { updates: 1, prompts: 2, groupSize: 1, evalEvery: 1, promptSeed0: 1_000_000, seed: 3 };

describe('RLPD', () => {
  it('learns a one-step bandit from logged actions: the actor moves to the best action', async () => {
    // One state, reward −(a + 0.5)², every transition terminal: Q(s, a) is the reward itself.
    const policy = new GaussianPolicy({ obsDim: 1, actDim: 1, hidden: [8], initLogStd: -1, seed: 0 });
    const sac = await SoftActorCritic.create(policy, { ...loop, ...DEFAULT_RLPD, critics: 2, criticHidden: [32, 32], lr: 3e-3 }, [-1], [1]);
    const rng = new Rng(0), N = 64;
    const mu = async () => (await policy.act(Float32Array.of(0), Float32Array.of(0))).mean[0]!;
    try {
      const start = await mu();
      expect(start).toBeGreaterThan(-0.1);
      for (let i = 0; i < 400; i++) {
        const action = Float32Array.from({ length: N }, () => rng.uniform(-1, 1));
        const b: Batch = { obs: new Float32Array(N), action, reward: action.map((a) => -((a + 0.5) ** 2)), nextObs: new Float32Array(N), notTerminal: new Float32Array(N) };
        await sac.criticStep(b, Float32Array.from({ length: N }, () => rng.normal()), new Float32Array(2));
        await sac.actorStep(b.obs, Float32Array.from({ length: N }, () => rng.normal()));
      }
      sac.syncPolicy();
      expect(Math.abs((await mu()) + 0.5)).toBeLessThan(0.15);
    } finally {
      await sac.release();
      await policy.release();
    }
  }, 60_000);

  it("spends standard GRPO's robot episodes, takes utd critic updates per robot step and moves the cloned policy", async () => {
    const pre = await pretrain({ ...DEFAULT_PRETRAIN, task: 'reach', bcEpisodes: 4, bcEpochs: 2, daggerRounds: 1, daggerEpisodes: 2, daggerEpochs: 2, wmEpisodes: 6, wmEpochs: 2, wmHidden: [32, 32], wmMembers: 3, policyHidden: [16] });
    const before = pre.policy.paramNames().map((n) => Float32Array.from(pre.policy.store.get(n).data));
    // The demonstrations it was cloned from, every round's steps, as transitions.
    const M = pre.demos.reward.length;
    expect(M).toBeGreaterThan(100);
    expect(pre.demos.obs.length).toBe(M * pre.policy.obsDim);
    expect(pre.demos.executed.length).toBe(M * pre.policy.actDim);
    expect(pre.demos.terminal.some((t) => t === 1)).toBe(pre.demos.reward.some((r) => r > 0.5));
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'rlpd.db') });
    using prompts = await SimPrompts.create('reach');
    const eps: RobotEpisode[] = [];
    try {
      const d = pre.demos;
      const st = await trainRlpd({
        config: { ...loop, ...DEFAULT_RLPD, critics: 2, criticHidden: [16, 16], batch: 32, utd: 0.25, warmupSteps: 5 }, policy: pre.policy, target, prompts,
        demos: { obs: d.obs, action: d.executed, reward: d.reward, nextObs: d.nextObs, terminal: d.terminal }, hooks: { onEpisode: (ep) => eps.push(ep) },
      });
      expect(eps.map((e) => e.seed)).toEqual([1_000_000, 1_000_001]);
      expect(target.clock.episodes).toBe(2);
      expect(target.store!.list()).toHaveLength(2);
      const steps = eps.reduce((a, e) => a + e.steps, 0);
      expect(target.clock.robotSeconds).toBeCloseTo(steps / target.robot.spec.controlHz + 2 * 5, 6);
      expect((st.extra as { criticSteps: number }).criticSteps).toBe(Math.floor(0.25 * eps[0]!.steps) + Math.floor(0.25 * eps[1]!.steps + (0.25 * eps[0]!.steps) % 1 + 1e-9));
      expect(st.rows[0]!.robotEpisodes).toBe(2);
      expect(Number.isFinite(st.rows[0]!.criticLoss)).toBe(true);
      expect(pre.policy.paramNames().some((n, i) => pre.policy.store.get(n).data.some((v, j) => v !== before[i]![j]))).toBe(true);
      await expect(trainRlpd({ config: { ...loop, ...DEFAULT_RLPD, critics: 2, targetSubset: 3 }, policy: pre.policy, target, prompts, demos: { obs: d.obs, action: d.executed, reward: d.reward, nextObs: d.nextObs, terminal: d.terminal } })).rejects.toThrow(/targetSubset must be a whole number in 1..critics \(2\), got 3/);
    } finally {
      await target.close();
    }
  }, 180_000);
});
