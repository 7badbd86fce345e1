// Everything an embodied run on a sim robot starts from: the robot (the task under a hardware
// profile, behind the safety layer, recorded in the store), prompts, a behaviour-cloned policy and a
// world model pretrained on nominal sim data. The CLI, the bench and the tests build runs with it;
// a real robot replaces `target` and keeps the rest.
import { Rng } from '../nn/index.js';
import { DEFAULT_SAFETY, SafetyLayer } from '../hardware/safety.js';
import { SimRobot } from '../hardware/robots/sim.js';
import { behaviourClone } from '../policies/bc.js';
import { DEFAULT_PG_CONFIG, type PgConfig } from '../policies/pg.js';
import { GaussianPolicy } from '../policies/gaussian.js';
import type { Policy } from '../policies/types.js';
import { exploratoryEpisodes, makeEnv } from '../sim/index.js';
import { EnsembleModel, TransitionBuffer, fitRollout, type Transitions } from '../worldmodel/index.js';
import type { Scorer } from '../hardware/record.js';
import { EVAL_SEED0, SimPrompts, evaluateSuccess, fleetRobots, fleetTarget, robotTarget, type ClosableTarget, type Evaluation } from './embodied.js';
import type { TargetRobot } from './fleet.js';

export interface PretrainOptions {
  task: string;
  /** Expert demonstrations (nominal sim) for behaviour cloning. */
  bcEpisodes: number;
  bcEpochs: number;
  /**
   * DAgger rounds after the first fit: each runs the current clone for `daggerEpisodes` episodes on the
   * nominal sim, labels every visited state with the expert's action, adds them to the data and refits
   * for `daggerEpochs` (a plain clone drifts into states the expert never showed and cannot recover).
   */
  daggerRounds: number;
  daggerEpisodes: number;
  daggerEpochs: number;
  /** Exploratory sim episodes the world model is pretrained on. */
  wmEpisodes: number;
  /**
   * Domain randomization of the world model's data: each exploratory episode runs under its own profile, the
   * context parameters (sim/profiles.ts CONTEXT_PARAMS: mass, friction, damping, actuator gain) drawn
   * log-uniformly in [1/spread, spread], and the model is conditioned on that context, which train_wmrl
   * identifies from the robot's anchor episodes. 0: nominal sim only, no context.
   */
  wmRandomize: number;
  wmEpochs: number;
  wmHidden: number[];
  wmMembers: number;
  /** Past actions the world model conditions on, so refits on the robot's episodes can learn its actuation latency. */
  wmActionHistory: number;
  /**
   * After the one-step fit, this many passes of multi-step fitting (worldmodel/multistep.ts fitRollout: each member
   * trained through its own open-loop rollouts of `wmRolloutSteps` steps along the sim episodes); 0: none.
   */
  wmRolloutEpochs: number;
  wmRolloutSteps: number;
  /** The robot reports its last this many commands in its observation (sim/env.ts EnvOptions.commandHistory): the sim data does too. Default 0. */
  commandHistory?: number;
  policyHidden: number[];
  initLogStd: number;
  seed: number;
  /** false: build the policy (its normalization), the model and the sim data without fitting them (a resumed run loads its own). */
  fit?: boolean;
  onProgress?: (what: string, done: number, total: number) => void;
}

export const DEFAULT_PRETRAIN: Omit<PretrainOptions, 'task'> = {
  bcEpisodes: 150,
  bcEpochs: 300,
  daggerRounds: 5,
  daggerEpisodes: 100,
  daggerEpochs: 100,
  wmEpisodes: 300,
  wmRandomize: 3,
  wmEpochs: 20,
  wmHidden: [128, 128, 128],
  wmMembers: 5,
  wmActionHistory: 4,
  wmRolloutEpochs: 4,
  wmRolloutSteps: 16,
  policyHidden: [256, 256],
  initLogStd: -1,
  seed: 0,
};

/**
 * The clipped policy gradient of post-training a pretrained policy on a robot, for both trainers (`wmrl train`,
 * the service's job, `bench embodied`): its learning rate is large enough to move a pretrained policy in a short run.
 */
