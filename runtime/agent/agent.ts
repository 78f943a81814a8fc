/**
 * `adv agent`: pulls attempts from a controller that cannot reach this host. It enrolls once (the
 * enrollment token for a per-agent token, kept 0600 in its state dir), long-polls for a claim, runs
 * the attempt with the local backend's machinery (a detached `adv exec` in its own process group,
 * records in a job dir), heartbeats it, and reports how it ended.
 *
 * No attempt runs twice at once: every renewed heartbeat rewrites the job's `lease.json` with
 * deadlines at half and three quarters of the lease, measured from when the heartbeat was SENT, and
 * `adv exec` stops the workload past them on its own. The controller ends the claim only a full
 * lease after it last HEARD from us, so whatever stopped the renewals (this process killed, the link
 * stalled, the controller restarting) the workload is gone before anyone else may run it. A 409
 * (lease lost) or 401 (revoked) kills the job at once.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { LocalJobs, type LocalJob } from '../local-jobs.js';
import { isSameProcessAlive } from '../proc.js';
import { EXEC_FILE, EXIT_FILE, readJson, type ExecRecord, type ExitRecord } from '../records.js';
import { LEASE_FILE, readLease, writeLease } from '../lease.js';
import { AgentClient, AgentHttpError } from './client.js';
import type { AgentCapabilities, AgentPolicy, Claim, Enrolled, HeartbeatAnswer } from './protocol.js';
import { policyAllows } from './policy.js';

export interface AgentOptions {
  controller: string;
  name: string;
  stateDir: string;
  /** Needed only to enroll (the first start, or after the state dir was lost). */
  enrollToken?: string;
  labels: Record<string, string>;
  pools?: string[];
  policy: AgentPolicy;
  /** Attempts run at once. Default 1. */
  slots?: number;
  /** Long-poll length (s). Default 30. */
  waitSec?: number;
  capabilities: AgentCapabilities;
  logger: Logger;
  /** The host environment jobs take their small base from (job-env.ts). */
  env?: NodeJS.ProcessEnv;
}

interface Saved {
  name: string;
  controller: string;
  token: string;
  pools: string[];
  /** The labels it enrolled with: the ones Backends' selectors match (absent in older files). */
  labels?: Record<string, string>;
}

/** What a job dir keeps of its claim: never the secrets (they live only in the job's environment). */
interface ClaimFile {
  job: string;
  epoch: number;
  run: string;
  attempt: number;
  leaseSec: number;
  heartbeatSec: number;
}

const CLAIM_FILE = 'claim.json';
/** `adv-<run>-<n>`: lowercase letters, digits, `-` and `.`, never `..` or a slash. */
const JOB_NAME = /^(?!.*\.\.)[a-z0-9][a-z0-9.-]{0,252}$/;
/** After an empty answer that came at once: the controller's own poll interval (2 s by default). */
const EMPTY_POLL_PAUSE_MS = 2000;
const REPORTED_FILE = 'reported';
/** The token file: its contents are the agent's only credential. */
const STATE_FILE = 'agent.json';

/**
 * How long the controller asked us to wait (a 503 while it stops, a 429 after failed enrollments),
 * bounded to 1–60 s; undefined for any other failure (retried with backoff).
 */
function comeBackInMs(e: unknown): number | undefined {
  if (!(e instanceof AgentHttpError) || (e.status !== 503 && e.status !== 429)) return undefined;
  return Math.max(1, Math.min(60, e.retryAfterSec ?? 5)) * 1000;
}

/** Why the agent cannot go on; `refused`: the controller refused its credentials (retrying will not help). */
export class AgentFatal extends Error {
  constructor(
    message: string,
    readonly refused = false,
  ) {
    super(message);
  }
}

export class Agent {
  private readonly client: AgentClient;
  private readonly jobsDir: string;
  private readonly running = new Map<string, Promise<void>>();
  private stopping = false;
  private fatal: Error | undefined;
  private wake: (() => void) | undefined;
  private claimAbort = new AbortController();

