// Imagination for any policy of the one interface (policies/types.ts), image policies included: B start
// states × H steps in the world model, where the policy sees only what the model predicts. Per step:
//
//   predicted obs_t ─ twin.render ─ image_t ─┐
//   predicted obs_t ─────────────────────────┼─ policy.act ─ sample ─ clip ─ ModelEnv.step ─ predicted obs_t+1
//   instruction (fixed per rollout) ─────────┘
//
// The image at t ≥ 1 is rendered by the task's digital twin (sim/twin.ts) from the model's predicted state,
// never taken from a simulator; at t = 0 it is the twin's render of the start state unless the caller gives
// the real camera images of the starts. The result holds the arrays a trainer takes from ModelEnv.imagine
// (obs, sampled actions, logProb, reward, memberReward, successProb) plus every image and instruction the
// policy saw, so the policy gradient can recompute log π(a_t | obs_t, image_t, instruction) exactly.
// Unlike ModelEnv.imagine (policy and ensemble fused in one graph) this runs policy and model in turn, one
// step per call each: an image policy's input comes from outside any graph. imagineRollouts picks either way
// for a trainer, and imaginedRollouts cuts each rollout at its predicted success and scores it.
import type { SceneTwin } from '../sim/twin.js';
import type { Policy, PolicyContext, PolicyInputs } from '../policies/types.js';
import { collapse, type GraphPolicy, type ModelEnv } from '../worldmodel/index.js';
import { Rng } from '../nn/index.js';
import type { RobotEpisode, Trajectory } from './embodied.js';

export interface ImaginePolicyOptions {
  /** Standard-normal policy noise, Shape N x H x A (default: drawn from `seed`); zeros: the mean action. */
  noise?: Float32Array;
  seed?: number;
  /** A model env in 'fixed' mode: the member of each rollout, Shape N. */
  members?: ArrayLike<number>;
  /** The camera images of the start states, Shape N x S x S x 3 (default: the twin renders them). */
  startImages?: Uint8Array;
  /** Action bounds the sample is clipped to before the model steps with it, Shape A (default ±1, the sim's). */
  actLow?: ArrayLike<number>;
  actHigh?: ArrayLike<number>;
}

/** N imagined rollouts of H steps; E members, A action entries, D = the layout's length. */
export interface PolicyImagination {
  n: number;
  horizon: number;
  /** Shape N x (H+1) x D: the start, then every predicted observation. */
  obs: Float32Array;
  /** Shape N x H x A: the policy's samples (whose logProb the policy gradient needs). */
  actionRaw: Float32Array;
  /** Shape N x H x A: the samples clipped to the action bounds: what the model stepped with. */
  action: Float32Array;
  /** Shape N x H: log π(actionRaw | obs, image, instruction) when acting. */
  logProb: Float32Array;
  /** Shape N x H x A: the policy's mean actions. */
  mean: Float32Array;
  /** Shape N x H. */
  reward: Float32Array;
  successProb: Float32Array;
  disagreement: Float32Array;
  /** Shape E x N x H. */
  memberReward: Float32Array;
  /** Shape N x H (-1 in 'mean' mode). */
  member: Int32Array;
  /** Shape N x H x A: the noise used. */
  noise: Float32Array;
  /** Shape N x (H+1) x S x S x 3: the image of every observation (empty without a twin). */
  images: Uint8Array;
  /** Bytes of one image (0 without a twin). */
  imageBytes: number;
  /** N: each rollout's instruction. */
  instructions: string[];
}

const vector = (v: ArrayLike<number> | undefined, n: number, fill: number, what: string) => {
  if (v && v.length !== n) throw new Error(`imaginePolicy: ${what} has ${v.length} entries, the policy acts with ${n}`);
  return v ? Float32Array.from(v) : new Float32Array(n).fill(fill);
};

/**
 * Imagines N rollouts (`start.obs` Shape N x D with N instructions; B starts × G rollouts: repeat them with
 * repeatRows) of `horizon` steps under `policy` in `env`'s model. `twin` renders the images an image policy
 * reads (null for a policy that reads none). Resets `env`.
 */
