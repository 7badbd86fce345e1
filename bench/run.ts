// Benchmark harness: `npm run bench -- <name> [--quick] [--all | --task NAME | --combine] [--seed N] [--split validation] [--relook] [--check] [--seeds A,B --variants X,Y]`.
// Loads bench/<name>.ts, which exports `run(opts): Promise<BenchReport>`, prints its markdown table,
// writes the full report under bench/results/ (not for --quick), and ends with the RESULT line.
// A benchmark under the evidence protocol (its `protocol` export, bench/lib/protocol.ts) writes its keys into the
// report, and `--check` prints the committed RESULT line only where its report key is this code's.
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { progressBar } from '../bin/progress.js';
import { benchNames } from './lib/names.js';
import { checkCommitted, type BenchProtocol } from './lib/protocol.js';
import { markdownTable, resultLine, writeReport, type BenchOptions, type BenchReport } from './lib/report.js';

const here = dirname(fileURLToPath(import.meta.url));
const available = benchNames();

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const all = args.includes('--all');
const combine = args.includes('--combine');
const check = args.includes('--check');
const relook = args.includes('--relook');
const splitAt = args.indexOf('--split');
const split = splitAt >= 0 ? args[splitAt + 1] : undefined;
if (splitAt >= 0 && split !== 'validation' && split !== 'test') {
  console.error(`--split needs validation or test, got ${split ?? 'nothing'}`);
  process.exit(2);
}
const taskAt = args.indexOf('--task');
const task = taskAt >= 0 ? args[taskAt + 1] : undefined;
if (taskAt >= 0 && (!task || task.startsWith('--'))) {
  console.error('--task needs a task name');
  process.exit(2);
}
const seedAt = args.indexOf('--seed');
const seedArg = seedAt >= 0 ? args[seedAt + 1] : undefined;
const seed = seedArg === undefined ? undefined : Number(seedArg);
if (seedAt >= 0 && !(seed !== undefined && Number.isInteger(seed) && seed >= 0)) {
  console.error(`--seed needs a non-negative integer, got ${seedArg ?? 'nothing'}`);
  process.exit(2);
}
// --seeds / --variants: a comma list each.
const listAt = (flag: string) => {
  const at = args.indexOf(flag);
  if (at < 0) return undefined;
  const v = args[at + 1];
  if (!v || v.startsWith('--')) {
    console.error(`${flag} needs a comma-separated list`);
    process.exit(2);
  }
  return v.split(',').filter((x) => x.length > 0);
};
const seedsList = listAt('--seeds');
const variantsList = listAt('--variants');
const seedsOnly = seedsList?.map(Number);
if (seedsList && seedsOnly!.some((x) => !(Number.isInteger(x) && x >= 0))) {
  console.error(`--seeds needs non-negative integers, got ${seedsList.join(',')}`);
  process.exit(2);
}
const name = args.find((a, i) => !a.startsWith('--') && !['--task', '--seed', '--split', '--seeds', '--variants'].includes(args[i - 1]!));
if (!name || !available.includes(name)) {
  console.error(`usage: npm run bench -- <name> [--quick] [--all | --task NAME | --combine] [--seed N] [--split validation] [--relook] [--check] [--seeds A,B] [--variants X,Y]\nbenchmarks: ${available.join(', ')}`);
  process.exit(2);
}

const progress = progressBar();

