// Multi-step fitting of the ensemble's dynamics: each member rolls its own mean prediction K steps open loop along
// recorded action sequences, and the loss adds the rolled-out state's error against the recorded one at every step
// to the one-step Gaussian NLL. A one-step fit judges every prediction from a true state; imagination feeds the model
// its own predictions, so small one-step lags compound into states the data never had (push's tip passing through
// the cube). Backpropagating through the rollout teaches the model the states it drifts to.
import * as nn from '../nn/index.js';
import { contextLength, historyLength, validateTransitions, type Transitions } from './dataset.js';
import type { EnsembleModel } from './ensemble.js';
import { withDerived } from './model-env.js';

export interface RolloutFitOptions {
  /** Rollout length K, steps (default 16). */
  steps?: number;
  /** Passes over the windows (default 4). */
  epochs?: number;
  /** Windows per member per step (default 64). */
  batchSize?: number;
  /** Windows each member draws per pass from its resample (default: as many as rows): caps a refit's cost on a large set. */
  windowsPerEpoch?: number;
  /** Adam's learning rate (default 3e-4). */
  lr?: number;
  /**
   * Weight of the rollout error against the one-step NLL (default 50): large, because at a weight near 1 the one-step
   * NLL dominates the gradient and the rollout error hardly moves.
   */
  rolloutWeight?: number;
  /**
   * Each member trains on its own bootstrap resample of the episodes (runBootstrap), drawn once, as fit() resamples
   * rows (default false: every member on every window). Off by default because fewer episodes per member raise each
   * member's open-loop error; the members still differ by their one-step fit's resamples.
   */
  bootstrap?: boolean;
  /** Seed of the resamples and the windows' order (default 0). */
  seed?: number;
  onEpoch?: (r: RolloutEpoch) => void;
}

export interface RolloutEpoch {
  epoch: number;
  /** The training objective, mean over the epoch's steps. */
  loss: number;
  /** The rolled-out state's squared error over the dynamics entries, in units of each entry's spread in the data, mean over each window's steps. */
  rolloutError: number;
}

/** Per row of `data`: 1 where it chains into the next (its nextObs the next row's obs, in one context, the next row's past actions this row's action and past ones). */
function chainsOf(data: Transitions, what: string): Uint8Array {
  const n = validateTransitions(data, what);
  const { dObs, dAct } = data, c = contextLength(data), hw = historyLength(data) * dAct;
  const chains = new Uint8Array(n);
  for (let i = 0; i + 1 < n; i++) {
    let ok = 1;
    for (let j = 0; j < dObs && ok; j++) if (data.nextObs[i * dObs + j] !== data.obs[(i + 1) * dObs + j]) ok = 0;
    for (let j = 0; j < c && ok; j++) if (data.context![i * c + j] !== data.context![(i + 1) * c + j]) ok = 0;
    // The next row's past actions: this row's action, then its own past ones but the oldest.
    for (let j = 0; j < hw && ok; j++) if (data.history![(i + 1) * hw + j] !== (j < dAct ? data.action[i * dAct + j] : data.history![i * hw + j - dAct])) ok = 0;
    chains[i] = ok;
  }
  return chains;
}

/**
 * Per row of `data`, the length of its window: the row and the rows after it that chain on (each row's nextObs the
 * next row's obs, in one context, its past actions this row's action and past ones), at most `steps`. A window never
 * crosses an episode's end: the last row of an episode has length 1, the one before it 2, and so on.
 */
export function rolloutLengths(data: Transitions, steps: number): Int32Array {
  return lengthsOf(chainsOf(data, 'rolloutLengths'), steps);
}

function lengthsOf(chains: Uint8Array, steps: number): Int32Array {
  const n = chains.length, len = new Int32Array(n);
  for (let i = n - 1; i >= 0; i--) len[i] = Math.min(steps, i + 1 < n && chains[i] ? len[i + 1]! + 1 : 1);
  return len;
}

/**
 * Per member, a bootstrap resample of `data` by run (the rows that chain one into the next: an episode): runs drawn
 * with replacement, each bringing all its rows, until there are as many rows as in `data` (the last run drawn cut
 * short). Resampling rows would not do: a window's rollout reads the rows after its first, so every member would
 * still fit every episode.
 */
export function runBootstrap(data: Transitions, members: number, rng: nn.Rng): Int32Array[] {
  return bootstrapOf(chainsOf(data, 'runBootstrap'), members, rng);
}

function bootstrapOf(chains: Uint8Array, members: number, rng: nn.Rng): Int32Array[] {
  const n = chains.length, starts: number[] = [];
  for (let i = 0; i < n; i++) if (i === 0 || !chains[i - 1]) starts.push(i);
  const end = (k: number) => (k + 1 < starts.length ? starts[k + 1]! : n);
  return Array.from({ length: members }, () => {
    const out = new Int32Array(n);
    for (let m = 0; m < n;) {
      const k = rng.int(starts.length);
      for (let r = starts[k]!; r < end(k) && m < n; r++) out[m++] = r;
    }
    return out;
  });
}