export async function imaginePolicy(
  env: ModelEnv, twin: SceneTwin | null, policy: Policy,
  start: { obs: Float32Array; instructions: readonly string[] }, horizon: number, opts: ImaginePolicyOptions = {},
): Promise<PolicyImagination> {
  const D = env.model.dObs, A = policy.actDim, E = env.model.members, H = horizon;
  if (policy.obsDim !== D) throw new Error(`imaginePolicy: the policy reads ${policy.obsDim} observation entries, the world model predicts ${D}`);
  if (env.model.dAct !== A) throw new Error(`imaginePolicy: the policy acts with ${A} entries, the world model takes ${env.model.dAct}`);
  if (policy.chunk !== 1) throw new Error(`imaginePolicy: one action per step (chunk 1); this policy gives chunks of ${policy.chunk}`);
  if (!(Number.isInteger(H) && H > 0)) throw new Error(`imaginePolicy: horizon must be a positive integer, got ${H}`);
  const n = start.obs.length / D;
  if (!Number.isInteger(n) || n < 1) throw new Error(`imaginePolicy: start.obs has ${start.obs.length} values, not a positive multiple of ${D}`);
  if (start.instructions.length !== n) throw new Error(`imaginePolicy: ${start.instructions.length} instructions for ${n} rollouts`);
  const spec = policy.inputs();
  if ((spec.image || spec.features) && !twin) throw new Error(`imaginePolicy: the ${policy.kind} policy reads camera images; give the task's twin to render them`);
  if (twin && twin.dim !== D) throw new Error(`imaginePolicy: the twin's layout has ${twin.dim} entries, the world model predicts ${D}`);
  if (twin && spec.image && (spec.image.height !== twin.size || spec.image.width !== twin.size)) {
    throw new Error(`imaginePolicy: the policy reads ${spec.image.width}x${spec.image.height} images, the twin renders ${twin.size}x${twin.size}`);
  }
  const px = twin?.imageBytes ?? 0;
  if (opts.startImages && opts.startImages.length !== n * px) throw new Error(`imaginePolicy: startImages have ${opts.startImages.length} bytes, expected ${n} x ${px}`);
  const noise = opts.noise ?? (() => {
    const rng = new Rng(opts.seed ?? 0);
    return Float32Array.from({ length: n * H * A }, () => rng.normal());
  })();
  if (noise.length !== n * H * A) throw new Error(`imaginePolicy: noise has ${noise.length} values, expected N x H x A = ${n} x ${H} x ${A}`);
  const lo = vector(opts.actLow, A, -1, 'actLow'), hi = vector(opts.actHigh, A, 1, 'actHigh');

  const res: PolicyImagination = {
    n, horizon: H,
    obs: new Float32Array(n * (H + 1) * D),
    actionRaw: new Float32Array(n * H * A),
    action: new Float32Array(n * H * A),
    logProb: new Float32Array(n * H),
    mean: new Float32Array(n * H * A),
    reward: new Float32Array(n * H),
    successProb: new Float32Array(n * H),
    disagreement: new Float32Array(n * H),
    memberReward: new Float32Array(E * n * H),
    member: new Int32Array(n * H),
    noise,
    images: new Uint8Array(n * (H + 1) * px),
    imageBytes: px,
    instructions: [...start.instructions],
  };
  // Rows of step t: rollout i's entry t of an [N, steps, width] array.
  const put = (dst: Float32Array | Uint8Array, src: Float32Array | Uint8Array, width: number, steps: number, t: number) => {
    for (let i = 0; i < n; i++) dst.set(src.subarray(i * width, (i + 1) * width), (i * steps + t) * width);
  };
  let obs = env.reset(start.obs, opts.members ? { members: opts.members } : {});
  let images = twin ? (opts.startImages ?? twin.render(obs)) : new Uint8Array(0);
  const stepNoise = new Float32Array(n * A);
  for (let t = 0; t < H; t++) {
    put(res.obs, obs, D, H + 1, t);
    if (twin) put(res.images, images, px, H + 1, t);
    for (let i = 0; i < n; i++) stepNoise.set(noise.subarray((i * H + t) * A, (i * H + t + 1) * A), i * A);
    const ctx: PolicyContext = { ...(twin ? { images } : {}), instructions: res.instructions };
    const a = await policy.act(obs, stepNoise, ctx);
    const sent = a.action.map((v, k) => Math.min(hi[k % A]!, Math.max(lo[k % A]!, v)));
    put(res.actionRaw, a.action, A, H, t);
    put(res.action, sent, A, H, t);
    put(res.mean, a.mean, A, H, t);
    put(res.logProb, a.logProb, 1, H, t);
    const s = await env.step(sent);
    put(res.reward, s.reward, 1, H, t);
    put(res.successProb, s.successProb, 1, H, t);
    put(res.disagreement, s.disagreement, 1, H, t);
    for (let i = 0; i < n; i++) res.member[i * H + t] = s.member[i]!;
    for (let e = 0; e < E; e++) for (let i = 0; i < n; i++) res.memberReward[(e * n + i) * H + t] = s.memberReward[e * n + i]!;
    obs = s.obs;
    // the policy's next image: the twin's render of the model's prediction
    if (twin) images = twin.render(obs);
  }
  put(res.obs, obs, D, H + 1, H);
  if (twin) put(res.images, images, px, H + 1, H);
  return res;
}

