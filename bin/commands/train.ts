// `wmrl train`: post-train a policy on a robot with WMRL (or the standard-GRPO baseline), checkpoint
// every update, resume exactly, export the result as a deployable .onnx.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { OBSERVATION_LAYOUT_KEY, layoutEntries, layoutOf, layoutToJson } from '../../common/layout.js';
import { Type, type Static } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { writeFileAtomic } from '../../nn/index.js';
import { ClippedPolicyGradient } from '../../policies/pg.js';
import { exportPolicy } from '../../policies/gaussian.js';
import { TrainerOptions } from '../../server/schemas.js';
import { QUICK_PRETRAIN, anchorGroupsProblem, trainerCorrector } from '../../server/wmrl-train.js';
import { DEFAULT_PRETRAIN, SimPrompts, heldOutEvaluation, postTrainPg, pretrain, simRobotTarget } from '../../wmrl/sim-setup.js';
import { yamlRobotTarget } from '../../wmrl/robot-target.js';
import { loadRobotConfig } from '../../hardware/config.js';
import { trainStandard } from '../../wmrl/train_standard.js';
import { DEFAULT_WMRL, trainWmrl } from '../../wmrl/train_wmrl.js';
import type { RunRow } from '../../wmrl/run-state.js';
import { progressBar } from '../progress.js';

/** Everything a run was started with; saved as OUT/config.json so --resume continues the same run. */
interface TrainArgs {
  algo: 'wmrl' | 'standard';
  robot: string;
  task: string;
  profile: string;
  debias: boolean;
  denoise: boolean;
  pureWm: boolean;
  anchors: 'random' | 'active';
  updates: number;
  prompts: number;
  group: number;
  imagine: number;
  anchorGroups: number;
  /** β of GRPO's KL penalty to the pretrained policy (0: none). Absent in runs from before it: 0. */
  klCoef: number;
  robots: number;
  resetSeconds: number;
  seed: number;
  quick: boolean;
  /** The robot's observation reports its last this many commands (sim: --command-history; a robot YAML: its command_history). Absent in runs from before it: 0. */
  commandHistory?: number;
}

