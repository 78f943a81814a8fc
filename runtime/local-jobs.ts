/**
 * Running a job on this machine: a detached `adv exec` in its own process group, with its records
 * in a job dir (`<jobs-dir>/<job-name>/`: the code tree in `work/`, the output in `output.log`,
 * `exec.json` and `exit.json` as adv exec writes them). The worker side owns this; the controller's
 * `local` backend and the pull agent (`adv agent`) both wrap it, and `adv run` starts adv exec with
 * the same arguments and environment (`localExecArgs`, `localJobEnv`).
 *
 * Nothing is kept in memory: after a restart `find` and `observe` read the same records.
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, statSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { execWouldTake, StandbyExec } from './exec-standby.js';
import { baseJobEnv, setupVariables } from './job-env.js';
import { isSameProcessAlive } from './proc.js';
import { CANCEL_FILE, EXEC_FILE, EXIT_FILE, readJson, type ExecRecord, type ExitRecord } from './records.js';
import { advCommand } from './self.js';
import type { SetupItem, UvSettings } from './setup.js';

/** A job dir without exec.json this long after submission never started. */
const START_TIMEOUT_MS = 60_000;
const CANCEL_GRACE_MS = 10_000;
/** Where adv exec itself runs: a dir that is never removed under it. */
const ADV_EXEC_CWD = '/';

/** What running a job here needs of it: the part of the controller's `JobRequest` adv exec reads. */
export interface LocalJob {
  jobName: string;
  run: string;
  attempt: number;
  spec: { workingDir?: string; policy?: { stopSignal?: string } };
  argv: readonly string[];
  code: { commit: string; path?: string };
  env: Record<string, string>;
  secretEnv?: Record<string, string>;
  store?: { url: string };
  setup?: readonly SetupItem[];
  uv?: UvSettings;
}

/** A system user a job runs as, and how to start adv exec as that user. */
export interface JobUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
  /** The argv that starts adv exec as this user (its own bundle: the controller's may be unreadable). */
  execCommand: readonly string[];
}

export interface LocalJobsOptions {
  /** The dir of the job dirs (made absolute: adv exec runs elsewhere and reads paths as given). */
  jobsDir: string;
  logger: { info(obj: object, msg: string): void };
  now: () => number;
  /** The environment the job's small base is picked from (runtime/job-env.ts). */
  hostEnv: NodeJS.ProcessEnv;
  /**
   * Keep one `adv exec` started ahead, waiting for the next job of this process's user
   * (exec-standby.ts): a job then starts without waiting for Node to load. `close()` ends it.
   */
  standby?: boolean;
  /** Where uv environments are kept for jobs run as this process's user. */
  cacheDir: string;
  /** Puts the job's code tree into `dest`. */
  extractTo(commit: string, path: string | undefined, dest: string): Promise<void>;
  /**
   * Another user to run the job as, once its dir is made: handed what the job writes. Absent or
   * undefined: this process's own user.
   */
  asUser?(dir: string, job: LocalJob): Promise<JobUser | undefined>;
}

/** How a job here looks: ended with adv exec's exit record, or one of the states before. */
export type LocalJobSeen =
  | { exit: ExitRecord }
  | { state: 'Pending' }
  | { state: 'Running'; startedAt: string }
  | { state: 'Lost'; reason: string; message: string; startedAt?: string };

/** Jobs of one jobs dir: start, find, observe, cancel, read the output of, remove. */
export class LocalJobs {
  readonly jobsDir: string;

  private readonly standby: StandbyExec | undefined;

  constructor(private readonly o: LocalJobsOptions) {
    this.jobsDir = resolve(o.jobsDir);
    if (o.standby)
      this.standby = new StandbyExec({
        // Beside the job dirs (a rename moves its output into one), never among them.
        dir: join(this.jobsDir, '..', 'standby-exec'),
        command: localExecCommand,
        env: () => baseJobEnv(o.hostEnv),
        cwd: ADV_EXEC_CWD,
      });
    this.standby?.warm();
  }

  /** Ends the waiting standby, if any. */
  close(): void {
    this.standby?.close();
  }

  dir(jobName: string): string {
    return join(this.jobsDir, jobName);
  }

