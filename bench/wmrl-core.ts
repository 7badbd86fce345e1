// Benchmark with known truth for the WMRL core (wmrl/): contextual-bandit prompts with a true
// reward, a world model whose errors are a drifting monotone non-linear miscalibration,
// heteroscedastic noise and an over-rated region, and eight arms trained with identical knobs.
// Reports real executions to reach 90% of the optimum's true reward, final true reward, and the
// gradient estimator measured against the reference gradient: bias and variance, raw and at
// equal effective step size, and the expected cosine between estimate and reference (bounded,
// counting bias and variance together), with paired switches and standard errors for the effect
// of each correction, at equal steps and at equal real-execution budget. Every sentence of the
// report that states a result is generated from this run's numbers.
import { median, quantile, type BenchOptions, type BenchReport, type Series } from './lib/report.js';
import type { Score } from '../wmrl/advantages.js';
import {
  Corrector, correctorConfig, DEFAULT_CORRECTOR_CONFIG, type CorrectorConfig, type CorrectorOverrides, type CorrectorState, type StepResult,
  type WorldModelScorer, type WorldModelScores,
} from '../wmrl/corrector.js';
import type { DenoiseConfig } from '../wmrl/denoise.js';
import { DEFAULT_GRPO_CONFIG, StandardGrpo } from '../wmrl/grpo.js';
import { Rng } from '../wmrl/rng.js';
import type { TrustedScorer } from '../wmrl/trusted.js';

// ---- problem ------------------------------------------------------------------------------------

const K = 12; // actions per prompt
const P = 8; // prompts
const GROUPS_PER_PROMPT = 4;
const G = 8; // rollouts per group
const LR = 0.25;
const REAL_NOISE = 0.1;
const TARGET = 0.9;
/**
 * Standard GRPO's training steps: long enough that it is within 0.2% of J* and still creeping up.
 * Every rollout it scores is a real execution, so this fixes its real budget.
 */
const STEPS = 600;
/**
 * The world-model arms' cost is the real executions they spend, not their steps (imagined rollouts
 * are cheap), so each trains until it has spent a quarter of standard GRPO's real executions
 * (REAL_SHARE), at most WM_STEPS steps (pure world model spends none). At the 10% anchor fraction
 * that is about 2.5 × STEPS steps. "Ends at ≥ its final true reward with ≥ 4× fewer real
 * executions" is then one run's statement; the equal-steps comparison is reported beside it.
 */
const REAL_SHARE = 0.25;
const WM_STEPS = 1500;
/** Anchor weights of the sensitivity sweep on the full WMRL estimator. */
const SWEEP = [1.5, 2, 3, 4];
/** The plateau column averages true J / J* over this many last steps. */
const PLATEAU = 50;

interface Rollout { p: number; a: number }

interface Bandit {
  /** [p*K + a] true expected reward. */
  reward: Float64Array;
  /** [p*K + a] world-model over-rating bump (0 outside the region). */
  over: Float64Array;
  /** [p*K + a] world-model noise std (heteroscedastic). */
  sigma: Float64Array;
  /** [p*K + a] multiplicative error of the ensemble's variance estimate. */
  ensembleError: Float64Array;
  jStar: number;
  j0: number;
}

function makeBandit(seed: number): Bandit {
  const rng = new Rng(seed * 7919 + 1);
  const reward = new Float64Array(P * K);
  const over = new Float64Array(P * K);
  const sigma = new Float64Array(P * K);
  const ensembleError = new Float64Array(P * K);
  let jStar = 0;
  let j0 = 0;
  for (let p = 0; p < P; p++) {
    const best = rng.int(K);
    const peak = 0.85 + 0.15 * rng.next();
    // Half the prompts have a region, opposite the optimum, that the world model over-rates.
    const overRated = p % 2 === 0;
    let m = 0;
    for (let a = 0; a < K; a++) {
      const d = Math.min(Math.abs(a - best), K - Math.abs(a - best));
      const dOver = Math.min(Math.abs(a - ((best + K / 2) % K)), K - Math.abs(a - ((best + K / 2) % K)));
      const i = p * K + a;
      reward[i] = peak * Math.exp(-((d / 2) ** 2)) + 0.05 * rng.next();
      over[i] = overRated ? 1.2 * Math.exp(-(dOver ** 2)) : 0;
      sigma[i] = 0.05 + 0.45 * rng.next() ** 2;
      ensembleError[i] = Math.exp(0.3 * rng.normal());
      m = Math.max(m, reward[i]!);
      j0 += reward[i]! / K / P;
    }
    jStar += m / P;
  }
  return { reward, over, sigma, ensembleError, jStar, j0 };
}

/** Softmax policy, θ [p*K + a] logits. */
function probs(theta: Float64Array, p: number, out: Float64Array): void {
  let m = Number.NEGATIVE_INFINITY;
  for (let a = 0; a < K; a++) m = Math.max(m, theta[p * K + a]!);
  let s = 0;
  for (let a = 0; a < K; a++) { out[a] = Math.exp(theta[p * K + a]! - m); s += out[a]!; }
  for (let a = 0; a < K; a++) out[a]! /= s;
}

function trueJ(theta: Float64Array, b: Bandit): number {
  const pi = new Float64Array(K);
  let j = 0;
  for (let p = 0; p < P; p++) {
    probs(theta, p, pi);
    for (let a = 0; a < K; a++) j += (pi[a]! * b.reward[p * K + a]!) / P;
  }
  return j;
}

function sampleGroups(theta: Float64Array, rng: Rng): Rollout[][] {
  const groups: Rollout[][] = [];
  const pi = new Float64Array(K);
  for (let p = 0; p < P; p++) {
    probs(theta, p, pi);
    for (let j = 0; j < GROUPS_PER_PROMPT; j++) {
      const grp: Rollout[] = [];
      for (let i = 0; i < G; i++) {
        let u = rng.next();
        let a = 0;
        while (a < K - 1 && u >= pi[a]!) { u -= pi[a]!; a++; }
        grp.push({ p, a });
      }
      groups.push(grp);
    }
  }
  return groups;
}

/** How a step's weighted advantages become one gradient per prompt. */
type Norm = 'count' | 'weights';

