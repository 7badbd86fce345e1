// wm-rollout: what multi-step fitting (worldmodel/multistep.ts fitRollout) changes in the world model the product
// pretrains. The same one-step fit (the vla bench's: 1500 exploratory episodes under randomized profiles, context-
// conditioned, the robot's command tail in the observation), then, on a copy, the multi-step passes pretraining
// runs by default. Both are judged where imagination uses them, against the gap robot (the vla bench's robot):
// - open loop: the robust demonstrator's recorded episodes on the robot, replayed through each model under the
//   robot's true context and latency, the predicted observation's error against the recorded one at 25..200 steps;
// - closed loop: the same demonstrator driving each model from the same starts (it reads only the imagined
//   observation), how often the model's success head says the task was solved, against the robot's success;
// - the cost: each model's one-step NLL on held-out sim episodes (what the one-step fit minimizes).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeEnv, exploratoryEpisodes, type Obs } from '../sim/index.js';
import { DEFAULT_PRETRAIN, pretrainWorldModel } from '../wmrl/sim-setup.js';
import { EnsembleModel, ModelEnv, TransitionBuffer, fitRollout } from '../worldmodel/index.js';
import { fmt, type BenchOptions, type BenchReport, type Series } from './lib/report.js';
import { COMMAND_HISTORY, LATENCY } from '../recipes/vla.js';
import { CONTEXT_TRUTH } from './vla.js';

export const tasks = ['reach', 'push'] as const;
/** The open-loop horizons: these fractions of the median length of the robot's episodes (reach's end at success). */
const FRACTIONS = [0.25, 0.5, 0.75, 1];
const FRACTION_NAMES = ['1/4', '1/2', '3/4', '1'];
const VARIANTS = ['one-step', 'multi-step'] as const;
type Variant = (typeof VARIANTS)[number];

interface RobotEpisode {
  states: Float32Array[];
  sent: Float32Array[];
  instruction: string;
  success: boolean;
}

interface Judged {
  /** Per horizon (FRACTIONS): RMS over episodes and dynamics entries of the open-loop error, in units of each entry's spread in the sim data. */
  openLoop: number[];
  /** Fraction of closed-loop imagined episodes whose success probability passed 0.5 at some step. */
  imaginedSuccess: number;
  /** One-step NLL over the dynamics entries on held-out sim episodes. */
  nll: number;
}

/** The robust demonstrator on the gap robot from each seed: the states it saw, the commands it sent, its success. */
async function robotEpisodes(task: string, seeds: number[]): Promise<RobotEpisode[]> {
  const env = await makeEnv({ task, profile: 'gap', commandHistory: COMMAND_HISTORY });
  const out: RobotEpisode[] = [];
  for (const seed of seeds) {
    let ob = env.reset(seed);
    const dem = env.demonstrator({ latencySteps: LATENCY });
    const ep: RobotEpisode = { states: [ob.state], sent: [], instruction: ob.instruction, success: false };
    for (let t = 0; t < env.horizon; t++) {
      const a = dem.act(ob).map((v) => Math.max(-1, Math.min(1, v)));
      dem.executed(a);
      const s = env.step(a);
      ob = s.obs;
      ep.states.push(ob.state);
      ep.sent.push(a);
      if (s.terminated || s.truncated) {
        ep.success = s.info.success;
        break;
      }
    }
    out.push(ep);
  }
  return out;
}