const mod = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as {
  run: (o: BenchOptions) => Promise<BenchReport>;
  tasks?: readonly string[];
  seeded?: string;
  combines?: string;
  protocol?: BenchProtocol;
  cellsOnly?: (o: BenchOptions, f: { seeds?: number[]; variants?: string[] }) => Promise<{ computed: number; cells: number }>;
  cellsProblem?: (o: BenchOptions, f: { seeds?: number[]; variants?: string[] }) => string | null;
};
// --split, --relook and --check only for a benchmark under the protocol.
for (const [on, flag] of [[split !== undefined, '--split'], [relook, '--relook'], [check, '--check']] as const) {
  if (on && !mod.protocol) {
    console.error(`benchmark '${name}' is not under the evidence protocol (it exports no \`protocol\`: no splits, no keys): ${flag} is only for one that is (autoresearch, embodied, vla)`);
    process.exit(2);
  }
}
if (check && (quick || combine || relook)) {
  console.error(`--check reads the committed report of a full run: not with ${quick ? '--quick' : combine ? '--combine' : '--relook'}`);
  process.exit(2);
}
if (quick && split) {
  console.error('--quick runs the train split: not with --split');
  process.exit(2);
}
// --seed only for a benchmark that says what its seed varies.
if (seed !== undefined && !mod.seeded) {
  console.error(`benchmark '${name}' takes no --seed (only a benchmark that declares what its seed varies; one under the evidence protocol runs its splits' seeds)`);
  process.exit(2);
}
// --all and --task only for a benchmark that declares its tasks.
if ((all || task) && !mod.tasks) {
  console.error(`benchmark '${name}' has no tasks to choose: --all and --task are only for a benchmark that declares its tasks (embodied)`);
  process.exit(2);
}
// --combine only for a benchmark that says what it combines, from full runs' results, instead of a run of its own.
if (combine && !mod.combines) {
  console.error(`benchmark '${name}' has nothing to combine: --combine is only for a benchmark that declares what it combines (one under the evidence protocol reuses its cached cells instead)`);
  process.exit(2);
}
if (combine && (quick || all || task)) {
  console.error(`--combine builds the report from full runs' results: not with ${quick ? '--quick' : all ? '--all' : '--task'}`);
  process.exit(2);
}
if (task && !mod.tasks!.includes(task)) {
  console.error(`benchmark '${name}': --task ${task}: not one of ${mod.tasks!.join(', ')}`);
  process.exit(2);
}
const opts: BenchOptions = { quick, all, ...(task ? { task } : {}), ...(seed !== undefined ? { seed } : {}), ...(combine ? { combine } : {}), ...(split === 'validation' || split === 'test' ? { split } : {}), ...(relook ? { relook } : {}), progress };
// A seeded run writes beside the default one (`<name>-seed1.md`), never over it; a validation run beside the test run's.
const variant = (all ? '-all' : task ? `-${task}` : '') + (seed !== undefined ? `-seed${seed}` : '') + (split === 'validation' ? '-validation' : '');
const command = `npm run bench -- ${name}${all ? ' --all' : task ? ` --task ${task}` : combine ? ' --combine' : ''}${seed !== undefined ? ` --seed ${seed}` : ''}${split === 'validation' ? ' --split validation' : ''}`;
if (check) {
  const c = checkCommitted(`${name}${variant}`, mod.protocol!.keys(opts).report, command);
  if (!c.ok) {
    console.error(`bench ${name} --check: refused: ${c.message}`);
    process.exit(1);
  }
  console.log(c.resultLine);
  process.exit(0);
}
// --seeds / --variants: some of the split's cells, cached for a full run, and no report.
if (seedsOnly || variantsList) {
  if (!mod.cellsOnly) {
    console.error(`benchmark '${name}' computes no subset of its cells: --seeds and --variants are only for one that does (embodied)`);
    process.exit(2);
  }
  if (quick || check || combine) {
    console.error(`--seeds and --variants cache cells for a full run: not with ${quick ? '--quick' : check ? '--check' : '--combine'}`);
    process.exit(2);
  }
  const filter = { ...(seedsOnly ? { seeds: seedsOnly } : {}), ...(variantsList ? { variants: variantsList } : {}) };
  const problem = mod.cellsProblem?.(opts, filter) ?? null;
  if (problem) {
    console.error(problem);
    process.exit(2);
  }
  const r = await mod.cellsOnly(opts, filter);
  console.log(`\n${r.cells} cells ready (${r.computed} computed in this run, the rest cached); no report from a subset: \`${command}\` writes it from the cache once every cell is there.`);
  process.exit(0);
}
const report = await mod.run(opts);
// The run reports the keys of the code at its start; the code at its end must have the same (programs run by path are read as they run).
if (!quick && mod.protocol) {
  const now = mod.protocol.keys(opts);
  const had = report.keys;
  if (!had || had.compute !== now.compute || had.report !== now.report) throw new Error(`bench ${name}: the run's keys (report ${had?.report ?? '(none)'}, computation ${had?.compute ?? '(none)'}) are not the code's now (report ${now.report}, computation ${now.compute}): the code changed during the run, or the benchmark does not report its keys; its cached cells stay under their computation key, run it again`);
}
console.log(`\n## ${report.title}${quick ? ' (quick)' : ''}\n`);
console.log(report.summary + '\n');
console.log(markdownTable(report.header, report.rows));
if (report.notes) console.log('\n' + report.notes);
if (!quick) {
  const path = writeReport(`${name}${variant}`, report, command);
  console.log(`\nreport: ${path}`);
}
console.log(resultLine(name, report.result));
