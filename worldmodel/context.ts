// System identification of a context-conditioned world model: the physical context (mass, friction,
// damping, actuator gain, as log-scales) under which the model best explains a robot's episodes. The model
// was fitted on sim data under many contexts (domain randomization); the robot's is found by the
// cross-entropy method on the model's one-step likelihood of the robot's episodes, as the delay is
// (delay.ts), and imagination then runs under it (EnsembleModel.setContext).
import { applyDerived } from '../common/derived.js';
import { Rng } from '../nn/index.js';
import { TransitionBuffer, checkRows, episodeHistory, repeatContext } from './dataset.js';
import { delayActions, identifyDelay, type DelayEpisode } from './delay.js';
import type { EnsembleModel } from './ensemble.js';

export interface ContextSearch {
  /** Actuation delay the episodes' actions are shifted by before scoring (default 0). */
  delay?: number;
  /** Cross-entropy iterations (default 6) and candidates per iteration (default 24). */
  iterations?: number;
  population?: number;
  /** Candidates kept to refit the search distribution (default 6). */
  elite?: number;
  /**
   * What the context minimizes:
   * - 'rollout' (default): the squared error of open-loop predictions `segment` steps long from every
   *   segment start of the episodes, fed the recorded actions, in the model's normalized observation units.
   *   A wrong mass or gain compounds over steps, sensor noise does not;
   * - 'mse': the one-step squared error in normalized delta units;
   * - 'nll': the one-step Gaussian NLL.
   * One-step errors on a noisy robot are mostly its sensor noise, which no context explains, so they barely change
   * with the context.
   */
  objective?: 'rollout' | 'mse' | 'nll';
  /** Steps per open-loop segment of the 'rollout' objective (default 10). */
  segment?: number;
  /**
   * Weight of a pull toward the context the search starts from (default 0: none): the objective gains
   * prior × its value at the start × the mean squared distance from the start in half-ranges, so an entry the
   * episodes barely inform (friction, where the robot seldom touches anything) stays near the start instead of
   * drifting wherever the search wandered.
   */
  prior?: number;
  seed?: number;
}

export interface ContextEstimate {
  /** The identified context (the model's context units; c values). */
  context: Float32Array;
  /** The objective on the episodes under it (with the prior's pull), the fit alone there, and the fit at the start. */
  loss: number;
  fit: number;
  startLoss: number;
  /** Candidates scored. */
  evaluations: number;
}

/**
 * The context under which `model` best explains `episodes` (lowest one-step error), searched within the range
 * the model was fitted on (each entry's training mean ± √3 standard deviations: the support of a uniform
 * draw with that spread), starting from the model's current context.
 */
