// The closed-loop gate on WMRL's imagined groups (WmrlConfig.imaginedGate). Each anchor episode runs under the
// policy noise its imagined rollout drew, so the rank agreement of a group's imagined scores with its real ones
// measures what the imagined groups' ranking is worth on the robot; the update keeps that share of them. The
// Corrector's open-loop replays cannot measure this: a replay feeds the real episode's own actions, so it misses
// the error a reactive policy suffers when it reacts to imagined states.
import { Rng } from '../nn/index.js';
import type { Score } from './advantages.js';

export interface GateConfig {
  /** Anchor groups whose agreements are averaged (the latest ones). */
  window: number;
  /** Agreements measured before the gate drops any imagined group (until then it keeps them all). */
  minGroups: number;
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
 * A group's closed-loop agreement: rankAgreement of its imagined scores with the real ones of the rollouts the robot
 * completed (a null real score left out); NaN with fewer than 3 of them.
 */
export function groupAgreement(imagined: readonly number[], real: ReadonlyArray<number | null | undefined>): number {
  const xs: number[] = [], ys: number[] = [];
  imagined.forEach((x, k) => {
    const y = real[k];
    if (y !== null && y !== undefined) { xs.push(x); ys.push(y); }
  });
  return xs.length >= 3 ? rankAgreement(xs, ys) : NaN;
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
export class NoiseReplay extends Rng {
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

/** The gate of a run: its config checked, and the latest agreements. */
export class ImaginedGate {
  private latest: number[] = [];

  /** `anchors`: whether the run executes anchor groups at all (a run without a corrector does not). */
  constructor(readonly cfg: GateConfig, anchors: boolean) {
    const { window, minGroups } = cfg;
    if (!anchors) throw new Error('wmrl: imaginedGate weighs the imagined groups by the anchors\' agreement, and a run without a corrector runs no anchors');
    if (!(Number.isInteger(window) && window >= 1)) throw new Error(`wmrl: imaginedGate.window must be a whole number of anchor groups, at least 1; got ${window}`);
    if (!(Number.isInteger(minGroups) && minGroups >= 1 && minGroups <= window)) throw new Error(`wmrl: imaginedGate.minGroups must be a whole number from 1 to its window (${window}); got ${minGroups}`);
  }

  /** The latest agreements, oldest first (what a checkpoint keeps). */
  get agreements(): number[] {
    return [...this.latest];
  }

  /** Continues from the agreements a saved run measured. */
  restore(agreements: readonly number[]): void {
    this.latest = [...agreements];
  }

  /**
   * Records one anchor group's agreement: its rollouts' imagined scores against their episodes' real ones (null or
   * undefined: an incomplete episode, left out). Fewer than 3 complete episodes, or a side without a ranking, measure nothing.
   */
  observe(imagined: readonly number[], real: ReadonlyArray<Score | undefined>): void {
    const rho = groupAgreement(imagined, real);
    if (Number.isNaN(rho)) return;
    this.latest.push(rho);
    if (this.latest.length > this.cfg.window) this.latest.shift();
  }

  /**
   * The imagined groups (`source[b] === 'wm'`) this update drops and the share it keeps: the mean agreement clipped to
   * [0, 1] once `minGroups` are measured (1 until then). It drops groups rather than lowering their loss weight because
   * under Adam a weight turns the update's direction, not its size. Kept: the first ones, whose prompts come in no order.
   */
  select(source: ReadonlyArray<'real' | 'wm'>, rng: Rng): { weight: number; dropped: Set<number> } {
    const dropped = new Set<number>();
    if (this.latest.length < this.cfg.minGroups) return { weight: 1, dropped };
    const weight = Math.min(1, Math.max(0, this.latest.reduce((a, x) => a + x, 0) / this.latest.length));
    const wm = source.map((_, b) => b).filter((b) => source[b] === 'wm');
    const kept = new Set(keptShare(wm, weight, rng));
    for (const b of wm) if (!kept.has(b)) dropped.add(b);
    return { weight, dropped };
  }
}