/**
 * Policy-gradient direction from a step's weighted advantages, per prompt. `count` (the choice):
 * the mean over the prompt's scored rollouts of w·A·∇log π(a), so the world-model groups' scale
 * is the same on every step and anchor groups add weight (StepResult.weights). `weights` (the
 * previous choice, kept for comparison): the weighted mean Σ w·A·∇log π / Σ w, whose world-model
 * share shrinks on the steps where the prompt has an anchor. `realOnly`: the anchor groups alone
 * at weight 1, i.e. GRPO on the real executions the step spent. Returns [p*K + a].
 */
function gradientEstimate(theta: Float64Array, groups: Rollout[][], res: StepResult, norm: Norm = 'count', realOnly = false): Float64Array {
  const num = new Float64Array(P * K);
  const den = new Float64Array(P);
  const pi = new Float64Array(K);
  groups.forEach((grp, gi) => {
    if (realOnly && res.source[gi] !== 'real') return;
    const p = grp[0]!.p;
    probs(theta, p, pi);
    grp.forEach((r, i) => {
      const A = res.advantages[gi]![i];
      if (A === null || A === undefined) return;
      const w = realOnly ? 1 : res.weights[gi]![i]!;
      den[p]! += norm === 'count' ? 1 : w;
      for (let a = 0; a < K; a++) num[p * K + a]! += w * A * ((a === r.a ? 1 : 0) - pi[a]!);
    });
  });
  for (let p = 0; p < P; p++) if (den[p]! > 0) for (let a = 0; a < K; a++) num[p * K + a]! /= den[p]!;
  return num;
}

/** A group's context for the exploitation guard: its prompt. */
const contextOf = (group: readonly Rollout[]): string => String(group[0]!.p);

// ---- scorers ------------------------------------------------------------------------------------

class RealExecution implements TrustedScorer<Rollout> {
  constructor(private readonly b: Bandit, private readonly rng: Rng) {}
  async score(rollouts: readonly Rollout[]): Promise<Score[]> {
    return rollouts.map((r) => this.b.reward[r.p * K + r.a]! + REAL_NOISE * this.rng.normal());
  }
}

/**
 * The world model: x = s·h(r)^γ + o + over + σ·ε where γ, s, o drift with the policy's progress
 * (a monotone non-linear miscalibration that moves as the policy moves), σ is heteroscedastic,
 * and `over` is a region it over-rates. Its ensemble variance tracks σ² up to a multiplicative
 * error and is larger in the over-rated region (out of distribution for its training data).
 */
class WorldModel implements WorldModelScorer<Rollout> {
  progress = 0;
  constructor(private readonly b: Bandit, private readonly rng: Rng) {}
  async score(groups: ReadonlyArray<readonly Rollout[]>): Promise<WorldModelScores[]> {
    const gamma = 0.4 + 2.2 * this.progress;
    const scale = 1 + 0.5 * this.progress;
    const offset = 0.3 * this.progress;
    return groups.map((grp) => {
      const scores: Score[] = [];
      const variance: Score[] = [];
      for (const r of grp) {
        const i = r.p * K + r.a;
        const s = this.b.sigma[i]!;
        scores.push(scale * (Math.max(this.b.reward[i]!, 0) ** gamma + this.b.over[i]!) + offset + s * this.rng.normal());
        variance.push((s * s + 0.05 * this.b.over[i]!) * this.b.ensembleError[i]!);
      }
      return { scores, variance };
    });
  }
}

// ---- arms ---------------------------------------------------------------------------------------

type ArmKey = 'standard' | 'pure' | 'debias' | 'denoise' | 'full' | 'active' | 'perRollout' | 'noGuard';

/** An arm's estimator: standard GRPO (wmrl/grpo.ts), or the Corrector with this config. */
type ArmConfig = CorrectorConfig | 'standard';

interface Arm {
  key: ArmKey;
  name: string;
  cfg: (seed: number) => ArmConfig;
}

/** GRPO-standardized advantages in every arm, training and measurement alike. */
const ADV = { ...DEFAULT_CORRECTOR_CONFIG.advantages };
const SLOTS = 64;
const base = (seed: number, over: CorrectorOverrides): CorrectorConfig =>
  correctorConfig(over, correctorConfig({ advantages: ADV, anchors: { maxInFlight: SLOTS }, seed }));
const standardGrpo = (real: TrustedScorer<Rollout>): StandardGrpo<Rollout> =>
  new StandardGrpo<Rollout>({ ...DEFAULT_GRPO_CONFIG, advantages: ADV, maxInFlight: SLOTS }, real);

const ARMS: Arm[] = [
  { key: 'standard', name: 'standard GRPO (all real)', cfg: () => 'standard' },
  { key: 'pure', name: 'pure world model', cfg: (s) => base(s, { debias: false, denoise: false, anchors: { fraction: 0, floor: 0 } }) },
  { key: 'debias', name: '+ debias', cfg: (s) => base(s, { denoise: false }) },
  { key: 'denoise', name: '+ denoise', cfg: (s) => base(s, { debias: false }) },
  { key: 'full', name: 'full WMRL', cfg: (s) => base(s, {}) },
  { key: 'active', name: 'full WMRL, active anchors', cfg: (s) => base(s, { anchors: { mode: 'active' } }) },
  { key: 'perRollout', name: 'full WMRL + per-rollout weights', cfg: (s) => base(s, { perRolloutWeights: {} }) },
  { key: 'noGuard', name: 'full WMRL, no exploitation guard', cfg: (s) => base(s, { guard: false }) },
];
const armName = (key: ArmKey): string => ARMS.find((a) => a.key === key)!.name;

interface RunOut {
  curve: Array<[number, number]>; // (real executions, true J / J*)
  realToTarget: number; // Infinity when never reached
  finalRatio: number; // true J / J* at the end
  thetas: Float64Array[]; // at checkpoints
  states: CorrectorState[]; // at checkpoints; none for standard GRPO
  biasReductionLog: number | null;
  anchorWeight: number;
  ciCover: number; // fraction of logged steps whose interval covered the true mean score
  /**
   * Per step once anchors are up-weighted: the factor by which renormalizing the step's weights to
   * mean 1 (the previous choice) would have multiplied the world-model groups.
   */
  renorm: number[];
}

