// The built-in jobs besides the WMRL trainer (server/wmrl-train.ts): a scripted-expert session on the sim robot
// — real episodes recorded in the store, with an "imagined" rollout that is honest about what it is: the
// episode's actions replayed open-loop in a nominal-profile sim (source 'sim-replay') while the robot runs its
// own profile, so the viewer's imagined-vs-real view shows the reality gap — and a deployed policy's run.
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { EpisodeSink } from '../episodes/store/store.js';
import { writeFileAtomic } from '../nn/index.js';
import { runEpisode, type EpisodeOutcome, type Policy } from '../hardware/record.js';
import { SafetyStop } from '../hardware/safety.js';
import { OBSERVATION_LAYOUT_KEY, buildObservation, layoutEntries, layoutOf, layoutToJson, splitObservation } from '../common/layout.js';
import { behaviourClone } from '../policies/bc.js';
import { GaussianPolicy, exportPolicy } from '../policies/gaussian.js';
import { OnnxPolicy } from '../policies/onnx-policy.js';
import { makeEnv, type Env, type Expert } from '../sim/index.js';
import { RunFailure, type JobContext, type JobDefinition } from './runs.js';
import type { PolicySessionRequest, RobotHost } from './robot-host.js';
import { ExpertSessionOptions, PolicyRunOptions, type MetricsPoint } from './schemas.js';

const round = (x: number) => Math.round(x * 1e5) / 1e5;

/** Wilson score interval for a success rate (95%): what real episodes alone say about the true rate. */
export function wilson(successes: number, n: number, z = 1.959964): [number, number] {
  if (n === 0) return [0, 1];
  const p = successes / n;
  const d = 1 + (z * z) / n;
  const c = p + (z * z) / (2 * n);
  const h = z * Math.sqrt((p * (1 - p)) / n + (z * z) / (4 * n * n));
  return [Math.max(0, (c - h) / d), Math.min(1, (c + h) / d)];
}

/** Waits `ms`, or less when `signal` aborts (its listener removed either way: a wait loop must not pile them up). */
export const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });

/** What a session needs of its run: the run's context, with a store it records into (the service's, or a control thread's hand-over to it). */
export type SessionContext = Omit<JobContext, 'store'> & {
  store: EpisodeSink;
  /** How a robot's own control thread runs a deployed policy: its inference threads. */
  control?: { inferenceThreads: number };
};

interface SessionSpec {
  ctx: SessionContext;
  host: RobotHost;
  episodes: number;
  policyVersion: string;
  /** A fresh policy per episode. */
  policy(): Policy;
  /** Nominal-profile env for the sim-replay imagined rollout, or null. */
  imagined: Env | null;
  /** Fit a behaviour-cloning policy to the session's (observation, action) pairs at the checkpoint. */
  clone?: boolean;
}

/** Why `host` cannot run a job that needs the in-process sim (`needs`: what for), or null when it is the sim. */
export function simOnlyProblem(host: RobotHost, job: string, needs: string): string | null {
  if (host.simulated) return null;
  return `robot '${host.id}' is a ${host.kind} robot (${host.spec.name}), not the in-process sim: ${job} needs ${needs}; run it on a sim robot (serve --robot sim:TASK[:PROFILE])`;
}

/** The error a run ends with when an episode on `host` failed (its record kept as partial): a lost link names the robot as disconnected. */
export function episodeFailure(host: RobotHost, episode: string, e: Error): string {
  const what = host.connected ? `episode ${episode} on robot '${host.id}' failed` : `robot '${host.id}' (${host.kind}) disconnected during episode ${episode}`;
  return `${what}: ${e.message}; the episode is kept as partial`;
}

/**
 * Drives episodes on the host's robot, recording each in the store, streaming real frames (from the
 * robot's side) and imagined frames, and metrics after every episode. An e-stop ends the episode (its
 * record is finished as partial) and the session waits for the robot to be reset; an abort finishes the
 * episode being recorded and returns. Writes a checkpoint either way. An episode that fails otherwise (the
 * robot's link lost, the policy's error) is kept as partial and ends the run, checkpointed, with an error naming the robot.
 */
