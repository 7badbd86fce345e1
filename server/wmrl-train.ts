// The embodied recipe (recipes/embodied.ts) as a service job, `wmrl-train` (the default job of `npm start`): pretraining — behaviour
// cloning of the task's scripted expert and the world model, both on the nominal sim — then WMRL post-training
// (wmrl/train_wmrl.ts) whose anchor episodes run on the service's own robot, through its safety layer (so the
// viewer's e-stop stops them), recorded in the service's store. Each anchor episode streams as real frames and,
// from the same start state, the world model's imagined rollout of the policy under every ensemble member as
// imagined frames (their spread is the model's uncertainty), or the identified sim's one rollout where the trainer
// imagines there (worldModel 'identified-sim'); metrics after every update; the trainer checkpoints
// into the run folder every update; the policy goes into the policy library, ready to deploy.
import { join } from 'node:path';
import { writeFileAtomic } from '../nn/index.js';
import { layoutMismatch, layoutOf, splitObservation, type ObservationLayout } from '../common/layout.js';
import type { GaussianPolicy } from '../policies/gaussian.js';
import { ClippedPolicyGradient } from '../policies/pg.js';
import { MjEnv, makeEnv, type EnvState } from '../sim/index.js';
import { fleetMismatch } from '../wmrl/fleet.js';
import type { RunRow } from '../wmrl/run-state.js';
import { SimPrompts, postTrainPg, heldOutEvaluation, type Pretrained } from '../wmrl/sim-setup.js';
import type { IdentifiedSim } from '../wmrl/identified-sim.js';
import { DEFAULT_WMRL, trainWmrl } from '../wmrl/train_wmrl.js';
import { ModelEnv, repeatRows, type EnsembleModel } from '../worldmodel/index.js';
import { anchorGroupsProblem, calibrateClone, calibrateEpisodes, calibrateProblem, hasRobustDemonstrator, embodiedPretrain, exportEmbodiedPolicy, imaginationIn, imagineMultiple, imaginedSim, postTrainLr, trainerCorrector, worldModelProblem, type CalibrationReport } from '../recipes/embodied.js';
import { AnchorEpisodes, round, successInterval, updateMetrics, type ImaginedRollouts, type ImaginedSource, type ImaginedStep, type RobotRunCheckpoint } from './robot-training.js';
import type { RobotHost } from './robot-host.js';
import { ApiError } from './errors.js';
import { RunFailure, type JobDefinition } from './runs.js';
import { WmrlTrainOptions, type MetricsPoint } from './schemas.js';

// ── Imagined rollouts for the viewer ────────────────────────────────────────────────────────────

/**
 * The world model's rollout of the policy from a start state, one per ensemble member (member e moves
 * rollout e for the whole rollout), the policy taking its mean action, so the members' spread is the model's
 * own uncertainty. Joint positions come out of the predicted observations through the layout; body poses by
 * setting those joint positions in a nominal copy of the task's sim (the start state's goal and objects) and
 * running MuJoCo's kinematics. Once the trainer imagines in the identified sim (`useSim`), the rollout drawn is that
 * sim's, one path: what the trainer imagines.
 */
class Imaginer implements ImaginedRollouts {
  private identified: IdentifiedSim | null = null;
  /** The robot's action bounds, which the sim's commands are clipped to as the trainer clips them. */
  private bounds: { low: readonly number[]; high: readonly number[] } = { low: [], high: [] };
  private readonly instructions: readonly string[];

  private constructor(
    private readonly env: ModelEnv,
    private readonly policy: ReturnType<GaussianPolicy['graphPolicy']>,
    private readonly model: EnsembleModel,
    private readonly sim: MjEnv,
    /** qpos address of each layout joint in `sim`. */
    private readonly qposAdr: number[],
    private readonly layout: ObservationLayout,
    private readonly successThreshold: number,
    private readonly gaussian: GaussianPolicy,
  ) {
    const bound = sim.taskDef.bind(sim.model);
    this.instructions = [...bound.instructions];
    bound.dispose?.();
  }

  /** Draw the rollouts of the trainer's identified sim from now on, in a copy of its own (the trainer's is busy imagining). */
  async useSim(sim: IdentifiedSim, bounds: { low: readonly number[]; high: readonly number[] }): Promise<void> {
    this.identified?.dispose();
    this.identified = await sim.fork();
    this.bounds = bounds;
  }

