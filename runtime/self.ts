/**
 * How to start this program's own `adv` command in a child process: the built `dist/cli/adv.js`
 * when running from dist, the TypeScript source through tsx's loader when running from source
 * (tests, `npm run` scripts before a build).
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The argv that starts `adv` (this program) in a child process. */
export function advCommand(): string[] {
  // An explicit override (a JSON argv), e.g. the built CLI for benchmarks run from source.
  const override = process.env.ADV_SELF_COMMAND;
  if (override) return JSON.parse(override) as string[];
  const here = fileURLToPath(import.meta.url);
  const root = resolve(dirname(here), '..');
  if (here.endsWith('.js')) return [process.execPath, join(root, 'cli', 'adv.js')];
  const req = createRequire(import.meta.url);
  const tsxDir = dirname(req.resolve('tsx/package.json'));
  const loader = join(tsxDir, 'dist', 'loader.mjs');
  if (!existsSync(loader)) throw new Error(`tsx loader not found at ${loader}`);
  return [process.execPath, '--import', pathToFileURL(loader).href, join(root, 'cli', 'adv.ts')];
}
