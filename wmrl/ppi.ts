// Prediction-powered inference: a confidence interval for the policy's true mean score from many
// cheap world-model predictions plus a few anchors that measure the predictions' error.
// mean = mean(predictions) + weighted mean(real − prediction over anchors); the anchors' weights
// are 1/inclusion-probability, so active (uneven) anchor selection stays unbiased.

/** One anchor unit (a group): its mean rectifier real − prediction and its weight. */
export interface RectifierUnit {
  /** Mean of real − prediction over the unit's scored pairs. */
  value: number;
  /** Pairs in the unit divided by its inclusion probability. */
  weight: number;
}

export interface Interval {
  mean: number;
  lo: number;
  hi: number;
  halfWidth: number;
}

/** Inverse standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9). */
export function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) throw new Error(`normalQuantile: p=${p} not in (0, 1)`);
  const a = [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2, -3.066479806614716e1, 2.506628277459239];
  const b = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
  const c = [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
  const lo = 0.02425;
  if (p < lo) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) / ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1);
  }
  if (p > 1 - lo) return -normalQuantile(1 - p);
  const q = p - 0.5;
  const r = q * q;
  return ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) /
    (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1);
}

function weightedMeanVar(units: readonly RectifierUnit[]): { mean: number; varOfMean: number } {
  let sw = 0;
  let sw2 = 0;
  let swx = 0;
  for (const u of units) { sw += u.weight; sw2 += u.weight ** 2; swx += u.weight * u.value; }
  const mean = swx / sw;
  let ss = 0;
  for (const u of units) ss += u.weight * (u.value - mean) ** 2;
  const nEff = (sw * sw) / sw2;
  // Bessel-style correction on the effective sample size.
  const v = nEff > 1 ? (ss / sw) * (nEff / (nEff - 1)) : Number.POSITIVE_INFINITY;
  return { mean, varOfMean: v / nEff };
}

/**
 * Prediction-powered interval for the true mean score. `predictions` (length N): the calibrated
 * world-model score of every scored rollout of the policy; `anchors` (length n ≥ 2): one unit
 * per anchor group. Returns null with fewer than 2 anchor units or no predictions.
 */
export function ppiMeanInterval(predictions: readonly number[], anchors: readonly RectifierUnit[], confidence = 0.95): Interval | null {
  const N = predictions.length;
  if (N === 0 || anchors.length < 2) return null;
  const pm = predictions.reduce((s, x) => s + x, 0) / N;
  const pv = N > 1 ? predictions.reduce((s, x) => s + (x - pm) ** 2, 0) / (N - 1) : 0;
  const rect = weightedMeanVar(anchors);
  const mean = pm + rect.mean;
  const halfWidth = normalQuantile(0.5 + confidence / 2) * Math.sqrt(pv / N + rect.varOfMean);
  return { mean, lo: mean - halfWidth, hi: mean + halfWidth, halfWidth };
}

/** The classical interval from the anchors' real scores alone (units: mean real score, weight), for comparison. */
export function classicalMeanInterval(units: readonly RectifierUnit[], confidence = 0.95): Interval | null {
  if (units.length < 2) return null;
  const { mean, varOfMean } = weightedMeanVar(units);
  const halfWidth = normalQuantile(0.5 + confidence / 2) * Math.sqrt(varOfMean);
  return { mean, lo: mean - halfWidth, hi: mean + halfWidth, halfWidth };
}
