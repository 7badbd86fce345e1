// The package's root folder (the one holding package.json), found from this module's own place, so that
// code run from its TypeScript sources (tsx) and from the build in dist/ finds the same files.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = fileURLToPath(import.meta.url);

function findRoot(from: string): string {
  for (let dir = from; ; ) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`no package.json in any folder above ${from}: wmrl-bridge's code is not inside its package`);
    dir = up;
  }
}

/** The folder of package.json, the sources, sim/assets, bench/ and node_modules. */
export const PACKAGE_ROOT = findRoot(dirname(HERE));

/** A path inside the package: `packagePath('sim', 'assets')`. */
export const packagePath = (...parts: string[]): string => join(PACKAGE_ROOT, ...parts);

/** Whether this code runs as the built JavaScript (dist/) rather than the TypeScript sources. */
export const BUILT = extname(HERE) === '.js';

/** package.json's version. */
export function packageVersion(): string {
  const file = packagePath('package.json');
  const { version } = JSON.parse(readFileSync(file, 'utf8')) as { version?: unknown };
  if (typeof version !== 'string') throw new Error(`${file} has no version string`);
  return version;
}
