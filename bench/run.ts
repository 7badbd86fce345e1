// Benchmark harness: `npm run bench -- <name> [--quick] [--all | --task NAME | --combine] [--seed N]`.
// Loads bench/<name>.ts, which exports `run(opts): Promise<BenchReport>`, prints its markdown table,
// writes the full report under bench/results/ (not for --quick), and ends with the RESULT line.
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { progressBar } from '../bin/progress.js';
import { benchNames } from './lib/names.js';
import { markdownTable, resultLine, writeReport, type BenchOptions, type BenchReport } from './lib/report.js';

const here = dirname(fileURLToPath(import.meta.url));
const available = benchNames();

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const all = args.includes('--all');
const combine = args.includes('--combine');
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
const name = args.find((a, i) => !a.startsWith('--') && args[i - 1] !== '--task' && args[i - 1] !== '--seed');
if (!name || !available.includes(name)) {
  console.error(`usage: npm run bench -- <name> [--quick] [--all | --task NAME | --combine] [--seed N]\nbenchmarks: ${available.join(', ')}`);
  process.exit(2);
}

const progress = progressBar();

const mod = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as { run: (o: BenchOptions) => Promise<BenchReport>; tasks?: readonly string[]; seeded?: string; combines?: string };
// --seed only for a benchmark that says what its seed varies.
if (seed !== undefined && !mod.seeded) {
  console.error(`benchmark '${name}' takes no --seed (only a benchmark that declares what its seed varies: vla)`);
  process.exit(2);
}
// --all and --task only for a benchmark that declares its tasks.
if ((all || task) && !mod.tasks) {
  console.error(`benchmark '${name}' has no tasks to choose: --all and --task are only for a benchmark that declares its tasks (embodied)`);
  process.exit(2);
}
// --combine only for a benchmark that says what it combines, from full runs' results, instead of a run of its own.
if (combine && !mod.combines) {
  console.error(`benchmark '${name}' has nothing to combine: --combine is only for a benchmark that declares what it combines (vla)`);
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
const report = await mod.run({ quick, all, ...(task ? { task } : {}), ...(seed !== undefined ? { seed } : {}), ...(combine ? { combine } : {}), progress });
console.log(`\n## ${report.title}${quick ? ' (quick)' : ''}\n`);
console.log(report.summary + '\n');
console.log(markdownTable(report.header, report.rows));
if (report.notes) console.log('\n' + report.notes);
if (!quick) {
  // A seeded run writes beside the default one (`vla-reach-seed1.md`), never over it.
  const variant = (all ? '-all' : task ? `-${task}` : '') + (seed !== undefined ? `-seed${seed}` : '');
  const path = writeReport(`${name}${variant}`, report, `npm run bench -- ${name}${all ? ' --all' : task ? ` --task ${task}` : combine ? ' --combine' : ''}${seed !== undefined ? ` --seed ${seed}` : ''}`);
  console.log(`\nreport: ${path}`);
}
console.log(resultLine(name, report.result));
