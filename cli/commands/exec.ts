import type { Command } from 'commander';
import { advExec } from '../../runtime/exec.js';
import { AdvError, ErrorCode } from '../../controller/index.js';
import type { Io } from '../output.js';

export function registerExec(program: Command, io: Io): void {
  program
    .command('exec')
    .description('Run a command under the AdventureTime worker contract (what every backend runs)')
    .option('--run <name>', 'run name (env ADV_RUN)')
    .option('--attempt <n>', 'attempt number (env ADV_ATTEMPT)')
    .option('--job-dir <dir>', 'where exec.json and exit.json are written')
    .option('--grace <seconds>', 'seconds the workload gets after SIGTERM/SIGUSR1', '30')
    .argument('<command...>', 'the command, after --')
    .addHelpText(
      'after',
      `
Examples:
  adv exec --run hello --attempt 1 -- python train.py --lr 3e-4

The workload sees ADV_RUN, ADV_ATTEMPT, ADV_CKPT_DIR and ADV_ARTIFACT_DIR. SIGTERM, SIGINT and
SIGUSR1 are forwarded; after the grace period the workload is killed. exit.json records how it ended.`,
    )
    .action(
      async (command: string[], opts: { run?: string; attempt?: string; jobDir?: string; grace: string }) => {
        const run = opts.run ?? io.env.ADV_RUN;
        if (!run)
          throw new AdvError(ErrorCode.UsageError, 'no run name', { hint: 'pass --run NAME or set ADV_RUN' });
        const attempt = Number(opts.attempt ?? io.env.ADV_ATTEMPT ?? 1);
        const { code } = await advExec({
          run,
          attempt,
          argv: command,
          ...(opts.jobDir ? { jobDir: opts.jobDir } : {}),
          graceSec: Number(opts.grace),
          log: (l) => io.stderr.write(`adv exec: ${l}\n`),
        });
        process.exitCode = code;
        if (code !== 0)
          throw new AdvError(ErrorCode.BackendError, `workload exited ${code}`, {
            quiet: true,
            exitCode: code,
          });
      },
    );
}
