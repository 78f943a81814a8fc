/**
 * `adv exec`: the wrapper every backend runs around the user's command, so every backend gives
 * the same contract — environment, signal forwarding, an exit record — and, with a store,
 * checkpoint restore and upload, heartbeats and logs in the store (`worker.ts`).
 *
 * It runs on workers that have Node.js but not our node_modules: `npm run build` bundles it into
 * one file (dist/adv-exec.mjs) that backends ship.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { ObjectStore } from './store/types.js';
import { Worker } from './worker.js';
import { downloadOutput, hasContent, uploadOutput, type InputRefs } from './artifacts.js';
import { existsSync, mkdirSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { processStartTicks } from './proc.js';
import { REDACT_VAR, StreamRedactor, redactNames, redactText, secretValues } from './redact.js';
import {
  CANCEL_FILE,
  EXEC_FILE,
  EXIT_FILE,
  ExitReason,
  writeJsonAtomic,
  type ExitRecord,
} from './records.js';
import { LEASE_FILE, watchLease } from './lease.js';
import { StopForwarder, workloadEnd, type WorkloadEnd } from './supervise.js';
import { unpackTarGz } from './unpack.js';

export interface ExecOptions {
  run: string;
  attempt: number;
  argv: string[];
  /** Where exec.json / exit.json go, and the default home of the checkpoint and artifact dirs. */
  jobDir?: string;
  ckptDir?: string;
  artifactDir?: string;
  cwd?: string;
  /** Seconds the workload gets after SIGTERM/SIGUSR1 before SIGKILL. Default 30. */
  graceSec?: number;
  env?: NodeJS.ProcessEnv;
  /** The object store: with it, checkpoints are restored and uploaded, logs and heartbeats shipped. */
  store?: ObjectStore;
  commitMode?: 'auto' | 'marker';
  heartbeatSec?: number;
  /** Seconds the final writes to the store may take once the workload has ended (`WorkerOptions.finishTimeoutMs`). */
  finishTimeoutSec?: number;
  /**
   * This process's index in a multi-host job (default 0): the others ship their output to the
   * store and leave checkpoints, heartbeats, outputs and the exit record to process 0.
   */
  process?: number;
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

