/**
 * A host reached through a command transport, as the adapters that start jobs on hosts use it
 * (`ssh`, `slurm`'s login node, and the workers of cloud adapters). It knows a root and a work
 * root, not a Backend spec:
 *
 * - payloads (code and the bundled `adv exec`) shipped once per host, content-addressed, verified
 *   by sha256 after the copy;
 * - a job dir per job with a generated `run.sh` and a quoted `env` file (`bootstrap.ts`);
 * - launch as `setsid nohup sh run.sh` with a pid file, idempotent by job name, batched;
 * - `exit.json` / `exec.json` records read back as observations, cancel, logs.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { Backend as BackendObject } from '../../spec/schema.js';
import { sshTargetOf, type ExecResult } from '../../transport/ssh.js';
import {
  JobState,
  isEnded,
  observedFromExit,
  unobservable,
  type BackendContext,
  type CodeExporter,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
} from '../types.js';
import { bootstrapScript, envFile, remoteJobEnv, secretsFile } from './bootstrap.js';
import { execBundlePath, packFiles } from './pack.js';

const CANCEL_GRACE_MS = 10_000;

/** sshd hands a command to the login shell as ONE argument, capped at 128 KiB: stay below. */
const MAX_COMMAND_BYTES = 96 * 1024;

/**
 * sha256 of "$1" on the host: Node's (OpenSSL, ~1.7 GB/s with SHA extensions) where Node is,
 * coreutils' sha256sum (~300 MB/s here) otherwise. Prints the hex digest first.
 */
const SHA256 = `{ command -v node >/dev/null 2>&1 && node -e 'const h=require("crypto").createHash("sha256");require("fs").createReadStream(process.argv[1],{highWaterMark:4194304}).on("data",(d)=>h.update(d)).on("end",()=>console.log(h.digest("hex")))' "$1" || sha256sum "$1"; }`;

/**
 * Find-or-launch for the job files that arrive as a tar on stdin (`env`, `run.sh`, and `secrets`
 * when the job has any): nothing of a job travels as an argument but its name, so neither a long
 * value nor a secret meets sshd's command-line limit or another user's `ps`. A job whose pid file
 * exists was launched already: its new secrets file goes at once. Prints `dir<TAB>pid` lines.
 */
const LAUNCH_MANY = `umask 077
w=$1; shift
mkdir -p "$w" && cd "$w" && tar -xf - || exit 1
for j in "$@"; do
  if [ -f "$j/pid" ]; then rm -f "$j/secrets"
  else (cd "$j" && { setsid nohup sh ./run.sh > output.log 2>&1 < /dev/null & echo $! > pid; }) || continue
  fi
  printf '%s/%s\\t%s\\n' "$w" "$j" "$(cat "$j/pid")"
done`;

/**
 * Per job dir: `exit` + exit.json, `running` + exec.json, `starting`, `gone` or `missing`. exit.json
 * is looked for again after a dead pid: adv exec writes it, then exits, and both can happen between
 * the first look and `kill -0` (a clean end would read as `gone`, i.e. lost).
 */
const OBSERVE = `for d in "$@"; do
  printf '%s\\t' "$(basename "$d")"
  if [ -f "$d/exit.json" ]; then printf 'exit\\t'; tr -d '\\n' < "$d/exit.json"
  elif [ -f "$d/pid" ] && kill -0 "$(cat "$d/pid")" 2>/dev/null; then if [ -f "$d/exec.json" ]; then printf 'running\\t'; tr -d '\\n' < "$d/exec.json"; else printf 'starting'; fi
  elif [ -f "$d/exit.json" ]; then printf 'exit\\t'; tr -d '\\n' < "$d/exit.json"
  elif [ -d "$d" ]; then printf 'gone'
  else printf 'missing'; fi
  echo
done`;

/** What a `RemoteHost` needs of a transport (an `SshTransport`, or a fake in tests). */
export interface RemoteTransport {
  /** `user@host:port`, for messages. */
  readonly where: string;
  /** Runs an argument vector; never throws for a non-zero exit. */
  exec(argv: readonly string[], opts?: { input?: Buffer | string; timeoutMs?: number }): Promise<ExecResult>;
  close(): void;
}

