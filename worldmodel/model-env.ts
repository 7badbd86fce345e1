// The batched model env (mbrl-lib ModelEnv): N imagined rollouts stepped together through the ensemble,
// one ONNX Runtime call per step for all rollouts and all members; and `imagine`, which runs a policy graph
// and the ensemble together, several steps per call.
import * as nn from '../nn/index.js';
import type { DerivedEntries, DerivedExpr } from '../common/derived.js';
import { checkRows, firstNonFinite } from './dataset.js';
import type { EnsembleModel } from './ensemble.js';

/**
 * Which member moves each rollout:
 * - 'random': a member drawn per rollout per step (PETS TS1);
 * - 'fixed': one member per rollout for the whole rollout (PETS TS∞), drawn at reset or given;
 * - 'mean': the members' mean prediction, deterministic.
 */
export type MemberMode = 'random' | 'fixed' | 'mean';

export interface ModelEnvOptions {
  members?: MemberMode;
  /** Seed of member draws and observation noise (default 0). */
  seed?: number;
  /**
   * Sample the next observation from the chosen member's Gaussian (default false: take its mean).
   * Ignored in 'mean' mode, which stays deterministic.
   */
  sampleNoise?: boolean;
  /**
   * Control steps between sending an action and its reaching the actuators (a robot's actuation latency that
   * the data the model learned from did not have; `identifyDelay` estimates it from robot episodes). The model
   * is fed the action sent this many steps earlier (zeros before the first), and its action history holds the
   * actions so applied. Default 0.
   */
  actionDelay?: number;
}

/** One step of N rollouts; E members. */
export interface ModelStep {
  /** Shape N x dObs. */
  obs: Float32Array;
  /** Shape N: the chosen member's reward (the members' mean in 'mean' mode). */
  reward: Float32Array;
  /** Shape N: the chosen member's success probability. */
  successProb: Float32Array;
  /**
   * Shape N: variance across members of the predicted next-obs delta mean, in normalized delta units
   * (each dim divided by its delta std in the training data), averaged over dims.
   */
  disagreement: Float32Array;
  /** Shape E x N: every member's reward at the same (obs, action); feeds `scoreWithVariance`. */
  memberReward: Float32Array;
  /** Shape N: the member that moved each rollout, -1 in 'mean' mode. */
  member: Int32Array;
}

/**
 * A policy as an nn/ graph, for `imagine`. Its parameters are fed as graph inputs from `store` at every
 * call, so a policy update needs no recompiling (a trainer syncs its Trainer to the store first).
 */
export interface GraphPolicy {
  store: nn.ParamStore;
  /** Standard-normal noise entries per rollout per step (0: deterministic policy, no noise input). */
  noiseDim: number;
  /**
   * Emits the policy for B rollouts into obs's graph: obs [B, dObs], noise [B, noiseDim] or null.
   * Returns named tensors, each [B, ...]; `action` [B, dAct] is what the model is stepped with. Anything else
   * (log-probability, mean) comes back per step too.
   */
  build(obs: nn.Tensor, noise: nn.Tensor | null): Record<string, nn.Tensor>;
}

export interface ImagineOptions {
  /** Policy noise: Shape N x H x noiseDim (default: drawn from the env's generator). */
  policyNoise?: Float32Array;
  /** 'fixed' mode: the member of each rollout, Shape N (default: drawn). */
  members?: ArrayLike<number>;
  /**
   * Steps unrolled into one graph run (default 25); longer unrolls mean fewer calls, bigger graphs. Steps left after
   * the last whole run go in runs of powers of two, so horizons of every length share a few graphs.
   */
  stepsPerRun?: number;
}

