// The benchmarks there are: every bench/<name>.ts but the harness (run.ts). The harness lists them from here (`wmrl bench` reads the folder itself: nothing imports bench/).
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export function benchNames(): string[] {
  const dir = fileURLToPath(new URL('..', import.meta.url));
  return readdirSync(dir).filter((f) => f.endsWith('.ts') && f !== 'run.ts').map((f) => f.slice(0, -3)).sort();
}
