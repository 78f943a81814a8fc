/**
 * `adv exec`: the wrapper every backend runs around the user's command, so every backend gives
 * the same contract — environment (the distributed one included, dist-env.ts), one stop signal,
 * an exit record — and, with a store, checkpoint restore and upload, heartbeats and logs in the
 * store (`worker.ts`).
 *
 * It runs on workers that have Node.js but not our node_modules: `npm run build` bundles it into
 * one file (dist/adv-exec.mjs) that backends ship.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ckptPrefix, type CheckpointManifest } from './checkpoint.js';
import { distributedEnv, type Topology } from './dist-env.js';
import { downloadOutput } from './artifacts.js';
import { PartShipper } from './artifact-parts.js';
import { bounded } from './bounded.js';
import { fetchCode, parseInputs, publishOutputs } from './exec-inputs.js';
import { BlobCache, cacheOptionsFromEnv, datasetCacheDir } from './datasets/cache.js';
import { parseDatasetInputs } from './datasets/contract.js';
import { materialiseDatasets } from './datasets/materialise.js';
import { planSession, sessionOutcome, type Session } from './exec-setup.js';
import { exitRecord, signalNumber } from './exit-record.js';
import { LEASE_FILE, watchLease } from './lease.js';
import { METRICS_FILE_ENV } from './metrics.js';
import { METRICS_FILE_NAME } from './metrics-ship.js';
import { processStartTicks } from './proc.js';
import {
  CANCEL_FILE,
  EXEC_FILE,
  EXIT_FILE,
  ExitReason,
  writeJsonAtomic,
  type ExitRecord,
} from './records.js';
import { REDACT_VAR, StreamRedactor, redactNames, redactText, secretValues } from './redact.js';
import { CkptMode } from './restore-barrier.js';
import {
  parseSessionVar,
  prepareSession,
  SESSION_VAR,
  sessionPlaceholderArgv,
  superviseSession,
  type PreparedSession,
  type SessionKind,
} from './session.js';
import type { TailLines } from './setup.js';
import type { ObjectStore } from './store/types.js';
import { StopForwarder, workloadEnd, type StopSignal } from './supervise.js';
import { FINISH_TIMEOUT_MS, Worker } from './worker.js';
import { retentionFromEnv, type RetentionKeeper } from './retention.js';

export interface ExecOptions {
  run: string;
  attempt: number;
  argv: string[];
  /** Where exec.json / exit.json go, and the default home of the checkpoint and artifact dirs. */
  jobDir?: string;
  /** The checkpoint dir (per-process: this process's own; shared: the one all processes see). */
  ckptDir?: string;
  artifactDir?: string;
  cwd?: string;
  /** Seconds the workload gets after its stop signal before SIGKILL. Default 30. */
  graceSec?: number;
  env?: NodeJS.ProcessEnv;
  /** The object store: with it, checkpoints are restored and uploaded, logs and heartbeats shipped. */
  store?: ObjectStore;
  commitMode?: 'auto' | 'marker';
  heartbeatSec?: number;
  /** Seconds the final writes to the store may take once the workload has ended (`WorkerOptions.finishTimeoutMs`). */
  finishTimeoutSec?: number;
  /**
   * Where this process sits in a multi-host job (default: process 0 of 1). Every process ships
   * its checkpoint part, heartbeats and output; process 0 chooses the restore, commits manifests,
   * publishes outputs and writes the exit record to the store.
   */
  topology?: Topology;
  /** How the processes see the checkpoint dir (default per-process; store needs `store`). */
  ckptMode?: CkptMode;
  /** What the workload gets for any stop notice adv exec receives (default SIGTERM). */
  stopSignal?: StopSignal;
  /** Seconds process k > 0 waits for process 0's restore record (default 1800). */
  restoreWaitSec?: number;
  /**
   * Fetch the code from the store first: the payload at `key` (a tar.gz) is extracted into
   * `<job dir>/work` and the workload runs in it (in `workdir` under it, when given). For backends
   * whose workers have nothing but the store and Node (a Kubernetes pod).
   */
  code?: { key: string; workdir?: string };
  log?: (line: string) => void;
  /** Progress of long transfers, for a terminal. */
  progress?: (label: string, bytes: number, total: number) => void;
}

