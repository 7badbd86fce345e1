// PPO on a robot: every group of every update is executed on the robot, as in standard GRPO (train_standard.ts), but
// each step is credited by a learned value baseline (GAE) instead of its group's standardized return. The baseline
// that asks whether a critic, not a world model, is what GRPO on the robot lacks; diff against train_standard.ts to
// see exactly what PPO changes.
//
// Per update: B prompts (seeded start states) → every prompt's G policy episodes run on the robot (safety layer,
// recorded in the store, charged to the robot clock), in the order standard GRPO runs them → the critic's V(s) of
// every step (policies/critic.ts) → GAE advantages per step, standardized over the batch → clipped policy-gradient
// update → the critic fitted to the λ-returns → evaluate every few updates. With an evaluation, the starting policy is
// evaluated before update 1 and the run hands back the parameters of the evaluation it keeps (wmrl/keep-best.ts).
import { join } from 'node:path';
import { Rng, writeFileAtomic } from '../nn/index.js';
import { ValueCritic, gae, type EpisodeSpan } from '../policies/critic.js';
import type { ClippedPolicyGradient, PgBatch } from '../policies/pg.js';
import { robotEpisode, type RobotEpisode, type Prompt } from './embodied.js';
import { KeepBest } from './keep-best.js';
import { saveRunState, type RunRow, type RunState } from './run-state.js';
import type { StandardConfig, StandardRun } from './train_standard.js';

/** Standard GRPO's loop (updates, prompts, groups, evaluation, seeds) and what PPO adds to it: the critic and GAE. */
export interface PpoConfig extends StandardConfig {
  /** Discount γ and GAE's λ. */
  gamma: number;
  lambda: number;
  criticHidden: number[];
  criticLr: number;
  /** Passes of the critic's regression over each update's steps, in minibatches of this many steps. */
  criticEpochs: number;
  criticMinibatch: number;
}

export const DEFAULT_PPO: Omit<PpoConfig, keyof StandardConfig> = {
  gamma: 0.99,
  lambda: 0.95,
  criticHidden: [128, 128],
  criticLr: 1e-3,
  criticEpochs: 10,
  criticMinibatch: 256,
};

export interface PpoRun extends Omit<StandardRun, 'config' | 'resume'> {
  config: PpoConfig;
}

