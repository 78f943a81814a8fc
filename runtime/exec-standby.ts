/**
 * A warm `adv exec`: started before any job needs it, waiting for one. Node and the bundle take
 * ~70 ms to load here, which was most of the time from a push to the workload starting on the
 * local backend (docs/benchmarks.md, issue 32); a standby has paid it before the job exists.
 *
 * The hand-off, in this order: the standby's output file (already its stdout and stderr) is renamed
 * into the job dir as `output.log`; then one JSON document `{args, env}` goes down a pipe on its
 * fd 3, which closes. The job's environment, secrets included, travels through that pipe, never a
 * file, as it did through `spawn`'s environment. A standby whose pipe closes with nothing in it (the
 * controller stopped or died) exits having run nothing. Its stdin is /dev/null, as a job's is.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, createReadStream, mkdirSync, openSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { MAX_ARG_BYTES } from './exec-limits.js';

/** Well under the whole-exec limit (a quarter of the 8 MiB stack on most hosts). */
const MAX_EXEC_BYTES = 1_048_576;

/**
 * Whether `exec` would take these arguments and environment. A job that does not fit is not handed
 * to a standby (which would take it through the pipe): it is spawned, so the operating system's
 * refusal (E2BIG, a NUL byte) reaches the controller as the same stall as before.
 */
export function execWouldTake(args: readonly string[], env: Readonly<Record<string, string>>): boolean {
  let total = 0;
  for (const s of [...args, ...Object.entries(env).map(([k, v]) => `${k}=${v}`)]) {
    const n = Buffer.byteLength(s);
    if (n > MAX_ARG_BYTES || s.includes('\0')) return false;
    total += n + 1;
  }
  return total <= MAX_EXEC_BYTES;
}

/** The argument `adv exec` is started with to wait for a job (see `awaitHandoff`). */
export const STANDBY_FLAG = '--standby';

/** What a standby is handed: the `adv exec` arguments and the whole environment of the job. */
export interface Handoff {
  args: string[];
  env: Record<string, string>;
}

export interface StandbyOptions {
  /** Where standbys keep their output until a job takes it (emptied when the first one starts). */
  dir: string;
  /** The command that starts `adv exec` (the standby flag is appended). */
  command: () => readonly string[];
  /** Its environment before the hand-off: the small base every job starts from, nothing secret. */
  env: () => Record<string, string>;
  cwd: string;
}

/** One waiting `adv exec` at a time, replaced as soon as a job takes it. */
export class StandbyExec {
  private spare: { child: ChildProcess; log: string } | undefined;
  private cleared = false;
  private closed = false;

  constructor(private readonly o: StandbyOptions) {}

  /** Starts a standby unless one waits. Never throws: a job can always start the usual way. */
  warm(): void {
    if (this.spare || this.closed) return;
    try {
      if (!this.cleared) {
        // Output files of standbys an earlier controller left (it died): nobody will read them.
        rmSync(this.o.dir, { recursive: true, force: true });
        this.cleared = true;
      }
      mkdirSync(this.o.dir, { recursive: true, mode: 0o700 });
      const log = join(this.o.dir, `${randomBytes(6).toString('hex')}.log`);
      const out = openSync(log, 'a', 0o600);
      const [node, ...prefix] = this.o.command();
      const child = spawn(node!, [...prefix, STANDBY_FLAG], {
        cwd: this.o.cwd,
        detached: true,
        stdio: ['ignore', out, out, 'pipe'],
        env: this.o.env(),
      });
      closeSync(out);
      const spare = { child, log };
      child.once('error', () => this.drop(spare));
      child.once('exit', () => this.drop(spare));
      const pipe = child.stdio[3] as Writable & { unref?: () => void };
      pipe.on('error', () => undefined);
      pipe.unref?.(); // a waiting standby never keeps the controller's process alive
      child.unref();
      this.spare = spare;
    } catch {
      this.spare = undefined;
    }
  }

  /**
   * Hands the job to the waiting standby: its pid, or undefined when none is ready (the caller
   * starts `adv exec` itself). A new standby is started after this returns.
   */
  take(job: Handoff & { output: string }): number | undefined {
    const spare = this.spare;
    this.spare = undefined;
    setImmediate(() => this.warm());
    const pid = spare?.child.pid;
    if (!spare || !pid || spare.child.exitCode !== null || spare.child.signalCode !== null) return undefined;
    try {
      renameSync(spare.log, job.output);
    } catch {
      this.stop(spare);
      return undefined;
    }
    const pipe = spare.child.stdio[3] as Writable;
    pipe.end(JSON.stringify({ args: job.args, env: job.env } satisfies Handoff));
    return pid;
  }

  /** Ends the waiting standby (its pipe closes with nothing in it) and keeps none from now on. */
  close(): void {
    this.closed = true;
    if (this.spare) this.stop(this.spare);
    this.spare = undefined;
  }

  private stop(spare: { child: ChildProcess; log: string }): void {
    (spare.child.stdio[3] as Writable).end();
    rmSync(spare.log, { force: true });
  }

  private drop(spare: { child: ChildProcess; log: string }): void {
    if (this.spare !== spare) return;
    this.spare = undefined;
    rmSync(spare.log, { force: true });
  }

  /** The pid of the standby waiting now, if one is (tests, logs). */
  waitingPid(): number | undefined {
    return this.spare?.child.pid;
  }
}

/**
 * The standby's side: waits for the hand-off on fd 3, then makes the job's environment its own.
 * Undefined when the pipe closed empty: there is no job, and the process should just end.
 */
export async function awaitHandoff(): Promise<Handoff | undefined> {
  const chunks: Buffer[] = [];
  for await (const c of createReadStream('', { fd: 3 })) chunks.push(c as Buffer);
  if (!chunks.length) return undefined;
  const h = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Handoff;
  for (const k of Object.keys(process.env)) delete process.env[k];
  Object.assign(process.env, h.env);
  return h;
}
