// `wmrl bench`: the benchmark harness (bench/run.ts) in its own process, as `npm run bench` runs it.
// The benchmarks are development tools run from their TypeScript sources under tsx (a dev dependency),
// in the package folder, whose relative paths they use, also when `wmrl` itself runs from dist/.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { PACKAGE_ROOT, packagePath } from '../../common/package-root.js';

/** tsx's loader by absolute URL, or an error saying how to get it. */
function tsxLoader(): string {
  try {
    return pathToFileURL(createRequire(packagePath('package.json')).resolve('tsx')).href;
  } catch (e) {
    throw new Error(`the benchmarks run from their TypeScript sources under tsx, which is not installed (${(e as Error).message.split('\n')[0]}); run npm ci with the dev dependencies`, { cause: e });
  }
}

export async function bench(name: string, o: { quick: boolean; all: boolean; task?: string; combine: boolean; seed?: string }): Promise<void> {
  const args = [name, ...(o.quick ? ['--quick'] : []), ...(o.all ? ['--all'] : []), ...(o.task ? ['--task', o.task] : []), ...(o.combine ? ['--combine'] : []), ...(o.seed !== undefined ? ['--seed', o.seed] : [])];
  const code = await new Promise<number | null>((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', tsxLoader(), packagePath('bench', 'run.ts'), ...args], { stdio: 'inherit', cwd: PACKAGE_ROOT });
    p.once('error', reject);
    p.once('exit', resolve);
  });
  if (code !== 0) throw new Error(`benchmark '${name}' exited with ${code}`);
}