  constructor(private readonly o: AgentOptions) {
    this.client = new AgentClient(o.controller);
    this.jobsDir = join(o.stateDir, 'jobs');
  }

  /** Enrolls if needed, takes back the jobs a previous run left, then claims until `stop()`. */
  async run(): Promise<void> {
    await this.enroll();
    await this.adoptLeftovers();
    let backoff = 1000;
    while (!this.stopping) {
      if (this.running.size >= (this.o.slots ?? 1)) {
        await new Promise<void>((r) => (this.wake = r));
        continue;
      }
      try {
        const wait = this.o.waitSec ?? 30;
        const asked = performance.now();
        const claim = await this.client.call<Claim>(
          'POST',
          `/claims?wait=${wait}`,
          { capabilities: this.o.capabilities, labels: this.o.labels, policy: this.o.policy },
          (wait + 15) * 1000,
          this.claimAbort.signal,
        );
        backoff = 1000;
        if (claim) this.track(claim.job, this.runClaim(claim));
        // Nothing, and at once (short polling, or drained): ask again in a while, never in a spin.
        else if (performance.now() - asked < 1000) await this.sleep(EMPTY_POLL_PAUSE_MS);
      } catch (e) {
        if (e instanceof AgentHttpError && e.status === 401)
          this.die(new AgentFatal(this.revokedText(e), true));
        if (this.stopping) break;
        const later = comeBackInMs(e);
        if (later !== undefined) {
          // The controller is stopping (a restart): its jobs run on, and so does this loop, later.
          this.o.logger.info({ err: (e as Error).message }, `asking again in ${later / 1000}s`);
          await this.sleep(later);
          continue;
        }
        this.o.logger.warn(
          { err: (e as Error).message },
          `cannot reach the controller; retrying in ${Math.round(backoff / 1000)}s`,
        );
        await this.sleep(backoff * (0.5 + Math.random() / 2));
        backoff = Math.min(backoff * 2, 30_000);
      }
    }
    await Promise.allSettled(this.running.values());
    if (this.fatal) throw this.fatal;
  }

  /** Stops claiming; the jobs it runs are stopped (they resume from their checkpoint elsewhere). */
  stop(): void {
    this.stopping = true;
    this.claimAbort.abort();
    this.wake?.();
  }

  private die(e: Error): void {
    this.fatal ??= e;
    this.stop();
  }

  private revokedText(e: AgentHttpError): string {
    return `the controller refused this agent's token (${e.message}): it was revoked, or the controller lost its enrollment. Enroll again: delete ${join(this.o.stateDir, STATE_FILE)} and start with --enroll-token-file`;
  }

  private track(job: string, p: Promise<void>): void {
    this.running.set(job, p);
    void p.finally(() => {
      this.running.delete(job);
      this.wake?.();
    });
  }

