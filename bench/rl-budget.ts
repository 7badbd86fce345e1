// rl-budget: how many robot episodes on-policy RL needs to lift bench vla's clone on reach, and whether per-step
// credit changes that. vla-ceiling found that 24 updates of the GRPO the trainers use (one advantage per episode,
// standardized within its group) barely move the clone even under the robot's dense reward (an oracle). Here,
// with a policy cheap enough to run for hundreds of updates — the Gaussian MLP over the state that vla-ceiling
// clones from the same demonstrations (bench/vla.ts cloneOnGap) — the same oracle drives two learners from the
// same clone, with the same prompts, group size, seeded policy-noise generator and clipped policy gradient:
//   grpo:    GRPO: each episode's dense return standardized within its group, given to every one of its steps;
//   ppo_gae: PPO's per-step advantages from a learned critic (policies/critic.ts: generalized advantage
//            estimation, gamma 0.99, lambda 0.95, advantages standardized over the batch), the critic refitted
//            to the lambda-returns after every batch.
// Both run on the gap robot (the sim under the gap profile, actions executed 3 steps late); success = the mean
// action on bench vla's held-out start states, every few updates.
import { evaluateOn } from '../policies/demos.js';
import { ValueCritic, gae, type EpisodeSpan } from '../policies/critic.js';
import { ClippedPolicyGradient, DEFAULT_PG_CONFIG, type PgConfig } from '../policies/pg.js';
import { Rng } from '../nn/index.js';
import { makeEnv, type Env } from '../sim/index.js';
import { groupAdvantage } from '../wmrl/advantages.js';
import { fmt, type BenchOptions, type BenchReport } from './lib/report.js';
import { CLONE, benchMlp, cloneOnGap, vlaSplit } from './vla.js';

const TASK = 'reach';
const ROWS = ['grpo', 'ppo_gae'] as const;
type Row = (typeof ROWS)[number];
const LABEL: Record<Row, string> = {
  grpo: 'GRPO (one standardized episode return per group member)',
  ppo_gae: 'PPO with a learned critic (per-step GAE advantages)',
};
const GAMMA = 0.99, LAMBDA = 0.95;

