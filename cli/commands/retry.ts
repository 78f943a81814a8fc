import type { Command } from 'commander';
import { RETRY_ANNOTATION } from '../../controller/index.js';
import { checkName } from '../names.js';
import type { Io } from '../output.js';
import { commitSpecEdit } from '../spec-edit.js';
import type { RepoOpts } from '../specs-writer.js';

/** `adv retry NAME`: commits the retry annotation; the controller starts a new attempt. */
export function registerRetry(program: Command, io: Io): void {
  program
    .command('retry')
    .description(
      'Start a new attempt of a finished or failed run, from its last checkpoint, with a fresh failure budget (commits an annotation)',
    )
    .argument('<name>', 'run name')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .addHelpText(
      'after',
      '\nExamples:\n  adv retry fork-mid-2026-01-21-001\n  adv get runs --watch   # see it start',
    )
    .action((name: string, opts: RepoOpts) =>
      commitSpecEdit(
        io,
        'Run',
        checkName(name),
        opts,
        (set) => set(['metadata', 'annotations', RETRY_ANNOTATION], new Date().toISOString()),
        `retry run/${name}`,
      ),
    );
}
