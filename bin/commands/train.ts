// `wmrl train`: post-train a policy on a robot with WMRL (or the standard-GRPO baseline), checkpoint every update,
// resume exactly, export the result as a deployable .onnx (recipes/embodied.ts). The flags are the recipe's
// options (recipes/options.ts EmbodiedOptions), added to the command in bin/wmrl.ts.
import { join } from 'node:path';
import { EmbodiedOptions, embodiedConfig, runEmbodied } from '../../recipes/embodied.js';
import { printJson } from '../json-output.js';
import { progressBar } from '../progress.js';
import { flagOf, schemaValues } from '../schema-flags.js';

/** Flags only WMRL has: refused with --algo standard. */
const WMRL_ONLY = ['debias', 'denoise', 'pureWm', 'imagine', 'anchorGroups', 'worldModel'];
const asFlag = (key: string) => (key === 'debias' || key === 'denoise' ? `--no-${key}` : flagOf(key));

export interface TrainFlags extends Record<string, unknown> {
  out?: string;
  resume: boolean;
  json?: boolean;
}

/** `keys`: the options that have flags; `given`: those the command line set. */
export async function train(flags: TrainFlags, keys: readonly string[], given: readonly string[]): Promise<void> {
  const out = flags.out ?? join('runs', `${String(flags.algo)}-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  let config = null;
  if (flags.resume) {
    // With --resume only --updates may change (to extend a finished run).
    const fixed = given.filter((k) => k !== 'updates');
    if (fixed.length) throw new Error(`--resume continues the run as it was started; drop ${fixed.map(asFlag).join(', ')}`);
  } else {
    const wmrlOnly = WMRL_ONLY.filter((k) => given.includes(k));
    if (flags.algo === 'standard' && wmrlOnly.length) throw new Error(`${wmrlOnly.map(asFlag).join(', ')}: WMRL options; --algo standard has no world model`);
    config = embodiedConfig(schemaValues(EmbodiedOptions, flags, keys) as EmbodiedOptions);
  }

  const bar = progressBar();
  const pct = (p: { success: number; se: number }) => `${(100 * p.success).toFixed(0)}% ± ${(100 * p.se).toFixed(0)}`;
  const { config: a, rows, start, kept, calibration, policyPath } = await runEmbodied(config, {
    out, resume: flags.resume, ...(flags.resume && given.includes('updates') ? { resumeUpdates: Number(flags.updates) } : {}),
    onProgress: (what, done, total) => bar(done, total, what),
    onStart: (s) => bar(0, config?.updates ?? 1, `start · success ${pct(s)}`),
    onCalibrated: (c) => bar(0, config?.updates ?? 1, `calibrated · delay ${c.delay} · success ${c.before === null ? '?' : `${(100 * c.before).toFixed(0)}%`} → ${c.after === null ? '?' : `${(100 * c.after).toFixed(0)}%`}${c.kept ? '' : ' (put back)'}`),
    onUpdate: (r, updates) => bar(r.update, updates, `update · robot ${(r.robotSeconds / 3600).toFixed(2)} h (wall-clock ${(r.robotWallSeconds / 3600).toFixed(2)} h)${r.evalSuccess !== undefined ? ` · success ${(100 * r.evalSuccess).toFixed(0)}%` : ''}`),
  });

  const files = { policy: policyPath, episodes: join(out, 'episodes.db'), history: join(out, 'history.json') };
  if (flags.json) return printJson({ run: out, ...files, config: a, ...(calibration ? { calibration } : {}), ...(start ? { start } : {}), ...(kept ? { kept } : {}), updates: rows });
  const evals = rows.filter((r) => r.evalSuccess !== undefined);
  const last = rows.at(-1)!;
  console.log(`\n| run | algo | updates | robot episodes | robot hours | robots' wall-clock hours | compute s | success first → last eval |\n|---|---|---|---|---|---|---|---|`);
  const successes = evals.length ? [...(start ? [`start ${(100 * start.success).toFixed(0)}%`] : []), ...evals.map((r) => `${(100 * r.evalSuccess!).toFixed(0)}%`)].join(' → ') : `robot episodes: ${rows.filter((r) => r.trainSuccess !== null).map((r) => `${(100 * r.trainSuccess!).toFixed(0)}%`).join(' → ')}`;
  console.log(`| ${out} | ${a.algo}${a.pureWm ? ' (pure world model)' : ''} | ${last.update} | ${last.robotEpisodes} | ${(last.robotSeconds / 3600).toFixed(3)} | ${(last.robotWallSeconds / 3600).toFixed(3)} | ${last.computeSeconds.toFixed(0)} | ${successes} |`);
  if (calibration) {
    const scales = Object.entries(calibration.scales).map(([k, v]) => `${k.replace('_scale', '')} ×${v!.toFixed(2)}`).join(', ');
    const evals = calibration.before === null ? 'no evaluation' : `success ${(100 * calibration.before).toFixed(0)}% → ${(100 * calibration.after!).toFixed(0)}%${calibration.kept ? '' : ': worse, the clone put back'}`;
    console.log(`
calibrated on ${calibration.robotEpisodes} robot episodes: delay ${calibration.delay} steps${scales ? `, ${scales}` : ''}; the clone learned again in that sim (${evals})`);
  }
  // The evaluation noise beside each figure: the binomial standard error of its success rate.
  if (kept && start) console.log(`\nexported: the policy ${kept.update === 0 ? 'the run started from' : `after update ${kept.update}`}, the evaluation kept: success ${pct(kept)} (start ${pct(start)}; ± one standard error over ${kept.episodes} episodes)`);
  else console.log(`\nexported: the last update's policy (no evaluation: ${a.robot.startsWith('sim:') ? '--eval-episodes 0' : 'a robot YAML measures on the robot only with --eval-episodes K, charged to robot time'})`);
  console.log(`\npolicy: ${files.policy}   episodes: ${files.episodes}   history: ${files.history}`);
}
