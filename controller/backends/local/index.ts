/**
 * `local`: a detached process on the controller's machine — the embedded default.
 *
 * Each job has a dir `<data-dir>/local/jobs/<job-name>/`: the code tree in `work/`, the output in
 * `output.log`, and the records `adv exec` writes (`exec.json`: pids; `exit.json`: how it ended).
 * The process runs in its own process group and outlives the controller; after a restart `find`
 * and `poll` read the same records, so nothing needs the controller's memory. Its environment is
 * a small base (`job-env.ts`) and what the controller resolved for the job: nothing else of the
 * controller's own environment (tokens, cloud credentials) reaches it.
 *
 * Started as the controller's own user, a job can still read what that user can: the controller's
 * `/proc/PID/environ`, its data dir, its secrets file. `local.user` starts jobs as another system
 * user instead (the controller must run as root): the job dir and the run's part of a `file` store
 * are handed to that user, nothing else of the controller's is.
 */
import { execFile, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, statSync } from 'node:fs';
import { copyFile, lchown, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StallingError } from '../../errors.js';
import { toolEnv } from '../../internal/child-env.js';
import { Type } from '@sinclair/typebox';
import { advCommand } from '../../internal/self.js';
import { execBundlePath } from '../remote/pack.js';
import { isSameProcessAlive } from '../../../runtime/proc.js';
import {
  CANCEL_FILE,
  EXEC_FILE,
  EXIT_FILE,
  readJson,
  type ExecRecord,
  type ExitRecord,
} from '../../../runtime/records.js';
import { optional, strict } from '../../spec/schema-kit.js';
import { baseJobEnv, setupVariables } from '../job-env.js';
import {
  JobState,
  observedFromExit,
  type AdapterDescriptor,
  type Backend,
  type BackendContext,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
  ONE_HOST_TRAITS,
} from '../types.js';

/** A job dir without exec.json this long after submission never started. */
const START_TIMEOUT_MS = 60_000;
const CANCEL_GRACE_MS = 10_000;
/** Where adv exec itself runs: a dir that is never removed under it. */
const ADV_EXEC_CWD = '/';
/** The bundled adv exec a job of another user runs, in its job dir. */
const BUNDLE = 'adv-exec.mjs';

/** The `local` adapter: detached `adv exec` processes with their records in a job dir each. */
export class LocalBackend implements Backend {
  readonly type = 'local' as const;
  private readonly jobsDir: string;

  private jobUser: Promise<JobUser> | undefined;

  constructor(
    readonly name: string,
    private readonly ctx: BackendContext,
    workDir?: string,
    /** `local.user`: the system user jobs run as (default: the controller's own). */
    private readonly user?: string,
  ) {
    // Absolute: adv exec runs elsewhere (ADV_EXEC_CWD) and reads the paths it is given as they are.
    this.jobsDir = resolve(workDir ?? join(ctx.dataDir, 'local', name, 'jobs'));
  }

  /** The job user, looked up once; a StallingError when it cannot be used. */
  private runAs(): Promise<JobUser> | undefined {
    if (!this.user) return undefined;
    this.jobUser ??= lookUpUser(this.user, this.name);
    // A user created after a failed look-up is found on the next submit.
    this.jobUser.catch(() => (this.jobUser = undefined));
    return this.jobUser;
  }

  private dir(jobName: string): string {
    return join(this.jobsDir, jobName);
  }

