// WMRL on a robot: groups are imagined in the learned world model; a thin stream of anchor groups is
// executed on the robot and corrects the world model's scores through the Corrector. Diff against
// train_standard.ts to see exactly what WMRL changes.
//
// Per update: B prompts → B×G rollouts imagined (policy + ensemble in one graph per few steps, one member per group;
// a policy that reads the camera sees the digital twin's renders of the predicted states instead, stepwise, or
// imagines through a face that needs no camera, e.g. a VLA's latent face, policies/latent-vla.ts) →
// world-model scores (the predicted return up to the predicted success, or last-k minus first-k progress; the
// members' variance) → Corrector.step: anchors chosen → their groups run on the robot (safety layer,
// recorded in the store, charged to the robot clock), paired with the world model's open-loop replay
// of the very episodes → map and disagreement updated → calibrated advantages, anchor groups weighted
// → clipped policy-gradient update on real steps for anchor groups and imagined steps for the rest →
// the world model refits from the store every few updates → reward-hacking alarm → evaluation.
import { join } from 'node:path';
import { Rng, writeFileAtomic } from '../nn/index.js';
import { layoutOf } from '../common/layout.js';
import type { Policy } from '../policies/types.js';
import type { ClippedPolicyGradient } from '../policies/pg.js';
import type { SceneTwin } from '../sim/twin.js';
import { ModelEnv, TransitionBuffer, delayActions, fitRollout, identifySystem, repeatRows, replayScore, type DelayEpisode, type EnsembleModel, type Transitions } from '../worldmodel/index.js';
import { groupAdvantages, DEFAULT_ADVANTAGE_CONFIG } from './advantages.js';
import { Corrector, correctorConfig, type CorrectorConfig, type CorrectorState } from './corrector.js';
import { imaginePolicy } from './imagine-policy.js';
import { episodeTransitions, pgBatch, robotEpisode, type Evaluation, type RobotEpisode, type RobotTarget, type Prompt, type PromptSource, type Trajectory } from './embodied.js';
import { loadRunState, saveRunState, type RunHooks, type RunRow, type RunState } from './run-state.js';

