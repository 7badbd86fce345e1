// bench vla's measurements of a VLA, its latent face and the world model beside the success the cells report: the
// references' success (the scripted expert, the robust demonstrator), the within-group rank agreement between robot
// and imagined returns (and its ceilings: the face on the robot, the robot's own repeatability), and the action gaps
// imagination's stand-ins leave on the states the clone visits. Part of the cells' code (bench/cells/vla.ts), so
// nothing here imports the report's.
import { contextOf, noisedRollout } from '../../policies/demos.js';
import type { LatentVla } from '../../policies/latent-vla.js';
import type { Policy } from '../../policies/types.js';
import type { VlaPolicy } from '../../policies/vla.js';
import { Rng } from '../../nn/index.js';
import { makeEnv, type Env, type EvaluationSplit, type SceneTwin } from '../../sim/index.js';
import { ModelEnv, repeatRows, type EnsembleModel } from '../../worldmodel/index.js';
import { rankAgreement } from '../../wmrl/gate.js';
import { imaginePolicy } from '../../wmrl/imagine-policy.js';

/** The median of a non-empty list. */
function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Success of the scripted expert, or of the robust demonstrator, itself on the gap robot, on the split's two held-out sets. */
export async function expertOn(task: string, split: EvaluationSplit, who: 'expert' | 'demonstrator', latencySteps: number): Promise<{ heldOutStates: number; heldOutCombinations: number }> {
  const env = await makeEnv({ task, profile: 'gap' });
  try {
    const rate = (seeds: readonly number[]) => seeds.filter((seed) => {
      let o = env.reset(seed);
      const expert = who === 'expert' ? env.expert() : env.demonstrator({ latencySteps });
      for (;;) {
        const r = env.step(expert.act(o));
        o = r.obs;
        if (r.terminated || r.truncated) return !!r.info.success;
      }
    }).length / seeds.length;
    return { heldOutStates: rate(split.heldOutStates), heldOutCombinations: rate(split.heldOutCombinations) };
  } finally {
    env.dispose();
  }
}

/**
 * The rank agreements' groups: B start states (`seeds`) x G rollouts of at most H steps of the VLA on the robot (its
 * camera), rollout i driven by `noise` rows i (Shape B·G x H x A, drawn from `seed`), with their dense returns — run
 * once, then compared with the same rollouts imagined (`imaginedAgreement`) and run by the latent face
 * (`faceOnRobotAgreement`).
 */
export interface AgreementGroups {
  seeds: readonly number[];
  G: number;
  H: number;
  /** What `noise` is drawn from (agreementNoise). */
  noiseSeed: number;
  noise: Float32Array;
  /** Shape B x D: each group's start state on the robot, and its instruction (what imagination starts from). */
  starts: Float32Array;
  instructions: string[];
  /** Shape B·G: the VLA's dense return on the robot, per rollout. */
  real: number[];
  /** Shape B·G x H: the VLA's dense reward on the robot per rollout and step (0 after the episode ended). */
  realSteps: Float32Array;
}

/**
 * The first steps of a rollout the rank agreement is also measured over (where shorter than the horizon): how far
 * into an episode the world model still ranks a group as the robot does.
 */
export const AGREEMENT_STEPS = [25, 50, 100] as const;

/**
 * The dense return of each of the B·G rollouts of `who` on `robot` (reading its camera, or the state and instruction
 * alone). `reseed`: rollout i meets the robot's sensor noise and control jitter drawn from `reseed + i` from its first
 * step on (the same start observation), not the stream its start seed gives.
 */
async function robotReturns(who: Policy, camera: boolean, robot: Env, seeds: readonly number[], G: number, H: number, noise: Float32Array, reseed?: number, steps?: Float32Array): Promise<number[]> {
  const A = who.actDim;
  if (steps && steps.length !== seeds.length * G * H) throw new Error(`vla bench: ${steps.length} per-step rewards for ${seeds.length * G} rollouts of ${H} steps`);
  const out: number[] = [];
  for (let i = 0; i < seeds.length * G; i++) {
    const r = await noisedRollout(robot, who, seeds[Math.floor(i / G)]!, noise.subarray(i * H * A, (i + 1) * H * A), H, { ...(reseed === undefined ? {} : { reseed: reseed + i }), context: (ob) => (camera ? contextOf(ob) : { instructions: [ob.instruction] }) });
    steps?.set(r.rewards, i * H);
    out.push(r.return);
  }
  return out;
}

/** The policy noise of `n` rollouts of H steps of A action entries, drawn from `seed`. */
const agreementNoise = (n: number, H: number, A: number, seed: number) => {
  const rng = new Rng(seed);
  return Float32Array.from({ length: n * H * A }, () => rng.normal());
};

