// rl-budget: how many robot episodes RL needs to lift bench vla's clone on reach, with which signal. vla-ceiling
// found that 24 updates of the GRPO the trainers use barely move the clone even under the robot's dense reward (an
// oracle). Here, with a policy cheap enough to run for hundreds of updates — the Gaussian MLP over the state that
// vla-ceiling clones from the same demonstrations (recipes/vla.ts cloneOnGap at CLONE's scale, the
// state alone) — four learners start from the same
// clone, with the same clipped policy gradient (every parameter, lr 3e-4) and groups of the split's training seeds:
//   grpo:        the robot's dense reward (the oracle) on every group; each episode's return standardized within
//                its group, given to every one of its steps;
//   ppo_gae:     the same oracle, PPO's per-step advantages from a learned critic (policies/critic.ts: generalized
//                advantage estimation, gamma 0.99, lambda 0.95, standardized over the batch), the critic refitted
//                to the lambda-returns after every batch;
//   wmrl:        the product's embodied WMRL (wmrl/train_wmrl.ts) with what bench vla's robot has: its sparse
//                success only. Imagined groups in the world model (pretrained on randomized sim profiles),
//                anchor groups on the robot, the context and actuation delay identified from the anchors, the
//                model refitted on the robot's recorded episodes every 10 updates (dynamics and success head; the
//                robot's rewards are its success, so the dense reward head keeps what the sim taught);
//   sparse_only: standard GRPO on the robot scored by its sparse success, exactly as many robot episodes as wmrl.
// All on the gap robot (the sim under the gap profile, actions executed 3 steps late); success = the mean action
// on bench vla's held-out start states, every few updates.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { evaluateOn } from '../policies/demos.js';
import { ValueCritic, gae, type EpisodeSpan } from '../policies/critic.js';
import type { GaussianPolicy } from '../policies/gaussian.js';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG, type PgConfig } from '../policies/pg.js';
import type { Policy } from '../policies/types.js';
import { Rng } from '../nn/index.js';
import { makeEnv, type Env, type EvaluationSplit } from '../sim/index.js';
import { groupAdvantage } from '../wmrl/advantages.js';
import { correctorConfig, type CorrectorConfig } from '../wmrl/corrector.js';
import { SplitPrompts, type Evaluation } from '../wmrl/embodied.js';
import type { RunRow } from '../wmrl/run-state.js';
import { DEFAULT_PRETRAIN, SimPrompts, pretrainWorldModel, simRobotTarget } from '../wmrl/sim-setup.js';
import { trainStandard } from '../wmrl/train_standard.js';
import { DEFAULT_WMRL, trainWmrl } from '../wmrl/train_wmrl.js';
import { fmt, type BenchOptions, type BenchReport } from './lib/report.js';
import { cloneOnGap, sparse, vlaSplit } from '../recipes/vla.js';
import { CLONE, benchMlp } from './vla.js';

const TASK = 'reach';
const ROWS = ['grpo', 'ppo_gae', 'wmrl', 'sparse_only'] as const;
type Row = (typeof ROWS)[number];
const LABEL: Record<Row, string> = {
  grpo: 'GRPO, dense reward (oracle)',
  ppo_gae: 'PPO with a learned critic (per-step GAE), dense reward (oracle)',
  wmrl: 'WMRL, sparse success + world model',
  sparse_only: 'GRPO, sparse success only (WMRL\'s robot episodes)',
};
const SIGNAL: Record<Row, 'dense' | 'sparse'> = { grpo: 'dense', ppo_gae: 'dense', wmrl: 'sparse', sparse_only: 'sparse' };
const GAMMA = 0.99, LAMBDA = 0.95;
/** World-model pretraining for the wmrl row: the product's defaults with 1500 exploratory episodes (quick: a small model). */
const WM = { full: { wmEpisodes: 1500 }, quick: { wmEpisodes: 12, wmEpochs: 2, wmHidden: [64, 64], wmMembers: 3 } };

/** One evaluation: after `update` updates, `episodes` robot episodes spent, held-out success. */
interface Point { update: number; episodes: number; success: number }
interface Curve { points: Point[]; trainSuccess: number[]; seconds: number; updates: number; episodes: number }

/** Held-out success of the mean action on the split's held-out start states, as the trainers' `evaluate` reports it. */
const heldOutOn = (robot: Env, split: EvaluationSplit) => async (policy: Policy): Promise<Evaluation> => {
  const r = await evaluateOn(robot, policy, split.heldOutStates);
  return { success: r.success, meanReturn: r.return, episodes: split.heldOutStates.length };
};

