import type { Command } from 'commander';
import { routeTo } from '../forward.js';
import type { Io } from '../output.js';
import { openShell, shellCommand, type SessionOpts } from '../session.js';
import { sessionOptions, startSession } from './notebook.js';

/**
 * `adv shell`: a login shell on a backend, as a session Run committed to the specs repo. The
 * attempt holds the machine while a shell is attached, and ends after `--idle` with none.
 */
export function registerShell(program: Command, io: Io): void {
  sessionOptions(
    program
      .command('shell')
      .description(
        'Open a login shell on a backend: a session Run (committed to the specs repo) holds the machine while a shell is attached',
      ),
  )
    .addHelpText(
      'after',
      '\nExamples:\n  adv shell --on slurm-a --gpus 1 --idle 10m\n  adv shell --attach sh-ada-20260121-101500   # another shell in the same session',
    )
    .action(async (opts: SessionOpts & { attach?: string }) => {
      const live = await startSession(io, 'shell', opts);
      const { run, jobDir, idleTimeoutSec } = live.endpoint;
      const route = await routeTo(live.backend, live.attempt, { env: io.env, host: live.endpoint.host });
      const code = await openShell(route, shellCommand(jobDir ?? '', run, live.attempt.n, true), io);
      io.stderr.write(
        `shell closed; session ${run} ends after ${idleTimeoutSec} s with no shell (adv shell --attach ${run} opens another, adv cancel ${run} ends it now)\n`,
      );
      process.exitCode = code;
    });
}
