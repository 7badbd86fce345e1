// Behaviour cloning with more demonstrations at standard GRPO's robot time: the robot time every update of standard
// GRPO (train_standard.ts) spends at most, spent instead on demonstrator episodes on the robot, and the clone refitted
// on every demonstration so far. The baseline that asks whether the robot hours are better spent demonstrating than
// reinforcing; diff against train_standard.ts to see what replaces the policy-gradient update.
//
// Per update: its budget — B·G episodes of the task's full length with their resets, the most standard GRPO's update
// spends — goes to demonstrator episodes on the robot (safety layer, recorded in the store, charged to the robot
// clock), each from the next training prompt's start state while a full-length one still fits: the demonstrator
// (a teleoperator's stand-in, told the robot's latency) labels every step, the robot runs its action with noise injected
// as pretraining's demonstrations did → every evalEvery updates and after the last, the clone refitted on the
// demonstrations it was cloned from and the robot's → evaluate. With an evaluation, the starting policy is evaluated
// before update 1 and the run hands back the parameters of the evaluation it keeps (wmrl/keep-best.ts).
import { join } from 'node:path';
import { Rng, writeFileAtomic } from '../nn/index.js';
import { buildObservation, layoutOf } from '../common/layout.js';
import { runEpisode } from '../hardware/record.js';
import { behaviourClone, type Demonstrations } from '../policies/bc.js';
import type { Demonstrator } from '../sim/types.js';
import { KeepBest } from './keep-best.js';
import type { RunRow, RunState } from './run-state.js';
import type { StandardConfig, StandardRun } from './train_standard.js';

/** Standard GRPO's loop (updates, prompts, groups: the robot time per update; evaluation; seeds) and the refit. */
export interface BcMoreConfig extends StandardConfig {
  /** Standard deviation of the noise injected into the action the robot runs (the label stays the demonstrator's). */
  noise: number;
  /** Passes of behaviour cloning over all the demonstrations at each refit, its minibatch and step. */
  epochs: number;
  batchSize: number;
  lr: number;
}

export const DEFAULT_BC_MORE: Omit<BcMoreConfig, keyof StandardConfig> = { noise: 0.3, epochs: 20, batchSize: 256, lr: 1e-3 };

export interface BcMoreRun extends Omit<StandardRun, 'config' | 'pg' | 'resume'> {
  config: BcMoreConfig;
  /** The demonstrations the policy was cloned from (state, label): the refits keep them. */
  demos: Demonstrations;
  /** A fresh demonstrator for an episode on this robot. */
  demonstrator: () => Demonstrator;
}

export async function trainBcMore(run: BcMoreRun): Promise<RunState> {
  const { config: c, policy, target, prompts } = run;
  const D = policy.obsDim, A = policy.actDim;
  if (policy.chunk !== 1) throw new Error(`bc: one action per control step (chunk 1); the ${policy.kind} policy gives chunks of ${policy.chunk}`);
  if (run.demos.obs.length % D || run.demos.action.length !== (run.demos.obs.length / D) * A) throw new Error(`bc: the demonstrations hold ${run.demos.obs.length} state values and ${run.demos.action.length} action values for ${D}-entry states and ${A}-entry actions`);
  const rng = new Rng(c.seed);
  const state: RunState = { algo: 'bc', update: 0, rng: rng.getState(), clock: target.clock.state(), rows: [], finalObs: {}, episodeIds: [] };
  const layout = layoutOf(target.robot.spec);
  const hz = target.robot.spec.controlHz;
  // The robot time of one full-length episode with its reset, and of standard GRPO's update at most.
  const fullEpisode = target.maxSteps / hz + target.clock.resetSeconds;
  const budget = c.prompts * c.groupSize * fullEpisode;
  const bound = (v: number) => Math.max(-1, Math.min(1, v));
  const obs: number[] = Array.from(run.demos.obs), label: number[] = Array.from(run.demos.action);
  let next = 0, loss: number | null = null;
  const keep = await KeepBest.begin(run, state, c.keepBest);
  const t0 = performance.now();

  try {
    for (let u = 0; u < c.updates; u++) {
      run.hooks?.signal?.throwIfAborted();
      let episodes = 0, successes = 0;
      // Demonstrations while a full-length episode still fits in the robot time standard GRPO has had by this update's end.
      while (target.clock.robotSeconds + fullEpisode <= (u + 1) * budget + 1e-9) {
        const prompt = prompts.get(c.promptSeed0 + next++);
        const demo = run.demonstrator();
        const out = await runEpisode({
          robot: target.robot,
          reset: { seed: prompt.seed },
          maxSteps: target.maxSteps,
          store: target.store,
          realTime: target.realTime,
          signal: target.signal,
          meta: { ...target.meta, policyVersion: `demonstrator-${u}`, extra: { seed: prompt.seed } },
          policy: async (o) => {
            const x = buildObservation(layout, o);
            if (x.length !== D) throw new Error(`bc: the robot's observation has ${x.length} entries, the policy takes ${D}`);
            const a = demo.act({ state: x, instruction: o.instruction ?? prompt.instruction }).map(bound);
            obs.push(...x);
            label.push(...a);
            const executed = a.map((v) => bound(v + c.noise * rng.normal()));
            demo.executed(executed);
            return executed;
          },
          score: target.outcome,
        });
        target.clock.charge(out.steps, hz);
        state.episodeIds.push(out.id);
        episodes++;
        if (out.success) successes++;
      }

      // The refit where the clone is measured: every demonstration so far, the pretraining's and the robot's.
      const measured = (u + 1) % c.evalEvery === 0 || u + 1 === c.updates;
      if (measured) {
        loss = await behaviourClone(policy, { obs: Float32Array.from(obs), action: Float32Array.from(label) }, { epochs: c.epochs, batchSize: c.batchSize, optimizer: { lr: c.lr, clipNorm: 1 }, seed: c.seed + u });
      }

      // Measure and log.
      const row: RunRow = {
        update: u + 1,
        robotSeconds: target.clock.robotSeconds,
        robotWallSeconds: target.clock.wallSeconds,
        robotEpisodes: target.clock.episodes,
        computeSeconds: (performance.now() - t0) / 1000,
        trainSuccess: episodes ? successes / episodes : null,
        realGroups: episodes / c.groupSize,
        groups: c.prompts,
        loss,
        approxKl: null,
        refKl: null,
      };
      if (run.evaluate && measured) keep.observe(row, await run.evaluate(policy), target.clock);
      state.rows.push(row);
      state.update = u + 1;
      state.rng = rng.getState();
      state.clock = target.clock.state();
      run.hooks?.onUpdate?.(row);
    }
  } finally {
    keep.restore();
  }
  if (run.outDir) writeFileAtomic(join(run.outDir, 'history.json'), [JSON.stringify(state.rows, null, 1)]);
  return state;
}
