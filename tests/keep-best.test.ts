// Do no harm (wmrl/keep-best.ts): every embodied trainer with an evaluation measures its starting policy before update
// 1 and hands back the parameters of its latest evaluation unless its best (the start's included) measured higher by
// more than one standard error, or under prefer 'best' its best, ties to the earlier — also across a resume; an evaluation on the robot itself is charged to the robot clock and recorded; the reward-hacking alarm, once
// raised, keeps WMRL's imagined groups out of the updates after it until it clears.
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GaussianPolicy } from '../policies/gaussian.js';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG, type PgBatch } from '../policies/pg.js';
import { makeEnv } from '../sim/index.js';
import { correctorConfig } from '../wmrl/corrector.js';
import { robotEvaluation, type Evaluation, type RobotEpisode } from '../wmrl/embodied.js';
import { beats, successSe } from '../wmrl/keep-best.js';
import type { RunState } from '../wmrl/run-state.js';
import { DEFAULT_PRETRAIN, SimPrompts, pretrainWorldModel, simRobotTarget } from '../wmrl/sim-setup.js';
import { DEFAULT_BC_MORE, trainBcMore } from '../wmrl/train_bc.js';
import { DEFAULT_PPO, trainPpo } from '../wmrl/train_ppo.js';
import { DEFAULT_RLPD, trainRlpd } from '../wmrl/train_rlpd.js';
import { trainStandard, type StandardConfig } from '../wmrl/train_standard.js';
import { DEFAULT_WMRL, trainWmrl, type WmrlConfig } from '../wmrl/train_wmrl.js';