const int = (name: string, v: string | undefined, min = 1): number => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be an integer ≥ ${min}, got '${v}'`);
  return n;
};

/** The flag of a trainer option (`resetSeconds` → `--reset-seconds`). */
const flag = (key: string) => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
/** Each option's default as parseArgs takes it (a string). */
const byDefault = (key: keyof typeof TrainerOptions) => String(TrainerOptions[key].default);
const Shared = Type.Object(TrainerOptions);

/** The flags shared with the service's `wmrl-train` job, checked against the same schema (server/schemas.ts TrainerOptions). */
function checkShared(values: Static<typeof Shared>, given: Record<string, string | boolean | undefined>): void {
  const bad = [...Value.Errors(Shared, values)].map((e) => {
    const key = e.path.slice(1);
    const choices = (e.schema.anyOf as Array<{ const?: unknown }> | undefined)?.map((c) => c.const);
    const what = choices ? `must be ${choices.join(' or ')}` : `${e.message.charAt(0).toLowerCase()}${e.message.slice(1)}`;
    return `${flag(key)}: ${what}, got '${given[flag(key).slice(2)] ?? String(e.value)}'`;
  });
  if (bad.length) throw new Error(bad.join('; '));
}

function parse(args: string[]): { a: TrainArgs; out: string; resume: boolean; given: string[] } {
  const { values } = parseArgs({
    args,
    options: {
      algo: { type: 'string', default: 'wmrl' },
      robot: { type: 'string', default: 'sim:reach:gap' },
      'no-debias': { type: 'boolean', default: false },
      'no-denoise': { type: 'boolean', default: false },
      'pure-wm': { type: 'boolean', default: false },
      anchors: { type: 'string', default: byDefault('anchors') },
      updates: { type: 'string', default: byDefault('updates') },
      prompts: { type: 'string', default: byDefault('prompts') },
      group: { type: 'string', default: byDefault('group') },
      imagine: { type: 'string', default: byDefault('imagine') },
      'anchor-groups': { type: 'string', default: byDefault('anchorGroups') },
      'kl-coef': { type: 'string', default: byDefault('klCoef') },
      robots: { type: 'string', default: '1' },
      'reset-seconds': { type: 'string', default: byDefault('resetSeconds') },
      seed: { type: 'string', default: byDefault('seed') },
      out: { type: 'string' },
      resume: { type: 'boolean', default: false },
      quick: { type: 'boolean', default: false },
      task: { type: 'string' },
      'command-history': { type: 'string' },
    },
  });
  // With --resume only --updates may change (to extend a finished run).
  const given = args.filter((x) => x.startsWith('--') && !['--out', '--resume', '--updates'].includes(x.split('=')[0]!));
  if (values.algo !== 'wmrl' && values.algo !== 'standard') throw new Error(`--algo must be wmrl or standard, got '${values.algo}'`);
  const wmrlOnly = ['--no-debias', '--no-denoise', '--pure-wm', '--imagine', '--anchor-groups'].filter((f) => args.some((x) => x.split('=')[0] === f));
  if (values.algo === 'standard' && wmrlOnly.length) throw new Error(`${wmrlOnly.join(', ')}: WMRL options; --algo standard has no world model`);
  const sim = values.robot.startsWith('sim:');
  const [, simTask = '', profile = sim ? 'nominal' : 'real'] = sim ? values.robot.split(':') : [];
  const task = sim ? simTask : values.task;
  if (!task) throw new Error(sim ? '--robot sim:TASK[:PROFILE] needs a task' : `--robot ${values.robot}: a robot YAML needs --task TASK, the sim task whose expert and world model the run starts from and whose seeded resets give the prompts`);
  if (sim && values.task && values.task !== task) throw new Error(`--task ${values.task} contradicts --robot ${values.robot}`);
  const given0 = values['command-history'];
  if (given0 !== undefined && !sim) throw new Error(`--command-history is the sim robot's; robot ${values.robot} sets command_history in its YAML`);
  const k = given0 === undefined ? 0 : given0.trim() === '' ? NaN : Number(given0);
  if (!(Number.isInteger(k) && k >= 0 && k <= 64)) throw new Error(`--command-history must be a whole number of steps in [0, 64], got '${given0}'`);
  const commandHistory = sim ? k : loadRobotConfig(values.robot).commandHistory ?? 0;
  const out = values.out ?? join('runs', `${values.algo}-${new Date().toISOString().replace(/[:.]/g, '-')}`);
  const shared = {
    debias: !values['no-debias'], denoise: !values['no-denoise'], pureWm: values['pure-wm'], anchors: values.anchors as 'random' | 'active',
    updates: Number(values.updates), prompts: Number(values.prompts), group: Number(values.group), imagine: Number(values.imagine), anchorGroups: Number(values['anchor-groups']), klCoef: Number(values['kl-coef']), resetSeconds: Number(values['reset-seconds']), seed: Number(values.seed), quick: values.quick,
  };
  checkShared(shared, values);
  const problem = values.algo === 'wmrl' ? anchorGroupsProblem(shared) : null;
  if (problem) throw new Error(problem);
  const a: TrainArgs = { algo: values.algo, robot: values.robot, task, profile, robots: int('robots', values.robots), ...shared, commandHistory };
  return { a, out, resume: values.resume, given };
}

