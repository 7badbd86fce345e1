// worldmodel: imagined transitions/s (Gaussian MLP policy + ensemble, batched, fused graph) against raw MuJoCo
// control steps/s on reach in the same run, and the fitted model's held-out one-step and H = 20 errors.
import { loadTaskModel, MjEnv } from '../sim/env.js';
import { NOMINAL } from '../sim/profiles.js';
import { taskDef } from '../sim/registry.js';
import * as nn from '../nn/index.js';
import { EnsembleModel, ModelEnv, type GraphPolicy } from '../worldmodel/index.js';
import { replayError, simEpisodes, toTransitions } from '../tests/helpers/sim-transitions.js';
import { fmt, median, type BenchOptions, type BenchReport } from './lib/report.js';

const TASK = 'reach';
const H = 20;

/** Control steps/s of a bare loop on the env's MjData: write ctrl, mj_step x substeps (as bench/sim.ts). */
export function rawSimSps(env: MjEnv, substeps: number, steps: number, rng: nn.Rng): number {
  const { mj } = env.model;
  const m = env.model.raw;
  const nu = env.actionSpace.shape[0];
  const controls = Array.from({ length: 512 }, () => Float64Array.from({ length: nu }, () => rng.uniform(-1, 1)));
  let elapsed = 0;
  for (let k0 = 0; k0 < steps; k0 += env.horizon) {
    env.reset(k0);
    const d = env.data.raw;
    const t0 = performance.now();
    for (let k = k0; k < Math.min(steps, k0 + env.horizon); k++) {
      (d.ctrl as Float64Array).set(controls[k % controls.length]!);
      for (let s = 0; s < substeps; s++) mj.mj_step(m, d);
    }
    elapsed += performance.now() - t0;
  }
  return steps / (elapsed / 1000);
}

function gaussianPolicy(dObs: number, dAct: number): GraphPolicy {
  const store = new nn.ParamStore(7);
  const mlp = new nn.MLP(store, 'pi', { sizes: [dObs, 64, 64, dAct], activation: 'tanh' });
  store.create('pi.log_std', [dAct], 'zeros').data.fill(-0.5);
  return {
    store,
    noiseDim: dAct,
    build(obs, noise) {
      const mean = mlp.forward(obs);
      const logStd = obs.graph.param('pi.log_std', [dAct]);
      const action = nn.clip(nn.add(mean, nn.mul(nn.exp(logStd), noise!)), -1, 1);
      return { action, logProb: nn.gaussianLogProb(action, mean, logStd) };
    },
  };
}


