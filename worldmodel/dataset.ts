// Transitions for fitting a world model: flat row-major arrays with declared dims, validated once at the
// edge, plus the normalization statistics and bootstrap resampling the ensemble fit needs.
import type { Rng } from '../nn/index.js';

/**
 * A batch of n transitions, row-major.
 *
 * - `obs`, `nextObs`: Shape n x dObs.
 * - `action`: Shape n x dAct.
 * - `reward`: Shape n. The dense per-step signal the scorers collapse: the env's reward, or a task-progress
 *   signal; the model learns whatever the caller puts here.
 * - `success`: Shape n, in [0, 1]: whether the task counts as solved after this transition.
 * - `weight`: Shape n, ≥ 0, optional (all 1). Multiplies each transition's loss; only ratios matter
 *   (weights are rescaled to mean 1 over the fitted set). A trainer passes w_real for transitions of real
 *   episodes read from the episode store and w_sim for sim transitions.
 * - `rewardKnown`: Shape n, each 0 or 1, optional (all 1). 0 where the recorded reward is not the dense signal
 *   (a robot that reports only its success): that row teaches the dynamics and the success head, never the
 *   reward head.
 */
export interface Transitions {
  dObs: number;
  dAct: number;
  obs: Float32Array;
  action: Float32Array;
  nextObs: Float32Array;
  reward: Float32Array;
  success: Float32Array;
  weight?: Float32Array;
  rewardKnown?: Float32Array;
  /**
   * Shape n x (h·dAct): the h actions sent before `action`, most recent first, zeros before the episode's
   * first step. Present when the model conditions on action history (actuation latency: an action sent
   * now acts some control steps later, which the observation alone does not show).
   */
  history?: Float32Array;
  /**
   * Shape n x c: the context each transition was recorded under — physical parameters of the system that
   * the observation does not show (a robot's mass or actuator gain, as the log of its scale against the
   * nominal sim), constant within an episode. Present when the model is context-conditioned.
   */
  context?: Float32Array;
}

/** Context entries per row a transition set carries (0 without `context`). */
export function contextLength(t: Pick<Transitions, 'reward' | 'context'>): number {
  const n = t.reward.length;
  if (!t.context || n === 0) return 0;
  const c = t.context.length / n;
  if (!Number.isInteger(c)) throw new Error(`transitions: context has ${t.context.length} values, not n x c for n = ${n}`);
  return c;
}

/** Past actions per row a transition set carries (0 without `history`). */
export function historyLength(t: Pick<Transitions, 'dAct' | 'reward' | 'history'>): number {
  const n = t.reward.length;
  if (!t.history || n === 0) return 0;
  const h = t.history.length / (n * t.dAct);
  if (!Number.isInteger(h)) throw new Error(`transitions: history has ${t.history.length} values, not n x h x dAct for n = ${n}, dAct = ${t.dAct}`);
  return h;
}

/** Number of transitions, after checking every array's length against the declared dims and every value. */
export function validateTransitions(t: Transitions, what = 'transitions'): number {
  if (!(Number.isInteger(t.dObs) && t.dObs > 0)) throw new Error(`${what}: dObs must be a positive integer, got ${t.dObs}`);
  if (!(Number.isInteger(t.dAct) && t.dAct > 0)) throw new Error(`${what}: dAct must be a positive integer, got ${t.dAct}`);
  const n = t.reward.length;
  const expect = (name: string, arr: Float32Array | undefined, width: number) => {
    if (!arr) return;
    if (arr.length !== n * width) throw new Error(`${what}: ${name} has ${arr.length} values, expected ${n} x ${width} = ${n * width} (n from reward)`);
    const bad = firstNonFinite(arr);
    if (bad >= 0) throw new Error(`${what}: ${name} is not finite at row ${Math.floor(bad / width)}, column ${bad % width} (${arr[bad]})`);
  };
  expect('obs', t.obs, t.dObs);
  expect('action', t.action, t.dAct);
  expect('nextObs', t.nextObs, t.dObs);
  expect('reward', t.reward, 1);
  expect('success', t.success, 1);
  expect('weight', t.weight, 1);
  expect('rewardKnown', t.rewardKnown, 1);
  if (t.history) expect('history', t.history, historyLength(t) * t.dAct);
  if (t.context) expect('context', t.context, contextLength(t));
  for (let i = 0; i < n; i++) {
    const s = t.success[i]!;
    if (s < 0 || s > 1) throw new Error(`${what}: success[${i}] = ${s} is outside [0, 1]`);
  }
  if (t.weight) {
    for (let i = 0; i < n; i++) if (t.weight[i]! < 0) throw new Error(`${what}: weight[${i}] = ${t.weight[i]} is negative`);
    if (n > 0 && t.weight.every((w) => w === 0)) throw new Error(`${what}: every weight is 0`);
  }
  if (t.rewardKnown) {
    for (let i = 0; i < n; i++) if (t.rewardKnown[i] !== 0 && t.rewardKnown[i] !== 1) throw new Error(`${what}: rewardKnown[${i}] = ${t.rewardKnown[i]} is neither 0 nor 1`);
  }
  return n;
}

