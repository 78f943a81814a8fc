import type { Command } from 'commander';
import { checkName } from '../names.js';
import { forwardPort, routeTo } from '../forward.js';
import type { Io } from '../output.js';
import { parseDuration } from '../repo.js';
import {
  commitSessionRun,
  DEFAULT_IDLE,
  untilEnded,
  waitForSession,
  type LiveSession,
  type SessionOpts,
} from '../session.js';
import { commitSpecEdit } from '../spec-edit.js';
import { openCommandStore } from '../store.js';

/** The options `adv notebook` and `adv shell` both take. */
export function sessionOptions(cmd: Command): Command {
  return cmd
    .option('--on <backend>', 'the Backend to run on (default: the solver picks, as for any run)')
    .option('--gpus <n>', 'GPUs the session needs')
    .option('--env-ref <environment>', 'the Environment to run in (name or name@version)')
    .option('--idle <duration>', 'end the session after this long unused (e.g. 30m, 2h)', DEFAULT_IDLE)
    .option('--name <name>', "the session Run's name (default: nb-/sh-<user>-<time>)")
    .option('--attach <run>', 'reach a session that is already running instead of starting one')
    .option('--wait <duration>', 'how long to wait for the session to start', '15m')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .option('--store <url>', "the object store (default: the specs repo's Storage)");
}

/** Starts (or attaches to) a session and waits until it is reachable. */
export async function startSession(
  io: Io,
  kind: 'notebook' | 'shell',
  opts: SessionOpts & { attach?: string },
): Promise<LiveSession> {
  // The store first: without one, the session could never be reached, so nothing is committed.
  const store = await openCommandStore(opts, io);
  const name = opts.attach ? checkName(opts.attach) : await commitSessionRun(io, kind, opts);
  return waitForSession(io, opts, store, name, parseDuration(opts.wait));
}

/**
 * `adv notebook`: Jupyter Lab on a backend, as a session Run committed to the specs repo; prints a
 * local URL (with its token) forwarded to it, and keeps the forward until Ctrl-C or the session
 * ends. Ctrl-C leaves the session to its idle timeout, unless `--stop`.
 */
export function registerNotebook(program: Command, io: Io): void {
  sessionOptions(
    program
      .command('notebook')
      .description(
        'Start Jupyter Lab on a backend (a session Run committed to the specs repo) and forward a local port to it',
      ),
  )
    .option('--port <port>', 'local port to listen on (default: any free one)')
    .option('--stop', 'Ctrl-C also ends the session (commits spec.suspend: true)')
    .addHelpText(
      'after',
      '\nExamples:\n  adv notebook --on ssh-gpu --gpus 1 --idle 1h\n  adv notebook --attach nb-ada-20260121-101500\n  adv cancel nb-ada-20260121-101500     # end it now',
    )
    .action(async (opts: SessionOpts & { attach?: string; port?: string; stop?: boolean }) => {
      const live = await startSession(io, 'notebook', opts);
      const name = live.endpoint.run;
      const route = await routeTo(live.backend, live.attempt, { env: io.env, host: live.endpoint.host });
      const fwd = await forwardPort(route, Number(opts.port ?? 0), live.endpoint.port!);
      io.stdout.write(`http://127.0.0.1:${fwd.localPort}/lab?token=${live.endpoint.token}\n`);
      io.stderr.write(
        `Jupyter Lab of ${name} on ${live.backend.name} (attempt ${live.attempt.n}). Ctrl-C disconnects; ` +
          `the session ends after ${live.endpoint.idleTimeoutSec} s unused (adv cancel ${name} ends it now).\n`,
      );
      const ended = await holdUntilInterrupted(io, opts, name);
      await fwd.close();
      if (ended) return void io.stderr.write(`session ${name} ended (${ended})\n`);
      if (opts.stop)
        return commitSpecEdit(
          io,
          'Run',
          name,
          opts,
          (set) => set(['spec', 'suspend'], true),
          `stop session ${name}`,
        );
      io.stderr.write(`disconnected; adv notebook --attach ${name} reconnects\n`);
    });
}

/** Waits for Ctrl-C (or SIGTERM): undefined; or for the session's end: its final phase. */
async function holdUntilInterrupted(io: Io, opts: SessionOpts, name: string): Promise<string | undefined> {
  const ac = new AbortController();
  const interrupted = new Promise<undefined>((resolve) => {
    const on = () => {
      ac.abort();
      resolve(undefined);
    };
    process.once('SIGINT', on);
    process.once('SIGTERM', on);
    ac.signal.addEventListener('abort', () => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
    });
  });
  try {
    return await Promise.race([untilEnded(io, opts, name, ac.signal), interrupted]);
  } finally {
    ac.abort();
  }
}