/** N imagined rollouts of H steps; E members. */
export interface Imagined {
  /** Shape N x (H+1) x dObs: the start, then every next observation. */
  obs: Float32Array;
  /** Shape N x H x dAct. */
  action: Float32Array;
  /** Shape N x H. */
  reward: Float32Array;
  successProb: Float32Array;
  disagreement: Float32Array;
  /** Shape E x N x H. */
  memberReward: Float32Array;
  /** Shape N x H: the member that moved each step (-1 in 'mean' mode). */
  member: Int32Array;
  /** Shape N x H x noiseDim: the policy noise used. */
  policyNoise: Float32Array;
  /** Every tensor the policy returned, by name: Shape N x H x (its trailing dims). */
  policy: Record<string, Float32Array>;
}

/** A compiled graph; every parameter is a graph input, fed from the stores at each run, so a refit or a policy update needs no recompiling. */
interface Compiled {
  prog: nn.Program;
  params: string[];
}

export class ModelEnv {
  readonly mode: MemberMode;
  private readonly rng: nn.Rng;
  private readonly sampleNoise: boolean;
  /** Control steps from sending an action to its application (see ModelEnvOptions.actionDelay). */
  readonly actionDelay: number;
  private state: Float32Array | null = null;
  /** Each rollout's last d + h sent actions, most recent first (Shape N x (d + h)·dAct): d in flight, h applied. */
  private history: Float32Array | null = null;
  private fixed: Int32Array | null = null;
  private stepProgram: Promise<Compiled> | null = null;
  private readonly unrolled = new Map<GraphPolicy, Map<number, Promise<Compiled>>>();

  constructor(readonly model: EnsembleModel, opts: ModelEnvOptions = {}) {
    this.mode = opts.members ?? 'random';
    if (!['random', 'fixed', 'mean'].includes(this.mode)) throw new Error(`model env: unknown member mode '${this.mode}' (random, fixed, mean)`);
    this.rng = new nn.Rng(opts.seed ?? 0);
    this.sampleNoise = (opts.sampleNoise ?? false) && this.mode !== 'mean';
    this.actionDelay = opts.actionDelay ?? 0;
    if (!(Number.isInteger(this.actionDelay) && this.actionDelay >= 0)) throw new Error(`model env: actionDelay must be a non-negative integer, got ${opts.actionDelay}`);
  }

  /** Sent actions each rollout carries: the d in flight and the h the model conditions on. */
  private get carried(): number {
    return this.actionDelay + this.model.actionHistory;
  }

  /** Rollouts in the batch (after reset). */
  get n(): number {
    return this.state ? this.state.length / this.model.dObs : 0;
  }

  /** The current observations, Shape N x dObs (a copy). */
  get obs(): Float32Array {
    if (!this.state) throw new Error('model env: reset() first');
    return this.state.slice();
  }

  /**
   * Starts N rollouts from `startObs` (Shape N x dObs; `repeatRows` makes B starts x G rollouts).
   * In 'fixed' mode `members` (Shape N) pins each rollout's member; otherwise they are drawn.
   */
  reset(startObs: Float32Array, opts: { members?: ArrayLike<number> } = {}): Float32Array {
    const n = checkRows('model env reset: startObs', startObs, this.model.dObs);
    this.state = startObs.slice();
    // A rollout starts at an episode's start: no action sent yet (the latency queue holds the reset controls).
    this.history = new Float32Array(n * this.carried * this.model.dAct);
    this.fixed = this.mode === 'fixed' ? this.memberList(n, opts.members) : null;
    if (opts.members && this.mode !== 'fixed') throw new Error(`model env reset: members are given but the mode is '${this.mode}', not 'fixed'`);
    return this.state.slice();
  }

  private memberList(n: number, given?: ArrayLike<number>): Int32Array {
    const E = this.model.members;
    if (!given) return Int32Array.from({ length: n }, () => this.rng.int(E));
    if (given.length !== n) throw new Error(`model env: ${given.length} members for ${n} rollouts`);
    const m = Int32Array.from(given);
    const bad = m.findIndex((v) => !(v >= 0 && v < E));
    if (bad >= 0) throw new Error(`model env: member ${given[bad]} of rollout ${bad} is not in [0, ${E})`);
    return m;
  }

