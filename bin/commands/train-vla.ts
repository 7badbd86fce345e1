// `wmrl train --policy vla`: the VLA recipe (recipes/vla.ts) from the command line: clone → world model → WMRL →
// evaluation → OUT/policy.onnx, the artifact `wmrl drive` and `wmrl deploy` run.
import { parseArgs } from 'node:util';
import { COMMAND_HISTORY, VLA_TASKS, runVla, type VlaRecipeInput, type VlaTask } from '../../recipes/vla.js';

/** A whole number given as a flag, or a clear error naming the flag. */
function count(flag: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = v.trim() === '' ? NaN : Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${flag} must be a whole number, got '${v}'`);
  return n;
}

export async function trainVla(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      policy: { type: 'string' },
      robot: { type: 'string', default: 'sim:reach:gap' },
      updates: { type: 'string' },
      seed: { type: 'string' },
      'kl-coef': { type: 'string' },
      out: { type: 'string' },
      quick: { type: 'boolean', default: false },
    },
  });
  if (values.policy !== 'vla') throw new Error(`--policy must be vla here, got '${values.policy}'`);
  // The recipe clones on and post-trains for the sim robot under the gap profile, its camera and command history.
  const [kind, task, profile] = values.robot.split(':');
  if (kind !== 'sim' || !VLA_TASKS.includes(task as VlaTask) || profile !== 'gap') throw new Error(`--policy vla: --robot must be ${VLA_TASKS.map((t) => `sim:${t}:gap`).join(' or ')}, got '${values.robot}'`);
  if (!values.out) throw new Error('--policy vla needs --out DIR (the run folder: policy.onnx, episodes.db)');
  const klCoef = values['kl-coef'] === undefined ? undefined : Number(values['kl-coef']);
  if (klCoef !== undefined && !(klCoef >= 0)) throw new Error(`--kl-coef must be a number >= 0, got '${values['kl-coef']}'`);
  const input: VlaRecipeInput = {
    task: task as VlaTask, quick: values.quick,
    ...(values.seed !== undefined ? { seed: count('--seed', values.seed)! } : {}),
    ...(values.updates !== undefined ? { updates: count('--updates', values.updates)! } : {}),
    ...(klCoef !== undefined ? { rl: { klBeta: klCoef } } : {}),
  };
  let shown = '';
  const r = await runVla(input, values.out, (label) => {
    if (label !== shown) process.stderr.write(`\r${(shown = label).padEnd(60)}`);
  });
  process.stderr.write('\n');
  const pct = (x: number) => `${(100 * x).toFixed(0)}%`;
  console.log(`\n| run | policy | updates | robot episodes | robot hours | held-out states: clone → WMRL | held-out combinations: clone → WMRL |\n|---|---|---|---|---|---|---|`);
  console.log(`| ${values.out} | vla (${task}) | ${r.rows.length} | ${r.robotEpisodes} | ${(r.robotSeconds / 3600).toFixed(3)} | ${pct(r.clone.heldOutStates.success)} → ${pct(r.wmrl.heldOutStates.success)} | ${pct(r.clone.heldOutCombinations.success)} → ${pct(r.wmrl.heldOutCombinations.success)} |`);
  console.log(`\npolicy: ${r.policyPath}   run it: wmrl drive --policy ${r.policyPath} --robot ${values.robot} --command-history ${COMMAND_HISTORY}`);
}
