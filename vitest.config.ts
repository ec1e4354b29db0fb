import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores on CI: child-process tests contend for CPU, so keep file parallelism modest.
    maxWorkers: 2,
  },
});