const dir = mkdtempSync(join(tmpdir(), 'keep-best-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the evaluation noise and the keep rule', () => {
  it('is the binomial standard error; a later evaluation replaces the kept one only past the margin, never on a tie', () => {
    expect(successSe(0.5, 100)).toBeCloseTo(0.05, 12);
    expect(successSe(1, 10)).toBe(0);
    expect(() => successSe(0.5, 0)).toThrow(/at least one episode, got 0/);
    const at = (update: number, success: number, episodes = 4) => ({ update, success, meanReturn: 0, episodes, se: successSe(success, episodes) });
    expect(beats(at(2, 0.5), at(1, 0.5), 0)).toBe(false);
    expect(beats(at(2, 0.75), at(1, 0.5), 0)).toBe(true);
    // One standard error of the difference, √(0.1875/4 + 0.25/4) ≈ 0.33, is more than the 0.25 gained.
    expect(beats(at(2, 0.75), at(1, 0.5), 1)).toBe(false);
    expect(beats(at(2, 1), at(1, 0.5), 1)).toBe(true);
  });
});

describe('the trainers keep the best evaluation (reach on the gap robot, a random policy, a destructive step)', () => {
  let D = 0, A = 0;
  let start: Float32Array[];
  const policy = () => new GaussianPolicy({ obsDim: D, actDim: A, hidden: [16], seed: 5 });
  beforeAll(async () => {
    using prompts = await SimPrompts.create('reach');
    D = prompts.get(0).startObs.length;
    const env = await makeEnv({ task: 'reach', profile: 'gap' });
    A = env.actionSpace.low.length;
    env.dispose();
    const p = policy();
    start = p.paramNames().map((n) => Float32Array.from(p.store.get(n).data));
  });
  const params = (p: GaussianPolicy) => p.paramNames().map((n) => Float32Array.from(p.store.get(n).data));
  const same = (a: Float32Array[], b: Float32Array[]) => a.every((x, i) => x.every((v, j) => v === b[i]![j]));
  // A learning rate that wrecks the policy in one update, so every update moves the parameters far.
  const pgConfig = { ...DEFAULT_PG_CONFIG, optimizer: { lr: 0.5 }, epochs: 1, minibatch: 256 };
  const loop: StandardConfig = { updates: 2, prompts: 1, groupSize: 2, evalEvery: 1, promptSeed0: 1_000_000, seed: 3 };
  /** An evaluation that measures `successes` in turn (one episode in four each) and remembers the parameters it measured. */
  const scripted = (p: GaussianPolicy, successes: number[]) => {
    const seen: Float32Array[][] = [];
    const evaluate = async (): Promise<Evaluation> => {
      seen.push(params(p));
      const success = successes[seen.length - 1];
      if (success === undefined) throw new Error(`evaluation ${seen.length} not scripted`);
      return { success, meanReturn: -success, episodes: 4 };
    };
    return { evaluate, seen };
  };
  const onRobot = async <T>(name: string, train: (t: Awaited<ReturnType<typeof simRobotTarget>>, prompts: SimPrompts) => Promise<T>): Promise<T> => {
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, `${name}.db`) });
    using prompts = await SimPrompts.create('reach');
    try {
      return await train(target, prompts);
    } finally {
      await target.close();
    }
  };
  const standard = (name: string, p: GaussianPolicy, evaluate: (policy: unknown) => Promise<Evaluation>, over: Partial<StandardConfig> = {}, io: { outDir?: string; resume?: boolean } = {}) =>
    onRobot(name, async (target, prompts) => {
      const pg = await ClippedPolicyGradient.create(p, pgConfig);
      try {
        return await trainStandard({ config: { ...loop, ...over }, policy: p, pg, target, prompts, evaluate, ...io });
      } finally {
        await pg.release();
      }
    });

  it('standard GRPO: the start is measured before update 1; an update within the noise of the best is kept, one below it is not', async () => {
    const p = policy();
    const { evaluate, seen } = scripted(p, [0.75, 0.5, 0.25]);
    const st = await standard('worse', p, evaluate);
    expect(st.start).toEqual({ update: 0, success: 0.75, meanReturn: -0.75, episodes: 4, se: successSe(0.75, 4) });
    expect(same(seen[0]!, start)).toBe(true);
    // 0.5 is within one standard error (≈ 0.33) of the start's 0.75 and kept; 0.25 is not (≈ 0.31), so the start is.
    expect(st.rows.map((r) => [r.evalSuccess, r.keptUpdate])).toEqual([[0.5, 1], [0.25, 0]]);
    expect(st.kept).toEqual(st.start);
    expect(st.best).toEqual(st.start);
    // The updates moved the policy, and the run handed back the one it started from.
    expect(same(seen[2]!, start)).toBe(false);
    expect(same(params(p), start)).toBe(true);
  }, 30_000);

  it('standard GRPO: a later tie is kept by default; prefer best keeps the better update, not a later tie; keepBest false hands back the last update\'s', async () => {
    const latest = policy();
    const l = scripted(latest, [0.25, 0.5, 0.5]);
    const sl = await standard('latest', latest, l.evaluate);
    expect(sl.rows.map((r) => r.keptUpdate)).toEqual([1, 2]);
    expect(same(params(latest), l.seen[2]!)).toBe(true);

    const p = policy();
    const { evaluate, seen } = scripted(p, [0.25, 0.5, 0.5]);
    const st = await standard('better', p, evaluate, { keepBest: { prefer: 'best', margin: 0 } });
    expect(st.rows.map((r) => r.keptUpdate)).toEqual([1, 1]);
    expect(st.kept).toMatchObject({ update: 1, success: 0.5 });
    expect(same(seen[1]!, seen[2]!)).toBe(false);
    expect(same(params(p), seen[1]!)).toBe(true);

    const off = policy();
    const last = scripted(off, [0.5, 0.25]);
    const st2 = await standard('off', off, last.evaluate, { keepBest: false });
    expect(st2.start).toBeUndefined();
    expect(st2.rows.map((r) => [r.evalSuccess, r.keptUpdate])).toEqual([[0.5, undefined], [0.25, undefined]]);
    expect(same(params(off), start)).toBe(false);
  }, 30_000);

  it('a resumed run keeps what it kept before the interruption, and falls back to the best it measured then, from its folder', async () => {
    const out = join(dir, 'resume');
    mkdirSync(out);
    const first = policy();
    const a = scripted(first, [0.75, 0.5]);
    await standard('resume-a', first, a.evaluate, { updates: 1 }, { outDir: out });
    // Update 1 is kept (within the noise of the start), the start is the best: both on disk.
    expect(readdirSync(out).filter((f) => f.startsWith('kept-')).sort()).toEqual(['kept-0.safetensors', 'kept-1.safetensors']);
    // A fresh process: the policy from the checkpoint (the update's), the kept and best parameters from their files.
    const again = policy();
    const { evaluate, seen } = scripted(again, [0.25]);
    const st = await standard('resume-b', again, evaluate, { updates: 2 }, { outDir: out, resume: true });
    expect(seen).toHaveLength(1);
    expect(st.rows.map((r) => r.keptUpdate)).toEqual([1, 0]);
    expect(same(params(again), start)).toBe(true);
    expect(readdirSync(out)).toContain('kept-0.safetensors');

    // prefer best: only the best evaluation's file.
    const out2 = join(dir, 'resume-best');
    mkdirSync(out2);
    const third = policy();
    await standard('resume-c', third, scripted(third, [0.75, 0.5]).evaluate, { updates: 1, keepBest: { prefer: 'best', margin: 0 } }, { outDir: out2 });
    expect(readdirSync(out2).filter((f) => f.startsWith('kept-'))).toEqual(['kept-0.safetensors']);
  }, 30_000);

  it('refuses a keep rule it does not know, naming it', async () => {
    const p = policy();
    await expect(standard('bad-rule', p, scripted(p, [0.5]).evaluate, { keepBest: { prefer: 'first' as 'best', margin: 0 } })).rejects.toThrow(/prefer must be 'latest' or 'best', got first/);
  }, 30_000);

  it('PPO, RLPD and BC hand back the start where their updates measure worse', async () => {
    const ppo = policy();
    const a = scripted(ppo, [0.75, 0.25]);
    const pst = await onRobot('ppo', async (target, prompts) => {
      const pg = await ClippedPolicyGradient.create(ppo, pgConfig);
      try {
        return await trainPpo({ config: { ...loop, updates: 1, ...DEFAULT_PPO, criticHidden: [16] }, policy: ppo, pg, target, prompts, evaluate: a.evaluate });
      } finally {
        await pg.release();
      }
    });
    expect(same(a.seen[1]!, start)).toBe(false);

    const rlpd = policy();
    const b = scripted(rlpd, [0.75, 0.25]);
    const M = 64, rand = (n: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i));
    const rst = await onRobot('rlpd', (target, prompts) => trainRlpd({
      config: { ...loop, updates: 1, ...DEFAULT_RLPD, critics: 2, criticHidden: [16], batch: 16, utd: 0.5, warmupSteps: 2, lr: 0.05 }, policy: rlpd, target, prompts, evaluate: b.evaluate,
      demos: { obs: rand(M * D), action: rand(M * A), reward: rand(M), nextObs: rand(M * D), terminal: new Float32Array(M) },
    }));
    expect(same(b.seen[1]!, start)).toBe(false);

    const bc = policy();
    const c = scripted(bc, [0.75, 0.25]);
    const env = await makeEnv({ task: 'reach', profile: 'nominal' });
    const bst = await onRobot('bc', (target, prompts) => trainBcMore({
      config: { ...loop, updates: 1, ...DEFAULT_BC_MORE, epochs: 1, lr: 0.5, batchSize: 64 }, policy: bc, target, prompts, evaluate: c.evaluate,
      demos: { obs: rand(8 * D), action: rand(8 * A) }, demonstrator: () => env.demonstrator({ latencySteps: 0 }),
    })).finally(() => env.dispose());
    expect(same(c.seen[1]!, start)).toBe(false);

    for (const [st, p] of [[pst, ppo], [rst, rlpd], [bst, bc]] as Array<[RunState, GaussianPolicy]>) {
      expect(st.start).toMatchObject({ update: 0, success: 0.75 });
      expect(st.rows[0]).toMatchObject({ evalSuccess: 0.25, keptUpdate: 0 });
      expect(same(params(p), start)).toBe(true);
    }
  }, 30_000);

  it('an evaluation on the robot itself: mean actions from fixed seeded resets, recorded and charged like every robot episode', async () => {
    const p = policy();
    await onRobot('robot-eval', async (target, prompts) => {
      const evaluate = robotEvaluation(target, 3);
      const pg = await ClippedPolicyGradient.create(p, pgConfig);
      try {
        const st = await trainStandard({ config: { ...loop, updates: 1 }, policy: p, pg, target, prompts, evaluate });
        // The start's 3 episodes, the update's 2, its evaluation's 3: all on the robot's clock and in the store.
        expect(st.rows[0]!.robotEpisodes).toBe(8);
        expect(target.clock.episodes).toBe(8);
        const stored = target.store!.list();
        expect(stored.map((e) => e.meta.policyVersion)).toEqual(['eval-0', 'eval-0', 'eval-0', 'standard-0', 'standard-0', 'eval-1', 'eval-1', 'eval-1']);
        const seeds = stored.filter((e) => e.meta.policyVersion.startsWith('eval')).map((e) => (e.meta.extra as { seed: number }).seed);
        expect(seeds).toEqual([9_000_000, 9_000_001, 9_000_002, 9_000_000, 9_000_001, 9_000_002]);
        expect(st.start).toMatchObject({ update: 0, episodes: 3 });
        expect(st.rows[0]!.robotSeconds).toBeCloseTo(target.clock.robotSeconds, 9);
        // The mean action: the policy the run handed back, from the same seeded resets, does the same steps again.
        const again = await evaluate(p);
        const steps = (v: string) => target.store!.list().filter((e) => e.meta.policyVersion === v).map((e) => e.steps);
        expect(steps('eval-2')).toEqual(steps(`eval-${st.kept!.update}`));
        expect(again.episodes).toBe(3);
      } finally {
        await pg.release();
      }
    });
  }, 30_000);
});