export const POST_TRAIN_PG: PgConfig = { ...DEFAULT_PG_CONFIG, optimizer: { lr: 1e-3, clipNorm: 0.5 }, epochs: 4, minibatch: 512 };

/** POST_TRAIN_PG under GRPO's KL penalty to the pretrained policy, β = `klCoef` (0: none), and Adam's step `lr` (absent: POST_TRAIN_PG's). */
export function postTrainPg(klCoef: number, lr?: number): PgConfig {
  const c = klCoef > 0 ? { ...POST_TRAIN_PG, klCoef } : POST_TRAIN_PG;
  return lr === undefined ? c : { ...c, optimizer: { ...c.optimizer, lr } };
}

/**
 * The demonstrations a pretrained clone learned from, every round's steps in order (M steps): the state, the expert's
 * label the clone was fitted to, the action executed (the label with noise, or the clone's under DAgger), its reward,
 * the state after it, and 1 where the episode terminated there (success; a time limit is not a termination). Kept for
 * learners that reuse them: an off-policy learner's offline data, a clone refitted with more demonstrations.
 */
export interface PretrainDemos {
  /** M x D. */
  obs: Float32Array;
  /** M x A. */
  label: Float32Array;
  /** M x A. */
  executed: Float32Array;
  reward: Float32Array;
  /** M x D. */
  nextObs: Float32Array;
  terminal: Float32Array;
}

export interface Pretrained {
  policy: GaussianPolicy;
  demos: PretrainDemos;
  model: EnsembleModel;
  simData: Transitions;
  /**
   * Final behaviour-cloning loss, and the world model's loss (EvalReport.loss) on held-out exploratory episodes after
   * all its fitting (NaN when not fitted).
   */
  bcLoss: number;
  wmValLoss: number;
}

/**
 * Behaviour cloning from the task's scripted expert on the nominal sim — first its demonstrations
 * (noise injected into the executed actions, the expert's clean action as the label), then DAgger
 * rounds (the clone drives, the expert labels) — and a world model fitted to exploratory nominal-sim
 * episodes. Seeds below 1,000,000 are used here; prompts and evaluation use other ranges.
 */
export async function pretrain(o: PretrainOptions): Promise<Pretrained> {
  const env = await makeEnv({ task: o.task, profile: 'nominal', commandHistory: o.commandHistory });
  const D = env.observationSpace.state.shape[0], A = env.actionSpace.shape[0];
  const rng = new Rng(o.seed + 17);
  const fit = o.fit ?? true;
  const obs: number[] = [], act: number[] = [], executed: number[] = [], reward: number[] = [], nextObs: number[] = [], terminal: number[] = [];
  const bound = (v: number) => Math.max(-1, Math.min(1, v));
  let policy: GaussianPolicy | null = null;
  let bcLoss = NaN;
  const rounds = fit ? o.daggerRounds : 0;
  try {
    for (let round = 0; round <= rounds; round++) {
      const episodes = round === 0 ? o.bcEpisodes : o.daggerEpisodes;
      for (let ep = 0; ep < episodes; ep++) {
        let ob = env.reset(o.seed * 1000 + round * 100_000 + ep);
        const expert = env.expert();
        for (;;) {
          // The policy's mean lives in the action bounds: so do its labels.
          const a = expert.act(ob).map(bound);
          obs.push(...ob.state);
          act.push(...a);
          // Round 0 executes the expert with noise injected (the clone sees recovery states); later
          // rounds execute the clone itself (its mean plus the same noise), labelled by the expert.
          const base = policy ? (await policy.act(ob.state, new Float32Array(A))).mean : a;
          const sent = base.map((v) => bound(v + 0.3 * rng.normal()));
          const r = env.step(sent);
          executed.push(...sent);
          reward.push(r.reward);
          nextObs.push(...r.obs.state);
          terminal.push(r.terminated ? 1 : 0);
          ob = r.obs;
          if (r.terminated || r.truncated) break;
        }
        o.onProgress?.(round === 0 ? 'demonstrations' : `DAgger round ${round}/${rounds}`, ep + 1, episodes);
      }
      const demos = { obs: Float32Array.from(obs), action: Float32Array.from(act) };
      if (!policy) {
        // Normalization from the first demonstrations (entries that never vary keep std 1).
        const mean = new Float32Array(D), sd = new Float32Array(D);
        const M = demos.obs.length / D;
        for (let i = 0; i < M; i++) for (let j = 0; j < D; j++) mean[j]! += demos.obs[i * D + j]! / M;
        for (let i = 0; i < M; i++) for (let j = 0; j < D; j++) sd[j]! += (demos.obs[i * D + j]! - mean[j]!) ** 2 / M;
        const std = Array.from(sd, (v) => (v > 1e-8 ? Math.sqrt(v) : 1));
        policy = new GaussianPolicy({ obsDim: D, actDim: A, hidden: o.policyHidden, initLogStd: o.initLogStd, obsMean: mean, obsStd: std, seed: o.seed });
      }
      if (!fit) break;
      const epochs = round === 0 ? o.bcEpochs : o.daggerEpochs;
      const label = round === 0 ? 'behaviour cloning' : `DAgger round ${round}/${rounds}: cloning`;
      bcLoss = await behaviourClone(policy, demos, { epochs, seed: o.seed + round, onEpoch: (e) => o.onProgress?.(label, e + 1, epochs) });
    }
  } finally {
    env.dispose();
  }

  const wm = await pretrainWorldModel(o);
  const demos: PretrainDemos = { obs: Float32Array.from(obs), label: Float32Array.from(act), executed: Float32Array.from(executed), reward: Float32Array.from(reward), nextObs: Float32Array.from(nextObs), terminal: Float32Array.from(terminal) };
  return { policy: policy!, demos, bcLoss, ...wm };
}