/** Index of the first NaN or infinite value, or -1. */
export function firstNonFinite(a: ArrayLike<number>): number {
  for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i]!)) return i;
  return -1;
}

/** Throws, naming `what`, unless `a` holds rows x width finite values. */
export function checkRows(what: string, a: Float32Array, width: number, rows?: number): number {
  if (a.length % width !== 0 || a.length === 0) throw new Error(`${what}: ${a.length} values is not a whole number of rows of ${width}`);
  const n = a.length / width;
  if (rows !== undefined && n !== rows) throw new Error(`${what}: ${n} rows, expected ${rows}`);
  const bad = firstNonFinite(a);
  if (bad >= 0) throw new Error(`${what}: not finite at row ${Math.floor(bad / width)}, column ${bad % width} (${a[bad]})`);
  return n;
}

/** Appends episodes and flat batches; `transitions()` returns one concatenated batch. */
export class TransitionBuffer {
  private readonly parts: Transitions[] = [];
  private count = 0;

  /** `actionHistory`: past actions kept per transition (see Transitions.history); `contextDim`: context entries per transition (see Transitions.context). */
  constructor(readonly dObs: number, readonly dAct: number, readonly actionHistory = 0, readonly contextDim = 0) {
    if (!(Number.isInteger(actionHistory) && actionHistory >= 0)) throw new Error(`buffer: actionHistory must be a non-negative integer, got ${actionHistory}`);
    if (!(Number.isInteger(contextDim) && contextDim >= 0)) throw new Error(`buffer: contextDim must be a non-negative integer, got ${contextDim}`);
  }

  get size(): number {
    return this.count;
  }

  add(t: Transitions): void {
    if (t.dObs !== this.dObs || t.dAct !== this.dAct) throw new Error(`buffer: transitions of dims (${t.dObs}, ${t.dAct}) into a buffer of (${this.dObs}, ${this.dAct})`);
    const n = validateTransitions(t);
    if (n > 0 && historyLength(t) !== this.actionHistory) throw new Error(`buffer: transitions with ${historyLength(t)} past actions per row into a buffer of ${this.actionHistory}`);
    if (n > 0 && contextLength(t) !== this.contextDim) throw new Error(`buffer: transitions with ${contextLength(t)} context entries per row into a buffer of ${this.contextDim}`);
    this.count += n;
    this.parts.push(t);
  }

  /**
   * One episode: `states` Shape (T+1) x dObs (the observation before each action, then the last one),
   * `actions` T x dAct, `rewards` T, `success` T (after each step), one `weight` for all its transitions and,
   * in a buffer with a context, the episode's `context` (contextDim values).
   */
  addEpisode(e: { states: Float32Array; actions: Float32Array; rewards: ArrayLike<number>; success: ArrayLike<number>; weight?: number; context?: ArrayLike<number>; rewardKnown?: boolean }): void {
    const T = e.rewards.length;
    const c = this.contextDim;
    if (c > 0 && e.context?.length !== c) throw new Error(`episode: the buffer holds ${c} context entries per transition; the episode gives ${e.context ? e.context.length : 'none'}`);
    if (c === 0 && e.context) throw new Error('episode: a context was given to a buffer without one (contextDim 0)');
    checkRows('episode states', e.states, this.dObs, T + 1);
    checkRows('episode actions', e.actions, this.dAct, T);
    if (e.success.length !== T) throw new Error(`episode: ${e.success.length} success flags for ${T} steps`);
    this.add({
      dObs: this.dObs,
      dAct: this.dAct,
      obs: e.states.slice(0, T * this.dObs),
      action: e.actions.slice(),
      nextObs: e.states.slice(this.dObs),
      reward: Float32Array.from(e.rewards),
      success: Float32Array.from(e.success),
      weight: new Float32Array(T).fill(e.weight ?? 1),
      ...(e.rewardKnown === false ? { rewardKnown: new Float32Array(T) } : {}),
      ...(this.actionHistory > 0 ? { history: episodeHistory(e.actions, this.dAct, this.actionHistory) } : {}),
      ...(c > 0 ? { context: repeatContext(e.context!, T) } : {}),
    });
  }

