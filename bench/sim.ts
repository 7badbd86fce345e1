// sim: env steps/s of the Env and the vectorized Env against a raw mujoco-js mj_step loop on the same model
// (same run, medians of repeats), CPU image renders/s, the culled renderer against its unculled reference
// (same states, alternating, bytes checked equal), and scripted-expert success on nominal vs gap.
import { fmt, median, type BenchOptions, type BenchReport } from './lib/report.js';
import { loadTaskModel, MjEnv, taskCamera } from '../sim/env.js';
import { NOMINAL, loadProfile, type HardwareProfile } from '../sim/profiles.js';
import { makeEnv, TASKS, taskDef } from '../sim/registry.js';
import { Rng } from '../sim/rng.js';
import { renderImage } from '../sim/render.js';
import { renderImageReference } from '../sim/render-reference.js';
import { expertSuccess } from '../sim/rollout.js';
import type { EnvState } from '../sim/types.js';
import { VecEnv } from '../sim/vec.js';

const VEC_N = 16;
/** Image sides of the renderer comparison: the scene twin's (imagination) and the env's default. */
const RENDER_SIZES = [32, 64] as const;

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

/**
 * ms per image of the unculled reference renderer and of renderImage (culled), on the same states and camera:
 * the two timed alternately, `n` renders of each state per turn, medians over `repeats` turns. Every image
 * renderImage gives is checked equal, byte for byte, to the reference's.
 */
function renderCompare(env: MjEnv, states: EnvState[], size: number, repeats: number, n: number): { refMs: number; culledMs: number } {
  const camera = taskCamera(env.taskDef, env.model, undefined);
  const out = new Uint8Array(size * size * 3);
  const time = (render: typeof renderImage): number => {
    let elapsed = 0;
    for (const s of states) {
      env.setState(s);
      env.data.forward();
      const t0 = performance.now();
      for (let k = 0; k < n; k++) render(env.model, env.data, camera, size, size, out);
      elapsed += performance.now() - t0;
    }
    return elapsed / (n * states.length);
  };
  for (const s of states) {
    env.setState(s);
    env.data.forward();
    const ref = renderImageReference(env.model, env.data, camera, size, size);
    if (!Buffer.from(renderImage(env.model, env.data, camera, size, size)).equals(Buffer.from(ref))) {
      throw new Error(`${env.task}: the culled render differs from the reference at ${size}x${size}`);
    }
  }
  time(renderImageReference); // warm-up (JIT)
  time(renderImage);
  const refMs: number[] = [], culledMs: number[] = [];
  for (let r = 0; r < repeats; r++) {
    refMs.push(time(renderImageReference));
    culledMs.push(time(renderImage));
  }
  return { refMs: median(refMs), culledMs: median(culledMs) };
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
  const renderRows: BenchReport['rows'] = [];
  const renderStates = 4, renderSteps = 15, renderN = opts.quick ? 10 : 25;
  const total = tasks.length * (repeats + 3);
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
    // culled renderer vs its unculled reference: states along random-action episodes (seeds 0.., rng 1's actions)
    const states: EnvState[] = [];
    for (let s = 0; s < renderStates; s++) {
      env.reset(s);
      for (let k = 0; k < renderSteps * s; k++) env.step(actions[k % actions.length]!);
      states.push(env.getState());
    }
    const cmp = new Map<number, { refMs: number; culledMs: number }>(RENDER_SIZES.map((size) => [size, renderCompare(env, states, size, repeats, renderN)]));
    const speedup = (size: number) => cmp.get(size)!.refMs / cmp.get(size)!.culledMs;
    for (const [size, c] of cmp) renderRows.push([name, `${size}x${size}`, c.refMs, c.culledMs, speedup(size)]);
    opts.progress(++done, total, `${name} renderer vs reference`);
    rows.push([name, task.substeps, rawPhys / task.substeps, envSps, vecSps, overhead, vecOverhead, median(fps), speedup(64)]);
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
      result.render_speedup = speedup(64);
      result.render_speedup_32 = speedup(32);
      result.render_ms_32 = cmp.get(32)!.culledMs;
    } else {
      result[`${name}_overhead`] = overhead;
      result[`${name}_render_speedup`] = speedup(64);
    }
  }
  const speedups = renderRows.map((r) => r[4] as number);
  const notes = [
    '### Renderer: screen-rectangle culling vs the unculled reference',
    '',
    `ms per image from the task's camera, ${renderStates} states per task (seed s after ${renderSteps}·s random-action steps), ` +
      `${renderN} renders of each state per turn, the reference (sim/render-reference.ts: every geom at every pixel) and renderImage ` +
      `(each geom only inside its projected box's screen rectangle) alternating, median of ${repeats} turns; every culled image checked ` +
      `equal to the reference's byte for byte. Culling renders ${fmt(Math.min(...speedups))}x to ${fmt(Math.max(...speedups))}x faster here.`,
    '',
    '| task | image | reference ms | culled ms | speedup |',
    '| --- | --- | --- | --- | --- |',
    ...renderRows.map((r) => `| ${r.map((v) => fmt(v)).join(' | ')} |`),
    '',
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
      `Renders: mj_forward plus a 64x64 RGB ray cast from the fixed top camera on the CPU; render speedup: the culled ray ` +
      `caster over its unculled reference at 64x64 (table below). Profile: nominal.`,
    header: ['task', 'substeps', 'raw steps/s', 'env steps/s', 'vec env steps/s', 'overhead', 'vec overhead', 'renders/s', 'render speedup'],
    rows,
    notes,
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
      render_speedup: result.render_speedup!,
      ...Object.fromEntries(Object.entries(result).filter(([k]) => !['env_sps', 'raw_sps', 'overhead', 'render_fps', 'render_speedup'].includes(k))),
    },
  };
}
