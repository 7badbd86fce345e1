#!/usr/bin/env node
// `npm run build` (and npm ci's `prepare`): esbuild transpiles every product .ts file, one module per file,
// into dist/ with the same folder layout (ES modules, source maps), so `wmrl` runs with plain node. Nothing
// is bundled or copied: the code finds package.json, sim/assets and bench/ from the package root.
// dist/build-manifest.json records the inputs' modification times; buildState() compares them, which is
// how bin/wmrl.mjs runs the build only while it matches the sources.
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
export const DEFAULT_OUT = join(ROOT, 'dist');
const MANIFEST = 'build-manifest.json';

/**
 * The folders of product code. tsconfig.json also includes web/ (the viewer, built by Vite into dist/web),
 * launch/ (no code), bench/ and tests/ (run from their sources under tsx): none of those is built here.
 */
export const SOURCE_FOLDERS = ['common', 'nn', 'episodes', 'sim', 'bridge', 'hardware', 'policies', 'worldmodel', 'wmrl', 'autoresearch', 'recipes', 'server', 'bin'];
/** Files besides the sources whose change changes the build. */
const BUILD_INPUTS = ['tsconfig.json', 'bin/build.mjs'];

const slash = (p) => p.split(sep).join('/');

/** The product .ts files (declaration files left out), as paths from the package root. */
export function sourceFiles(folders = SOURCE_FOLDERS) {
  return folders.flatMap((f) =>
    readdirSync(join(ROOT, f), { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
      .map((e) => slash(relative(ROOT, join(e.parentPath ?? e.path, e.name)))),
  ).sort();
}

/** Each input's modification time, by its path from the package root. */
function inputTimes(sources) {
  return Object.fromEntries([...sources, ...BUILD_INPUTS].map((f) => [f, statSync(join(ROOT, f)).mtimeMs]));
}

/**
 * Whether the build in `out` matches the sources: `current`, else the first difference (`reason`). `built`
 * says whether its entry exists; `entry` is that entry's file URL.
 */
export function buildState(out = DEFAULT_OUT) {
  const entry = join(out, 'bin', 'wmrl.js');
  const state = (current, reason) => ({ current, reason, built: existsSync(entry), entry: pathToFileURL(entry).href });
  const file = join(out, MANIFEST);
  let manifest;
  try {
    manifest = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    return state(false, e.code === 'ENOENT' ? `${slash(relative(ROOT, out))}/ is not built` : `${file} is unreadable (${e.message})`);
  }
  const now = inputTimes(sourceFiles(manifest.folders));
  for (const [f, t] of Object.entries(now)) {
    if (!(f in manifest.inputs)) return state(false, `${f} is newer than the build`);
    if (manifest.inputs[f] !== t) return state(false, `${f} changed since the build`);
  }
  const gone = Object.keys(manifest.inputs).find((f) => !(f in now));
  if (gone) return state(false, `${gone} was removed since the build`);
  return state(true, '');
}

/** Builds into `out` (default dist/), removing what an earlier build left there of removed sources. */
export async function build(out = DEFAULT_OUT) {
  const t0 = performance.now();
  const sources = sourceFiles();
  // Times before the build: a source edited while it runs leaves the build stale.
  const inputs = inputTimes(sources);
  const esbuild = await import('esbuild');
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: sources,
    outdir: out,
    outbase: ROOT,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: 'linked',
    sourcesContent: false,
    logLevel: 'warning',
    metafile: true,
  });
  const written = new Set(Object.keys(result.metafile.outputs).map((f) => resolve(ROOT, f)));
  for (const folder of SOURCE_FOLDERS.map((f) => join(out, f)).filter((d) => existsSync(d))) {
    for (const e of readdirSync(folder, { recursive: true, withFileTypes: true })) {
      const f = join(e.parentPath ?? e.path, e.name);
      if (e.isFile() && /\.js(\.map)?$/.test(e.name) && !written.has(f)) rmSync(f);
    }
  }
  writeFileSync(join(out, MANIFEST), `${JSON.stringify({ folders: SOURCE_FOLDERS, inputs }, null, 1)}\n`);
  return { modules: sources.length, seconds: (performance.now() - t0) / 1000 };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args.length && !(args.length === 2 && args[0] === '--out')) {
    process.stderr.write('usage: node bin/build.mjs [--out DIR]   (default dist/)\n');
    process.exit(1);
  }
  const out = args.length ? resolve(args[1]) : DEFAULT_OUT;
  const rel = relative(ROOT, out);
  if (!rel || rel.startsWith('..') || resolve(ROOT, rel) !== out || SOURCE_FOLDERS.includes(rel.split(sep)[0])) {
    process.stderr.write(`build: --out ${args[1]} must be a new folder inside ${ROOT} and outside its sources: the built code finds package.json, sim/assets and node_modules above it\n`);
    process.exit(1);
  }
  const { modules, seconds } = await build(out);
  process.stdout.write(`built ${modules} modules into ${slash(relative(process.cwd(), out)) || '.'}/ in ${seconds.toFixed(1)} s\n`);
}
