// System identification in the sim itself: which profile (actuation delay and the physical scales of CONTEXT_PARAMS)
// makes the sim repeat what a robot recorded. Each candidate replays the robot's commands in short segments, each
// started from the state the robot reported there, and is scored by how far the sim's next states land from the
// recorded ones over the task's dynamics entries (not the pads or goals it holds, not what it computes from others,
// not the command tail). Per delay a cross-entropy search over the log scales, the two best delays searched on; the
// delay and scales of the lowest error win. What the observation does not show (an object's turn and spin) starts
// each segment at the keyframe.
import { layoutDim } from '../common/layout.js';
import { Rng } from '../nn/index.js';
import { MjEnv, loadTaskModel } from '../sim/env.js';
import { CONTEXT_PARAMS, NOMINAL, type HardwareProfile } from '../sim/profiles.js';
import { taskDef } from '../sim/registry.js';
import type { TaskDef } from '../sim/task.js';

/** One robot episode: `states` (T + 1) x D as the robot reported them, `actions` T x A the commands it was sent (-1..1). */
export interface RecordedEpisode {
  states: Float32Array;
  actions: Float32Array;
}

export interface ProfileSearch {
  /** The largest actuation delay considered, in control steps (each of 0 … maxDelay is searched). */
  maxDelay: number;
  /** Control steps per replayed segment (default 10). */
  segment?: number;
  /** Cross-entropy iterations (default 6), candidates per iteration (default 24) and elites (default 6). */
  iterations?: number;
  population?: number;
  elite?: number;
  /** Further iterations for the two delays of the lowest error after the first pass (default: iterations). */
  refine?: number;
  /** Each scale is searched within [1/spread, spread] of the nominal sim (default 3). */
  spread?: number;
  /** The robot's observation ends with its last this many commands (sim/env.ts EnvOptions.commandHistory). */
  commandHistory?: number;
  seed?: number;
}

export interface IdentifiedProfile {
  delay: number;
  /** Each CONTEXT_PARAMS scale, against the nominal sim. */
  scales: Record<(typeof CONTEXT_PARAMS)[number], number>;
  /** The lowest replay error found under each delay 0 … maxDelay (mean squared, in recorded standard deviations). */
  loss: number[];
  /** Candidate profiles replayed. */
  evaluations: number;
}

/** The replay error of one candidate: `delay` steps of actuation delay, `logScales` the log of each CONTEXT_PARAMS scale. */
export type ReplayError = (delay: number, logScales: readonly number[]) => Promise<number>;

/**
 * The replay error of candidate profiles, of delays up to `maxDelay`, on `episodes` of `task`: segments of `segment`
 * steps from recorded states maxDelay, maxDelay + segment, …, each fed the commands the robot was sent, the delay
 * applied by the replay (a command sent at t acts at t + delay; no segment needs one from before the episode).
 */
export async function replayError(task: string | TaskDef, episodes: readonly RecordedEpisode[], o: { maxDelay: number; segment?: number; commandHistory?: number }): Promise<ReplayError> {
  const def = typeof task === 'string' ? taskDef(task) : task;
  const K = o.segment ?? 10, history = o.commandHistory ?? 0, first = o.maxDelay;
  if (!(Number.isInteger(K) && K >= 1)) throw new Error(`identify: segment must be a positive whole number of steps, got ${K}`);
  if (!(Number.isInteger(first) && first >= 0)) throw new Error(`identify: maxDelay must be a whole number of steps, got ${first}`);
  // The layout, derived entries and a probe of the nominal sim: what is compared, and how far entries spread.
  const probe = new MjEnv(def, await loadTaskModel(def, NOMINAL), NOMINAL, { commandHistory: history });
  const bound = def.bind(probe.model);
  const nTask = layoutDim(bound.layout), D = layoutDim(probe.layout), A = probe.actionSpace.shape[0]!;
  bound.dispose?.();
  const skip = new Set<number>([...(probe.derived?.held ?? []), ...(probe.derived?.computed ?? []).map((c) => c.entry)]);
  probe.dispose();
  const dims = Array.from({ length: nTask }, (_, i) => i).filter((i) => !skip.has(i));
  const usable = episodes.map((e, i) => {
    const T = e.actions.length / A;
    if (!Number.isInteger(T)) throw new Error(`identify: episode ${i} has ${e.actions.length} action values, not a multiple of the ${A} actuators`);
    if (e.states.length !== (T + 1) * D) throw new Error(`identify: episode ${i} has ${e.states.length} state values, expected ${T + 1} x ${D} for its ${T} commands`);
    return { ...e, T };
  }).filter((e) => e.T >= first + K);
  if (usable.length === 0) throw new Error(`identify: no episode has the ${first + K} steps of one segment after the longest delay`);
  // Each entry's error in units of its spread over the recorded states (floored: an entry that never moved).
  const sd = dims.map((d) => {
    let m = 0, n = 0;
    for (const e of usable) for (let t = 0; t <= e.T; t++, n++) m += e.states[t * D + d]!;
    m /= n;
    let v = 0;
    for (const e of usable) for (let t = 0; t <= e.T; t++) v += (e.states[t * D + d]! - m) ** 2;
    return Math.max(Math.sqrt(v / n), 1e-3);
  });

  return async (delay, logScales) => {
    if (!(Number.isInteger(delay) && delay >= 0 && delay <= first)) throw new Error(`identify: delay ${delay} is outside 0 … ${first}`);
    const profile: HardwareProfile = { ...NOMINAL, name: 'candidate', description: 'a profile under identification', action_latency_steps: 0, obs_noise_std: 0, control_jitter_substeps: 0 };
    CONTEXT_PARAMS.forEach((k, i) => (profile[k] = Math.exp(logScales[i]!)));
    const env = new MjEnv(def, await loadTaskModel(def, profile), profile, { commandHistory: history });
    const task = def.bind(env.model);
    try {
      // Once, for the env's own state (its command tail); each segment then sets the sim's data alone.
      env.reset(0);
      const m = env.model.raw;
      const joints = env.layout.joints.map((j) => env.model.id('mjOBJ_JOINT', j.name));
      const qAdr = joints.map((j) => (m.jnt_qposadr as Int32Array)[j]!), vAdr = joints.map((j) => (m.jnt_dofadr as Int32Array)[j]!);
      const nj = joints.length;
      let err = 0, n = 0;
      for (const e of usable) {
        for (let t0 = first; t0 + K <= e.T; t0 += K) {
          const s0 = e.states.subarray(t0 * D, (t0 + 1) * D);
          const q = env.data.raw.qpos as Float64Array, qd = env.data.raw.qvel as Float64Array;
          env.data.reset(task.keyframe);
          for (let j = 0; j < nj; j++) {
            q[qAdr[j]!] = s0[j]!;
            qd[vAdr[j]!] = s0[nj + j]!;
          }
          task.pose?.(env.data, s0);
          env.data.forward();
          for (let t = t0; t < t0 + K; t++) {
            const sent = t - delay;
            const r = env.step(e.actions.subarray(sent * A, (sent + 1) * A));
            const rec = e.states.subarray((t + 1) * D, (t + 2) * D);
            for (let k = 0; k < dims.length; k++) err += ((r.obs.state[dims[k]!]! - rec[dims[k]!]!) / sd[k]!) ** 2;
            n += dims.length;
          }
        }
      }
      return err / n;
    } finally {
      task.dispose?.();
      env.dispose();
    }
  };
}