export interface WmrlConfig {
  updates: number;
  /** Prompts (groups) per update, B. */
  prompts: number;
  /** Rollouts per prompt, G. */
  groupSize: number;
  evalEvery: number;
  promptSeed0: number;
  seed: number;
  /** The correction core; false = pure world model (no robot execution at all). */
  corrector: CorrectorConfig | false;
  /**
   * Imagined steps per rollout from the prompt's start: the task's horizon, or fewer (the anchors' replays then cover
   * the same first steps); fewer steps can rank a group better and still train the policy worse.
   */
  horizon: number;
  /**
   * How a rollout's dense signal collapses to one score, for imagined rollouts and the anchors' replays alike
   * (worldmodel/scorers.ts): 'return' (the predicted episode return, what the robot's score measures) or
   * 'last-minus-first' (mean of the last scoreK steps minus the first scoreK).
   */
  scoreMode: 'return' | 'last-minus-first';
  /** Steps averaged at each end in 'last-minus-first'. */
  scoreK: number;
  /** An imagined rollout ends at the first step whose predicted success probability exceeds this (real episodes end at success). */
  successThreshold: number;
  /** Refit the world model from the store every this many updates (0: never). */
  refitEvery: number;
  refitEpochs: number;
  /**
   * A refit keeps the multi-step fit pretraining gave the dynamics (worldmodel/multistep.ts): the reward and success
   * heads refit one step, the dynamics through open-loop rollouts of this many steps, `refitRolloutWindows` windows
   * per member and pass (0 steps: the whole model refits one step), because a one-step refit undoes the multi-step
   * fit and imagined rollouts drift again.
   */
  refitRolloutSteps: number;
  refitRolloutWindows: number;
  /**
   * Loss weight of a pretraining (sim) transition relative to a real one when refitting; 0 refits on the
   * robot's episodes alone. Where the robot and the sim differ the two contradict each other for the same
   * input, so every unit of sim weight pulls the model back toward the sim.
   */
  simWeight: number;
  /**
   * What the robot's recorded rewards are: 'dense' — the task's dense reward, which refits teach the world
   * model's reward head; 'success' — only its success (a robot without a dense measurement), so refits
   * teach the dynamics and the success head from its episodes and the reward head keeps what the sim taught.
   */
  robotRewards: 'dense' | 'success';
  /**
   * An anchor episode's real score, what its group's advantages and the Corrector's pairs take as the truth:
   *   'robot':   the robot's recorded return (its own measurement: on a robot that reports only success, that success);
   *   'relabel': the world model's reward summed over the episode's recorded transitions (`relabelScore`: the states
   *              the robot reported, the policy's commands as late as imagination feeds them, under the identified
   *              context), over the steps a replay covers: a dense score of what really happened, for a robot that
   *              measures only success. The robot still decides where the episode ends (its success ends it), and the
   *              reward-hacking alarm still compares with its measured success. Its error is the reward head's on real
   *              states, one step each, not imagination's compounding one. It corrects the anchors' scores only:
   *              imagined groups that rank badly still drown their signal (see `imaginedGate`).
   */
  anchorScore: 'robot' | 'relabel';
  /**
   * The closed-loop gate on the imagined groups (false: off). Each anchor episode runs under the very policy noise its
   * imagined rollout drew (rollout k of the group: the same draws, step by step, over the imagined steps; any later step
   * draws afresh), so each real episode is paired with the imagined rollout of the same policy from the same start under
   * the same noise, which reacted to the world model's predicted states where the real one reacted to the robot's. Per
   * anchor group, the rank agreement of the imagined scores with the real ones (`rankAgreement`: Spearman, ties
   * averaged; a group whose real or imagined scores are all equal, or with fewer than 3 complete episodes, measures
   * nothing) is what the imagined groups' ranking is worth on the robot; the mean of the latest `window` agreements,
   * clipped to [0, 1], is the share of the imagined groups the update keeps once `minGroups` are measured (until then
   * all of them; the rest are dropped: a lower loss weight would not shrink the update under Adam, see the update).
   * The Corrector's open-loop replays do not measure this: a replay feeds the real episode's own actions, so it misses
   * the error a reactive policy suffers when it reacts to imagined states.
   */
  imaginedGate: { window: number; minGroups: number } | false;
  /**
   * The robot's actuation delay in control steps, which a model pretrained on the sim lacks
   * (worldmodel/delay.ts): a number, or 'identify' — the d in [0, maxActionDelay] under which the model best
   * explains the latest anchor episodes when fed the policy's actions d steps late (one-step likelihood),
   * estimated after the first anchors and again after every refit. Imagination and the anchors' replays feed the
   * policy's commands this late, and refits take the commands the store records this late.
   */
  actionDelay: number | 'identify';
  maxActionDelay: number;
  /**
   * For a context-conditioned world model (pretrained across randomized sim profiles): 'identify' — the
   * context (mass, friction, damping, actuator gain) under which the model best explains the latest anchor
   * episodes (worldmodel/context.ts), identified with the delay and imagined under; 'fixed' — the context
   * the model holds (nominal after pretraining). Ignored for a model without a context.
   */
  context: 'identify' | 'fixed';
  /** Reward-hacking alarm: window (updates) and the gap between predicted and measured success that raises it. */
  alarmWindow: number;
  alarmGap: number;
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
};

export interface WmrlRun {
  config: WmrlConfig;
  policy: Policy;
  pg: ClippedPolicyGradient;
  model: EnsembleModel;
  /** The sim transitions the model was pretrained on; refits mix them with the real episodes. */
  simData: Transitions;
  target: RobotTarget;
  prompts: PromptSource;
  /** The task's digital twin: renders the camera images a policy that reads them sees in imagination (wmrl/imagine-policy.ts). */
  twin?: SceneTwin;
  /**
   * The policy's face in imagination and in the update (default: `policy` itself): a policy over the same
   * trainable parameters that imagines more cheaply, e.g. a VLA's latent face (policies/latent-vla.ts: a map
   * distilled from the frozen image encoder instead of the twin's renders). `policy` still acts on the robot
   * and is what `evaluate` measures; `pg` must train the face. The anchor groups' robot steps enter the update
   * restated for the face: its log-probabilities of the actions taken, what it reads of each step.
   */
  face?: Policy;
  /** Held-out measurement of true success; omit where none exists beside the robot (the robot's own episodes are then the measure). */
  evaluate?: (policy: Policy) => Promise<Evaluation>;
  outDir?: string;
  resume?: boolean;
  hooks?: RunHooks;
  /** Warnings (reward-hacking alarm); default: stderr. */
  warn?: (message: string) => void;
}

