/**
 * Around each test project. Before: the run is marked (`leaks.ts`: its own TMPDIR and id, which
 * everything the tests start inherits); for the integration tests, the bundled worker runtime the
 * ssh/slurm backends ship, and the compiled CLI (the crash test starts and kills it a hundred
 * times; compiled, it starts in half the time the TypeScript source needs). After: nothing the
 * tests started may still run — what does is named, killed, and fails the run.
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { bundleExec } from '../runtime/bundle.js';
import { endRun, markRun } from './helpers/leaks.js';

export default async function setup(project: { name: string }): Promise<() => Promise<void>> {
  const mark = markRun();
  if (project.name === 'integration') {
    const root = join(import.meta.dirname, '..');
    const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
    execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
    await bundleExec(join(root, 'dist', 'adv-exec.mjs'));
  }
  return async () => {
    await endRun(mark, `the ${project.name} tests`);
  };
}
