// Benchmark harness: `npm run bench -- <name> [--quick] [--all]`.
// Loads bench/<name>.ts, which exports `run(opts): Promise<BenchReport>`, prints its markdown table,
// writes the full report under bench/results/ (not for --quick), and ends with the RESULT line.
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { progressBar } from '../bin/progress.js';
import { markdownTable, resultLine, writeReport, type BenchOptions, type BenchReport } from './lib/report.js';

const here = dirname(fileURLToPath(import.meta.url));
const available = readdirSync(here).filter((f) => f.endsWith('.ts') && f !== 'run.ts').map((f) => f.slice(0, -3));

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const all = args.includes('--all');
const name = args.find((a) => !a.startsWith('--'));
if (!name || !available.includes(name)) {
  console.error(`usage: npm run bench -- <name> [--quick] [--all]\nbenchmarks: ${available.sort().join(', ')}`);
  process.exit(2);
}

const progress = progressBar();

const mod = (await import(pathToFileURL(join(here, `${name}.ts`)).href)) as { run: (o: BenchOptions) => Promise<BenchReport> };
const report = await mod.run({ quick, all, progress });
console.log(`\n## ${report.title}${quick ? ' (quick)' : ''}\n`);
console.log(report.summary + '\n');
console.log(markdownTable(report.header, report.rows));
if (report.notes) console.log('\n' + report.notes);
if (!quick) {
  const path = writeReport(all ? `${name}-all` : name, report, `npm run bench -- ${name}${all ? ' --all' : ''}`);
  console.log(`\nreport: ${path}`);
}
console.log(resultLine(name, report.result));
