// The keep rule (wmrl/keep-best.ts DEFAULT_KEEP_BEST) derived again for tests that read a run's evaluations: after
// each evaluation, the latest is kept unless the best so far (the latest of equals) measured higher by more than
// `margin` binomial standard errors of the difference; then the best is.
export function keptUpdates(points: ReadonlyArray<{ update: number; success: number }>, episodes: number, margin = 1): number[] {
  const se = (p: number) => Math.sqrt((p * (1 - p)) / episodes);
  let best = points[0]!;
  return points.map((p) => {
    if (p.success >= best.success) best = p;
    return best.success - p.success > margin * Math.sqrt(se(best.success) ** 2 + se(p.success) ** 2) ? best.update : p.update;
  });
}
