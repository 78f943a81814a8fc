import type { Command } from 'commander';
import { existsSync } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { AdvError, ErrorCode, git, writeSchemas } from '../../controller/index.js';
import { initFiles } from '../templates.js';
import type { Io } from '../output.js';

/** Identity for commits the CLI makes when the user has none configured. */
export const FALLBACK_IDENTITY = ['-c', 'user.name=AdventureTime', '-c', 'user.email=adv@adventuretime.dev'];

export async function hasIdentity(cwd: string): Promise<boolean> {
  try {
    await git(['config', 'user.email'], { cwd });
    return true;
  } catch {
    return false;
  }
}

export function registerInit(program: Command, io: Io): void {
  program
    .command('init')
    .description('Create a new local specs repo with a file store, a local backend and a hello run')
    .argument('<dir>', 'directory to create (must be empty or absent)')
    .option('--branch <name>', 'the watched branch', 'main')
    .addHelpText(
      'after',
      `
Examples:
  adv init my-specs && cd my-specs
  adv controller --once          # run until the hello run and the pipeline DAG have finished
  adv get runs`,
    )
    .action(async (dirArg: string, opts: { branch: string }) => {
      const dir = resolve(io.cwd, dirArg);
      if (existsSync(dir) && (await readdir(dir)).length > 0) {
        throw new AdvError(ErrorCode.UsageError, `${dir} is not empty`, { hint: 'choose a new directory' });
      }
      await mkdir(dir, { recursive: true });
      await git(['init', '--quiet', '-b', opts.branch], { cwd: dir });
      for (const [rel, content] of Object.entries(initFiles())) {
        await mkdir(dirname(join(dir, rel)), { recursive: true });
        await writeFile(join(dir, rel), content);
      }
      await writeSchemas(join(dir, 'schemas'));
      await git(['add', '-A'], { cwd: dir });
      const id = (await hasIdentity(dir)) ? [] : FALLBACK_IDENTITY;
      await git(
        [
          ...id,
          'commit',
          '--quiet',
          '-m',
          'adv init: a file store, a local backend, a hello run and an example DAG',
        ],
        { cwd: dir },
      );
      io.stdout.write(
        `Initialised a specs repo in ${dir}\n\nNext:\n  cd ${dirArg}\n  adv controller --once   # reconcile until the hello run and the pipeline DAG finish\n  adv get runs\n`,
      );
    });
}