/**
 * The world model alone: exploratory sim episodes (under randomized profiles with `wmRandomize`, the model then
 * conditioned on their context) and the ensemble fitted to them (unless `fit` is false).
 */
export async function pretrainWorldModel(o: PretrainOptions): Promise<Pick<Pretrained, 'model' | 'simData' | 'wmValLoss'>> {
  if (!(o.wmRandomize === 0 || o.wmRandomize >= 1)) throw new Error(`pretrain: wmRandomize must be 0 (off) or a spread >= 1, got ${o.wmRandomize}`);
  const episodes = async (n: number, seed0: number) => {
    const data = await exploratoryEpisodes(o.task, n, seed0, { commandHistory: o.commandHistory, ...(o.wmRandomize > 0 ? { randomize: o.wmRandomize } : {}) });
    const buf = new TransitionBuffer(data.dObs, data.dAct, o.wmActionHistory, data.contextNames?.length ?? 0);
    for (const e of data.episodes) buf.addEpisode({ ...e, weight: 1 });
    return { data, transitions: buf.transitions() };
  };
  const { data, transitions: simData } = await episodes(o.wmEpisodes, 50_000 + o.seed * 1000);
  const contextNames = data.contextNames ? [...data.contextNames] : undefined;
  const model = new EnsembleModel({ dObs: data.dObs, dAct: data.dAct, members: o.wmMembers, hidden: o.wmHidden, actionHistory: o.wmActionHistory, commandHistory: o.commandHistory ?? 0, obsNames: data.obsNames, contextNames, ...(data.derived ? { derived: data.derived } : {}), seed: o.seed });
  if (!(o.fit ?? true)) return { model, simData, wmValLoss: NaN };
  await model.fit(simData, { epochs: o.wmEpochs, seed: o.seed, onEpoch: (r) => o.onProgress?.('world model', r.epoch, o.wmEpochs) });
  if (o.wmRolloutEpochs > 0) await fitRollout(model, simData, { steps: o.wmRolloutSteps, epochs: o.wmRolloutEpochs, seed: o.seed, onEpoch: (r) => o.onProgress?.('world model rollouts', r.epoch, o.wmRolloutEpochs) });
  // Validation after every fit, on episodes of their own (one per ten fitted), from the seeds right after the fitted
  // ones: fit()'s own split scores the one-step fit alone, and the multi-step fit trains on every row.
  const { transitions: held } = await episodes(Math.ceil(o.wmEpisodes / 10), 50_000 + o.seed * 1000 + o.wmEpisodes);
  return { model, simData, wmValLoss: (await model.evaluate(held)).loss };
}