  /** The members moving each rollout this step (Shape N) and their weights (Shape E x N). */
  private drawMembers(n: number): { member: Int32Array; mix: Float32Array } {
    const E = this.model.members;
    const mix = new Float32Array(E * n);
    if (this.mode === 'mean') return { member: new Int32Array(n).fill(-1), mix: mix.fill(1 / E) };
    const member = this.mode === 'fixed' ? this.fixed!.slice() : Int32Array.from({ length: n }, () => this.rng.int(E));
    member.forEach((m, i) => (mix[m * n + i] = 1));
    return { member, mix };
  }

  private normals(count: number, on: boolean): Float32Array {
    const z = new Float32Array(count);
    if (on) for (let i = 0; i < count; i++) z[i] = this.rng.normal();
    return z;
  }

  private async compiledStep(): Promise<Compiled> {
    if (this.stepProgram) return this.stepProgram;
    this.stepProgram = (async () => {
      const { dObs, dAct, members: E } = this.model;
      const g = new nn.Graph();
      const obs = g.input('obs', ['n', dObs]);
      const action = g.input('action', ['n', dAct]);
      const mix = g.input('mix', [E, 'n']);
      const noise = g.input('noise', ['n', dObs]);
      const cw = this.carried * dAct;
      const carried = cw > 0 ? g.input('history', ['n', cw]) : null;
      const { applied, history } = appliedAction(action, carried, this.actionDelay, this.model.actionHistory, dAct);
      const s = this.model.stepGraph(obs, applied, mix, noise, history ?? undefined);
      const nextObs = withDerived(withCommands(s.nextObs, obs, action, this.model), obs, this.model.derived);
      const params = [...g.params.keys()];
      const prog = await nn.Program.fromSpec({
        inputs: [...[obs, action, mix, noise, ...(carried ? [carried] : [])].map((t) => ({ name: t.attrs.name as string, tensor: t })), ...params.map((p) => ({ name: p, tensor: g.params.get(p)! }))],
        outputs: [
          { name: 'next_obs', tensor: nextObs },
          { name: 'reward', tensor: s.reward },
          { name: 'success_prob', tensor: s.successProb },
          { name: 'disagreement', tensor: s.disagreement },
          { name: 'member_reward', tensor: s.memberReward },
        ],
      });
      return { prog, params };
    })();
    try {
      return await this.stepProgram;
    } catch (e) {
      this.stepProgram = null;
      throw e;
    }
  }

  /** Steps every rollout with `actions` (Shape N x dAct): one ONNX Runtime call for all rollouts and members. */
  async step(actions: Float32Array): Promise<ModelStep> {
    if (!this.state) throw new Error('model env: step() before reset()');
    const { dObs, dAct } = this.model;
    const n = this.n;
    checkRows('model env step: actions', actions, dAct, n);
    const { prog, params } = await this.compiledStep();
    const { member, mix } = this.drawMembers(n);
    const out = await prog.run({
      obs: nn.tensor(this.state, [n, dObs]),
      action: nn.tensor(actions, [n, dAct]),
      mix: nn.tensor(mix, [this.model.members, n]),
      noise: nn.tensor(this.normals(n * dObs, this.sampleNoise), [n, dObs]),
      ...(this.carried > 0 ? { history: nn.tensor(this.history!, [n, this.carried * dAct]) } : {}),
      ...this.model.paramFeeds(params),
    });
    const next = nn.f32(out.next_obs);
    const bad = firstNonFinite(next);
    if (bad >= 0) throw new Error(`model env step: the model predicted a non-finite observation for rollout ${Math.floor(bad / dObs)} (dim ${bad % dObs})`);
    this.state = next.slice();
    this.history = shiftHistory(this.history!, actions, n, dAct, this.carried);
    return { obs: next, reward: nn.f32(out.reward), successProb: nn.f32(out.success_prob), disagreement: nn.f32(out.disagreement), memberReward: nn.f32(out.member_reward), member };
  }