/** What every part of one adv exec run shares. */
interface Ctx {
  opts: ExecOptions;
  log: (line: string) => void;
  secrets: string[];
  jobDir: string | undefined;
  ckptDir: string;
  artifactDir: string;
  contract: Record<string, string>;
  startedAt: string;
  fwd: StopForwarder;
  worker: Worker | undefined;
  /** A temporary dir of ours holding the metrics file, when there is no job dir: removed at the end. */
  metricsTmp: string | undefined;
  retention: RetentionKeeper | undefined;
  /** An interactive session (`ADV_SESSION`) runs instead of the command. */
  interactive?: PreparedSession;
  /** Ships the parts of the declared outputs while the workload runs (process 0, with a store). */
  parts?: PartShipper;
}

/** Runs the command under the contract; resolves to the exit code adv exec itself should return. */
export async function advExec(opts: ExecOptions): Promise<{ code: number; record: ExitRecord }> {
  // The values of the variables the backend delivered out of band are masked in everything shipped.
  const secrets = secretValues(redactNames(opts.env?.[REDACT_VAR] ?? process.env[REDACT_VAR]), {
    ...process.env,
    ...opts.env,
  });
  const rawLog = opts.log ?? ((l: string) => process.stderr.write(`adv exec: ${l}\n`));
  const log = (l: string) => rawLog(redactText(l, secrets));
  // Listening from the start: a stop notice during the restore barrier ends the attempt cleanly.
  const fwd = new StopForwarder((opts.graceSec ?? 30) * 1000, log, opts.stopSignal);
  let metricsTmp: string | undefined;
  const setUpHere = (o: ExecOptions) => {
    const c = setUp(o, log, secrets, fwd);
    metricsTmp = c.metricsTmp;
    return c;
  };
  try {
    let interactive: PreparedSession | undefined;
    try {
      const spec = parseSessionVar(opts.env?.[SESSION_VAR] ?? process.env[SESSION_VAR]);
      if (spec) {
        // Process 0 is the session; the others of a multi-host slice only hold their host until the
        // attempt ends (they publish nothing and never end on their own).
        const follower = (opts.topology?.process ?? 0) > 0;
        const jobDir = resolve(opts.jobDir ?? join(process.cwd(), '.adv'));
        const prepared = await prepareSession(follower ? { kind: 'shell' } : spec, jobDir);
        if (!follower) interactive = prepared;
        opts = { ...opts, argv: prepared.argv, env: { ...opts.env, ...prepared.env } };
        secrets.push(...prepared.secrets);
      }
    } catch (e) {
      const at = new Date().toISOString();
      const message = `the session could not be prepared: ${(e as Error).message}`;
      const record = { exitCode: 2, reason: ExitReason.StartFailed, message, startedAt: at, finishedAt: at };
      return await failBeforeStart(setUpHere(opts), record);
    }
    const ctx = { ...setUpHere(opts), ...(interactive ? { interactive } : {}) };
    const start = await beforeStart(ctx);
    if ('record' in start) return await failBeforeStart(ctx, start.record);
    // The setup session (ADV_SETUP's steps, a uv project's environment) the workload starts in.
    const session = opts.argv.length
      ? planSession({
          argv: opts.argv,
          cwd: start.cwd,
          env: { ...process.env, ...opts.env, ...ctx.contract },
          jobDir: ctx.jobDir,
          secrets: ctx.secrets,
          startedAt: ctx.startedAt,
        })
      : undefined;
    if (session && 'record' in session) return await failBeforeStart(ctx, session.record);
    return await runWorkload(ctx, start.cwd, start.outputs, session);
  } finally {
    fwd.dispose();
    if (metricsTmp) rmSync(metricsTmp, { recursive: true, force: true });
  }
}

