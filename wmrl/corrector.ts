// The WMRL correction loop: one `step` per training step turns groups of rollouts into weighted
// GRPO advantages, spending a thin stream of real execution (anchors) on correcting the world
// model's bias (Online Debiaser) and noise (Inverse-Variance Weighter). DESIGN.md §1.
//
// Order within a step: world-model scores for every group (cheap, batched; active selection needs
// its uncertainty) → choose anchors → launch real scoring of anchors (async, limited slots) →
// absorb every finished anchor, this step's and late ones: first update the map with all their
// pairs, then measure disagreement on the *calibrated* residual → push world-model scores through
// the map → advantages, anchor groups weighted. A slow robot or sandbox never blocks world-model
// scoring: with `anchorWaitMs` finite a step goes on without its anchors, which then only join the
// calibration when they arrive.
import { groupAdvantages, pooledStd, DEFAULT_ADVANTAGE_CONFIG, type AdvantageConfig, type Score } from './advantages.js';
import { AnchorScheduler, DEFAULT_ANCHOR_CONFIG, type AnchorConfig, type AnchorSchedulerState } from './anchors.js';
import { OnlineDebiaser, DEFAULT_DEBIAS_CONFIG, type DebiasConfig, type DebiaserState, type Pair } from './debias.js';
import { InverseVarianceWeighter, DEFAULT_DENOISE_CONFIG, ensembleWeights, type DenoiseConfig, type WeighterState } from './denoise.js';
import { ExploitationGuard, DEFAULT_GUARD_CONFIG, type GuardConfig, type GuardState } from './guard.js';
import { ppiMeanInterval, type Interval, type RectifierUnit } from './ppi.js';
import { TrustedExecution, type TrustedOptions, type TrustedScorer } from './trusted.js';

export interface CorrectorOptions<R> extends TrustedOptions<R> {
  /**
   * The context (prompt, task) a group belongs to, for the exploitation guard; every rollout of a
   * group shares it. Without it the whole run is one context.
   */
  contextOf?: (group: readonly R[]) => string;
}

/** World-model scores of one group; `variance` is the ensemble's per-rollout variance when it has one. */
export interface WorldModelScores {
  scores: Score[];
  variance?: Score[];
}

/** The cheap scorer. Takes all of a step's groups at once so that it can batch them. */
export interface WorldModelScorer<R> {
  /** `groups` [group][rollout] → one WorldModelScores per group, aligned. */
  score(groups: ReadonlyArray<readonly R[]>): Promise<WorldModelScores[]>;
}

/** Per-rollout 1/variance weights on world-model groups, from the ensemble's variance. */
export interface PerRolloutConfig {
  /** Added to ensemble variances before inverting them. */
  varianceFloor: number;
}

export const DEFAULT_PER_ROLLOUT_CONFIG: PerRolloutConfig = { varianceFloor: 1e-6 };

/**
 * One convention for every optional part: its config object turns it on, `false` turns it off.
 * Build variants with `correctorConfig(overrides)`, never by nested spreads.
 */
export interface CorrectorConfig {
  /** Anchor scheduling; `maxInFlight` is the number of trusted-scorer slots. */
  anchors: AnchorConfig;
  /** Online Debiasing; false: the map stays identity. */
  debias: DebiasConfig | false;
  /** Inverse-Variance Denoising (anchor-group up-weighting); false: weight 1. */
  denoise: DenoiseConfig | false;
  /** Per-rollout 1/variance weights on world-model groups; false: weight 1. */
  perRolloutWeights: PerRolloutConfig | false;
  /** Exploitation guard (guard.ts): per-context detection of world-model exploitation; false: off. */
  guard: GuardConfig | false;
  advantages: AdvantageConfig;
  /** How long a step waits for its own anchors, in ms: Infinity = wait, 0 = never block. */
  anchorWaitMs: number;
  /**
   * Consecutive anchor groups that may come back without a single scored rollout (an exception the
   * caller chose to treat as unscored, or all null) before the run stops with a TrustedScorerError:
   * otherwise a broken robot quietly turns WMRL into pure world-model training.
   */
  maxFailedAnchors: number;
  /** Anchor groups (most recent) whose rectifiers feed the true-mean interval. */
  ppiWindow: number;
  ppiConfidence: number;
  seed: number;
}