  /**
   * Imagines N rollouts of `horizon` steps from `startObs` (Shape N x dObs) under `policy`: policy and ensemble
   * run together in one graph, `stepsPerRun` steps per ONNX Runtime call. Does not touch the env's reset state.
   * With the same noise and members, equals stepping the env with the policy's actions one step at a time.
   */
  async imagine(startObs: Float32Array, policy: GraphPolicy, horizon: number, opts: ImagineOptions = {}): Promise<Imagined> {
    const { dObs, dAct, members: E } = this.model;
    const n = checkRows('imagine: startObs', startObs, dObs);
    if (!(Number.isInteger(horizon) && horizon > 0)) throw new Error(`imagine: horizon must be a positive integer, got ${horizon}`);
    const nd = policy.noiseDim;
    const pNoise = opts.policyNoise ?? this.normals(n * horizon * nd, true);
    if (pNoise.length !== n * horizon * nd) throw new Error(`imagine: policyNoise has ${pNoise.length} values, expected N x H x noiseDim = ${n} x ${horizon} x ${nd}`);
    if (opts.members && this.mode !== 'fixed') throw new Error(`imagine: members are given but the mode is '${this.mode}', not 'fixed'`);
    const fixed = this.mode === 'fixed' ? this.memberList(n, opts.members) : null;
    const U = opts.stepsPerRun ?? 25;
    if (!(Number.isInteger(U) && U > 0)) throw new Error(`imagine: stepsPerRun must be a positive integer, got ${opts.stepsPerRun}`);

    const H = horizon;
    const res: Imagined = {
      obs: new Float32Array(n * (H + 1) * dObs),
      action: new Float32Array(n * H * dAct),
      reward: new Float32Array(n * H),
      successProb: new Float32Array(n * H),
      disagreement: new Float32Array(n * H),
      memberReward: new Float32Array(E * n * H),
      member: new Int32Array(n * H),
      policyNoise: pNoise,
      policy: {},
    };
    for (let i = 0; i < n; i++) res.obs.set(startObs.subarray(i * dObs, (i + 1) * dObs), i * (H + 1) * dObs);
    let cur = startObs.slice();
    const hw = this.carried * dAct;
    let hist = new Float32Array(n * hw);
    for (let t0 = 0, u = 0; t0 < H; t0 += u) {
      // Runs of U steps, then the rest in runs of powers of two: replays of every length share a few compiled graphs.
      u = H - t0 >= U ? U : 2 ** (31 - Math.clz32(H - t0));
      const { prog, params } = await this.compiledUnroll(policy, u);
      // Per-run inputs, laid out [u, ...] so the graph slices one step at a time.
      const mix = new Float32Array(u * E * n);
      const oNoise = this.normals(u * n * dObs, this.sampleNoise);
      const noise = new Float32Array(u * n * nd);
      for (let k = 0; k < u; k++) {
        const m = fixed ? { member: fixed, mix: memberMix(fixed, E) } : this.drawMembers(n);
        mix.set(m.mix, k * E * n);
        for (let i = 0; i < n; i++) {
          res.member[i * H + t0 + k] = m.member[i]!;
          noise.set(pNoise.subarray((i * H + t0 + k) * nd, (i * H + t0 + k + 1) * nd), (k * n + i) * nd);
        }
      }
      const feeds: Record<string, nn.ort.Tensor> = {
        start: nn.tensor(cur, [n, dObs]),
        mix: nn.tensor(mix, [u, E, n]),
        obs_noise: nn.tensor(oNoise, [u, n, dObs]),
        ...(nd ? { policy_noise: nn.tensor(noise, [u, n, nd]) } : {}),
        ...(hw > 0 ? { history: nn.tensor(hist, [n, hw]) } : {}),
      };
      const wm = new Set(this.model.paramNames());
      for (const p of params) {
        const v = wm.has(p) ? this.model.store.get(p) : policy.store.get(p);
        feeds[p] = new nn.ort.Tensor('float32', v.data, v.shape);
      }
      const out = await prog.run(feeds);
      // Outputs are [u, n, ...]; scatter into rollout-major [n, H, ...].
      const put = (dst: Float32Array, src: Float32Array, width: number, steps: number, offset: number) => {
        for (let k = 0; k < u; k++) for (let i = 0; i < n; i++) dst.set(src.subarray((k * n + i) * width, (k * n + i + 1) * width), ((i * steps) + offset + k) * width);
      };
      const obsOut = nn.f32(out.obs);
      const bad = firstNonFinite(obsOut);
      if (bad >= 0) throw new Error(`imagine: the model predicted a non-finite observation at step ${t0 + Math.floor(bad / (n * dObs)) + 1}`);
      put(res.obs, obsOut, dObs, H + 1, t0 + 1);
      put(res.action, nn.f32(out.action), dAct, H, t0);
      put(res.reward, nn.f32(out.reward), 1, H, t0);
      put(res.successProb, nn.f32(out.success_prob), 1, H, t0);
      put(res.disagreement, nn.f32(out.disagreement), 1, H, t0);
      const mr = nn.f32(out.member_reward); // [u, E, n]
      for (let k = 0; k < u; k++) for (let e = 0; e < E; e++) for (let i = 0; i < n; i++) res.memberReward[(e * n + i) * H + t0 + k] = mr[(k * E + e) * n + i]!;
      for (const name of Object.keys(out)) {
        if (!name.startsWith('policy.')) continue;
        const key = name.slice('policy.'.length);
        const src = nn.f32(out[name]);
        const width = src.length / (u * n);
        res.policy[key] ??= new Float32Array(n * H * width);
        put(res.policy[key], src, width, H, t0);
      }
      cur = obsOut.slice((u - 1) * n * dObs);
      if (hw > 0) hist = nn.f32(out.history_out).slice();
    }
    return res;
  }

