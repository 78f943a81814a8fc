/**
 * Before the integration tests: the bundled worker runtime the ssh/slurm backends ship, and the
 * compiled CLI (the crash test starts and kills it a hundred times; compiled, it starts in half
 * the time the TypeScript source needs).
 */
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { bundleExec } from '../runtime/bundle.js';

export default async function setup(): Promise<void> {
  const root = join(import.meta.dirname, '..');
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
  await bundleExec(join(root, 'dist', 'adv-exec.mjs'));
}
