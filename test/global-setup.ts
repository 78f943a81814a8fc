/** Before the integration tests: the bundled worker runtime the ssh/slurm backends ship. */
import { join } from 'node:path';
import { bundleExec } from '../runtime/bundle.js';

export default async function setup(): Promise<void> {
  await bundleExec(join(import.meta.dirname, '..', 'dist', 'adv-exec.mjs'));
}