/** Trains `steps` steps, or fewer: it stops before its real executions would pass `realBudget`. */
async function train(arm: Arm, seed: number, b: Bandit, steps: number, checkpoints: number[], realBudget = Number.POSITIVE_INFINITY): Promise<RunOut> {
  const sampler = new Rng(seed * 101 + 3);
  const wm = new WorldModel(b, new Rng(seed * 101 + 5));
  const real = new RealExecution(b, new Rng(seed * 101 + 7));
  const cfg = arm.cfg(seed);
  const trainer = cfg === 'standard' ? standardGrpo(real) : new Corrector<Rollout>(cfg, wm, real, { contextOf });
  const theta = new Float64Array(P * K);
  const curve: Array<[number, number]> = [];
  const thetas: Float64Array[] = [];
  const states: CorrectorState[] = [];
  const renorm: number[] = [];
  let realToTarget = Number.POSITIVE_INFINITY;
  let last: StepResult | null = null;
  let covered = 0;
  let intervals = 0;
  for (let t = 0; t < steps; t++) {
    if (checkpoints.includes(t)) {
      thetas.push(Float64Array.from(theta));
      if (trainer instanceof Corrector) {
        await trainer.drain();
        states.push(trainer.state());
      }
    }
    const j = trueJ(theta, b);
    wm.progress = Math.min(1, Math.max(0, (j - b.j0) / (b.jStar - b.j0)));
    const groups = sampleGroups(theta, sampler);
    const res = await trainer.step(groups);
    if (res.log.trueMean) {
      intervals++;
      if (res.log.trueMean.lo <= j && j <= res.log.trueMean.hi) covered++;
    }
    if (res.log.anchorWeight > 1) {
      let n = 0;
      let sw = 0;
      res.weights.forEach((g, gi) => g.forEach((w, i) => { if (res.advantages[gi]![i] !== null) { n++; sw += w; } }));
      if (sw > 0) renorm.push(n / sw);
    }
    const g = gradientEstimate(theta, groups, res);
    for (let i = 0; i < theta.length; i++) theta[i]! += LR * g[i]!;
    const jNext = trueJ(theta, b) / b.jStar;
    curve.push([res.log.realExecutions, jNext]);
    if (jNext >= TARGET && realToTarget === Number.POSITIVE_INFINITY) realToTarget = res.log.realExecutions;
    last = res;
    // Stop before a step that would, at the run's average spend per step, overrun the budget.
    if (res.log.realExecutions * (1 + 1 / (t + 1)) > realBudget) break;
  }
  return {
    curve,
    realToTarget,
    finalRatio: curve[curve.length - 1]![1],
    thetas,
    states,
    biasReductionLog: last?.log.biasReduction ?? null,
    anchorWeight: last?.log.anchorWeight ?? 1,
    ciCover: intervals ? covered / intervals : Number.NaN,
    renorm,
  };
}

// ---- measurement --------------------------------------------------------------------------------

interface Moments {
  mean: Float64Array;
  /** Trace variance E‖ĝ − E ĝ‖². */
  variance: number;
  /** Mean over draws of cos(ĝ, ref); NaN without `ref`. A zero draw points nowhere: cosine 0. */
  cosine: number;
}

/** Moments of `reps` draws of one or more gradient estimators drawn together (`draw` returns one vector each). */
async function moments(reps: number, draw: (r: number) => Promise<Float64Array[]>, ref?: Float64Array): Promise<Moments[]> {
  const draws: Float64Array[][] = [];
  for (let r = 0; r < reps; r++) draws.push(await draw(r));
  const refNorm = ref ? Math.sqrt(ref.reduce((s, x) => s + x * x, 0)) : 0;
  return draws[0]!.map((_, e) => {
    const mean = new Float64Array(draws[0]![e]!.length);
    for (const d of draws) d[e]!.forEach((x, i) => { mean[i]! += x / reps; });
    let variance = 0;
    let cosine = 0;
    for (const d of draws) {
      const g = d[e]!;
      let dot = 0;
      let nn = 0;
      for (let i = 0; i < g.length; i++) {
        variance += (g[i]! - mean[i]!) ** 2 / (reps - 1);
        if (ref) { dot += g[i]! * ref[i]!; nn += g[i]! * g[i]!; }
      }
      if (ref && nn > 0 && refNorm > 0) cosine += dot / Math.sqrt(nn) / refNorm / reps;
    }
    return { mean, variance, cosine: ref ? cosine : Number.NaN };
  });
}

/**
 * The reference gradient g* at θ: the expectation of the GRPO estimator with real execution for
 * every group (what standard GRPO follows), by Monte Carlo over `reps` draws.
 */
async function referenceGradient(seed: number, b: Bandit, theta: Float64Array, reps: number, salt: number) {
  const [m] = await moments(reps, async (r) => {
    const rs = seed * 2_000_003 + salt * 30_011 + r;
    const c = standardGrpo(new RealExecution(b, new Rng(rs * 2 + 1)));
    const groups = sampleGroups(theta, new Rng(rs * 2 + 2));
    return [gradientEstimate(theta, groups, await c.step(groups))];
  });
  return { mean: m!.mean, variance: m!.variance, reps };
}

/** An estimator's moments at one policy, relative to ‖g*‖² there (see the report's definitions). */
interface Measured {
  /** ‖E ĝ − g*‖² / ‖g*‖², Monte Carlo floors subtracted. */
  bias2: number;
  /** E‖ĝ − E ĝ‖² / ‖g*‖². */
  variance: number;
  /** Signal share: ⟨E ĝ, g*⟩ / ‖g*‖². */
  alpha: number;
  /** ‖E ĝ‖² / ‖g*‖², Monte Carlo floor subtracted; with alpha it gives ‖E ĝ − a g*‖² / ‖g*‖² for any a. */
  mm: number;
  /** E cos(ĝ, g*): how well one step points along the reference gradient, bias and variance together. */
  cosine: number;
}

/**
 * Scale-free moments of an estimator over a set of policies (units): one scale ā, the mean signal
 * share, is divided out, as one learning rate would be; then *direction bias²* = mean ‖E ĝ − ā g*‖² /
 * ‖g*‖² / ā² and *scale-free variance* = mean E‖ĝ − E ĝ‖² / ‖g*‖² / ā². A scale that differs between
 * policies is no learning rate, so it stays in the direction bias.
 */
function scaleFree(units: readonly Measured[]): { alpha: number; dirBias2: number; sfVariance: number } {
  const n = units.length;
  const a = units.reduce((t, u) => t + u.alpha, 0) / n;
  const perp = units.reduce((t, u) => t + u.mm - 2 * a * u.alpha + a * a, 0) / n;
  const v = units.reduce((t, u) => t + u.variance, 0) / n;
  return { alpha: a, dirBias2: perp / (a * a), sfVariance: v / (a * a) };
}

const mean = (xs: readonly number[]): number => xs.reduce((t, x) => t + x, 0) / xs.length;

