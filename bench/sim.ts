// sim: env steps/s of the Env and the vectorized Env against a raw mujoco-js mj_step loop on the same model
// (same run, medians of repeats), CPU image renders/s, and scripted-expert success on nominal vs gap.
import { median, type BenchOptions, type BenchReport } from './lib/report.js';
import { loadTaskModel, MjEnv } from '../sim/env.js';
import { NOMINAL, loadProfile, type HardwareProfile } from '../sim/profiles.js';
import { makeEnv, TASKS, taskDef } from '../sim/registry.js';
import { Rng } from '../sim/rng.js';
import { expertSuccess } from '../sim/rollout.js';
import { VecEnv } from '../sim/vec.js';

const VEC_N = 16;

/**
 * Physics steps per second of a bare loop on the env's own MjData: the same episodes (env.reset with the same
 * seeds, outside the timing) and the same controls, so both loops simulate the same trajectories.
 */
function rawLoop(env: MjEnv, controls: Float64Array[], substeps: number, steps: number): number {
  const { mj } = env.model;
  const m = env.model.raw;
  const d = env.data.raw;
  let elapsed = 0;
  for (let k0 = 0; k0 < steps; k0 += env.horizon) {
    env.reset(k0);
    const t0 = performance.now();
    for (let k = k0; k < Math.min(steps, k0 + env.horizon); k++) {
      const ctrl = d.ctrl as Float64Array;
      ctrl.set(controls[k % controls.length]!);
      for (let s = 0; s < substeps; s++) mj.mj_step(m, d);
    }
    elapsed += performance.now() - t0;
  }
  return (steps * substeps) / (elapsed / 1000);
}

function envLoop(env: MjEnv, actions: Float32Array[], steps: number): number {
  let elapsed = 0;
  for (let k0 = 0; k0 < steps; k0 += env.horizon) {
    env.reset(k0);
    const t0 = performance.now();
    for (let k = k0; k < Math.min(steps, k0 + env.horizon); k++) env.step(actions[k % actions.length]!);
    elapsed += performance.now() - t0;
  }
  return steps / (elapsed / 1000);
}

function vecLoop(vec: VecEnv, actions: Float32Array[], steps: number): number {
  vec.reset();
  const calls = Math.ceil(steps / vec.n);
  const t0 = performance.now();
  for (let k = 0; k < calls; k++) vec.step(actions[k % actions.length]!);
  return (calls * vec.n) / ((performance.now() - t0) / 1000);
}

function renderLoop(env: MjEnv, n: number): number {
  env.reset(0);
  const t0 = performance.now();
  for (let k = 0; k < n; k++) env.render();
  return n / ((performance.now() - t0) / 1000);
}