export async function run(opts: BenchOptions): Promise<BenchReport> {
  const q = opts.quick;
  const trainEpisodes = q ? 60 : 200;
  const epochs = q ? 8 : 40;
  const hidden = [128, 128, 128];
  const members = 5;
  const sizes = q ? [256, 1024] : [256, 512, 1024];
  const repeats = q ? 3 : 7;
  const total = 2 + sizes.length + 1;
  let done = 0;

  // Data and fit.
  const train = await simEpisodes(TASK, trainEpisodes, 0);
  const test = await simEpisodes(TASK, 30, 10_000);
  const testT = toTransitions(test);
  opts.progress(++done, total, 'sim data');
  const model = new EnsembleModel({ dObs: train.dObs, dAct: train.dAct, members, hidden, obsNames: train.obsNames, seed: 1 });
  const t0 = performance.now();
  const fit = await model.fit(toTransitions(train), { epochs, lr: 3e-3, batchSize: 128, seed: 1, onEpoch: (r) => opts.progress(done, total, `fit epoch ${r.epoch}/${epochs}`) });
  const fitSeconds = (performance.now() - t0) / 1000;
  const ev = await model.evaluate(testT);
  const replay = await replayError(model, test, H);
  opts.progress(++done, total, 'held-out errors');

  // Raw MuJoCo on the same task, same process.
  const task = taskDef(TASK);
  const simModel = await loadTaskModel(task, NOMINAL);
  const env = new MjEnv(task, simModel, NOMINAL, { seed: 0 }, false);
  const rng = new nn.Rng(1);
  rawSimSps(env, task.substeps, 500, rng); // warm-up (JIT)
  const simSps = median(Array.from({ length: repeats }, () => rawSimSps(env, task.substeps, q ? 3000 : 10_000, rng)));
  env.dispose();
  simModel.dispose();

  // Imagined transitions/s: policy + ensemble, 'random' members, H steps in one graph run.
  const policy = gaussianPolicy(train.dObs, train.dAct);
  const rows: BenchReport['rows'] = [['MuJoCo raw mj_step loop (1 env)', 1, '-', 1000 / simSps, simSps, 1]];
  const tps = new Map<string, number>();
  for (const N of sizes) {
    const starts = new Float32Array(N * train.dObs);
    for (let i = 0; i < N; i++) starts.set(testT.obs.subarray((i % testT.reward.length) * train.dObs, ((i % testT.reward.length) + 1) * train.dObs), i * train.dObs);
    const menv = new ModelEnv(model, { members: 'random', seed: 2 });
    for (const spr of [H, 1]) {
      await menv.imagine(starts, policy, H, { stepsPerRun: spr }); // compile + warm-up
      const times: number[] = [];
      for (let r = 0; r < repeats; r++) {
        const a = performance.now();
        await menv.imagine(starts, policy, H, { stepsPerRun: spr });
        times.push(performance.now() - a);
      }
      const ms = median(times);
      const rate = (N * H) / (ms / 1000);
      tps.set(`${N}/${spr}`, rate);
      rows.push([`imagine: policy + ${members}-member ensemble, ${spr === 1 ? 'one run per step' : `${spr} steps per run`}`, N, spr, ms / H, rate, rate / simSps]);
    }
    // The model env alone (actions given), one run per step.
    const actions = Float32Array.from({ length: N * train.dAct }, () => rng.uniform(-1, 1));
    menv.reset(starts);
    await menv.step(actions);
    const times: number[] = [];
    for (let r = 0; r < repeats; r++) {
      menv.reset(starts);
      const a = performance.now();
      for (let t = 0; t < H; t++) await menv.step(actions);
      times.push(performance.now() - a);
    }
    const ms = median(times);
    rows.push([`ModelEnv.step: ${members}-member ensemble only`, N, 1, ms / H, (N * H) / (ms / 1000), (N * H) / (ms / 1000) / simSps]);
    await menv.release();
    opts.progress(++done, total, `imagine N=${N}`);
  }
  // The best fused configuration (rollouts, steps per run): what a trainer would pick.
  const [bestKey, imagineTps] = [...tps].reduce((a, b) => (b[1] > a[1] ? b : a));
  const [bestN, bestSpr] = bestKey.split('/').map(Number) as [number, number];
  await model.release();
  opts.progress(++done, total, 'done');

  const ratio = imagineTps / simSps;
  const replayRatio = replay.model / replay.baseline;
  const notes = [
    '### Held-out accuracy (reach, nominal)',
    '',
    `Fitted on ${fit.trainSize} transitions (${trainEpisodes} episodes, seeds 0..${trainEpisodes - 1}; ${fit.valSize} held out for validation) for ${fit.epochs} epochs in ${fmt(fitSeconds)} s; tested on ${testT.reward.length} transitions of 30 other episodes (seeds 10000..10029).`,
    '',
    '| metric | value |',
    '| --- | --- |',
    `| one-step NLL per modeled dim (normalized delta; an unconditional unit Gaussian scores ${fmt(0.5 * Math.log(2 * Math.PI * Math.E))}) | ${fmt(ev.nll)} |`,
    `| one-step MSE, normalized delta units | ${fmt(ev.mseNorm)} |`,
    `| one-step reward MSE | ${fmt(ev.rewardMse)} |`,
    `| H = ${H} open-loop replay MSE (${replay.windows} windows, members' mean) | ${fmt(replay.model)} |`,
    `| H = ${H} "no change" baseline MSE | ${fmt(replay.baseline)} |`,
    `| replay / baseline | ${fmt(replayRatio)} |`,
    '',
    `Imagination at its best (N = ${bestN} rollouts, ${bestSpr} step${bestSpr > 1 ? 's' : ''} per run) ran ${fmt(imagineTps)} transitions/s, ${fmt(ratio)}x the raw MuJoCo loop's ${fmt(simSps)} control steps/s ` +
      `(target ≥ 1: ${ratio >= 1 ? 'met' : 'not met'}). After ${H} replayed steps the model's error is ${fmt(replayRatio)} of the "no change" baseline's.`,
  ].join('\n');
  return {
    title: 'worldmodel: imagined transitions/s vs raw MuJoCo, and held-out model error',
    summary:
      `Task ${TASK}, profile nominal, one process. A ${members}-member ensemble (dynamics MLP ${hidden.join('x')}, silu; a reward/success MLP of the same widths) ` +
      `imagines N rollouts of H = ${H} steps under a Gaussian MLP policy (${train.dObs}→64→64→${train.dAct}, tanh), members drawn at random per step; ` +
      `policy, every member and the member mix run in one ONNX graph, ${H} steps per ONNX Runtime call (or one step per call), ` +
      `compile excluded, median of ${repeats} repeats. The MuJoCo figure is a bare mj_step loop (write ctrl, ${task.substeps} substeps per control step) ` +
      `on one env, as in bench/sim.ts. "ms" is per imagined step of the whole batch.`,
    header: ['what', 'N', 'steps per run', 'ms per step', 'transitions/s', 'x MuJoCo'],
    rows,
    notes,
    plot: {
      title: `${TASK}: imagined transitions/s (policy + ensemble) vs raw MuJoCo steps/s`,
      xLabel: 'path / rollouts',
      yLabel: 'transitions per second',
      bars: rows.map((r) => ({ label: r[0] === rows[0]![0] ? 'MuJoCo' : `${String(r[0]).startsWith('imagine') ? `im${r[2]}` : 'step'} N=${r[1]}`, value: r[4] as number })),
    },
    result: {
      imagine_tps: imagineTps,
      sim_sps: simSps,
      imagine_vs_sim: ratio,
      one_step_nll: ev.nll,
      one_step_mse_norm: ev.mseNorm,
      h20_mse: replay.model,
      h20_baseline_mse: replay.baseline,
      h20_ratio: replayRatio,
    },
  };
}
