// Lint rules, including the import boundaries of STYLE.md.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const boundary = (files, patterns, message) => ({
  files,
  rules: { 'no-restricted-imports': ['error', { patterns: [{ group: patterns, message }] }] },
});

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
  // nn/ is a self-contained engine: it imports nothing of the project.
  boundary(['nn/**/*.ts'], ['../*', '../../*'], 'nn/ imports nothing of the project'),
  boundary(['policies/**/*.ts'], ['**/bridge/*', '**/bridge'], 'policies/ never imports bridge/'),
  boundary(['web/**/*.ts', 'web/**/*.js'], ['**/hardware/*', '**/hardware'], 'web/ never imports hardware/'),
  boundary(['wmrl/**/*.ts'], ['**/bridge/*', '**/server/*', '**/web/*'], 'wmrl/ trainers do not depend on transports or the server'),
);