  static async create(model: EnsembleModel, policy: GaussianPolicy, task: string, layout: ObservationLayout, successThreshold: number, commandHistory: number): Promise<Imaginer> {
    const sim = await makeEnv({ task, profile: 'nominal', commandHistory });
    if (!(sim instanceof MjEnv)) {
      sim.dispose();
      throw new Error(`wmrl-train: task '${task}' has no MuJoCo model to pose imagined rollouts in`);
    }
    const adr = sim.model.raw.jnt_qposadr as Int32Array;
    const qposAdr = layout.joints.map((j) => adr[sim.model.id('mjOBJ_JOINT', j.name)]!);
    return new Imaginer(new ModelEnv(model, { members: 'fixed' }), policy.graphPolicy(), model, sim, qposAdr, layout, successThreshold, policy);
  }

  /** `start`: the observation (Shape D) the robot starts from; `physics`: the robot's sim state then. */
  async rollout(start: Float32Array, physics: EnvState, H: number): Promise<{ source: ImaginedSource; steps: ImaginedStep[] }> {
    if (this.identified) return { source: 'identified-sim', steps: await this.simRollout(this.identified, start, physics, H) };
    const E = this.model.members, D = this.model.dObs;
    const im = await this.env.imagine(repeatRows(start, D, E), this.policy, H, {
      members: Int32Array.from({ length: E }, (_, e) => e),
      policyNoise: new Float32Array(E * H * this.policy.noiseDim),
    });
    // A member's rollout ends at its first predicted success, as the trainer's imagined rollouts do.
    const ends = Array.from({ length: E }, (_, e) => {
      const hit = im.successProb.subarray(e * H, (e + 1) * H).findIndex((p) => p > this.successThreshold);
      return hit < 0 ? H : hit + 1;
    });
    this.sim.setState(physics);
    const steps: ImaginedStep[] = [];
    for (let t = 0; t < Math.max(...ends); t++) {
      const s: ImaginedStep = { members: [], poses: [] };
      for (let e = 0; e < E; e++) {
        // Step t's frame is the observation after action t; a finished member stays where it ended.
        const k = Math.min(t, ends[e]! - 1) + 1;
        const q = splitObservation(this.layout, im.obs.subarray((e * (H + 1) + k) * D, (e * (H + 1) + k + 1) * D), 'world model').position;
        s.members.push(Array.from(q, round));
        s.poses.push(this.posesAt(q));
      }
      steps.push(s);
    }
    return { source: 'world-model', steps };
  }

  /** The identified sim's rollout of the policy's mean action from the start, to its first success. */
  private async simRollout(sim: IdentifiedSim, start: Float32Array, physics: EnvState, H: number): Promise<ImaginedStep[]> {
    const D = sim.dObs, A = sim.dAct;
    const instruction = this.instructions[physics.goal];
    if (instruction === undefined) throw new Error(`wmrl-train: the robot's goal ${physics.goal} is not one of the task's ${this.instructions.length} instructions`);
    const im = await sim.imagine(this.gaussian, { obs: start, instructions: [instruction] }, H, { noise: new Float32Array(H * A), actLow: this.bounds.low, actHigh: this.bounds.high });
    const hit = im.successProb.findIndex((p) => p > this.successThreshold);
    this.sim.setState(physics);
    return Array.from({ length: hit < 0 ? H : hit + 1 }, (_, t) => {
      const q = splitObservation(this.layout, im.obs.subarray((t + 1) * D, (t + 2) * D), 'identified sim').position;
      return { members: [Array.from(q, round)], poses: [this.posesAt(q)] };
    });
  }

  private posesAt(q: ArrayLike<number>): number[] {
    // A fresh view each time: views into WASM memory go stale when the heap grows.
    const qpos = this.sim.data.raw.qpos as Float64Array;
    this.qposAdr.forEach((a, j) => (qpos[a] = q[j]!));
    this.sim.data.kinematics();
    return Array.from(this.sim.poses(), round);
  }

  async release(): Promise<void> {
    this.identified?.dispose();
    this.sim.dispose();
    await this.env.release();
  }
}