/**
 * Relative reduction 1 − stat(on)/stat(off) over paired units (on[i] and off[i] measured with the
 * same policy, state and random numbers), with a jackknife standard error over the units.
 */
function pairedReduction(on: readonly Measured[], off: readonly Measured[], stat: (us: readonly Measured[]) => number): { reduction: number; se: number } {
  const n = on.length;
  const red = (keep: (i: number) => boolean) =>
    1 - stat(on.filter((_, i) => keep(i))) / stat(off.filter((_, i) => keep(i)));
  const full = red(() => true);
  if (n < 3) return { reduction: full, se: Number.NaN };
  const loo = on.map((_, j) => red((i) => i !== j));
  const m = mean(loo);
  return { reduction: full, se: Math.sqrt(((n - 1) / n) * loo.reduce((t, x) => t + (x - m) ** 2, 0)) };
}

/** Mean paired difference f(on) − f(off) over units, with its standard error. */
function pairedDiff(on: readonly Measured[], off: readonly Measured[], f: (u: Measured) => number): { diff: number; se: number } {
  const d = on.map((u, i) => f(u) - f(off[i]!));
  const m = mean(d);
  const se = d.length > 1 ? Math.sqrt(d.reduce((t, x) => t + (x - m) ** 2, 0) / (d.length - 1) / d.length) : Number.NaN;
  return { diff: m, se };
}

/** One checkpoint's estimator of each kind measured on the same draws; only `main` unless `extras`. */
interface Measurement {
  main: Measured;
  /** GRPO on the step's anchor groups alone: the same real executions as the main estimator. */
  anchorsOnly?: Measured;
  /** The same step with the per-prompt weighted mean (Σ w normalization, the previous choice). */
  fused?: Measured;
}

/**
 * The corrector state replicate `r` of a measurement starts from: `state` with the anchor
 * scheduler's random state drawn afresh from (seed, salt, r), so every replicate chooses its own
 * anchors (selection is part of the estimator's variance) while two configurations measured with
 * the same (seed, salt, r) choose the same ones (paired comparison).
 */
export function replicateState(state: CorrectorState, seed: number, salt: number, r: number): CorrectorState {
  const rs = seed * 1_000_003 + salt * 10_007 + r;
  return { ...state, scheduler: { ...state.scheduler, rng: new Rng(rs * 3 + 4).getState() } };
}

/**
 * Moments of the arm's gradient estimator at the reference policy θ, with the arm's own corrector
 * state restored for each of `reps` replicates (standard GRPO has none). Replicate r draws its actions, world-model noise,
 * real noise *and its anchors* (the scheduler's random state is replaced) from streams fixed by
 * (seed, salt, r) alone: the variance includes anchor selection, and two configurations measured
 * with the same arguments share their random numbers (paired comparison).
 */
async function measure(cfg: ArmConfig, seed: number, b: Bandit, theta: Float64Array, state: CorrectorState | undefined, reps: number, salt: number,
  ref: { mean: Float64Array; variance: number; reps: number }, extras = false): Promise<Measurement> {
  const j = trueJ(theta, b);
  const ms = await moments(reps, async (r) => {
    const rs = seed * 1_000_003 + salt * 10_007 + r;
    const wm = new WorldModel(b, new Rng(rs * 3 + 1));
    wm.progress = Math.min(1, Math.max(0, (j - b.j0) / (b.jStar - b.j0)));
    const real = new RealExecution(b, new Rng(rs * 3 + 2));
    let c: Corrector<Rollout> | StandardGrpo<Rollout>;
    if (cfg === 'standard') {
      c = standardGrpo(real);
    } else {
      if (!state) throw new Error('a Corrector arm is measured from its saved state');
      c = new Corrector<Rollout>(cfg, wm, real, { contextOf });
      c.restore(replicateState(state, seed, salt, r));
    }
    const groups = sampleGroups(theta, new Rng(rs * 3 + 3));
    const res = await c.step(groups);
    const main = gradientEstimate(theta, groups, res);
    return extras ? [main, gradientEstimate(theta, groups, res, 'count', true), gradientEstimate(theta, groups, res, 'weights')] : [main];
  }, ref.mean);
  const floorR = ref.variance / ref.reps;
  const norm2 = ref.mean.reduce((s, x) => s + x * x, 0) - floorR;
  const rel = (m: Moments): Measured => {
    const floorM = m.variance / reps;
    let bias2 = 0;
    let dot = 0;
    let mm = 0;
    for (let i = 0; i < ref.mean.length; i++) {
      bias2 += (m.mean[i]! - ref.mean[i]!) ** 2;
      dot += m.mean[i]! * ref.mean[i]!;
      mm += m.mean[i]! ** 2;
    }
    return { bias2: (bias2 - floorM - floorR) / norm2, variance: m.variance / norm2, alpha: dot / norm2, mm: (mm - floorM) / norm2, cosine: m.cosine };
  };
  return extras ? { main: rel(ms[0]!), anchorsOnly: rel(ms[1]!), fused: rel(ms[2]!) } : { main: rel(ms[0]!) };
}

// ---- generated prose ----------------------------------------------------------------------------
// The report's sentences that state a result are built from these, so their words follow the numbers.

const f3 = (x: number): string => (Number.isFinite(x) ? x.toPrecision(3) : String(x));
export const signed = (x: number): string => `${x >= 0 ? '+' : '−'}${Math.abs(x).toPrecision(2)}`;
/** "lowers it by 12.3% ± 1.0%" for a positive reduction, "raises it by …" for a negative one. */
export const change = (r: { reduction: number; se: number }): string =>
  `${r.reduction >= 0 ? 'lowers' : 'raises'} it by ${(100 * Math.abs(r.reduction)).toFixed(1)}% ± ${(100 * r.se).toFixed(1)}%`;
/** Whether a paired difference is resolved: more than two standard errors from 0. */
export const verdict = (d: { diff: number; se: number }): string =>
  Math.abs(d.diff) > 2 * d.se ? 'more than two standard errors from 0' : 'within two standard errors of 0: not resolved';
export const than = (a: number, b: number, more: string, less: string): string => (a > b ? more : a < b ? less : 'the same as');

// ---- run ----------------------------------------------------------------------------------------