  transitions(): Transitions {
    return concatTransitions(this.dObs, this.dAct, this.parts);
  }
}

export function concatTransitions(dObs: number, dAct: number, parts: readonly Transitions[]): Transitions {
  const cat = (pick: (t: Transitions) => Float32Array) => {
    const out = new Float32Array(parts.reduce((a, t) => a + pick(t).length, 0));
    let off = 0;
    for (const t of parts) {
      out.set(pick(t), off);
      off += pick(t).length;
    }
    return out;
  };
  // Optional per-row columns that default to 1 (weight, rewardKnown).
  const orOnes = (pick: (t: Transitions) => Float32Array | undefined) => cat((t) => pick(t) ?? new Float32Array(t.reward.length).fill(1));
  const h = new Set(parts.filter((t) => t.reward.length > 0).map(historyLength));
  if (h.size > 1) throw new Error(`transitions: parts carry different action histories (${[...h].join(', ')} past actions)`);
  const withHistory = [...h][0] ?? 0;
  const cs = new Set(parts.filter((t) => t.reward.length > 0).map(contextLength));
  if (cs.size > 1) throw new Error(`transitions: parts carry different contexts (${[...cs].join(', ')} entries)`);
  const withContext = [...cs][0] ?? 0;
  return {
    dObs, dAct, obs: cat((t) => t.obs), action: cat((t) => t.action), nextObs: cat((t) => t.nextObs), reward: cat((t) => t.reward), success: cat((t) => t.success), weight: orOnes((t) => t.weight),
    ...(parts.some((t) => t.rewardKnown) ? { rewardKnown: orOnes((t) => t.rewardKnown) } : {}),
    ...(withHistory > 0 ? { history: cat((t) => t.history ?? new Float32Array(0)) } : {}),
    ...(withContext > 0 ? { context: cat((t) => t.context ?? new Float32Array(0)) } : {}),
  };
}

/** The rows `idx` of `t`. */
export function selectTransitions(t: Transitions, idx: ArrayLike<number>): Transitions {
  const rows = (a: Float32Array, w: number) => {
    const out = new Float32Array(idx.length * w);
    for (let i = 0; i < idx.length; i++) out.set(a.subarray(idx[i]! * w, (idx[i]! + 1) * w), i * w);
    return out;
  };
  return {
    dObs: t.dObs,
    dAct: t.dAct,
    obs: rows(t.obs, t.dObs),
    action: rows(t.action, t.dAct),
    nextObs: rows(t.nextObs, t.dObs),
    reward: rows(t.reward, 1),
    success: rows(t.success, 1),
    weight: t.weight ? rows(t.weight, 1) : new Float32Array(idx.length).fill(1),
    ...(t.rewardKnown ? { rewardKnown: rows(t.rewardKnown, 1) } : {}),
    ...(t.history ? { history: rows(t.history, historyLength(t) * t.dAct) } : {}),
    ...(t.context ? { context: rows(t.context, contextLength(t)) } : {}),
  };
}

/** Disjoint random train/validation row indices; `valFraction` of the rows (at least 1) are held out. */
export function splitIndices(n: number, valFraction: number, rng: Rng): { train: Int32Array; val: Int32Array } {
  if (!(valFraction > 0 && valFraction < 1)) throw new Error(`split: valFraction must be in (0, 1), got ${valFraction}`);
  const perm = rng.shuffle(Array.from({ length: n }, (_, i) => i));
  const nv = Math.max(1, Math.round(n * valFraction));
  if (nv >= n) throw new Error(`split: ${n} transitions are too few to hold out ${nv}`);
  return { val: Int32Array.from(perm.slice(0, nv)), train: Int32Array.from(perm.slice(nv)) };
}

/** Per-member bootstrap resamples (with replacement) of `n` rows: Shape members x n. */
export function bootstrapIndices(members: number, n: number, rng: Rng): Int32Array[] {
  return Array.from({ length: members }, () => Int32Array.from({ length: n }, () => rng.int(n)));
}

/**
 * Mean and standard deviation per column of a rows x width array. A constant column (a goal one-hot, a fixed
 * target) gets std `constantStd`: 1 to leave it as is when standardizing, 0 to mark it as not modeled.
 */