export async function run(o: BenchOptions): Promise<BenchReport> {
  const q = o.quick;
  const P = { updates: q ? 4 : 300, prompts: q ? 2 : 16, groupSize: q ? 2 : 8, evalEvery: q ? 2 : 20 };
  // The clipped policy gradient both rows share: every parameter, lr 3e-4 (scratch runs at the trainers' 1e-3 moved
  // the clone by an approximate KL of up to 0.6 per update), 4 epochs of minibatches of 512 steps.
  const pgConfig: PgConfig = { ...DEFAULT_PG_CONFIG, optimizer: { lr: 3e-4, clipNorm: 0.5 }, epochs: q ? 1 : 4, minibatch: 512 };
  const total = 2 + ROWS.length * P.updates;
  let done = 0;
  o.progress(done, total, `${TASK}: split, behaviour cloning`);
  const split = await vlaSplit(TASK, q);
  const clone = await cloneOnGap(TASK, split, q, benchMlp, () => {});
  const policy = clone.vla;
  const D = policy.obsDim, A = policy.actDim, G = P.groupSize;
  const robot = await makeEnv({ task: TASK, profile: 'gap' });
  const envs: Env[] = [];
  for (let i = 0; i < G; i++) envs.push(await makeEnv({ task: TASK, profile: 'gap' }));
  const heldOut = async () => (await evaluateOn(robot, policy, split.heldOutStates)).success;
  const start = await heldOut();
  o.progress(++done, total, `${TASK}: clone evaluated`);
  const policy0 = policy.paramNames().map((n) => Float32Array.from(policy.store.get(n).data));
  const prompts = split.train.slice(CLONE[q ? 'quick' : 'full'][TASK].demos);
  const curves = new Map<Row, { success: Array<[number, number]>; trainSuccess: number[]; seconds: number }>();
  try {
    for (const row of ROWS) {
      policy.paramNames().forEach((n, i) => policy.store.set(n, policy0[i]!));
      const pg = await ClippedPolicyGradient.create(policy, pgConfig);
      const inp = policy.inputs();
      const critic = row === 'ppo_gae' ? await ValueCritic.create({ obsDim: D, obsMean: inp.obsMean, obsStd: inp.obsStd, seed: 0 }) : null;
      // The same policy noise and prompt order for both rows.
      const rng = new Rng(0), fitRng = new Rng(1);
      const curve = { success: [[0, start]] as Array<[number, number]>, trainSuccess: [] as number[], seconds: 0 };
      const t0 = performance.now();
      let k = 0;
      try {
        for (let u = 1; u <= P.updates; u++) {
          // Rollouts: per prompt, G episodes from its start state in lockstep, sampled actions clipped by the robot.
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
          if (u % P.evalEvery === 0) curve.success.push([u, await heldOut()]);
          o.progress(++done, total, `${TASK}: ${row} update ${u}/${P.updates}`);
        }
      } finally {
        await pg.release();
        await critic?.release();
      }
      curve.seconds = (performance.now() - t0) / 1000;
      curves.set(row, curve);
    }
  } finally {
    robot.dispose();
    for (const e of envs) e.dispose();
    await policy.release();
  }
  o.progress(++done, total, 'report');

  const pct = (x: number) => `${fmt(100 * x, 2)}%`;
  const pts = (d: number) => `${d >= 0 ? '+' : ''}${fmt(100 * d, 2)} points`;
  const n = split.heldOutStates.length, perUpdate = P.prompts * G;
  const c = (row: Row) => curves.get(row)!;
  const final = (row: Row) => c(row).success.at(-1)![1];
  const best = (row: Row) => Math.max(...c(row).success.slice(1).map(([, s]) => s));
  // The last few evaluations' mean: one evaluation of 100 episodes is ±4-5 points.
  const tail = (row: Row) => { const t = c(row).success.slice(-Math.min(5, c(row).success.length - 1)); return t.reduce((a, [, s]) => a + s, 0) / t.length; };
  const tailN = Math.min(5, c('grpo').success.length - 1);
  // The first evaluation at which a row is 10 points over the clone, and the robot episodes spent by then.
  const reach10 = (row: Row) => c(row).success.find(([u, s]) => u > 0 && s >= start + 0.1)?.[0] ?? null;
  const trainWindow = (row: Row, first: boolean) => { const t = c(row).trainSuccess, w = Math.max(1, Math.floor(t.length / 10)); const s = first ? t.slice(0, w) : t.slice(-w); return s.reduce((a, x) => a + x, 0) / s.length; };
  const evals = c('grpo').success.map(([u]) => u);
  const summary = [
    `Task ${TASK}; robot = the sim under the gap profile; the Gaussian MLP (128x128, the state alone, log-std -1) cloned from bench vla's demonstrations (${clone.steps} labelled steps, final loss ${fmt(clone.loss, 2)}) starts at ${pct(start)} on ${n} held-out start states. ` +
      `Both rows: ${P.updates} updates of ${P.prompts} prompts x ${G} rollouts on the robot, scored by its dense reward (an oracle: bench vla's robot reports only success), every parameter, lr ${pgConfig.optimizer.lr}, ${pgConfig.epochs} epochs, minibatch ${pgConfig.minibatch}: ${P.updates * perUpdate} robot episodes each.`,
    `After ${P.updates} updates (mean of the last ${tailN} evaluations, ${P.evalEvery * tailN} updates): ${ROWS.map((row) => `${LABEL[row]} ${pct(tail(row))} (${pts(tail(row) - start)} over the clone; final ${pct(final(row))}, best ${pct(best(row))})`).join('; ')}.`,
    `First evaluation 10 points over the clone: ${ROWS.map((row) => { const u = reach10(row); return `${row} ${u === null ? 'never' : `update ${u} (${u * perUpdate} robot episodes)`}`; }).join(', ')}.`,
    `Sampled-action training success (the policy's noise included), first and last tenth of the updates: ${ROWS.map((row) => `${row} ${pct(trainWindow(row, true))} → ${pct(trainWindow(row, false))}`).join(', ')}. Compute: ${ROWS.map((row) => `${row} ${fmt(c(row).seconds, 3)} s`).join(', ')}.`,
  ].join('\n');
  const result: Record<string, number> = { clone: start };
  for (const row of ROWS) {
    result[row] = tail(row);
    result[`${row}_final`] = final(row);
    result[`${row}_best`] = best(row);
    result[`${row}_episodes_to_10pts`] = reach10(row) === null ? -1 : reach10(row)! * perUpdate;
  }
  return {
    title: 'On-policy RL budget on the gap robot: GRPO against PPO with a learned critic, from bench vla\'s clone (reach)',
    summary,
    header: ['row', ...evals.map((u) => (u === 0 ? 'start' : `update ${u}`)), 'robot episodes'],
    rows: ROWS.map((row) => [LABEL[row], ...c(row).success.map(([, s]) => pct(s)), String(P.updates * perUpdate)]),
    plot: {
      title: `Held-out success of the mean action, ${TASK}, gap robot, dense-reward oracle`,
      xLabel: 'update',
      yLabel: 'success (%)',
      lines: ROWS.map((row) => ({ label: row, points: c(row).success.map(([u, s]) => [u, 100 * s] as [number, number]) })),
    },
    result,
  };
}
