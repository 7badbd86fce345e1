// The identities an observation vector keeps: entries that never change within an episode (a target's position,
// the instruction's one-hot) and entries that are functions of others (a tip position from the joint angles by
// forward kinematics, a goal-minus-cube offset). A task declares them once, by entry index, beside its layout;
// a world model predicting every entry on its own breaks them step by step (tip and joints drift apart), so
// imagination restores them after each predicted step (worldmodel/model-env.ts) and the states a policy sees
// in imagination stay ones the robot can be in.

/** An expression over an observation's entries (by index). */
export type DerivedExpr =
  | { entry: number }
  | { const: number }
  | { add: DerivedExpr[] }
  | { mul: DerivedExpr[] }
  | { neg: DerivedExpr }
  | { sin: DerivedExpr }
  | { cos: DerivedExpr };

export interface DerivedEntries {
  /** Entries constant within an episode: each step keeps the previous observation's value. */
  held: number[];
  /**
   * Entries computed from the new observation, in order: each expression reads the entries as predicted,
   * with `held` restored and the entries computed before it in this list already replaced.
   */
  computed: Array<{ entry: number; expr: DerivedExpr }>;
}

/** Checks `d` for an observation of `dObs` entries whose entries from `firstFree` on are set elsewhere (a command tail); throws naming the fault. */
export function validateDerived(d: DerivedEntries, dObs: number, firstFree = dObs): void {
  const where = (i: unknown) => typeof i === 'number' && Number.isInteger(i) && i >= 0 && i < dObs;
  const claimed = new Set<number>();
  const claim = (i: number, what: string) => {
    if (!where(i)) throw new Error(`derived entries: ${what} entry ${String(i)} is not an index of the ${dObs}-entry observation`);
    if (i >= firstFree) throw new Error(`derived entries: ${what} entry ${i} lies in the command tail (entries ${firstFree}..${dObs - 1}), which the model env sets itself`);
    if (claimed.has(i)) throw new Error(`derived entries: entry ${i} is declared twice`);
    claimed.add(i);
  };
  if (!Array.isArray(d.held) || !Array.isArray(d.computed)) throw new Error('derived entries: need `held` and `computed` lists');
  d.held.forEach((i) => claim(i, 'held'));
  const check = (e: DerivedExpr, target: number): void => {
    if (e === null || typeof e !== 'object') throw new Error(`derived entries: the expression of entry ${target} has a node that is not an object`);
    const keys = Object.keys(e);
    if (keys.length !== 1) throw new Error(`derived entries: the expression of entry ${target} has a node with keys [${keys.join(', ')}], expected one of entry, const, add, mul, neg, sin, cos`);
    if ('entry' in e) {
      if (!where(e.entry)) throw new Error(`derived entries: the expression of entry ${target} reads entry ${String(e.entry)}, not an index of the ${dObs}-entry observation`);
    } else if ('const' in e) {
      if (!Number.isFinite(e.const)) throw new Error(`derived entries: the expression of entry ${target} has a non-finite constant`);
    } else if ('add' in e || 'mul' in e) {
      const xs = 'add' in e ? e.add : e.mul;
      if (!Array.isArray(xs) || xs.length === 0) throw new Error(`derived entries: the expression of entry ${target} has an empty ${'add' in e ? 'add' : 'mul'}`);
      xs.forEach((x) => check(x, target));
    } else if ('neg' in e) check(e.neg, target);
    else if ('sin' in e) check(e.sin, target);
    else if ('cos' in e) check(e.cos, target);
    else throw new Error(`derived entries: the expression of entry ${target} has an unknown node '${keys[0]}'`);
  };
  d.computed.forEach(({ entry, expr }) => {
    claim(entry, 'computed');
    check(expr, entry);
  });
}

/** The value of `e` on one observation. */
export function evalDerived(e: DerivedExpr, obs: ArrayLike<number>): number {
  if ('entry' in e) return obs[e.entry]!;
  if ('const' in e) return e.const;
  if ('add' in e) return e.add.reduce((s, x) => s + evalDerived(x, obs), 0);
  if ('mul' in e) return e.mul.reduce((s, x) => s * evalDerived(x, obs), 1);
  if ('neg' in e) return -evalDerived(e.neg, obs);
  if ('sin' in e) return Math.sin(evalDerived(e.sin, obs));
  return Math.cos(evalDerived(e.cos, obs));
}

/** `next` (one observation) with the identities restored from it and `prev`, the observation before it; a copy. */
export function applyDerived(d: DerivedEntries, next: ArrayLike<number>, prev: ArrayLike<number>): Float32Array {
  const out = Float32Array.from(next);
  for (const i of d.held) out[i] = prev[i]!;
  for (const { entry, expr } of d.computed) out[entry] = evalDerived(expr, out);
  return out;
}

/** Builders, so a task writes `sub(e(6), e(4))`. */
export const e = (entry: number): DerivedExpr => ({ entry });
export const c = (value: number): DerivedExpr => ({ const: value });
export const sum = (...xs: DerivedExpr[]): DerivedExpr => ({ add: xs });
export const prod = (...xs: DerivedExpr[]): DerivedExpr => ({ mul: xs });
export const sub = (a: DerivedExpr, b: DerivedExpr): DerivedExpr => ({ add: [a, { neg: b }] });
export const sinOf = (x: DerivedExpr): DerivedExpr => ({ sin: x });
export const cosOf = (x: DerivedExpr): DerivedExpr => ({ cos: x });
/** The value a one-hot selects: Σ_i entry(oneHot + i) · entry(values + stride·i), i < n (a goal's x among the targets' x). */
export const pick = (oneHot: number, values: number, n: number, stride = 1): DerivedExpr =>
  sum(...Array.from({ length: n }, (_, i) => prod(e(oneHot + i), e(values + stride * i))));