/** Runs the command under the contract; resolves to the exit code adv exec itself should return. */
export async function advExec(opts: ExecOptions): Promise<{ code: number; record: ExitRecord }> {
  // The values of the variables the backend delivered out of band are masked in everything shipped.
  const secrets = secretValues(redactNames(opts.env?.[REDACT_VAR] ?? process.env[REDACT_VAR]), {
    ...process.env,
    ...opts.env,
  });
  const rawLog = opts.log ?? ((l: string) => process.stderr.write(`adv exec: ${l}\n`));
  const log = (l: string) => rawLog(redactText(l, secrets));
  const jobDir = opts.jobDir ? resolve(opts.jobDir) : undefined;
  const ckptDir = resolve(
    opts.ckptDir ??
      process.env.ADV_CKPT_DIR ??
      (jobDir ? join(jobDir, 'ckpt') : join(process.cwd(), '.adv', 'ckpt')),
  );
  const artifactDir = resolve(
    opts.artifactDir ??
      process.env.ADV_ARTIFACT_DIR ??
      (jobDir ? join(jobDir, 'artifacts') : join(process.cwd(), '.adv', 'artifacts')),
  );
  for (const d of [ckptDir, artifactDir, ...(jobDir ? [jobDir] : [])]) mkdirSync(d, { recursive: true });
  const graceMs = (opts.graceSec ?? 30) * 1000;
  const startedAt = new Date().toISOString();

  const contract: Record<string, string> = {
    ADV_RUN: opts.run,
    ADV_ATTEMPT: String(opts.attempt),
    ADV_CKPT_DIR: ckptDir,
    ADV_ARTIFACT_DIR: artifactDir,
    ...(jobDir ? { ADV_JOB_DIR: jobDir } : {}),
  };
  const worker = opts.store
    ? new Worker({
        store: opts.store,
        run: opts.run,
        attempt: opts.attempt,
        ckptDir,
        log,
        ...(opts.commitMode ? { commitMode: opts.commitMode } : {}),
        ...(opts.heartbeatSec ? { heartbeatSec: opts.heartbeatSec } : {}),
        ...(opts.finishTimeoutSec ? { finishTimeoutMs: opts.finishTimeoutSec * 1000 } : {}),
        ...(opts.progress ? { progress: opts.progress } : {}),
        ...(opts.process ? { process: opts.process } : {}),
      })
    : undefined;
  await worker?.restore();

  /** Ends before the workload started: the record is kept (and uploaded) like any other. */
  const failBeforeStart = async (record: ExitRecord) => {
    log(record.message!);
    await worker?.finish(record, { workloadExitedOnItsOwn: true });
    if (jobDir) writeRecord(jobDir, EXIT_FILE, record, log);
    return { code: record.exitCode, record };
  };

  let cwd = opts.cwd ?? process.cwd();
  if (opts.code) {
    try {
      cwd = await fetchCode(opts.store, opts.code, jobDir ?? join(process.cwd(), '.adv'));
      log(`code ${opts.code.key} extracted; running in ${cwd}`);
    } catch (e) {
      return failBeforeStart({
        exitCode: 127,
        reason: ExitReason.StartFailed,
        message: `the code could not be fetched: ${(e as Error).message}`,
        startedAt,
        finishedAt: new Date().toISOString(),
      });
    }
  }

  // DAG inputs: every output this node reads, downloaded and verified before it starts.
  const inputs = parseInputs(opts.env?.ADV_INPUTS ?? process.env.ADV_INPUTS);
  const outputs = (opts.env?.ADV_OUTPUTS ?? process.env.ADV_OUTPUTS ?? '').split(',').filter(Boolean);
  const inputsRoot = join(jobDir ?? join(process.cwd(), '.adv'), 'inputs');
  for (const [name, ref] of Object.entries(inputs)) {
    const dest = join(inputsRoot, name);
    contract[`ADV_INPUT_${name}_DIR`] = dest;
    if (!opts.store) continue;
    try {
      const m = await downloadOutput(opts.store, ref.run, ref.output, dest);
      log(`input ${name}: ${ref.run}/${ref.output} (${m.files.length} files) in ${dest}`);
    } catch (e) {
      return failBeforeStart({
        exitCode: 1,
        reason: ExitReason.Error,
        message: `input ${name} could not be fetched: ${(e as Error).message}`,
        startedAt,
        finishedAt: new Date().toISOString(),
      });
    }
  }

  const [cmd, ...args] = opts.argv;
  if (!cmd) throw new Error('adv exec: no command given (use: adv exec [options] -- COMMAND [ARGS...])');
  const fwd = new StopForwarder(graceMs, log);
  try {
    const child = spawn(cmd, args, {
      cwd,
      env: { ...process.env, ...opts.env, ...contract },
      // With a store, output is copied to the terminal AND shipped in parts; with secrets, masked.
      stdio: worker || secrets.length ? ['inherit', 'pipe', 'pipe'] : 'inherit',
      // Its own process group, so a signal reaches the workload and everything it started.
      detached: true,
    });
    fwd.attach(child.pid);
    const ended = workloadEnd(child, () => fwd.exited());
    copyOutput(child, secrets, worker);
    if (jobDir && child.pid)
      writeRecord(
        jobDir,
        EXEC_FILE,
        {
          pid: process.pid,
          startTicks: processStartTicks(process.pid),
          childPid: child.pid,
          childStartTicks: processStartTicks(child.pid),
          run: opts.run,
          attempt: opts.attempt,
          startedAt,
        },
        log,
      );
    // The pull agent's lease (lease.ts): unrenewed, the workload stops before anyone else may run it.
    const unwatchLease = jobDir
      ? watchLease(join(jobDir, LEASE_FILE), {
          stop: () => {
            log('the agent lease ran out unrenewed: stopping the workload (SIGTERM)');
            fwd.stop('the agent lease running out');
          },
          kill: () => fwd.kill(),
        })
      : undefined;
    await worker?.start();
    const result = await ended;
    unwatchLease?.();
    const record = await exitRecord(result, fwd, {
      cmd,
      cwd,
      cancelled: jobDir !== undefined && existsSync(join(jobDir, CANCEL_FILE)),
      publish: () =>
        outputs.length && !opts.process
          ? publishOutputs(opts.store, opts.run, opts.attempt, artifactDir, outputs, log)
          : Promise.resolve(undefined),
      startedAt,
      secrets,
    });
    // Upload what the workload finished (its last checkpoint in the grace period included).
    await worker?.finish(record, { workloadExitedOnItsOwn: !fwd.killedByUs && !result.signal });
    if (jobDir) writeRecord(jobDir, EXIT_FILE, record, log);
    if (record.message) log(record.message);
    return { code: record.exitCode, record };
  } finally {
    fwd.dispose();
  }
}

