/**
 * The `adv exec` command line, parsed with Node's own `util.parseArgs`: the worker-side entry
 * loads nothing but this folder, so a job starts in the time Node itself takes (~60 ms here),
 * not the ~300 ms the whole CLI takes to load.
 */
import { isRunName, RUN_NAME_MAX } from './names.js';
import { parseArgs } from 'node:util';
import { advExec } from './exec.js';
import { progressBar } from './progress.js';
import { FINISH_TIMEOUT_MS } from './worker.js';
import { openStore } from './store/index.js';

export const EXEC_USAGE = `Usage: adv exec [--store URL] [--run NAME] [--attempt N] [--process K] [--job-dir DIR] [--cwd DIR] [--grace SECONDS] [--code KEY [--workdir DIR]] -- COMMAND [ARGS...]

Runs COMMAND under the AdventureTime worker contract, the same on every backend: the workload
sees ADV_RUN, ADV_ATTEMPT, ADV_CKPT_DIR and ADV_ARTIFACT_DIR; SIGTERM, SIGINT and SIGUSR1 are
forwarded, and after the grace period (default 30 s) the workload is killed; exit.json in the
job dir records how it ended.

With a store, the newest committed checkpoint is restored into ADV_CKPT_DIR first; every finished
step dir (renamed into place, or holding a COMMITTED file) is uploaded, files first and manifest
last; output, heartbeats and the exit record go to the store too.

Options:
  --store URL       file:///path or s3://bucket/prefix?endpoint=…&region=…&forcePathStyle=true
                    (default: $ADV_STORE; none: no checkpoints, logs or heartbeats in a store)
  --run NAME        run name (default: $ADV_RUN)
  --attempt N       attempt number (default: $ADV_ATTEMPT, else 1)
  --process K       this process's index in a multi-host job (default: $ADV_PROCESS_ID, else 0);
                    only process 0 restores and uploads checkpoints, heartbeats and the exit
                    record, the others ship their output (adv logs RUN --worker K)
  --job-dir DIR     where exec.json and exit.json are written
  --cwd DIR         run COMMAND in DIR (default: the current dir); lets a backend start adv exec
                    in a dir that outlives the job's own
  --grace SECONDS   seconds the workload gets after SIGTERM/SIGUSR1
  --code KEY        fetch the code from the store first: the tar.gz at KEY is extracted into
                    <job dir>/work, where COMMAND runs (for workers with only Node and the store)
  --workdir DIR     with --code: run in DIR of the code
  --commit-mode M   auto (rename or COMMITTED marker, default) or marker (COMMITTED only)
  --heartbeat SECS  heartbeat interval (default 15)
  --finish-timeout SECS
                    how long the final writes to the store (last checkpoint, output, exit
                    record) may take once the workload has ended (default 900); then adv exec
                    logs what it could not write and exits

Example:
  adv exec --store file:///tmp/store --run toy --attempt 1 -- python3 examples/toy-train/train.py
`;

/**
 * Runs `adv exec ARGS`; resolves to the process exit code (the workload's own). The entry of a
 * process: once the workload has run, the process ends within EXIT_GRACE_MS (`exitSoon`).
 */