/** A rollout the Corrector sees: group b, member k of this update. */
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
  /** The imagined gate's latest per-anchor-group rank agreements (WmrlConfig.imaginedGate). */
  agreements?: number[];
}

/**
 * Spearman's rank correlation of x and y, ties given their mean rank; NaN where either holds fewer than two distinct
 * values (no ranking to agree with) or their lengths differ.
 */
export function rankAgreement(x: ArrayLike<number>, y: ArrayLike<number>): number {
  const n = x.length;
  if (y.length !== n || n < 2) return NaN;
  const ranks = (v: ArrayLike<number>) => {
    const order = Array.from({ length: n }, (_, i) => i).sort((p, q) => v[p]! - v[q]!);
    const r = new Float64Array(n);
    for (let i = 0; i < n;) {
      let j = i;
      while (j + 1 < n && v[order[j + 1]!] === v[order[i]!]) j++;
      for (let k = i; k <= j; k++) r[order[k]!] = (i + j) / 2;
      i = j + 1;
    }
    return r;
  };
  const rx = ranks(x), ry = ranks(y), m = (n - 1) / 2;
  let c = 0, vx = 0, vy = 0;
  for (let i = 0; i < n; i++) {
    c += (rx[i]! - m) * (ry[i]! - m);
    vx += (rx[i]! - m) ** 2;
    vy += (ry[i]! - m) ** 2;
  }
  return vx > 0 && vy > 0 ? c / Math.sqrt(vx * vy) : NaN;
}

/**
 * The first `share` x their number of `items`, rounded at random (up with the fraction's probability), so the number
 * kept is `share` x the number in expectation. `share` in [0, 1].
 */
export function keptShare<T>(items: readonly T[], share: number, rng: Rng): T[] {
  if (!(share >= 0 && share <= 1)) throw new Error(`keptShare: the share must be in [0, 1], got ${share}`);
  const x = share * items.length, whole = Math.floor(x);
  return items.slice(0, whole + (rng.next() < x - whole ? 1 : 0));
}

/**
 * The policy noise an anchor episode draws: its imagined rollout's, value by value (`normal`), then, past the imagined
 * steps, the trainer's own stream (every other draw as well).
 */
class NoiseReplay extends Rng {
  private i = 0;
  constructor(private readonly noise: Float32Array, private readonly rest: Rng) {
    super(0);
  }
  override next(): number {
    return this.rest.next();
  }
  override normal(): number {
    return this.i < this.noise.length ? this.noise[this.i++]! : this.rest.normal();
  }
}

/** Mean of `row[from, to)`. */
const meanOf = (row: Float32Array, from: number, to: number) => {
  let s = 0;
  for (let t = from; t < to; t++) s += row[t]!;
  return s / Math.max(to - from, 1);
};

/** A rollout's dense signal collapsed to one score over its first T steps: its sum, or the mean of the last k minus the mean of the first k. */
const collapse = (row: Float32Array, T: number, mode: WmrlConfig['scoreMode'], K: number) => {
  if (mode === 'return') return meanOf(row, 0, T) * T;
  const k = Math.min(K, T);
  return meanOf(row, T - k, T) - meanOf(row, 0, k);
};

/**
 * The model's rows of the robot's episodes: each step's reported state, the command applied then (sent `actionDelay`
 * control steps before; zeros before the first, as imagination starts its commands in flight) with the history before
 * it, the model's current context when it has one; `rewardKnown` whether the rewards teach the reward head.
 */
function robotRows(
  who: string,
  episodes: ReadonlyArray<{ states: Float32Array; actions: Float32Array; rewards: Float32Array; success: Float32Array }>,
  model: Pick<EnsembleModel, 'dObs' | 'dAct' | 'actionHistory' | 'contextDim' | 'context'>,
  actionDelay: number,
  rewardKnown: boolean,
): TransitionBuffer {
  const d = actionDelay;
  if (!(Number.isInteger(d) && d >= 0)) throw new Error(`${who}: actionDelay must be a whole number of control steps, got ${actionDelay}`);
  const buf = new TransitionBuffer(model.dObs, model.dAct, model.actionHistory, model.contextDim);
  const ctx = model.contextDim > 0 ? model.context : undefined;
  for (const e of episodes) {
    buf.addEpisode({ states: e.states, actions: d > 0 ? delayActions(e.actions, 1, model.dAct, d) : e.actions, rewards: e.rewards, success: e.success, weight: 1, rewardKnown, ...(ctx ? { context: ctx } : {}) });
  }
  return buf;
}