/** Copies the workload's output to adv exec's own (masked), and to the worker, which ships it. */
function copyOutput(child: ChildProcess, secrets: string[], worker: Worker | undefined): void {
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

/** How the attempt ended, from how the workload exited and who stopped it. */
async function exitRecord(
  result: WorkloadEnd,
  fwd: StopForwarder,
  o: {
    cmd: string;
    cwd: string;
    cancelled: boolean;
    /** Publishes the declared outputs of a node that finished its work; what went wrong, if anything. */
    publish: () => Promise<string | undefined>;
    startedAt: string;
    secrets: string[];
  },
): Promise<ExitRecord> {
  const { stopSignal, killedByUs } = fwd;
  let reason: ExitReason;
  let exitCode: number;
  let message: string | undefined;
  if (result.error) {
    reason = ExitReason.StartFailed;
    exitCode = 127;
    // Node says ENOENT of the command when it is the working dir that is missing.
    message = existsSync(o.cwd)
      ? `cannot start ${JSON.stringify(o.cmd)}: ${result.error.message}`
      : `cannot start ${JSON.stringify(o.cmd)}: its working dir ${o.cwd} does not exist (was it removed?)`;
  } else if (o.cancelled) {
    reason = ExitReason.Cancelled;
    exitCode = result.code ?? 128 + signalNumber(result.signal);
  } else if (stopSignal) {
    // Stopped from outside (preemption notice, time limit, scancel): however it exited, the
    // attempt did not finish its work.
    reason = result.code === 0 ? ExitReason.Completed : ExitReason.Preempted;
    exitCode = result.code ?? 128 + signalNumber(result.signal);
    message = `stopped by ${stopSignal}${killedByUs ? ' and killed after the grace period' : ''}`;
  } else if (result.signal) {
    reason = ExitReason.Signaled;
    exitCode = 128 + signalNumber(result.signal);
    message = `workload killed by ${result.signal}`;
  } else {
    exitCode = result.code ?? 1;
    reason = exitCode === 0 ? ExitReason.Completed : ExitReason.Error;
  }
  // A node that finished its work publishes its declared outputs, each complete or not at all.
  if (reason === ExitReason.Completed && !stopSignal) {
    const problem = await o.publish();
    if (problem) {
      reason = ExitReason.Error;
      exitCode = 1;
      message = problem;
    }
  }
  return {
    exitCode,
    ...(result.signal ? { signal: result.signal } : {}),
    reason,
    ...(message ? { message: redactText(message, o.secrets) } : {}),
    startedAt: o.startedAt,
    finishedAt: new Date().toISOString(),
  };
}

const SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGSEGV: 11,
  SIGUSR2: 12,
  SIGTERM: 15,
};
function signalNumber(sig: NodeJS.Signals | null): number {
  return sig ? (SIGNALS[sig] ?? 1) : 0;
}

/** The argument vector for a Run's `command` or `entry` (never a shell string built from values). */
export function argvFor(spec: { command?: string | string[]; entry?: string }): string[] {
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

function parseInputs(raw: string | undefined): InputRefs {
  if (!raw) return {};
  try {
    return JSON.parse(raw) as InputRefs;
  } catch {
    throw new Error(`ADV_INPUTS is not JSON: ${raw.slice(0, 80)}`);
  }
}

/** Uploads `$ADV_ARTIFACT_DIR/<name>/` for each declared output; returns what went wrong, if anything. */
async function publishOutputs(
  store: ObjectStore | undefined,
  run: string,
  attempt: number,
  artifactDir: string,
  outputs: readonly string[],
  log: (line: string) => void,
): Promise<string | undefined> {
  const missing: string[] = [];
  for (const name of outputs) if (!(await hasContent(join(artifactDir, name)))) missing.push(name);
  if (missing.length)
    return `declared output${missing.length > 1 ? 's' : ''} ${missing.join(', ')} not written: put ${missing.length > 1 ? 'them' : 'it'} in ${missing.map((m) => join(artifactDir, m) + '/').join(', ')}`;
  if (!store) {
    log(`outputs ${outputs.join(', ')} stay in ${artifactDir}: no store to publish them to`);
    return undefined;
  }
  for (const name of outputs) {
    try {
      const m = await uploadOutput(store, { run, output: name, attempt, dir: join(artifactDir, name) });
      log(`output ${name}: ${m.files.length} files, ${m.totalBytes} bytes published`);
    } catch (e) {
      return `output ${name} could not be published: ${(e as Error).message}`;
    }
  }
  return undefined;
}

/** Downloads the code payload and extracts it into `<dir>/work`; the directory to run in. */
async function fetchCode(
  store: ObjectStore | undefined,
  code: { key: string; workdir?: string },
  dir: string,
): Promise<string> {
  if (!store) throw new Error('no object store to fetch it from (pass --store or set ADV_STORE)');
  const archive = join(dir, 'code.tar.gz');
  if (!(await store.getToFile(code.key, archive)))
    throw new Error(`${code.key} is not in ${store.url} (the controller uploads it before it submits)`);
  const work = join(dir, 'work');
  await unpackTarGz(archive, work);
  const cwd = code.workdir ? resolve(work, code.workdir) : work;
  if (relative(work, cwd).startsWith('..') || !existsSync(cwd))
    throw new Error(`no working dir ${code.workdir} in the code`);
  return cwd;
}