/** The profile under which the sim best repeats `episodes` (module comment): each delay's best scales, then the best delay. */
export async function identifyProfile(task: string | TaskDef, episodes: readonly RecordedEpisode[], s: ProfileSearch): Promise<IdentifiedProfile> {
  const iterations = s.iterations ?? 6, population = s.population ?? 24, elite = s.elite ?? 6, spread = s.spread ?? 3, refine = s.refine ?? iterations;
  if (!(Number.isInteger(s.maxDelay) && s.maxDelay >= 0)) throw new Error(`identify: maxDelay must be a whole number of steps, got ${s.maxDelay}`);
  if (!(Number.isInteger(refine) && refine >= 0)) throw new Error(`identify: refine must be a whole number of iterations, got ${refine}`);
  if (!(Number.isInteger(iterations) && iterations >= 1 && Number.isInteger(population) && population >= 2 && Number.isInteger(elite) && elite >= 1 && elite <= population)) {
    throw new Error(`identify: need iterations ≥ 1, population ≥ 2 and 1 ≤ elite ≤ population (got ${iterations}, ${population}, ${elite})`);
  }
  if (!(Number.isFinite(spread) && spread > 1)) throw new Error(`identify: spread must be a number > 1, got ${spread}`);
  const error = await replayError(task, episodes, s);
  const hi = Math.log(spread), lo = -hi, c = CONTEXT_PARAMS.length;
  const clamp = (v: number) => Math.min(hi, Math.max(lo, v));
  const rng = new Rng(s.seed ?? 0);
  let evaluations = 0;
  // Each delay's search: its best candidate and the distribution it samples from.
  const searches = Array.from({ length: s.maxDelay + 1 }, () => ({ best: { x: new Array<number>(c).fill(0), loss: Infinity }, mean: new Array<number>(c).fill(0), sd: new Array<number>(c).fill((hi - lo) / 4) }));
  const run = async (d: number, iters: number) => {
    const q = searches[d]!;
    if (q.best.loss === Infinity) {
      q.best = { x: q.best.x, loss: await error(d, q.best.x) };
      evaluations++;
    }
    for (let it = 0; it < iters; it++) {
      const scored = [q.best];
      for (let k = 0; k < population; k++) {
        const x = q.mean.map((m, j) => clamp(m + q.sd[j]! * rng.normal()));
        scored.push({ x, loss: await error(d, x) });
        evaluations++;
      }
      scored.sort((a, b) => a.loss - b.loss);
      q.best = scored[0]!;
      const top = scored.slice(0, elite);
      for (let j = 0; j < c; j++) {
        const m = top.reduce((a, p) => a + p.x[j]!, 0) / top.length;
        q.mean[j] = m;
        // A floor keeps the search from collapsing before the last iteration.
        q.sd[j] = Math.max(Math.sqrt(top.reduce((a, p) => a + (p.x[j]! - m) ** 2, 0) / top.length), (hi - lo) / 100);
      }
    }
  };
  for (let d = 0; d <= s.maxDelay; d++) await run(d, iterations);
  // The two delays that explain the episodes best search on: mass, damping and gain trade off, and a search of a
  // few iterations can stop short of its delay's minimum (and so of the right delay).
  const order = searches.map((q, d) => [q.best.loss, d] as const).sort((a, b) => a[0] - b[0]);
  for (const [, d] of order.slice(0, 2)) await run(d, refine);
  const found = searches.map((q) => q.best);
  const loss = found.map((f) => f.loss);
  const delay = loss.indexOf(Math.min(...loss));
  const x = found[delay]!.x;
  const scales = Object.fromEntries(CONTEXT_PARAMS.map((k, i) => [k, Math.exp(x[i]!)])) as IdentifiedProfile['scales'];
  return { delay, scales, loss, evaluations };
}
