import type { Command } from 'commander';
import { AdvError, ErrorCode } from '../../controller/index.js';
import { localRun, type RunTarget } from '../local-run.js';
import type { Io } from '../output.js';
import { parseDuration } from '../repo.js';

interface RunOpts {
  file?: string;
  name?: string;
  store?: string;
  grace: string;
  env?: string[];
}

export function registerRun(program: Command, io: Io): void {
  program
    .command('run')
    .description('Run a run here and now, in the foreground, under the adv exec contract (no controller)')
    .argument('[name-or-command...]', 'a Run of the specs repo here, or after -- a command')
    .option('-f, --file <path>', 'a Run spec file')
    .option(
      '--name <name>',
      "the run name (default: the spec's; for a command, one derived from it and the directory)",
    )
    .option(
      '--store <url>',
      "object store (default: $ADV_STORE, else the specs repo's Storage, else the local default)",
    )
    .option('--grace <duration>', 'time the workload gets after its stop signal for a last checkpoint', '30s')
    .option(
      '--env <NAME=VALUE>',
      'a variable for the workload (repeatable)',
      (v: string, all: string[] = []) => [...all, v],
    )
    .addHelpText(
      'after',
      `
The code is the work tree as it is (uncommitted changes included); the workload gets what every
backend gives (ADV_RUN, ADV_ATTEMPT, ADV_CKPT_DIR, …), restores the run's latest committed
checkpoint from the store, and uploads each checkpoint it finishes. Running it again resumes.
Ctrl-C stops it as a preemption would: the stop signal, the grace period for a last checkpoint,
its upload; Ctrl-C again kills it at once. The exit code is the command's (130 after Ctrl-C).

Examples:
  adv run -- python3 train.py --steps 1000   # a command; prints the run name it resumes under
  adv run train                              # runs/train.yaml of the specs repo here
  adv run -f runs/train.yaml --env LR=0.1 --store s3://bucket/prefix`,
    )
    .action(async (args: string[], opts: RunOpts, cmd: Command) => {
      const target = targetOf(args, opts, commandGiven(cmd));
      const graceSec = parseDuration(opts.grace) / 1000;
      const code = await localRun(
        target,
        {
          graceSec,
          env: opts.env ?? [],
          ...(opts.name !== undefined ? { name: opts.name } : {}),
          ...(opts.store !== undefined ? { store: opts.store } : {}),
        },
        io,
      );
      // The workload's own exit code is adv run's (runCli turns `data.exitCode` into it, silently).
      if (code !== 0)
        throw new AdvError(ErrorCode.BackendError, `the run exited with ${code}`, { exitCode: code });
    });
}

/**
 * Whether the command line had `--` (what follows it is a command, even a single word). Commander
 * hands operands over alike on both sides of `--`; the program keeps the words it parsed (`rawArgs`,
 * set by every parse but left out of its types).
 */
function commandGiven(cmd: Command): boolean {
  const raw = (cmd.parent as unknown as { rawArgs?: string[] } | null)?.rawArgs ?? [];
  return raw.indexOf('--', raw.indexOf('run') + 1) >= 0;
}

function targetOf(args: string[], opts: RunOpts, dashDash: boolean): RunTarget {
  const ways = [opts.file !== undefined, dashDash, !dashDash && args.length > 0].filter(Boolean).length;
  if (ways !== 1 || (!dashDash && args.length > 1))
    throw new AdvError(
      ErrorCode.UsageError,
      'adv run takes one of: -f FILE, a run NAME, or -- COMMAND [ARGS...]',
      {
        hint: 'adv run -- python3 train.py, adv run train, or adv run -f runs/train.yaml',
      },
    );
  if (opts.file !== undefined) return { file: opts.file };
  if (dashDash) {
    if (!args.length)
      throw new AdvError(ErrorCode.UsageError, 'no command after --', {
        hint: 'adv run -- python3 train.py',
      });
    return { argv: args };
  }
  return { name: args[0]! };
}