  /** The graph of u steps of policy + ensemble, compiled once per policy and u. */
  private async compiledUnroll(policy: GraphPolicy, u: number): Promise<Compiled> {
    let byU = this.unrolled.get(policy);
    if (!byU) this.unrolled.set(policy, (byU = new Map()));
    const prev = byU.get(u);
    if (prev) return prev;
    const made = buildUnroll(this.model, policy, u, this.actionDelay);
    byU.set(u, made);
    try {
      return await made;
    } catch (e) {
      // A graph that failed to build is not kept: release() would meet the failure again.
      byU.delete(u);
      throw e;
    }
  }

  /** Frees the compiled graphs (the env stays usable; they recompile on demand). */
  async release(): Promise<void> {
    const all = [this.stepProgram, ...[...this.unrolled.values()].flatMap((m) => [...m.values()])];
    this.stepProgram = null;
    this.unrolled.clear();
    for (const p of all) if (p) await (await p).prog.release();
  }
}

/**
 * The predicted next observation with its command-history tail (EnsembleConfig.commandHistory) set, not predicted:
 * the command just sent (clipped to [-1, 1], as the robot records it) first, then the previous observation's
 * commands but its oldest.
 */
function withCommands(next: nn.Tensor, prev: nn.Tensor, sent: nn.Tensor, model: EnsembleModel): nn.Tensor {
  const k = model.commandHistory, { dObs, dAct } = model;
  if (k === 0) return next;
  const head = dObs - k * dAct;
  return nn.concat([
    ...(head > 0 ? [nn.slice(next, 1, 0, head)] : []),
    nn.clip(sent, -1, 1),
    ...(k > 1 ? [nn.slice(prev, 1, head, dObs - dAct)] : []),
  ], 1);
}

