// vla-update: the time of one policy-gradient update of bench vla's VLA head (the encoder frozen, as every RL row
// of bench vla post-trains it), trained on the frozen encoder's features encoded once per update (pg.ts, the VLA's
// encoderSplit) against the same update whose graph runs the encoder in every epoch's minibatches (the policy
// without its split). Per task, a batch the size of one imagined update of bench vla (16 prompts x 8 rollouts x the
// task's horizon: the camera images of gap-robot states under random actions, each step's instruction), the task's
// policy gradient (vlaPgConfig: lr, epochs, minibatch, push's KL penalty to the clone). Both start from the same
// parameters and shuffle with the same seed, so they must end at the same head: the largest difference is reported.
import { Rng } from '../nn/index.js';
import { ClippedPolicyGradient, type PgBatch } from '../policies/pg.js';
import type { VlaPolicy } from '../policies/vla.js';
import { makeEnv } from '../sim/index.js';
import { withoutEncoderSplit } from '../tests/helpers/policies.js';
import { fmt, median, type BenchOptions, type BenchReport } from './lib/report.js';
import { S, VLA_HIDDEN, VLA_TASKS as TASKS, gapRobot, makeVla, vlaPgConfig } from '../recipes/vla.js';

const VARIANTS = [
  { name: 'through_encoder', label: 'through the encoder (every minibatch)' },
  { name: 'cached_features', label: 'on cached features (encoded once)' },
] as const;

/** A batch of `rollouts` x the task's horizon steps: gap-robot states under random actions, their camera images and instructions. */
async function updateBatch(task: (typeof TASKS)[number], vla: VlaPolicy, rollouts: number, horizon: number | null, rng: Rng): Promise<{ batch: PgBatch; steps: number }> {
  const env = await makeEnv({ ...gapRobot(task), seed: 0 });
  try {
    const H = horizon ?? env.horizon, M = rollouts * H, D = vla.obsDim, A = vla.actDim, px = S * S * 3;
    const obs = new Float32Array(M * D), images = new Uint8Array(M * px), instructions: string[] = [];
    for (let i = 0; i < rollouts; i++) {
      let o = env.reset(1000 + i);
      for (let t = 0; t < H; t++) {
        const k = i * H + t;
        obs.set(o.state, k * D);
        images.set(o.image!, k * px);
        instructions.push(o.instruction);
        const r = env.step(Float32Array.from({ length: A }, () => rng.uniform(-1, 1)));
        o = r.terminated || r.truncated ? env.reset(2000 + k) : r.obs;
      }
    }
    const acted = await vla.act(obs, Float32Array.from({ length: M * A }, () => rng.normal()), { images, instructions });
    const advantage = Float32Array.from({ length: M }, (_, k) => (Math.floor(k / H) % 2 ? 1 : -1) * rng.uniform(0.5, 1.5));
    return { batch: { obs, action: acted.action, oldLogProb: acted.logProb, advantage, weight: new Float32Array(M).fill(1), images, instructions }, steps: M };
  } finally {
    env.dispose();
  }
}

interface Row {
  task: (typeof TASKS)[number];
  steps: number;
  seconds: Record<(typeof VARIANTS)[number]['name'], number>;
  speedup: number;
  /** Largest |difference| between the two variants' head parameters after one update from the same start. */
  maxDiff: number;
  /** Largest |change| of the head parameters by the update (what the difference is measured against). */
  maxMove: number;
}