export const DEFAULT_CORRECTOR_CONFIG: CorrectorConfig = {
  anchors: DEFAULT_ANCHOR_CONFIG,
  debias: DEFAULT_DEBIAS_CONFIG,
  denoise: DEFAULT_DENOISE_CONFIG,
  perRolloutWeights: false,
  guard: DEFAULT_GUARD_CONFIG,
  advantages: DEFAULT_ADVANTAGE_CONFIG,
  anchorWaitMs: Number.POSITIVE_INFINITY,
  maxFailedAnchors: 8,
  ppiWindow: 64,
  ppiConfidence: 0.95,
  seed: 0,
};

/** The config's parts that are objects, with the defaults a part starts from when it was off. */
const SECTION_DEFAULTS = {
  anchors: DEFAULT_ANCHOR_CONFIG,
  debias: DEFAULT_DEBIAS_CONFIG,
  denoise: DEFAULT_DENOISE_CONFIG,
  perRolloutWeights: DEFAULT_PER_ROLLOUT_CONFIG,
  guard: DEFAULT_GUARD_CONFIG,
  advantages: DEFAULT_ADVANTAGE_CONFIG,
} as const;

/** Overrides of a CorrectorConfig: plain options replaced; parts given as partial objects, or false to turn them off. */
export type CorrectorOverrides = {
  [K in keyof CorrectorConfig]?: CorrectorConfig[K] extends number | boolean
    ? CorrectorConfig[K]
    : Partial<Exclude<CorrectorConfig[K], false>> | Extract<CorrectorConfig[K], false>;
};

/**
 * `base` (the defaults unless given) with `overrides` applied: a part given as an object is merged
 * key by key onto the base's part (onto that part's defaults when the base has it off); `false`
 * turns a part off. Returns a new object (parts not overridden are shared with `base`); neither
 * argument is modified.
 */
export function correctorConfig(overrides: CorrectorOverrides = {}, base: CorrectorConfig = DEFAULT_CORRECTOR_CONFIG): CorrectorConfig {
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(overrides) as Array<[keyof CorrectorConfig, unknown]>) {
    if (v === undefined) continue;
    if (k in SECTION_DEFAULTS && v !== false) {
      const from = base[k] === false ? SECTION_DEFAULTS[k as keyof typeof SECTION_DEFAULTS] : base[k];
      out[k] = { ...(from as object), ...(v as object) };
    } else {
      out[k] = v;
    }
  }
  return out as unknown as CorrectorConfig;
}

/** What every step logs. */
export interface StepLog {
  step: number;
  groups: number;
  /** Anchor groups sent to real execution this step. */
  anchorsLaunched: number;
  /** Anchor groups of this step whose real scores formed their advantages. */
  anchorsUsed: number;
  /** Anchor groups (of any step) that joined the calibration this step. */
  anchorsAbsorbed: number;
  inFlight: number;
  /** Anchors launched over groups, this step. */
  anchorFraction: number;
  /** Anchors launched over groups, whole run. */
  realizedAnchorFraction: number;
  /** Rollouts executed for real, whole run (anchors included). */
  realExecutions: number;
  calibrated: boolean;
  /** Held-out reduction of the within-group-centred squared residual by the map; null before a map. */
  biasReduction: number | null;
  anchorWeight: number;
  /** Smoothed normalized disagreement s²; null before any measurement. */
  disagreement: number | null;
  scoredGroups: number;
  skippedGroups: number;
  excludedRollouts: number;
  /** Contexts the exploitation guard distrusts now. */
  flaggedContexts: number;
  /** World-model groups of this step left out of the gradient because their context is flagged. */
  distrustedGroups: number;
  /** Interval for the policy's true mean score (prediction-powered); null until 2 anchor groups. */
  trueMean: Interval | null;
  /** Trusted-scorer calls that threw and that `onTrustedError` chose to treat as unscored, whole run. */
  trustedErrors: number;
  /** Anchor groups in a row, up to now, that came back without a scored rollout. */
  failedAnchorStreak: number;
}