async function judge(task: string, model: EnsembleModel, eps: RobotEpisode[], horizons: number[], heldOut: Parameters<EnsembleModel['evaluate']>[0]): Promise<Judged> {
  model.setContext(Float32Array.from(CONTEXT_TRUTH, Math.log));
  const N = eps.length, D = model.dObs, A = model.dAct;
  const dims = model.dynamicsDims;
  const scale = model.normalizer.inStd;
  const starts = new Float32Array(N * D);
  eps.forEach((e, i) => starts.set(e.states[0]!, i * D));
  // Open loop: the recorded commands, delayed as the robot delays them.
  const H = Math.max(...eps.map((e) => e.sent.length));
  const sq = horizons.map(() => ({ sum: 0, n: 0 }));
  let env = new ModelEnv(model, { members: 'mean', actionDelay: LATENCY });
  env.reset(starts);
  for (let t = 0; t < Math.min(H, horizons[horizons.length - 1]!); t++) {
    const act = new Float32Array(N * A);
    eps.forEach((e, i) => act.set(e.sent[Math.min(t, e.sent.length - 1)]!, i * A));
    const s = await env.step(act);
    const k = horizons.indexOf(t + 1);
    if (k < 0) continue;
    eps.forEach((e, i) => {
      if (e.states.length <= t + 1) return;
      for (const j of dims) sq[k]!.sum += ((s.obs[i * D + j]! - e.states[t + 1]![j]!) / (scale[j]! || 1)) ** 2;
      sq[k]!.n += dims.length;
    });
  }
  await env.release();
  // Closed loop: the demonstrator reads the imagined observation.
  const robot = await makeEnv({ task, profile: 'gap', commandHistory: COMMAND_HISTORY });
  const dems = eps.map(() => robot.demonstrator({ latencySteps: LATENCY }));
  env = new ModelEnv(model, { members: 'mean', actionDelay: LATENCY });
  env.reset(starts);
  let obs: Float32Array = starts;
  const solved = new Array<boolean>(N).fill(false);
  for (let t = 0; t < robot.horizon; t++) {
    const act = new Float32Array(N * A);
    for (let i = 0; i < N; i++) {
      const o: Obs = { state: obs.slice(i * D, (i + 1) * D), instruction: eps[i]!.instruction };
      const a = dems[i]!.act(o).map((v) => Math.max(-1, Math.min(1, v)));
      dems[i]!.executed(a);
      act.set(a, i * A);
    }
    const s = await env.step(act);
    obs = s.obs;
    for (let i = 0; i < N; i++) if (s.successProb[i]! > 0.5) solved[i] = true;
  }
  await env.release();
  const ev = await model.evaluate(heldOut);
  return { openLoop: sq.map((q) => (q.n > 0 ? Math.sqrt(q.sum / q.n) : NaN)), imaginedSuccess: solved.filter(Boolean).length / N, nll: ev.dynamics.nll };
}