/** The dirs, the workload's contract, and the worker that talks to the store. */
function setUp(opts: ExecOptions, log: (l: string) => void, secrets: string[], fwd: StopForwarder): Ctx {
  const jobDir = opts.jobDir ? resolve(opts.jobDir) : undefined;
  const home = (name: string) => (jobDir ? join(jobDir, name) : join(process.cwd(), '.adv', name));
  const mode = opts.ckptMode ?? CkptMode.PerProcess;
  const inStore = mode === CkptMode.Store && opts.store?.url.startsWith('file:');
  // Store mode over a file:// store: the workload's dir IS the store's, so code written for a dir works.
  const ckptDir = resolve(
    inStore
      ? fileURLToPath(opts.store!.url + ckptPrefix(opts.run))
      : (opts.ckptDir ?? process.env.ADV_CKPT_DIR ?? home('ckpt')),
  );
  const artifactDir = resolve(opts.artifactDir ?? process.env.ADV_ARTIFACT_DIR ?? home('artifacts'));
  for (const d of [ckptDir, artifactDir, ...(jobDir ? [jobDir] : [])]) mkdirSync(d, { recursive: true });
  const topo = opts.topology ?? {
    process: 0,
    processes: 1,
    localProcess: 0,
    localProcesses: 1,
    localDevices: 0,
  };
  const contract: Record<string, string> = {
    ...distributedEnv(topo),
    ADV_PROCESS_ID: String(topo.process),
    ADV_NUM_PROCESSES: String(topo.processes),
    ADV_RUN: opts.run,
    ADV_ATTEMPT: String(opts.attempt),
    ADV_CKPT_DIR: ckptDir,
    ...(mode === CkptMode.Store && opts.store ? { ADV_CKPT_URI: opts.store.url + ckptPrefix(opts.run) } : {}),
    ADV_ARTIFACT_DIR: artifactDir,
    ...(jobDir ? { ADV_JOB_DIR: jobDir } : {}),
  };
  const metrics = metricsFile(jobDir, !topo.process, log);
  contract[METRICS_FILE_ENV] = metrics.file;
  // Process 0 applies the run's policy.checkpoints after each commit.
  const retention =
    opts.store && topo.process === 0
      ? retentionFromEnv({ ...process.env, ...opts.env }, opts.store, opts.run, log)
      : undefined;
  const worker = opts.store
    ? new Worker({
        store: opts.store,
        run: opts.run,
        attempt: opts.attempt,
        ckptDir,
        log,
        process: topo.process,
        processes: topo.processes,
        ckptMode: mode,
        ...(opts.restoreWaitSec !== undefined ? { restoreWaitMs: opts.restoreWaitSec * 1000 } : {}),
        ...(opts.commitMode ? { commitMode: opts.commitMode } : {}),
        ...(opts.heartbeatSec ? { heartbeatSec: opts.heartbeatSec } : {}),
        ...(opts.finishTimeoutSec ? { finishTimeoutMs: opts.finishTimeoutSec * 1000 } : {}),
        ...(opts.progress ? { progress: opts.progress } : {}),
        ...(process.env.ADV_EXEC_HOLD_PART ? { holdPartWhile: process.env.ADV_EXEC_HOLD_PART } : {}),
        metricsFile: metrics.file,
        secrets,
        ...(retention ? { afterCommit: (m: CheckpointManifest) => retention.committed(m) } : {}),
      })
    : undefined;
  const startedAt = new Date().toISOString();
  const metricsTmp = metrics.tmpDir;
  return {
    opts,
    log,
    secrets,
    jobDir,
    ckptDir,
    artifactDir,
    contract,
    startedAt,
    fwd,
    worker,
    metricsTmp,
    retention,
  };
}

/**
 * The file the workload appends its metric lines to: `<job dir>/metrics.jsonl` (the same path for
 * every process of a job; only process 0's is shipped), or one in a temporary dir of ours. Process
 * 0 starts it empty, so lines left by an earlier run in the same job dir are not shipped as this
 * attempt's.
 */
function metricsFile(
  jobDir: string | undefined,
  primary: boolean,
  log: (line: string) => void,
): { file: string; tmpDir?: string } {
  const tmpDir = jobDir ? undefined : mkdtempSync(join(tmpdir(), 'adv-metrics-'));
  const file = join(jobDir ?? tmpDir!, METRICS_FILE_NAME);
  try {
    if (primary) writeFileSync(file, '');
  } catch (e) {
    log(
      `warning: cannot start the metrics file ${file} (${(e as Error).message}): the workload's metric lines may not reach the store`,
    );
  }
  return { file, ...(tmpDir ? { tmpDir } : {}) };
}

type BeforeStart = { cwd: string; outputs: string[] } | { record: ExitRecord };

