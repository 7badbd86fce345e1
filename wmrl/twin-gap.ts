// The gap digital-twin imagination leaves (imagine-policy.ts): an image policy imagined in the world model
// from real start states, then its action sequence replayed open loop in the simulator from the same
// seeds. Per step t, the images the policy saw (the twin's render of the predicted state) against the
// simulator's camera at the true state, and the policy's mean action on each:
//
// - pixelMae: mean |twin(predicted_t) − camera(true_t)| / 255 over pixels and channels;
// - pixelChanged: fraction of pixels whose colour differs at all;
// - floorMae / floorChanged: the same for twin(true_t) against camera(true_t) — what rendering from the
//   layout alone costs (float32 states, what the layout leaves out) when the prediction is perfect;
// - staticMae: camera(true_0) against camera(true_t): the error of never updating the image, for scale;
// - stateRmse: RMS over the layout's joint positions of predicted − true;
// - actionImage: ‖π(true obs, twin image) − π(true obs, camera image)‖₂ — what the image alone moves the action;
// - actionTotal: ‖π(predicted obs, twin image) − π(true obs, camera image)‖₂ — image and state together;
// - actionStatic: ‖π(true obs, camera(true_0)) − π(true obs, camera image)‖₂ — the frozen image's, for scale.
import { assertSameLayout } from '../common/layout.js';
import { Rng } from '../nn/index.js';
import type { Env } from '../sim/index.js';
import type { SceneTwin } from '../sim/twin.js';
import type { Policy } from '../policies/types.js';
import type { ModelEnv } from '../worldmodel/index.js';
import { imaginePolicy } from './imagine-policy.js';

export interface TwinGapStep {
  pixelMae: number;
  pixelChanged: number;
  floorMae: number;
  floorChanged: number;
  staticMae: number;
  stateRmse: number;
  actionImage: number;
  actionTotal: number;
  actionStatic: number;
}

export interface TwinGap {
  /** Per step t = 1..H, averaged over rollouts. */
  perStep: TwinGapStep[];
  /** Averaged over steps 1..H and rollouts. */
  mean: TwinGapStep;
  rollouts: number;
  horizon: number;
}

function imageDiff(a: Uint8Array, b: Uint8Array): { mae: number; changed: number } {
  let s = 0, changed = 0;
  for (let p = 0; p < a.length; p += 3) {
    const d0 = Math.abs(a[p]! - b[p]!), d1 = Math.abs(a[p + 1]! - b[p + 1]!), d2 = Math.abs(a[p + 2]! - b[p + 2]!);
    s += d0 + d1 + d2;
    if (d0 + d1 + d2 > 0) changed++;
  }
  return { mae: s / a.length / 255, changed: changed / (a.length / 3) };
}

const dist = (a: Float32Array, b: Float32Array) => Math.sqrt(a.reduce((s, v, k) => s + (v - b[k]!) ** 2, 0));

/**
 * Imagines one rollout per seed of `sim` (its start state and instruction) for `horizon` steps under
 * `policy` (noise from `noiseSeed`; 0 std: pass `meanActions` for the mean action), replays the sent
 * actions in `sim` and measures the gap. `sim` renders images of the twin's size.
 */
export async function measureTwinGap(
  env: ModelEnv, twin: SceneTwin, policy: Policy, sim: Env, seeds: readonly number[], horizon: number,
  opts: { noiseSeed?: number; meanActions?: boolean } = {},
): Promise<TwinGap> {
  const D = twin.dim, A = policy.actDim, H = horizon, n = seeds.length, px = twin.imageBytes;
  assertSameLayout(twin.layout, sim.layout, 'twin gap', 'twin', 'sim');
  const starts = new Float32Array(n * D), startImages = new Uint8Array(n * px);
  const instructions: string[] = [];
  seeds.forEach((seed, i) => {
    const o = sim.reset(seed);
    starts.set(o.state, i * D);
    startImages.set(sim.render(twin.size), i * px);
    instructions.push(o.instruction);
  });
  const rng = new Rng(opts.noiseSeed ?? 0);
  const noise = Float32Array.from({ length: n * H * A }, () => (opts.meanActions ? 0 : rng.normal()));
  const im = await imaginePolicy(env, twin, policy, { obs: starts, instructions }, H, { noise, startImages });

  const zero = new Float32Array(A);
  const acc: TwinGapStep[] = Array.from({ length: H }, () => ({ pixelMae: 0, pixelChanged: 0, floorMae: 0, floorChanged: 0, staticMae: 0, stateRmse: 0, actionImage: 0, actionTotal: 0, actionStatic: 0 }));
  const nj = twin.layout.joints.length;
  for (let i = 0; i < n; i++) {
    sim.reset(seeds[i]);
    const first = sim.render(twin.size);
    for (let t = 1; t <= H; t++) {
      const truth = sim.step(im.action.subarray((i * H + t - 1) * A, (i * H + t) * A)).obs.state;
      const camera = sim.render(twin.size);
      const pred = im.obs.subarray((i * (H + 1) + t) * D, (i * (H + 1) + t + 1) * D);
      const seen = im.images.subarray((i * (H + 1) + t) * px, (i * (H + 1) + t + 1) * px);
      const gap = imageDiff(seen, camera), floor = imageDiff(twin.render(truth), camera);
      const ins = [instructions[i]!];
      const onCamera = (await policy.act(truth, zero, { images: camera, instructions: ins })).mean;
      const onTwin = (await policy.act(truth, zero, { images: seen, instructions: ins })).mean;
      const imagined = (await policy.act(pred, zero, { images: seen, instructions: ins })).mean;
      const frozen = (await policy.act(truth, zero, { images: first, instructions: ins })).mean;
      let se = 0;
      for (let j = 0; j < nj; j++) se += (pred[j]! - truth[j]!) ** 2;
      const a = acc[t - 1]!;
      a.pixelMae += gap.mae / n;
      a.pixelChanged += gap.changed / n;
      a.floorMae += floor.mae / n;
      a.floorChanged += floor.changed / n;
      a.staticMae += imageDiff(first, camera).mae / n;
      a.stateRmse += Math.sqrt(se / Math.max(1, nj)) / n;
      a.actionImage += dist(onTwin, onCamera) / n;
      a.actionTotal += dist(imagined, onCamera) / n;
      a.actionStatic += dist(frozen, onCamera) / n;
    }
  }
  const keys = Object.keys(acc[0]!) as Array<keyof TwinGapStep>;
  const mean = Object.fromEntries(keys.map((k) => [k, acc.reduce((s, a) => s + a[k], 0) / H])) as unknown as TwinGapStep;
  return { perStep: acc, mean, rollouts: n, horizon: H };
}
