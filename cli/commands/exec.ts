import type { Command } from 'commander';
import { EXEC_USAGE } from '../../runtime/exec-cli.js';

/**
 * `adv exec` is dispatched before the CLI loads (cli/adv.ts → runtime/exec-cli.ts); this entry
 * only makes it appear in `adv --help`.
 */
export function registerExec(program: Command): void {
  program
    .command('exec')
    .description('Run a command under the AdventureTime worker contract (what every backend runs)')
    .helpOption(false)
    .allowUnknownOption()
    .argument('[args...]')
    .addHelpText('after', '\n' + EXEC_USAGE)
    .action(async (args: string[]) => {
      const { execMain } = await import('../../runtime/exec-cli.js');
      process.exitCode = await execMain(args);
    });
}