/**
 * The predicted next observation with the task's identities restored (EnsembleConfig.derived, common/derived.ts):
 * held entries keep `prev`'s values, computed ones are evaluated, in order, on the observation as restored so far.
 * Entries lie on the last axis: [B, dObs] in imagination, [E, B, dObs] in multi-step fitting (multistep.ts).
 */
export function withDerived(next: nn.Tensor, prev: nn.Tensor, d: DerivedEntries | undefined): nn.Tensor {
  if (!d || (d.held.length === 0 && d.computed.length === 0)) return next;
  const ax = next.rank - 1, dObs = next.shape[ax] as number;
  const cols: Array<nn.Tensor | null> = new Array<nn.Tensor | null>(dObs).fill(null);
  const col = (j: number) => cols[j] ?? nn.slice(next, ax, j, j + 1);
  const build = (x: DerivedExpr): nn.Tensor | number => {
    if ('entry' in x) return col(x.entry);
    if ('const' in x) return x.const;
    if ('neg' in x) { const v = build(x.neg); return typeof v === 'number' ? -v : nn.neg(v); }
    if ('sin' in x) { const v = build(x.sin); return typeof v === 'number' ? Math.sin(v) : nn.sin(v); }
    if ('cos' in x) { const v = build(x.cos); return typeof v === 'number' ? Math.cos(v) : nn.cos(v); }
    const add = 'add' in x, terms = (add ? x.add : x.mul).map(build);
    let acc = terms[0]!;
    for (const b of terms.slice(1)) acc = typeof acc === 'number' && typeof b === 'number' ? (add ? acc + b : acc * b) : add ? nn.add(acc, b) : nn.mul(acc, b);
    return acc;
  };
  for (const i of d.held) cols[i] = nn.slice(prev, ax, i, i + 1);
  for (const { entry, expr } of d.computed) {
    const v = build(expr);
    // A constant expression: a column of that value.
    cols[entry] = typeof v === 'number' ? nn.add(nn.mul(nn.slice(next, ax, entry, entry + 1), 0), v) : v;
  }
  // Untouched runs of entries pass through as one slice each.
  const parts: nn.Tensor[] = [];
  for (let j = 0; j < dObs;) {
    if (cols[j]) { parts.push(cols[j]!); j++; continue; }
    let k = j;
    while (k < dObs && !cols[k]) k++;
    parts.push(nn.slice(next, ax, j, k));
    j = k;
  }
  return nn.concat(parts, ax);
}

/** The history after `actions` (Shape N x dAct) were sent: they become the most recent past actions. */
function shiftHistory(history: Float32Array, actions: Float32Array, n: number, dAct: number, h: number): Float32Array {
  if (h === 0) return history;
  const out = new Float32Array(n * h * dAct);
  for (let i = 0; i < n; i++) {
    out.set(actions.subarray(i * dAct, (i + 1) * dAct), i * h * dAct);
    out.set(history.subarray(i * h * dAct, (i * h + h - 1) * dAct), (i * h + 1) * dAct);
  }
  return out;
}

function memberMix(member: Int32Array, E: number): Float32Array {
  const n = member.length;
  const mix = new Float32Array(E * n);
  member.forEach((m, i) => (mix[m * n + i] = 1));
  return mix;
}

/**
 * From the action just sent and the carried sent actions (most recent first; d in flight, then h applied):
 * the action the actuators get now and the model's action history.
 */
function appliedAction(sent: nn.Tensor, carried: nn.Tensor | null, d: number, h: number, dAct: number): { applied: nn.Tensor; history: nn.Tensor | null } {
  if (!carried) return { applied: sent, history: null };
  const applied = d === 0 ? sent : nn.slice(carried, 1, (d - 1) * dAct, d * dAct);
  const history = h === 0 ? null : nn.slice(carried, 1, d * dAct, (d + h) * dAct);
  return { applied, history };
}

