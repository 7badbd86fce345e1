// RLPD on a robot (Ball et al. 2023, as HIL-SERL runs it on real robots): soft actor-critic with an ensemble of
// layer-normalized critics, every batch drawn half from the demonstrations and half from the robot's own episodes, many
// critic updates per robot step. The off-policy baseline real-robot RL uses today, from the behaviour-cloned start and
// the demonstrations it was cloned from; diff against train_standard.ts to see what replaces the on-policy update.
//
// Before the first robot episode: the critics fitted to the demonstrations alone (the clone acts; a random critic
// would undo it). Per update: B prompts (seeded start states, standard GRPO's) → every prompt's G episodes run on the
// robot (safety layer, recorded in the store, charged to the robot clock), in standard GRPO's order, each added to the
// replay buffer as it ends → after each episode, `utd` critic updates per step it took, each on a batch half
// demonstrations, half robot steps (targets: the minimum of a random subset of the target critics at the policy's next
// action, minus the entropy term), the target critics following by Polyak averaging, and an actor and temperature
// update every `actorEvery` critic updates → evaluate every few updates. With an evaluation, the starting policy is
// evaluated before update 1 and the run hands back the parameters of the evaluation it keeps (wmrl/keep-best.ts).
import { join } from 'node:path';
import {
  Graph, ParamStore, Rng, Trainer, add, exp, gaussianLogProb, max, maximum, mean, minimum, mul, neg, square, stopGradient, sub, tensor, writeFileAtomic,
} from '../nn/index.js';
import { QEnsemble } from '../policies/q-ensemble.js';
import type { Policy } from '../policies/types.js';
import { robotEpisode, type RobotEpisode, type Prompt } from './embodied.js';
import { KeepBest } from './keep-best.js';
import type { RunRow, RunState } from './run-state.js';
import type { StandardConfig, StandardRun } from './train_standard.js';

/** Standard GRPO's loop (updates, prompts, groups, evaluation, seeds) and RLPD's learner. */
export interface RlpdConfig extends StandardConfig {
  gamma: number;
  /** Critics in the ensemble, E, and how many of the target critics a target's minimum is taken over, drawn afresh each update. */
  critics: number;
  targetSubset: number;
  criticHidden: number[];
  /** Adam's step for the actor, the critics and the temperature. */
  lr: number;
  /** Transitions per update's batch, and the share of them drawn from the demonstrations (RLPD's symmetric sampling: 0.5). */
  batch: number;
  demoShare: number;
  /** Critic updates per robot step (the update-to-data ratio), and critic updates per actor and temperature update. */
  utd: number;
  actorEvery: number;
  /** Polyak rate of the target critics. */
  tau: number;
  initTemperature: number;
  /** The entropy the temperature holds the policy to; null: −A/2 (RLPD's). */
  targetEntropy: number | null;
  /** Critic updates on the demonstrations alone before the first robot episode. */
  warmupSteps: number;
}

/** RLPD's published settings (its update-to-data ratio needs an accelerator; `bench embodied` runs the ratio its CPU affords), HIL-SERL's temperature. */
export const DEFAULT_RLPD: Omit<RlpdConfig, keyof StandardConfig> = {
  gamma: 0.99,
  critics: 10,
  targetSubset: 2,
  criticHidden: [256, 256],
  lr: 3e-4,
  batch: 256,
  demoShare: 0.5,
  utd: 20,
  actorEvery: 1,
  tau: 0.005,
  initTemperature: 0.01,
  targetEntropy: null,
  warmupSteps: 1000,
};

/** Transitions: M steps of (state, action executed, reward, next state, 1 where the episode terminated there). */
export interface OfflineData {
  /** M x D. */
  obs: Float32Array;
  /** M x A. */
  action: Float32Array;
  reward: Float32Array;
  /** M x D. */
  nextObs: Float32Array;
  terminal: Float32Array;
}

export interface RlpdRun extends Omit<StandardRun, 'config' | 'pg' | 'resume'> {
  config: RlpdConfig;
  /** The demonstrations the policy was cloned from, as transitions: half of every batch. */
  demos: OfflineData;
}

const LOG_ALPHA = 'sac.log_alpha';

/**
 * The learner's parameters in one store — a copy of the policy's, the critics, the target critics, the temperature —
 * so the critic update reads the policy's current next actions and the actor update the critics' current values.
 */
export class SoftActorCritic {
  private constructor(
    private readonly policy: Policy,
    private readonly store: ParamStore,
    private readonly online: string[],
    private readonly target: string[],
    private readonly critic: Trainer,
    private readonly actor: Trainer,
    private readonly tau: number,
  ) {}

