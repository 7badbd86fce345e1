// The VLA recipe (recipes/vla.ts) as a service job, `vla-train` (POST /api/runs/vla-train): the VLA behaviour-cloned
// from the task's robust demonstrator on the gap sim, the world model pretrained, then WMRL whose robot episodes run on
// the service's own robot through its safety layer (the viewer's e-stop stops them), recorded in the service's store
// and streamed as real frames; metrics after every update; the trainer checkpoints into the run folder after every
// update; the VLA goes into the policy library as the run's id, ready to deploy on a robot with its camera.
import { join } from 'node:path';
import { writeFileAtomic } from '../nn/index.js';
import { COMMAND_HISTORY, RESET_SECONDS, S, VLA_TASKS, runVla, vlaRecipeProblem, type VlaOutcome, type VlaTask } from '../recipes/vla.js';
import type { RunRow } from '../wmrl/run-state.js';
import { simOnlyProblem } from './jobs.js';
import type { RobotHost } from './robot-host.js';
import { AnchorEpisodes, round, successInterval, updateMetrics, type RobotRunCheckpoint } from './robot-training.js';
import type { JobDefinition } from './runs.js';
import { VlaTrainOptions, type MetricsPoint } from './schemas.js';

/** Held-out success rates of one policy: on unseen start states, and on unseen (instruction, target region) combinations. */
export interface HeldOut {
  states: number;
  combinations: number;
}

/** A VLA run's checkpoint: the clone's held-out success (null when stopped before it was measured) and the post-trained VLA's (null unless the run ended). */
export interface VlaCheckpoint extends RobotRunCheckpoint {
  clone: HeldOut | null;
  wmrl: HeldOut | null;
}

/** Why `host` cannot run the VLA recipe, naming what it lacks; null when it can. */
export function vlaRobotProblem(host: RobotHost): string | null {
  const notSim = simOnlyProblem(host, 'the VLA recipe', 'the gap sim its VLA is cloned on and its held-out success measured in (a robot over a transport trains with wmrl-train)');
  if (notSim) return notSim;
  const lacks: string[] = [];
  if (!(VLA_TASKS as readonly string[]).includes(host.task ?? '')) lacks.push(`a task the recipe trains for (${VLA_TASKS.join(' or ')}), not '${host.task}'`);
  if (host.profile !== 'gap') lacks.push(`the gap profile, not '${host.profile}'`);
  const cam = host.spec.camera;
  if (cam?.width !== S || cam.height !== S) lacks.push(`a ${S}x${S} camera, not ${cam ? `${cam.width}x${cam.height}` : 'none'}`);
  if (host.commandHistory !== COMMAND_HISTORY) lacks.push(`its last ${COMMAND_HISTORY} commands in its observation, not ${host.commandHistory}`);
  if (!lacks.length) return null;
  return `robot '${host.id}' cannot run the VLA recipe: it needs ${lacks.join('; ')} (wmrl serve --task reach --profile gap --camera ${S} --command-history ${COMMAND_HISTORY} starts one)`;
}

const heldOut = (r: VlaOutcome['clone']): HeldOut => ({ states: round(r.heldOutStates.success), combinations: round(r.heldOutCombinations.success) });

export const vlaTrain: JobDefinition<typeof VlaTrainOptions> = {
  kind: 'vla-train',
  description:
    "the VLA recipe on the robot's task: a VLA (camera, instruction, proprioception) behaviour-cloned on the gap sim and a world model pretrained, then WMRL on its head whose anchor episodes run on this robot (recorded, streamed); the VLA goes into the policies as the run's id",
  options: VlaTrainOptions,
  checkRobot: (o, host) => {
    const { robot: _robot, realTime: _realTime, ...settings } = o;
    // The settings' checks across fields (the schema has checked each one) with the robot's task.
    return vlaRobotProblem(host) ?? vlaRecipeProblem({ task: host.task ?? '', ...settings });
  },
  async run(o, ctx) {
    const host = ctx.robot(o.robot);
    ctx.claim(host);
    const task = host.task ?? host.sim.env.task;
    const { robot: _robot, realTime, ...settings } = o;
    const id = ctx.runId;
    const metrics: MetricsPoint[] = [];
    const rows: RunRow[] = [];
    let clone: HeldOut | null = null;
    let evalEpisodes = 0;
    const emit = (m: MetricsPoint) => {
      metrics.push(m);
      ctx.emit({ type: 'metrics', metrics: m });
    };
    const anchors = new AnchorEpisodes(ctx, host, null, host.horizon);
    const checkpoint = (c: Pick<VlaCheckpoint, 'policy' | 'wmrl' | 'stoppedDuring'>) => {
      const file = join(ctx.dir, 'checkpoint.json');
      const last = rows.at(-1);
      const cp: VlaCheckpoint = { run: id, task, profile: host.profile, updates: last?.update ?? 0, robotSeconds: last?.robotSeconds ?? 0, robotWallSeconds: last?.robotWallSeconds ?? 0, episodes: anchors.ids, clone, metrics, stoppedEarly: ctx.signal.aborted, ...c };
      writeFileAtomic(file, [JSON.stringify(cp, null, 1)]);
      return file;
    };
    let r: VlaOutcome;
    try {
      r = await runVla({ task: task as VlaTask, ...settings }, ctx.dir, {
        target: anchors.target({ realTime, resetSeconds: RESET_SECONDS, task }),
        signal: ctx.signal,
        artifact: { path: ctx.policyPath(id), policyVersion: id, runId: id },
        progress: (phase, done, total) => ctx.progress(done, total, phase),
        // Where post-training starts: the clone's true success.
        onClone: (c) => {
          clone = heldOut(c);
          evalEpisodes = c.heldOutStates.episodes;
          emit({ step: 0, robotSeconds: 0, robotWallSeconds: 0, trueSuccess: clone.states, anchorFraction: null, biasReduction: null, anchorWeight: null, ppi: successInterval(c.heldOutStates.success, evalEpisodes), trueScore: null });
        },
        onUpdate: (row) => {
          rows.push(row);
          emit(updateMetrics(row, evalEpisodes));
        },
        onEpisode: (ep) => anchors.ended(ep),
      });
    } catch (e) {
      // A stop before RL began: nothing to export.
      if (!ctx.signal.aborted) throw e;
      return checkpoint({ policy: null, wmrl: null, stoppedDuring: 'pretraining' });
    }
    return checkpoint({ policy: { id, updates: r.rows.length }, wmrl: r.wmrl ? heldOut(r.wmrl) : null, stoppedDuring: r.stopped ? 'training' : null });
  },
};
