import { defineConfig } from 'vitest/config';

// Two projects: fast unit tests beside the code, and integration tests in test/ that start
// real servers (git smart-HTTP, sshd, SLURM, S3) on loopback. Both end with a check that nothing
// they started still runs (test/global-setup.ts).
export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['controller/**/*.test.ts', 'cli/**/*.test.ts', 'runtime/**/*.test.ts'],
          globalSetup: ['test/global-setup.ts'],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
