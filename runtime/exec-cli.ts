/**
 * The `adv exec` command line, parsed with Node's own `util.parseArgs`: the worker-side entry
 * loads nothing but this folder, so a job starts in the time Node itself takes (~60 ms here),
 * not the ~300 ms the whole CLI takes to load.
 */
import { advExec } from './exec.js';
import { awaitHandoff, STANDBY_FLAG } from './exec-standby.js';
import { parseExecArgs } from './exec-args.js';
import { progressBar } from './progress.js';
import { openStore } from './store/index.js';

export const EXEC_USAGE = `Usage: adv exec [--store URL] [--run NAME] [--attempt N] [--process K --processes N] [--ckpt-mode MODE] [--ckpt-dir DIR] [--job-dir DIR] [--cwd DIR] [--grace SECONDS] [--stop-signal SIG] [--code KEY [--workdir DIR]] -- COMMAND [ARGS...]

Runs COMMAND under the AdventureTime worker contract, the same on every backend: the workload
sees ADV_RUN, ADV_ATTEMPT, ADV_CKPT_DIR and ADV_ARTIFACT_DIR, and the distributed contract
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; with several processes JAX_COORDINATOR_ADDRESS,
JAX_NUM_PROCESSES, JAX_PROCESS_ID, MASTER_ADDR, MASTER_PORT = coordinator port + 1, and
JAX_LOCAL_DEVICE_IDS where processes share a host). Any stop notice (SIGTERM, SIGINT, SIGUSR1)
gives the workload its stop signal, and after the grace period (default 30 s) it is killed;
exit.json in the job dir records how it ended.

Before COMMAND, the job's setup runs in ONE shell session that then execs COMMAND, so what a step
exports, sources or module-loads reaches it: $ADV_SETUP (a JSON array, in order, of
{"from": "...", "run": "<shell step>"} and {"from": "...", "env": {"NAME": "value"}}; {{ NAME }}
and {{ secrets.NAME }} are replaced by the job's variables, shell-quoted in a step) and, when the
working dir holds pyproject.toml and uv.lock, \`uv sync --frozen\` into an environment under
$ADV_CACHE_DIR/uv/envs (default ~/.cache/adventuretime), synced once per lock on a host, in which
COMMAND runs ($ADV_UV: {"groups": [...], "python": "3.12", "version": "<uv to install when
missing>", "project": "off"}). The first failing step ends the attempt: exit.json says
SetupFailed, with the step, its exit code and its last lines of output.

With a store, the newest committed checkpoint is restored into ADV_CKPT_DIR first; every finished
step dir (renamed into place, or holding COMMITTED or Orbax's commit_success.txt) is uploaded,
files first and manifest last; output, heartbeats and the exit record go to the store too. With
several processes, each uploads its part of a step and process 0 writes the manifest once every
part is there; process 0 chooses the step all processes restore, before any workload starts.

The workload may append metric events, one JSON line each ({"step":N,"metrics":{"loss":0.5}}), to
the file ADV_METRICS_FILE names (<job dir>/metrics.jsonl, else a temporary file); with a store,
process 0 ships its complete lines with the output, under runs/<run>/attempts/<n>/metrics/.

Options:
  --store URL       file:///path or s3://bucket/prefix?endpoint=…&region=…&forcePathStyle=true
                    (default: $ADV_STORE; none: no checkpoints, logs or heartbeats in a store)
  --run NAME        run name (default: $ADV_RUN)
  --attempt N       attempt number (default: $ADV_ATTEMPT, else 1)
  --process K       this process's index in a multi-host job (default: $ADV_PROCESS_ID, else 0)
  --processes N     how many processes the job has (default: $ADV_NUM_PROCESSES, else 1); with
                    N > 1, $ADV_COORDINATOR_ADDRESS (host:port of process 0) must be set
  --ckpt-mode MODE  per-process (default): ADV_CKPT_DIR is this process's own dir;
                    shared: --ckpt-dir is one dir every process of the attempt sees (Orbax needs
                    one), and the processes split its upload; store: the workload writes straight
                    to the store at ADV_CKPT_URI (also ADV_CKPT_DIR on a file:// store)
  --ckpt-dir DIR    the checkpoint dir (default: $ADV_CKPT_DIR, else <job dir>/ckpt); required
                    with --ckpt-mode shared
  --restore-wait SECONDS
                    how long process K > 0 waits for process 0's restore choice (default 1800)
  --stop-signal SIG what the workload gets for any stop notice: SIGTERM (default), SIGINT,
                    SIGUSR1 or SIGUSR2
  --job-dir DIR     where exec.json and exit.json are written
  --cwd DIR         run COMMAND in DIR (default: the current dir); lets a backend start adv exec
                    in a dir that outlives the job's own
  --grace SECONDS   seconds the workload gets after its stop signal
  --code KEY        fetch the code from the store first: the tar.gz at KEY is extracted into
                    <job dir>/work, where COMMAND runs (for workers with only Node and the store)
  --workdir DIR     with --code: run in DIR of the code
  --commit-mode M   auto (rename or a marker file, default) or marker (COMMITTED or
                    commit_success.txt only)
  --heartbeat SECS  heartbeat interval (default 15)
  --finish-timeout SECS
                    how long the final writes to the store (last checkpoint, the other
                    processes' parts, output, exit record) may take once the workload has ended
                    (default 900); then adv exec logs what it could not write and exits

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
  if (args[0] === STANDBY_FLAG) {
    // Started ahead of its job (exec-standby.ts): the job's arguments and environment come down a pipe.
    const job = await awaitHandoff();
    return job ? execMain(job.args, process.env) : 0;
  }
  const parsed = parseExecArgs(args, env);
  if ('help' in parsed) {
    process.stdout.write(EXEC_USAGE);
    return 0;
  }
  if ('error' in parsed) {
    process.stderr.write(`error: ${parsed.error}\n${parsed.usage ? `\n${EXEC_USAGE}` : ''}`);
    return 2;
  }
  let store;
  try {
    store = parsed.storeUrl ? await openStore(parsed.storeUrl, env) : undefined;
  } catch (e) {
    process.stderr.write(`error: ${(e as Error).message}\n`);
    return 2;
  }
  const { code } = await advExec({
    ...parsed.opts,
    ...(store ? { store } : {}),
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