  /** Starts the job once: the job name is the idempotency key (an existing job's pid comes back). */
  async start(job: LocalJob): Promise<number> {
    const dir = this.dir(job.jobName);
    await mkdir(this.jobsDir, { recursive: true });
    try {
      await mkdir(dir); // exclusive: the job name is the idempotency key
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const existing = await this.find(job.jobName);
      if (existing) return existing;
    }
    const work = join(dir, 'work');
    await mkdir(work, { recursive: true });
    await this.o.extractTo(job.code.commit, job.code.path, work);
    // For a person looking at the job: names of variables, never their values.
    await writeFile(
      join(dir, 'request.json'),
      JSON.stringify(
        { ...job, env: Object.keys(job.env), secretEnv: Object.keys(job.secretEnv ?? {}) },
        null,
        2,
      ),
      { mode: 0o600 },
    );
    const pid = await this.launch(job, dir, work);
    await writeFile(join(dir, 'pid'), String(pid));
    this.o.logger.info({ job: job.jobName, pid }, 'started local job');
    return pid;
  }

  /** Starts adv exec for a prepared job dir: handed to the standby when one waits, else spawned. */
  private async launch(job: LocalJob, dir: string, work: string): Promise<number> {
    // Made before `asUser`, which hands the job dir and what is in it to the job's user.
    const output = join(dir, 'output.log');
    const out = openSync(output, 'a', 0o600);
    const as = await this.o.asUser?.(dir, job).catch((e: unknown) => {
      closeSync(out);
      throw e;
    });
    const cwd = job.spec.workingDir ? join(work, job.spec.workingDir) : work;
    const env = (base: Record<string, string>) => localJobEnv(job, base, as ? undefined : this.o.cacheDir);
    const base = baseJobEnv(this.o.hostEnv);
    // The standby's output file replaces the empty output.log (a rename: its stdout stays open on it).
    // One the operating system would refuse is spawned, so that its refusal is seen as before.
    const [args, jobEnv] = [localExecArgs(job, dir, cwd), env(base)];
    const handed =
      as || !execWouldTake(args, jobEnv) ? undefined : this.standby?.take({ args, env: jobEnv, output });
    if (handed) {
      closeSync(out);
      return handed;
    }
    const [node, ...prefix] = as ? as.execCommand : localExecCommand();
    const child = spawn(node!, [...prefix, ...localExecArgs(job, dir, cwd)], {
      // adv exec itself runs in a dir nobody removes; the workload runs in `cwd`. Started in the
      // job dir, an adv exec run from source (tsx's loader thread) hung for good when the dir
      // was removed while it loaded: the loader thread died of the missing cwd, unnoticed.
      cwd: ADV_EXEC_CWD,
      detached: true,
      stdio: ['ignore', out, out],
      env: env({
        ...base,
        ...(as ? { HOME: as.home, USER: as.name, LOGNAME: as.name, TMPDIR: join(dir, 'tmp') } : {}),
      }),
      ...(as ? { uid: as.uid, gid: as.gid } : {}),
    });
    closeSync(out);
    const pid = child.pid;
    child.unref();
    if (!pid) {
      // The spawn failed (E2BIG, ENOENT…): its 'error' event says why, on the next tick.
      const why = await new Promise<Error>((resolve) => child.once('error', resolve));
      throw Object.assign(new Error(`cannot start adv exec for ${job.jobName}: ${why.message}`), {
        code: (why as NodeJS.ErrnoException).code,
      });
    }
    return pid;
  }

  /**
   * The job's pid once it was launched (its pid file or adv exec's record is there). A dir without
   * either is a start that died before the launch (the process killed mid-start); `start` reuses
   * it, so the attempt runs once instead of waiting to be declared lost.
   */
  async find(jobName: string): Promise<number | undefined> {
    const dir = this.dir(jobName);
    if (!existsSync(dir)) return undefined;
    const exec = readJson<ExecRecord>(dir, EXEC_FILE);
    const pid = exec?.pid ?? Number((await readFile(join(dir, 'pid'), 'utf8').catch(() => '')) || 0);
    return pid || undefined;
  }

  /** How the job looks now, from its records and whether adv exec still runs. */
  observe(jobName: string): LocalJobSeen {
    const dir = this.dir(jobName);
    if (!existsSync(dir)) return { state: 'Lost', reason: 'JobDirMissing', message: `${dir} is gone` };
    const exit = readJson<ExitRecord>(dir, EXIT_FILE);
    if (exit) return { exit };
    const exec = readJson<ExecRecord>(dir, EXEC_FILE);
    if (exec) {
      if (isSameProcessAlive(exec.pid, exec.startTicks))
        return { state: 'Running', startedAt: exec.startedAt };
      return {
        state: 'Lost',
        reason: 'ProcessVanished',
        message: `adv exec (pid ${exec.pid}) ended without an exit record`,
        startedAt: exec.startedAt,
      };
    }
    const age = this.o.now() - statSync(dir).mtimeMs;
    if (age > START_TIMEOUT_MS)
      return {
        state: 'Lost',
        reason: 'NeverStarted',
        message: `no exec record ${Math.round(age / 1000)}s after submission`,
      };
    return { state: 'Pending' };
  }