/**
 * What a refit fits: the robot's recorded episodes, under the model's current (identified) context when it is
 * context-conditioned, their rewards teaching the reward head only when the robot's rewards are dense — plus the sim
 * data the model started from at `simWeight` per transition (0: left out). An episode records the commands the robot
 * reports as sent; the model's dynamics take the action applied at each step, which on a robot with actuation delay
 * `actionDelay` (control steps; default 0) is the command sent that many steps before, and nothing (zeros, as
 * imagination starts its commands in flight) before the first.
 */
export function refitTransitions(
  episodes: ReadonlyArray<{ states: Float32Array; actions: Float32Array; rewards: Float32Array; success: Float32Array }>,
  model: Pick<EnsembleModel, 'dObs' | 'dAct' | 'actionHistory' | 'contextDim' | 'context'>,
  o: { robotRewards: WmrlConfig['robotRewards']; simData: Transitions; simWeight: number; actionDelay?: number },
): Transitions {
  const buf = robotRows('wmrl refit', episodes, model, o.actionDelay ?? 0, o.robotRewards === 'dense');
  if (o.simWeight > 0) buf.add({ ...o.simData, weight: (o.simData.weight ?? new Float32Array(o.simData.reward.length).fill(1)).map((w) => w * o.simWeight) });
  return buf.transitions();
}

/**
 * The world model's dense reward summed over an episode's first `steps` recorded transitions, the members' mean: each
 * step's reward predicted from the state the robot reported and the command applied then (the episode's commands
 * `actionDelay` control steps late, nothing before the first; the trainer passes the policy's commands as it acted
 * them, as its replays do), under the model's current context. One step each,
 * teacher-forced on the real states: no error compounds, as it does in an imagined or replayed rollout.
 */
export async function relabelScore(model: EnsembleModel, episode: { states: Float32Array; actions: Float32Array }, o: { steps: number; actionDelay: number }): Promise<number> {
  const T = o.steps, D = model.dObs, A = model.dAct;
  if (!(Number.isInteger(T) && T >= 0)) throw new Error(`relabelScore: steps must be a whole number, got ${T}`);
  if (episode.states.length < (T + 1) * D || episode.actions.length < T * A) throw new Error(`relabelScore: the episode holds ${episode.states.length / D} states and ${episode.actions.length / A} actions, fewer than ${T} steps need`);
  if (T === 0) return 0;
  const first = { states: episode.states.subarray(0, (T + 1) * D), actions: episode.actions.subarray(0, T * A), rewards: new Float32Array(T), success: new Float32Array(T) };
  const t = robotRows('relabelScore', [first], model, o.actionDelay, false).transitions();
  const p = await model.predict(t.obs, t.action, t.history, t.context);
  let sum = 0;
  for (const r of p.reward) sum += r;
  return sum / model.members;
}