/** The trainers' evaluation rows as a curve (the clone at update 0). */
function curveOf(rows: RunRow[], start: number, seconds: number): Curve {
  return {
    points: [{ update: 0, episodes: 0, success: start }, ...rows.filter((r) => r.evalSuccess !== undefined).map((r) => ({ update: r.update, episodes: r.robotEpisodes, success: r.evalSuccess! }))],
    trainSuccess: rows.flatMap((r) => (r.trainSuccess === null ? [] : [r.trainSuccess])),
    seconds,
    updates: rows.length,
    episodes: rows.at(-1)?.robotEpisodes ?? 0,
  };
}

/**
 * grpo / ppo_gae: on-policy RL on the robot's dense reward, written out here (the trainers score a group by one
 * number per episode; PPO's critic needs every step's reward): per prompt, G episodes from its start state in
 * lockstep, sampled actions clipped by the robot, one update per P.prompts groups.
 */
async function onPolicy(row: 'grpo' | 'ppo_gae', policy: GaussianPolicy, pgConfig: PgConfig, envs: Env[], prompts: readonly number[], P: { updates: number; prompts: number; evalEvery: number }, heldOut: () => Promise<number>, start: number, progress: (u: number) => void): Promise<Curve> {
  const D = policy.obsDim, A = policy.actDim, G = envs.length;
  const pg = await ClippedPolicyGradient.create(policy, pgConfig);
  const inp = policy.inputs();
  const critic = row === 'ppo_gae' ? await ValueCritic.create({ obsDim: D, obsMean: inp.obsMean, obsStd: inp.obsStd, seed: 0 }) : null;
  // The same policy noise generator and prompt order for both rows.
  const rng = new Rng(0), fitRng = new Rng(1);
  const curve: Curve = { points: [{ update: 0, episodes: 0, success: start }], trainSuccess: [], seconds: 0, updates: P.updates, episodes: P.updates * P.prompts * G };
  const t0 = performance.now();
  let k = 0;
  try {
    for (let u = 1; u <= P.updates; u++) {
      const obsB: number[] = [], actB: number[] = [], lpB: number[] = [], rewB: number[] = [];
      const spans: EpisodeSpan[] = [], lastObs: Float32Array[] = [];
      let succ = 0;
      for (let p = 0; p < P.prompts; p++) {
        const seed = prompts[k++ % prompts.length]!;
        const obs = envs.map((e) => e.reset(seed).state);
        const ep = envs.map(() => ({ o: [] as number[], a: [] as number[], lp: [] as number[], r: [] as number[], done: false, terminal: false, last: new Float32Array(D) }));
        while (ep.some((e) => !e.done)) {
          const live = ep.flatMap((e, i) => (e.done ? [] : [i]));
          const x = new Float32Array(live.length * D);
          live.forEach((i, r) => x.set(obs[i]!, r * D));
          const res = await policy.act(x, Float32Array.from({ length: live.length * A }, () => rng.normal()));
          live.forEach((i, r) => {
            const e = ep[i]!, a = res.action.subarray(r * A, (r + 1) * A);
            e.o.push(...obs[i]!); e.a.push(...a); e.lp.push(res.logProb[r]!);
            const s = envs[i]!.step(Float32Array.from(a, (v, j) => Math.max(envs[i]!.actionSpace.low[j]!, Math.min(envs[i]!.actionSpace.high[j]!, v))));
            e.r.push(s.reward);
            obs[i] = s.obs.state;
            if (s.terminated || s.truncated) {
              e.done = true; e.terminal = s.terminated; e.last = Float32Array.from(s.obs.state);
              if (s.info.success) succ++;
            }
          });
        }
        for (const e of ep) {
          spans.push({ start: rewB.length, length: e.r.length, terminal: e.terminal, bootstrap: 0 });
          lastObs.push(e.last);
          obsB.push(...e.o); actB.push(...e.a); lpB.push(...e.lp); rewB.push(...e.r);
        }
      }
      const M = rewB.length, O = Float32Array.from(obsB);
      let advantage: Float32Array;
      if (critic) {
        const V = await critic.predict(O), Vlast = await critic.predict(Float32Array.from(lastObs.flatMap((x) => [...x])));
        spans.forEach((s, i) => { s.bootstrap = Vlast[i]!; });
        const g = gae(rewB, V, spans, GAMMA, LAMBDA);
        let m = 0, v = 0;
        for (const x of g.advantage) m += x / M;
        for (const x of g.advantage) v += (x - m) ** 2 / M;
        advantage = g.advantage.map((x) => (x - m) / Math.sqrt(v + 1e-8));
        await critic.fit(O, g.returns, { epochs: 8, minibatch: 256, rng: fitRng });
      } else {
        advantage = new Float32Array(M);
        for (let p = 0; p < P.prompts; p++) {
          const group = spans.slice(p * G, (p + 1) * G);
          const adv = groupAdvantage(group.map((s) => rewB.slice(s.start, s.start + s.length).reduce((a, x) => a + x, 0)));
          if (adv) group.forEach((s, i) => advantage.fill(adv[i]!, s.start, s.start + s.length));
        }
      }
      await pg.update({ obs: O, action: Float32Array.from(actB), oldLogProb: Float32Array.from(lpB), advantage, weight: new Float32Array(M).fill(1) }, rng);
      curve.trainSuccess.push(succ / (P.prompts * G));
      if (u % P.evalEvery === 0) curve.points.push({ update: u, episodes: u * P.prompts * G, success: await heldOut() });
      progress(u);
    }
  } finally {
    await pg.release();
    await critic?.release();
  }
  curve.seconds = (performance.now() - t0) / 1000;
  return curve;
}

