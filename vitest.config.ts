import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['tests/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Every core: most files wait on child processes and sockets, so two files share two cores well.
    maxWorkers: availableParallelism(),
    reporters: ['default', './tests/helpers/unfinished-reporter.ts'],
  },
});
