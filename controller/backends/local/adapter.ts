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
import { execFile } from 'node:child_process';
import { copyFile, lchown, mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { StallingError } from '../../errors.js';
import { toolEnv } from '../../internal/child-env.js';
import { execBundlePath } from '../remote/pack.js';
import { LocalJobs, type JobUser, type LocalJob } from '../../../runtime/local-jobs.js';
import type { Backend as BackendObject } from '../../spec/schema.js';
import {
  observedFromExit,
  oneByOne,
  type Backend,
  type BackendContext,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
  type SubmitResult,
} from '../types.js';

/** The bundled adv exec a job of another user runs, in its job dir. */
const BUNDLE = 'adv-exec.mjs';

/**
 * The `local` adapter: detached `adv exec` processes with their records in a job dir each. Running
 * them is the worker side's (runtime/local-jobs.ts); this adds the backend's names, handles and
 * the job user.
 */
export class LocalBackend implements Backend {
  readonly type = 'local' as const;
  private readonly jobs: LocalJobs;

  private jobUser: Promise<SystemUser> | undefined;

  constructor(
    readonly name: string,
    private readonly ctx: BackendContext,
    workDir?: string,
    /** `local.user`: the system user jobs run as (default: the controller's own). */
    private readonly user?: string,
    /** Keep an adv exec started ahead for the next job (runtime/exec-standby.ts); default: on, unless `user`. */
    standby = !user,
  ) {
    this.jobs = new LocalJobs({
      jobsDir: workDir ?? join(ctx.dataDir, 'local', name, 'jobs'),
      logger: ctx.logger,
      now: ctx.now,
      hostEnv: ctx.hostEnv ?? process.env,
      // Jobs of the controller's own user start on an adv exec that is already up.
      standby: standby && !user,
      cacheDir: join(ctx.dataDir, 'cache'),
      extractTo: (commit, path, dest) => ctx.code.extractTo(commit, path, dest),
      asUser: async (dir, job) => {
        const as = await this.runAs();
        if (!as) return undefined;
        await handOver(as, dir, job);
        // As another user, adv exec runs from its bundle in the job dir: the controller's own
        // install (under /root, a mode-700 checkout) is often unreadable to that user, and a job
        // that cannot start adv exec would only be seen as NeverStarted a minute later.
        return { ...as, execCommand: [process.execPath, join(dir, BUNDLE)] };
      },
    });
  }

  /** The job user, looked up once; a StallingError when it cannot be used. */
  private runAs(): Promise<SystemUser> | undefined {
    if (!this.user) return undefined;
    this.jobUser ??= lookUpUser(this.user, this.name);
    // A user created after a failed look-up is found on the next submit.
    this.jobUser.catch(() => (this.jobUser = undefined));
    return this.jobUser;
  }

  private handle(jobName: string, pid: number): JobHandle {
    return { backend: this.name, jobName, jobId: String(pid) };
  }

  /** Find-or-start each job: a job dir with its pid or record is the job, adopted. */
  submit(jobs: readonly JobRequest[]): Promise<(SubmitResult | Error)[]> {
    return oneByOne(jobs, async (job) => {
      const found = await this.find(job.jobName);
      if (found) return { ...found, adopted: true };
      return this.handle(job.jobName, await this.jobs.start(job));
    });
  }

  /**
   * A job exists once it was launched: its pid file or adv exec's record is there. A dir without
   * either is a submit that died before the launch (the controller killed mid-submit); `submit`
   * reuses it, so the attempt runs once instead of waiting to be declared lost.
   */
  async find(jobName: string): Promise<JobHandle | undefined> {
    const pid = await this.jobs.find(jobName);
    return pid ? this.handle(jobName, pid) : undefined;
  }

  async poll(handles: readonly JobHandle[]): Promise<ObservedJob[]> {
    return handles.map((h) => {
      const base = { jobName: h.jobName, jobId: h.jobId };
      const seen = this.jobs.observe(h.jobName);
      return 'exit' in seen ? observedFromExit(base, seen.exit) : { ...base, ...seen };
    });
  }

  async cancel(h: JobHandle): Promise<void> {
    await this.jobs.cancel(h.jobName);
  }

  logs(h: JobHandle, opts: { follow?: boolean; since?: number } = {}): AsyncIterable<string> {
    return this.jobs.logs(h.jobName, opts);
  }

  /** Removes a finished job's dir (not used by the reconciler: job dirs are evidence). */
  /** Ends the standby adv exec waiting for the next job; running jobs are not touched. */
  async close(): Promise<void> {
    this.jobs.close();
  }

  async remove(jobName: string): Promise<void> {
    await this.jobs.remove(jobName);
  }
}

/** Names in an environment that look like credentials (their values are never read here). */
function credentialsIn(env: NodeJS.ProcessEnv): string[] {
  return Object.keys(env)
    .filter((k) => env[k] && /TOKEN|SECRET|PASSWORD|PRIVATE_KEY|ACCESS_KEY/.test(k))
    .sort();
}

/** A system user jobs run as. */
type SystemUser = Omit<JobUser, 'execCommand'>;

/** `getent passwd NAME`: the user's ids and home; StallingErrors say what to fix. */
async function lookUpUser(name: string, backend: string): Promise<SystemUser> {
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
async function handOver(as: SystemUser, dir: string, job: LocalJob): Promise<void> {
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

/**
 * The adapter of a `local` Backend. Without `local.user` the jobs run as this controller's user:
 * say so once, naming the credentials in its environment they could read.
 */
export function createLocalBackend(spec: BackendObject, ctx: BackendContext): LocalBackend {
  const user = spec.spec.local?.user;
  const held = user ? [] : credentialsIn(ctx.hostEnv ?? process.env);
  if (held.length)
    ctx.logger.warn(
      { credentials: held },
      "local jobs run as this controller's user and can read its credentials (its /proc/PID/environ, its files): set local.user to run them as another user (docs/security.md)",
    );
  return new LocalBackend(spec.metadata.name, ctx, spec.spec.local?.workDir, user);
}