/** A host's transport, its paths, and where the code comes from. */
export interface RemoteHostOptions {
  transport: RemoteTransport;
  /** Root for payloads and the runtime (default `~/.adventuretime`); work root (default `<root>/work`). */
  paths?: { root?: string | undefined; work?: string | undefined } | undefined;
  code: CodeExporter;
  logger: Logger;
  /** The bundled `adv exec` to ship; default: `dist/adv-exec.mjs`. */
  bundlePath?: () => string;
}

/** A job dir written on the host, ready to launch (or to hand to a scheduler). */
export interface PreparedJob {
  dir: string;
  /** The env file's text. */
  env: string;
  /** The bootstrap's text. */
  runSh: string;
  /** The secrets file's text, to send over the channel (never as an argument), if any. */
  secrets?: string;
}

/** A launched job: its pid, and whether it was there already (adopted). */
export type Launched = { pid: string; adopted?: boolean } | Error;

/** One host (reached through `transport`) as adapters use it: ship, launch, observe, cancel, logs. */
export class RemoteHost {
  readonly transport: RemoteTransport;
  private rootDir: string | undefined;
  private readonly shipped = new Set<string>();
  private bundle: { bytes: Buffer; path: string } | undefined;

  constructor(private readonly opts: RemoteHostOptions) {
    this.transport = opts.transport;
  }

  get where(): string {
    return this.transport.where;
  }

  /** Runs a command; throws with the host's own message when it fails. */
  async run(argv: string[], input?: Buffer | string): Promise<string> {
    const r = await this.transport.exec(argv, input === undefined ? {} : { input });
    if (r.code !== 0)
      throw new Error(
        `${argv[0]} on ${this.where} failed (exit ${r.code}): ${r.stderr.trim() || r.stdout.toString().trim()}`,
      );
    return r.stdout.toString('utf8');
  }

  /** The root on the host, with `~` expanded there. */
  async root(): Promise<string> {
    if (this.rootDir) return this.rootDir;
    const configured = this.opts.paths?.root ?? '~/.adventuretime';
    const home = (await this.run(['sh', '-c', 'cd && pwd'])).trim();
    this.rootDir =
      configured === '~' ? home : configured.startsWith('~/') ? `${home}/${configured.slice(2)}` : configured;
    return this.rootDir;
  }

  /** Where job dirs go. */
  async workRoot(): Promise<string> {
    const w = this.opts.paths?.work;
    return w
      ? w.startsWith('~/')
        ? `${(await this.root()).replace(/\/\.adventuretime$/, '')}/${w.slice(2)}`
        : w
      : `${await this.root()}/work`;
  }

  /** The job dir of a job name under a work root. */
  jobDir(work: string, jobName: string): string {
    return `${work}/${jobName}`;
  }

  /** Copies bytes to `path` on the host once (skipped when already there), verified by sha256. */
  async ship(path: string, bytes: Buffer): Promise<void> {
    if (this.shipped.has(path)) return;
    const sha = createHash('sha256').update(bytes).digest('hex');
    const have = await this.transport.exec(['sh', '-c', `test -f "$1" && ${SHA256}`, 'sh', path]);
    if (have.code !== 0 || !have.stdout.toString().startsWith(sha)) {
      // Streamed over an exec channel (faster than SFTP), renamed into place when complete.
      const out = await this.run(
        [
          'sh',
          '-c',
          `mkdir -p "$(dirname "$1")" && cat > "$1.tmp.$$" && mv "$1.tmp.$$" "$1" && ${SHA256}`,
          'sh',
          path,
        ],
        bytes,
      );
      if (!out.startsWith(sha)) throw new Error(`copy of ${path} to ${this.where} does not verify`);
    }
    this.shipped.add(path);
  }

  /** Ships the job's code and the runtime (once per tree and host), and returns the job's files. */
  async prepare(job: JobRequest): Promise<PreparedJob> {
    const root = await this.root();
    const tree = await this.opts.code.treeOf(job.code.commit, job.code.path);
    const codePath = `${root}/code/${tree}.tar.gz`;
    if (!this.shipped.has(codePath)) await this.ship(codePath, await this.opts.code.payload(tree));
    if (!this.bundle) {
      const bytes = readFileSync((this.opts.bundlePath ?? execBundlePath)());
      const sha = createHash('sha256').update(bytes).digest('hex').slice(0, 16);
      this.bundle = { bytes, path: `${root}/runtime/adv-exec-${sha}.mjs` };
    }
    await this.ship(this.bundle.path, this.bundle.bytes);
    const dir = this.jobDir(await this.workRoot(), job.jobName);
    const env = remoteJobEnv(job, { dir, codePath, bundlePath: this.bundle.path, cacheDir: `${root}/cache` });
    const secrets = secretsFile(job);
    return {
      dir,
      env: envFile(env),
      runSh: bootstrapScript(job),
      ...(secrets ? { secrets } : {}),
    };
  }