async function session(s: SessionSpec): Promise<string> {
  const { ctx, host } = s;
  ctx.claim(host);
  const spec = host.spec;
  const score = host.scorer();
  let failure: { episode: string; error: Error } | null = null;
  const layout = layoutOf(spec);
  let episode: string | null = null;
  let t = 0;
  let shown = 0;
  let obsAt = 0;
  let episodeStart = 0;
  const period = 1000 / spec.controlHz;
  // One real frame per policy step: the watchdog's hold commands (between episodes, or when a step
  // runs late) move the robot too but are not steps of the episode.
  const onStep = (a: { q: number[]; command: number[]; poses: number[] }) => {
    if (!episode || t <= shown) return;
    shown = t;
    const now = performance.now();
    host.ticks.push({ at: now, obsToApplied: now - obsAt, late: now - (episodeStart + (t - 1) * period) });
    ctx.emit({ type: 'real', robot: host.id, episode, t: t - 1, q: a.q, command: a.command, poses: a.poses });
  };
  host.events.on('step', onStep);
  let done = 0;
  let successes = 0;
  let robotSeconds = 0;
  const ids: string[] = [];
  const metrics: MetricsPoint[] = [];
  const pairs: { obs: Float32Array[]; act: Float32Array[] } = { obs: [], act: [] };
  try {
    ctx.progress(0, s.episodes, 'episodes');
    while (done < s.episodes && !ctx.signal.aborted) {
      if (host.safety.isEstopped) {
        await sleep(50, ctx.signal);
        continue;
      }
      episode = randomUUID();
      t = 0;
      shown = 0;
      let began = false;
      const inner = s.policy();
      const policy: Policy = async (obs) => {
        began = true;
        obsAt = performance.now();
        if (t === 0) episodeStart = obsAt;
        if (t === 0 && s.imagined) s.imagined.setState({ ...host.sim.env.getState(), queue: [] });
        const a = await inner(obs);
        t++;
        if (s.clone) {
          pairs.obs.push(buildObservation(layout, obs, spec.name));
          pairs.act.push(Float32Array.from(a));
        }
        if (s.imagined) {
          // Open loop: the real episode's action, applied in the nominal sim from the same start state.
          const r = s.imagined.step(a);
          const q = splitObservation(s.imagined.layout, r.obs.state, 'imagined').position;
          ctx.emit({ type: 'imagined', robot: host.id, episode: episode!, source: 'sim-replay', t: t - 1, members: [Array.from(q, round)], poses: [Array.from(s.imagined.poses(), round)] });
        }
        return a;
      };
      ctx.emit({ type: 'episode', episode, phase: 'start', steps: 0, success: null, status: 'recording' });
      let out: EpisodeOutcome;
      try {
        out = await runEpisode({
          robot: host.safety,
          policy,
          maxSteps: host.horizon,
          store: ctx.store,
          signal: ctx.signal,
          ...(score ? { score } : {}),
          meta: { id: episode, robot: spec.name, policyVersion: s.policyVersion, hardwareProfile: host.profile, ...(host.task !== null ? { task: host.task } : {}), extra: { run: ctx.runId, joints: spec.joints } },
        });
      } catch (e) {
        if (e instanceof SafetyStop && e.reason === 'estop' && !began) {
          // Latched as the episode's reset was to go out (a control thread's e-stop flag): nothing moved or was recorded.
          ctx.emit({ type: 'episode', episode, phase: 'end', steps: 0, success: null, status: 'partial (estop)' });
          episode = null;
          continue;
        }
        // runEpisode has finished the record (begun before the policy's first step) as partial: it stays; the run ends here.
        failure = { episode, error: e as Error };
        if (began) ids.push(episode);
        robotSeconds += t / spec.controlHz;
        ctx.emit({ type: 'episode', episode, phase: 'end', steps: t, success: null, status: `partial (${host.connected ? 'error' : 'disconnected'})` });
        episode = null;
        break;
      }
      ids.push(out.id);
      ctx.emit({ type: 'episode', episode, phase: 'end', steps: out.steps, success: out.success ?? null, status: out.stoppedBy ? `partial (${out.stoppedBy})` : out.status });
      episode = null;
      robotSeconds += out.steps / spec.controlHz;
      if (out.stoppedBy) continue; // e-stopped or aborted: not a finished episode
      done++;
      if (out.success) successes++;
      // A robot that reports no outcome has unscored episodes: no success rate to show.
      const m: MetricsPoint = { step: done, robotSeconds: round(robotSeconds), robotWallSeconds: round(robotSeconds), trueSuccess: score ? round(successes / done) : null, anchorFraction: 1, biasReduction: null, anchorWeight: null, ppi: score ? (wilson(successes, done).map(round) as [number, number]) : null, trueScore: null };
      metrics.push(m);
      ctx.emit({ type: 'metrics', metrics: m });
      ctx.progress(done, s.episodes);
    }
  } finally {
    host.events.off('step', onStep);
    s.imagined?.dispose();
  }
  let policy: { id: string; samples: number; trainMse: number } | null = null;
  if (s.clone && pairs.obs.length >= MIN_BC_PAIRS) {
    const id = `bc-${ctx.runId}`;
    const trainMse = await clonePolicy(pairs, host, id, ctx);
    policy = { id, samples: pairs.obs.length, trainMse };
  }
  const file = join(ctx.dir, 'checkpoint.json');
  writeFileAtomic(file, [JSON.stringify({ run: ctx.runId, policyVersion: s.policyVersion, episodesDone: done, successes, robotSeconds, episodes: ids, policy, metrics, stoppedEarly: ctx.signal.aborted || failure !== null }, null, 1)]);
  if (failure) throw new RunFailure(episodeFailure(host, failure.episode, failure.error), file, { cause: failure.error });
  return file;
}