export interface StepResult {
  /** [group][rollout]; null = excluded (unscored, or the group was skipped). */
  advantages: Score[][];
  /**
   * [group][rollout] multiplier of each advantage: 1 on world-model groups (or, with
   * perRolloutWeights, the ensemble's weights, mean 1 within the group), the anchor weight (≥ 1) on
   * anchor groups, 1 on excluded rollouts. Not renormalized per step: the world-model groups' scale
   * is the same on every step and anchors only add weight. Renormalizing to mean 1 would shrink the
   * world-model groups by 1/(1 + (w − 1)·anchor share) on steps with anchors and not on steps
   * without, a step size that jitters with anchor luck. The gradient is the plain mean over
   * rollouts of weight × advantage × ∇log π, so its expected scale is 1 + (w − 1)·anchor share,
   * constant while w is.
   */
  weights: number[][];
  /** [group] where the group's scores came from. */
  source: Array<'real' | 'wm'>;
  /** [group][rollout] the scores the advantages were formed from (real, or calibrated world model). */
  scores: Score[][];
  log: StepLog;
}

/** A finished anchor job: plain data, so it survives save/restore. */
interface Finished {
  id: number;
  step: number;
  context: string;
  wm: Score[];
  real: Score[];
  inclusion: number;
  /** π̄/π: the step's mean inclusion probability over this group's; absent in older states (1). */
  selectionWeight?: number;
}

interface PpiUnit {
  wm: Score[];
  real: Score[];
  inclusion: number;
}

export interface CorrectorState {
  version: 1;
  step: number;
  nextJobId: number;
  realExecutions: number;
  anchorsLaunched: number;
  groupsSeen: number;
  trustedErrors: number;
  /** Absent in older states: 0. */
  failedAnchorStreak?: number;
  scheduler: AnchorSchedulerState;
  /** Each part's state is present when the part is on; a part that is on but absent starts fresh. */
  debiaser?: DebiaserState;
  weighter?: WeighterState;
  guard?: GuardState;
  finished: Finished[];
  ppi: PpiUnit[];
  /** EWMA of the anchors' real scores (first and second moments); absent in older states. */
  realScale?: ScaleState;
}

interface ScaleState { m1: number; m2: number; norm: number }

/** Half-life, in anchor groups, of the real-score scale behind the advantages' std floor. */
const SCALE_HALF_LIFE = 64;

export class Corrector<R> {
  private readonly scheduler: AnchorScheduler;
  /** Null when the part is off. */
  private readonly debiaser: OnlineDebiaser | null;
  private readonly weighter: InverseVarianceWeighter | null;
  private readonly guard: ExploitationGuard | null;
  private readonly contextOf: (group: readonly R[]) => string;
  /** Anchors' real execution; once it has failed for good, every later step() and drain() throws. */
  private readonly trusted: TrustedExecution<R>;
  private stepIndex = 0;
  private nextJobId = 0;
  private realExecutions = 0;
  private anchorsLaunched = 0;
  private groupsSeen = 0;
  private finished: Finished[] = [];
  private ppi: PpiUnit[] = [];
  private realScale: ScaleState = { m1: 0, m2: 0, norm: 0 };
  private readonly running = new Map<number, Promise<void>>();

  constructor(
    readonly cfg: CorrectorConfig,
    private readonly worldModel: WorldModelScorer<R>,
    trusted: TrustedScorer<R>,
    opts: CorrectorOptions<R> = {},
  ) {
    if (!(cfg.anchors.maxInFlight >= 1)) throw new Error('anchors.maxInFlight (trusted slots) must be ≥ 1');
    this.scheduler = new AnchorScheduler(cfg.anchors, cfg.seed);
    this.debiaser = cfg.debias ? new OnlineDebiaser(cfg.debias) : null;
    this.weighter = cfg.denoise ? new InverseVarianceWeighter(cfg.denoise) : null;
    this.guard = cfg.guard ? new ExploitationGuard(cfg.guard) : null;
    if (!(Number.isInteger(cfg.maxFailedAnchors) && cfg.maxFailedAnchors >= 1)) throw new Error(`maxFailedAnchors ${cfg.maxFailedAnchors} must be a positive integer`);
    this.contextOf = opts.contextOf ?? (() => '');
    this.trusted = new TrustedExecution(trusted, cfg.maxFailedAnchors, 'anchor groups', opts.onTrustedError);
  }