/** Restore (behind the barrier of a multi-host attempt), the code, the DAG inputs: all before the workload. */
async function beforeStart(ctx: Ctx): Promise<BeforeStart> {
  const { opts, log, fwd, worker } = ctx;
  const fail = (exitCode: number, reason: ExitReason, message: string): BeforeStart => ({
    record: { exitCode, reason, message, startedAt: ctx.startedAt, finishedAt: new Date().toISOString() },
  });
  const stoppedEarly = () =>
    fail(
      128 + signalNumber(fwd.stopSignal as NodeJS.Signals),
      ExitReason.Preempted,
      `stopped by ${fwd.stopSignal} before the workload started`,
    );
  try {
    // A stop notice ends the wait at once; a restore still under way ends with the process.
    await Promise.race([worker?.restore(fwd.stopped), abortion(fwd.stopped)]);
  } catch (e) {
    if (fwd.stopSignal) return stoppedEarly();
    return fail(1, ExitReason.Error, `no restore, so no workload: ${(e as Error).message}`);
  }
  let cwd = opts.cwd ?? process.cwd();
  if (opts.code) {
    try {
      cwd = await fetchCode(opts.store, opts.code, ctx.jobDir ?? join(process.cwd(), '.adv'));
      log(`code ${opts.code.key} extracted; running in ${cwd}`);
    } catch (e) {
      return fail(127, ExitReason.StartFailed, `the code could not be fetched: ${(e as Error).message}`);
    }
  }
  // DAG inputs: every output this node reads, downloaded and verified before it starts.
  const inputs = parseInputs(opts.env?.ADV_INPUTS ?? process.env.ADV_INPUTS);
  const outputs = (opts.env?.ADV_OUTPUTS ?? process.env.ADV_OUTPUTS ?? '').split(',').filter(Boolean);
  const inputsRoot = join(ctx.jobDir ?? join(process.cwd(), '.adv'), 'inputs');
  for (const [name, ref] of Object.entries(inputs)) {
    const dest = join(inputsRoot, name);
    ctx.contract[`ADV_INPUT_${name}_DIR`] = dest;
    if (!opts.store) continue;
    try {
      const m = await downloadOutput(opts.store, ref.run, ref.output, dest);
      log(`input ${name}: ${ref.run}/${ref.output} (${m.files.length} files) in ${dest}`);
    } catch (e) {
      return fail(1, ExitReason.Error, `input ${name} could not be fetched: ${(e as Error).message}`);
    }
  }
  // A stop notice ends a long fetch at once; what was fetched stays in the host cache (a blob cut
  // short stays `.partial`, resumed by the next fetch), and adv exec exits soon after the record.
  const datasets = await Promise.race([
    fetchDatasets(ctx, inputsRoot),
    abortion(fwd.stopped).catch(() => 'stopped'),
  ]);
  ctx.worker?.datasetProgress(undefined);
  if (fwd.stopSignal) return stoppedEarly();
  if (datasets) return fail(1, ExitReason.InputsFailed, datasets);
  // Parts of the outputs that earlier attempts committed: the workload sees what is done.
  if (opts.store && outputs.length && !opts.topology?.process) {
    const parts = new PartShipper({
      store: opts.store,
      run: opts.run,
      attempt: opts.attempt,
      artifactDir: ctx.artifactDir,
      outputs,
      log,
      everyMs: (opts.heartbeatSec ?? 15) * 1000,
    });
    try {
      await parts.restore();
    } catch (e) {
      return fail(1, ExitReason.Error, `committed parts could not be fetched: ${(e as Error).message}`);
    }
    ctx.parts = parts;
  }
  return { cwd, outputs };
}

/**
 * The run's datasets (`ADV_DATASETS`) into `<inputs>/<as>/` through the host cache, with progress
 * in the heartbeat; what went wrong, if anything (the attempt then ends as an infrastructure
 * failure: the data's host or store failed, not the run's code).
 */
async function fetchDatasets(ctx: Ctx, inputsRoot: string): Promise<string | undefined> {
  const env = { ...process.env, ...ctx.opts.env };
  try {
    const inputs = parseDatasetInputs(env.ADV_DATASETS);
    if (!inputs.length) return undefined;
    const cache = new BlobCache(datasetCacheDir(env), cacheOptionsFromEnv(env));
    const { env: dirs } = await materialiseDatasets(inputs, {
      store: ctx.opts.store,
      cache,
      inputsDir: inputsRoot,
      log: ctx.log,
      signal: ctx.fwd.stopped,
      onProgress: (p) => {
        if (ctx.fwd.stopSignal) return; // a fetch left running after a stop notice reports nothing
        ctx.worker?.datasetProgress(p);
        ctx.opts.progress?.(p.dataset, p.bytes, p.total);
      },
    });
    Object.assign(ctx.contract, dirs);
    return undefined;
  } catch (e) {
    return `the datasets could not be fetched: ${(e as Error).message}`;
  } finally {
    ctx.worker?.datasetProgress(undefined);
  }
}

