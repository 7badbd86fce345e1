// WMRL on a robot: groups are imagined in the learned world model; a thin stream of anchor groups is
// executed on the robot and corrects the world model's scores through the Corrector. Diff against
// train_standard.ts to see exactly what WMRL changes.
//
// Per update: B prompts → B×G rollouts imagined (wmrl/imagine-policy.ts) and scored by the world model →
// Corrector.step: anchor groups run on the robot (safety layer, recorded in the store, charged to the robot
// clock), paired with the world model's replay of the very episodes → calibrated advantages → clipped
// policy-gradient update on real steps for anchor groups and imagined steps for the rest → the world model
// refits from the store every few updates → reward-hacking alarm (wmrl/alarm.ts), which keeps the imagined groups out
// of the updates after it is raised until it clears → evaluate every few updates. With an evaluation, the starting
// policy is evaluated before update 1 and the run hands back the parameters of the evaluation it keeps (wmrl/keep-best.ts).
import { join } from 'node:path';
import { Rng, writeFileAtomic } from '../nn/index.js';
import { layoutOf } from '../common/layout.js';
import type { Policy } from '../policies/types.js';
import type { SceneTwin } from '../sim/twin.js';
import { ModelEnv, identifySystem, refitModel, refitTransitions, relabelScore, repeatRows, replayToSuccess, type DelayEpisode, type EnsembleModel, type RobotRewards, type Transitions } from '../worldmodel/index.js';
import { groupAdvantages, DEFAULT_ADVANTAGE_CONFIG } from './advantages.js';
import { HackingAlarm } from './alarm.js';
import { Corrector, correctorConfig, type CorrectorConfig, type CorrectorState } from './corrector.js';
import { ImaginedGate, NoiseReplay, groupAgreement, type GateConfig } from './gate.js';
import { imaginedRollouts, imagineRollouts, policyFace, type ImaginedArrays, type ImaginedRollouts } from './imagine-policy.js';
import type { IdentifiedSim } from './identified-sim.js';
import { actedEpisode, episodeTransitions, groupEpisodes, pgBatch, type RobotEpisode, type Prompt, type Trajectory } from './embodied.js';
import { KeepBest } from './keep-best.js';
import { ReportedStarts } from './reported-starts.js';
import { loadRunState, saveRunState, type RunRow, type RunState } from './run-state.js';
import type { StandardConfig, StandardRun } from './train_standard.js';

/** The baseline's loop (updates, prompts, groups, evaluation, seeds) and what WMRL adds to it. */
export interface WmrlConfig extends StandardConfig {
  /** The correction core; false = pure world model (no robot execution at all). */
  corrector: CorrectorConfig | false;
  /** Imagined steps per rollout from the prompt's start: the task's horizon, or fewer (the anchors' replays cover the same steps). */
  horizon: number;
  /**
   * Where imagined rollouts start: 'robot', a start state the robot reported (wmrl/reported-starts.ts: the first
   * observation of a recorded episode, of the prompt's instruction where there is one), the prompt's own until the robot
   * reported any; 'prompts', the prompts' start states (the sim's seeded resets). Default 'robot'.
   */
  imagineFrom?: 'robot' | 'prompts';
  /** How a rollout's dense signal collapses to one score (worldmodel/scorers.ts `collapse`): 'return' measures what the robot's score does. */
  scoreMode: 'return' | 'last-minus-first';
  /** Steps averaged at each end in 'last-minus-first'. */
  scoreK: number;
  /** An imagined rollout ends at the first step whose predicted success probability exceeds this, as a real episode ends at success. */
  successThreshold: number;
  /** Refit the world model from the store every this many updates (0: never). */
  refitEvery: number;
  /**
   * Whether a refit due at the last update runs (default true): it leaves the run's saved world model fitted to every
   * robot episode, for a resumed or extended run; false skips it where nothing reads the model after the run.
   */
  refitAtEnd?: boolean;
  refitEpochs: number;
  /** Open-loop steps the dynamics refit through (0: one step), so a refit keeps the multi-step fit pretraining gave. */
  refitRolloutSteps: number;
  refitRolloutWindows: number;
  /** Loss weight of a sim transition relative to a real one in a refit (0: the robot's episodes alone); sim weight pulls the model back toward the sim. */
  simWeight: number;
  /** What the robot's recorded rewards are: 'dense' refits teach the reward head; 'success' keeps what the sim taught it. */
  robotRewards: RobotRewards;
  /**
   * An anchor episode's real score: 'robot', the robot's recorded return; 'relabel', the world model's reward over the
   * episode's recorded steps (`relabelScore`), a dense score of what really happened for a robot that measures only success.
   */
  anchorScore: 'robot' | 'relabel';
  /** The closed-loop gate on the imagined groups (wmrl/gate.ts), which keeps the share of them whose ranking agrees with the robot's; false: off. */
  imaginedGate: GateConfig | false;
  /** The robot's actuation delay in control steps, or 'identify' it (up to maxActionDelay) from the anchors, since a model pretrained on the sim lacks it. */
  actionDelay: number | 'identify';
  maxActionDelay: number;
  /** A context-conditioned model's context: 'identify' it from the anchors with the delay, or keep the one it holds ('fixed'). */
  context: 'identify' | 'fixed';
  /** Reward-hacking alarm: window (updates) and the gap between predicted and measured success that raises it. */
  alarmWindow: number;
  alarmGap: number;
  /**
   * What the raised alarm does: 'pause' keeps the imagined groups out of every update after it until it clears (the
   * update is standard GRPO on the anchor groups, or none without them); 'log' only warns. Default 'pause'.
   */
  alarmAction?: 'pause' | 'log';
}