// ── The job ─────────────────────────────────────────────────────────────────────────────────────
/** A WMRL run's checkpoint (anchor episodes in `episodes`). */
/** The wmrl-train job's checkpoint.json: where its groups were imagined and how many an update, beside what every training job holds. */
export type WmrlCheckpoint = RobotRunCheckpoint & { worldModel: 'learned' | 'identified-sim'; imagined: number };

/**
 * Why `host` cannot run wmrl-train (`task`: the options' own), naming what it lacks, or null when it can: a robot over a
 * transport needs a sim task to pretrain in, the outcome of each step (anchors are scored by it) and seeded resets (a
 * prompt is a start state its reset reproduces).
 */
export function wmrlRobotProblem(task: string | undefined, host: RobotHost): string | null {
  if (task !== undefined && host.task !== null && task !== host.task) return `options.task '${task}' contradicts robot '${host.id}', whose task is '${host.task}'`;
  if (host.simulated) return null;
  const lacks: string[] = [];
  if ((task ?? host.task) === null) lacks.push("a sim task to pretrain in (its expert, world model and prompts' start states): task: in its YAML, or options.task");
  if (!host.scorer()) lacks.push(host.kind === 'mqtt' ? 'the outcome of each step (reward, success), which this MQTT robot does not announce (its robot side publishes wmrl/robots/{id}/outcome)' : 'the outcome of each step (reward, success): outcome_topic in its YAML');
  if (!host.seededResets) lacks.push('seeded resets (a prompt is a start state its reset reproduces): services.reset_seed_topic in its YAML');
  return lacks.length ? `robot '${host.id}' (${host.kind}) cannot run wmrl-train: it needs ${lacks.join('; ')}` : null;
}

/**
 * The calibration a run of these options on `host` makes (recipes/embodied.ts calibrateEpisodes): a robot without a
 * held-out evaluation in a sim twin calibrates only when asked, since nothing would check the clone it leaves.
 */
export async function jobCalibration(o: WmrlTrainOptions, host: RobotHost, task: string): Promise<number> {
  return calibrateEpisodes({ ...o, task }, { evaluates: host.simulated !== null, demonstrator: await hasRobustDemonstrator(task) });
}

/** Why `r` cannot anchor beside `lead` in a run of these options (the task's robot, one policy for both), or null. */
function fleetProblem(o: WmrlTrainOptions, lead: RobotHost, r: RobotHost): string | null {
  const task = o.task ?? lead.task;
  if (r.task !== null && r.task !== task) return `robot '${r.id}' performs task '${r.task}', the run's is '${task}' (robot '${lead.id}'): a fleet's robots share one task`;
  return fleetMismatch(`robot '${lead.id}'`, lead.spec, `robot '${r.id}'`, r.spec) ?? wmrlRobotProblem(o.task, r);
}

/**
 * The robots besides `lead` a run's anchors execute on: those `fleet` names (any that cannot is a 400 naming it), or
 * with 'all' every connected robot no run drives, not e-stopped, that can.
 */
function fleetOf(o: WmrlTrainOptions, lead: RobotHost, robots: readonly RobotHost[]): RobotHost[] {
  if (o.fleet === undefined) return [];
  if (o.fleet === 'all') return robots.filter((r) => r !== lead && r.connected && !r.run && !r.safety.isEstopped && fleetProblem(o, lead, r) === null);
  const unknown = o.fleet.filter((id) => !robots.some((r) => r.id === id));
  if (unknown.length) throw new ApiError('WMRL_ROBOT_NOT_FOUND', `fleet: no robot ${unknown.map((u) => `'${u}'`).join(', ')} (robots: ${robots.map((r) => r.id).join(', ')})`);
  const named = o.fleet.map((id) => robots.find((r) => r.id === id)!).filter((r) => r !== lead);
  for (const r of named) {
    const problem = fleetProblem(o, lead, r);
    if (problem) throw new ApiError('WMRL_VALIDATION', `fleet: ${problem}`);
  }
  return named;
}