/** Rejects once `signal` aborts (never resolves). */
function abortion(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
  });
}

/** Ends before the workload started: the record is kept (and uploaded) like any other. */
async function failBeforeStart(ctx: Ctx, record: ExitRecord): Promise<{ code: number; record: ExitRecord }> {
  ctx.log(record.message!);
  await ctx.worker?.finish(record, { workloadExitedOnItsOwn: true });
  await ctx.retention?.finish();
  if (ctx.jobDir) writeRecord(ctx.jobDir, EXIT_FILE, record, ctx.log);
  return { code: record.exitCode, record };
}

/** Starts the workload, supervises it to its end, and does the final writes. */
async function runWorkload(
  ctx: Ctx,
  cwd: string,
  outputs: string[],
  session: Session | undefined,
): Promise<{ code: number; record: ExitRecord }> {
  const { opts, log, fwd, worker, jobDir } = ctx;
  const [cmd] = opts.argv;
  if (!cmd) throw new Error('adv exec: no command given (use: adv exec [options] -- COMMAND [ARGS...])');
  const [exe, ...args] = session?.argv ?? opts.argv;
  const child = spawn(exe!, args, {
    cwd,
    env: session?.env ?? { ...process.env, ...opts.env, ...ctx.contract },
    // With a store, output is copied to the terminal AND shipped in parts; with secrets, masked;
    // with setup, its last lines kept for the exit record of a failed step.
    stdio: worker || ctx.secrets.length || session ? ['inherit', 'pipe', 'pipe'] : 'inherit',
    // Its own process group, so a signal reaches the workload and everything it started.
    detached: true,
  });
  fwd.attach(child.pid);
  const ended = workloadEnd(child, () => fwd.exited());
  copyOutput(child, ctx.secrets, worker, session?.tail);
  if (jobDir && child.pid) writeExecRecord(ctx, child.pid);
  const unwatchLease = jobDir ? watchAgentLease(jobDir, fwd, log) : undefined;
  await worker?.start();
  ctx.parts?.start();
  let idled: string | undefined;
  const endSession = ctx.interactive
    ? superviseSession({
        prepared: ctx.interactive,
        run: opts.run,
        attempt: opts.attempt,
        jobDir: jobDir ?? resolve(join(process.cwd(), '.adv')),
        store: opts.store,
        log,
        end: (why) => {
          idled = why;
          log(`${why}: ending it`);
          fwd.stop('the session idle timeout');
          setTimeout(() => fwd.kill(), (opts.graceSec ?? 30) * 1000).unref();
        },
      })
    : undefined;
  const result = await ended;
  await endSession?.();
  unwatchLease?.();
  // Parts committed up to the end (the grace period's included) count, however the workload ended.
  if (ctx.parts)
    await bounded(
      `the upload of its outputs' last parts to ${opts.store!.url}`,
      ctx.parts.finish(),
      Date.now() + (opts.finishTimeoutSec ? opts.finishTimeoutSec * 1000 : FINISH_TIMEOUT_MS),
      log,
    );
  const primary = !opts.topology?.process;
  const cancelled = jobDir !== undefined && existsSync(join(jobDir, CANCEL_FILE));
  // A stop or a cancel during setup ends the attempt as one during the workload would.
  const setupEnd = session && sessionOutcome(session, cmd, ctx.secrets, ctx);
  const ownEnd = setupEnd && !result.error && !fwd.stopSignal && !cancelled ? setupEnd : undefined;
  const sessionEnd = idled && !cancelled ? idleSessionEnd(idled, ctx.startedAt) : undefined;
  const record =
    ownEnd ??
    sessionEnd ??
    (await exitRecord(result, fwd, {
      cmd,
      cwd,
      cancelled,
      publish: () =>
        outputs.length && primary
          ? publishOutputs(opts.store, opts.run, opts.attempt, ctx.artifactDir, outputs, log)
          : Promise.resolve(undefined),
      startedAt: ctx.startedAt,
      secrets: ctx.secrets,
    }));
  // Upload what the workload finished (its last checkpoint in the grace period included).
  await worker?.finish(record, { workloadExitedOnItsOwn: !fwd.killedByUs && !result.signal });
  await ctx.retention?.finish();
  if (jobDir) writeRecord(jobDir, EXIT_FILE, record, log);
  if (record.message) log(record.message);
  return { code: record.exitCode, record };
}

