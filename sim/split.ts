// Evaluation splits by (instruction, target region): which seeded episodes of a task may feed behaviour
// cloning and which are held out. An episode's combination is its goal (the instruction's colour) and the
// angular sector around the arm's base in which that goal lies (`regions` equal sectors, sector 0 starting
// at angle −π). The default holds out one sector per colour, a different one for each, so every colour and
// every region appear in training but those pairings never do — what a policy must compose to solve them.
//
// - train: seeds of the train range whose combination is not held out;
// - heldOutStates: seeds of the evaluation range (disjoint from training) whose combination training has;
// - heldOutCombinations: seeds of the evaluation range whose combination is held out.
// Combinations `withheld` (another evaluation's held-out ones) are neither trained on nor evaluated, so one training
// set can serve evaluations whose held-out combinations differ.
import { loadTaskModel, MjEnv, resolveProfile } from './env.js';
import { taskDef } from './registry.js';

export interface Combination {
  /** Index of the instruction (the goal's colour). */
  goal: number;
  region: number;
}

export interface SplitOptions {
  /** Angular sectors (default 4). */
  regions?: number;
  /** Held-out combinations (default: goal k in region k, for every goal). */
  heldOut?: readonly Combination[];
  /** Combinations neither trained on nor evaluated (default none): another evaluation's held-out ones. */
  withheld?: readonly Combination[];
  /** First seed and how many seeds to scan for training. */
  train: { seed0: number; scan: number };
  /** First evaluation seed (after the train range) and how many of each kind to collect. */
  eval: { seed0: number; episodes: number };
  /** Give up after scanning this many evaluation seeds (default 50 × episodes). */
  maxScan?: number;
}

export interface EvaluationSplit {
  task: string;
  regions: number;
  heldOut: Combination[];
  instructions: string[];
  train: number[];
  heldOutStates: number[];
  heldOutCombinations: number[];
}

/** The sector (0 … regions − 1) of a point's angle around the origin. */
export function regionOf(x: number, y: number, regions: number): number {
  const a = Math.atan2(y, x) + Math.PI; // [0, 2π]
  return Math.min(regions - 1, Math.floor((a / (2 * Math.PI)) * regions));
}

/** Splits the seeds of `task` (a built-in task whose goal has a position: reach, push, pick). */
export async function combinationSplit(task: string, o: SplitOptions): Promise<EvaluationSplit> {
  const regions = o.regions ?? 4;
  if (!(Number.isInteger(regions) && regions >= 1)) throw new Error(`split: regions must be a positive integer, got ${regions}`);
  if (o.eval.seed0 < o.train.seed0 + o.train.scan) throw new Error(`split: evaluation seeds start at ${o.eval.seed0}, inside the train range [${o.train.seed0}, ${o.train.seed0 + o.train.scan})`);
  const def = taskDef(task);
  const profile = resolveProfile('nominal');
  const env = new MjEnv(def, await loadTaskModel(def, profile), profile);
  try {
    const instructions = env.observationSpace.instructions;
    const heldOut = [...(o.heldOut ?? instructions.map((_, k) => ({ goal: k, region: k % regions })))];
    const withheld = [...(o.withheld ?? [])];
    for (const [what, list] of [['held-out', heldOut], ['withheld', withheld]] as const) {
      for (const c of list) {
        if (!(c.goal >= 0 && c.goal < instructions.length && c.region >= 0 && c.region < regions)) throw new Error(`split: ${what} combination (goal ${c.goal}, region ${c.region}) is not one of ${instructions.length} goals x ${regions} regions`);
      }
    }
    const combination = (seed: number): Combination => {
      env.reset(seed);
      const g = env.goalOf();
      if (!g.position) throw new Error(`split: task '${task}' does not say where its goal lies`);
      return { goal: g.goal, region: regionOf(g.position[0], g.position[1], regions) };
    };
    const among = (list: readonly Combination[]) => (c: Combination) => list.some((h) => h.goal === c.goal && h.region === c.region);
    const isHeldOut = among(heldOut), isWithheld = among(withheld);
    const both = heldOut.find(isWithheld);
    if (both) throw new Error(`split: combination (goal ${both.goal}, region ${both.region}) is both held out and withheld`);
    const train: number[] = [];
    for (let s = o.train.seed0; s < o.train.seed0 + o.train.scan; s++) {
      const c = combination(s);
      if (!isHeldOut(c) && !isWithheld(c)) train.push(s);
    }
    const heldOutStates: number[] = [], heldOutCombinations: number[] = [];
    const n = o.eval.episodes, limit = o.maxScan ?? 50 * n;
    for (let s = o.eval.seed0; s < o.eval.seed0 + limit && (heldOutStates.length < n || heldOutCombinations.length < n); s++) {
      const c = combination(s);
      if (isWithheld(c)) continue;
      const list = isHeldOut(c) ? heldOutCombinations : heldOutStates;
      if (list.length < n) list.push(s);
    }
    if (heldOutStates.length < n || heldOutCombinations.length < n) {
      throw new Error(`split: ${limit} evaluation seeds gave ${heldOutStates.length} held-out states and ${heldOutCombinations.length} held-out combinations; ${n} of each were asked for`);
    }
    return { task, regions, heldOut, instructions: [...instructions], train, heldOutStates, heldOutCombinations };
  } finally {
    env.dispose();
  }
}