/**
 * Steps `t0 ≤ t < t1` of rollout `i` flattened for the policy gradient: obs (M x D), sampled actions (M x A),
 * logProb (M) and the context the policy read (images and instructions), so
 * `policy.logProb(obs, actionRaw, context)` recomputes `logProb` under the current parameters.
 */
export function imaginedSteps(im: PolicyImagination, i: number, t0 = 0, t1 = im.horizon): { obs: Float32Array; actionRaw: Float32Array; logProb: Float32Array; context: PolicyContext } {
  const H = im.horizon;
  if (!(Number.isInteger(i) && i >= 0 && i < im.n)) throw new Error(`imaginedSteps: rollout ${i} is not in [0, ${im.n})`);
  if (!(Number.isInteger(t0) && Number.isInteger(t1) && t0 >= 0 && t1 <= H && t0 < t1)) throw new Error(`imaginedSteps: steps [${t0}, ${t1}) are not within [0, ${H})`);
  const D = im.obs.length / (im.n * (H + 1)), A = im.actionRaw.length / (im.n * H), px = im.imageBytes;
  const m = t1 - t0;
  return {
    obs: im.obs.slice((i * (H + 1) + t0) * D, (i * (H + 1) + t1) * D),
    actionRaw: im.actionRaw.slice((i * H + t0) * A, (i * H + t1) * A),
    logProb: im.logProb.slice(i * H + t0, i * H + t1),
    context: {
      ...(px ? { images: im.images.slice((i * (H + 1) + t0) * px, (i * (H + 1) + t1) * px) } : {}),
      instructions: new Array<string>(m).fill(im.instructions[i]!),
    },
  };
}

/** What a trainer takes of N imagined rollouts of H steps, whichever way they were imagined. */
export interface ImaginedArrays {
  /** Shape N x (H+1) x D. */
  obs: Float32Array;
  /** Shape N x H x A: the policy's samples. */
  actionRaw: Float32Array;
  /** Shape N x H. */
  logProb: Float32Array;
  reward: Float32Array;
  successProb: Float32Array;
  /** Shape E x N x H. */
  memberReward: Float32Array;
  /** Shape N x (H+1) x imageBytes: what an image policy read (null: the fused graph, which reads none). */
  images: Uint8Array | null;
  imageBytes: number;
  /** N: each rollout's instruction (null: the fused graph). */
  instructions: string[] | null;
}

/**
 * Imagines N rollouts of `horizon` steps from `start` under `policy`: in one fused graph of policy and ensemble where
 * `graph` is given (a policy of the observation vector alone), else step by step through `imaginePolicy`.
 */
export async function imagineRollouts(
  env: ModelEnv, twin: SceneTwin | null, policy: Policy, graph: GraphPolicy | null,
  start: { obs: Float32Array; instructions: readonly string[] }, horizon: number,
  opts: { members: ArrayLike<number>; noise: Float32Array; actLow: ArrayLike<number>; actHigh: ArrayLike<number> },
): Promise<ImaginedArrays> {
  if (graph) {
    const r = await env.imagine(start.obs, graph, horizon, { members: opts.members, policyNoise: opts.noise });
    return { ...r, actionRaw: r.policy.action_raw!, logProb: r.policy.logProb!, images: null, imageBytes: 0, instructions: null };
  }
  return imaginePolicy(env, twin, policy, start, horizon, opts);
}

/** A trainer's imagined rollouts, each cut at its predicted success. */
export interface ImaginedRollouts {
  /** Each rollout's steps for the policy gradient, with what the policy read at each. */
  traj: Trajectory[];
  score: number[];
  /** The members' variance of each score along its trajectory. */
  variance: number[];
  /** The predicted success at the end (1 where it passed the threshold). */
  successProb: number[];
}