async function buildUnroll(model: EnsembleModel, policy: GraphPolicy, u: number, d: number): Promise<Compiled> {
  const { dObs, members: E } = model;
  const g = new nn.Graph();
  const start = g.input('start', ['n', dObs]);
  const mix = g.input('mix', [u, E, 'n']);
  const obsNoise = g.input('obs_noise', [u, 'n', dObs]);
  const pNoise = policy.noiseDim ? g.input('policy_noise', [u, 'n', policy.noiseDim]) : null;
  const h = model.actionHistory, dAct = model.dAct, c = d + h;
  const history = c > 0 ? g.input('history', ['n', c * dAct]) : null;
  const at = (x: nn.Tensor, k: number) => nn.squeeze(nn.slice(x, 0, k, k + 1), [0]);
  const collected = new Map<string, nn.Tensor[]>();
  const keep = (name: string, t: nn.Tensor) => {
    const list = collected.get(name) ?? [];
    list.push(nn.unsqueeze(t, [0]));
    collected.set(name, list);
  };
  let obs = start;
  let hist = history;
  for (let k = 0; k < u; k++) {
    const out = policy.build(obs, pNoise ? at(pNoise, k) : null);
    const action = out.action;
    if (!action) throw new Error(`imagine: the policy returned no 'action' (it returned ${Object.keys(out).join(', ') || 'nothing'})`);
    if (action.rank !== 2 || action.shape[1] !== model.dAct) throw new Error(`imagine: the policy's action has shape [${action.shape.join(', ')}], expected [n, ${model.dAct}]`);
    const a = appliedAction(action, hist, d, h, dAct);
    const s = model.stepGraph(obs, a.applied, at(mix, k), at(obsNoise, k), a.history ?? undefined);
    const next = withDerived(withCommands(s.nextObs, obs, action, model), obs, model.derived);
    // The action just sent becomes the most recent carried one.
    if (hist) hist = c > 1 ? nn.concat([action, nn.slice(hist, 1, 0, (c - 1) * dAct)], 1) : action;
    keep('action', action);
    keep('reward', s.reward);
    keep('success_prob', s.successProb);
    keep('disagreement', s.disagreement);
    keep('member_reward', s.memberReward);
    keep('obs', next);
    for (const [name, t] of Object.entries(out)) keep(`policy.${name}`, t);
    obs = next;
  }
  const wmParams = new Set(model.paramNames());
  for (const p of g.params.keys()) {
    if (wmParams.has(p) && policy.store.has(p)) throw new Error(`imagine: the policy's parameter '${p}' has the name of a world-model parameter`);
    if (!wmParams.has(p) && !policy.store.has(p)) throw new Error(`imagine: parameter '${p}' is in neither the world model nor the policy's store`);
  }
  const params = [...g.params.keys()];
  const prog = await nn.Program.fromSpec({
    inputs: [start, mix, obsNoise, ...(pNoise ? [pNoise] : []), ...(history ? [history] : [])].map((t) => ({ name: t.attrs.name as string, tensor: t })).concat(params.map((p) => ({ name: p, tensor: g.params.get(p)! }))),
    outputs: [
      ...[...collected].map(([name, ts]) => ({ name, tensor: ts.length > 1 ? nn.concat(ts, 0) : ts[0]! })),
      ...(hist ? [{ name: 'history_out', tensor: nn.add(hist, 0) }] : []),
    ],
  });
  return { prog, params };
}

/** Each of B rows (Shape B x width) repeated G times in a row: Shape (B·G) x width, rollout b·G + j from start b. */
export function repeatRows(rows: Float32Array, width: number, G: number): Float32Array {
  const B = checkRows('repeatRows', rows, width);
  if (!(Number.isInteger(G) && G > 0)) throw new Error(`repeatRows: G must be a positive integer, got ${G}`);
  const out = new Float32Array(B * G * width);
  for (let b = 0; b < B; b++) for (let j = 0; j < G; j++) out.set(rows.subarray(b * width, (b + 1) * width), (b * G + j) * width);
  return out;
}