interface ArmStats {
  realToTarget: number[]; final: number[]; half: number[]; atSteps: number[]; plateau: number[]; spent: number[];
  bias2: number[]; variance: number[]; alpha: number[]; dirBias2: number[]; sfVariance: number[]; cosine: number[];
  biasRed: number[]; weight: number[]; cover: number[]; curves: Array<Array<[number, number]>>;
  /** Standard GRPO only: its true J / J* when it had spent what full WMRL spent in all. */
  atFullBudget: number[];
  /** Per seed: min, mean and max of the per-step renormalization factor (see RunOut.renorm). */
  renormMin: number[]; renormMean: number[]; renormMax: number[];
}

type PairKey = 'on' | 'noDebias' | 'noDenoise' | 'noGuard' | 'anchorsOnly' | 'fused' | 'allReal';

export async function run(opts: BenchOptions): Promise<BenchReport> {
  const seeds = opts.quick ? [1, 2] : [1, 2, 3, 4, 5];
  const steps = opts.quick ? 120 : STEPS;
  const wmSteps = opts.quick ? 300 : WM_STEPS;
  const checkpoints = opts.quick ? [40, 70] : [40, 60, 80, 100];
  const reps = opts.quick ? 40 : 120;
  // The paired switches resolve differences of a few percent, so they get more replicates.
  const pairedReps = opts.quick ? 80 : 400;
  const refReps = opts.quick ? 400 : 2000;
  const total = seeds.length * ARMS.length * 2;
  let done = 0;

  const per = new Map<ArmKey, ArmStats>(ARMS.map((a) => [a.key, {
    realToTarget: [], final: [], half: [], atSteps: [], plateau: [], spent: [],
    bias2: [], variance: [], alpha: [], dirBias2: [], sfVariance: [], cosine: [],
    biasRed: [], weight: [], cover: [], curves: [], atFullBudget: [], renormMin: [], renormMean: [], renormMax: [],
  }]));
  const stats = (key: ArmKey): ArmStats => per.get(key)!;
  // One unit per (seed, checkpoint) of full WMRL: the estimator with everything on and each switch,
  // all measured with the same policy, state and random numbers.
  const units: Array<Record<PairKey, Measured>> = [];
  // The same units with the anchor weight held at each of SWEEP (c overridden in the saved state).
  const sweep: Measured[][] = SWEEP.map(() => []);
  const checkpointWeights: number[] = [];
  for (const seed of seeds) {
    const b = makeBandit(seed);
    // Standard GRPO first: full WMRL's equal-budget comparison reads its curve.
    for (const arm of ARMS) {
      opts.progress(done, total, `seed ${seed} train ${arm.name}`);
      const isStd = arm.key === 'standard';
      const budget = isStd ? Number.POSITIVE_INFINITY : REAL_SHARE * steps * P * GROUPS_PER_PROMPT * G;
      const out = await train(arm, seed, b, isStd ? steps : wmSteps, checkpoints, budget);
      done++;
      const s = stats(arm.key);
      s.realToTarget.push(out.realToTarget);
      s.final.push(out.finalRatio);
      s.half.push(out.curve[Math.floor(steps / 2) - 1]![1]);
      s.atSteps.push(out.curve[steps - 1]![1]);
      s.spent.push(out.curve[out.curve.length - 1]![0]);
      s.plateau.push(out.curve.slice(-PLATEAU).reduce((t, c) => t + c[1], 0) / Math.min(PLATEAU, out.curve.length));
      s.curves.push(out.curve);
      if (out.renorm.length) {
        s.renormMin.push(Math.min(...out.renorm));
        s.renormMean.push(mean(out.renorm));
        s.renormMax.push(Math.max(...out.renorm));
      }
      if (arm.key === 'full') {
        const spent = out.curve[out.curve.length - 1]![0];
        const stdCurve = stats('standard').curves.at(-1)!;
        stats('standard').atFullBudget.push(stdCurve.filter(([x]) => x <= spent).at(-1)?.[1] ?? Number.NaN);
      }
      if (out.biasReductionLog !== null) s.biasRed.push(out.biasReductionLog);
      s.weight.push(out.anchorWeight);
      if (Number.isFinite(out.ciCover)) s.cover.push(out.ciCover);
      opts.progress(done, total, `seed ${seed} measure ${arm.name}`);
      const mine: Measured[] = [];
      for (let k = 0; k < checkpoints.length; k++) {
        const theta = out.thetas[k]!;
        const st = out.states[k]; // none for standard GRPO
        const ref = await referenceGradient(seed, b, theta, refReps, k);
        const cfg = arm.cfg(seed);
        if (arm.key !== 'full' || cfg === 'standard') {
          mine.push((await measure(cfg, seed, b, theta, st, reps, k, ref)).main);
          continue;
        }
        if (!st) throw new Error(`${arm.name} saved no state at checkpoint ${checkpoints[k]}`);
        const n = pairedReps;
        const on = await measure(cfg, seed, b, theta, st, n, k, ref, true);
        mine.push(on.main);
        units.push({
          on: on.main,
          anchorsOnly: on.anchorsOnly!,
          fused: on.fused!,
          noDebias: (await measure(correctorConfig({ debias: false }, cfg), seed, b, theta, st, n, k, ref)).main,
          noDenoise: (await measure(correctorConfig({ denoise: false }, cfg), seed, b, theta, st, n, k, ref)).main,
          noGuard: (await measure(correctorConfig({ guard: false }, cfg), seed, b, theta, st, n, k, ref)).main,
          // Equal steps: every group executed for real at the same policy (its own random numbers).
          allReal: (await measure('standard', seed, b, theta, st, n, k, ref)).main,
        });
        const ws = st.weighter!;
        const s2 = ws.norm > 0 ? ws.ewma / ws.norm : 0;
        const dc = cfg.denoise as DenoiseConfig;
        checkpointWeights.push(ws.c === null ? 1 : Math.min(dc.maxWeight, Math.max(1, 1 + ws.c * s2)));
        for (let i = 0; i < SWEEP.length && s2 > 0; i++) {
          const forced = { ...st, weighter: { ...ws, c: (SWEEP[i]! - 1) / s2 } };
          sweep[i]!.push((await measure(cfg, seed, b, theta, forced, n, k, ref)).main);
        }
      }
      const sf = scaleFree(mine);
      s.bias2.push(mean(mine.map((u) => u.bias2)));
      s.variance.push(mean(mine.map((u) => u.variance)));
      s.cosine.push(mean(mine.map((u) => u.cosine)));
      s.alpha.push(sf.alpha);
      s.dirBias2.push(sf.dirBias2);
      s.sfVariance.push(sf.sfVariance);
      done++;
    }
  }
  opts.progress(total, total, 'done');

  const med = (xs: number[]) => (xs.length ? median(xs) : Number.NaN);
  const cell = (xs: number[]): number | string => (xs.length ? median(xs) : 'n/a');
  const rows = ARMS.map((arm) => {
    const s = stats(arm.key);
    const reached = s.realToTarget.filter((x) => Number.isFinite(x)).length;
    return [
      arm.name,
      reached === seeds.length ? med(s.realToTarget) : `${reached}/${seeds.length} reached`,
      med(s.half), med(s.atSteps), med(s.final), med(s.spent), med(s.plateau),
      med(s.bias2), med(s.variance), med(s.alpha), med(s.dirBias2), med(s.sfVariance), med(s.cosine),
      cell(s.biasRed), med(s.weight), cell(s.cover),
    ];
  });

  const std = stats('standard');
  const full = stats('full');
  const col = (k: PairKey) => units.map((u) => u[k]);
  const rawBias = (us: readonly Measured[]) => mean(us.map((u) => u.bias2));
  const rawVar = (us: readonly Measured[]) => mean(us.map((u) => u.variance));
  const dirBias = (us: readonly Measured[]) => scaleFree(us).dirBias2;
  const sfVar = (us: readonly Measured[]) => scaleFree(us).sfVariance;
  const sfMse = (us: readonly Measured[]) => { const f = scaleFree(us); return f.dirBias2 + f.sfVariance; };
  const cos = (us: readonly Measured[]) => mean(us.map((u) => u.cosine));
  const cosOf = (u: Measured) => u.cosine;
  const debiasSf = pairedReduction(col('on'), col('noDebias'), dirBias);
  const debiasRaw = pairedReduction(col('on'), col('noDebias'), rawBias);
  const denoiseSf = pairedReduction(col('on'), col('noDenoise'), sfVar);
  const denoiseRaw = pairedReduction(col('on'), col('noDenoise'), rawVar);
  const denoiseMse = pairedReduction(col('on'), col('noDenoise'), sfMse);
  const guardDir = pairedReduction(col('on'), col('noGuard'), dirBias);
  const cosDenoise = pairedDiff(col('on'), col('noDenoise'), cosOf);
  const cosDebias = pairedDiff(col('on'), col('noDebias'), cosOf);
  const cosBudget = pairedDiff(col('on'), col('anchorsOnly'), cosOf);
  const cosSteps = pairedDiff(col('on'), col('allReal'), cosOf);
  const cosFused = pairedDiff(col('on'), col('fused'), cosOf);
  const speedup = med(std.realToTarget) / med(full.realToTarget);
  const ablations = (['debias', 'denoise'] as const).map((k) => med(stats(k).final));
  const result = {
    speedup_real_exec: speedup,
    final_ratio_vs_standard: med(full.final) / med(std.final),
    final_ratio_equal_real_budget: med(full.final) / med(std.atFullBudget),
    real_exec_ratio: med(std.spent) / med(full.spent),
    final_ratio_equal_steps: med(full.atSteps) / med(std.final),
    halfway_ratio_vs_standard: med(full.half) / med(std.half),
    pure_wm_final_ratio: med(stats('pure').final) / med(std.final),
    bias_reduction: debiasSf.reduction,
    bias_reduction_se: debiasSf.se,
    bias_reduction_raw: debiasRaw.reduction,
    variance_reduction: denoiseSf.reduction,
    variance_reduction_se: denoiseSf.se,
    variance_reduction_raw: denoiseRaw.reduction,
    variance_reduction_raw_se: denoiseRaw.se,
    denoise_mse_reduction: denoiseMse.reduction,
    cosine_full: cos(col('on')),
    cosine_no_denoise: cos(col('noDenoise')),
    cosine_no_debias: cos(col('noDebias')),
    cosine_no_guard: cos(col('noGuard')),
    cosine_gain_denoise: cosDenoise.diff,
    cosine_gain_denoise_se: cosDenoise.se,
    cosine_gain_debias: cosDebias.diff,
    cosine_gain_debias_se: cosDebias.se,
    cosine_anchors_only: cos(col('anchorsOnly')),
    cosine_all_real: cos(col('allReal')),
    cosine_fused_weights: cos(col('fused')),
    wm_scale_renorm_min: med(full.renormMin),
    wm_scale_renorm_max: med(full.renormMax),
    full_minus_best_ablation_final: med(full.final) - Math.max(...ablations),
    plateau_ratio_vs_standard: med(full.plateau) / med(std.plateau),
    active_speedup_real_exec: med(std.realToTarget) / med(stats('active').realToTarget),
    no_guard_final_ratio: med(stats('noGuard').final) / med(std.final),
    guard_direction_bias_reduction: guardDir.reduction,
  };

  // ---- generated prose: every sentence that states a result reads this run's numbers ----
  const spread = (all: number[]) => {
    const xs = all.filter((x) => Number.isFinite(x));
    const never = all.length - xs.length;
    const range = xs.length ? `${quantile(xs, 0).toPrecision(3)}–${quantile(xs, 1).toPrecision(3)}` : 'n/a';
    return never ? `${range} (${never} never)` : range;
  };
  const reachedText = (key: ArmKey) => {
    const s = stats(key);
    const n = s.realToTarget.filter((x) => Number.isFinite(x)).length;
    return n === seeds.length ? `after ${f3(med(s.realToTarget))} real executions (median)` : `in only ${n} of ${seeds.length} seeds`;
  };
  const fullFinal = med(full.final);
  const stdAtBudget = med(std.atFullBudget);
  const stdFinal = med(std.final);
  const guardFinal = med(stats('noGuard').final);
  const findings = [
    '### Findings (generated from the numbers above)',
    '',
    `- Real executions: full WMRL reaches ${TARGET} × J* ${reachedText('full')}, standard GRPO ${reachedText('standard')}` +
      (Number.isFinite(speedup) ? `: ${speedup.toFixed(2)}× fewer.` : '.') +
      ` With active anchors: ${reachedText('active')}.`,
    `- Equal real budget: full WMRL ends its budget (${f3(med(full.spent))} real executions, ${result.real_exec_ratio.toFixed(2)}× fewer than standard GRPO's`,
    `  ${f3(med(std.spent))}) at true J / J* ${f3(fullFinal)}; standard GRPO was at ${f3(stdAtBudget)} after as many real executions, so full WMRL is`,
    `  ${than(fullFinal, stdAtBudget, 'above', 'below')} it at equal real budget (ratio ${f3(result.final_ratio_equal_real_budget)}) and ${than(fullFinal, stdFinal, 'above', 'below')} standard GRPO's own final ${f3(stdFinal)}.`,
    `- Equal steps: at step ${steps} full WMRL is at ${f3(med(full.atSteps))}, standard GRPO at ${f3(stdFinal)}.`,
    `- Pure world model ends at ${f3(med(stats('pure').final))} (${f3(result.pure_wm_final_ratio)} of standard GRPO); + debias at ${f3(ablations[0]!)}, + denoise at`,
    `  ${f3(ablations[1]!)}, full WMRL at ${f3(fullFinal)} (${signed(result.full_minus_best_ablation_final)} against the better of the two).`,
    `- Without the exploitation guard full WMRL ends at ${f3(guardFinal)} (worst seed ${f3(Math.min(...stats('noGuard').final))}) against ${f3(fullFinal)}`,
    `  (worst seed ${f3(Math.min(...full.final))}) with it; per-rollout ensemble weights end at ${f3(med(stats('perRollout').final))}` +
      ` (${stats('perRollout').realToTarget.filter((x) => Number.isFinite(x)).length}/${seeds.length} seeds reach the target).`,
    `- Debias (paired, ${units.length} units): direction bias² ${f3(dirBias(col('noDebias')))} → ${f3(dirBias(col('on')))}, debias ${change(debiasSf)};`,
    `  raw bias² ${f3(rawBias(col('noDebias')))} → ${f3(rawBias(col('on')))}, debias ${change(debiasRaw)}. Expected cosine ${f3(cos(col('noDebias')))} → ${f3(cos(col('on')))}`,
    `  (${signed(cosDebias.diff)} ± ${cosDebias.se.toPrecision(2)}, ${verdict(cosDebias)}).`,
    `- Denoise (paired): expected cosine ${f3(cos(col('noDenoise')))} → ${f3(cos(col('on')))} (${signed(cosDenoise.diff)} ± ${cosDenoise.se.toPrecision(2)},`,
    `  ${verdict(cosDenoise)}). Scale-free variance ${f3(sfVar(col('noDenoise')))} → ${f3(sfVar(col('on')))}: denoise ${change(denoiseSf)};`,
    `  scale-free bias² + variance: ${change(denoiseMse)}; raw variance ${f3(rawVar(col('noDenoise')))} → ${f3(rawVar(col('on')))}: ${change(denoiseRaw)};`,
    `  α ${f3(scaleFree(col('noDenoise')).alpha)} → ${f3(scaleFree(col('on')).alpha)}.`,
    `- The same step at equal real budget (GRPO on the anchor groups alone) has expected cosine ${f3(cos(col('anchorsOnly')))}: full WMRL is`,
    `  ${signed(cosBudget.diff)} ± ${cosBudget.se.toPrecision(2)} ${than(cosBudget.diff, 0, 'above', 'below')} it (${verdict(cosBudget)}). At equal steps, GRPO with every group`,
    `  executed for real (${f3(1 / DEFAULT_CORRECTOR_CONFIG.anchors.fraction)}× the real executions) has ${f3(cos(col('allReal')))}: full WMRL is ${signed(cosSteps.diff)} ± ${cosSteps.se.toPrecision(2)} ${than(cosSteps.diff, 0, 'above', 'below')} it.`,
    `- Weights: renormalizing each step's weights to mean 1 (the previous choice) would have multiplied the world-model groups by`,
    `  ${f3(med(full.renormMin))}–${f3(med(full.renormMax))} (mean ${f3(med(full.renormMean))}) from step to step in full WMRL's training (medians over seeds);`,
    '  here they keep weight 1 on every step and anchors add weight. On the same draws, the per-prompt weighted mean (Σw',
    `  normalization) has expected cosine ${f3(cos(col('fused')))}, the per-prompt mean used here ${f3(cos(col('on')))} (${signed(cosFused.diff)} ± ${cosFused.se.toPrecision(2)}, ${verdict(cosFused)}).`,
    `- The exploitation guard, paired at these checkpoints: direction bias² ${f3(dirBias(col('noGuard')))} → ${f3(dirBias(col('on')))} (the guard ${change(guardDir)}),`,
    `  expected cosine ${f3(cos(col('noGuard')))} → ${f3(cos(col('on')))}.`,
  ];
  const sweepCos: Array<[number, number]> = [[1, cos(col('noDenoise'))], ...SWEEP.flatMap((w, i): Array<[number, number]> => (sweep[i]!.length ? [[w, cos(sweep[i]!)]] : []))];
  const sweepBest = sweepCos.reduce((best, x) => (x[1] > best[1] ? x : best));
  const labels: Record<PairKey, string> = {
    on: 'all on', noDebias: 'debias off', noDenoise: 'denoise off', noGuard: 'guard off',
    anchorsOnly: 'anchor groups alone (equal real budget)', fused: 'per-prompt weighted mean (Σw)', allReal: 'every group real (equal steps)',
  };
  const notes = [
    ...findings,
    '',
    '### Spread over seeds (min–max)',
    '',
    `| arm | real execs to target | J / J* at step ${Math.floor(steps / 2)} | J / J* at step ${steps} | final true J / J* | bias² | variance | α | direction bias² | scale-free variance | E cos(ĝ, g*) |`,
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...ARMS.map((a) => {
      const s = stats(a.key);
      return `| ${a.name} | ${spread(s.realToTarget)} | ${spread(s.half)} | ${spread(s.atSteps)} | ${spread(s.final)} | ${spread(s.bias2)} | ${spread(s.variance)} | ${spread(s.alpha)} | ${spread(s.dirBias2)} | ${spread(s.sfVariance)} | ${spread(s.cosine)} |`;
    }),
    '',
    `### Paired estimators at full WMRL's checkpoints (same policy, state and random numbers; mean over ${units.length} units = seeds × checkpoints, ${pairedReps} replicates each, anchors drawn afresh in every replicate)`,
    '',
    '| estimator | E cos(ĝ, g*) | α | direction bias² | scale-free variance | raw bias² | raw variance |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...(['on', 'noDebias', 'noDenoise', 'noGuard', 'fused', 'anchorsOnly', 'allReal'] as const).map((k) => {
      const f = scaleFree(col(k));
      return `| ${labels[k]} | ${f3(cos(col(k)))} | ${f3(f.alpha)} | ${f3(f.dirBias2)} | ${f3(f.sfVariance)} | ${f3(rawBias(col(k)))} | ${f3(rawVar(col(k)))} |`;
    }),
    '',
    `Sensitivity to the anchor weight, held fixed (w = 1 is denoise off). The method's own weight, 1 + c·s², is the "all on" row:`,
    `${f3(quantile(checkpointWeights, 0))}–${f3(quantile(checkpointWeights, 1))} at these checkpoints (median ${f3(med(checkpointWeights))}); the highest expected cosine here is at w = ${sweepBest[0]}.`,
    '',
    '| anchor weight | E cos(ĝ, g*) | α | direction bias² | scale-free variance | raw variance |',
    '| --- | --- | --- | --- | --- | --- |',
    `| 1 | ${f3(cos(col('noDenoise')))} | ${f3(scaleFree(col('noDenoise')).alpha)} | ${f3(dirBias(col('noDenoise')))} | ${f3(sfVar(col('noDenoise')))} | ${f3(rawVar(col('noDenoise')))} |`,
    ...SWEEP.map((w, i) => sweep[i]!.length
      ? `| ${w} | ${f3(cos(sweep[i]!))} | ${f3(scaleFree(sweep[i]!).alpha)} | ${f3(dirBias(sweep[i]!))} | ${f3(sfVar(sweep[i]!))} | ${f3(rawVar(sweep[i]!))} |`
      : `| ${w} | n/a | n/a | n/a | n/a | n/a |`),
    '',
    'Definitions. ĝ is an arm\'s gradient estimate (GRPO-standardized advantages × the corrector\'s weights, per-prompt mean over',
    `rollouts) at its own policy at steps ${checkpoints.join(', ')} with its own corrector state restored and the anchor scheduler's random`,
    `state replaced per replicate (so anchor selection is part of the variance), ${reps} replicates each (${pairedReps} for full WMRL and its`,
    `paired estimators). g* is the expectation of the GRPO estimator with real execution for every group (what standard GRPO`,
    `follows), by Monte Carlo over ${refReps} draws. *E cos(ĝ, g*)* is the mean over replicates of the cosine between one draw and g*:`,
    'bounded, blind to the overall scale, and lowered by bias and variance alike. Raw: *bias²* = ‖E ĝ − g*‖² / ‖g*‖² with both',
    'Monte Carlo floors subtracted (so it can dip below 0), *variance* = E‖ĝ − E ĝ‖² / ‖g*‖². Scale-free: α = ⟨E ĝ, g*⟩ / ‖g*‖²,',
    '*direction bias²* = ‖E ĝ − α g*‖² / ‖g*‖² / α², *scale-free variance* = E‖ĝ − E ĝ‖² / ‖g*‖² / α² (one α per arm and seed in',
    'the main table, per estimator over all paired units below); they are meaningless where α is near 0, and they reward',
    'anything that raises α, which is why the expected cosine is reported beside them. ± is one standard error over the paired',
    'units (jackknife for ratios). "Anchor groups alone" is GRPO on the step\'s real executions only; "every group real" spends',
    `${f3(1 / DEFAULT_CORRECTOR_CONFIG.anchors.fraction)}× the real executions of a WMRL step.`,
    `Protocol. Standard GRPO trains ${steps} steps, every rollout executed for real. Each world-model arm trains until it has spent`,
    `${REAL_SHARE} of standard GRPO's real executions ("real execs spent"), at most ${wmSteps} steps. "final" compares each arm at the end of`,
    `its own budget, "J / J* at step ${steps}" at equal steps. World-model arms run with the exploitation guard unless the row says`,
    'otherwise; "+ debias" and "+ denoise" each switch the other correction off. final = true J / J* at the last step; plateau =',
    `mean over the last ${PLATEAU} steps. The interval column is the fraction of steps whose prediction-powered 95% interval covered`,
    'the true mean score (rectifiers from the last 64 anchor groups, so it lags a moving policy).',
  ].join('\n');

  // Pure world model is left out: it never executes anything for real, so it has no x.
  const plotArms: ArmKey[] = ['standard', 'debias', 'denoise', 'full', 'active', 'perRollout', 'noGuard'];
  const xMax = 1.5 * med(std.realToTarget.filter((x) => Number.isFinite(x)));
  const lines: Series[] = plotArms.map((key) => {
    const curves = stats(key).curves;
    const points: Array<[number, number]> = [];
    for (let t = 0; t < Math.min(...curves.map((c) => c.length)); t += 2) {
      const x = median(curves.map((c) => c[t]![0]));
      if (x <= xMax) points.push([x, median(curves.map((c) => c[t]![1]))]);
    }
    return { label: armName(key), points };
  });

  return {
    title: 'WMRL core: GRPO with anchors, Online Debiasing and Inverse-Variance Denoising on a bandit with known truth',
    summary: [
      `${P} prompts × ${K} actions, ${GROUPS_PER_PROMPT} groups of ${G} rollouts per prompt per step, lr ${LR}, seeds ${seeds.join(', ')} (medians).`,
      `Standard GRPO trains ${steps} steps; each world-model arm until it has spent ${REAL_SHARE} of standard GRPO's real executions (see Protocol).`,
      `Real execution = true reward + N(0, ${REAL_NOISE}²). World model: drifting monotone non-linear miscalibration, heteroscedastic noise (σ 0.05–0.5 by action),`,
      `an over-rated region in half the prompts. Anchors 10% of groups (floor 1); real executions include anchors. Target: ${TARGET} × optimum's true reward.`,
      `Pure world model executes nothing for real. Estimator moments at ${checkpoints.length} checkpoints, ${reps} replicates each (${pairedReps} for full WMRL), anchors drawn afresh per replicate.`,
      'World-model groups keep weight 1 on every step and anchors add weight (no per-step renormalization); the gradient is a per-prompt mean over rollouts.',
    ].join('\n'),
    header: ['arm', 'real execs to target', `J / J* at step ${Math.floor(steps / 2)}`, `J / J* at step ${steps}`, 'final true J / J*', 'real execs spent', 'plateau J / J*', 'grad bias²', 'grad variance', 'α', 'direction bias²', 'scale-free variance', 'E cos(ĝ, g*)', 'held-out bias reduction', 'anchor weight', 'CI coverage'],
    rows,
    notes,
    plot: { title: 'True reward vs real executions (median over seeds)', xLabel: 'real executions', yLabel: 'true J / J*', lines },
    result,
  };
}