/**
 * Defaults for robot runs: one anchor group of eight rollouts per update gives few pairs, so the map
 * starts at 48 pairs (not the core's 200) and the anchor weight's warm-up is 4 groups (not 64).
 */
export const DEFAULT_WMRL: Omit<WmrlConfig, 'horizon'> = {
  updates: 20,
  prompts: 8,
  groupSize: 8,
  evalEvery: 4,
  promptSeed0: 1_000_000,
  seed: 0,
  corrector: correctorConfig({ debias: { minPairs: 48, refitEvery: 16 }, denoise: { warmupGroups: 4 } }),
  scoreMode: 'return',
  scoreK: 5,
  successThreshold: 0.5,
  refitEvery: 10,
  refitEpochs: 2,
  refitRolloutSteps: 16,
  refitRolloutWindows: 16_384,
  simWeight: 0.25,
  robotRewards: 'dense',
  anchorScore: 'robot',
  imaginedGate: false,
  actionDelay: 'identify',
  maxActionDelay: 5,
  context: 'identify',
  alarmWindow: 5,
  alarmGap: 0.3,
  alarmAction: 'pause',
  imagineFrom: 'robot',
};

export interface WmrlRun extends Omit<StandardRun, 'config'> {
  config: WmrlConfig;
  model: EnsembleModel;
  /** The sim transitions the model was pretrained on; refits mix them with the real episodes. */
  simData: Transitions;
  /** The task's digital twin: renders the camera images a policy that reads them sees in imagination (wmrl/imagine-policy.ts). */
  twin?: SceneTwin;
  /**
   * The policy's face in imagination and in the update (default: `policy`): a cheaper policy over the same trainable
   * parameters, e.g. a VLA's latent face (policies/latent-vla.ts). `policy` acts on the robot; `pg` must train the face.
   */
  face?: Policy;
  /** Warnings (reward-hacking alarm); default: stderr. */
  warn?: (message: string) => void;
  /**
   * Imagine in the sim a calibration identified (wmrl/identified-sim.ts) instead of `model`: its groups, the anchors'
   * paired scores and their closed-loop agreements come from the sim's physics, which carries the identified delay
   * and context, so the model is neither refitted nor re-identified. The caller owns (disposes) it.
   */
  sim?: IdentifiedSim;
}

/** A rollout a scorer sees: group b, member k of this update. */
interface Ref {
  b: number;
  k: number;
}

interface WmrlExtra {
  corrector: CorrectorState | null;
  /** The actuation delay imagination applies; null: not identified yet. */
  delay?: number | null;
  /** Whether the robot's delay and context have been identified from anchors yet. */
  identified?: boolean;
  /** The latest anchor episodes as the policy acted in them (what the delay and context are identified from). */
  recentAnchors?: Array<{ states: number[]; actions: number[]; rewards: number[]; success: number[] }>;
  predicted: number[];
  measured: number[];
  /** The imagined gate's latest per-anchor-group rank agreements. */
  agreements?: number[];
}