  static async create(policy: Policy, c: RlpdConfig, low: readonly number[], high: readonly number[]): Promise<SoftActorCritic> {
    const D = policy.obsDim, A = policy.actDim, E = c.critics;
    const inputs = policy.inputs();
    if (inputs.image || inputs.instruction || inputs.features) throw new Error(`rlpd: the critics read the observation vector alone; the ${policy.kind} policy reads more`);
    if (!(Number.isInteger(c.targetSubset) && c.targetSubset >= 1 && c.targetSubset <= E)) throw new Error(`rlpd: targetSubset must be a whole number in 1..critics (${E}), got ${c.targetSubset}`);
    const store = new ParamStore(c.seed);
    for (const n of policy.paramNames()) {
      const v = policy.store.get(n);
      store.create(n, v.shape, 'zeros');
      store.set(n, v.data);
    }
    store.create(LOG_ALPHA, [1], 'zeros');
    store.set(LOG_ALPHA, [Math.log(c.initTemperature)]);
    const qc = { members: E, obsDim: D, actDim: A, hidden: c.criticHidden, obsMean: inputs.obsMean, obsStd: inputs.obsStd };
    const q = new QEnsemble(store, 'q', qc), qt = new QEnsemble(store, 'q_target', qc);
    const online = q.paramNames(), target = qt.paramNames();
    target.forEach((n, i) => store.set(n, store.get(online[i]!).data));
    // The policy's sample, as the robot executes it: clipped into the action bounds; its log-probability the sample's.
    const act = (obs: ReturnType<Graph['input']>, noise: ReturnType<Graph['input']>) => {
      const { mean: mu, logStd } = policy.forward(obs);
      const raw = add(mu, mul(exp(logStd), noise));
      const g = obs.graph;
      return { action: minimum(maximum(raw, g.constant([...low], [A])), g.constant([...high], [A])), logProb: gaussianLogProb(raw, mu, logStd) };
    };

    // Critics: y = r + γ (1 − terminal) (min over the drawn target critics of Q'(s', a') − α log π(a'|s')).
    const cg = new Graph();
    const obs = cg.input('obs', ['N', D]), action = cg.input('action', ['N', A]), reward = cg.input('reward', ['N']), next = cg.input('next_obs', ['N', D]);
    const live = cg.input('not_terminal', ['N']), nextNoise = cg.input('next_noise', ['N', A]), left = cg.input('left_out', [E, 1]);
    const n = act(next, nextNoise);
    const alpha = exp(cg.param(LOG_ALPHA, [1]));
    // Critics left out of the subset are pushed far above every value so the minimum never takes them.
    const minTarget = neg(max(neg(add(qt.forward(next, n.action), left)), 0));
    const y = stopGradient(add(reward, mul(mul(live, c.gamma), sub(minTarget, mul(alpha, n.logProb)))));
    const critic = await Trainer.create({ loss: mean(square(sub(q.forward(obs, action), y))), store, optimizer: { lr: c.lr }, trainable: online }, { threads: 1 });

    // Actor: α log π(ã|s) − mean over the critics of Q(s, ã), ã reparameterized; temperature: −α (log π + target entropy).
    const ag = new Graph();
    const aObs = ag.input('obs', ['N', D]), aNoise = ag.input('noise', ['N', A]);
    const s = act(aObs, aNoise);
    const aAlpha = exp(ag.param(LOG_ALPHA, [1]));
    const entropyTarget = c.targetEntropy ?? -A / 2;
    const actorLoss = mean(sub(mul(stopGradient(aAlpha), s.logProb), mean(q.forward(aObs, s.action), 0)));
    const temperatureLoss = mean(mul(neg(aAlpha), stopGradient(add(s.logProb, entropyTarget))));
    const actor = await Trainer.create({ loss: add(actorLoss, temperatureLoss), store, optimizer: { lr: c.lr }, trainable: [...policy.paramNames(), LOG_ALPHA], metrics: { entropy: neg(mean(s.logProb)) } }, { threads: 1 });
    return new SoftActorCritic(policy, store, online, target, critic, actor, c.tau);
  }

  get temperature(): number {
    return Math.exp(this.store.get(LOG_ALPHA).data[0]!);
  }

