// Statistics shared by tests and benchmarks.

/** Spearman's rank correlation of two equally long samples (ties broken by position); 0 where either is constant. */
export function spearman(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const rank = (x: ArrayLike<number>) => {
    const r = new Float64Array(x.length);
    Array.from({ length: x.length }, (_, i) => i).sort((p, q) => x[p]! - x[q]!).forEach((k, i) => (r[k] = i));
    return r;
  };
  const [ra, rb] = [rank(a), rank(b)];
  const m = (a.length - 1) / 2;
  let c = 0, va = 0, vb = 0;
  for (let i = 0; i < a.length; i++) {
    c += (ra[i]! - m) * (rb[i]! - m);
    va += (ra[i]! - m) ** 2;
    vb += (rb[i]! - m) ** 2;
  }
  return va > 0 && vb > 0 ? c / Math.sqrt(va * vb) : 0;
}