  /** Writes one job dir and launches it, unless a job of that name was launched already. Returns its pid. */
  async launch(job: JobRequest): Promise<string> {
    const [r] = await this.launchMany([job]);
    if (r instanceof Error) throw r;
    return r!.pid;
  }

  /**
   * Find-or-launch many jobs: one command to find those already launched (their pid files), the
   * code and runtime shipped once, and one command per ~96 KiB of job files to write and launch
   * the rest. Results are in order.
   */
  async launchMany(jobs: readonly JobRequest[]): Promise<Launched[]> {
    if (!jobs.length) return [];
    const work = await this.workRoot();
    const dirs = jobs.map((j) => this.jobDir(work, j.jobName));
    const found = await this.pids(
      'for d in "$@"; do if [ -f "$d/pid" ]; then printf "%s\\t%s\\n" "$d" "$(cat "$d/pid")"; fi; done',
      dirs,
    );
    const results: Launched[] = dirs.map((d) =>
      found.has(d) ? { pid: found.get(d)!, adopted: true } : new Error('not launched'),
    );
    let chunk: { i: number; files: { name: string; body: string }[] }[] = [];
    let size = 0;
    const flush = async () => {
      if (chunk.length) await this.launchChunk(jobs, dirs, work, chunk, results);
      chunk = [];
      size = 0;
    };
    for (let i = 0; i < jobs.length; i++) {
      if (found.has(dirs[i]!)) continue;
      try {
        const { env, runSh, secrets } = await this.prepare(jobs[i]!);
        const name = jobs[i]!.jobName;
        if (size + name.length + 1 > MAX_COMMAND_BYTES) await flush();
        chunk.push({
          i,
          files: [
            { name: `${name}/env`, body: env },
            { name: `${name}/run.sh`, body: runSh },
            ...(secrets ? [{ name: `${name}/secrets`, body: secrets }] : []),
          ],
        });
        size += name.length + 1;
      } catch (e) {
        results[i] = e instanceof Error ? e : new Error(String(e));
      }
    }
    await flush();
    return results;
  }

  /** One command: the chunk's job files as a tar on stdin, then launch; fills in their results. */
  private async launchChunk(
    jobs: readonly JobRequest[],
    dirs: readonly string[],
    work: string,
    chunk: readonly { i: number; files: { name: string; body: string }[] }[],
    results: Launched[],
  ): Promise<void> {
    const launched = await this.pids(
      LAUNCH_MANY,
      [work, ...chunk.map((c) => jobs[c.i]!.jobName)],
      await packFiles(chunk.flatMap((c) => c.files)),
    );
    for (const { i } of chunk) {
      const pid = launched.get(dirs[i]!);
      results[i] = pid ? { pid } : new Error(`could not write or launch ${dirs[i]} on ${this.where}`);
      if (pid) this.opts.logger.info({ job: jobs[i]!.jobName, pid, host: this.where }, 'started ssh job');
    }
  }