export async function run(o: BenchOptions): Promise<BenchReport> {
  const q = o.quick;
  const P = { updates: q ? 4 : 300, prompts: q ? 2 : 16, groupSize: q ? 2 : 8, evalEvery: q ? 2 : 20 };
  /** wmrl: imagined updates, their evaluations, anchor groups per update on average, model refits. */
  const W = { updates: q ? 4 : 600, evalEvery: q ? 2 : 50, anchorsPerUpdate: q ? 1 : 0.5, refitEvery: q ? 2 : 10 };
  // The clipped policy gradient every row shares: every parameter, lr 3e-4 (scratch runs at the trainers' 1e-3 moved
  // the clone by an approximate KL of up to 0.6 per update), 4 epochs of minibatches of 512 steps.
  const pgConfig: PgConfig = { ...DEFAULT_PG_CONFIG, optimizer: { lr: 3e-4, clipNorm: 0.5 }, epochs: q ? 1 : 4, minibatch: 512 };
  // An anchor group of G every other update gives few pairs: the map starts at 16 pairs, the anchor weight after 2 groups.
  const corrector = correctorConfig({ anchors: { fraction: W.anchorsPerUpdate / P.prompts, floor: 0 }, debias: { minPairs: q ? 2 : 16, refitEvery: q ? 2 : 8 }, denoise: { warmupGroups: 2 } }, DEFAULT_WMRL.corrector as CorrectorConfig);
  const total = 4 + 2 * P.updates + W.updates;
  let done = 0;
  o.progress(done, total, `${TASK}: split, behaviour cloning`);
  const split = await vlaSplit(TASK, q);
  const clone = await cloneOnGap(TASK, split, CLONE[q ? 'quick' : 'full'][TASK], benchMlp, () => {});
  const policy = clone.policy;
  const G = P.groupSize;
  const robot = await makeEnv({ task: TASK, profile: 'gap' });
  const envs: Env[] = [];
  for (let i = 0; i < G; i++) envs.push(await makeEnv({ task: TASK, profile: 'gap' }));
  const evaluate = heldOutOn(robot, split);
  const heldOut = async () => (await evaluate(policy)).success;
  const start = await heldOut();
  o.progress(++done, total, `${TASK}: clone evaluated`);
  const policy0 = policy.paramNames().map((n) => Float32Array.from(policy.store.get(n).data));
  const reset = () => policy.paramNames().forEach((n, i) => policy.store.set(n, policy0[i]!));
  const promptSeeds = split.train.slice(CLONE[q ? 'quick' : 'full'][TASK].demos);
  const curves = new Map<Row, Curve>();
  const tmp = mkdtempSync(join(tmpdir(), 'bench-rl-budget-'));
  let wmValLoss = NaN;
  try {
    for (const row of ['grpo', 'ppo_gae'] as const) {
      reset();
      curves.set(row, await onPolicy(row, policy, pgConfig, envs, promptSeeds, P, heldOut, start, (u) => o.progress(++done, total, `${TASK}: ${row} update ${u}/${P.updates}`)));
    }

    // wmrl: the product's trainer on the robot's sparse success, its episodes recorded for the refits.
    o.progress(++done, total, `${TASK}: world model`);
    const wm = await pretrainWorldModel({ ...DEFAULT_PRETRAIN, ...WM[q ? 'quick' : 'full'], task: TASK, seed: 0, onProgress: (what, k, n) => o.progress(done, total, `${TASK}: ${what} ${k}/${n}`) });
    wmValLoss = wm.wmValLoss;
    using sim = await SimPrompts.create(TASK);
    const promptSeed0 = 1_000_000;
    const prompts = new SplitPrompts(sim, promptSeeds, promptSeed0, true);
    const common = { groupSize: G, promptSeed0, seed: 0 };
    reset();
    {
      const target = sparse(await simRobotTarget({ task: TASK, profile: 'gap', robots: 1, resetSeconds: 5, seed: 0, store: join(tmp, 'wmrl.sqlite') }));
      const pg = await ClippedPolicyGradient.create(policy, pgConfig);
      const t0 = performance.now();
      try {
        const st = await trainWmrl({
          config: { ...DEFAULT_WMRL, ...common, prompts: P.prompts, updates: W.updates, evalEvery: W.evalEvery, horizon: target.maxSteps, corrector, refitEvery: W.refitEvery, robotRewards: 'success' },
          policy, pg, model: wm.model, simData: wm.simData, target, prompts, evaluate, hooks: { onUpdate: (r) => o.progress(++done, total, `${TASK}: wmrl update ${r.update}/${W.updates}`) }, warn: () => {},
        });
        curves.set('wmrl', curveOf(st.rows, start, (performance.now() - t0) / 1000));
      } finally {
        await pg.release();
        await target.close();
        await wm.model.release();
      }
    }

    // sparse_only: standard GRPO on the sparse success, one group per update, exactly wmrl's robot episodes.
    reset();
    {
      const anchors = curves.get('wmrl')!.episodes;
      if (anchors % G) throw new Error(`rl-budget bench: WMRL ran ${anchors} robot episodes, not whole groups of ${G}`);
      const updates = anchors / G;
      const target = sparse(await simRobotTarget({ task: TASK, profile: 'gap', robots: 1, resetSeconds: 5, seed: 0 }));
      const pg = await ClippedPolicyGradient.create(policy, pgConfig);
      const t0 = performance.now();
      try {
        const st = await trainStandard({ config: { ...common, prompts: 1, updates, evalEvery: Math.max(1, Math.round(updates / 10)) }, policy, pg, target, prompts, evaluate, hooks: { onUpdate: (r) => o.progress(done, total, `${TASK}: sparse_only update ${r.update}/${updates}`) } });
        curves.set('sparse_only', curveOf(st.rows, start, (performance.now() - t0) / 1000));
      } finally {
        await pg.release();
        await target.close();
      }
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
    robot.dispose();
    for (const e of envs) e.dispose();
    await policy.release();
  }
  o.progress(++done, total, 'report');

  const pct = (x: number) => `${fmt(100 * x, 2)}%`;
  const pts = (d: number) => `${d >= 0 ? '+' : ''}${fmt(100 * d, 2)} points`;
  const n = split.heldOutStates.length, perUpdate = P.prompts * G;
  const c = (row: Row) => curves.get(row)!;
  const final = (row: Row) => c(row).points.at(-1)!.success;
  const best = (row: Row) => Math.max(...c(row).points.slice(1).map((p) => p.success));
  // The last few evaluations' mean: one evaluation of 100 episodes is ±4-5 points.
  const tailOf = (row: Row) => c(row).points.slice(-Math.min(5, c(row).points.length - 1));
  const tail = (row: Row) => tailOf(row).reduce((a, p) => a + p.success, 0) / tailOf(row).length;
  const tailSpan = (row: Row) => { const t = tailOf(row); return `updates ${t[0]!.update}–${t.at(-1)!.update}`; };
  // The first evaluation at which a row is 10 points over the clone, and the robot episodes spent by then.
  const reach10 = (row: Row) => c(row).points.find((p) => p.update > 0 && p.success >= start + 0.1) ?? null;
  const trainWindow = (row: Row, first: boolean) => { const t = c(row).trainSuccess, w = Math.max(1, Math.floor(t.length / 10)); const s = first ? t.slice(0, w) : t.slice(-w); return s.reduce((a, x) => a + x, 0) / s.length; };
  const e10 = (row: Row) => reach10(row)?.episodes ?? null;
  const fewer = e10('wmrl') !== null && e10('grpo') !== null ? e10('grpo')! / Math.max(1, e10('wmrl')!) : null;
  const summary = [
    `Task ${TASK}; robot = the sim under the gap profile; the Gaussian MLP (128x128, the state alone, log-std -1) cloned from bench vla's demonstrations (${clone.steps} labelled steps, final loss ${fmt(clone.loss, 2)}) starts at ${pct(start)} on ${n} held-out start states (one evaluation's binomial standard error there: ±${fmt(100 * Math.sqrt((start * (1 - start)) / n), 2)} points). ` +
      `Every row: the same clipped policy gradient (every parameter, lr ${pgConfig.optimizer.lr}, ${pgConfig.epochs} epochs, minibatch ${pgConfig.minibatch}), groups of ${G} rollouts from the split's training seeds. ` +
      `grpo and ppo_gae: ${P.updates} updates of ${P.prompts} groups on the robot scored by its dense reward (an oracle: bench vla's robot reports only success), ${P.updates * perUpdate} robot episodes each. ` +
      `wmrl: ${W.updates} updates of ${P.prompts} imagined groups in the product's world model (pretrained on ${WM[q ? 'quick' : 'full'].wmEpisodes} exploratory episodes under randomized profiles, validation loss ${fmt(wmValLoss, 3)}), ${W.anchorsPerUpdate} anchor groups per update on average on the robot, which reports only its sparse success; context and delay identified from the anchors; the model refitted on the robot's episodes every ${W.refitEvery} updates: ${c('wmrl').episodes} robot episodes. ` +
      `sparse_only: ${c('sparse_only').updates} updates of one group on the robot scored by the same sparse success, the same ${c('sparse_only').episodes} robot episodes.`,
    `Held-out success (mean of the last evaluations): ${ROWS.map((row) => `${LABEL[row]} ${pct(tail(row))} over ${tailSpan(row)} (${pts(tail(row) - start)} over the clone; final ${pct(final(row))}, best ${pct(best(row))})`).join('; ')}.`,
    `First evaluation 10 points over the clone: ${ROWS.map((row) => { const p = reach10(row); return `${row} ${p === null ? 'never' : `update ${p.update} (${p.episodes} robot episodes)`}`; }).join(', ')}` +
      (fewer === null ? '.' : `: wmrl spent ${fmt(fewer, 3)}x fewer robot episodes than grpo to get there, with the sparse success where grpo had the dense reward.`),
    `Sampled-action success of the robot's training episodes (the policy's noise included; wmrl's are its anchors), first and last tenth of the updates: ${ROWS.map((row) => `${row} ${pct(trainWindow(row, true))} → ${pct(trainWindow(row, false))}`).join(', ')}. Compute: ${ROWS.map((row) => `${row} ${fmt(c(row).seconds, 3)} s`).join(', ')}.`,
  ].join('\n');
  const result: Record<string, number> = { clone: start };
  for (const row of ROWS) {
    result[row] = tail(row);
    result[`${row}_final`] = final(row);
    result[`${row}_best`] = best(row);
    result[`${row}_episodes`] = c(row).episodes;
    result[`${row}_episodes_to_10pts`] = e10(row) ?? -1;
  }
  const xMax = Math.max(...ROWS.map((row) => c(row).episodes));
  return {
    title: 'Robot-episode budget on the gap robot: GRPO and PPO on the dense reward, WMRL and GRPO on the sparse success, from bench vla\'s clone (reach)',
    summary,
    header: ['row', 'robot signal', 'updates', 'robot episodes', 'held-out success (last evaluations)', 'final', 'best', 'robot episodes to +10 points'],
    rows: ROWS.map((row) => [LABEL[row], SIGNAL[row], String(c(row).updates), String(c(row).episodes), pct(tail(row)), pct(final(row)), pct(best(row)), e10(row) === null ? 'never' : String(e10(row))]),
    plot: {
      title: `Held-out success of the mean action against robot episodes, ${TASK}, gap robot`,
      xLabel: 'robot episodes (log scale)',
      yLabel: 'success (%)',
      logX: true,
      lines: [
        ...ROWS.map((row) => ({ label: row, points: c(row).points.filter((p) => p.episodes > 0).map((p) => [p.episodes, 100 * p.success] as [number, number]) })),
        { label: 'clone', points: [[Math.min(...ROWS.flatMap((row) => c(row).points.filter((p) => p.episodes > 0).map((p) => p.episodes))), 100 * start], [xMax, 100 * start]] as Array<[number, number]> },
      ],
    },
    result,
  };
}