  private sleep(ms: number): Promise<void> {
    const signal = this.claimAbort.signal;
    return new Promise((r) => {
      const done = () => {
        clearTimeout(t);
        signal.removeEventListener('abort', done);
        r();
      };
      const t = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  private async enroll(): Promise<void> {
    const file = join(this.o.stateDir, STATE_FILE);
    const saved = await readFile(file, 'utf8').then(
      (t) => JSON.parse(t) as Saved,
      () => undefined,
    );
    if (saved && saved.controller === this.o.controller && saved.name === this.o.name) {
      this.client.setToken(saved.token);
      if (saved.labels && JSON.stringify(saved.labels) !== JSON.stringify(this.o.labels))
        this.o.logger.warn(
          { enrolledWith: saved.labels, given: this.o.labels },
          `labels are fixed at enrollment: this agent is matched with the ones it enrolled with; to change them, run adv agent revoke ${this.o.name}, delete ${file} and start it again with the enrollment token`,
        );
      return;
    }
    if (!this.o.enrollToken)
      throw new AgentFatal(
        `this agent is not enrolled with ${this.o.controller} yet: give it the Backend's enrollment token (--enroll-token-file FILE or $ADV_AGENT_ENROLL_TOKEN)`,
      );
    const body = {
      enrollToken: this.o.enrollToken,
      name: this.o.name,
      capabilities: this.o.capabilities,
      labels: this.o.labels,
      ...(this.o.pools?.length ? { pools: this.o.pools } : {}),
    };
    let out: Enrolled | undefined;
    // Refused (bad token, name taken, bad request) is final; anything else (the controller not up
    // yet, no agent Backend loaded, a proxy's 502) is retried.
    for (let backoff = 1000; !out; backoff = Math.min(backoff * 2, 30_000)) {
      try {
        out = await this.client.call<Enrolled>('POST', '/register', body, 30_000, this.claimAbort.signal);
      } catch (e) {
        if (e instanceof AgentHttpError && [400, 401, 403, 409].includes(e.status))
          throw new AgentFatal(`enrollment refused: ${e.message}`, true);
        if (this.stopping) throw new AgentFatal('stopped before it could enroll');
        const wait = comeBackInMs(e) ?? backoff;
        this.o.logger.warn({ err: (e as Error).message }, `cannot enroll yet; retrying in ${wait / 1000}s`);
        await this.sleep(wait);
      }
    }
    await mkdir(this.o.stateDir, { recursive: true, mode: 0o700 });
    const s: Saved = {
      name: out.agent,
      controller: this.o.controller,
      token: out.token,
      pools: out.pools,
      labels: this.o.labels,
    };
    await writeFile(file, JSON.stringify(s, null, 2) + '\n', { mode: 0o600 });
    this.client.setToken(out.token);
    this.o.logger.info({ agent: s.name, pools: s.pools }, 'enrolled');
  }

  /** Jobs a previous run of this agent claimed and did not report: carried on, or reported 409 and killed. */
  private async adoptLeftovers(): Promise<void> {
    for (const job of await readdir(this.jobsDir).catch(() => [] as string[])) {
      const dir = join(this.jobsDir, job);
      if (existsSync(join(dir, REPORTED_FILE))) continue;
      const c = readJson<ClaimFile>(dir, CLAIM_FILE);
      if (!c) continue;
      this.o.logger.info(
        { job, epoch: c.epoch },
        'carrying on with a job the previous run of this agent claimed',
      );
      this.track(job, this.superviseJob(c, undefined));
    }
  }

  /** Checks the claim against this host's own policy, fetches the code, launches and supervises. */
  private async runClaim(claim: Claim): Promise<void> {
    const c: ClaimFile = {
      job: claim.job,
      epoch: claim.epoch,
      run: claim.run,
      attempt: claim.attempt,
      leaseSec: claim.leaseSec,
      heartbeatSec: claim.heartbeatSec,
    };
    const log = this.o.logger.child({ job: claim.job, epoch: claim.epoch });
    // The job name becomes a directory here: only a job name as the controller makes them.
    if (!JOB_NAME.test(claim.job) || !Number.isSafeInteger(claim.epoch)) {
      log.warn('a claim with a malformed job name or epoch: refused');
      return;
    }
    if (!policyAllows(this.o.policy, claim.run, claim.runLabels)) {
      log.warn('the claim breaks this agent’s own policy: released');
      await this.client
        .call('POST', `/jobs/${claim.job}/release`, { epoch: claim.epoch }, 10_000)
        .catch(() => {});
      return;
    }
    const dir = join(this.jobsDir, claim.job);
    await rm(dir, { recursive: true, force: true }); // a job name is never claimed twice by a live attempt
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await writeFile(join(dir, CLAIM_FILE), JSON.stringify(c, null, 2) + '\n', { mode: 0o600 });
    this.renewLease(dir, c, Date.now());
    log.info({ run: claim.run, attempt: claim.attempt }, 'claimed');
    await this.superviseJob(c, claim);
  }

  private renewLease(dir: string, c: ClaimFile, sentAt: number): void {
    writeLease(join(dir, LEASE_FILE), {
      stopAt: sentAt + c.leaseSec * 500,
      killAt: sentAt + c.leaseSec * 750,
    });
  }

  /**
   * Heartbeats the job until it has ended and been reported. With `claim` it first launches it;
   * without (a leftover from a previous run) it only supervises what it finds.
   */
  private async superviseJob(c: ClaimFile, claim: Claim | undefined): Promise<void> {
    const dir = join(this.jobsDir, c.job);
    const log = this.o.logger.child({ job: c.job, epoch: c.epoch });
    const local = this.localJobs(claim);
    let handle: number | undefined = claim ? undefined : await local.find(c.job);
    let launching = claim ? this.launch(local, claim, dir).then((h) => (handle = h)) : undefined;
    let cancelAsked = false;
    const beatEvery = Math.max(500, c.heartbeatSec * 1000);
    for (;;) {
      if (launching) {
        try {
          await Promise.race([launching, new Promise((r) => setTimeout(r, beatEvery))]);
          if (handle) launching = undefined;
        } catch (e) {
          launching = undefined;
          const failed = e as Error & { reason?: string };
          log.warn({ err: failed.message }, 'cannot launch the attempt');
          await this.report(
            c,
            'fail',
            { reason: failed.reason ?? 'AgentLaunchFailed', message: failed.message },
            log,
          );
          return;
        }
      } else if (!claim && !handle) {
        // Claimed by a previous run of this agent but never launched: hand it back (its secrets are gone).
        await this.report(c, 'release', {}, log);
        return;
      }
      const exit = readJson<ExitRecord>(dir, EXIT_FILE);
      if (exit) {
        if (await this.report(c, 'complete', { exit }, log)) return;
      } else if (handle && !this.alive(dir) && local.ended(c.job)) {
        const gone = {
          exitCode: 137,
          reason: 'Signaled',
          message: 'adv exec vanished without an exit record',
          startedAt: '',
          finishedAt: new Date().toISOString(),
        };
        if (await this.report(c, 'complete', { exit: gone }, log)) return;
      } else {
        const sentAt = Date.now();
        const exec = readJson<ExecRecord>(dir, EXEC_FILE);
        try {
          const a = await this.client.call<HeartbeatAnswer>(
            'POST',
            `/jobs/${c.job}/heartbeat`,
            { epoch: c.epoch, ...(exec?.startedAt ? { startedAt: exec.startedAt } : {}) },
            beatEvery * 2,
          );
          this.renewLease(dir, c, sentAt);
          if (a?.cancel && !cancelAsked && handle) {
            cancelAsked = true;
            log.info('the controller asks to stop the job');
            await local.cancel(c.job);
          }
        } catch (e) {
          if (e instanceof AgentHttpError && (e.status === 409 || e.status === 401)) {
            log.warn({ err: e.message }, 'lease lost: killing the job');
            await this.kill(dir, launching);
            await writeFile(join(dir, REPORTED_FILE), `${e.status}\n`);
            if (e.status === 401) this.die(new AgentFatal(this.revokedText(e), true));
            return;
          }
          log.warn(
            { err: (e as Error).message },
            'heartbeat not answered (the job stops itself if the lease runs out)',
          );
        }
      }
      if (this.stopping && handle && !cancelAsked && !this.fatal) {
        cancelAsked = true;
        log.info('agent stopping: stopping the job (it resumes from its checkpoint)');
        this.signalJob(dir, 'SIGTERM');
      }
      await new Promise((r) => setTimeout(r, exit ? Math.min(beatEvery, 2000) : beatEvery));
    }
  }

  /** Reports the end (or a launch failure, or a release); true once the controller has it or refused it (409). */
  private async report(
    c: ClaimFile,
    verb: 'complete' | 'fail' | 'release',
    body: object,
    log: Logger,
  ): Promise<boolean> {
    try {
      await this.client.call('POST', `/jobs/${c.job}/${verb}`, { epoch: c.epoch, ...body }, 15_000);
      log.info({ verb }, 'reported');
    } catch (e) {
      if (!(e instanceof AgentHttpError) || (e.status !== 409 && e.status !== 401)) {
        log.warn({ err: (e as Error).message }, 'cannot report yet; retrying');
        return false;
      }
      log.warn({ err: e.message }, 'the controller no longer holds this claim for us');
      if (e.status === 401) this.die(new AgentFatal(this.revokedText(e), true));
    }
    await writeFile(join(this.jobsDir, c.job, REPORTED_FILE), `${verb}\n`);
    return true;
  }

  /** Fetches the attempt's code and starts it: adv exec's pid. */
  private async launch(local: LocalJobs, claim: Claim, dir: string): Promise<number> {
    const code = await this.client
      .call<Buffer>('GET', `/jobs/${claim.job}/code?epoch=${claim.epoch}`, undefined, 300_000)
      .catch((e: unknown) => {
        if (e instanceof AgentHttpError && e.status === 409) throw e;
        throw Object.assign(new Error(`cannot fetch the code: ${(e as Error).message}`), {
          reason: 'CodeFetchFailed',
        });
      });
    await writeFile(join(dir, 'code.tar.gz'), code!);
    // A fetch slower than the lease: never start what someone else may be running by now.
    const lease = readLease(join(dir, LEASE_FILE));
    if (lease && Date.now() >= lease.stopAt)
      throw Object.assign(new Error('the lease ran out while the code was fetched'), {
        reason: 'LeaseExpired',
      });
    const request: LocalJob = {
      jobName: claim.job,
      run: claim.run,
      attempt: claim.attempt,
      spec: claim.spec as LocalJob['spec'],
      argv: claim.argv,
      code: claim.code,
      env: claim.env,
      secretEnv: claim.secretEnv,
      ...(claim.store ? { store: claim.store } : {}),
    };
    return local.start(request);
  }

  /** This agent's jobs, run as the local backend runs them; the code comes from the tarball it fetched. */
  private localJobs(claim: Claim | undefined): LocalJobs {
    return new LocalJobs({
      jobsDir: this.jobsDir,
      logger: this.o.logger,
      now: Date.now,
      hostEnv: this.o.env ?? process.env,
      cacheDir: join(this.o.stateDir, 'cache'),
      extractTo: (_commit, _path, dest) =>
        new Promise<void>((resolve, reject) => {
          if (!claim) return reject(new Error('no claim to extract'));
          execFile('tar', ['-xzf', join(this.jobsDir, claim.job, 'code.tar.gz'), '-C', dest], (err) =>
            err
              ? reject(
                  Object.assign(new Error(`cannot extract the code: ${err.message}`), {
                    reason: 'CodeFetchFailed',
                  }),
                )
              : resolve(),
          );
        }),
    });
  }

  private alive(dir: string): boolean {
    const exec = readJson<ExecRecord>(dir, EXEC_FILE);
    return Boolean(exec && isSameProcessAlive(exec.pid, exec.startTicks));
  }

  private signalJob(dir: string, sig: NodeJS.Signals): void {
    const exec = readJson<ExecRecord>(dir, EXEC_FILE);
    for (const [pid, ticks] of [
      [exec?.pid, exec?.startTicks],
      [exec?.childPid, exec?.childStartTicks],
    ] as const) {
      if (!pid || !isSameProcessAlive(pid, ticks)) continue;
      try {
        process.kill(-pid, sig);
      } catch {
        // gone
      }
    }
  }

  /** Kills the job now (lease lost): a launch still under way is killed once it has started. */
  private async kill(dir: string, launching: Promise<unknown> | undefined): Promise<void> {
    writeLease(join(dir, LEASE_FILE), { stopAt: 0, killAt: 0 });
    await launching?.catch(() => {});
    this.signalJob(dir, 'SIGKILL');
  }
}