export async function run(opts: BenchOptions): Promise<BenchReport> {
  const repeats = opts.quick ? 3 : 7;
  const steps = opts.quick ? 3000 : 10000;
  const episodes = opts.quick ? 20 : 100;
  const tasks = [...TASKS.keys()];
  const rows: BenchReport['rows'] = [];
  const result: BenchReport['result'] = {};
  const successRows: BenchReport['rows'] = [];
  const gap = loadProfile('gap');
  const gapKeys = (Object.keys(NOMINAL) as Array<keyof HardwareProfile>).filter((k) => k !== 'name' && k !== 'description' && gap[k] !== NOMINAL[k]);
  const ablationEpisodes = opts.quick ? 5 : 20;
  const ablation = new Map<string, number[]>(gapKeys.map((k) => [k, []]));
  const total = tasks.length * (repeats + 2);
  let done = 0;
  for (const name of tasks) {
    const task = taskDef(name);
    const model = await loadTaskModel(task, NOMINAL);
    const env = new MjEnv(task, model, NOMINAL, { seed: 0, image: undefined }, false);
    const imgEnv = new MjEnv(task, model, NOMINAL, { seed: 0, image: 64 }, false);
    const vec = await VecEnv.create(VEC_N, { task: name, profile: NOMINAL });
    const rng = new Rng(1);
    const nu = env.actionSpace.shape[0];
    const actions = Array.from({ length: 512 }, () => Float32Array.from({ length: nu }, () => rng.uniform(-1, 1)));
    const vecActions = Array.from({ length: 64 }, () => Float32Array.from({ length: nu * VEC_N }, () => rng.uniform(-1, 1)));
    // the same controls in ctrl units for the raw loop
    const lo = (model.raw.actuator_ctrlrange as Float64Array).slice();
    const controls = actions.map((a) => Float64Array.from(a, (v, i) => lo[2 * i]! + ((v + 1) / 2) * (lo[2 * i + 1]! - lo[2 * i]!)));
    const rawS: number[] = [], envS: number[] = [], vecS: number[] = [], fps: number[] = [];
    envLoop(env, actions, 500); // warm-up (JIT)
    rawLoop(env, controls, task.substeps, 500);
    for (let r = 0; r < repeats; r++) {
      rawS.push(rawLoop(env, controls, task.substeps, steps));
      envS.push(envLoop(env, actions, steps));
      vecS.push(vecLoop(vec, vecActions, steps));
      fps.push(renderLoop(imgEnv, opts.quick ? 100 : 300));
      opts.progress(++done, total, `${name} timing ${r + 1}/${repeats}`);
    }
    const rawPhys = median(rawS);
    const envSps = median(envS);
    const vecSps = median(vecS);
    const overhead = rawPhys / (envSps * task.substeps);
    const vecOverhead = rawPhys / (vecSps * task.substeps);
    rows.push([name, task.substeps, rawPhys / task.substeps, envSps, vecSps, overhead, vecOverhead, median(fps)]);
    env.dispose();
    imgEnv.dispose();
    vec.dispose();
    model.dispose();

    const rates: Record<string, number> = {};
    for (const profile of ['nominal', 'gap']) {
      const e = await makeEnv({ task: name, profile: loadProfile(profile) });
      rates[profile] = expertSuccess(e, episodes);
      e.dispose();
    }
    opts.progress(++done, total, `${name} experts`);
    // which part of the gap costs the expert its success: nominal with one gap parameter at a time
    for (const k of gapKeys) {
      const e = await makeEnv({ task: name, profile: { ...NOMINAL, name: `nominal+${k}`, [k]: gap[k] } });
      ablation.get(k)!.push(expertSuccess(e, ablationEpisodes));
      e.dispose();
    }
    opts.progress(++done, total, `${name} gap ablation`);
    successRows.push([name, episodes, rates.nominal!, rates.gap!, rates.nominal! - rates.gap!]);
    result[`${name}_expert_nominal`] = rates.nominal!;
    result[`${name}_expert_gap`] = rates.gap!;
    if (name === 'reach') {
      result.env_sps = envSps;
      result.raw_sps = rawPhys / task.substeps;
      result.vec_sps = vecSps;
      result.overhead = overhead;
      result.render_fps = median(fps);
    } else result[`${name}_overhead`] = overhead;
  }
  const successTable = [
    '### Scripted experts, nominal vs gap',
    '',
    `Episodes per cell: ${episodes} (seeds 0..${episodes - 1}); success = the task's sparse success signal.`,
    '',
    '| task | episodes | nominal | gap | drop |',
    '| --- | --- | --- | --- | --- |',
    ...successRows.map((r) => `| ${r.join(' | ')} |`),
    '',
    '### Gap ablation: nominal with one `gap` parameter at a time',
    '',
    `Expert success over ${ablationEpisodes} episodes (seeds 0..${ablationEpisodes - 1}).`,
    '',
    `| parameter (gap value) | ${tasks.join(' | ')} |`,
    `| --- | ${tasks.map(() => '---').join(' | ')} |`,
    ...gapKeys.map((k) => `| ${k} (${gap[k]}) | ${ablation.get(k)!.join(' | ')} |`),
  ].join('\n');
  return {
    title: 'sim: MuJoCo env throughput, render rate and reality gap',
    summary:
      `Per task, in one process: a raw mujoco-js loop (write ctrl, mj_step x substeps) and the Env (clip, ctrl ` +
      `mapping, substeps, mj_kinematics, observation, reward) on the same MjData, over the same episodes (resets ` +
      `untimed, episodes of the task's horizon) and the same fixed random actions (seed 1), and a ${VEC_N}-env ` +
      `VecEnv (auto-reset timed), each for ${steps} control steps, median of ${repeats} interleaved repeats. ` +
      `"raw steps/s" is physics steps/s divided by substeps, so all three are control steps/s; overhead = raw / env. ` +
      `Renders: mj_forward plus a 64x64 RGB ray cast from the fixed top camera on the CPU. Profile: nominal.`,
    header: ['task', 'substeps', 'raw steps/s', 'env steps/s', 'vec env steps/s', 'overhead', 'vec overhead', 'renders/s'],
    rows,
    notes: successTable,
    plot: {
      title: 'control steps/s by task: raw mj_step loop vs Env vs VecEnv',
      xLabel: 'task / loop',
      yLabel: 'control steps per second',
      bars: rows.flatMap((r) => [
        { label: `${r[0]} raw`, value: r[2] as number },
        { label: `${r[0]} env`, value: r[3] as number },
        { label: `${r[0]} vec`, value: r[4] as number },
      ]),
    },
    result: {
      env_sps: result.env_sps!,
      raw_sps: result.raw_sps!,
      overhead: result.overhead!,
      render_fps: result.render_fps!,
      ...Object.fromEntries(Object.entries(result).filter(([k]) => !['env_sps', 'raw_sps', 'overhead', 'render_fps'].includes(k))),
    },
  };
}