export async function identifyContext(model: EnsembleModel, episodes: readonly DelayEpisode[], opts: ContextSearch = {}): Promise<ContextEstimate> {
  const c = model.contextDim;
  if (c === 0) throw new Error('identifyContext: the model is not context-conditioned (no contextNames)');
  const usable = episodes.filter((e) => e.rewards.length > 0);
  if (usable.length === 0) throw new Error('identifyContext: no episode with a step');
  const delay = opts.delay ?? 0;
  const iterations = opts.iterations ?? 6, population = opts.population ?? 24, elite = opts.elite ?? 6;
  const prior = opts.prior ?? 0;
  if (!(Number.isFinite(prior) && prior >= 0)) throw new Error(`identifyContext: prior must be a finite number ≥ 0, got ${prior}`);
  if (!(Number.isInteger(iterations) && iterations >= 1 && Number.isInteger(population) && population >= 2 && Number.isInteger(elite) && elite >= 1 && elite <= population)) {
    throw new Error(`identifyContext: need iterations ≥ 1, population ≥ 2 and 1 ≤ elite ≤ population (got ${iterations}, ${population}, ${elite})`);
  }
  const buf = new TransitionBuffer(model.dObs, model.dAct, model.actionHistory);
  for (const e of usable) {
    checkRows('identifyContext: episode actions', e.actions, model.dAct, e.rewards.length);
    buf.addEpisode({ states: e.states, rewards: e.rewards, success: e.success, actions: delayActions(e.actions, 1, model.dAct, delay) });
  }
  const data = buf.transitions();
  const n = data.reward.length;
  const objective = opts.objective ?? 'rollout';
  const segments = objective === 'rollout' ? openLoopSegments(model, usable, delay, opts.segment ?? 10) : null;
  // Scored on the dynamics entries only (EnsembleModel.dynamicsDims): not the reported command tail.
  if (model.dynamicsDims.length === 0) throw new Error('identifyContext: the model predicts no dynamics entry (every entry is constant or a command)');
  const nllAt = async (ctx: Float32Array) => {
    if (segments) return segments.error(ctx);
    const ev = await model.evaluate({ ...data, context: repeatContext(ctx, n) });
    return objective === 'nll' ? ev.dynamics.nll : ev.dynamics.mseNorm;
  };

  // The fitted range of each context entry, from the input normalization (the last c input columns).
  const nz = model.normalizer;
  const off = model.dIn - c;
  const lo = Float32Array.from({ length: c }, (_, j) => nz.inMean[off + j]! - Math.sqrt(3) * nz.inStd[off + j]!);
  const hi = Float32Array.from({ length: c }, (_, j) => nz.inMean[off + j]! + Math.sqrt(3) * nz.inStd[off + j]!);
  const clamp = (v: number, j: number) => Math.min(hi[j]!, Math.max(lo[j]!, v));

  const start = Float32Array.from(model.context, (v, j) => clamp(v, j));
  const startNll = await nllAt(start);
  const half = Float64Array.from({ length: c }, (_, j) => Math.max((hi[j]! - lo[j]!) / 2, 1e-12));
  const pull = (ctx: Float32Array) => (prior === 0 ? 0 : (prior * startNll * ctx.reduce((a, v, j) => a + ((v - start[j]!) / half[j]!) ** 2, 0)) / c);
  const score = async (ctx: Float32Array) => {
    const fit = await nllAt(ctx);
    return { ctx, fit, nll: fit + pull(ctx) };
  };
  let best: { ctx: Float32Array; fit: number; nll: number } = { ctx: start, fit: startNll, nll: startNll };
  const mean = Float64Array.from(start);
  const sd = Float64Array.from({ length: c }, (_, j) => (hi[j]! - lo[j]!) / 4);
  const rng = new Rng(opts.seed ?? 0);
  let evaluations = 1;
  for (let it = 0; it < iterations; it++) {
    const scored: Array<{ ctx: Float32Array; fit: number; nll: number }> = [best];
    for (let k = 0; k < population; k++) {
      const ctx = Float32Array.from({ length: c }, (_, j) => clamp(mean[j]! + sd[j]! * rng.normal(), j));
      scored.push(await score(ctx));
      evaluations++;
    }
    scored.sort((a, b) => a.nll - b.nll);
    best = scored[0]!;
    const top = scored.slice(0, elite);
    for (let j = 0; j < c; j++) {
      const m = top.reduce((a, s) => a + s.ctx[j]!, 0) / top.length;
      const v = top.reduce((a, s) => a + (s.ctx[j]! - m) ** 2, 0) / top.length;
      mean[j] = m;
      // A floor keeps the search from collapsing before the last iteration.
      sd[j] = Math.max(Math.sqrt(v), (hi[j]! - lo[j]!) / 100);
    }
  }
  return { context: best.ctx, loss: best.nll, fit: best.fit, startLoss: startNll, evaluations };
}

/**
 * Every `k`-step segment of the episodes (starts 0, k, 2k, … with k steps left), for the open-loop error
 * under a context: all segments stepped together through the members' mean, fed the recorded actions
 * (delayed by `delay`) and the recorded action history, each predicted step completed as the model env completes
 * it (the command tail the robot reported, the task's identities restored); the error is over the dynamics entries.
 */