  /** One critic update; the target critics follow. */
  async criticStep(b: Batch, nextNoise: Float32Array, leftOut: Float32Array): Promise<number> {
    const N = b.reward.length, D = b.obs.length / N, A = b.action.length / N, E = leftOut.length;
    const r = await this.critic.step({
      obs: tensor(b.obs, [N, D]), action: tensor(b.action, [N, A]), reward: tensor(b.reward, [N]), next_obs: tensor(b.nextObs, [N, D]),
      not_terminal: tensor(b.notTerminal, [N]), next_noise: tensor(nextNoise, [N, A]), left_out: tensor(leftOut, [E, 1]),
    });
    this.critic.syncToStore();
    const t = this.tau;
    this.target.forEach((name, i) => {
      const tv = this.store.get(name).data, ov = this.store.get(this.online[i]!).data;
      for (let j = 0; j < tv.length; j++) tv[j] = (1 - t) * tv[j]! + t * ov[j]!;
    });
    return r.loss;
  }

  /** One actor and temperature update on the batch's states. */
  async actorStep(obs: Float32Array, noise: Float32Array): Promise<{ loss: number; entropy: number }> {
    const A = this.policy.actDim, N = noise.length / A;
    const r = await this.actor.step({ obs: tensor(obs, [N, obs.length / N]), noise: tensor(noise, [N, A]) });
    this.actor.syncToStore();
    return { loss: r.loss, entropy: (r.metrics.entropy!.data as Float32Array)[0]! };
  }

  /** The policy's store takes the learner's current policy (it acts on the robot and is evaluated from there). */
  syncPolicy(): void {
    for (const n of this.policy.paramNames()) this.policy.store.set(n, this.store.get(n).data);
  }

  async release(): Promise<void> {
    await this.critic.release();
    await this.actor.release();
  }
}

/** N transitions of one update: states, actions, rewards, next states, 0 where the transition ended its episode in a terminal state. */
export interface Batch {
  obs: Float32Array;
  action: Float32Array;
  reward: Float32Array;
  nextObs: Float32Array;
  notTerminal: Float32Array;
}

/** Transitions in a fixed capacity, filled in order (the robot's replay buffer; the demonstrations fill theirs at once). */
class Replay {
  size = 0;
  readonly data: OfflineData;
  constructor(readonly capacity: number, readonly D: number, readonly A: number) {
    this.data = { obs: new Float32Array(capacity * D), action: new Float32Array(capacity * A), reward: new Float32Array(capacity), nextObs: new Float32Array(capacity * D), terminal: new Float32Array(capacity) };
  }

  static of(d: OfflineData, D: number, A: number): Replay {
    const M = d.reward.length;
    if (d.obs.length !== M * D || d.nextObs.length !== M * D || d.action.length !== M * A || d.terminal.length !== M) throw new Error(`rlpd: the demonstrations hold ${M} rewards but ${d.obs.length / D} states, ${d.nextObs.length / D} next states, ${d.action.length / A} actions and ${d.terminal.length} terminal flags`);
    const r = new Replay(M, D, A);
    r.data.obs.set(d.obs); r.data.action.set(d.action); r.data.reward.set(d.reward); r.data.nextObs.set(d.nextObs); r.data.terminal.set(d.terminal);
    r.size = M;
    return r;
  }

  /** A robot episode's steps: the actions the robot received, terminal at its last step where it ended before the time limit or in success. */
  addEpisode(ep: RobotEpisode, maxSteps: number): void {
    const { D, A } = this, T = ep.steps;
    if (this.size + T > this.capacity) throw new Error(`rlpd: the replay buffer holds ${this.capacity} steps; an episode of ${T} does not fit after ${this.size}`);
    for (let t = 0; t < T; t++) {
      const i = this.size++;
      this.data.obs.set(ep.obs.subarray(t * D, (t + 1) * D), i * D);
      this.data.action.set(ep.sent.subarray(t * A, (t + 1) * A), i * A);
      this.data.reward[i] = ep.reward[t]!;
      this.data.nextObs.set(ep.obs.subarray((t + 1) * D, (t + 2) * D), i * D);
      this.data.terminal[i] = t === T - 1 && (ep.success || T < maxSteps) ? 1 : 0;
    }
  }

  /** `n` transitions drawn uniformly into `b` from row `at` on. */
  draw(n: number, b: Batch, at: number, rng: Rng): void {
    const { D, A } = this;
    for (let r = at; r < at + n; r++) {
      const i = rng.int(this.size);
      b.obs.set(this.data.obs.subarray(i * D, (i + 1) * D), r * D);
      b.action.set(this.data.action.subarray(i * A, (i + 1) * A), r * A);
      b.reward[r] = this.data.reward[i]!;
      b.nextObs.set(this.data.nextObs.subarray(i * D, (i + 1) * D), r * D);
      b.notTerminal[r] = 1 - this.data.terminal[i]!;
    }
  }
}

