// Lint rules, including the import boundaries of STYLE.md.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const boundary = (files, patterns, message) => ({
  files,
  rules: { 'no-restricted-imports': ['error', { patterns: [{ group: patterns, message }] }] },
});

// The layering of DESIGN.md §2, arrows pointing down:
//   bin/, server/, bench/ → recipes/ → trainers (wmrl/, autoresearch/) → policies/, worldmodel/, hardware/ → bridge/ → episodes/, sim/, nn/ → common/
// Nothing imports bench/.
// worldmodel/ imports only nn/ and shared types (common/, the Episode types). A rule lists the
// top-level folders a layer must not import, so every reverse arrow fails lint.
const FOLDERS = ['common', 'nn', 'episodes', 'sim', 'bridge', 'hardware', 'policies', 'worldmodel', 'wmrl', 'autoresearch', 'recipes', 'server', 'web', 'bin', 'bench', 'tests', 'launch'];
const folders = (names) => names.flatMap((f) => [`**/${f}`, `**/${f}/*`]);
const onlyFrom = (allowed) => folders(FOLDERS.filter((f) => !allowed.includes(f)));
const layer = (folder, allowed, message) => boundary([`${folder}/**/*.ts`], onlyFrom([folder, ...allowed]), message);

export default tseslint.config(
  { ignores: ['node_modules/**', 'bench/results/**', 'dist/**', 'scratch/**', '.scratch/**', 'data/**', 'runs/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
  // nn/ and common/ are self-contained: they import nothing of the project.
  boundary(['nn/**/*.ts'], ['../*', '../../*'], 'nn/ imports nothing of the project'),
  layer('common', [], 'common/ (shared types, the config loader) imports nothing of the project'),
  layer('episodes', ['nn', 'common'], 'episodes/ is data every layer reads: it imports only nn/ and common/'),
  layer('sim', ['nn', 'common'], 'sim/ imports only nn/ and common/ (never hardware/ or the transports)'),
  layer('bridge', ['episodes', 'sim', 'nn', 'common'], 'bridge/ (transports) imports only episodes/, sim/, nn/ and common/; never hardware/'),
  // A world model is fitted from Episode records handed to it; the store and the formats stay out.
  boundary(['worldmodel/**/*.ts'], [...onlyFrom(['worldmodel', 'nn', 'common', 'episodes']), '**/episodes/*', '!**/episodes/types.js'], 'worldmodel/ imports only nn/ and shared types (common/, episodes/types.ts)'),
  boundary(['hardware/**/*.ts'], folders(['bin', 'server', 'recipes', 'wmrl', 'worldmodel', 'autoresearch', 'web', 'bench', 'tests']), 'hardware/ never imports the trainers, the server or bin/'),
  boundary(['policies/**/*.ts'], folders(['bridge', 'bin', 'server', 'recipes', 'wmrl', 'web', 'bench', 'tests']), 'policies/ never imports the transports, the trainers or the server'),
  boundary(['web/**/*.ts', 'web/**/*.js'], ['**/hardware/*', '**/hardware', ...folders(['bench'])], 'web/ never imports hardware/ or the benchmarks'),
  boundary(['server/**/*.ts'], folders(['bin', 'bench', 'tests', 'web']), 'server/ never imports bin/, the benchmarks, the tests or the viewer'),
  // The CLI is an adapter over the recipes: the service's code is not its to import.
  { ...boundary(['bin/**/*.ts'], folders(['server', 'bench', 'tests', 'web']), 'bin/ never imports server/, the benchmarks, the tests or the viewer: its verbs call recipes/'), ignores: ['bin/commands/serve.ts'] },
  // `serve` starts the service.
  boundary(['bin/commands/serve.ts'], folders(['bench', 'tests', 'web']), 'bin/ never imports the benchmarks, the tests or the viewer'),
  // A recipe turns one config into a run; the CLI, the service's jobs and the benchmarks call it, never the reverse.
  layer('recipes', ['wmrl', 'autoresearch', 'policies', 'worldmodel', 'hardware', 'bridge', 'episodes', 'sim', 'nn', 'common'], 'recipes/ imports the trainers and what is below them, never bin/, server/, the benchmarks, the tests or the viewer'),
  boundary(['wmrl/**/*.ts'], ['**/bridge/*', '**/server/*', '**/web/*', ...folders(['recipes', 'bench'])], 'wmrl/ trainers do not depend on transports, the server, the recipes or the benchmarks'),
  // AutoResearch runs on the same core: the correction loop, the tensor engine, sim tasks, the MQTT jobs; the server imports it, never the reverse.
  layer('autoresearch', ['nn', 'common', 'wmrl', 'sim', 'bridge', 'episodes'], 'autoresearch/ imports only nn/, common/, wmrl/, sim/, bridge/ and episodes/ (never the server, bin/, the benchmarks, the tests or the viewer)'),
);
