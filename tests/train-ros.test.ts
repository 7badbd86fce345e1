// The ROS path end to end: WMRL trains with its anchor groups executed on the hardware stand-in
// (`wmrl sim-robot --profile gap`, its own process) over rosbridge — a real WebSocket, seeded resets on
// /wmrl/reset_seed, reward and success from the robot's /wmrl/step — and every anchor episode lands in
// the episode store as it happens.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG } from '../policies/pg.js';
import { yamlRobotTarget } from '../wmrl/robot-target.js';
import { DEFAULT_PRETRAIN, SimPrompts, heldOutEvaluation, pretrain } from '../wmrl/sim-setup.js';
import { DEFAULT_WMRL, trainWmrl } from '../wmrl/train_wmrl.js';
import { correctorConfig } from '../wmrl/corrector.js';
import { spawnStandIn, type StandInProcess } from './helpers/standin-process.js';

const dir = mkdtempSync(join(tmpdir(), 'train-ros-'));
let standin: StandInProcess;
beforeAll(async () => {
  standin = await spawnStandIn(['--task', 'reach', '--profile', 'gap']);
}, 90_000);
afterAll(async () => {
  await standin?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('training over rosbridge', () => {
  it('runs WMRL anchors on the stand-in and records them in the store', async () => {
    const yaml = join(dir, 'robot.yaml');
    writeFileSync(yaml, readFileSync('launch/robots/sim-reach.yaml', 'utf8').replace('ws://127.0.0.1:9090', `ws://127.0.0.1:${standin.port}`).replace('watchdog_ms: 100', 'watchdog_ms: 1000'));
    const pre = await pretrain({ ...DEFAULT_PRETRAIN, task: 'reach', bcEpisodes: 4, bcEpochs: 2, daggerRounds: 1, daggerEpisodes: 2, daggerEpochs: 2, wmEpisodes: 6, wmEpochs: 2, wmHidden: [32, 32], wmMembers: 3, policyHidden: [16] });
    const target = await yamlRobotTarget({ config: yaml, maxSteps: 100, store: join(dir, 'episodes.db'), robots: 1, resetSeconds: 2, task: 'reach' });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(pre.policy, { ...DEFAULT_PG_CONFIG, epochs: 1 });
    try {
      const st = await trainWmrl({
        config: { ...DEFAULT_WMRL, updates: 2, prompts: 3, groupSize: 2, evalEvery: 2, refitEvery: 2, refitEpochs: 1, horizon: 100, corrector: correctorConfig({ debias: { minPairs: 2, refitEvery: 2 } }) },
        policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts, evaluate: heldOutEvaluation('reach', 'gap', 2), warn: () => {},
      });
      const anchors = st.rows.reduce((a, r) => a + r.realGroups, 0);
      expect(anchors).toBeGreaterThanOrEqual(2);
      const eps = target.store!.list();
      expect(eps).toHaveLength(anchors * 2);
      for (const e of eps) {
        expect(e.status).toBe('complete');
        expect(e.steps).toBeGreaterThan(0);
        expect(e.meta.robot).toBe('sim-reach');
      }
      // Both episodes of a group started from the same seeded reset: the same start state (up to the gap profile's sensor noise).
      const full = eps.map((e) => target.store!.get(e.meta.id));
      const bySeed = new Map<number, typeof full>();
      for (const e of full) {
        const seed = (e.meta.extra as { seed: number }).seed;
        bySeed.set(seed, [...(bySeed.get(seed) ?? []), e]);
      }
      for (const group of bySeed.values()) {
        expect(group).toHaveLength(2);
        const [a, b] = group.map((e) => e.steps[0]!.obs.position);
        a!.forEach((v, i) => expect(Math.abs(v - b![i]!)).toBeLessThan(0.05));
      }
      // Rewards come from the robot's outcome topic: finite, and they sum to the episode's return.
      for (const e of full) for (const s of e.steps) expect(Number.isFinite(s.reward)).toBe(true);
      expect(st.rows[1]!.refit).toBe(true);
    } finally {
      await pg.release();
      await target.close();
    }
  }, 240_000);

  it("a robot YAML's command_history: the robot reports its last commands, and WMRL trains over them (clone, model and prompts alike)", async () => {
    const yaml = join(dir, 'robot-history.yaml');
    writeFileSync(yaml, readFileSync('launch/robots/sim-reach.yaml', 'utf8').replace('ws://127.0.0.1:9090', `ws://127.0.0.1:${standin.port}`).replace('watchdog_ms: 100', 'watchdog_ms: 1000') + '\ncommand_history: 3\n');
    const pre = await pretrain({ ...DEFAULT_PRETRAIN, task: 'reach', bcEpisodes: 2, bcEpochs: 1, daggerRounds: 0, wmEpisodes: 4, wmEpochs: 1, wmHidden: [16], wmMembers: 2, policyHidden: [8], commandHistory: 3 });
    const target = await yamlRobotTarget({ config: yaml, maxSteps: 30, store: join(dir, 'history.db'), robots: 1, resetSeconds: 2, task: 'reach' });
    using prompts = await SimPrompts.create('reach', 'nominal', { commandHistory: 3 });
    const pg = await ClippedPolicyGradient.create(pre.policy, { ...DEFAULT_PG_CONFIG, epochs: 1 });
    try {
      expect(target.robot.spec.features!.slice(-2)).toEqual(['shoulder command t-3', 'elbow command t-3']);
      const st = await trainWmrl({
        config: { ...DEFAULT_WMRL, updates: 1, prompts: 2, groupSize: 2, evalEvery: 1, refitEvery: 0, horizon: 30, corrector: correctorConfig({ anchors: { fraction: 0.5, floor: 1 } }) },
        policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts, warn: () => {},
      });
      expect(st.rows[0]!.realGroups).toBe(1);
      const ep = target.store!.get(target.store!.list()[0]!.meta.id);
      // the second step's observation reports the first command sent, newest first
      const n = ep.steps[1]!.obs.features!.length;
      expect(Array.from(ep.steps[1]!.obs.features!.slice(n - 6, n - 4))).toEqual(Array.from(ep.steps[0]!.action));
    } finally {
      await pg.release();
      await target.close();
    }
  }, 240_000);
});