export interface SimRobotTargetOptions {
  task: string;
  /** The robot's hardware profile (the reality gap): 'gap' for the bench. */
  profile: string;
  /** Episode store file; omit for no recording. */
  store?: string;
  /**
   * The store's durability (episodes/store StoreOptions.synchronous): FULL (default, as for a real robot) fsyncs every
   * step; NORMAL survives a killed process only, for a store nobody reads after the process (a scratch file).
   */
  storeSync?: 'FULL' | 'NORMAL';
  robots: number;
  resetSeconds: number;
  seed: number;
  /** Side of the robot's square camera image, px (for policies that read it); omit for no camera. */
  image?: number;
  /** The robot reports its last this many commands in its observation (sim/env.ts EnvOptions.commandHistory). */
  commandHistory?: number;
  signal?: AbortSignal;
  /** A fleet of this many sim robots (named ROBOT-1, ROBOT-2, …), each running its own episodes at once; omit for one robot. */
  fleet?: number;
  /** A fleet's robot lost mid-run. */
  onLost?: (robot: TargetRobot, error: Error, left: number) => void;
}

/** A sim robot behind the safety layer, with its own outcome signal (the sim's step). */
async function safeSim(o: SimRobotTargetOptions): Promise<{ sim: SimRobot; robot: SafetyLayer; outcome: Scorer }> {
  const sim = await SimRobot.create({ task: o.task, profile: o.profile, seed: o.seed, image: o.image, commandHistory: o.commandHistory });
  // Stepped as fast as it goes: the safety layer reads the sim's clock, so the host's compute time (a slow policy
  // call, a pause for garbage collection) never makes a command stale and the run stays reproducible.
  const robot = new SafetyLayer(sim, { ...DEFAULT_SAFETY, maxDelta: 2 }, { watchdog: false, now: () => sim.clockMs });
  return { sim, robot, outcome: () => ({ reward: sim.lastStep?.reward ?? 0, done: !!(sim.lastStep?.terminated || sim.lastStep?.truncated), success: sim.lastStep?.info.success }) };
}

/** A sim robot behind the safety layer (or a fleet of them), as a trainer's robot target; dispose it with `close()`. */
export async function simRobotTarget(o: SimRobotTargetOptions): Promise<ClosableTarget> {
  if (o.fleet !== undefined) {
    if (!(Number.isInteger(o.fleet) && o.fleet >= 1)) throw new Error(`sim robot target: a fleet of ${o.fleet} robots`);
    if (o.robots !== 1) throw new Error(`sim robot target: robots ${o.robots} stands one robot in for several in the accounting; a fleet of ${o.fleet} is its own robots`);
    const sims = await Promise.all(Array.from({ length: o.fleet }, () => safeSim(o)));
    const robots = fleetRobots(sims.map(({ robot, outcome }, i) => ({ robot, outcome, meta: { robot: `${robot.spec.name}-${i + 1}`, hardwareProfile: o.profile, task: o.task } })));
    return fleetTarget(robots, { maxSteps: sims[0]!.sim.env.horizon, realTime: false, store: o.store, resetSeconds: o.resetSeconds, signal: o.signal, onLost: o.onLost });
  }
  const { sim, robot, outcome } = await safeSim(o);
  return robotTarget(robot, {
    outcome,
    maxSteps: sim.env.horizon,
    realTime: false,
    store: o.store,
    ...(o.storeSync ? { storeOptions: { synchronous: o.storeSync } } : {}),
    meta: { robot: robot.spec.name, hardwareProfile: o.profile, task: o.task },
    robots: o.robots,
    resetSeconds: o.resetSeconds,
    signal: o.signal,
  });
}

/** Held-out evaluation: `episodes` start states from seed 9,000,000 on, under the robot's profile. */
export function heldOutEvaluation(task: string, profile: string, episodes: number, opts: { commandHistory?: number } = {}): (policy: Policy) => Promise<Evaluation> {
  return (policy) => evaluateSuccess(policy, task, profile, episodes, EVAL_SEED0, opts);
}

export { SimPrompts };