  /** The job has ended: an exit record, or lost (nothing more will happen to it). */
  ended(jobName: string): boolean {
    const seen = this.observe(jobName);
    return 'exit' in seen || seen.state === 'Lost';
  }

  /** Asks adv exec to stop (the cancel file, then SIGTERM to its group; SIGKILL after a grace). */
  async cancel(jobName: string): Promise<void> {
    const dir = this.dir(jobName);
    if (!existsSync(dir)) return;
    await writeFile(join(dir, CANCEL_FILE), new Date(this.o.now()).toISOString());
    const exec = readJson<ExecRecord>(dir, EXEC_FILE);
    if (!exec || !isSameProcessAlive(exec.pid, exec.startTicks)) return;
    const kill = (pid: number | undefined, sig: NodeJS.Signals) => {
      if (!pid) return;
      try {
        process.kill(-pid, sig);
      } catch {
        // gone
      }
    };
    kill(exec.pid, 'SIGTERM');
    const timer = setTimeout(() => {
      if (isSameProcessAlive(exec.pid, exec.startTicks)) kill(exec.pid, 'SIGKILL');
      if (exec.childPid && isSameProcessAlive(exec.childPid, exec.childStartTicks))
        kill(exec.childPid, 'SIGKILL');
    }, CANCEL_GRACE_MS);
    timer.unref();
  }

  /** The job's output from byte `since`; with `follow`, until it has an exit record. */
  async *logs(jobName: string, opts: { follow?: boolean; since?: number } = {}): AsyncIterable<string> {
    const file = join(this.dir(jobName), 'output.log');
    let offset = opts.since ?? 0;
    for (;;) {
      const buf = await readFile(file).catch(() => Buffer.alloc(0));
      if (buf.length > offset) {
        yield buf.subarray(offset).toString('utf8');
        offset = buf.length;
      }
      if (!opts.follow || existsSync(join(this.dir(jobName), EXIT_FILE))) return;
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** Removes the job's dir. */
  async remove(jobName: string): Promise<void> {
    await rm(this.dir(jobName), { recursive: true, force: true });
  }
}

/** The command that starts `adv exec` on this machine (this program's own `adv`). */
export function localExecCommand(): string[] {
  return [...advCommand(), 'exec'];
}

/**
 * The `adv exec` options and command of a job on this machine: its store, run, attempt, job dir
 * and working dir. `adv run` starts a run here with the same, so both give one contract.
 */
export function localExecArgs(
  job: LocalJob,
  jobDir: string,
  cwd: string,
  /** More `adv exec` options (`--grace`). */
  more: readonly string[] = [],
): string[] {
  return [
    ...more,
    ...(job.store ? ['--store', job.store.url] : []),
    '--run',
    job.run,
    '--attempt',
    String(job.attempt),
    '--job-dir',
    jobDir,
    '--cwd',
    cwd,
    // One process on one host: only a declared stop signal is passed (SIGTERM is adv exec's own).
    ...(job.spec.policy?.stopSignal ? ['--stop-signal', job.spec.policy.stopSignal] : []),
    '--',
    ...job.argv,
  ];
}

/**
 * The environment `adv exec` starts with for a job on this machine: `base` (the small base of
 * job-env.ts, never the whole environment of the process that starts it), the job's variables,
 * its setup, and its secrets — these straight into the process's environment, never to a file.
 * `cacheDir` is where uv environments are kept (absent: adv exec's default, under HOME).
 */
export function localJobEnv(
  job: LocalJob,
  base: Record<string, string>,
  cacheDir: string | undefined,
): Record<string, string> {
  return {
    ...base,
    ...job.env,
    ...setupVariables(job),
    // A job as another user keeps its own cache (adv exec's default, under its HOME): one it
    // could write into would be shared with the controller.
    ...(cacheDir ? { ADV_CACHE_DIR: cacheDir } : {}),
    ...job.secretEnv,
  };
}