export async function run(o: BenchOptions): Promise<BenchReport> {
  const q = o.quick;
  const repeats = q ? 2 : 6, rollouts = q ? 16 : 128, horizon = q ? 20 : null;
  const total = TASKS.length * (1 + VARIANTS.length * repeats);
  let done = 0;
  const rows: Row[] = [];
  for (const task of TASKS) {
    o.progress(done, total, `${task}: batch`);
    const probe = await makeEnv(gapRobot(task));
    const D = probe.observationSpace.state.shape[0];
    const vla = makeVla(probe, VLA_HIDDEN[task])(new Array<number>(D).fill(0), new Array<number>(D).fill(1));
    probe.dispose();
    try {
      const { batch, steps } = await updateBatch(task, vla, rollouts, horizon, new Rng(3));
      o.progress(++done, total, `${task}: ${steps} steps`);
      const start = vla.paramNames().map((n) => Float32Array.from(vla.store.get(n).data));
      const head = vla.headParamNames();
      const seconds = {} as Row['seconds'];
      const after = new Map<string, Float32Array[]>();
      for (const v of VARIANTS) {
        const times: number[] = [];
        for (let r = 0; r < repeats; r++) {
          vla.paramNames().forEach((n, i) => vla.store.set(n, start[i]!));
          const pg = await ClippedPolicyGradient.create(v.name === 'cached_features' ? vla : withoutEncoderSplit(vla), vlaPgConfig(q, task), { trainable: head });
          const t0 = performance.now();
          await pg.update(batch, new Rng(7));
          // the first update of each variant compiles its programs: a warm-up, not timed
          if (r > 0) times.push((performance.now() - t0) / 1000);
          if (r === 0) after.set(v.name, head.map((n) => Float32Array.from(vla.store.get(n).data)));
          await pg.release();
          o.progress(++done, total, `${task}: ${v.label}, ${r + 1}/${repeats}`);
        }
        seconds[v.name] = median(times);
      }
      let maxDiff = 0, maxMove = 0;
      const a = after.get('cached_features')!, b = after.get('through_encoder')!;
      head.forEach((n, i) => {
        const s = start[vla.paramNames().indexOf(n)]!;
        a[i]!.forEach((x, j) => {
          maxDiff = Math.max(maxDiff, Math.abs(x - b[i]![j]!));
          maxMove = Math.max(maxMove, Math.abs(x - s[j]!));
        });
      });
      rows.push({ task, steps, seconds, speedup: seconds.through_encoder / seconds.cached_features, maxDiff, maxMove });
    } finally {
      await vla.release();
    }
  }
  const pg = (t: (typeof TASKS)[number]) => vlaPgConfig(q, t);
  const sentences = rows.map((r) => `${r.task} (${r.steps} steps, ${pg(r.task).epochs} epoch${pg(r.task).epochs === 1 ? '' : 's'} of minibatch ${pg(r.task).minibatch}${pg(r.task).klCoef ? `, KL penalty β ${pg(r.task).klCoef}` : ''}): the update on cached features takes ${fmt(r.seconds.cached_features, 3)} s against ${fmt(r.seconds.through_encoder, 3)} s through the encoder, ${fmt(r.speedup, 3)}x faster; the two heads differ by at most ${fmt(r.maxDiff, 2)} after it, against a largest move of ${fmt(r.maxMove, 2)}.`);
  const result: Record<string, number> = {};
  for (const r of rows) {
    result[`${r.task}_speedup`] = Number(r.speedup.toFixed(3));
    result[`${r.task}_cached_s`] = Number(r.seconds.cached_features.toFixed(3));
    result[`${r.task}_through_s`] = Number(r.seconds.through_encoder.toFixed(3));
    result[`${r.task}_max_diff`] = r.maxDiff;
  }
  return {
    title: "A VLA head's policy-gradient update on the frozen encoder's cached features vs through the encoder",
    summary: [
      `Bench vla's VLA (${S}x${S} camera, conv 8-16, 32 image features, 16-d word embeddings; fusion MLP ${TASKS.map((t) => `${VLA_HIDDEN[t].join('x')} for ${t}`).join(', ')}), its head post-trained with the encoder frozen by the task's policy gradient (bench vla's vlaPgConfig) on a batch of ${rollouts} rollouts x ${horizon ?? "the task's horizon"} steps of gap-robot camera images and instructions; the median of ${repeats - 1} timed update${repeats === 2 ? '' : 's'} per variant after an untimed one (which compiles its programs), each from the same parameters with the same shuffle, one process, threads 1.`,
      ...sentences,
    ].join('\n'),
    header: ['task', 'steps', ...VARIANTS.map((v) => `${v.label}, s`), 'speedup', 'largest head difference', 'largest head move'],
    rows: rows.map((r) => [r.task, r.steps, ...VARIANTS.map((v) => fmt(r.seconds[v.name], 3)), `${fmt(r.speedup, 3)}x`, fmt(r.maxDiff, 2), fmt(r.maxMove, 2)]),
    plot: { title: 'One VLA head update (s)', xLabel: 'task, variant', yLabel: 'seconds', bars: rows.flatMap((r) => VARIANTS.map((v) => ({ label: `${r.task}, ${v.name.replace('_', ' ')}`, value: r.seconds[v.name] }))) },
    result,
  };
}