  async submit(job: JobRequest): Promise<JobHandle> {
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
    await this.ctx.code.extractTo(job.code.commit, job.code.path, work);
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
    const out = openSync(join(dir, 'output.log'), 'a', 0o600);
    const as = await this.runAs()?.catch((e: unknown) => {
      closeSync(out);
      throw e;
    });
    if (as) await handOver(as, dir, job);
    // As another user, adv exec runs from its bundle in the job dir: the controller's own install
    // (under /root, a mode-700 checkout) is often unreadable to that user, and a job that cannot
    // start adv exec would only be seen as NeverStarted a minute later.
    const [node, ...prefix] = as ? [process.execPath, join(dir, BUNDLE)] : localExecCommand();
    const cwd = job.spec.workingDir ? join(work, job.spec.workingDir) : work;
    const child = spawn(node!, [...prefix, ...localExecArgs(job, dir, cwd)], {
      // adv exec itself runs in a dir nobody removes; the workload runs in `cwd`. Started in the
      // job dir, an adv exec run from source (tsx's loader thread) hung for good when the dir
      // was removed while it loaded: the loader thread died of the missing cwd, unnoticed.
      cwd: ADV_EXEC_CWD,
      detached: true,
      stdio: ['ignore', out, out],
      env: localJobEnv(
        job,
        {
          ...baseJobEnv(this.ctx.hostEnv ?? process.env),
          ...(as ? { HOME: as.home, USER: as.name, LOGNAME: as.name, TMPDIR: join(dir, 'tmp') } : {}),
        },
        as ? undefined : join(this.ctx.dataDir, 'cache'),
      ),
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
    await writeFile(join(dir, 'pid'), String(pid));
    this.ctx.logger.info({ job: job.jobName, pid }, 'started local job');
    return { backend: this.name, jobName: job.jobName, jobId: String(pid) };
  }

  /**
   * A job exists once it was launched: its pid file or adv exec's record is there. A dir without
   * either is a submit that died before the launch (the controller killed mid-submit); `submit`
   * reuses it, so the attempt runs once instead of waiting to be declared lost.
   */
  async find(jobName: string): Promise<JobHandle | undefined> {
    const dir = this.dir(jobName);
    if (!existsSync(dir)) return undefined;
    const exec = readJson<ExecRecord>(dir, EXEC_FILE);
    const pid = exec?.pid ?? Number((await readFile(join(dir, 'pid'), 'utf8').catch(() => '')) || 0);
    return pid ? { backend: this.name, jobName, jobId: String(pid) } : undefined;
  }

  async poll(handles: readonly JobHandle[]): Promise<ObservedJob[]> {
    return handles.map((h) => this.observe(h));
  }

  private observe(h: JobHandle): ObservedJob {
    const dir = this.dir(h.jobName);
    const base = { jobName: h.jobName, jobId: h.jobId };
    if (!existsSync(dir))
      return { ...base, state: JobState.Lost, reason: 'JobDirMissing', message: `${dir} is gone` };
    const exit = readJson<ExitRecord>(dir, EXIT_FILE);
    const exec = readJson<ExecRecord>(dir, EXEC_FILE);
    if (exit) return observedFromExit(base, exit);
    if (exec) {
      if (isSameProcessAlive(exec.pid, exec.startTicks))
        return { ...base, state: JobState.Running, startedAt: exec.startedAt };
      return {
        ...base,
        state: JobState.Lost,
        reason: 'ProcessVanished',
        message: `adv exec (pid ${exec.pid}) ended without an exit record`,
        startedAt: exec.startedAt,
      };
    }
    const age = this.ctx.now() - statSync(dir).mtimeMs;
    if (age > START_TIMEOUT_MS)
      return {
        ...base,
        state: JobState.Lost,
        reason: 'NeverStarted',
        message: `no exec record ${Math.round(age / 1000)}s after submission`,
      };
    return { ...base, state: JobState.Pending };
  }

  async cancel(h: JobHandle): Promise<void> {
    const dir = this.dir(h.jobName);
    if (!existsSync(dir)) return;
    await writeFile(join(dir, CANCEL_FILE), new Date(this.ctx.now()).toISOString());
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

  async *logs(h: JobHandle, opts: { follow?: boolean; since?: number } = {}): AsyncIterable<string> {
    const file = join(this.dir(h.jobName), 'output.log');
    let offset = opts.since ?? 0;
    for (;;) {
      const buf = await readFile(file).catch(() => Buffer.alloc(0));
      if (buf.length > offset) {
        yield buf.subarray(offset).toString('utf8');
        offset = buf.length;
      }
      if (!opts.follow || existsSync(join(this.dir(h.jobName), EXIT_FILE))) return;
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** Removes a finished job's dir (not used by the reconciler: job dirs are evidence). */
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
  job: JobRequest,
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
  job: JobRequest,
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

/** Names in an environment that look like credentials (their values are never read here). */
function credentialsIn(env: NodeJS.ProcessEnv): string[] {
  return Object.keys(env)
    .filter((k) => env[k] && /TOKEN|SECRET|PASSWORD|PRIVATE_KEY|ACCESS_KEY/.test(k))
    .sort();
}

/** A system user jobs run as. */
interface JobUser {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

/** `getent passwd NAME`: the user's ids and home; StallingErrors say what to fix. */
async function lookUpUser(name: string, backend: string): Promise<JobUser> {
  if (process.getuid?.() !== 0)
    throw new StallingError(
      'BackendMisconfigured',
      `Backend ${backend}: local.user ${name} needs the controller to run as root (it runs as uid ${process.getuid?.()}), to start jobs as another user`,
      "run the controller as root, or drop local.user (jobs then run as the controller's user and can read its credentials)",
    );
  const line = await new Promise<string>((resolve) =>
    execFile('getent', ['passwd', name], { env: toolEnv('getent') }, (err, stdout) =>
      resolve(err ? '' : stdout),
    ),
  );
  const [, , uid, gid, , home] = line.trim().split(':');
  if (!uid || !gid)
    throw new StallingError(
      'BackendMisconfigured',
      `Backend ${backend}: local.user ${name} is not a user of this machine`,
      `create it (useradd --system --create-home ${name}) or name another in local.user`,
    );
  return { name, uid: Number(uid), gid: Number(gid), home: home || '/' };
}

/**
 * Gives the job user what its job writes: the job dir, and for a `file` store the run's folder in
 * it (checkpoints, logs, heartbeats). Nothing else of the controller's changes owner.
 */
async function handOver(as: JobUser, dir: string, job: JobRequest): Promise<void> {
  // Its own temp dir: the controller's TMPDIR is the controller's.
  await mkdir(join(dir, 'tmp'), { recursive: true });
  await copyFile(execBundlePath(), join(dir, BUNDLE));
  await chownTree(dir, as.uid, as.gid);
  if (!job.store?.url.startsWith('file:')) return;
  const runDir = join(fileURLToPath(job.store.url), 'runs', job.run);
  await mkdir(runDir, { recursive: true });
  await chownTree(runDir, as.uid, as.gid);
}

async function chownTree(path: string, uid: number, gid: number): Promise<void> {
  await lchown(path, uid, gid);
  for (const e of await readdir(path, { withFileTypes: true }).catch(() => []))
    if (e.isDirectory()) await chownTree(join(path, e.name), uid, gid);
    else await lchown(join(path, e.name), uid, gid);
}

/** The `local:` block. */
export const localSettings = {
  block: 'local',
  required: false,
  schema: strict(
    {
      workDir: optional(Type.String({ description: 'Where job work dirs go. Default `<data-dir>/local`.' })),
      user: optional(
        Type.String({
          pattern: '^[a-z_][a-z0-9_-]{0,31}$',
          description:
            "The system user jobs run as, instead of the controller's own (which a job could read the controller's credentials as). The controller must run as root; the jobs dir's parents must be searchable by that user.",
        }),
      ),
    },
    '`local` settings.',
  ),
} as const;

/** `local`: processes on the controller's machine; one host, no scheduler, no capacity report. */
export const localBackend: AdapterDescriptor<'local', typeof localSettings> = {
  type: 'local',
  settings: localSettings,
  needsConnection: false,
  traits: ONE_HOST_TRAITS,
  create(spec, ctx) {
    const user = spec.spec.local?.user;
    const held = user ? [] : credentialsIn(ctx.hostEnv ?? process.env);
    if (held.length)
      ctx.logger.warn(
        { credentials: held },
        "local jobs run as this controller's user and can read its credentials (its /proc/PID/environ, its files): set local.user to run them as another user (docs/security.md)",
      );
    return new LocalBackend(spec.metadata.name, ctx, spec.spec.local?.workDir, user);
  },
};