export function columnStats(a: Float32Array, width: number, constantStd: 0 | 1 = 1): { mean: Float32Array; std: Float32Array } {
  const n = a.length / width;
  const mean = new Float64Array(width);
  const sq = new Float64Array(width);
  for (let i = 0; i < n; i++) for (let j = 0; j < width; j++) mean[j]! += a[i * width + j]!;
  for (let j = 0; j < width; j++) mean[j]! /= n;
  for (let i = 0; i < n; i++) for (let j = 0; j < width; j++) sq[j]! += (a[i * width + j]! - mean[j]!) ** 2;
  const std = Float32Array.from(sq, (s) => {
    const sd = Math.sqrt(s / n);
    return sd > 1e-6 ? sd : constantStd;
  });
  return { mean: Float32Array.from(mean), std };
}

/** Model inputs [obs, action, past actions, context] per row: Shape n x (dObs + dAct·(1 + h) + c). */
export function inputRows(t: Pick<Transitions, 'dObs' | 'dAct' | 'obs' | 'action' | 'reward' | 'history' | 'context'>): Float32Array {
  const n = t.obs.length / t.dObs;
  const hw = historyLength(t) * t.dAct;
  const c = contextLength(t);
  const w = t.dObs + t.dAct + hw + c;
  const out = new Float32Array(n * w);
  for (let i = 0; i < n; i++) {
    out.set(t.obs.subarray(i * t.dObs, (i + 1) * t.dObs), i * w);
    out.set(t.action.subarray(i * t.dAct, (i + 1) * t.dAct), i * w + t.dObs);
    if (hw > 0) out.set(t.history!.subarray(i * hw, (i + 1) * hw), i * w + t.dObs + t.dAct);
    if (c > 0) out.set(t.context!.subarray(i * c, (i + 1) * c), i * w + t.dObs + t.dAct + hw);
  }
  return out;
}

/** One context (c values) as the rows of n transitions: Shape n x c. */
export function repeatContext(context: ArrayLike<number>, n: number): Float32Array {
  const c = context.length;
  const out = new Float32Array(n * c);
  for (let i = 0; i < n; i++) for (let j = 0; j < c; j++) out[i * c + j] = context[j]!;
  return out;
}

/**
 * Per step of one episode (actions Shape T x dAct), the h actions before it, most recent first: Shape
 * T x (h·dAct), zeros before the first step (a robot's latency queue starts holding its reset controls,
 * action 0 for motors centred on zero).
 */
export function episodeHistory(actions: Float32Array, dAct: number, h: number): Float32Array {
  const T = actions.length / dAct;
  const out = new Float32Array(T * h * dAct);
  for (let t = 0; t < T; t++) for (let j = 1; j <= h && t - j >= 0; j++) out.set(actions.subarray((t - j) * dAct, (t - j + 1) * dAct), (t * h + j - 1) * dAct);
  return out;
}

/** Next-observation deltas: Shape n x dObs. */
export function deltaRows(t: Pick<Transitions, 'obs' | 'nextObs'>): Float32Array {
  return Float32Array.from(t.nextObs, (v, i) => v - t.obs[i]!);
}

/**
 * Normalization fitted from data and stored with the parameters: inputs [obs, action] and targets
 * (next-obs delta, reward) are standardized per column. A delta column that never changes in the training
 * data gets `deltaStd` 0: it is not modeled, the model carries it over by its (constant) mean delta.
 */
export interface Normalizer {
  inMean: Float32Array;
  inStd: Float32Array;
  deltaMean: Float32Array;
  deltaStd: Float32Array;
  rewardMean: number;
  rewardStd: number;
}

export function fitNormalizer(t: Transitions): Normalizer {
  const inp = columnStats(inputRows(t), t.dObs + t.dAct * (1 + historyLength(t)) + contextLength(t));
  const delta = columnStats(deltaRows(t), t.dObs, 0);
  // The reward's statistics over the rows whose reward is the dense signal (none: left as is).
  const known = t.rewardKnown ? t.reward.filter((_, i) => t.rewardKnown![i] === 1) : t.reward;
  const rew = known.length ? columnStats(known, 1) : { mean: Float32Array.of(0), std: Float32Array.of(1) };
  return { inMean: inp.mean, inStd: inp.std, deltaMean: delta.mean, deltaStd: delta.std, rewardMean: rew.mean[0]!, rewardStd: rew.std[0]! };
}