/** Runs the agreement groups' rollouts of the VLA on the robot (see AgreementGroups). */
export async function agreementGroups(vla: VlaPolicy, robot: Env, seeds: readonly number[], G: number, H: number, seed: number): Promise<AgreementGroups> {
  const noise = agreementNoise(seeds.length * G, H, vla.actDim, seed);
  const D = vla.obsDim, starts = new Float32Array(seeds.length * D), instructions: string[] = [];
  seeds.forEach((s, b) => {
    const ob = robot.reset(s);
    starts.set(ob.state, b * D);
    instructions.push(ob.instruction);
  });
  const realSteps = new Float32Array(seeds.length * G * H);
  return { seeds, G, H, noiseSeed: seed, noise, starts, instructions, real: await robotReturns(vla, true, robot, seeds, G, H, noise, undefined, realSteps), realSteps };
}

/** Agreement groups as JSON keeps them: the noise is drawn again from its seed. */
export type SavedGroups = Omit<AgreementGroups, 'noise' | 'starts' | 'realSteps'> & { starts: number[]; realSteps: number[] };

export const saveGroups = ({ noise: _noise, ...g }: AgreementGroups): SavedGroups => ({ ...g, starts: Array.from(g.starts), realSteps: Array.from(g.realSteps) });

/** The groups `saved` keeps, for a policy of `actDim` action entries; refused where the sizes disagree. */
export function restoreGroups(saved: SavedGroups, actDim: number): AgreementGroups {
  const n = saved.seeds.length * saved.G;
  if (saved.real.length !== n || saved.realSteps.length !== n * saved.H) throw new Error(`vla bench: saved agreement groups hold ${saved.real.length} returns and ${saved.realSteps.length} per-step rewards for ${n} rollouts of ${saved.H} steps`);
  return { ...saved, noise: agreementNoise(n, saved.H, actDim, saved.noiseSeed), starts: Float32Array.from(saved.starts), realSteps: Float32Array.from(saved.realSteps) };
}

/**
 * Median over groups of the within-group Spearman of `x` against the robot returns (`real`: of another span than the
 * whole rollout); groups whose robot returns all tie are skipped.
 */
function withinGroup(g: Pick<AgreementGroups, 'seeds' | 'G' | 'real'>, x: readonly number[], real: readonly number[] = g.real): number {
  const rho: number[] = [];
  for (let b = 0; b < g.seeds.length; b++) {
    const r = real.slice(b * g.G, (b + 1) * g.G);
    // An imagined side that ties throughout ranks nothing: it agrees at 0.
    if (Math.max(...r) > Math.min(...r)) rho.push(rankAgreement(x.slice(b * g.G, (b + 1) * g.G), r) || 0);
  }
  return rho.length ? median(rho) : NaN;
}

/**
 * Within-group rank agreement (Spearman, median over groups) between the dense returns of the VLA's rollouts on
 * the robot (`g`: the gap profile with its camera) and imagined by `model` under its current context with the
 * actions `delay` steps late, the VLA reading the twin's renders, from the same starts with the same policy noise.
 * GRPO learns only from this order, so it says whether the dense world-model signal carries the robot's. Imagined
 * rollouts end where predicted success passes `successThreshold`, as the trainer's do. `whole`: over the whole
 * rollouts; `firstSteps`: over their first AGREEMENT_STEPS steps (firstStepsAgreement).
 */
export async function imaginedAgreement(g: AgreementGroups, vla: VlaPolicy, model: EnsembleModel, twin: SceneTwin, robot: Env, delay: number, successThreshold: number, seed: number): Promise<{ whole: number; firstSteps: number[] }> {
  const D = vla.obsDim, N = g.seeds.length * g.G, H = g.H;
  const instructions = g.instructions.flatMap((x) => new Array<string>(g.G).fill(x));
  const env = new ModelEnv(model, { members: 'fixed', seed, actionDelay: delay });
  const members = Int32Array.from({ length: N }, (_, i) => Math.floor(i / g.G) % model.members);
  const im = await imaginePolicy(env, twin, vla, { obs: repeatRows(g.starts, D, g.G), instructions }, H, { members, noise: g.noise, actLow: robot.actionSpace.low, actHigh: robot.actionSpace.high });
  await env.release();
  // Per step, 0 after predicted success ends the rollout.
  const steps = new Float32Array(N * H);
  for (let i = 0; i < N; i++) {
    for (let t = 0; t < H; t++) {
      steps[i * H + t] = im.reward[i * H + t]!;
      if (im.successProb[i * H + t]! > successThreshold) break;
    }
  }
  return { whole: withinGroup(g, firstSums(steps, N, H, H)), firstSteps: firstStepsAgreement(g, steps) };
}