  /** Whether the exploitation guard currently distrusts the world model in `context`. */
  distrusts(context: string): boolean {
    return this.guard?.flagged(context) ?? false;
  }

  /** The current map from world-model score to calibrated score (identity when off or uncalibrated). */
  calibrate(x: number): number {
    return this.debiaser ? this.debiaser.apply(x) : x;
  }

  get inFlight(): number {
    return this.running.size;
  }

  /**
   * One training step over `groups` [group][rollout]. Rejects with a TrustedScorerError when real
   * execution failed (see `TrustedErrorPolicy` and `maxFailedAnchors`); the run cannot go on then.
   */
  async step(groups: ReadonlyArray<readonly R[]>): Promise<StepResult> {
    this.trusted.throwIfFailed();
    const step = this.stepIndex++;
    this.groupsSeen += groups.length;
    const cfg = this.cfg;
    const wm = await this.worldModel.score(groups);
    if (wm.length !== groups.length) throw new Error(`world model returned ${wm.length} groups for ${groups.length}`);

    // Choose anchors; active mode reads the ensemble's mean variance per group.
    const uncertainty = wm.map((w) => {
      const v = (w.variance ?? []).filter((x): x is number => x !== null && Number.isFinite(x));
      return v.length ? v.reduce((s, x) => s + x, 0) / v.length : 0;
    });
    const contexts = groups.map((g) => this.contextOf(g));
    const guard = this.guard;
    const boost = guard ? contexts.map((k) => (guard.flagged(k) ? guard.cfg.anchorBoost : 1)) : undefined;
    const choice = this.scheduler.choose(groups.length, this.running.size, uncertainty, boost);
    const meanInclusion = groups.length ? choice.groups.length / groups.length : 0;
    const mine: Array<{ group: number; id: number; done: Promise<void> }> = [];
    choice.groups.forEach((g, j) => {
      const id = this.nextJobId++;
      const wmScores = [...wm[g]!.scores];
      this.realExecutions += groups[g]!.length;
      const done = this.trusted.score(groups[g]!).then(({ real, worldModel }) => {
        const inclusion = choice.inclusion[j]!;
        this.finished.push({ id, step, context: contexts[g]!, wm: worldModel ?? wmScores, real, inclusion, selectionWeight: meanInclusion / inclusion });
        this.running.delete(id);
      });
      this.running.set(id, done);
      mine.push({ group: g, id, done });
    });
    this.anchorsLaunched += choice.groups.length;
    await this.waitFor(mine.map((m) => m.done));
    this.trusted.throwIfFailed();

    // Absorb everything finished, in launch order: all map updates first, then disagreement.
    const absorbed = this.finished.sort((a, b) => a.id - b.id);
    this.finished = [];
    const { debiaser, weighter, guard: guardOn } = this;
    if (debiaser) {
      for (const f of absorbed) {
        const pairs: Pair[] = [];
        f.wm.forEach((x, i) => {
          const y = f.real[i];
          if (x !== null && y !== null && y !== undefined) pairs.push({ wm: x, real: y, group: f.id, weight: f.selectionWeight ?? 1 });
        });
        debiaser.addGroup(pairs);
      }
    }
    const measuring = !debiaser || debiaser.calibrated;
    for (const f of absorbed) {
      const cal = f.wm.map((x) => (x === null ? null : this.calibrate(x)));
      if (weighter && measuring) weighter.update(cal, f.real, f.selectionWeight ?? 1);
      guardOn?.update(f.context, cal, f.real);
      this.updateScale(f.real);
      this.ppi.push({ wm: f.wm, real: f.real, inclusion: f.inclusion });
    }
    if (this.ppi.length > cfg.ppiWindow) this.ppi.splice(0, this.ppi.length - cfg.ppiWindow);

    // Scores: this step's anchors that came back use their real scores; the rest the calibrated WM.
    const realOf = new Map<number, Score[]>();
    for (const f of absorbed) if (f.step === step) {
      const m = mine.find((x) => x.id === f.id);
      if (m) realOf.set(m.group, f.real);
    }
    const calibrated = wm.map((w) => w.scores.map((x) => (x === null ? null : this.calibrate(x))));
    const scores = calibrated.map((c, g) => realOf.get(g) ?? c);
    const source = scores.map((_, g) => (realOf.has(g) ? 'real' : 'wm') as 'real' | 'wm');
    const adv = groupAdvantages(scores, cfg.advantages, this.scoreScale() ?? pooledStd(scores));
    // World-model groups of a context the guard distrusts are left out: their advantages would push
    // the policy further into what the world model over-rates there.
    let distrusted = 0;
    source.forEach((src, g) => {
      if (src !== 'wm' || !this.distrusts(contexts[g]!)) return;
      const row = adv.advantages[g]!;
      adv.advantages[g] = row.map(() => null);
      distrusted++;
    });
    const anchorWeight = weighter ? weighter.weight() : 1;
    // Anchor g's up-weight is (w − 1)·π̄/π_g on top of 1 (Horvitz–Thompson on the excess): when
    // active selection favours some groups' contents, each content still gets the same expected
    // weight, 1 + (w − 1)·π̄, as with uniform selection, where π_g = π̄ and this is just w. The
    // result is clipped at maxWeight: a rarely chosen group would otherwise carry its 1/π (10× and
    // more) into one step; the clip gives up a little of that exactness for bounded variance.
    const inclusionOf = new Map<number, number>(choice.groups.map((g, j) => [g, choice.inclusion[j]!]));
    const maxWeight = weighter ? weighter.cfg.maxWeight : 1;
    const weights = scores.map((s, g) => {
      const row = adv.advantages[g]!;
      if (source[g] === 'real') {
        const pi = inclusionOf.get(g)!;
        const w = Math.min(maxWeight, pi > 0 ? 1 + (anchorWeight - 1) * (meanInclusion / pi) : anchorWeight);
        return row.map((a) => (a === null ? 1 : w));
      }
      const v = wm[g]!.variance;
      if (!cfg.perRolloutWeights || !v) return s.map(() => 1);
      return ensembleWeights(v, row.map((a) => a !== null), cfg.perRolloutWeights.varianceFloor);
    });

    const predictions = calibrated.flat().filter((x): x is number => x !== null);
    const log = this.makeLog(step, groups.length, choice.groups.length, realOf.size, absorbed.length, adv, anchorWeight, this.trueMean(predictions), distrusted);
    return { advantages: adv.advantages, weights, source, scores, log };
  }