function openLoopSegments(model: EnsembleModel, episodes: readonly DelayEpisode[], delay: number, k: number) {
  if (!(Number.isInteger(k) && k >= 1)) throw new Error(`identifyContext: segment must be a positive integer, got ${k}`);
  const { dObs: D, dAct: A, actionHistory: h } = model;
  const starts: Array<{ e: number; t0: number }> = [];
  const applied = episodes.map((e) => delayActions(e.actions, 1, A, delay));
  const hist = applied.map((a) => (h > 0 ? episodeHistory(a, A, h) : null));
  episodes.forEach((e, i) => {
    for (let t0 = 0; t0 + k <= e.rewards.length; t0 += k) starts.push({ e: i, t0 });
  });
  if (starts.length === 0) throw new Error(`identifyContext: no episode has ${k} steps for an open-loop segment`);
  const N = starts.length;
  const scale = model.normalizer.inStd.subarray(0, D);
  const E = model.members, dims = model.dynamicsDims, tail = D - model.commandHistory * A, derived = model.derived;
  return {
    async error(ctx: Float32Array): Promise<number> {
      let obs = new Float32Array(N * D);
      starts.forEach((s, i) => obs.set(episodes[s.e]!.states.subarray(s.t0 * D, (s.t0 + 1) * D), i * D));
      const context = repeatContext(ctx, N);
      let err = 0;
      for (let j = 0; j < k; j++) {
        const action = new Float32Array(N * A);
        const history = h > 0 ? new Float32Array(N * h * A) : undefined;
        starts.forEach((s, i) => {
          const t = s.t0 + j;
          action.set(applied[s.e]!.subarray(t * A, (t + 1) * A), i * A);
          history?.set(hist[s.e]!.subarray(t * h * A, (t + 1) * h * A), i * h * A);
        });
        const p = await model.predict(obs, action, history, context);
        const next = new Float32Array(N * D);
        for (let e = 0; e < E; e++) for (let x = 0; x < N * D; x++) next[x]! += p.nextObsMean[e * N * D + x]! / E;
        starts.forEach((s, i) => {
          const real = episodes[s.e]!.states.subarray((s.t0 + j + 1) * D, (s.t0 + j + 2) * D);
          // The commands sent are what the robot reported (its next observation's tail), not a prediction.
          next.set(real.subarray(tail), i * D + tail);
          if (derived) next.set(applyDerived(derived, next.subarray(i * D, (i + 1) * D), obs.subarray(i * D, (i + 1) * D)), i * D);
          for (const d of dims) err += ((next[i * D + d]! - real[d]!) / scale[d]!) ** 2;
        });
        obs = next;
      }
      return err / (N * k * dims.length);
    },
  };
}

export interface SystemEstimate {
  /** The actuation delay (control steps). */
  delay: number;
  /** The context (a model without one: empty). */
  context: Float32Array;
}

/**
 * What a robot's episodes say about it, for a model pretrained on the sim: its actuation delay (identifyDelay,
 * when `maxDelay` is a number; else `delay` is kept as given) and, for a context-conditioned model with
 * `context` true, its context — delay first, then the context under that delay, then the delay again under that
 * context. Sets the model's context; returns both.
 */
export async function identifySystem(model: EnsembleModel, episodes: readonly DelayEpisode[], o: { maxDelay: number | null; delay?: number; context: boolean; seed?: number }): Promise<SystemEstimate> {
  let delay = o.maxDelay === null ? o.delay ?? 0 : (await identifyDelay(model, episodes, o.maxDelay)).delay;
  if (o.context && model.contextDim > 0) {
    model.setContext((await identifyContext(model, episodes, { delay, seed: o.seed })).context);
    if (o.maxDelay !== null) delay = (await identifyDelay(model, episodes, o.maxDelay)).delay;
  }
  return { delay, context: model.context };
}