export async function trainPpo(run: PpoRun): Promise<RunState> {
  const { config: c, policy, pg, target, prompts } = run;
  const D = policy.obsDim, A = policy.actDim, G = c.groupSize;
  const rng = new Rng(c.seed);
  const state: RunState = { algo: 'ppo', update: 0, rng: rng.getState(), clock: target.clock.state(), rows: [], finalObs: {}, episodeIds: [] };
  const inputs = policy.inputs();
  if (inputs.image || inputs.instruction || inputs.features) throw new Error(`ppo: the critic reads the observation vector alone; the ${policy.kind} policy reads more`);
  const keep = await KeepBest.begin(run, state, c.keepBest);
  // The critic sees the observation as the policy does; its targets are in units of the first update's returns, so
  // its regression starts near scale whatever the task's reward magnitude.
  const critic = await ValueCritic.create({ obsDim: D, obsMean: inputs.obsMean, obsStd: inputs.obsStd, hidden: c.criticHidden, optimizer: { lr: c.criticLr, clipNorm: 1 }, seed: c.seed });
  let valueScale = 0;
  const t0 = performance.now();

  try {
    for (let u = 0; u < c.updates; u++) {
      run.hooks?.signal?.throwIfAborted();
      const updatePrompts: Prompt[] = Array.from({ length: c.prompts }, (_, b) => prompts.get(c.promptSeed0 + u * c.prompts + b));

      // Every group on the robot, one episode at a time, in standard GRPO's order.
      const eps: RobotEpisode[] = [];
      for (const prompt of updatePrompts) {
        for (let k = 0; k < G; k++) {
          const ep = await robotEpisode(target, policy, prompt.seed, rng, `ppo-${u}`);
          run.hooks?.onEpisode?.(ep, 'train');
          state.episodeIds.push(ep.id);
          eps.push(ep);
        }
      }

      // Values of every state (the one after the last step included: a time-limited episode bootstraps from it).
      const used = eps.filter((ep) => ep.steps > 0);
      const M = used.reduce((s, ep) => s + ep.steps, 0);
      let stats: Awaited<ReturnType<ClippedPolicyGradient['update']>> | null = null;
      let criticLoss: number | null = null;
      if (M > 0) {
        const allObs = new Float32Array(used.reduce((s, ep) => s + (ep.steps + 1) * D, 0));
        let at = 0;
        for (const ep of used) { allObs.set(ep.obs.subarray(0, (ep.steps + 1) * D), at); at += (ep.steps + 1) * D; }
        if (valueScale === 0) valueScale = firstScale(used, c.gamma);
        const values = (await critic.predict(allObs)).map((v) => v * valueScale);
        const obs = new Float32Array(M * D), action = new Float32Array(M * A), oldLogProb = new Float32Array(M), reward = new Float32Array(M), value = new Float32Array(M);
        const spans: EpisodeSpan[] = [];
        let m = 0, row = 0;
        for (const ep of used) {
          const T = ep.steps;
          obs.set(ep.obs.subarray(0, T * D), m * D);
          action.set(ep.action.subarray(0, T * A), m * A);
          oldLogProb.set(ep.logProb.subarray(0, T), m);
          reward.set(ep.reward.subarray(0, T), m);
          value.set(values.subarray(row, row + T), m);
          // An episode that ended before the time limit, or succeeded at it, ended in a terminal state.
          spans.push({ start: m, length: T, terminal: ep.success || T < target.maxSteps, bootstrap: values[row + T]! });
          m += T;
          row += T + 1;
        }
        const { advantage, returns } = gae(reward, value, spans, c.gamma, c.lambda);
        const batch: PgBatch = { obs, action, oldLogProb, advantage: standardized(advantage), weight: new Float32Array(M).fill(1) };
        stats = await pg.update(batch, rng);
        criticLoss = await critic.fit(obs, returns.map((r) => r / valueScale), { epochs: c.criticEpochs, minibatch: c.criticMinibatch, rng });
      }

      // Measure and log.
      const row: RunRow = {
        update: u + 1,
        robotSeconds: target.clock.robotSeconds,
        robotWallSeconds: target.clock.wallSeconds,
        robotEpisodes: target.clock.episodes,
        computeSeconds: (performance.now() - t0) / 1000,
        trainSuccess: eps.length ? eps.filter((e) => e.success).length / eps.length : null,
        realGroups: c.prompts,
        groups: c.prompts,
        loss: stats?.loss ?? null,
        approxKl: stats?.approxKl ?? null,
        refKl: stats?.refKl ?? null,
        criticLoss,
      };
      if (run.evaluate && ((u + 1) % c.evalEvery === 0 || u + 1 === c.updates)) keep.observe(row, await run.evaluate(policy), target.clock);
      state.rows.push(row);
      state.update = u + 1;
      state.rng = rng.getState();
      state.clock = target.clock.state();
      // The policy and its optimizer, and the rows; the critic is not kept, so a PPO run does not resume.
      if (run.outDir) {
        keep.save();
        saveRunState(run.outDir, state, pg);
      }
      run.hooks?.onUpdate?.(row);
    }
  } finally {
    keep.restore();
    await critic.release();
  }
  if (run.outDir) writeFileAtomic(join(run.outDir, 'history.json'), [JSON.stringify(state.rows, null, 1)]);
  return state;
}

/** The spread of the first update's discounted returns-to-go (at least 1e-3): the critic's unit. */
function firstScale(eps: readonly RobotEpisode[], gamma: number): number {
  const togo: number[] = [];
  for (const ep of eps) {
    let acc = 0;
    for (let t = ep.steps - 1; t >= 0; t--) togo.push((acc = ep.reward[t]! + gamma * acc));
  }
  const mu = togo.reduce((a, b) => a + b, 0) / togo.length;
  return Math.max(1e-3, Math.sqrt(togo.reduce((a, b) => a + (b - mu) ** 2, 0) / togo.length));
}

/** Advantages with mean 0 and standard deviation 1 over the batch (PPO's per-batch normalization). */
function standardized(x: Float32Array): Float32Array {
  const mu = x.reduce((a, b) => a + b, 0) / x.length;
  const sd = Math.sqrt(x.reduce((a, b) => a + (b - mu) ** 2, 0) / x.length);
  return x.map((v) => (v - mu) / (sd + 1e-8));
}