/**
 * Behaviour cloning (policies/bc.ts) of the session's (observation, commanded action) pairs into the
 * Gaussian MLP policy, exported as a deployable artifact with the robot's observation layout. Returns
 * the last epoch's mean squared action error (summed over the action's entries).
 */
async function clonePolicy(pairs: { obs: Float32Array[]; act: Float32Array[] }, host: RobotHost, id: string, ctx: SessionContext): Promise<number> {
  const spec = host.spec;
  const layout = layoutOf(spec);
  const M = pairs.obs.length, D = pairs.obs[0]!.length, A = pairs.act[0]!.length;
  const obs = new Float32Array(M * D), action = new Float32Array(M * A);
  pairs.obs.forEach((o, i) => obs.set(o, i * D));
  pairs.act.forEach((a, i) => action.set(a, i * A));
  // Normalization from the demonstrations (entries that never vary keep std 1).
  const mean = new Float32Array(D), sd = new Float32Array(D);
  for (let i = 0; i < M; i++) for (let j = 0; j < D; j++) mean[j]! += obs[i * D + j]! / M;
  for (let i = 0; i < M; i++) for (let j = 0; j < D; j++) sd[j]! += (obs[i * D + j]! - mean[j]!) ** 2 / M;
  const policy = new GaussianPolicy({ obsDim: D, actDim: A, obsMean: mean, obsStd: Array.from(sd, (v) => (v > 1e-8 ? Math.sqrt(v) : 1)), actLow: spec.action.low, actHigh: spec.action.high, seed: 0 });
  // About 400 optimizer steps whatever the amount of data (an epoch is M / 256 steps).
  const loss = await behaviourClone(policy, { obs, action }, { epochs: Math.ceil(400 / Math.max(1, Math.floor(M / 256))), optimizer: { lr: 3e-3, clipNorm: 1 } });
  exportPolicy(policy, ctx.policyPath(id), {
    observationNames: layoutEntries(layout).map((e) => e.label),
    actionNames: spec.action.names,
    controlHz: spec.controlHz,
    policyVersion: id,
    runId: ctx.runId,
    extra: { [OBSERVATION_LAYOUT_KEY]: layoutToJson(layout), source: 'behaviour-cloning', ...(host.task !== null ? { task: host.task } : {}) },
  });
  return loss;
}

/**
 * Fewer pairs than this (one and a half reach episodes) leave no policy behind. Not two whole episodes: a
 * moment's stall after a reset lets the watchdog's hold take a step of the episode (the sim's clock runs on).
 */
const MIN_BC_PAIRS = 150;

export const expertSession: JobDefinition<typeof ExpertSessionOptions> = {
  kind: 'expert-session',
  description: "the sim's scripted expert drives the robot; every episode is recorded; the imagined rollout replays its actions in a nominal-profile sim; the checkpoint fits a behaviour-cloning policy to the demonstrations",
  options: ExpertSessionOptions,
  checkRobot: (_o, host) => simOnlyProblem(host, 'the expert session', "the sim's scripted expert, which reads the sim's state"),
  async run(o, ctx) {
    const host = ctx.robot(o.robot);
    const env = host.sim.env;
    const imagined = o.imagined ? await makeEnv({ task: host.task ?? env.task, profile: 'nominal', seed: o.seed, commandHistory: host.commandHistory }) : null;
    return session({
      ctx,
      host,
      episodes: o.episodes,
      policyVersion: 'expert',
      imagined,
      clone: o.clone,
      policy: () => {
        let expert: Expert | null = null;
        return () => {
          expert ??= env.expert();
          return expert.act(host.sim.lastObs);
        };
      },
    });
  },
};

export const policyRun: JobDefinition<typeof PolicyRunOptions> = {
  kind: 'policy',
  description: 'a deployed policy .onnx drives the robot through the safety layer; every episode is recorded',
  options: PolicyRunOptions,
  async run(o, ctx) {
    const host = ctx.robot(o.robot);
    const request: PolicySessionRequest = { policyPath: ctx.policyPath(o.policy), policy: o.policy, episodes: o.episodes };
    // A robot in its own control thread runs the whole session there, beside its safety layer.
    return host.controlThread ? host.controlThread.runPolicy(request, ctx) : policySession(host, request, ctx);
  },
};

/** A deployed policy's episodes on `host`, in the thread that hosts it (this one, or the robot's control thread). */
export async function policySession(host: RobotHost, o: PolicySessionRequest, ctx: SessionContext): Promise<string> {
  const p = await OnnxPolicy.load(o.policyPath, host.spec, ctx.control ? { threads: ctx.control.inferenceThreads } : {});
  return session({ ctx, host, episodes: o.episodes, policyVersion: o.policy, imagined: null, policy: () => (obs) => p.act(obs) });
}
