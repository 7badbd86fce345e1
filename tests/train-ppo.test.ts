// wmrl/train_ppo.ts at a tiny budget on the sim robot under the gap profile: PPO spends exactly standard GRPO's robot
// episodes (the same prompts, in the same order, charged to the same clock), credits each step by its GAE advantage
// from the learned critic (per step, standardized over the batch, not one advantage per rollout) and moves the policy.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG, type PgBatch } from '../policies/pg.js';
import type { RobotEpisode } from '../wmrl/embodied.js';
import { DEFAULT_PRETRAIN, SimPrompts, pretrain, simRobotTarget, type Pretrained } from '../wmrl/sim-setup.js';
import { DEFAULT_PPO, trainPpo } from '../wmrl/train_ppo.js';
import { trainStandard } from '../wmrl/train_standard.js';

const dir = mkdtempSync(join(tmpdir(), 'train-ppo-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('PPO on the robot (tiny budget, reach on the gap robot)', () => {
  let pre: Pretrained;
  let snapshot: Float32Array[];
  beforeAll(async () => {
    pre = await pretrain({ ...DEFAULT_PRETRAIN, task: 'reach', bcEpisodes: 4, bcEpochs: 2, daggerRounds: 1, daggerEpisodes: 2, daggerEpochs: 2, wmEpisodes: 6, wmEpochs: 2, wmHidden: [32, 32], wmMembers: 3, policyHidden: [16] });
    snapshot = pre.policy.paramNames().map((n) => Float32Array.from(pre.policy.store.get(n).data));
  }, 120_000);
  const fresh = () => pre.policy.paramNames().forEach((n, i) => pre.policy.store.set(n, snapshot[i]!));
  const pgConfig = { ...DEFAULT_PG_CONFIG, epochs: 1, minibatch: 256 };
  const base = { updates: 1, prompts: 2, groupSize: 2, evalEvery: 1, promptSeed0: 1_000_000, seed: 3 };

  const runOn = async (name: string, train: (t: Awaited<ReturnType<typeof simRobotTarget>>, prompts: SimPrompts, pg: ClippedPolicyGradient, eps: RobotEpisode[]) => Promise<unknown>) => {
    fresh();
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, `${name}.db`) });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(pre.policy, pgConfig);
    const batches: PgBatch[] = [];
    const update = pg.update.bind(pg);
    pg.update = (b, rng) => { batches.push(b); return update(b, rng); };
    const eps: RobotEpisode[] = [];
    try {
      const out = await train(target, prompts, pg, eps);
      return { out, batches, eps, hz: target.robot.spec.controlHz, clock: { seconds: target.clock.robotSeconds, episodes: target.clock.episodes }, stored: target.store!.list().length, params: pre.policy.paramNames().map((n) => Float32Array.from(pre.policy.store.get(n).data)) };
    } finally {
      await pg.release();
      await target.close();
    }
  };

  it("spends standard GRPO's robot episodes and credits each step by its GAE advantage", async () => {
    const std = await runOn('std', (target, prompts, pg, eps) => trainStandard({ config: base, policy: pre.policy, pg, target, prompts, hooks: { onEpisode: (ep) => eps.push(ep) } }));
    const ppo = await runOn('ppo', (target, prompts, pg, eps) => trainPpo({ config: { ...base, ...DEFAULT_PPO, criticHidden: [16] }, policy: pre.policy, pg, target, prompts, hooks: { onEpisode: (ep) => eps.push(ep) } }));
    // The same prompts in the same order, the same policy noise: the same episodes, the same robot time.
    expect(ppo.eps.map((e) => e.seed)).toEqual([0, 0, 1, 1].map((b) => base.promptSeed0 + b));
    expect(ppo.eps.map((e) => e.return)).toEqual(std.eps.map((e) => e.return));
    expect(ppo.clock).toEqual(std.clock);
    expect(ppo.clock.episodes).toBe(4);
    expect(ppo.stored).toBe(4);
    const steps = ppo.eps.reduce((a, e) => a + e.steps, 0);
    expect(ppo.clock.seconds).toBeCloseTo(steps / ppo.hz + 4 * 5, 6);
    // One batch of every step; advantages differ within an episode and are standardized over the batch.
    expect(ppo.batches).toHaveLength(1);
    const adv = Array.from(ppo.batches[0]!.advantage);
    expect(adv).toHaveLength(steps);
    const first = adv.slice(0, ppo.eps[0]!.steps);
    expect(new Set(first.map((x) => x.toFixed(4))).size).toBeGreaterThan(first.length / 2);
    const mu = adv.reduce((a, b) => a + b, 0) / adv.length;
    expect(mu).toBeCloseTo(0, 4);
    expect(Math.sqrt(adv.reduce((a, b) => a + (b - mu) ** 2, 0) / adv.length)).toBeCloseTo(1, 3);
    // The policy moved, and differently from GRPO's update on the same episodes.
    expect(ppo.params.some((p, i) => p.some((v, j) => v !== snapshot[i]![j]))).toBe(true);
    expect(ppo.params.some((p, i) => p.some((v, j) => v !== std.params[i]![j]))).toBe(true);
    const rows = (ppo.out as { rows: Array<{ robotEpisodes: number; criticLoss?: number | null }> }).rows;
    expect(rows[0]!.robotEpisodes).toBe(4);
    expect(Number.isFinite(rows[0]!.criticLoss)).toBe(true);
  }, 180_000);
});
