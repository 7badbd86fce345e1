// Builds the viewer (web/, Three.js, bundled by Vite into dist/web) when it is missing or older than
// its sources, so `npm start` serves it on a fresh clone.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { packagePath } from '../common/package-root.js';

export const WEB_SRC = packagePath('web');
export const VIEWER_DIR = packagePath('dist', 'web');

function newest(dir: string): number {
  return Math.max(0, ...readdirSync(dir, { withFileTypes: true }).map((e) => (e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs)));
}

export function viewerIsCurrent(): boolean {
  const index = join(VIEWER_DIR, 'index.html');
  return existsSync(index) && statSync(index).mtimeMs >= newest(WEB_SRC);
}

/** Returns the folder to serve; builds it first when needed (a few seconds). */
export async function ensureViewer(log: (s: string) => void = (s) => console.error(s)): Promise<string> {
  if (viewerIsCurrent()) return VIEWER_DIR;
  log('building the viewer (web/ → dist/web) ...');
  const t0 = performance.now();
  const vite = await import('vite').catch((e: Error) => {
    throw new Error(`the viewer is not built (${VIEWER_DIR}) and Vite, which builds it, cannot be loaded (${e.message}); run npm ci, then npm run build:web`, { cause: e });
  });
  const { build } = vite;
  await build({ configFile: join(WEB_SRC, 'vite.config.ts'), logLevel: 'warn' });
  log(`viewer built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return VIEWER_DIR;
}