export async function trainWmrl(run: WmrlRun): Promise<RunState> {
  const { config: c, policy, pg, model, target, prompts } = run;
  const D = policy.obsDim, A = policy.actDim, H = c.horizon, G = c.groupSize, E = model.members;
  const warn = run.warn ?? ((m: string) => console.error(m));
  const rng = new Rng(c.seed);
  const gate = c.imaginedGate ? new ImaginedGate(c.imaginedGate, c.corrector !== false) : null;
  // What imagines and what the update trains: the policy, or its cheaper face over the same parameters.
  const { face, restate } = policyFace(policy, run.face, pg.policy);
  const reads = face.inputs();
  // The fused imagination (policy and ensemble in one graph) for a policy of the observation vector alone.
  const graphPolicy = !reads.image && !reads.instruction && !reads.features && face.graphPolicy ? face.graphPolicy() : null;
  let state: RunState = { algo: 'wmrl', update: 0, rng: rng.getState(), clock: target.clock.state(), rows: [], finalObs: {}, episodeIds: [] };
  let extra: WmrlExtra = { corrector: null, predicted: [], measured: [] };
  if (run.resume && run.outDir) {
    state = loadRunState(run.outDir, 'wmrl', pg);
    rng.setState(state.rng);
    target.clock.restore(state.clock);
    extra = state.extra as WmrlExtra;
    // The world model as the run left it (refits included).
    model.store.load(join(run.outDir, 'world_model.safetensors'));
  }
  gate?.restore(extra.agreements ?? []);
  const alarm = new HackingAlarm(c.alarmWindow, c.alarmGap, extra);
  extra.delay ??= typeof c.actionDelay === 'number' ? c.actionDelay : null;
  let env = new ModelEnv(model, { members: 'fixed', seed: c.seed, actionDelay: extra.delay ?? 0 });
  // The latest anchor episodes as the policy acted in them, what the delay is identified from: checkpointed with the run.
  const recentAnchors: DelayEpisode[] = (extra.recentAnchors ?? []).map((e) => ({ states: Float32Array.from(e.states), actions: Float32Array.from(e.actions), rewards: Float32Array.from(e.rewards), success: Float32Array.from(e.success) }));
  const lo = target.robot.spec.action.low, hi = target.robot.spec.action.high;
  // The anchors' scoring may still run while the next update imagines: it replays in a sim of its own.
  const anchorSim = run.sim ? await run.sim.fork() : null;
  const imagine = (sim: IdentifiedSim | null, start: { obs: Float32Array; instructions: readonly string[] }, o: { members: ArrayLike<number>; noise: Float32Array }): Promise<ImaginedArrays> =>
    sim ? sim.imagine(face, start, H, { noise: o.noise, actLow: lo, actHigh: hi }) : imagineRollouts(env, run.twin ?? null, face, graphPolicy, start, H, { ...o, actLow: lo, actHigh: hi });
  const reported = (c.imagineFrom ?? 'robot') === 'robot' && target.store ? new ReportedStarts(target.store, layoutOf(target.robot.spec), target.meta.task) : null;

  // This update's robot episodes, group b's at b.
  let real = new Map<number, RobotEpisode[]>();
  let update = state.update;
  // This update's prompts, group b's at b: its start state, its seed on the robot, its instruction.
  let updatePrompts: Prompt[] = [];
  // This update's imagined rollouts and the policy noise imagination drew, rollout k of group b's at b·G + k.
  let imagined: ImaginedRollouts & { noise: Float32Array } | null = null;
  // This update's ensemble member per group, and its anchor groups' closed-loop agreements.
  let groupMember: number[] = [];
  let updateAgreements: number[] = [];
  const wmScorer = {
    async score(groups: ReadonlyArray<readonly Ref[]>) {
      return groups.map((g) => ({ scores: g.map((r) => imagined!.score[r.b * G + r.k]!), variance: g.map((r) => imagined!.variance[r.b * G + r.k]!) }));
    },
  };
  const trusted = {
    async score(group: readonly Ref[]) {
      const b = group[0]!.b;
      // What this update's imagination left, taken at launch: a late group may finish during the next update.
      const prompt = updatePrompts[b]!, drawn = imagined!.noise, member = groupMember[b]!, agreements = updateAgreements;
      const acted: DelayEpisode[] = [];
      const eps = await groupEpisodes(target, policy, prompt.seed, group.length, rng, `wmrl-${update}`, {
        // The noise rollout k of this group drew in imagination (its first H steps' draws): a draw like any other, and
        // the one under which the episode's imagined twin below ranks it.
        noise: (k, g) => {
          const i = (b * G + group[k]!.k) * H * A;
          return new NoiseReplay(drawn.subarray(i, i + H * A), g);
        },
        ended: (ep, k) => {
          run.hooks?.onEpisode?.(ep, 'anchor');
          state.finalObs[ep.id] = Array.from(ep.obs.subarray(ep.steps * D));
          state.episodeIds.push(ep.id);
          acted[k] = actedEpisode(ep, lo, hi);
          if (ep.steps > 0) recentAnchors.push(acted[k]);
          if (recentAnchors.length > 32) recentAnchors.shift();
        },
      });
      real.set(b, eps);
      // The pair: the world model's score of the episode's first H steps as imagination scores a rollout (the policy's
      // commands as it acted them, as late as imagination feeds them), and its real score.
      const worldModel: Array<number | null> = [];
      for (const [k, ep] of eps.entries()) {
        const start = ep.obs.subarray(0, D), actions = acted[k]!.actions.subarray(0, Math.min(ep.steps, H) * A);
        worldModel.push(ep.steps === 0 ? null : anchorSim ? await anchorSim.replayScore(start, prompt.instruction, actions, { mode: c.scoreMode, k: c.scoreK })
          : await replayToSuccess(model, start, actions, { mode: c.scoreMode, k: c.scoreK, actionDelay: env.actionDelay, successThreshold: c.successThreshold }));
      }
      const realScores = await Promise.all(eps.map(async (ep, k) => {
        if (ep.status !== 'complete') return null;
        return c.anchorScore === 'relabel' ? relabelScore(model, acted[k]!, { steps: Math.min(ep.steps, H), actionDelay: env.actionDelay }) : ep.return;
      }));
      // Closed-loop agreement from where the robot started: the group imagined again from each episode's own first
      // observation (imagination's start may be another reported one), under the noise the episode acted with.
      const n = eps.length, from = new Float32Array(n * D), noise = new Float32Array(n * H * A);
      eps.forEach((ep, k) => {
        from.set(ep.obs.subarray(0, D), k * D);
        const i = (b * G + group[k]!.k) * H * A;
        noise.set(drawn.subarray(i, i + H * A), k * H * A);
      });
      const twin = await imagine(anchorSim, { obs: from, instructions: eps.map(() => prompt.instruction) }, { members: new Int32Array(n).fill(member), noise });
      const twinScores = imaginedRollouts(twin, H, reads, { successThreshold: c.successThreshold, mode: c.scoreMode, k: c.scoreK }).score;
      const rho = groupAgreement(twinScores, realScores);
      if (!Number.isNaN(rho)) agreements.push(rho);
      gate?.observe(twinScores, realScores);
      return { real: realScores, worldModel };
    },
  };
  // The exploitation guard's context of a group: its prompt's instruction (the task and its target), which recurs
  // across updates as a start state does not, so the guard can measure it over several anchor groups.
  const corrector = c.corrector ? new Corrector<Ref>(c.corrector, wmScorer, trusted, { contextOf: (g) => updatePrompts[g[0]!.b]!.instruction }) : null;
  if (corrector && extra.corrector) corrector.restore(extra.corrector);
  const keep = await KeepBest.begin(run, state, c.keepBest);
  const t0 = performance.now();

  try {
    for (let u = state.update; u < c.updates; u++) {
      run.hooks?.signal?.throwIfAborted();
      update = u;
      real = new Map();
      updateAgreements = [];
      updatePrompts = Array.from({ length: c.prompts }, (_, b) => prompts.get(c.promptSeed0 + u * c.prompts + b));
      // Imagine every group in the world model, from start states the robot reported (or the prompts').
      reported?.refresh();
      const starts = new Float32Array(c.prompts * D);
      const startInstructions: string[] = [];
      let reportedStartsUsed = 0;
      updatePrompts.forEach((p, b) => {
        const r = reported?.draw(p.instruction, rng) ?? null;
        starts.set(r ? r.obs : p.startObs, b * D);
        startInstructions.push(r ? r.instruction : p.instruction);
        if (r) reportedStartsUsed++;
      });
      const N = c.prompts * G;
      // One ensemble member per group, so the group's ranking reflects its actions, not which member dreamt them.
      groupMember = Array.from({ length: c.prompts }, () => rng.int(E));
      const members = Int32Array.from({ length: N }, (_, i) => groupMember[Math.floor(i / G)]!);
      const ti = performance.now();
      const policyNoise = Float32Array.from({ length: N * H * A }, () => rng.normal());
      const instructions = Array.from({ length: N }, (_, i) => startInstructions[Math.floor(i / G)]!);
      const im = await imagine(run.sim ?? null, { obs: repeatRows(starts, D, G), instructions }, { members, noise: policyNoise });
      const imagineSeconds = (performance.now() - ti) / 1000;
      imagined = { ...imaginedRollouts(im, H, reads, { successThreshold: c.successThreshold, mode: c.scoreMode, k: c.scoreK }), noise: policyNoise };

      // Scores → advantages: corrected with anchors, or the raw world model's (pure world model).
      const groups: Ref[][] = Array.from({ length: c.prompts }, (_, b) => Array.from({ length: G }, (_, k) => ({ b, k })));
      let advantages: Array<Array<number | null>>, weights: number[][], source: Array<'real' | 'wm'>;
      let log: Awaited<ReturnType<Corrector<Ref>['step']>>['log'] | null = null;
      if (corrector) {
        const r = await corrector.step(groups);
        ({ advantages, weights, source } = r);
        log = r.log;
      } else {
        advantages = groupAdvantages(groups.map((g) => g.map((x) => imagined!.score[x.b * G + x.k]!)), DEFAULT_ADVANTAGE_CONFIG).advantages;
        weights = groups.map((g) => g.map(() => 1));
        source = groups.map(() => 'wm');
      }
      // The imagined gate keeps the share of the imagined groups that their ranking's agreement with the robot's is worth.
      const { weight: imaginedWeight, dropped } = gate ? gate.select(source, rng) : { weight: 1, dropped: new Set<number>() };
      // A raised reward-hacking alarm keeps imagination out of the update: the world model's scores are not trusted.
      const paused = c.alarmAction !== 'log' && alarm.raised;

      // The update: anchor groups learn from their real episodes, the rest from imagination.
      const trajs: Trajectory[] = [], adv: Array<number | null> = [], w: number[] = [];
      for (const [b, g] of groups.entries()) {
        if (dropped.has(b) || (paused && source[b] !== 'real')) continue;
        for (let k = 0; k < g.length; k++) {
          trajs.push(source[b] === 'real' ? await restate(real.get(b)![k]!) : imagined.traj[b * G + k]!);
          adv.push(advantages[b]![k]!);
          w.push(weights[b]![k]!);
        }
      }
      const batch = pgBatch(trajs, adv, w, D, A);
      const stats = batch ? await pg.update(batch, rng) : null;

      // Refit the world model from the store: every real episode so far, plus the sim data it started from at `simWeight`.
      let refit = false;
      const due = !run.sim && c.refitEvery > 0 && (u + 1) % c.refitEvery === 0 && (u + 1 < c.updates || c.refitAtEnd !== false);
      if (due && state.episodeIds.length > 0 && target.store) {
        const eps = state.episodeIds.map((id) => episodeTransitions(target.store!.get(id), layoutOf(target.robot.spec), Float32Array.from(state.finalObs[id] ?? []))).filter((e) => e !== null);
        const data = refitTransitions(eps, model, { robotRewards: c.robotRewards, simData: run.simData, simWeight: c.simWeight, actionDelay: env.actionDelay });
        await refitModel(model, data, { epochs: c.refitEpochs, rolloutSteps: c.refitRolloutSteps, rolloutWindows: c.refitRolloutWindows, seed: c.seed + u });
        refit = true;
      }
      // The robot's actuation delay and (for a context-conditioned model) its context, from the latest anchors: first
      // once they exist, then after each refit.
      const idDelay = c.actionDelay === 'identify', idContext = model.contextDim > 0 && c.context === 'identify';
      if (!run.sim && (idDelay || idContext) && recentAnchors.length > 0 && (!extra.identified || refit)) {
        const { delay } = await identifySystem(model, recentAnchors, { maxDelay: idDelay ? c.maxActionDelay : null, delay: env.actionDelay, context: idContext, seed: c.seed + u });
        if (delay !== env.actionDelay) {
          await env.release();
          env = new ModelEnv(model, { members: 'fixed', seed: c.seed + u, actionDelay: delay });
        }
        extra.delay = delay;
        extra.identified = true;
      }

      // Reward-hacking alarm: the world model's predicted success on the anchor prompts against the anchors' measured success.
      let alarmed = false;
      if (real.size > 0) {
        let p = 0, m = 0, n = 0;
        for (const [b, eps] of real) eps.forEach((ep, k) => { p += imagined!.successProb[b * G + k]!; m += ep.success ? 1 : 0; n++; });
        const message = alarm.observe(p / n, m / n, u + 1);
        if (message) warn(message);
        alarmed = message !== null;
      }

      // Measure and log.
      const realEps = [...real.values()].flat();
      const row: RunRow = {
        update: u + 1,
        robotSeconds: target.clock.robotSeconds,
        robotWallSeconds: target.clock.wallSeconds,
        robotEpisodes: target.clock.episodes,
        computeSeconds: (performance.now() - t0) / 1000,
        trainSuccess: realEps.length ? realEps.filter((e) => e.success).length / realEps.length : null,
        groups: c.prompts,
        realGroups: real.size,
        loss: stats?.loss ?? null,
        approxKl: stats?.approxKl ?? null,
        refKl: stats?.refKl ?? null,
        biasReduction: log?.biasReduction ?? null,
        ...(log ? { calibrated: log.calibrated } : {}),
        anchorWeight: log?.anchorWeight ?? 1,
        trueMean: log?.trueMean ? [log.trueMean.lo, log.trueMean.hi] : null,
        predictedSuccess: alarm.predicted.at(-1),
        measuredSuccess: alarm.measured.at(-1),
        hackingAlarm: alarmed,
        flaggedContexts: log?.flaggedContexts ?? 0,
        refit,
        actionDelay: run.sim ? run.sim.profile.action_latency_steps : env.actionDelay,
        ...(model.contextDim > 0 ? { context: Array.from(model.context) } : {}),
        imaginedTransitions: N * H,
        ...(reported ? { reportedStarts: reported.size, imaginedFromReported: reportedStartsUsed } : {}),
        agreements: updateAgreements,
        imagineSeconds,
        ...(gate ? { imaginedWeight, imaginedGroups: paused ? 0 : source.filter((x, b) => x === 'wm' && !dropped.has(b)).length } : {}),
        imaginationPaused: paused,
      };
      if (run.evaluate && ((u + 1) % c.evalEvery === 0 || u + 1 === c.updates)) keep.observe(row, await run.evaluate(policy), target.clock);
      state.rows.push(row);
      state.update = u + 1;
      state.rng = rng.getState();
      state.clock = target.clock.state();
      extra.corrector = corrector ? corrector.state() : null;
      extra.predicted = alarm.predicted;
      extra.measured = alarm.measured;
      extra.agreements = gate ? gate.agreements : [];
      extra.recentAnchors = recentAnchors.map((e) => ({ states: Array.from(e.states), actions: Array.from(e.actions), rewards: Array.from(e.rewards), success: Array.from(e.success) }));
      state.extra = extra;
      if (run.outDir) {
        model.save(join(run.outDir, 'world_model.safetensors'));
        keep.save();
        saveRunState(run.outDir, state, pg);
      }
      run.hooks?.onUpdate?.(row);
    }
  } finally {
    keep.restore();
    anchorSim?.dispose();
  }
  await env.release();
  if (run.outDir) writeFileAtomic(join(run.outDir, 'history.json'), [JSON.stringify(state.rows, null, 1)]);
  return state;
}
