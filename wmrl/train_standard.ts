// Standard GRPO on a robot: every group of every update is executed on the robot. The baseline that
// train_wmrl.ts changes; diff the two files to see exactly what WMRL adds.
//
// Per update: B prompts (seeded start states) → G policy episodes each on the robot (safety layer,
// recorded in the store, charged to the robot clock) → scores = the episodes' real returns →
// group-standardized advantages → clipped policy-gradient update → evaluate every few updates.
import { join } from 'node:path';
import { Rng, writeFileAtomic } from '../nn/index.js';
import type { Policy } from '../policies/types.js';
import type { ClippedPolicyGradient } from '../policies/pg.js';
import { groupAdvantages, DEFAULT_ADVANTAGE_CONFIG } from './advantages.js';
import { pgBatch, robotEpisode, type Evaluation, type RobotEpisode, type RobotTarget, type PromptSource } from './embodied.js';
import { loadRunState, saveRunState, type RunHooks, type RunRow, type RunState } from './run-state.js';

export interface StandardConfig {
  updates: number;
  /** Prompts (groups) per update, B. */
  prompts: number;
  /** Rollouts per prompt, G. */
  groupSize: number;
  /** Evaluate the policy every this many updates (and after the last). */
  evalEvery: number;
  /** First seed of the training prompts; update u uses seeds seed0 + u·B + b. */
  promptSeed0: number;
  seed: number;
}

export interface StandardRun {
  config: StandardConfig;
  policy: Policy;
  pg: ClippedPolicyGradient;
  target: RobotTarget;
  prompts: PromptSource;
  /** The policy's true success rate (held-out start states on the robot's profile). */
  /** Held-out measurement of true success; omit where none exists beside the robot (the robot's own episodes are then the measure). */
  evaluate?: (policy: Policy) => Promise<Evaluation>;
  /** Checkpoint folder; with `resume`, the run continues from the state saved there. */
  outDir?: string;
  resume?: boolean;
  hooks?: RunHooks;
}

export async function trainStandard(run: StandardRun): Promise<RunState> {
  const { config: c, policy, pg, target, prompts } = run;
  const D = policy.obsDim, A = policy.actDim;
  const rng = new Rng(c.seed);
  let state: RunState = { algo: 'standard', update: 0, rng: rng.getState(), clock: target.clock.state(), rows: [], finalObs: {}, episodeIds: [] };
  if (run.resume && run.outDir) {
    state = loadRunState(run.outDir, 'standard', pg);
    rng.setState(state.rng);
    target.clock.restore(state.clock);
  }
  const t0 = performance.now();

  for (let u = state.update; u < c.updates; u++) {
    run.hooks?.signal?.throwIfAborted();
    // 1. Every group on the robot.
    const episodes: RobotEpisode[] = [];
    const scores: number[][] = [];
    for (let b = 0; b < c.prompts; b++) {
      const prompt = prompts.get(c.promptSeed0 + u * c.prompts + b);
      const group: number[] = [];
      for (let k = 0; k < c.groupSize; k++) {
        const ep = await robotEpisode(target, policy, prompt.seed, rng, `standard-${u}`);
        run.hooks?.onEpisode?.(ep, 'train');
        episodes.push(ep);
        state.episodeIds.push(ep.id);
        group.push(ep.return);
      }
      scores.push(group);
    }

    // 2. Advantages within each group; the update.
    const adv = groupAdvantages(scores, DEFAULT_ADVANTAGE_CONFIG);
    const batch = pgBatch(episodes, adv.advantages.flat(), episodes.map(() => 1), D, A);
    const stats = batch ? await pg.update(batch, rng) : null;

    // 3. Measure and log.
    const row: RunRow = {
      update: u + 1,
      robotSeconds: target.clock.robotSeconds,
      robotWallSeconds: target.clock.wallSeconds,
      robotEpisodes: target.clock.episodes,
      computeSeconds: (performance.now() - t0) / 1000,
      trainSuccess: episodes.filter((e) => e.success).length / episodes.length,
      realGroups: c.prompts,
      groups: c.prompts,
      loss: stats?.loss ?? null,
      approxKl: stats?.approxKl ?? null,
      refKl: stats?.refKl ?? null,
    };
    if (run.evaluate && ((u + 1) % c.evalEvery === 0 || u + 1 === c.updates)) {
      const ev = await run.evaluate(policy);
      row.evalSuccess = ev.success;
      row.evalReturn = ev.meanReturn;
    }
    state.rows.push(row);
    state.update = u + 1;
    state.rng = rng.getState();
    state.clock = target.clock.state();
    if (run.outDir) saveRunState(run.outDir, state, pg);
    run.hooks?.onUpdate?.(row);
  }
  if (run.outDir) writeFileAtomic(join(run.outDir, 'history.json'), [JSON.stringify(state.rows, null, 1)]);
  return state;
}