/**
 * Each rollout ends at the first step whose predicted success exceeds `successThreshold`, as a real episode ends at
 * success; it is scored there (`collapse` of the predicted reward), and so is every member's reward along it.
 */
export function imaginedRollouts(im: ImaginedArrays, horizon: number, reads: Pick<PolicyInputs, 'image' | 'instruction'>, o: { successThreshold: number; mode: 'return' | 'last-minus-first'; k: number }): ImaginedRollouts {
  const H = horizon, N = im.successProb.length / H, E = im.memberReward.length / (N * H);
  const D = im.obs.length / (N * (H + 1)), A = im.actionRaw.length / (N * H);
  const out: ImaginedRollouts = { traj: [], score: [], variance: [], successProb: [] };
  for (let i = 0; i < N; i++) {
    const p = im.successProb.subarray(i * H, (i + 1) * H);
    const hit = p.findIndex((x) => x > o.successThreshold);
    const T = hit < 0 ? H : hit + 1;
    out.traj.push({
      obs: im.obs.subarray(i * (H + 1) * D, (i * (H + 1) + T) * D), action: im.actionRaw.subarray(i * H * A, (i * H + T) * A), logProb: im.logProb.subarray(i * H, i * H + T), steps: T,
      ...(reads.image ? { images: im.images!.subarray(i * (H + 1) * im.imageBytes, (i * (H + 1) + T) * im.imageBytes) } : {}),
      ...(reads.instruction ? { instructions: new Array<string>(T).fill(im.instructions![i]!) } : {}),
    });
    out.score.push(collapse(im.reward.subarray(i * H, (i + 1) * H), T, o.mode, o.k));
    const per = Array.from({ length: E }, (_, e) => collapse(im.memberReward.subarray((e * N + i) * H, (e * N + i + 1) * H), T, o.mode, o.k));
    const m = per.reduce((a, x) => a + x, 0) / E;
    out.variance.push(per.reduce((a, x) => a + (x - m) ** 2, 0) / E);
    out.successProb.push(hit < 0 ? p[H - 1]! : 1);
  }
  return out;
}

/**
 * A trainer's face (WmrlRun.face; default the policy itself) checked against the policy that acts on the robot and the
 * policy `trained` by the gradient, with `restate`: a robot episode as the face's update takes it, the face's
 * log-probabilities of the actions taken and what it reads of each step (it may read nothing the robot's policy did not).
 */
export function policyFace(policy: Policy, face: Policy | undefined, trained: Policy): { face: Policy; restate: (ep: RobotEpisode) => Promise<Trajectory> } {
  const f = face ?? policy, D = policy.obsDim, A = policy.actDim;
  if (trained !== f) throw new Error(`wmrl: the policy gradient trains a ${trained.kind} policy, not the ${f.kind} policy that imagines${face ? ' (the face)' : ''}`);
  if (f.obsDim !== D || f.actDim !== A || f.chunk !== policy.chunk) throw new Error(`wmrl: the face (${f.kind}) reads ${f.obsDim} entries and acts with ${f.chunk} x ${f.actDim}; the policy ${D} and ${policy.chunk} x ${A}`);
  const reads = f.inputs();
  if (f !== policy) {
    const acts = policy.inputs();
    const more = [reads.image && !acts.image ? 'the camera image' : '', reads.instruction && !acts.instruction ? 'the instruction' : '', reads.features ? 'backbone features' : ''].filter(Boolean);
    if (more.length) throw new Error(`wmrl: the face (${f.kind}) reads ${more.join(' and ')}, which the ${policy.kind} policy's robot episodes do not keep`);
  }
  const restate = async (ep: RobotEpisode): Promise<Trajectory> => {
    if (f === policy) return ep;
    const ctx = { ...(reads.image ? { images: ep.images } : {}), ...(reads.instruction ? { instructions: ep.instructions } : {}) };
    const logProb = ep.steps === 0 ? new Float32Array(0) : await f.logProb(ep.obs.subarray(0, ep.steps * D), ep.action.subarray(0, ep.steps * A), ctx);
    return { obs: ep.obs, action: ep.action, logProb, steps: ep.steps, ...ctx };
  };
  return { face: f, restate };
}