  /** Waits for every anchor in flight; their results are kept for the next step to absorb. */
  async drain(): Promise<void> {
    await Promise.all([...this.running.values()]);
    this.trusted.throwIfFailed();
  }

  /** Feeds one anchor group's real scores into the score scale. */
  private updateScale(real: readonly Score[]): void {
    const ys = real.filter((y): y is number => y !== null);
    if (ys.length === 0) return;
    const a = 1 - 0.5 ** (1 / SCALE_HALF_LIFE);
    const s = this.realScale;
    s.m1 = (1 - a) * s.m1 + (a * ys.reduce((t, y) => t + y, 0)) / ys.length;
    s.m2 = (1 - a) * s.m2 + (a * ys.reduce((t, y) => t + y * y, 0)) / ys.length;
    s.norm = (1 - a) * s.norm + a;
  }

  /**
   * The score scale the advantages' std floor is relative to: the std of the real scores over
   * recent anchors (all contexts pooled), which calibrated scores share; null before any anchor
   * or while every real score was equal (the step's pooled std stands in).
   */
  private scoreScale(): number | null {
    const s = this.realScale;
    if (s.norm === 0) return null;
    const v = s.m2 / s.norm - (s.m1 / s.norm) ** 2;
    return v > 0 ? Math.sqrt(v) : null;
  }