export async function trainWmrl(run: WmrlRun): Promise<RunState> {
  const { config: c, policy, pg, model, target, prompts } = run;
  const D = policy.obsDim, A = policy.actDim, H = c.horizon, G = c.groupSize, E = model.members;
  const warn = run.warn ?? ((m: string) => console.error(m));
  const rng = new Rng(c.seed);
  // What imagines and what the update trains: the policy, or its cheaper face over the same parameters.
  const face = run.face ?? policy;
  if (c.imaginedGate) {
    const { window, minGroups } = c.imaginedGate;
    if (!c.corrector) throw new Error('wmrl: imaginedGate weighs the imagined groups by the anchors\' agreement, and a run without a corrector runs no anchors');
    if (!(Number.isInteger(window) && window >= 1)) throw new Error(`wmrl: imaginedGate.window must be a whole number of anchor groups, at least 1; got ${window}`);
    if (!(Number.isInteger(minGroups) && minGroups >= 1 && minGroups <= window)) throw new Error(`wmrl: imaginedGate.minGroups must be a whole number from 1 to its window (${window}); got ${minGroups}`);
  }
  if (pg.policy !== face) throw new Error(`wmrl: the policy gradient trains a ${pg.policy.kind} policy, not the ${face.kind} policy that imagines${run.face ? ' (the face)' : ''}`);
  if (face.obsDim !== D || face.actDim !== A || face.chunk !== policy.chunk) throw new Error(`wmrl: the face (${face.kind}) reads ${face.obsDim} entries and acts with ${face.chunk} x ${face.actDim}; the policy ${D} and ${policy.chunk} x ${A}`);
  // The fused imagination (policy and ensemble in one graph) for a policy of the observation vector alone.
  const reads = face.inputs();
  if (face !== policy) {
    // The anchors' steps are restated for the face from what the policy read on the robot: the face reads nothing more.
    const acts = policy.inputs();
    const extra = [reads.image && !acts.image ? 'the camera image' : '', reads.instruction && !acts.instruction ? 'the instruction' : '', reads.features ? 'backbone features' : ''].filter(Boolean);
    if (extra.length) throw new Error(`wmrl: the face (${face.kind}) reads ${extra.join(' and ')}, which the ${policy.kind} policy's robot episodes do not keep`);
  }
  const graphPolicy = !reads.image && !reads.instruction && !reads.features && face.graphPolicy ? face.graphPolicy() : null;
  // A robot episode as the face's update takes it: the face's log-probabilities of the actions, what it reads.
  const restate = async (ep: RobotEpisode): Promise<Trajectory> => {
    if (face === policy) return ep;
    const ctx = { ...(reads.image ? { images: ep.images } : {}), ...(reads.instruction ? { instructions: ep.instructions } : {}) };
    const logProb = ep.steps === 0 ? new Float32Array(0) : await face.logProb(ep.obs.subarray(0, ep.steps * D), ep.action.subarray(0, ep.steps * A), ctx);
    return { obs: ep.obs, action: ep.action, logProb, steps: ep.steps, ...ctx };
  };
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
  extra.delay ??= typeof c.actionDelay === 'number' ? c.actionDelay : null;
  let env = new ModelEnv(model, { members: 'fixed', seed: c.seed, actionDelay: extra.delay ?? 0 });
  // The latest anchor episodes, as the policy acted in them: what the delay is identified from.
  // Checkpointed with the run, so a resumed run identifies from the same episodes as an uninterrupted one.
  const recentAnchors: DelayEpisode[] = (extra.recentAnchors ?? []).map((e) => ({ states: Float32Array.from(e.states), actions: Float32Array.from(e.actions), rewards: Float32Array.from(e.rewards), success: Float32Array.from(e.success) }));
  const lo = target.robot.spec.action.low, hi = target.robot.spec.action.high;
  const asActed = (ep: RobotEpisode): DelayEpisode => ({
    states: ep.obs.subarray(0, (ep.steps + 1) * D),
    actions: ep.action.subarray(0, ep.steps * A).map((v, j) => Math.min(hi[j % A]!, Math.max(lo[j % A]!, v))),
    rewards: ep.reward,
    success: Float32Array.from({ length: ep.steps }, (_, t) => (t === ep.steps - 1 && ep.success ? 1 : 0)),
  });

  // The imagined gate's latest rank agreements (checkpointed with the run).
  const agreements: number[] = [...(extra.agreements ?? [])];
  // This update's imagined and real rollouts (and the policy noise imagination drew), filled in as the Corrector asks for them.
  let imagined: { traj: Trajectory[]; score: number[]; variance: number[]; successProb: number[]; noise: Float32Array } | null = null;
  let real = new Map<number, RobotEpisode[]>();
  let update = state.update;
  // This update's prompts, group b's at b: its start state, its seed on the robot, its instruction (the guard's context).
  let updatePrompts: Prompt[] = [];
  const wmScorer = {
    async score(groups: ReadonlyArray<readonly Ref[]>) {
      return groups.map((g) => ({ scores: g.map((r) => imagined!.score[r.b * G + r.k]!), variance: g.map((r) => imagined!.variance[r.b * G + r.k]!) }));
    },
  };
  const trusted = {
    async score(group: readonly Ref[]) {
      const b = group[0]!.b;
      const prompt = updatePrompts[b]!;
      const eps: RobotEpisode[] = [], acted: DelayEpisode[] = [];
      for (let k = 0; k < group.length; k++) {
        // Under the gate, the noise rollout k of this group drew in imagination (its first H steps' draws).
        const i = (b * G + group[k]!.k) * H * A;
        const noise = c.imaginedGate ? new NoiseReplay(imagined!.noise.subarray(i, i + H * A), rng) : rng;
        const ep = await robotEpisode(target, policy, prompt.seed, noise, `wmrl-${update}`);
        run.hooks?.onEpisode?.(ep, 'anchor');
        state.finalObs[ep.id] = Array.from(ep.obs.subarray(ep.steps * D));
        state.episodeIds.push(ep.id);
        eps.push(ep);
        acted.push(asActed(ep));
        if (ep.steps > 0) recentAnchors.push(acted[k]!);
        if (recentAnchors.length > 32) recentAnchors.shift();
      }
      real.set(b, eps);
      // The pair's world-model score: the policy's commands as it acted them (within the action range, as
      // imagination feeds them) replayed open loop from the episode's recorded start, over the steps an imagined
      // rollout covers (its first H), scored as imagination scores a rollout: the commands reach the model as late
      // as imagination feeds them (the identified delay), and each member's replay ends where its predicted success
      // first passes the threshold. So the map relates the very score the imagined rollouts get to the real one.
      // Not the actions the robot reports as sent, which a safety layer may have replaced (a hold, a clip): the
      // imagined rollouts it is paired with feed the policy's own.
      const worldModel = await Promise.all(eps.map(async (ep, k) => {
        if (ep.steps === 0) return null;
        const T = Math.min(ep.steps, H);
        const r = await replayScore(model, ep.obs.subarray(0, D), acted[k]!.actions.subarray(0, T * A), { k: Math.min(c.scoreK, T), mode: c.scoreMode, actionDelay: env.actionDelay });
        let s = 0;
        for (let e = 0; e < E; e++) {
          const p = r.memberSuccessProb.subarray(e * T, (e + 1) * T), hit = p.findIndex((x) => x > c.successThreshold);
          s += collapse(r.memberProgress.subarray(e * T, (e + 1) * T), hit < 0 ? T : hit + 1, c.scoreMode, c.scoreK) / E;
        }
        return s;
      }));
      // The pair's real score: the robot's return, or the world model's dense reward over the same steps of the real episode.
      const realScores = await Promise.all(eps.map(async (ep, k) => {
        if (ep.status !== 'complete') return null;
        return c.anchorScore === 'relabel' ? relabelScore(model, acted[k]!, { steps: Math.min(ep.steps, H), actionDelay: env.actionDelay }) : ep.return;
      }));
      if (c.imaginedGate) {
        // The closed-loop agreement: each complete episode's real score against its imagined rollout's score.
        const xs: number[] = [], ys: number[] = [];
        group.forEach((r, k) => {
          const y = realScores[k];
          if (y !== null && y !== undefined) { xs.push(imagined!.score[r.b * G + r.k]!); ys.push(y); }
        });
        const rho = xs.length >= 3 ? rankAgreement(xs, ys) : NaN;
        if (!Number.isNaN(rho)) {
          agreements.push(rho);
          if (agreements.length > c.imaginedGate.window) agreements.shift();
        }
      }
      return { real: realScores, worldModel };
    },
  };
  // The exploitation guard's context of a group: its prompt's instruction (the task and its target), which recurs
  // across updates as a start state does not, so the guard can measure it over several anchor groups.
  const corrector = c.corrector ? new Corrector<Ref>(c.corrector, wmScorer, trusted, { contextOf: (g) => updatePrompts[g[0]!.b]!.instruction }) : null;
  if (corrector && extra.corrector) corrector.restore(extra.corrector);
  const t0 = performance.now();

  for (let u = state.update; u < c.updates; u++) {
    run.hooks?.signal?.throwIfAborted();
    update = u;
    real = new Map();
    updatePrompts = Array.from({ length: c.prompts }, (_, b) => prompts.get(c.promptSeed0 + u * c.prompts + b));
    // 1. Imagine every group in the world model, from the prompts' start states.
    const starts = new Float32Array(c.prompts * D);
    updatePrompts.forEach((p, b) => starts.set(p.startObs, b * D));
    const N = c.prompts * G;
    // One ensemble member per group: its rollouts differ only in the policy's noise, so their ranking
    // (the advantages) reflects the actions, not which member dreamt them (a member drawn per rollout
    // swamps the within-group differences with between-member ones).
    const groupMember = Array.from({ length: c.prompts }, () => rng.int(E));
    const members = Int32Array.from({ length: N }, (_, i) => groupMember[Math.floor(i / G)]!);
    const ti = performance.now();
    const policyNoise = Float32Array.from({ length: N * H * A }, () => rng.normal());
    const im = graphPolicy
      ? await env.imagine(repeatRows(starts, D, G), graphPolicy, H, { members, policyNoise }).then((r) => ({ ...r, actionRaw: r.policy.action_raw!, logProb: r.policy.logProb!, images: null, imageBytes: 0, instructions: null }))
      : await imaginePolicy(env, run.twin ?? null, face, {
        obs: repeatRows(starts, D, G),
        instructions: Array.from({ length: N }, (_, i) => updatePrompts[Math.floor(i / G)]!.instruction),
      }, H, { members, noise: policyNoise, actLow: target.robot.spec.action.low, actHigh: target.robot.spec.action.high });
    const imagineSeconds = (performance.now() - ti) / 1000;
    imagined = { traj: [], score: [], variance: [], successProb: [], noise: policyNoise };
    for (let i = 0; i < N; i++) {
      const p = im.successProb.subarray(i * H, (i + 1) * H);
      const hit = p.findIndex((x) => x > c.successThreshold);
      const T = hit < 0 ? H : hit + 1;
      imagined.traj.push({
        obs: im.obs.subarray(i * (H + 1) * D, (i * (H + 1) + T) * D), action: im.actionRaw.subarray(i * H * A, (i * H + T) * A), logProb: im.logProb.subarray(i * H, i * H + T), steps: T,
        // what an image policy read at each step: the twin's renders and the prompt's instruction
        ...(reads.image ? { images: im.images!.subarray(i * (H + 1) * im.imageBytes, (i * (H + 1) + T) * im.imageBytes) } : {}),
        ...(reads.instruction ? { instructions: new Array<string>(T).fill(im.instructions![i]!) } : {}),
      });
      imagined.score.push(collapse(im.reward.subarray(i * H, (i + 1) * H), T, c.scoreMode, c.scoreK));
      // The members' spread of the score along this trajectory (every member's reward at the same steps).
      const per = Array.from({ length: E }, (_, e) => collapse(im.memberReward.subarray((e * N + i) * H, (e * N + i + 1) * H), T, c.scoreMode, c.scoreK));
      const m = per.reduce((a, x) => a + x, 0) / E;
      imagined.variance.push(per.reduce((a, x) => a + (x - m) ** 2, 0) / E);
      imagined.successProb.push(hit < 0 ? p[H - 1]! : 1);
    }

    // 2. Scores → advantages: corrected with anchors, or the raw world model's (pure world model).
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

    // The imagined gate: the imagined groups count as much as their closed-loop ranking agrees with the robot's. The
    // update keeps that share of them (stochastic rounding), not all of them at a lower loss weight: under Adam a
    // weight turns the update's direction, not its size, so every down-weighted group would still add its minibatches,
    // each an optimizer step driven by the anchors. Kept: the first of the imagined groups, whose prompts are drawn in
    // no order.
    let imaginedWeight = 1;
    const dropped = new Set<number>();
    if (c.imaginedGate && agreements.length >= c.imaginedGate.minGroups) {
      imaginedWeight = Math.min(1, Math.max(0, agreements.reduce((a, x) => a + x, 0) / agreements.length));
      const wm = groups.map((_, b) => b).filter((b) => source[b] === 'wm');
      const kept = new Set(keptShare(wm, imaginedWeight, rng));
      for (const b of wm) if (!kept.has(b)) dropped.add(b);
    }

    // 3. The update: anchor groups learn from their real episodes, the rest from imagination.
    const trajs: Trajectory[] = [], adv: Array<number | null> = [], w: number[] = [];
    for (const [b, g] of groups.entries()) {
      if (dropped.has(b)) continue;
      for (let k = 0; k < g.length; k++) {
        trajs.push(source[b] === 'real' ? await restate(real.get(b)![k]!) : imagined!.traj[b * G + k]!);
        adv.push(advantages[b]![k]!);
        w.push(weights[b]![k]!);
      }
    }
    const batch = pgBatch(trajs, adv, w, D, A);
    const stats = batch ? await pg.update(batch, rng) : null;

    // 4. Refit the world model from the store: every real episode so far, plus the sim data it started from at `simWeight`.
    let refit = false;
    if (c.refitEvery > 0 && (u + 1) % c.refitEvery === 0 && state.episodeIds.length > 0 && target.store) {
      const eps = state.episodeIds.map((id) => episodeTransitions(target.store!.get(id), layoutOf(target.robot.spec), Float32Array.from(state.finalObs[id] ?? []))).filter((e) => e !== null);
      const data = refitTransitions(eps, model, { robotRewards: c.robotRewards, simData: run.simData, simWeight: c.simWeight, actionDelay: env.actionDelay });
      const rollout = c.refitRolloutSteps > 0;
      await model.fit(data, { epochs: c.refitEpochs, seed: c.seed + u, dynamics: !rollout });
      if (rollout) await fitRollout(model, data, { steps: c.refitRolloutSteps, epochs: c.refitEpochs, windowsPerEpoch: c.refitRolloutWindows, seed: c.seed + u });
      refit = true;
    }
    // The robot's actuation delay and (for a context-conditioned model) its context, from the latest anchors
    // as the policy acted in them: first once they exist, then after each refit. Delay, then the context
    // under that delay, then the delay again under that context.
    const idDelay = c.actionDelay === 'identify', idContext = model.contextDim > 0 && c.context === 'identify';
    if ((idDelay || idContext) && recentAnchors.length > 0 && (!extra.identified || refit)) {
      const { delay } = await identifySystem(model, recentAnchors, { maxDelay: idDelay ? c.maxActionDelay : null, delay: env.actionDelay, context: idContext, seed: c.seed + u });
      if (delay !== env.actionDelay) {
        await env.release();
        env = new ModelEnv(model, { members: 'fixed', seed: c.seed + u, actionDelay: delay });
      }
      extra.delay = delay;
      extra.identified = true;
    }

    // 5. Reward-hacking alarm: the world model's predicted success on the anchor prompts against the anchors' measured success.
    let alarm = false;
    if (real.size > 0) {
      let p = 0, m = 0, n = 0;
      for (const [b, eps] of real) eps.forEach((ep, k) => { p += imagined!.successProb[b * G + k]!; m += ep.success ? 1 : 0; n++; });
      extra.predicted.push(p / n);
      extra.measured.push(m / n);
      if (extra.predicted.length > c.alarmWindow) { extra.predicted.shift(); extra.measured.shift(); }
      const gap = (extra.predicted.reduce((a, x) => a + x, 0) - extra.measured.reduce((a, x) => a + x, 0)) / extra.predicted.length;
      alarm = extra.predicted.length === c.alarmWindow && Math.abs(gap) > c.alarmGap;
      if (alarm) warn(`wmrl: reward-hacking alarm at update ${u + 1}: the world model predicts ${(100 * extra.predicted.reduce((a, x) => a + x, 0) / extra.predicted.length).toFixed(0)}% success on the anchor prompts, the robot measured ${(100 * extra.measured.reduce((a, x) => a + x, 0) / extra.measured.length).toFixed(0)}% over the last ${c.alarmWindow} updates`);
    }

    // 6. Measure and log.
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
      anchorWeight: log?.anchorWeight ?? 1,
      trueMean: log?.trueMean ? [log.trueMean.lo, log.trueMean.hi] : null,
      predictedSuccess: extra.predicted.at(-1),
      measuredSuccess: extra.measured.at(-1),
      hackingAlarm: alarm,
      flaggedContexts: log?.flaggedContexts ?? 0,
      refit,
      actionDelay: env.actionDelay,
      ...(model.contextDim > 0 ? { context: Array.from(model.context) } : {}),
      imaginedTransitions: N * H,
      imagineSeconds,
      ...(c.imaginedGate ? { imaginedWeight, imaginedGroups: source.filter((x, b) => x === 'wm' && !dropped.has(b)).length } : {}),
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
    extra.corrector = corrector ? corrector.state() : null;
    extra.agreements = [...agreements];
    extra.recentAnchors = recentAnchors.map((e) => ({ states: Array.from(e.states), actions: Array.from(e.actions), rewards: Array.from(e.rewards), success: Array.from(e.success) }));
    state.extra = extra;
    if (run.outDir) {
      model.save(join(run.outDir, 'world_model.safetensors'));
      saveRunState(run.outDir, state, pg);
    }
    run.hooks?.onUpdate?.(row);
  }
  await env.release();
  if (run.outDir) writeFileAtomic(join(run.outDir, 'history.json'), [JSON.stringify(state.rows, null, 1)]);
  return state;
}
