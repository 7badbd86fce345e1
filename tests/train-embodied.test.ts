// The embodied trainers at a tiny budget (cleanrl's smoke runs): both run end to end on the sim robot
// under the gap profile, record every robot episode in the store, charge the robot clock, anchor WMRL
// on the robot and refit its world model; a resumed run continues exactly; pure world model touches no robot;
// standard GRPO scores its groups through StandardGrpo, one group after another.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG } from '../policies/pg.js';
import { correctorConfig, type CorrectorState } from '../wmrl/corrector.js';
import type { PgBatch } from '../policies/pg.js';
import { groupAdvantages, DEFAULT_ADVANTAGE_CONFIG } from '../wmrl/advantages.js';
import { RobotClock, actedEpisode, pgBatch, type RobotEpisode } from '../wmrl/embodied.js';
import { DEFAULT_PRETRAIN, SimPrompts, heldOutEvaluation, pretrain, simRobotTarget, type Pretrained } from '../wmrl/sim-setup.js';
import { trainStandard } from '../wmrl/train_standard.js';
import { trainWmrl, type WmrlConfig } from '../wmrl/train_wmrl.js';
import { IdentifiedSim } from '../wmrl/identified-sim.js';
import { loadProfile } from '../sim/profiles.js';
import { relabelScore, replayScore } from '../worldmodel/index.js';

const dir = mkdtempSync(join(tmpdir(), 'train-'));
/** An episode's commands as the policy acted them, within the action range (-1..1 on the sim): what imagination feeds the model. */
const asActed = (ep: RobotEpisode, A: number) => ep.action.subarray(0, ep.steps * A).map((v) => Math.min(1, Math.max(-1, v)));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('RobotClock', () => {
  it('charges steps × period + reset per episode; exclusive robots work in parallel', () => {
    const c = new RobotClock(2, 5);
    for (let i = 0; i < 4; i++) c.charge(100, 10);
    expect(c.robotSeconds).toBeCloseTo(60);
    expect(c.wallSeconds).toBeCloseTo(30);
    expect(c.episodes).toBe(4);
    expect(() => new RobotClock(0, 1)).toThrow(/robots must be a positive integer/);
  });
});

describe('pgBatch', () => {
  it('gives each rollout its advantage and weight on every step and leaves out null advantages', () => {
    const t = (v: number, steps: number) => ({ obs: new Float32Array(steps * 2).fill(v), action: new Float32Array(steps).fill(v), logProb: new Float32Array(steps).fill(-v), steps });
    const b = pgBatch([t(1, 2), t(2, 3), t(3, 1)], [0.5, null, -1], [1, 1, 3], 2, 1)!;
    expect(Array.from(b.advantage)).toEqual([0.5, 0.5, -1]);
    expect(Array.from(b.weight)).toEqual([1, 1, 3]);
    expect(Array.from(b.action)).toEqual([1, 1, 3]);
    expect(pgBatch([t(1, 2)], [null], [1], 2, 1)).toBeNull();
  });
});

describe('actedEpisode', () => {
  it('keeps the policy\'s commands within the action range, the states and rewards as recorded, success at the last step only', () => {
    const ep: RobotEpisode = {
      seed: 0, id: 'e', status: 'complete', obs: Float32Array.of(0, 0, 1, 1, 2, 2), action: Float32Array.of(-2, 0.5, 0.25, 3),
      sent: new Float32Array(4), logProb: new Float32Array(2), reward: Float32Array.of(1, 2), success: true, steps: 2, return: 3,
    };
    const a = actedEpisode(ep, [-1, 0], [1, 1]);
    expect(Array.from(a.actions)).toEqual([-1, 0.5, 0.25, 1]);
    expect(Array.from(a.success)).toEqual([0, 1]);
    expect(Array.from(a.states)).toEqual([0, 0, 1, 1, 2, 2]);
    expect(Array.from(a.rewards)).toEqual([1, 2]);
    expect(Array.from(actedEpisode({ ...ep, success: false }, [-1, 0], [1, 1]).success)).toEqual([0, 0]);
  });
});