  private async waitFor(jobs: Array<Promise<void>>): Promise<void> {
    const ms = this.cfg.anchorWaitMs;
    if (jobs.length === 0) return;
    if (ms === Number.POSITIVE_INFINITY) { await Promise.all(jobs); return; }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(jobs), new Promise<void>((r) => { timer = setTimeout(r, ms); })]);
    clearTimeout(timer);
  }

  private trueMean(predictions: number[]): Interval | null {
    const units: RectifierUnit[] = [];
    for (const u of this.ppi) {
      let sum = 0;
      let n = 0;
      u.wm.forEach((x, i) => {
        const y = u.real[i];
        if (x !== null && y !== null && y !== undefined) { sum += y - this.calibrate(x); n++; }
      });
      if (n > 0) units.push({ value: sum / n, weight: n / u.inclusion });
    }
    return ppiMeanInterval(predictions, units, this.cfg.ppiConfidence);
  }

  private makeLog(
    step: number, groups: number, launched: number, used: number, absorbed: number,
    adv: { scoredGroups: number; skippedGroups: number; excludedRollouts: number }, anchorWeight: number, trueMean: Interval | null,
    distrustedGroups: number,
  ): StepLog {
    const held = this.debiaser?.heldOutDiagnostic() ?? null;
    return {
      step,
      groups,
      anchorsLaunched: launched,
      anchorsUsed: used,
      anchorsAbsorbed: absorbed,
      inFlight: this.running.size,
      anchorFraction: groups ? launched / groups : 0,
      realizedAnchorFraction: this.groupsSeen ? this.anchorsLaunched / this.groupsSeen : 0,
      realExecutions: this.realExecutions,
      calibrated: this.debiaser?.calibrated ?? false,
      biasReduction: held ? held.reduction : null,
      anchorWeight,
      disagreement: this.weighter?.s2 ?? null,
      scoredGroups: adv.scoredGroups,
      skippedGroups: adv.skippedGroups,
      excludedRollouts: adv.excludedRollouts,
      flaggedContexts: this.guard?.flaggedContexts.length ?? 0,
      distrustedGroups,
      trueMean,
      trustedErrors: this.trusted.errors,
      failedAnchorStreak: this.trusted.failedStreak,
    };
  }

  /** The whole state as plain JSON-able data. Throws while anchors are in flight: call `drain()` first. */
  state(): CorrectorState {
    if (this.running.size > 0) throw new Error(`${this.running.size} anchors in flight; await drain() before saving`);
    return structuredClone({
      version: 1 as const,
      step: this.stepIndex,
      nextJobId: this.nextJobId,
      realExecutions: this.realExecutions,
      anchorsLaunched: this.anchorsLaunched,
      groupsSeen: this.groupsSeen,
      trustedErrors: this.trusted.errors,
      failedAnchorStreak: this.trusted.failedStreak,
      scheduler: this.scheduler.state(),
      debiaser: this.debiaser?.state(),
      weighter: this.weighter?.state(),
      guard: this.guard?.state(),
      finished: this.finished,
      ppi: this.ppi,
      realScale: this.realScale,
    });
  }

  /** Restores a state saved by `state()` (possibly via JSON); the run then continues identically. */
  restore(s: CorrectorState): void {
    if (s.version !== 1) throw new Error(`unknown corrector state version ${String(s.version)}`);
    if (this.running.size > 0) throw new Error('cannot restore while anchors are in flight');
    const c = structuredClone(s);
    this.stepIndex = c.step;
    this.nextJobId = c.nextJobId;
    this.realExecutions = c.realExecutions;
    this.anchorsLaunched = c.anchorsLaunched;
    this.groupsSeen = c.groupsSeen;
    this.trusted.restore(c.trustedErrors, c.failedAnchorStreak ?? 0);
    this.scheduler.restore(c.scheduler);
    // A part that is off ignores its saved state (a paired measurement may switch it off).
    if (this.debiaser) this.debiaser.restore(c.debiaser ?? new OnlineDebiaser(this.debiaser.cfg).state());
    if (this.weighter) this.weighter.restore(c.weighter ?? new InverseVarianceWeighter(this.weighter.cfg).state());
    if (this.guard) this.guard.restore(c.guard ?? new ExploitationGuard(this.guard.cfg).state());
    this.finished = c.finished;
    this.ppi = c.ppi;
    this.realScale = c.realScale ?? { m1: 0, m2: 0, norm: 0 };
  }
}