  /** Runs a script that prints `dir<TAB>pid` lines; returns them as a map. */
  private async pids(script: string, args: string[], input?: Buffer): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const line of (await this.run(['sh', '-c', script, 'sh', ...args], input)).split('\n')) {
      const [dir, pid] = line.split('\t');
      if (dir && pid) out.set(dir, pid.trim());
    }
    return out;
  }

  /** The pid of a launched job (its pid file), or undefined. */
  async findPid(jobName: string): Promise<string | undefined> {
    const dir = this.jobDir(await this.workRoot(), jobName);
    const r = await this.transport.exec(['sh', '-c', 'test -f "$1/pid" && cat "$1/pid"', 'sh', dir]);
    return r.code === 0 ? r.stdout.toString().trim() : undefined;
  }

  /** One remote command for every job: exit records, live pids and job dirs → observations. */
  async observe(handles: readonly JobHandle[]): Promise<ObservedJob[]> {
    if (!handles.length) return [];
    const work = await this.workRoot();
    let out: string;
    try {
      out = await this.run(['sh', '-c', OBSERVE, 'sh', ...handles.map((h) => this.jobDir(work, h.jobName))]);
    } catch (e) {
      return unobservable(handles, 'Unreachable', (e as Error).message);
    }
    const lines = new Map(
      out
        .split('\n')
        .filter(Boolean)
        .map((l) => [l.split('\t')[0]!, l.split('\t')]),
    );
    return handles.map((h) => {
      const [, what, json] = lines.get(h.jobName) ?? [];
      return this.observation({ jobName: h.jobName, jobId: h.jobId }, what, json);
    });
  }

  private observation(base: { jobName: string; jobId: string }, what?: string, json?: string): ObservedJob {
    if (what === 'exit')
      return observedFromExit(base, JSON.parse(json!) as Parameters<typeof observedFromExit>[1]);
    if (what === 'running')
      return {
        ...base,
        state: JobState.Running,
        startedAt: (JSON.parse(json!) as { startedAt: string }).startedAt,
      };
    if (what === 'starting') return { ...base, state: JobState.Pending };
    if (what === 'gone')
      return {
        ...base,
        state: JobState.Lost,
        reason: 'ProcessVanished',
        message: `the job's process on ${this.where} ended without an exit record`,
      };
    return {
      ...base,
      state: JobState.Lost,
      reason: 'JobDirMissing',
      message: `no job dir for ${base.jobName} on ${this.where}`,
    };
  }

  /** Marks the job cancelled (adv exec records it so) and stops its process group: TERM, KILL after a grace. */
  async cancel(jobName: string): Promise<void> {
    const dir = this.jobDir(await this.workRoot(), jobName);
    await this.transport.exec([
      'sh',
      '-c',
      'touch "$1/cancel-requested"; kill -TERM -"$(cat "$1/pid")" 2>/dev/null; true',
      'sh',
      dir,
    ]);
    setTimeout(
      () =>
        void this.transport
          .exec(['sh', '-c', 'kill -KILL -"$(cat "$1/pid")" 2>/dev/null; true', 'sh', dir])
          .catch(() => undefined),
      CANCEL_GRACE_MS,
    ).unref();
  }

  /**
   * After a cancel: resolves once the job has ended here (its record says how), or the host no
   * longer answers, or after `graceMs` — for adapters that delete the machine next.
   */
  async ended(h: JobHandle, graceMs: number): Promise<void> {
    const deadline = Date.now() + graceMs;
    while (Date.now() < deadline) {
      const [o] = await this.observe([h]).catch(() => [undefined]);
      if (!o || isEnded(o.state)) return;
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** Only marks the job cancelled, for a scheduler that stops it itself (`scancel`). */
  async markCancelRequested(jobName: string): Promise<void> {
    const dir = this.jobDir(await this.workRoot(), jobName);
    // A job cancelled while queued never reads its secrets: they go now.
    await this.transport.exec([
      'sh',
      '-c',
      'rm -f "$1/secrets"; touch "$1/cancel-requested" 2>/dev/null; true',
      'sh',
      dir,
    ]);
  }

  /** The job's output.log from `since`, following it until exit.json appears when asked to. */
  async *logs(jobName: string, opts: { follow?: boolean; since?: number } = {}): AsyncIterable<string> {
    const dir = this.jobDir(await this.workRoot(), jobName);
    let offset = opts.since ?? 0;
    for (;;) {
      const r = await this.transport.exec([
        'sh',
        '-c',
        'tail -c +"$2" "$1/output.log" 2>/dev/null; true',
        'sh',
        dir,
        String(offset + 1),
      ]);
      if (r.stdout.length) {
        offset += r.stdout.length;
        yield r.stdout.toString('utf8');
      }
      if (!opts.follow || (await this.transport.exec(['test', '-f', `${dir}/exit.json`])).code === 0) return;
      await new Promise((res) => setTimeout(res, 1000));
    }
  }

  close(): void {
    this.transport.close();
  }
}

/** The host a Backend spec's `connection` names, over the context's SSH transport (ssh, slurm). */
export function sshHostOf(spec: BackendObject['spec'], ctx: BackendContext): RemoteHost {
  return new RemoteHost({
    // Validation requires connection.host for the types that use this (ssh, slurm).
    transport: ctx.ssh(sshTargetOf({ ...spec.connection!, host: spec.connection!.host! })),
    paths: spec.paths,
    code: ctx.code,
    logger: ctx.logger,
  });
}
