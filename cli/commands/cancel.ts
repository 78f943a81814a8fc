import type { Command } from 'commander';
import { AdvError, ErrorCode } from '../../controller/index.js';
import { checkName } from '../names.js';
import { printable, type Io } from '../output.js';
import { commitSpecEdit } from '../spec-edit.js';
import type { RepoOpts } from '../specs-writer.js';

/** `adv cancel [run|dag|sweep] NAME`: commits `spec.suspend: true`; the controller cancels what runs. */
export function registerCancel(program: Command, io: Io): void {
  program
    .command('cancel')
    .description(
      'Cancel a run, a DAG or a Sweep (their live runs): commits spec.suspend: true to the specs repo',
    )
    .argument('<kind-or-name>', 'run name, or the kind (run | dag | sweep) followed by the name')
    .argument('[name]', 'the name, after a kind')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .addHelpText(
      'after',
      '\nExamples:\n  adv cancel fork-mid-2026-01-21-001\n  adv cancel dag pipeline\n  adv cancel sweep lr-search\n  (undo: set spec.suspend: false, or delete the line, and push)',
    )
    .action((first: string, second: string | undefined, opts: RepoOpts) => {
      if (second !== undefined && !/^(runs?|dags?|sweeps?)$/i.test(first))
        throw new AdvError(ErrorCode.UsageError, `unknown kind "${printable(first)}"`, {
          hint: 'use: adv cancel NAME, adv cancel run NAME, adv cancel dag NAME or adv cancel sweep NAME',
        });
      const kind =
        second === undefined
          ? 'Run'
          : /^dags?$/i.test(first)
            ? 'DAG'
            : /^sweeps?$/i.test(first)
              ? 'Sweep'
              : 'Run';
      const name = checkName(second ?? first, kind === 'Run' ? 'run' : kind);
      return commitSpecEdit(
        io,
        kind,
        name,
        opts,
        (set) => set(['spec', 'suspend'], true),
        `cancel ${kind.toLowerCase()}/${name}`,
      );
    });
}
