#!/usr/bin/env node
// The `wmrl` command of package.json's "bin" (`npm start`, `npx wmrl`, the ROS 2 launch file). It runs the
// build in dist/ (bin/build.mjs, which `npm ci` runs) with plain node while the build matches the sources,
// else the TypeScript sources through tsx's loader, so an edited source never runs from a stale build.
import process from 'node:process';
import { buildState } from './build.mjs';

const state = buildState();

async function runBuild() {
  // Stack traces then name the .ts sources' lines.
  process.setSourceMapsEnabled(true);
  await import(state.entry);
}

if (state.current) {
  await runBuild();
} else {
  let tsx;
  try {
    tsx = await import('tsx/esm/api');
  } catch (e) {
    if (e.code !== 'ERR_MODULE_NOT_FOUND') throw e;
    if (!state.built) {
      process.stderr.write(`wmrl: ${state.reason}, and tsx, which runs the sources, is not installed: run npm run build\n`);
      process.exit(1);
    }
    process.stderr.write(`wmrl: warning: ${state.reason}; tsx, which runs the sources, is not installed, so the build runs (npm run build updates it)\n`);
  }
  if (tsx) {
    tsx.register();
    await import('./wmrl.ts');
  } else {
    await runBuild();
  }
}