export async function train(args: string[]): Promise<void> {
  const parsed = parse(args);
  const { out, resume } = parsed;
  let a = parsed.a;
  const cfgFile = join(out, 'config.json');
  if (resume) {
    if (!existsSync(cfgFile)) throw new Error(`--resume: ${out} has no config.json (not a run folder)`);
    if (parsed.given.length) throw new Error(`--resume continues the run as it was started; drop ${parsed.given.join(', ')}`);
    // A run folder from before --imagine, --anchor-groups and --kl-coef: one imagined group per prompt, one anchor group per update, no KL penalty.
    a = { imagine: 1, anchorGroups: 1, klCoef: 0, ...(JSON.parse(readFileSync(cfgFile, 'utf8')) as Omit<TrainArgs, 'imagine' | 'anchorGroups' | 'klCoef'> & Partial<TrainArgs>), ...(args.some((x) => x.split('=')[0] === '--updates') ? { updates: parsed.a.updates } : {}) };
    writeFileAtomic(cfgFile, [JSON.stringify(a, null, 1)]);
  } else {
    if (existsSync(join(out, 'state.json'))) throw new Error(`${out} already holds a run: pass --resume to continue it, or another --out`);
    mkdirSync(out, { recursive: true });
    writeFileAtomic(cfgFile, [JSON.stringify(a, null, 1)]);
  }

  const bar = progressBar();
  const pre = await pretrain({
    ...DEFAULT_PRETRAIN, task: a.task, seed: a.seed, fit: !resume, commandHistory: a.commandHistory ?? 0,
    ...(a.quick ? QUICK_PRETRAIN : {}),
    onProgress: (what, done, total) => bar(done, total, what),
  });
  const store = join(out, 'episodes.db');
  const horizon = (await SimPrompts.horizon(a.task));
  const target = a.robot.startsWith('sim:')
    ? await simRobotTarget({ task: a.task, profile: a.profile, store, robots: a.robots, resetSeconds: a.resetSeconds, seed: a.seed, commandHistory: a.commandHistory ?? 0 })
    : await yamlRobotTarget({ config: a.robot, maxSteps: horizon, store, robots: a.robots, resetSeconds: a.resetSeconds, task: a.task, log: (e) => console.error(`safety: ${e.kind}: ${e.detail}`) });
  using prompts = await SimPrompts.create(a.task, 'nominal', { commandHistory: a.commandHistory ?? 0 });
  const pg = await ClippedPolicyGradient.create(pre.policy, postTrainPg(a.klCoef));
  // Held-out success is measured where the robot has a sim twin under its profile; a robot YAML's own episodes are its measure.
  const evaluate = a.robot.startsWith('sim:') ? heldOutEvaluation(a.task, a.profile, a.quick ? 10 : 100, { commandHistory: a.commandHistory ?? 0 }) : undefined;
  const common = { updates: a.updates, prompts: a.prompts, groupSize: a.group, evalEvery: Math.max(1, Math.floor(a.updates / 5)), promptSeed0: 1_000_000, seed: a.seed };
  const hooks = { onUpdate: (r: RunRow) => bar(r.update, a.updates, `update · robot ${(r.robotSeconds / 3600).toFixed(2)} h${r.evalSuccess !== undefined ? ` · success ${(100 * r.evalSuccess).toFixed(0)}%` : ''}`) };
  let rows: RunRow[];
  try {
    if (a.algo === 'standard') {
      rows = (await trainStandard({ config: common, policy: pre.policy, pg, target, prompts, evaluate, outDir: out, resume, hooks })).rows;
    } else {
      const corrector = trainerCorrector(a);
      rows = (await trainWmrl({
        config: { ...DEFAULT_WMRL, ...common, prompts: a.prompts * a.imagine, corrector, horizon: target.maxSteps },
        policy: pre.policy, pg, model: pre.model, simData: pre.simData, target, prompts, evaluate, outDir: out, resume, hooks,
      })).rows;
    }
  } finally {
    await pg.release();
    await target.close();
  }
  const spec = target.robot.spec;
  const policyPath = join(out, 'policy.onnx');
  const layout = layoutOf(spec);
  exportPolicy(pre.policy, policyPath, {
    observationNames: layoutEntries(layout).map((e) => e.label),
    actionNames: spec.action.names, controlHz: spec.controlHz, policyVersion: `${a.algo}-${rows.length}`, runId: out,
    extra: { [OBSERVATION_LAYOUT_KEY]: layoutToJson(layout) },
  });
  const evals = rows.filter((r) => r.evalSuccess !== undefined);
  const last = rows.at(-1)!;
  console.log(`\n| run | algo | updates | robot episodes | robot hours | compute s | success first → last eval |\n|---|---|---|---|---|---|---|`);
  const successes = evals.length ? evals.map((r) => `${(100 * r.evalSuccess!).toFixed(0)}%`).join(' → ') : `robot episodes: ${rows.filter((r) => r.trainSuccess !== null).map((r) => `${(100 * r.trainSuccess!).toFixed(0)}%`).join(' → ')}`;
  console.log(`| ${out} | ${a.algo}${a.pureWm ? ' (pure world model)' : ''} | ${last.update} | ${last.robotEpisodes} | ${(last.robotSeconds / 3600).toFixed(3)} | ${last.computeSeconds.toFixed(0)} | ${successes} |`);
  console.log(`\npolicy: ${policyPath}   episodes: ${join(out, 'episodes.db')}   history: ${join(out, 'history.json')}`);
}