/** Per rollout, the sum of its first K of H per-step values (`steps`: n x H). */
const firstSums = (steps: Float32Array, n: number, H: number, K: number) => Array.from({ length: n }, (_, i) => steps.subarray(i * H, i * H + K).reduce((a, b) => a + b, 0));

/**
 * Within-group rank agreement (withinGroup) between the sums of the first K steps of `imagined` (B·G x H per-step
 * rewards) and of the robot's (`g.realSteps`), for each K of AGREEMENT_STEPS shorter than the horizon.
 */
export function firstStepsAgreement(g: Pick<AgreementGroups, 'seeds' | 'G' | 'H' | 'real' | 'realSteps'>, imagined: Float32Array): number[] {
  const n = g.seeds.length * g.G;
  if (imagined.length !== n * g.H || g.realSteps.length !== n * g.H) throw new Error(`vla bench: ${imagined.length} imagined and ${g.realSteps.length} robot per-step rewards for ${n} rollouts of ${g.H} steps`);
  return AGREEMENT_STEPS.filter((K) => K < g.H).map((K) => withinGroup(g, firstSums(imagined, n, g.H, K), firstSums(g.realSteps, n, g.H, K)));
}

/**
 * Within-group rank agreement between the VLA's robot returns (`g`) and `face`'s on the same robot (no camera: the
 * face reads the state), same starts and noise: what a perfect world model would give imagination through the face
 * (IMAGINE 'face'), the ceiling the face alone leaves to `imaginedAgreement`.
 */
export async function faceOnRobotAgreement(g: AgreementGroups, face: LatentVla, robot: Env): Promise<number> {
  return withinGroup(g, await robotReturns(face, false, robot, g.seeds, g.G, g.H, g.noise));
}

/**
 * The robot's repeatability: within-group rank agreement between the VLA's robot returns (`g`) and the same
 * rollouts (same starts, same policy noise) run again on the robot under other sensor noise and control jitter.
 * Imagination cannot know the robot's noise, so this bounds the rank agreement any world model can reach: where
 * it is low, the robot's own randomness rather than the policy's noise decides a group's order.
 */
export async function repeatability(g: AgreementGroups, vla: VlaPolicy, robot: Env, reseed: number): Promise<number> {
  return withinGroup(g, await robotReturns(vla, true, robot, g.seeds, g.G, g.H, g.noise, reseed));
}

/** What imagination's stand-ins do to the VLA's mean action on the states it visits on the robot (see `imaginationGaps`). */
export interface ImaginationGaps {
  /** Robot states measured (every step of the episodes). */
  states: number;
  /** Mean |Δ| per action entry: the VLA on the twin's render of the observed state against the VLA on the robot's camera. */
  twinVsCamera: number;
  /** The latent face (the observed state alone) against the VLA on the robot's camera. */
  faceVsCamera: number;
  /** The scale: mean |a − mean a| per action entry of the VLA's camera actions over these states. */
  spread: number;
}

/**
 * The gaps imagination leaves on the states that matter: every step of the VLA's mean-action episodes on the robot
 * from `seeds`, where the VLA reads the camera; there the VLA on the digital twin's render of the observed state
 * (what imagining on the twin shows it) and its latent face (what imagining through the face shows it) are compared
 * with the VLA's own action. The face's distillation report measures its gap on its own held-out distillation
 * states, which the clone's episodes need not resemble.
 */
export async function imaginationGaps(vla: VlaPolicy, face: LatentVla, twin: SceneTwin, robot: Env, seeds: readonly number[]): Promise<ImaginationGaps> {
  const A = vla.actDim, zeros = new Float32Array(A);
  const camera: Float32Array[] = [], onTwin: Float32Array[] = [], viaFace: Float32Array[] = [];
  for (const seed of seeds) {
    let ob = robot.reset(seed);
    for (;;) {
      const a = (await vla.act(ob.state, zeros, contextOf(ob))).mean;
      camera.push(a);
      onTwin.push((await vla.act(ob.state, zeros, { images: twin.render(ob.state), instructions: [ob.instruction] })).mean);
      viaFace.push((await face.act(ob.state, zeros, { instructions: [ob.instruction] })).mean);
      const r = robot.step(a);
      ob = r.obs;
      if (r.terminated || r.truncated) break;
    }
  }
  const n = camera.length;
  const gap = (xs: Float32Array[]) => xs.reduce((s, x, i) => s + x.reduce((t, v, j) => t + Math.abs(v - camera[i]![j]!), 0), 0) / (n * A);
  const mu = Array.from({ length: A }, (_, j) => camera.reduce((s, x) => s + x[j]!, 0) / n);
  return { states: n, twinVsCamera: gap(onTwin), faceVsCamera: gap(viaFace), spread: gap(camera.map(() => Float32Array.from(mu))) };
}