describe('simRobotTarget', () => {
  it('records into a store that fsyncs every step (as a real robot\'s), or only survives a killed process with storeSync NORMAL', async () => {
    const full = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'sync-full.db') });
    const normal = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'sync-normal.db'), storeSync: 'NORMAL' });
    try {
      expect(full.store!.synchronous()).toBe('FULL');
      expect(normal.store!.synchronous()).toBe('NORMAL');
    } finally {
      await full.close();
      await normal.close();
    }
  });
});

describe('embodied trainers (tiny budget, reach on the gap robot)', () => {
  let pre: Pretrained;
  let snapshot: Float32Array[];
  beforeAll(async () => {
    pre = await pretrain({ ...DEFAULT_PRETRAIN, task: 'reach', bcEpisodes: 4, bcEpochs: 2, daggerRounds: 1, daggerEpisodes: 2, daggerEpochs: 2, wmEpisodes: 6, wmEpochs: 2, wmHidden: [32, 32], wmMembers: 3, policyHidden: [16] });
    snapshot = pre.policy.paramNames().map((n) => Float32Array.from(pre.policy.store.get(n).data));
  }, 120_000);
  const fresh = () => pre.policy.paramNames().forEach((n, i) => pre.policy.store.set(n, snapshot[i]!));
  const pgConfig = { ...DEFAULT_PG_CONFIG, epochs: 1, minibatch: 256 };
  const base = { updates: 2, prompts: 3, groupSize: 2, evalEvery: 2, promptSeed0: 1_000_000, seed: 3 };
  const wmrlConfig = (over: Partial<WmrlConfig> = {}): WmrlConfig => ({
    ...base, corrector: correctorConfig({ debias: { minPairs: 2, refitEvery: 2 } }), horizon: 100, scoreMode: 'return', scoreK: 5, successThreshold: 0.5,
    refitEvery: 1, refitEpochs: 1, refitRolloutSteps: 8, refitRolloutWindows: 128, simWeight: 0.25, robotRewards: 'dense', anchorScore: 'robot', imaginedGate: false, actionDelay: 'identify', maxActionDelay: 5, context: 'identify', alarmWindow: 2, alarmGap: 0.9, ...over,
  });

  /**
   * A WMRL run imagining 10 steps whose model nothing changes (no refit, context fixed, delay as `over` gives), so its
   * anchors' scores can be redone after: the debiasing map's pairs and the anchor episodes.
   */
  const pairedRun = async (name: string, over: Partial<WmrlConfig>) => {
    fresh();
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, `${name}.db`) });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(pre.policy, pgConfig);
    const anchors: RobotEpisode[] = [];
    try {
      const st = await trainWmrl({ config: wmrlConfig({ horizon: 10, refitEvery: 0, context: 'fixed', ...over }), policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts, hooks: { onEpisode: (ep) => anchors.push(ep) } });
      const pairs = (st.extra as { corrector: { debiaser: { buffer: Array<{ wm: number; real: number }> } } }).corrector.debiaser.buffer;
      return { pairs, anchors, A: target.robot.spec.action.low.length, D: pre.policy.obsDim };
    } finally {
      await pg.release();
      await target.close();
    }
  };

  it('standard GRPO runs every group on the robot and records each episode', async () => {
    fresh();
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'std.db') });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(pre.policy, pgConfig);
    const st = await trainStandard({ config: base, policy: pre.policy, pg, target, prompts, evaluate: heldOutEvaluation('reach', 'gap', 4) });
    expect(st.rows).toHaveLength(2);
    expect(target.clock.episodes).toBe(2 * 3 * 2);
    expect(target.store!.list()).toHaveLength(12);
    const steps = target.store!.list().reduce((a, e) => a + e.steps, 0);
    expect(target.clock.robotSeconds).toBeCloseTo(steps / target.robot.spec.controlHz + 12 * 5, 6);
    expect(st.rows[1]!.evalSuccess).toBeGreaterThanOrEqual(0);
    await pg.release();
    await target.close();
  }, 120_000);

  it('standard GRPO scores through StandardGrpo: each prompt\'s episodes one group, run group after group, each step given its group-standardized return', async () => {
    fresh();
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'std-grpo.db') });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(pre.policy, pgConfig);
    const batches: PgBatch[] = [];
    const update = pg.update.bind(pg);
    pg.update = (b, rng) => { batches.push(b); return update(b, rng); };
    const eps: RobotEpisode[] = [];
    const config = { ...base, updates: 1, prompts: 3, groupSize: 3 };
    await trainStandard({ config, policy: pre.policy, pg, target, prompts, hooks: { onEpisode: (ep) => eps.push(ep) } });
    expect(eps.map((e) => e.seed)).toEqual([0, 0, 0, 1, 1, 1, 2, 2, 2].map((b) => config.promptSeed0 + b));
    const adv = groupAdvantages([0, 1, 2].map((b) => eps.slice(3 * b, 3 * b + 3).map((e) => e.return)), DEFAULT_ADVANTAGE_CONFIG).advantages.flat();
    expect(adv.some((a) => a !== null && Math.abs(a) > 0.1)).toBe(true);
    const kept = eps.filter((_, i) => adv[i] !== null);
    expect(batches).toHaveLength(1);
    expect(Array.from(batches[0]!.advantage)).toEqual(eps.flatMap((e, i) => (adv[i] === null ? [] : new Array<number>(e.steps).fill(Math.fround(adv[i]!)))));
    expect(Array.from(batches[0]!.obs.subarray(0, 5))).toEqual(Array.from(kept[0]!.obs.subarray(0, 5)));
    // A robot that fails stops the run, naming the cause.
    const outcome = target.outcome;
    target.outcome = async () => { throw new Error('joint 2 encoder timeout'); };
    await expect(trainStandard({ config, policy: pre.policy, pg, target, prompts })).rejects.toThrow(/real execution failed: Error: joint 2 encoder timeout/);
    target.outcome = outcome;
    await pg.release();
    await target.close();
  }, 120_000);

  it('WMRL imagining in the identified sim pairs each anchor with the sim\'s replay of it, and leaves the world model alone', async () => {
    fresh();
    // A robot whose dynamics the sim knows exactly (gap without its sensor noise and jitter): every pair must agree.
    const quiet = { ...loadProfile('gap'), name: 'quiet-gap', obs_noise_std: 0, control_jitter_substeps: 0 };
    const yaml = join(dir, 'quiet-gap.yaml');
    writeFileSync(yaml, Object.entries(quiet).map(([k, v]) => `${k}: ${typeof v === 'string' ? JSON.stringify(v) : v}`).join('\n') + '\n');
    const target = await simRobotTarget({ task: 'reach', profile: yaml, robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'wmrl-sim.db') });
    using prompts = await SimPrompts.create('reach');
    using sim = await IdentifiedSim.create('reach', quiet);
    const pg = await ClippedPolicyGradient.create(pre.policy, pgConfig);
    const before = pre.model.store.names().map((n) => Float32Array.from(pre.model.store.get(n).data));
    const contextBefore = Float32Array.from(pre.model.context);
    try {
      const st = await trainWmrl({ config: wmrlConfig({ horizon: target.maxSteps }), policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts, sim });
      const pairs = (st.extra as { corrector: { debiaser: { buffer: Array<{ wm: number; real: number }> } } }).corrector.debiaser.buffer;
      expect(pairs.length).toBeGreaterThan(0);
      expect(new Set(pairs.map((p) => p.real.toFixed(3))).size).toBeGreaterThan(1);
      for (const p of pairs) expect(p.wm).toBeCloseTo(p.real, 3);
      // The sim's groups were scored: the update learned from them, and the rows say the sim's delay.
      expect(st.rows.every((r) => r.actionDelay === quiet.action_latency_steps && !r.refit)).toBe(true);
      expect(st.rows.reduce((a, r) => a + r.realGroups, 0)).toBeLessThan(st.rows.reduce((a, r) => a + r.groups, 0));
      // refitEvery 1 and an identified context asked for: with the sim imagining, the model is neither refitted nor re-identified.
      pre.model.store.names().forEach((n, i) => expect(pre.model.store.get(n).data).toEqual(before[i]));
      expect(pre.model.context).toEqual(contextBefore);
    } finally {
      await pg.release();
      await target.close();
    }
  }, 120_000);

  it('WMRL executes only anchor groups on the robot, pairs them with replays and refits the world model from the store', async () => {
    fresh();
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'wmrl.db') });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(pre.policy, pgConfig);
    const before = Float32Array.from(pre.model.store.get(pre.model.store.names()[0]!).data);
    const warnings: string[] = [];
    const st = await trainWmrl({ config: wmrlConfig(), policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts, evaluate: heldOutEvaluation('reach', 'gap', 4), warn: (m) => warnings.push(m) });
    expect(st.rows).toHaveLength(2);
    // The alarm compares the world model's predicted success with the anchors' measured success over the window.
    const r2 = st.rows[1]!;
    const gap = Math.abs((st.rows[0]!.predictedSuccess! + r2.predictedSuccess!) / 2 - (st.rows[0]!.measuredSuccess! + r2.measuredSuccess!) / 2);
    expect(r2.hackingAlarm).toBe(gap > 0.9);
    expect(warnings.length).toBe(st.rows.filter((r) => r.hackingAlarm).length);
    if (r2.hackingAlarm) expect(warnings[0]).toMatch(/reward-hacking alarm at update 2/);
    for (const r of st.rows) {
      expect(r.realGroups).toBeGreaterThanOrEqual(1);
      expect(r.realGroups).toBeLessThan(3);
      expect(r.refit).toBe(true);
      // The robot's actuation delay, identified from the anchors as the policy acted in them.
      expect(Number.isInteger(r.actionDelay)).toBe(true);
      expect(r.actionDelay).toBeGreaterThanOrEqual(0);
      expect(r.actionDelay).toBeLessThanOrEqual(5);
      // The pretrained model is conditioned on the profile's context; the robot's is identified from the anchors,
      // within the range the model was fitted on (each entry's mean ± √3 std in its input normalization).
      expect(r.context).toHaveLength(4);
      const nz = pre.model.normalizer, off = pre.model.dIn - 4;
      r.context!.forEach((v, j) => expect(Math.abs(v - nz.inMean[off + j]!)).toBeLessThanOrEqual(Math.sqrt(3) * nz.inStd[off + j]! + 1e-5));
    }
    expect(st.rows[0]!.context!.some((v) => v !== 0)).toBe(true);
    expect(Array.from(pre.model.context)).toEqual(st.rows[1]!.context!.map(Math.fround));
    const anchors = st.rows.reduce((a, r) => a + r.realGroups, 0);
    expect(target.store!.list()).toHaveLength(anchors * 2);
    // Imagination starts where the robot reported a start: none before the first anchors, then every prompt.
    expect(st.rows[0]).toMatchObject({ reportedStarts: 0, imaginedFromReported: 0 });
    expect(st.rows[1]).toMatchObject({ reportedStarts: st.rows[0]!.realGroups * 2, imaginedFromReported: st.rows[1]!.groups });
    expect(Object.keys(st.finalObs)).toHaveLength(anchors * 2);
    const after = pre.model.store.get(pre.model.store.names()[0]!).data;
    expect(after.some((v, i) => v !== before[i])).toBe(true);
    // The exploitation guard measures each anchor group under its prompt's instruction (a context that recurs), not
    // under the group's slot in the update.
    const instructions = new Set(Array.from({ length: 2 * 3 }, (_, k) => prompts.get(1_000_000 + k).instruction));
    const guarded = (st.extra as { corrector: CorrectorState }).corrector.guard!.contexts.map(([k]) => k);
    expect(guarded.length).toBeGreaterThan(0);
    for (const k of guarded) expect(instructions.has(k)).toBe(true);
    await pg.release();
    await target.close();
  }, 180_000);

  it('refitAtEnd false: the refit due at the last update is skipped, the earlier ones run', async () => {
    fresh();
    const model0 = pre.model.store.names().map((n) => Float32Array.from(pre.model.store.get(n).data));
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'refit-at-end.db') });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(pre.policy, pgConfig);
    try {
      const st = await trainWmrl({ config: wmrlConfig({ horizon: 10, refitAtEnd: false }), policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts });
      expect(st.rows.map((r) => r.refit)).toEqual([true, false]);
    } finally {
      await pg.release();
      await target.close();
      pre.model.store.names().forEach((n, i) => pre.model.store.set(n, model0[i]!));
    }
  }, 120_000);

  it('anchor groups of one update take turns on the one robot: each episode runs from its own reset to its end', async () => {
    fresh();
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, 'turns.db') });
    // Every call the trainer makes on the robot, in order: R = reset, a = command.
    const calls: string[] = [];
    const robot = target.robot, reset = robot.reset.bind(robot), act = robot.act.bind(robot);
    robot.reset = (o) => { calls.push('R'); return reset(o); };
    robot.act = (a, o) => { calls.push('a'); return act(a, o); };
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(pre.policy, pgConfig);
    // Every group an anchor: three groups of one update scored at once on one robot.
    const st = await trainWmrl({ config: wmrlConfig({ updates: 1, corrector: correctorConfig({ anchors: { fraction: 1 }, debias: { minPairs: 2, refitEvery: 2 } }), refitEvery: 0, actionDelay: 0, context: 'fixed' }), policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts });
    expect(st.rows[0]!.realGroups).toBe(3);
    // Between consecutive resets, exactly one recorded episode's commands, in the order the episodes were recorded.
    const perReset = calls.join('').split('R').slice(1).map((x) => x.length);
    expect(perReset).toEqual(st.episodeIds.map((id) => target.store!.get(id).steps.length));
    expect(perReset).toHaveLength(6);
    await pg.release();
    await target.close();
  }, 120_000);

  it('pure world model touches no robot', async () => {
    fresh();
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0 });
    using prompts = await SimPrompts.create('reach');
    const pg = await ClippedPolicyGradient.create(pre.policy, pgConfig);
    const st = await trainWmrl({ config: wmrlConfig({ corrector: false, refitEvery: 0, actionDelay: 2 }), policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts, evaluate: heldOutEvaluation('reach', 'gap', 4) });
    expect(st.rows.map((r) => r.realGroups)).toEqual([0, 0]);
    // A delay given as a number is applied as given.
    expect(st.rows.map((r) => r.actionDelay)).toEqual([2, 2]);
    // Without anchors there is nothing to identify the context from: the model imagines under the one it holds.
    expect(st.rows.map((r) => r.context)).toEqual([Array.from(pre.model.context), Array.from(pre.model.context)]);
    expect(target.clock.episodes).toBe(0);
    expect(st.rows[1]!.loss).not.toBeNull();
    await pg.release();
    await target.close();
  }, 120_000);

  it('an anchor\'s world-model score replays the steps a short imagination covers, not the whole episode', async () => {
    const run = await pairedRun('short', { actionDelay: 0 });
    const { anchors, A, D } = run, pairs = run.pairs.map((p) => p.wm);
    const first: number[] = [], whole: number[] = [];
    for (const ep of anchors) {
      // The recorded start and the policy's commands as it acted them.
      expect(ep.steps).toBeGreaterThan(10);
      const start = ep.obs.subarray(0, D), acted = asActed(ep, A);
      first.push((await replayScore(pre.model, start, acted.subarray(0, 10 * A), { k: 5, mode: 'return' })).score[0]!);
      whole.push((await replayScore(pre.model, start, acted, { k: 5, mode: 'return' })).score[0]!);
    }
    expect(pairs.length).toBe(first.length);
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    sorted(pairs).forEach((x, i) => expect(x).toBeCloseTo(sorted(first)[i]!, 4));
    expect(sorted(pairs).some((x, i) => Math.abs(x - sorted(whole)[i]!) > 1e-3)).toBe(true);
  }, 120_000);

  it('anchorScore relabel: an anchor\'s real score is the world model\'s reward over its recorded steps, not the robot\'s return', async () => {
    const run = await pairedRun('relabel', { actionDelay: 1, anchorScore: 'relabel' });
    const { anchors, A, D } = run, real = run.pairs.map((p) => p.real);
    const relabels: number[] = [];
    for (const ep of anchors) relabels.push(await relabelScore(pre.model, { states: ep.obs.subarray(0, (ep.steps + 1) * D), actions: asActed(ep, A) }, { steps: Math.min(ep.steps, 10), actionDelay: 1 }));
    expect(real.length).toBe(anchors.length);
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    sorted(real).forEach((x, i) => expect(x).toBeCloseTo(sorted(relabels)[i]!, 4));
    // Not the robot's dense return over the episode.
    expect(sorted(real).some((x, i) => Math.abs(x - sorted(anchors.map((e) => e.return))[i]!) > 1e-3)).toBe(true);
  }, 120_000);

  it('an anchor\'s world-model score is the score imagination would give its actions: as late as imagination feeds them, ending at predicted success', async () => {
    const pairsOf = async (over: Partial<WmrlConfig>) => {
      const run = await pairedRun(`late-${String(over.successThreshold)}`, { actionDelay: 2, ...over });
      const { anchors, A, D } = run, pairs = run.pairs.map((p) => p.wm);
      const replays = [];
      for (const ep of anchors) replays.push(await replayScore(pre.model, ep.obs.subarray(0, D), asActed(ep, A).subarray(0, 10 * A), { k: 5, mode: 'return', actionDelay: 2 }));
      // The gap robot reports the commands as sent (Robot.act's contract), not what its actuators apply 3 steps later.
      expect(anchors.every((ep) => ep.sent.every((v, i) => v === asActed(ep, A)[i]))).toBe(true);
      expect(pairs.length).toBe(replays.length);
      return { pairs, replays };
    };
    const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b);
    // Never ending early: the 10-step return of the commands fed 2 steps late.
    const late = await pairsOf({ successThreshold: 2 });
    sorted(late.pairs).forEach((x, i) => expect(x).toBeCloseTo(sorted(late.replays.map((r) => r.score[0]!))[i]!, 4));
    // Every member's predicted success passes a threshold below 0 at once: each replay ends after its first step.
    const first = await pairsOf({ successThreshold: -1 });
    const E = pre.model.members;
    const firstStep = first.replays.map((r) => Array.from({ length: E }, (_, e) => r.memberProgress[e * 10]!).reduce((a, b) => a + b, 0) / E);
    sorted(first.pairs).forEach((x, i) => expect(x).toBeCloseTo(sorted(firstStep)[i]!, 4));
    expect(sorted(first.pairs).some((x, i) => Math.abs(x - sorted(first.replays.map((r) => r.score[0]!))[i]!) > 1e-3)).toBe(true);
  }, 120_000);

  it('a resumed WMRL run continues exactly as an uninterrupted one (the imagined gate\'s agreements included)', async () => {
    const runTo = async (out: string, updates: number, resume: boolean, model = pre.model) => {
      const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(out, 'episodes.db') });
      using prompts = await SimPrompts.create('reach');
      const pg = await ClippedPolicyGradient.create(pre.policy, pgConfig);
      const st = await trainWmrl({ config: wmrlConfig({ updates, groupSize: 3, imaginedGate: { window: 3, minGroups: 1 } }), policy: pre.policy, pg, model, simData: pre.simData, target, prompts, evaluate: heldOutEvaluation('reach', 'gap', 4), outDir: out, resume });
      await pg.release();
      await target.close();
      return st;
    };
    const modelSnap = pre.model.store.names().map((n) => Float32Array.from(pre.model.store.get(n).data));
    const freshModel = () => pre.model.store.names().forEach((n, i) => pre.model.store.set(n, modelSnap[i]!));
    const a = join(dir, 'a'), b = join(dir, 'b');
    fresh(); freshModel();
    const straight = await runTo(a, 3, false);
    const policyA = pre.policy.paramNames().map((n) => Array.from(pre.policy.store.get(n).data));
    fresh(); freshModel();
    await runTo(b, 2, false);
    fresh(); freshModel(); // the resumed run must take everything from its folder
    const resumed = await runTo(b, 3, true);
    const strip = (rows: typeof straight.rows) => rows.map(({ computeSeconds: _c, imagineSeconds: _i, ...r }) => r);
    expect(strip(resumed.rows)).toEqual(strip(straight.rows));
    // The gate measured agreements before the interruption (its window spans it), which the resumed run read back.
    expect((straight.extra as { agreements: number[] }).agreements.length).toBeGreaterThan(1);
    // The rows record every anchor group's closed-loop agreement; the gate's window holds the latest of them.
    const measured = straight.rows.flatMap((r) => r.agreements ?? []);
    expect(measured.every((x) => x >= -1 && x <= 1)).toBe(true);
    expect(measured.slice(-3)).toEqual((straight.extra as { agreements: number[] }).agreements);
    expect(straight.rows.every((r) => r.imaginedWeight !== undefined)).toBe(true);
    pre.policy.paramNames().forEach((n, i) => expect(Array.from(pre.policy.store.get(n).data)).toEqual(policyA[i]));
  }, 300_000);
});