/** The pull agent's lease (lease.ts): unrenewed, the workload stops before anyone else may run it. */
function watchAgentLease(jobDir: string, fwd: StopForwarder, log: (l: string) => void): () => void {
  return watchLease(join(jobDir, LEASE_FILE), {
    stop: () => {
      log(`the agent lease ran out unrenewed: stopping the workload (${fwd.stopAs})`);
      fwd.stop('the agent lease running out');
    },
    kill: () => fwd.kill(),
  });
}

/** A session that ended for want of use did what it was for: the run Succeeds, the machine goes back. */
function idleSessionEnd(idled: string, startedAt: string): ExitRecord {
  return {
    exitCode: 0,
    reason: ExitReason.Completed,
    message: `session ended: ${idled}`,
    startedAt,
    finishedAt: new Date().toISOString(),
  };
}

function writeExecRecord(ctx: Ctx, childPid: number): void {
  writeRecord(
    ctx.jobDir!,
    EXEC_FILE,
    {
      pid: process.pid,
      startTicks: processStartTicks(process.pid),
      childPid,
      childStartTicks: processStartTicks(childPid),
      run: ctx.opts.run,
      attempt: ctx.opts.attempt,
      startedAt: ctx.startedAt,
    },
    ctx.log,
  );
}

/**
 * Copies the workload's output to adv exec's own (masked), to the worker, which ships it, and to
 * the tail kept for a failed setup step.
 */
function copyOutput(
  child: ChildProcess,
  secrets: string[],
  worker: Worker | undefined,
  tail: TailLines | undefined,
): void {
  if (!child.stdout || !child.stderr) return;
  for (const [from, to] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ] as const) {
    const masked = new StreamRedactor(secrets);
    const emit = (b: Buffer) => {
      if (!b.length) return;
      to.write(b);
      worker?.output(b);
      tail?.push(from === child.stdout ? 'stdout' : 'stderr', b);
    };
    from.on('data', (b: Buffer) => emit(masked.push(b)));
    from.on('end', () => emit(masked.end()));
  }
}

/**
 * Writes a record into the job dir. A job dir removed under a running job is said in the log, not
 * thrown: adv exec still supervises the workload to its end, and still ends itself.
 */
function writeRecord(jobDir: string, file: string, value: unknown, log: (line: string) => void): void {
  try {
    writeJsonAtomic(join(jobDir, file), value);
  } catch (e) {
    log(`cannot write ${file} in ${jobDir} (${(e as Error).message}): was the job dir removed?`);
  }
}

/** The argument vector for a Run's `command` or `entry` (never a shell string built from values). */
export function argvFor(spec: {
  command?: string | string[];
  entry?: string;
  session?: { kind: SessionKind };
}): string[] {
  if (spec.session) return sessionPlaceholderArgv(spec.session.kind);
  if (Array.isArray(spec.command)) return spec.command;
  if (typeof spec.command === 'string') return ['sh', '-c', spec.command];
  if (spec.entry) {
    const at = spec.entry.lastIndexOf(':');
    const file = spec.entry.slice(0, at);
    const fn = spec.entry.slice(at + 1);
    // The file and function arrive as argv, never inside the program text.
    const program = [
      'import importlib.util, os, sys',
      'path, fn = sys.argv[1], sys.argv[2]',
      'sys.argv = [path]',
      'sys.path.insert(0, os.path.dirname(os.path.abspath(path)))',
      'spec = importlib.util.spec_from_file_location("__adv_entry__", path)',
      'mod = importlib.util.module_from_spec(spec)',
      'spec.loader.exec_module(mod)',
      'result = getattr(mod, fn)()',
      'sys.exit(result if isinstance(result, int) else 0)',
    ].join('\n');
    return ['python3', '-c', program, file, fn];
  }
  throw new Error('run has neither command nor entry');
}