describe('the reward-hacking alarm acts (WMRL, reach on the gap robot)', () => {
  let wm: Awaited<ReturnType<typeof pretrainWorldModel>>;
  beforeAll(async () => {
    wm = await pretrainWorldModel({ ...DEFAULT_PRETRAIN, task: 'reach', wmEpisodes: 2, wmMembers: 2, wmHidden: [16], wmRolloutEpochs: 0, fit: false });
  }, 30_000);
  afterAll(async () => wm?.model.release());

  /** Two updates of three groups, one an anchor; the alarm over a window of one update raised by any gap. */
  const run = async (name: string, over: Partial<WmrlConfig>) => {
    const target = await simRobotTarget({ task: 'reach', profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(dir, `${name}.db`) });
    using prompts = await SimPrompts.create('reach');
    const p = new GaussianPolicy({ obsDim: prompts.get(0).startObs.length, actDim: target.robot.spec.action.low.length, hidden: [16], seed: 5 });
    const pg = await ClippedPolicyGradient.create(p, { ...DEFAULT_PG_CONFIG, epochs: 1, minibatch: 256 });
    const batches: PgBatch[] = [];
    const update = pg.update.bind(pg);
    pg.update = (b, rng) => { batches.push(b); return update(b, rng); };
    const anchors: RobotEpisode[][] = [[], []];
    let u = 0;
    try {
      const config: WmrlConfig = {
        ...DEFAULT_WMRL, updates: 2, prompts: 3, groupSize: 2, evalEvery: 1, seed: 3, horizon: 10, refitEvery: 0, actionDelay: 0, context: 'fixed',
        // A threshold no predicted success passes: every imagined rollout runs its 10 steps.
        corrector: correctorConfig({ anchors: { fraction: 1 / 3, floor: 1 }, debias: false, denoise: false }), successThreshold: 2, alarmWindow: 1, alarmGap: 0, ...over,
      };
      const st = await trainWmrl({ config, policy: p, pg, model: wm.model, simData: wm.simData, target, prompts, warn: () => {}, hooks: { onEpisode: (ep) => anchors[u]!.push(ep), onUpdate: () => u++ } });
      return { st, batches, anchors };
    } finally {
      await pg.release();
      await p.release();
      await target.close();
    }
  };

  it("'pause': the update after the alarm learns from the anchor group's robot steps alone; 'log' only warns", async () => {
    const paused = await run('pause', {});
    const { st, batches, anchors } = paused;
    expect(st.rows.map((r) => r.hackingAlarm)).toEqual([true, true]);
    expect(st.rows.map((r) => r.imaginationPaused)).toEqual([false, true]);
    expect(st.rows.map((r) => r.realGroups)).toEqual([1, 1]);
    const steps = (eps: RobotEpisode[]) => eps.reduce((a, e) => a + e.steps, 0);
    // Update 1: the anchor group's robot steps and two imagined groups of 10 steps; update 2: the robot's steps alone.
    expect(batches.map((b) => b.advantage.length)).toEqual([steps(anchors[0]!) + 2 * 2 * 10, steps(anchors[1]!)]);

    const logged = await run('log', { alarmAction: 'log' });
    expect(logged.st.rows.map((r) => [r.hackingAlarm, r.imaginationPaused])).toEqual([[true, false], [true, false]]);
    expect(logged.batches[1]!.advantage.length).toBe(steps(logged.anchors[1]!) + 2 * 2 * 10);
  }, 120_000);
});
