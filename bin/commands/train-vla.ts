// `wmrl train --policy vla`: the VLA recipe (recipes/vla.ts) from the command line: clone → world model → WMRL →
// evaluation → OUT/policy.onnx, the artifact `wmrl drive` and `wmrl deploy` run.
import { COMMAND_HISTORY, VLA_TASKS, runVla, type VlaTask } from '../../recipes/vla.js';
import { printJson } from '../json-output.js';
import { flagOf } from '../schema-flags.js';

/** The train flags the VLA recipe reads (the rest are the embodied recipe's). */
const VLA_FLAGS: Record<string, string> = { robot: '--robot', quick: '--quick', seed: '--seed', updates: '--updates', klCoef: '--kl-coef', proprio: '--proprio' };

export interface TrainVlaFlags {
  robot: string;
  quick: boolean;
  seed?: unknown;
  updates?: unknown;
  klCoef?: unknown;
  proprio?: unknown;
  out?: string;
  resume?: boolean;
  json?: boolean;
}

/** `given`: the option keys the command line set; those the VLA recipe does not read are refused, naming them. */
export async function trainVla(flags: TrainVlaFlags, given: readonly string[]): Promise<void> {
  const other = given.filter((k) => !(k in VLA_FLAGS));
  if (other.length || flags.resume) throw new Error(`--policy vla takes ${Object.values(VLA_FLAGS).join(', ')} and --out; not ${[...other.map(flagOf), ...(flags.resume ? ['--resume'] : [])].join(', ')}`);
  // The recipe clones on and post-trains for the sim robot under the gap profile, its camera and command history.
  const [kind, task, profile] = flags.robot.split(':');
  if (kind !== 'sim' || !VLA_TASKS.includes(task as VlaTask) || profile !== 'gap') throw new Error(`--policy vla: --robot must be ${VLA_TASKS.map((t) => `sim:${t}:gap`).join(' or ')}, got '${flags.robot}'`);
  if (!flags.out) throw new Error('--policy vla needs --out DIR (the run folder: policy.onnx, episodes.db)');
  const pick = (k: 'seed' | 'updates' | 'klCoef' | 'proprio') => (given.includes(k) ? flags[k] : undefined);
  const seed = pick('seed'), updates = pick('updates'), klBeta = pick('klCoef'), proprio = pick('proprio');
  // The recipe's schema checks the values, naming its fields.
  const input: Record<string, unknown> = {
    task, quick: flags.quick,
    ...(seed !== undefined ? { seed } : {}), ...(updates !== undefined ? { updates } : {}), ...(klBeta !== undefined ? { rl: { klBeta } } : {}), ...(proprio !== undefined ? { proprio } : {}),
  };
  let shown = '';
  const r = await runVla(input, flags.out, {
    progress: (phase, done, total) => {
      const label = `${phase} ${done}/${total}`;
      if (label !== shown) process.stderr.write(`\r${(shown = label).padEnd(60)}`);
    },
  });
  process.stderr.write('\n');
  if (flags.json) return printJson({ run: flags.out, task, policy: r.policyPath, robotEpisodes: r.robotEpisodes, robotSeconds: r.robotSeconds, clone: r.clone, wmrl: r.wmrl, updates: r.rows });
  const pct = (x: number | undefined) => (x === undefined ? '—' : `${(100 * x).toFixed(0)}%`);
  console.log(`\n| run | policy | updates | robot episodes | robot hours | held-out states: clone → WMRL | held-out combinations: clone → WMRL |\n|---|---|---|---|---|---|---|`);
  console.log(`| ${flags.out} | vla (${task}) | ${r.rows.length} | ${r.robotEpisodes} | ${(r.robotSeconds / 3600).toFixed(3)} | ${pct(r.clone.heldOutStates.success)} → ${pct(r.wmrl?.heldOutStates.success)} | ${pct(r.clone.heldOutCombinations.success)} → ${pct(r.wmrl?.heldOutCombinations.success)} |`);
  console.log(`\npolicy: ${r.policyPath}   run it: wmrl drive --policy ${r.policyPath} --robot ${flags.robot} --command-history ${COMMAND_HISTORY}`);
}
