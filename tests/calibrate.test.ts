// Calibration (wmrl/calibrate.ts): the identified sim profile, and `wmrl train --calibrate` end to end — the robot
// episodes it spends are charged, what it identified is kept in the run folder, and the trainer starts from the better
// of the clone before and after it.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CONTEXT_NAMES, CONTEXT_PARAMS, NOMINAL } from '../sim/profiles.js';
import { identifiedProfile } from '../wmrl/calibrate.js';
import { EnsembleModel } from '../worldmodel/index.js';

const dir = mkdtempSync(join(tmpdir(), 'wmrl-calibrate-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const wmrl = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/wmrl.ts', ...args], { encoding: 'utf8', timeout: 240_000 });

describe('calibration', () => {
  it('makes the sim profile of what was identified: the delay, and each context entry as its scale', () => {
    const model = new EnsembleModel({ dObs: 3, dAct: 1, members: 2, hidden: [4], contextNames: [...CONTEXT_NAMES], seed: 0 });
    const logs = [Math.log(1.8), Math.log(0.5), Math.log(0.4), Math.log(0.7)];
    model.setContext(logs);
    const { profile, scales } = identifiedProfile(3, model);
    expect(profile.action_latency_steps).toBe(3);
    CONTEXT_PARAMS.forEach((k, i) => {
      expect(profile[k]).toBeCloseTo(Math.exp(logs[i]!), 5);
      expect(scales[k]).toBeCloseTo(Math.exp(logs[i]!), 5);
    });
    // What the context does not hold stays the sim's.
    expect(profile.obs_noise_std).toBe(NOMINAL.obs_noise_std);
    // A model without a context: the delay alone.
    const plain = new EnsembleModel({ dObs: 3, dAct: 1, members: 2, hidden: [4], seed: 0 });
    expect(identifiedProfile(1, plain)).toMatchObject({ profile: { action_latency_steps: 1, mass_scale: 1 }, scales: {} });
    const other = new EnsembleModel({ dObs: 3, dAct: 1, members: 2, hidden: [4], contextNames: ['log gain'], seed: 0 });
    expect(() => identifiedProfile(0, other)).toThrow(/context \(log gain\) is not the sim profiles'/);
  });

  it("clones with DAgger keeping the round that scores best, the later round only where it scores higher; keep 'last' the last", async () => {
    const { cloneWithDagger } = await import('../policies/dagger.js');
    const { GaussianPolicy } = await import('../policies/gaussian.js');
    const { makeEnv } = await import('../sim/index.js');
    const env = await makeEnv({ task: 'reach', profile: 'nominal' });
    try {
      for (const marks of [[0.5, 0.2], [0.5, 0.5], [0.2, 0.5]]) {
        const policy = new GaussianPolicy({ obsDim: env.observationSpace.state.shape[0], actDim: env.actionSpace.shape[0], hidden: [8], seed: 3 });
        const weights: Float32Array[][] = [];
        let scored = 0;
        const snapshot = () => policy.paramNames().map((n) => Float32Array.from(policy.store.get(n).data));
        const out = await cloneWithDagger(() => policy, env, 0, Array.from({ length: 6 }, (_, i) => 700_000 + i), 1, 2, 2, () => weights.push(snapshot()), async () => marks[scored++]!);
        const chosen = marks[1]! > marks[0]! ? 1 : 0;
        expect(out.scores).toEqual(marks);
        expect(out.chosen).toBe(chosen);
        expect(snapshot()).toEqual(weights[chosen]);
        expect(weights[0]).not.toEqual(weights[1]);
      }
      // keep 'last': the last round's weights whatever the scores, which are still recorded.
      const policy = new GaussianPolicy({ obsDim: env.observationSpace.state.shape[0], actDim: env.actionSpace.shape[0], hidden: [8], seed: 3 });
      const weights: Float32Array[][] = [];
      const snapshot = () => policy.paramNames().map((n) => Float32Array.from(policy.store.get(n).data));
      let scored = 0;
      const out = await cloneWithDagger(() => policy, env, 0, Array.from({ length: 6 }, (_, i) => 700_000 + i), 1, 2, 2, () => weights.push(snapshot()), async () => [0.9, 0.1][scored++]!, { keep: 'last' });
      expect(out).toMatchObject({ scores: [0.9, 0.1], chosen: 1 });
      expect(snapshot()).toEqual(weights[1]);
    } finally {
      env.dispose();
    }
  });

  it('a memo reuses what followed the same robot episodes from the same clone; the episodes still run and are charged', async () => {
    const { calibrate, calibrationConfig } = await import('../wmrl/calibrate.js');
    const { DEFAULT_PRETRAIN, SimPrompts, pretrain, simRobotTarget } = await import('../wmrl/sim-setup.js');
    const { QUICK_PRETRAIN } = await import('../recipes/embodied.js');
    const pre = await pretrain({ ...DEFAULT_PRETRAIN, ...QUICK_PRETRAIN, task: 'reach', seed: 0, commandHistory: 2 });
    const policy0 = pre.policy.paramNames().map((n) => Float32Array.from(pre.policy.store.get(n).data));
    const context0 = pre.model.context;
    using prompts = await SimPrompts.create('reach', 'nominal', { commandHistory: 2 });
    const memo = new Map();
    const c = calibrationConfig({ task: 'reach', episodes: 2, quick: true, seed: 0 });
    const once = async (name: string) => {
      pre.policy.paramNames().forEach((n, i) => pre.policy.store.set(n, policy0[i]!));
      pre.model.setContext(context0);
      const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, commandHistory: 2, store: join(dir, `${name}.db`) });
      const phases = new Set<string>();
      try {
        const cal = await calibrate({ task: 'reach', commandHistory: 2, policy: pre.policy, model: pre.model, target, prompts, memo }, c, (what) => phases.add(what));
        return { cal, phases, episodes: target.clock.episodes, policy: pre.policy.paramNames().map((n) => Float32Array.from(pre.policy.store.get(n).data)), context: pre.model.context };
      } finally {
        await target.close();
      }
    };
    const first = await once('memo-1');
    expect(memo.size).toBe(1);
    expect(first.phases.has('calibration: cloning')).toBe(true);
    expect(first.policy).not.toEqual(policy0);
    // The last DAgger round is kept; every round's score in the identified sim is recorded.
    expect(first.cal.round).toBe(c.daggerRounds);
    expect(first.cal.roundSuccess).toHaveLength(c.daggerRounds + 1);
    const second = await once('memo-2');
    expect(memo.size).toBe(1);
    expect(second.phases.has('calibration: cloning')).toBe(false);
    expect(second.episodes).toBe(2);
    expect(second.cal).toEqual(first.cal);
    expect(second.policy).toEqual(first.policy);
    expect(second.context).toEqual(first.context);
    // Another start (the clone changed) is another key: computed again.
    pre.policy.store.set(pre.policy.paramNames()[0]!, policy0[0]!.map((v) => v + 0.01));
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, commandHistory: 2, store: join(dir, 'memo-3.db') });
    try {
      await calibrate({ task: 'reach', commandHistory: 2, policy: pre.policy, model: pre.model, target, prompts, memo }, c);
    } finally {
      await target.close();
    }
    expect(memo.size).toBe(2);
  }, 120_000);

  it("identify 'sim': the sim replaying the robot's episodes finds gap's delay, and the model's context is set to its scales", async () => {
    const { calibrate, calibrationConfig } = await import('../wmrl/calibrate.js');
    const { DEFAULT_PRETRAIN, SimPrompts, pretrain, simRobotTarget } = await import('../wmrl/sim-setup.js');
    const { QUICK_PRETRAIN } = await import('../recipes/embodied.js');
    const { loadProfile, profileContext } = await import('../sim/profiles.js');
    const pre = await pretrain({ ...DEFAULT_PRETRAIN, ...QUICK_PRETRAIN, task: 'reach', seed: 0, commandHistory: 2 });
    using prompts = await SimPrompts.create('reach', 'nominal', { commandHistory: 2 });
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, commandHistory: 2, store: join(dir, 'sim-id.db') });
    try {
      const c = { ...calibrationConfig({ task: 'reach', episodes: 6, quick: true, seed: 0 }), identify: 'sim' as const };
      const cal = await calibrate({ task: 'reach', commandHistory: 2, policy: pre.policy, model: pre.model, target, prompts }, c);
      const gap = loadProfile('gap');
      expect(cal.delay).toBe(gap.action_latency_steps);
      expect(cal.profile.action_latency_steps).toBe(gap.action_latency_steps);
      // every scale is identified, within the search's range (how close: tests/wmrl-sim-identify.test.ts)
      for (const k of CONTEXT_PARAMS) expect(Math.abs(Math.log(cal.scales[k]!))).toBeLessThanOrEqual(Math.log(3) + 1e-9);
      expect(Array.from(pre.model.context)).toEqual(Array.from(profileContext(cal.profile)));
    } finally {
      await target.close();
    }
  }, 120_000);

  it('refuses before any robot episode a policy that does not read the robot, or a task without a robust demonstrator', async () => {
    const { calibrate, calibrationConfig } = await import('../wmrl/calibrate.js');
    const { GaussianPolicy } = await import('../policies/gaussian.js');
    let episodes = 0;
    const target = { get robot(): never { episodes++; throw new Error('no robot episode should run'); } } as unknown as Parameters<typeof calibrate>[0]['target'];
    const model = new EnsembleModel({ dObs: 3, dAct: 1, members: 2, hidden: [4], seed: 0 });
    const run = (commandHistory: number, obsDim: number) => ({ task: 'reach', commandHistory, policy: new GaussianPolicy({ obsDim, actDim: 2, hidden: [4] }), model, target, prompts: { get: () => { throw new Error('no prompt should be read'); } } });
    await expect(calibrate(run(4, 5), calibrationConfig({ task: 'reach', episodes: 2, quick: true, seed: 0 }))).rejects.toThrow(/the policy reads 5 observation entries, the reach sim with 4 commands of history reports \d+/);
    await expect(calibrate({ ...run(0, 5), task: 'pick' }, calibrationConfig({ task: 'reach', episodes: 2, quick: true, seed: 0 }))).rejects.toThrow(/pick: the task has no robust demonstrator/);
    expect(episodes).toBe(0);
  });

  it('wmrl train --calibrate: robot episodes charged, the identification kept in the run, the trainer starting from the better clone', () => {
    const out = join(dir, 'cal');
    const r = wmrl('train', '--quick', '--algo', 'standard', '--robot', 'sim:reach:gap', '--command-history', '4', '--calibrate', '3', '--updates', '1', '--prompts', '1', '--group', '2', '--eval-episodes', '6', '--out', out, '--json');
    expect(r.status, r.stderr).toBe(0);
    type Cal = { delay: number; scales: Record<string, number>; robotEpisodes: number; roundSuccess: number[]; round: number; before: number; after: number; kept: boolean };
    const doc = JSON.parse(r.stdout) as { config: { calibrate: number }; calibration: Cal; start: { success: number }; updates: Array<{ robotSeconds: number; robotEpisodes: number }> };
    expect(doc.config.calibrate).toBe(3);
    const c = doc.calibration;
    expect(c.robotEpisodes).toBe(3);
    expect(Number.isInteger(c.delay) && c.delay >= 0 && c.delay <= 5).toBe(true);
    expect(Object.keys(c.scales).sort()).toEqual([...CONTEXT_PARAMS].sort());
    // A smoke run's cloning: the demonstrations' round and one DAgger round, each scored in the identified sim, the last kept.
    expect(c.roundSuccess).toHaveLength(2);
    expect(c.round).toBe(1);
    for (const v of Object.values(c.scales)) expect(v).toBeGreaterThan(0);
    // Put back where it evaluated worse: the trainer's start (the same held-out states) is the better of the two.
    expect(c.kept).toBe(c.after >= c.before);
    expect(doc.start.success).toBe(Math.max(c.before, c.after));
    expect(JSON.parse(readFileSync(join(out, 'calibration.json'), 'utf8'))).toEqual(c);
    // Its robot episodes are on the robot clock: 3 resets of 5 s, and the group's 2 episodes with theirs, at least.
    expect(doc.updates[0]!.robotSeconds).toBeGreaterThanOrEqual(5 * 5);
    expect(r.stderr).toMatch(/calibrated · delay \d/);
    // A resume calibrates nothing again and reports the run's calibration.
    const again = wmrl('train', '--resume', '--updates', '2', '--out', out);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).not.toMatch(/calibration: robot episodes/);
    expect(again.stdout).toMatch(new RegExp(`calibrated on 3 robot episodes: delay ${c.delay} steps`));
    expect(existsSync(join(out, 'policy.onnx'))).toBe(true);
  });
});