export const wmrlTrain: JobDefinition<typeof WmrlTrainOptions> = {
  kind: 'wmrl-train',
  description:
    "WMRL post-training on the robot's task: behaviour cloning and a world model pretrained on the nominal sim, calibration on the robot, then updates on groups imagined in the sim the calibration identified (or, uncalibrated or told worldModel 'learned', in the world model), corrected by anchor episodes on this robot, or on a fleet of robots at once (recorded, streamed with the imagined rollouts); the policy goes into the policies as the run's id",
  options: WmrlTrainOptions,
  check: (o) => anchorGroupsProblem(o) ?? calibrateProblem(o) ?? worldModelProblem(o),
  checkRobot: (o, host) => wmrlRobotProblem(o.task, host),
  fleet: (o, lead, robots) => fleetOf(o, lead, robots),
  async run(o, ctx) {
    const host = ctx.robot(o.robot);
    ctx.claim(host);
    const hosts = ctx.fleet.length ? ctx.fleet : [host];
    const task = o.task ?? host.task;
    if (task === null) throw new Error(wmrlRobotProblem(o.task, host) ?? `robot '${host.id}' names no sim task`);
    const { profile } = host;
    const spec = host.spec;
    if (host.task === null) {
      // A task given in the options: the robot must observe what the task's policies read.
      const env = await makeEnv({ task, profile: 'nominal', commandHistory: host.commandHistory });
      const mismatch = layoutMismatch(env.layout, layoutOf(spec), `task '${task}'`, `robot '${host.id}'`);
      env.dispose();
      if (mismatch) throw new Error(`wmrl-train: task '${task}' observes another robot than '${host.id}' (its policies could not drive it): ${mismatch}`);
    }
    const layout = layoutOf(spec);
    // Resolved before pretraining: a task that cannot calibrate fails now.
    const calibrate = await jobCalibration(o, host, task);
    const worldModel = imaginationIn(o, calibrate);
    const imagine = imagineMultiple(o, worldModel);
    const metrics: MetricsPoint[] = [];
    const rows: RunRow[] = [];
    const checkpoint = (c: Omit<WmrlCheckpoint, 'run' | 'task' | 'profile' | 'metrics' | 'stoppedEarly' | 'updates' | 'robotSeconds' | 'robotWallSeconds' | 'fleet' | 'worldModel' | 'imagined'>) => {
      const file = join(ctx.dir, 'checkpoint.json');
      const last = rows.at(-1);
      const cp: WmrlCheckpoint = {
        run: ctx.runId, task, profile, worldModel, imagined: o.prompts * imagine, updates: last?.update ?? 0, robotSeconds: last?.robotSeconds ?? 0, robotWallSeconds: last?.robotWallSeconds ?? 0,
        ...(hosts.length > 1 ? { fleet: hosts.map((h) => h.id) } : {}), metrics, stoppedEarly: ctx.signal.aborted, ...c,
      };
      writeFileAtomic(file, [JSON.stringify(cp, null, 1)]);
      return file;
    };
    const emit = (m: MetricsPoint) => {
      metrics.push(m);
      ctx.emit({ type: 'metrics', metrics: m });
    };

    // 1. Pretraining: a stop ends it at the next progress report.
    let pre: Pretrained;
    try {
      pre = await embodiedPretrain({
        task, seed: o.seed, quick: o.quick, commandHistory: host.commandHistory, ...(o.pretrain ? { sizes: o.pretrain } : {}),
        onProgress: (what, done, total) => {
          ctx.signal.throwIfAborted();
          ctx.progress(done, total, `pretraining: ${what}`);
        },
      });
    } catch (e) {
      if (!ctx.signal.aborted) throw e;
      return checkpoint({ episodes: [], policy: null, stoppedDuring: 'pretraining' });
    }

    // 2. WMRL post-training on the service's robot.
    const H = host.simulated ? host.horizon : await SimPrompts.horizon(task);
    const config = {
      ...DEFAULT_WMRL, updates: o.updates, prompts: o.prompts * imagine, groupSize: o.group, evalEvery: 1, seed: o.seed,
      corrector: trainerCorrector({ ...o, imagine }, 1), horizon: H,
    };
    using prompts = await SimPrompts.create(task, 'nominal', { commandHistory: host.commandHistory });
    // Held-out success is measured where the robot has a sim twin under its profile; a robot's own episodes are its measure.
    const evaluate = host.simulated ? heldOutEvaluation(task, profile, o.evalEpisodes, { commandHistory: host.commandHistory }) : undefined;
    let pg: ClippedPolicyGradient | null = null;
    let imaginer: Imaginer | null = null;
    let anchors: AnchorEpisodes | null = null;
    let failure: { message: string; error: Error } | null = null;
    let started = false;
    let calibrating = false;
    let calibration: CalibrationReport | undefined;
    let sim: Awaited<ReturnType<typeof imaginedSim>> = null;
    try {
      imaginer = o.imagined ? await Imaginer.create(pre.model, pre.policy, task, layout, config.successThreshold, host.commandHistory) : null;
      anchors = new AnchorEpisodes(ctx, hosts, imaginer, H);
      const a = anchors;
      const target = a.target({ realTime: o.realTime, resetSeconds: o.resetSeconds, task });
      if (calibrate > 0) {
        // A stop or a fault mid-calibration leaves the pretrained clone, not a half-cloned one.
        const saved = pre.policy.paramNames().map((n) => Float32Array.from(pre.policy.store.get(n).data));
        calibrating = true;
        ctx.progress(0, calibrate, 'calibration: robot episodes');
        const c = await calibrateClone({ task, seed: o.seed, quick: o.quick, calibrate }, pre, target, prompts, host.commandHistory, evaluate, (what, done, total) => {
          ctx.signal.throwIfAborted();
          ctx.progress(done, total, what);
        }).catch((e: unknown) => {
          pre.policy.paramNames().forEach((n, i) => pre.policy.store.set(n, saved[i]!));
          throw e;
        });
        calibrating = false;
        writeFileAtomic(join(ctx.dir, 'calibration.json'), [JSON.stringify(c, null, 1)]);
        calibration = c;
      }
      sim = await imaginedSim(worldModel, task, calibration, host.commandHistory);
      if (sim) await imaginer?.useSim(sim, spec.action);
      // After calibration: the KL penalty's reference is the policy post-training starts from.
      pg = await ClippedPolicyGradient.create(pre.policy, postTrainPg(o.klCoef, postTrainLr(o.lr, calibrate)));
      a.progress(0, o.updates, 'updates');
      await trainWmrl({
        config, policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts, evaluate, outDir: ctx.dir, ...(sim ? { sim } : {}),
        hooks: {
          signal: ctx.signal,
          // Where post-training starts: the pretrained (or calibrated) policy's true success, which the trainer measures
          // first, at the robot time calibration spent.
          onStart: (start) => {
            started = true;
            emit({ step: 0, robotSeconds: target.clock.robotSeconds, robotWallSeconds: target.clock.wallSeconds, trueSuccess: round(start.success), anchorFraction: null, biasReduction: null, anchorWeight: null, ppi: successInterval(start.success, start.episodes), trueScore: null });
          },
          onEpisode: (ep) => a.ended(ep),
          onUpdate: (r) => {
            rows.push(r);
            emit(updateMetrics(r, o.evalEpisodes));
            a.progress(r.update, o.updates, 'updates');
          },
        },
      });
    } catch (e) {
      // Stopped, or an anchor episode failed (the robot's link lost): the trainer's state is the last finished update's
      // (it checkpoints after each one), and the run ends with it.
      if (!ctx.signal.aborted) {
        const message = anchors?.failed(e as Error) ?? null;
        if (message === null) throw e;
        failure = { message, error: e as Error };
      }
    } finally {
      await pg?.release();
      await imaginer?.release();
      sim?.dispose();
    }

    // 3. The policy, deployable on this robot (its observation layout inside): the trainer, however it ended, left in
    // pre.policy that of the evaluation it keeps (the latest row's keptUpdate, or the start's before any), else the last update's.
    const id = ctx.runId;
    const updates = rows.at(-1)?.update ?? 0;
    const keptUpdate = rows.findLast((r) => r.keptUpdate !== undefined)?.keptUpdate ?? (started ? 0 : undefined);
    const kept = keptUpdate === undefined ? {} : { keptUpdate };
    exportEmbodiedPolicy(pre.policy, spec, ctx.policyPath(id), { policyVersion: id, runId: ctx.runId, extra: { source: 'wmrl', task, updates: String(updates), ...(keptUpdate === undefined ? {} : { keptUpdate: String(keptUpdate) }) } });
    const file = checkpoint({ episodes: anchors?.ids ?? [], ...(anchors?.lost.length ? { lostRobots: anchors.lost } : {}), policy: { id, updates, ...kept }, stoppedDuring: ctx.signal.aborted || failure ? (calibrating ? 'calibration' : 'training') : null });
    if (failure) throw new RunFailure(failure.message, file, { cause: failure.error });
    return file;
  },
};
