// Exploitation guard: detects contexts (prompts: a start state plus an instruction, a research
// task) where the policy has found something the world model over-rates, and stops the world model
// from steering the policy there. DESIGN.md §1, "detectors for policies that exploit the WM".
//
// One global monotone map (the Online Debiaser) cannot undo an error that is local to one context:
// a region of one prompt's actions that the world model scores far above reality. Policies find
// such regions, because the world model pays them. Anchor groups show it: in an exploited context
// the world model's ranking of the anchor group's rollouts disagrees with the real ranking. The
// guard keeps, per context, an EWMA of the *alignment* of each anchor group: the covariance of
// the group's standardized calibrated world-model scores with its real scores, i.e. how much real
// score the world model's preferred direction gains inside the group (negative: the world model
// pushes the policy towards what is really worse). Normalized by the typical within-group spread
// of real scores over all contexts, it is scale-free.
//
// A context whose alignment falls below `flagBelow` is flagged; it is released once the alignment
// rises above `releaseAbove` (hysteresis). While flagged, the context's world-model groups are
// left out of the gradient (its anchor groups still count), and the anchor scheduler favours its
// groups (`anchorBoost`), so the real budget goes where the world model is being exploited. The
// budget itself is unchanged.
import { scoredPairs, type Score } from './advantages.js';

export interface GuardConfig {
  /** Half-life of the per-context alignment EWMA, in that context's anchor groups. */
  halfLife: number;
  /** A context needs this many measured anchor groups before it can be flagged. */
  minGroups: number;
  /** Flag when the normalized alignment falls below this. */
  flagBelow: number;
  /** Release when it rises above this (≥ flagBelow). */
  releaseAbove: number;
  /** Selection weight multiplier of a flagged context's groups in the anchor scheduler. */
  anchorBoost: number;
  /**
   * Contexts remembered at most (prompts can be unbounded, e.g. one per research task): beyond it
   * the context measured longest ago is forgotten, flagged ones last.
   */
  maxContexts: number;
}

export const DEFAULT_GUARD_CONFIG: GuardConfig = {
  halfLife: 4,
  minGroups: 2,
  flagBelow: -0.1,
  releaseAbove: 0.15,
  anchorBoost: 8,
  maxContexts: 10_000,
};

interface ContextState {
  ewma: number;
  norm: number;
  groups: number;
  flagged: boolean;
  /** Times this context was flagged. */
  flags: number;
}

export interface GuardState {
  /** Least recently measured first (an array: object keys that look like integers would reorder). */
  contexts: Array<[string, ContextState]>;
  /** EWMA of the within-group std of real scores over all contexts (the normalizer). */
  spread: number;
  spreadNorm: number;
}

/**
 * Alignment of one anchor group: Σᵢ ((cᵢ − c̄)/sd(c)) · (yᵢ − ȳ) / n over rollouts with both scores,
 * with the real scores' population std. Null when fewer than 2 pairs or either side is constant.
 */
export function groupAlignment(calibrated: readonly Score[], real: readonly Score[], eps = 1e-12): { alignment: number; realStd: number } | null {
  const { a: c, b: y } = scoredPairs(calibrated, real);
  const n = y.length;
  if (n < 2) return null;
  const mc = c.reduce((s, v) => s + v, 0) / n;
  const my = y.reduce((s, v) => s + v, 0) / n;
  let vc = 0;
  let vy = 0;
  let cov = 0;
  for (let i = 0; i < n; i++) {
    vc += (c[i]! - mc) ** 2;
    vy += (y[i]! - my) ** 2;
    cov += (c[i]! - mc) * (y[i]! - my);
  }
  if (vc / n <= eps || vy / n <= eps) return null;
  return { alignment: cov / n / Math.sqrt(vc / n), realStd: Math.sqrt(vy / n) };
}

export class ExploitationGuard {
  private contexts = new Map<string, ContextState>();
  private spread = 0;
  private spreadNorm = 0;

  constructor(readonly cfg: GuardConfig = DEFAULT_GUARD_CONFIG) {
    if (!(cfg.halfLife > 0)) throw new Error(`guard halfLife ${cfg.halfLife} must be > 0`);
    if (!(cfg.releaseAbove >= cfg.flagBelow)) throw new Error('guard: releaseAbove must be ≥ flagBelow');
    if (!(cfg.anchorBoost >= 1)) throw new Error(`guard anchorBoost ${cfg.anchorBoost} must be ≥ 1`);
    if (!(Number.isInteger(cfg.maxContexts) && cfg.maxContexts >= 1)) throw new Error(`guard maxContexts ${cfg.maxContexts} must be a positive integer`);
  }

  /** Feeds one anchor group of `context`. Returns the group's normalized alignment, or null if degenerate. */
  update(context: string, calibrated: readonly Score[], real: readonly Score[]): number | null {
    const g = groupAlignment(calibrated, real);
    if (g === null) return null;
    // The normalizer: typical within-group spread of real scores, over all contexts (slow EWMA).
    const b = 1 - 0.5 ** (1 / 64);
    this.spread = (1 - b) * this.spread + b * g.realStd;
    this.spreadNorm = (1 - b) * this.spreadNorm + b;
    const x = g.alignment / (this.spread / this.spreadNorm);
    let s = this.contexts.get(context);
    if (s) {
      // Map order is insertion order: re-inserting keeps the most recently measured context last.
      this.contexts.delete(context);
    } else {
      s = { ewma: 0, norm: 0, groups: 0, flagged: false, flags: 0 };
      this.evict();
    }
    this.contexts.set(context, s);
    const a = 1 - 0.5 ** (1 / this.cfg.halfLife);
    s.ewma = (1 - a) * s.ewma + a * x;
    s.norm = (1 - a) * s.norm + a;
    s.groups++;
    const v = s.ewma / s.norm;
    if (!s.flagged && s.groups >= this.cfg.minGroups && v < this.cfg.flagBelow) {
      s.flagged = true;
      s.flags++;
    } else if (s.flagged && v > this.cfg.releaseAbove) {
      s.flagged = false;
    }
    return x;
  }

  /** Frees room for one more context: the least recently measured unflagged one goes, else the least recent. */
  private evict(): void {
    if (this.contexts.size < this.cfg.maxContexts) return;
    for (const [k, c] of this.contexts) {
      if (!c.flagged) {
        this.contexts.delete(k);
        return;
      }
    }
    this.contexts.delete(this.contexts.keys().next().value as string);
  }

  /** Contexts remembered now. */
  get size(): number {
    return this.contexts.size;
  }

  /** Whether the world model is currently distrusted in `context`. */
  flagged(context: string): boolean {
    return this.contexts.get(context)?.flagged ?? false;
  }

  /** The context's smoothed normalized alignment, or null before any measurement. */
  alignment(context: string): number | null {
    const s = this.contexts.get(context);
    return s && s.norm > 0 ? s.ewma / s.norm : null;
  }

  /** Contexts flagged now. */
  get flaggedContexts(): string[] {
    return [...this.contexts].filter(([, s]) => s.flagged).map(([k]) => k);
  }

  /** Times any context was flagged, over the run. */
  get totalFlags(): number {
    let n = 0;
    for (const s of this.contexts.values()) n += s.flags;
    return n;
  }

  state(): GuardState {
    return { contexts: [...this.contexts].map(([k, s]) => [k, { ...s }]), spread: this.spread, spreadNorm: this.spreadNorm };
  }

  restore(s: GuardState): void {
    this.contexts = new Map(s.contexts.map(([k, v]) => [k, { ...v }]));
    this.spread = s.spread;
    this.spreadNorm = s.spreadNorm;
  }
}
