// `wmrl bench`: the benchmark harness (bench/run.ts) in its own process, as `npm run bench` runs it.
import { spawn } from 'node:child_process';

export async function bench(name: string, o: { quick: boolean; all: boolean; task?: string; combine: boolean; seed?: string }): Promise<void> {
  const code = await new Promise<number | null>((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', name, ...(o.quick ? ['--quick'] : []), ...(o.all ? ['--all'] : []), ...(o.task ? ['--task', o.task] : []), ...(o.combine ? ['--combine'] : []), ...(o.seed !== undefined ? ['--seed', o.seed] : [])], { stdio: 'inherit' });
    p.once('error', reject);
    p.once('exit', resolve);
  });
  if (code !== 0) throw new Error(`benchmark '${name}' exited with ${code}`);
}