export async function execMain(
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      allowPositionals: true,
      strict: true,
      options: {
        run: { type: 'string' },
        attempt: { type: 'string' },
        process: { type: 'string' },
        'job-dir': { type: 'string' },
        cwd: { type: 'string' },
        grace: { type: 'string' },
        store: { type: 'string' },
        'commit-mode': { type: 'string' },
        heartbeat: { type: 'string' },
        'finish-timeout': { type: 'string' },
        code: { type: 'string' },
        workdir: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    process.stderr.write(`error: ${(e as Error).message}\n\n${EXEC_USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(EXEC_USAGE);
    return 0;
  }
  const run = values.run ?? env.ADV_RUN;
  if (!run || positionals.length === 0) {
    process.stderr.write(
      `error: ${!run ? 'no run name: pass --run NAME or set ADV_RUN' : 'no command given after --'}\n\n${EXEC_USAGE}`,
    );
    return 2;
  }
  if (!isRunName(run)) {
    process.stderr.write(
      `error: ${JSON.stringify(run)} is not a valid run name: a DNS-1123 subdomain of at most ${RUN_NAME_MAX} characters (lowercase letters, digits, '-' and '.')\n`,
    );
    return 2;
  }
  const attempt = Number(values.attempt ?? env.ADV_ATTEMPT ?? 1);
  const grace = Number(values.grace ?? 30);
  const finishSec = Number(values['finish-timeout'] ?? FINISH_TIMEOUT_MS / 1000);
  const procRaw = (values.process ?? env.ADV_PROCESS_ID ?? '0').trim();
  const proc = /^\d{1,6}$/.test(procRaw) ? Number(procRaw) : NaN;
  if (!Number.isInteger(attempt) || attempt < 1 || !Number.isFinite(grace) || grace < 0) {
    process.stderr.write('error: --attempt takes a whole number ≥ 1 and --grace a number of seconds ≥ 0\n');
    return 2;
  }
  if (!Number.isFinite(finishSec) || finishSec <= 0) {
    process.stderr.write(
      `error: --finish-timeout takes a number of seconds > 0, not ${JSON.stringify(values['finish-timeout'])}\n`,
    );
    return 2;
  }
  if (!Number.isInteger(proc)) {
    process.stderr.write(
      `error: --process (or $ADV_PROCESS_ID) takes a whole number ≥ 0, not ${JSON.stringify(procRaw)}\n`,
    );
    return 2;
  }
  const mode = values['commit-mode'] ?? 'auto';
  if (mode !== 'auto' && mode !== 'marker') {
    process.stderr.write(`error: --commit-mode takes auto or marker, not ${JSON.stringify(mode)}\n`);
    return 2;
  }
  if (values.cwd !== undefined && values.code) {
    process.stderr.write(
      'error: --cwd and --code do not go together: with --code, use --workdir DIR of the code\n',
    );
    return 2;
  }
  if (values.workdir !== undefined && !values.code) {
    process.stderr.write('error: --workdir goes with --code (the working dir of the fetched code)\n');
    return 2;
  }
  const storeUrl = values.store ?? env.ADV_STORE;
  let store;
  try {
    store = storeUrl ? await openStore(storeUrl, env) : undefined;
  } catch (e) {
    process.stderr.write(`error: ${(e as Error).message}\n`);
    return 2;
  }
  const { code } = await advExec({
    run,
    attempt,
    argv: positionals,
    ...(values['job-dir'] ? { jobDir: values['job-dir'] } : {}),
    ...(values.cwd ? { cwd: values.cwd } : {}),
    graceSec: grace,
    commitMode: mode,
    ...(proc ? { process: proc } : {}),
    ...(store ? { store } : {}),
    ...(values.heartbeat ? { heartbeatSec: Number(values.heartbeat) } : {}),
    finishTimeoutSec: finishSec,
    ...(values.code
      ? { code: { key: values.code, ...(values.workdir ? { workdir: values.workdir } : {}) } }
      : {}),
    ...(process.stderr.isTTY ? { progress: progressBar(process.stderr) } : {}),
  });
  exitSoon(code);
  return code;
}

/** How long adv exec may linger once it is done; see `exitSoon`. */
export const EXIT_GRACE_MS = 5_000;

/**
 * The workload has ended and the final writes are done or given up on: adv exec ends. It normally
 * exits as soon as its event loop is empty; if something still holds it open (a transfer it gave
 * up on, a socket, a watcher), it exits `ms` later anyway, saying what that was. A worker that
 * lingers holds its node, or its cluster allocation until the time limit.
 */
export function exitSoon(code: number, ms = EXIT_GRACE_MS): void {
  const timer = setTimeout(() => {
    const open = process.getActiveResourcesInfo().filter((r) => r !== 'Timeout');
    process.stderr.write(
      `adv exec: exiting ${ms / 1000} s after the workload ended, although ${open.join(', ') || 'something'} still held the process open\n`,
    );
    process.exit(code);
  }, ms);
  timer.unref();
}