export async function run(o: BenchOptions): Promise<BenchReport> {
  const q = o.quick;
  const runTasks = o.task ? [o.task] : [...tasks];
  const wm = { ...DEFAULT_PRETRAIN, ...(q ? { wmEpisodes: 12, wmEpochs: 2, wmHidden: [64, 64], wmMembers: 3 } : { wmEpisodes: 1500 }) };
  const rolloutEpochs = q ? 1 : DEFAULT_PRETRAIN.wmRolloutEpochs;
  const N = q ? 4 : 32, heldEpisodes = q ? 4 : 50;
  const steps = runTasks.length * 5;
  let done = 0;
  const results = new Map<string, { robotSuccess: number; horizons: number[]; judged: Record<Variant, Judged> }>();
  const dir = mkdtempSync(join(tmpdir(), 'wmrl-wm-rollout-'));
  try {
    for (const task of runTasks) {
      o.progress(done, steps, `${task}: one-step fit`);
      const { model, simData } = await pretrainWorldModel({ ...wm, task, seed: 0, commandHistory: COMMAND_HISTORY, wmRolloutEpochs: 0, onProgress: (w, k, n) => o.progress(done, steps, `${task}: ${w} ${k}/${n}`) });
      o.progress(++done, steps, `${task}: multi-step fit`);
      const path = join(dir, `${task}.safetensors`);
      model.save(path);
      const multi = EnsembleModel.load(path);
      await fitRollout(multi, simData, { steps: DEFAULT_PRETRAIN.wmRolloutSteps, epochs: rolloutEpochs, seed: 0, onEpoch: (r) => o.progress(done, steps, `${task}: multi-step fit ${r.epoch}/${rolloutEpochs}`) });
      o.progress(++done, steps, `${task}: held-out sim episodes, robot episodes`);
      const held = await exploratoryEpisodes(task, heldEpisodes, 900_000, { commandHistory: COMMAND_HISTORY, randomize: DEFAULT_PRETRAIN.wmRandomize });
      const buf = new TransitionBuffer(held.dObs, held.dAct, wm.wmActionHistory, held.contextNames?.length ?? 0);
      for (const e of held.episodes) buf.addEpisode({ ...e, weight: 1 });
      const eps = await robotEpisodes(task, Array.from({ length: N }, (_, i) => 700_000 + i));
      const lengths = eps.map((e) => e.sent.length).sort((a, b) => a - b);
      const medianLength = lengths[Math.floor((lengths.length - 1) / 2)]!;
      const horizons = FRACTIONS.map((f) => Math.max(1, Math.round(f * medianLength)));
      o.progress(++done, steps, `${task}: judging the one-step model`);
      const one = await judge(task, model, eps, horizons, buf.transitions());
      o.progress(++done, steps, `${task}: judging the multi-step model`);
      const ms = await judge(task, multi, eps, horizons, buf.transitions());
      await model.release();
      await multi.release();
      results.set(task, { robotSuccess: eps.filter((e) => e.success).length / N, horizons, judged: { 'one-step': one, 'multi-step': ms } });
      o.progress(++done, steps, `${task}: done`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const rows: Array<Array<string | number>> = [];
  const lines: Series[] = [];
  const result: Record<string, number> = {};
  for (const [task, r] of results) {
    for (const v of VARIANTS) {
      const j = r.judged[v];
      rows.push([task, v, r.horizons.join('/'), ...j.openLoop.map((x) => fmt(x, 3)), `${Math.round(100 * j.imaginedSuccess)}%`, `${Math.round(100 * r.robotSuccess)}%`, fmt(j.nll, 3)]);
      lines.push({ label: `${task} ${v}`, points: r.horizons.map((h, k) => [h, j.openLoop[k]!] as [number, number]) });
    }
    const one = r.judged['one-step'], ms = r.judged['multi-step'];
    result[`${task}_half_ratio`] = Number((ms.openLoop[1]! / one.openLoop[1]!).toFixed(3));
    result[`${task}_end_ratio`] = Number((ms.openLoop[3]! / one.openLoop[3]!).toFixed(3));
    result[`${task}_imagined_success_one_step`] = one.imaginedSuccess;
    result[`${task}_imagined_success_multi_step`] = ms.imaginedSuccess;
    result[`${task}_robot_success`] = r.robotSuccess;
    result[`${task}_nll_one_step`] = Number(one.nll.toFixed(4));
    result[`${task}_nll_multi_step`] = Number(ms.nll.toFixed(4));
  }
  const sentences = [...results].map(([task, r]) => {
    const one = r.judged['one-step'], ms = r.judged['multi-step'];
    return `On ${task}, multi-step fitting changed the open-loop error by a factor ${fmt(ms.openLoop[1]! / one.openLoop[1]!, 2)} at ${r.horizons[1]} steps and ${fmt(ms.openLoop[3]! / one.openLoop[3]!, 2)} at ${r.horizons[3]} (the robot's median episode length); driven by the demonstrator, the model's success head called ${Math.round(100 * ms.imaginedSuccess)}% of imagined episodes solved (one-step: ${Math.round(100 * one.imaginedSuccess)}%; the robot: ${Math.round(100 * r.robotSuccess)}%); its held-out one-step NLL went from ${fmt(one.nll, 3)} to ${fmt(ms.nll, 3)}.`;
  });
  return {
    title: 'wm-rollout: the world model after a one-step fit vs after multi-step fitting, judged against the gap robot',
    summary:
      `Per task: the product's world model (${wm.wmMembers} members, ${wm.wmHidden.join('x')}, ${wm.wmEpisodes} exploratory episodes under profiles randomized by up to x${wm.wmRandomize}, ${wm.wmEpochs} one-step epochs, the robot's ${COMMAND_HISTORY}-command tail in the observation), then a copy fitted ${rolloutEpochs} pass${rolloutEpochs === 1 ? '' : 'es'} more through ${DEFAULT_PRETRAIN.wmRolloutSteps}-step open-loop rollouts (fitRollout's defaults otherwise). ` +
      `Robot: the gap profile (${LATENCY}-step latency), the task's robust demonstrator from ${N} start states. Open loop: the recorded commands replayed through each model (members' mean, the robot's true context and latency); RMS error over the dynamics entries, each in units of its spread in the sim data, at ${FRACTION_NAMES.join(', ')} x the median episode length (over the episodes that last that long). ` +
      `Closed loop: the demonstrator driving each model from the same starts; imagined success = the model's success probability above 0.5 at some step. NLL: one-step, dynamics entries, ${heldEpisodes} held-out randomized sim episodes. Seed 0.\n\n` +
      sentences.join(' '),
    header: ['task', 'model', 'horizons (steps)', ...FRACTION_NAMES.map((f) => `open-loop error @${f}`), 'imagined success (demonstrator)', 'robot success', 'held-out one-step NLL'],
    rows,
    plot: { title: 'Open-loop error of the robot demonstrator\'s episodes replayed through the model', xLabel: 'steps', yLabel: 'RMS error (entry spreads)', lines, logY: true },
    result,
  };
}