/**
 * Continues fitting `model`'s dynamics (not its reward and success heads) on a window from every row of `data`
 * (rolloutLengths: up to K steps, fewer where the episode ends first): per member and window, the one-step NLL of
 * the first transition plus `rolloutWeight` x the member's open-loop mean rollout's squared error over the dynamics
 * entries (EnsembleModel.dynamicsDims), summed over the window's steps and divided by K (every step of every window
 * weighs the same, however short the window), times the first transition's weight (Transitions.weight). Every row
 * thus gets its one-step term, and an episode shorter than K still trains the dynamics. Each member fits its own
 * bootstrap resample of the episodes (runBootstrap) where `bootstrap` is true.
 * The rollout completes each step as imagination does: the command tail as recorded, then the task's identities
 * (EnsembleConfig.derived). Normalization stays as fitted.
 */
export async function fitRollout(model: EnsembleModel, data: Transitions, opts: RolloutFitOptions = {}): Promise<RolloutEpoch[]> {
  const K = opts.steps ?? 16;
  if (!(Number.isInteger(K) && K >= 1)) throw new Error(`fitRollout: steps must be a positive integer, got ${K}`);
  if (data.dObs !== model.dObs || data.dAct !== model.dAct) throw new Error(`fitRollout: transitions have dims (obs ${data.dObs}, action ${data.dAct}), the model (obs ${model.dObs}, action ${model.dAct})`);
  if (historyLength(data) !== model.actionHistory) throw new Error(`fitRollout: transitions carry ${historyLength(data)} past actions per row, the model conditions on ${model.actionHistory}`);
  if (contextLength(data) !== model.contextDim) throw new Error(`fitRollout: transitions carry ${contextLength(data)} context entries per row, the model is conditioned on ${model.contextDim}`);
  const chains = chainsOf(data, 'fitRollout'), lengths = lengthsOf(chains, K), n = lengths.length;
  const E = model.members, { dObs, dAct, dIn } = model;
  if (n === 0) throw new Error('fitRollout: no transitions');
  const cap = opts.windowsPerEpoch ?? n;
  if (!(Number.isInteger(cap) && cap >= 1)) throw new Error(`fitRollout: windowsPerEpoch must be a positive integer, got ${cap}`);
  const B = Math.min(opts.batchSize ?? 64, cap, n);
  const hw = model.actionHistory * dAct, c = model.contextDim;
  const nz = model.normalizer;
  const tailStart = dObs - model.commandHistory * dAct;
  const dyn = new Set(model.dynamicsDims);
  const dynMask = Array.from({ length: dObs }, (_, j) => (dyn.has(j) ? 1 : 0));
  // The one-step NLL over every modeled entry, as fit() scores it: the command tail's prediction comes from the same
  // network, and evaluate() and the members' disagreement still read it.
  const modeled = Array.from(nz.deltaStd, (sd) => (sd > 0 ? 1 : 0));
  const nMod = Math.max(1, modeled.reduce<number>((a, b) => a + b, 0));
  const obsScale = Array.from({ length: dObs }, (_, j) => 1 / (nz.inStd[j]! || 1));

  const g = new nn.Graph();
  const obs0 = g.input('obs0', [E, B, dObs]);
  const act = g.input('act', [K, E, B, dAct]);
  const hist = hw > 0 ? g.input('hist', [K, E, B, hw]) : null;
  const ctx = c > 0 ? g.input('ctx', [E, B, c]) : null;
  const target = g.input('target', [K, E, B, dObs]);
  const wIn = g.input('w', [E, B]);
  // 1 for the window's steps, 0 for those past its episode's end (their inputs repeat its last row).
  const stepMask = g.input('mask', [K, E, B]);
  const inMean = g.constant(nz.inMean, [dIn]), inStd = g.constant(nz.inStd, [dIn]);
  const dMean = g.constant(nz.deltaMean, [dObs]), dStd = g.constant(nz.deltaStd, [dObs]);
  const dStdSafe = g.constant(Array.from(nz.deltaStd, (v) => v || 1), [dObs]);
  const at = (t: nn.Tensor, j: number) => nn.squeeze(nn.slice(t, 0, j, j + 1), [0]);
  let s = obs0;
  let nll: nn.Tensor | null = null;
  let roll: nn.Tensor | null = null;
  for (let j = 0; j < K; j++) {
    const tgt = at(target, j);
    const x = nn.div(nn.sub(nn.concat([s, at(act, j), ...(hist ? [at(hist, j)] : []), ...(ctx ? [ctx] : [])], 2), inMean), inStd);
    const h = model.heads(x);
    if (j === 0) {
      const y = nn.div(nn.sub(nn.sub(tgt, s), dMean), dStdSafe);
      const sq = nn.mul(nn.square(nn.sub(h.mu, y)), nn.exp(nn.neg(h.logVar)));
      nll = nn.div(nn.sum(nn.mul(nn.add(sq, h.logVar), g.constant(modeled, [dObs])), -1), nMod);
    }
    let next = nn.add(s, nn.add(nn.mul(h.mu, dStd), dMean));
    if (tailStart === 0) next = tgt;
    else if (tailStart < dObs) next = nn.concat([nn.slice(next, 2, 0, tailStart), nn.slice(tgt, 2, tailStart, dObs)], 2);
    next = withDerived(next, s, model.derived);
    const err = nn.mul(at(stepMask, j), nn.div(nn.sum(nn.mul(nn.square(nn.mul(nn.sub(next, tgt), g.constant(obsScale, [dObs]))), g.constant(dynMask, [dObs])), -1), Math.max(1, dyn.size)));
    roll = roll ? nn.add(roll, err) : err;
    s = next;
  }
  const perRow = nn.mul(wIn, nn.add(nn.mul(nll!, 0.5), nn.mul(nn.div(roll!, K), opts.rolloutWeight ?? 50)));
  const loss = nn.sum(nn.mean(perRow, 1));
  // The dynamics network alone: the reward and success heads keep their fit, and so do the log-variance bounds (fit()
  // holds them with a penalty this loss lacks; the rollout term never reads the variance).
  const trainable = model.net.paramNames();
  const errOut = nn.mean(nn.div(roll!, nn.sum(stepMask, 0)));
  const trainer = await nn.Trainer.create({ loss, store: model.store, trainable, optimizer: { lr: opts.lr ?? 3e-4 }, metrics: { rolloutError: errOut } });

  const rng = new nn.Rng(opts.seed ?? 0);
  const epochs = opts.epochs ?? 4;
  const history: RolloutEpoch[] = [];
  const order = opts.bootstrap !== true ? Array.from({ length: E }, () => Int32Array.from({ length: n }, (_, i) => i)) : bootstrapOf(chains, E, rng);
  const perEpoch = Math.max(1, Math.floor(Math.min(cap, n) / B));
  // Weights rescaled to mean 1: only ratios matter, as in fit().
  const wRaw = data.weight ?? new Float32Array(n).fill(1);
  const wMean = wRaw.reduce((a, b) => a + b, 0) / n; // > 0: validateTransitions refuses weights all 0
  try {
    for (let epoch = 1; epoch <= epochs; epoch++) {
      for (const o of order) rng.shuffle(o);
      let lossSum = 0, errSum = 0;
      for (let b = 0; b < perEpoch; b++) {
        const o0 = new Float32Array(E * B * dObs), a = new Float32Array(K * E * B * dAct), hs = new Float32Array(K * E * B * hw);
        const cx = new Float32Array(E * B * c), tg = new Float32Array(K * E * B * dObs), wt = new Float32Array(E * B), mk = new Float32Array(K * E * B);
        for (let e = 0; e < E; e++) {
          for (let i = 0; i < B; i++) {
            const r0 = order[e]![b * B + i]!, row = e * B + i;
            o0.set(data.obs.subarray(r0 * dObs, (r0 + 1) * dObs), row * dObs);
            wt[row] = wRaw[r0]! / wMean;
            if (c > 0) cx.set(data.context!.subarray(r0 * c, (r0 + 1) * c), row * c);
            const len = lengths[r0]!;
            for (let j = 0; j < K; j++) {
              const r = r0 + Math.min(j, len - 1), slot = j * E * B + row;
              mk[slot] = j < len ? 1 : 0;
              a.set(data.action.subarray(r * dAct, (r + 1) * dAct), slot * dAct);
              if (hw > 0) hs.set(data.history!.subarray(r * hw, (r + 1) * hw), slot * hw);
              tg.set(data.nextObs.subarray(r * dObs, (r + 1) * dObs), slot * dObs);
            }
          }
        }
        const res = await trainer.step({
          obs0: nn.tensor(o0, [E, B, dObs]),
          act: nn.tensor(a, [K, E, B, dAct]),
          ...(hw > 0 ? { hist: nn.tensor(hs, [K, E, B, hw]) } : {}),
          ...(c > 0 ? { ctx: nn.tensor(cx, [E, B, c]) } : {}),
          target: nn.tensor(tg, [K, E, B, dObs]),
          w: nn.tensor(wt, [E, B]),
          mask: nn.tensor(mk, [K, E, B]),
        });
        lossSum += res.loss;
        errSum += (res.metrics.rolloutError!.data as Float32Array)[0]!;
      }
      trainer.syncToStore();
      const rep = { epoch, loss: lossSum / perEpoch, rolloutError: errSum / perEpoch };
      history.push(rep);
      opts.onEpoch?.(rep);
    }
  } finally {
    await trainer.release();
  }
  return history;
}