export async function trainRlpd(run: RlpdRun): Promise<RunState> {
  const { config: c, policy, target, prompts } = run;
  const D = policy.obsDim, A = policy.actDim, G = c.groupSize, N = c.batch, E = c.critics;
  if (!(c.utd > 0 && c.actorEvery >= 1 && Number.isInteger(c.actorEvery))) throw new Error(`rlpd: utd must be > 0 and actorEvery a positive whole number, got ${c.utd} and ${c.actorEvery}`);
  if (!(c.demoShare >= 0 && c.demoShare <= 1)) throw new Error(`rlpd: demoShare must be in [0, 1], got ${c.demoShare}`);
  const rng = new Rng(c.seed);
  const state: RunState = { algo: 'rlpd', update: 0, rng: rng.getState(), clock: target.clock.state(), rows: [], finalObs: {}, episodeIds: [] };
  const demos = Replay.of(run.demos, D, A);
  const robot = new Replay(c.updates * c.prompts * G * target.maxSteps, D, A);
  const keep = await KeepBest.begin(run, state, c.keepBest);
  const sac = await SoftActorCritic.create(policy, c, target.robot.spec.action.low, target.robot.spec.action.high);
  const batch: Batch = { obs: new Float32Array(N * D), action: new Float32Array(N * A), reward: new Float32Array(N), nextObs: new Float32Array(N * D), notTerminal: new Float32Array(N) };
  const normals = (n: number) => Float32Array.from({ length: n }, () => rng.normal());
  let criticSteps = 0, owed = 0, lastCritic: number | null = null, lastActor: number | null = null;
  // A critic update on a fresh batch (half demonstrations, half robot steps once there are any; the target's subset
  // of critics drawn afresh), and, after the warm-up, the actor's turn.
  const learn = async (warmup: boolean) => {
    const fromDemos = robot.size === 0 ? N : Math.round(N * c.demoShare);
    demos.draw(fromDemos, batch, 0, rng);
    if (fromDemos < N) robot.draw(N - fromDemos, batch, fromDemos, rng);
    const leftOut = new Float32Array(E).fill(1e6);
    const order = Array.from({ length: E }, (_, i) => i);
    rng.shuffle(order);
    order.slice(0, c.targetSubset).forEach((i) => (leftOut[i] = 0));
    lastCritic = await sac.criticStep(batch, normals(N * A), leftOut);
    if (!warmup && ++criticSteps % c.actorEvery === 0) lastActor = (await sac.actorStep(batch.obs, normals(N * A))).loss;
  };
  const t0 = performance.now();

  try {
    // The critics learn the demonstrations' values before the actor moves.
    for (let w = 0; w < c.warmupSteps; w++) await learn(true);

    for (let u = 0; u < c.updates; u++) {
      run.hooks?.signal?.throwIfAborted();
      const updatePrompts: Prompt[] = Array.from({ length: c.prompts }, (_, b) => prompts.get(c.promptSeed0 + u * c.prompts + b));
      const eps: RobotEpisode[] = [];
      for (const prompt of updatePrompts) {
        for (let k = 0; k < G; k++) {
          const ep = await robotEpisode(target, policy, prompt.seed, rng, `rlpd-${u}`);
          run.hooks?.onEpisode?.(ep, 'train');
          state.episodeIds.push(ep.id);
          eps.push(ep);
          robot.addEpisode(ep, target.maxSteps);
          // The update-to-data ratio: utd critic updates per robot step, the fraction carried to the next episode.
          owed += c.utd * ep.steps;
          for (; owed >= 1; owed--) await learn(false);
          sac.syncPolicy();
        }
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
        loss: lastActor,
        approxKl: null,
        refKl: null,
        criticLoss: lastCritic,
      };
      if (run.evaluate && ((u + 1) % c.evalEvery === 0 || u + 1 === c.updates)) keep.observe(row, await run.evaluate(policy), target.clock);
      state.rows.push(row);
      state.update = u + 1;
      state.rng = rng.getState();
      state.clock = target.clock.state();
      state.extra = { criticSteps, temperature: sac.temperature };
      run.hooks?.onUpdate?.(row);
    }
  } finally {
    keep.restore();
    await sac.release();
  }
  if (run.outDir) writeFileAtomic(join(run.outDir, 'history.json'), [JSON.stringify(state.rows, null, 1)]);
  return state;
}
