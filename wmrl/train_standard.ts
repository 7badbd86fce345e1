// Standard GRPO on a robot: every group of every update is executed on the robot. The baseline that
// train_wmrl.ts changes; diff the two files to see exactly what WMRL adds.
//
// Per update: B prompts (seeded start states) → StandardGrpo.step (wmrl/grpo.ts): every group's G policy
// episodes run on the robot (safety layer, recorded in the store, charged to the robot clock), scored by
// their real returns → group-standardized advantages → clipped policy-gradient update → evaluate every few updates.
// With an evaluation, the starting policy is evaluated before update 1 and the run hands back the parameters of the
// evaluation it keeps (wmrl/keep-best.ts).
import { join } from 'node:path';
import { Rng, writeFileAtomic } from '../nn/index.js';
import type { Policy } from '../policies/types.js';
import type { ClippedPolicyGradient } from '../policies/pg.js';
import { DEFAULT_GRPO_CONFIG, StandardGrpo } from './grpo.js';
import { groupEpisodes, pgBatch, type Evaluation, type RobotEpisode, type RobotTarget, type Prompt, type PromptSource, type Trajectory } from './embodied.js';
import { KeepBest, type KeepBestConfig } from './keep-best.js';
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
  /** Which evaluation's parameters, the start's included, the run hands back as its final policy (wmrl/keep-best.ts DEFAULT_KEEP_BEST: the latest within one standard error of the best); false: the last update's. */
  keepBest?: KeepBestConfig | false;
}

export interface StandardRun {
  config: StandardConfig;
  policy: Policy;
  pg: ClippedPolicyGradient;
  target: RobotTarget;
  prompts: PromptSource;
  /**
   * Measurement of true success: held out in the sim twin, or on the robot itself (robotEvaluation); omit where there is
   * none (the robot's training episodes are then the only measure, and the run hands back its last update's policy).
   */
  evaluate?: (policy: Policy) => Promise<Evaluation>;
  /** Checkpoint folder; with `resume`, the run continues from the state saved there. */
  outDir?: string;
  resume?: boolean;
  hooks?: RunHooks;
}

/** A rollout a scorer sees: group b, member k of this update. */
interface Ref {
  b: number;
  k: number;
}

export async function trainStandard(run: StandardRun): Promise<RunState> {
  const { config: c, policy, pg, target, prompts } = run;
  const D = policy.obsDim, A = policy.actDim, G = c.groupSize;
  const rng = new Rng(c.seed);
  let state: RunState = { algo: 'standard', update: 0, rng: rng.getState(), clock: target.clock.state(), rows: [], finalObs: {}, episodeIds: [] };
  if (run.resume && run.outDir) {
    state = loadRunState(run.outDir, 'standard', pg);
    rng.setState(state.rng);
    target.clock.restore(state.clock);
  }

  // This update's robot episodes, group b's at b.
  let real = new Map<number, RobotEpisode[]>();
  let update = state.update;
  // This update's prompts, group b's at b: its start state, its seed on the robot, its instruction.
  let updatePrompts: Prompt[] = [];
  const trusted = {
    async score(group: readonly Ref[]) {
      const b = group[0]!.b;
      const prompt = updatePrompts[b]!;
      const eps = await groupEpisodes(target, policy, prompt.seed, group.length, rng, `standard-${update}`, {
        ended: (ep) => {
          run.hooks?.onEpisode?.(ep, 'train');
          state.episodeIds.push(ep.id);
        },
      });
      real.set(b, eps);
      return eps.map((ep) => ep.return);
    },
  };
  // One group at a time: the episodes run, and draw the policy's noise, in the groups' order.
  const grpo = new StandardGrpo<Ref>({ ...DEFAULT_GRPO_CONFIG, maxInFlight: 1 }, trusted);
  const keep = await KeepBest.begin(run, state, c.keepBest);
  const t0 = performance.now();

  try {
    for (let u = state.update; u < c.updates; u++) {
      run.hooks?.signal?.throwIfAborted();
      update = u;
      real = new Map();
      updatePrompts = Array.from({ length: c.prompts }, (_, b) => prompts.get(c.promptSeed0 + u * c.prompts + b));

      // Scores → advantages: every group on the robot.
      const groups: Ref[][] = Array.from({ length: c.prompts }, (_, b) => Array.from({ length: G }, (_, k) => ({ b, k })));
      const { advantages, weights } = await grpo.step(groups);

      // The update: every group learns from its real episodes.
      const trajs: Trajectory[] = [], adv: Array<number | null> = [], w: number[] = [];
      for (const [b, g] of groups.entries()) {
        for (let k = 0; k < g.length; k++) {
          trajs.push(real.get(b)![k]!);
          adv.push(advantages[b]![k]!);
          w.push(weights[b]![k]!);
        }
      }
      const batch = pgBatch(trajs, adv, w, D, A);
      const stats = batch ? await pg.update(batch, rng) : null;

      // Measure and log.
      const realEps = [...real.values()].flat();
      const row: RunRow = {
        update: u + 1,
        robotSeconds: target.clock.robotSeconds,
        robotWallSeconds: target.clock.wallSeconds,
        robotEpisodes: target.clock.episodes,
        computeSeconds: (performance.now() - t0) / 1000,
        trainSuccess: realEps.length ? realEps.filter((e) => e.success).length / realEps.length : null,
        realGroups: real.size,
        groups: c.prompts,
        loss: stats?.loss ?? null,
        approxKl: stats?.approxKl ?? null,
        refKl: stats?.refKl ?? null,
      };
      if (run.evaluate && ((u + 1) % c.evalEvery === 0 || u + 1 === c.updates)) keep.observe(row, await run.evaluate(policy), target.clock);
      state.rows.push(row);
      state.update = u + 1;
      state.rng = rng.getState();
      state.clock = target.clock.state();
      if (run.outDir) {
        keep.save();
        saveRunState(run.outDir, state, pg);
      }
      run.hooks?.onUpdate?.(row);
    }
  } finally {
    keep.restore();
  }
  if (run.outDir) writeFileAtomic(join(run.outDir, 'history.json'), [JSON.stringify(state.rows, null, 1)]);
  return state;
}
