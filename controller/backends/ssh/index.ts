/**
 * `ssh`: a plain host reached over SSH. Per job, a dir under the backend's work root holding a
 * generated POSIX `run.sh` and an `env` file (every value quoted by `shellQuote`); the job runs
 * `nohup setsid sh run.sh` in its own session, under the bundled `adv exec`, which leaves the same
 * `exec.json` / `exit.json` records as on the local backend. Code and the runtime are shipped once
 * per host, content-addressed, and verified by sha256 after the copy.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NativeGit } from '../../git/native.js';
import { shellJoin, shellQuote } from '../../internal/shell.js';
import type { Backend as BackendObject } from '../../spec/schema.js';
import {
  JobState,
  observedFromExit,
  unobservable,
  type Backend,
  type Capacity,
  type BackendContext,
  type BackendFactory,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
  type SubmitResult,
} from '../types.js';
import { buildPayload, codeTree } from './payload.js';
import { SshTransport } from './transport.js';

const CANCEL_GRACE_MS = 10_000;

/**
 * sha256 of "$1" on the host: Node's (OpenSSL, ~1.7 GB/s with SHA extensions) where Node is,
 * coreutils' sha256sum (~300 MB/s here) otherwise. Prints the hex digest first.
 */
const SHA256 = `{ command -v node >/dev/null 2>&1 && node -e 'const h=require("crypto").createHash("sha256");require("fs").createReadStream(process.argv[1],{highWaterMark:4194304}).on("data",(d)=>h.update(d)).on("end",()=>console.log(h.digest("hex")))' "$1" || sha256sum "$1"; }`;

/** Where the bundled worker runtime is (built by `npm run build`). */
export function execBundlePath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const p of [
    join(here, '..', '..', '..', 'adv-exec.mjs'),
    join(here, '..', '..', '..', 'dist', 'adv-exec.mjs'),
  ])
    if (existsSync(p)) return p;
  throw new Error('dist/adv-exec.mjs is missing: run `npm run build` (backends ship the bundled adv exec)');
}

export class SshBackend implements Backend {
  readonly type: 'ssh' | 'slurm' = 'ssh';
  readonly transport: SshTransport;
  private rootDir: string | undefined;
  private readonly shipped = new Set<string>();
  private bundle: { bytes: Buffer; path: string } | undefined;
  private git: NativeGit | undefined;

  constructor(
    readonly name: string,
    protected readonly spec: BackendObject['spec'],
    protected readonly ctx: BackendContext,
  ) {
    const c = spec.connection!;
    this.transport = new SshTransport({
      host: c.host,
      ...(c.port ? { port: c.port } : {}),
      ...(c.user ? { user: c.user } : {}),
      ...(c.identityFile ? { identityFile: c.identityFile } : {}),
      ...(c.knownHostsFile ? { knownHostsFile: c.knownHostsFile } : {}),
      ...(c.hostKeyPolicy ? { hostKeyPolicy: c.hostKeyPolicy } : {}),
      ...(c.keepaliveSec ? { keepaliveSec: c.keepaliveSec } : {}),
      ...(c.proxyJump ? { proxyJump: c.proxyJump } : {}),
    });
  }

  /** Runs a command; throws with the host's own message when it fails. */
  protected async run(argv: string[], input?: Buffer | string): Promise<string> {
    const r = await this.transport.exec(argv, input === undefined ? {} : { input });
    if (r.code !== 0)
      throw new Error(
        `${argv[0]} on ${this.transport.where} failed (exit ${r.code}): ${r.stderr.trim() || r.stdout.toString().trim()}`,
      );
    return r.stdout.toString('utf8');
  }

  /** The backend's root on the host, with `~` expanded there. */
  protected async root(): Promise<string> {
    if (this.rootDir) return this.rootDir;
    const configured = this.spec.paths?.root ?? '~/.adventuretime';
    const home = (await this.run(['sh', '-c', 'cd && pwd'])).trim();
    this.rootDir =
      configured === '~' ? home : configured.startsWith('~/') ? `${home}/${configured.slice(2)}` : configured;
    return this.rootDir;
  }

  async workRoot(): Promise<string> {
    const w = this.spec.paths?.work;
    return w
      ? w.startsWith('~/')
        ? `${(await this.root()).replace(/\/\.adventuretime$/, '')}/${w.slice(2)}`
        : w
      : `${await this.root()}/work`;
  }

  /** Copies bytes to `path` on the host once (skipped when already there), verified by sha256. */
  protected async ship(path: string, bytes: Buffer): Promise<void> {
    if (this.shipped.has(path)) return;
    const sha = createHash('sha256').update(bytes).digest('hex');
    const have = await this.transport.exec(['sh', '-c', `test -f "$1" && ${SHA256}`, 'sh', path]);
    if (have.code !== 0 || !have.stdout.toString().startsWith(sha)) {
      // Streamed over an exec channel (faster than SFTP), renamed into place when complete.
      await this.run(
        [
          'sh',
          '-c',
          `mkdir -p "$(dirname "$1")" && cat > "$1.tmp.$$" && mv "$1.tmp.$$" "$1" && ${SHA256}`,
          'sh',
          path,
        ],
        bytes,
      ).then((out) => {
        if (!out.startsWith(sha))
          throw new Error(`copy of ${path} to ${this.transport.where} does not verify`);
      });
    }
    this.shipped.add(path);
  }

  protected jobDir(work: string, jobName: string): string {
    return `${work}/${jobName}`;
  }

  /** Writes the job dir: env file, run.sh, code and runtime shipped. Returns the dir. */
  protected async prepare(job: JobRequest): Promise<{ dir: string; env: string; runSh: string }> {
    const root = await this.root();
    this.git ??= new NativeGit(this.ctx.gitdir);
    const tree = await codeTree(this.git, job.code.commit, job.code.path);
    const codePath = `${root}/code/${tree}.tar.gz`;
    // Built and shipped once per tree and host.
    if (!this.shipped.has(codePath)) await this.ship(codePath, await buildPayload(this.git, tree));
    if (!this.bundle) {
      const bytes = readFileSync(execBundlePath());
      this.bundle = {
        bytes,
        path: `${root}/runtime/adv-exec-${createHash('sha256').update(bytes).digest('hex').slice(0, 16)}.mjs`,
      };
    }
    const bundlePath = this.bundle.path;
    await this.ship(bundlePath, this.bundle.bytes);
    const dir = this.jobDir(await this.workRoot(), job.jobName);
    const env: Record<string, string> = {
      ...job.env,
      ...(job.store?.env ?? {}),
      ADV_RUN: job.run,
      ADV_ATTEMPT: String(job.attempt),
      ADV_JOB_DIR: dir,
      ADV_CODE_TARBALL: codePath,
      ADV_EXEC_BUNDLE: bundlePath,
      ...(job.store ? { ADV_STORE: job.store.url } : {}),
      ...(job.spec.workingDir ? { ADV_WORKDIR: job.spec.workingDir } : {}),
      ...(job.spec.policy?.checkpointIntervalSec
        ? { ADV_CKPT_INTERVAL_SEC: String(job.spec.policy.checkpointIntervalSec) }
        : {}),
      ...(job.spec.parallelism ? { ADV_PARALLELISM: JSON.stringify(job.spec.parallelism) } : {}),
    };
    const setup = [...(this.spec.setup ?? []), ...(job.spec.setup ?? [])];
    setup.forEach((s, i) => (env[`ADV_SETUP_${i}`] = s));
    const envFile = Object.entries(env)
      .map(([k, v]) => `export ${k}=${shellQuote(v)}`)
      .join('\n');
    return { dir, env: envFile + '\n', runSh: this.bootstrap(job, setup.length) };
  }

  /**
   * The remote part of a submit, as ONE command: write env and run.sh, then launch (unless a job
   * of that name already exists there). Every value travels as a quoted argument.
   */
  protected writeAndLaunch(
    dir: string,
    env: string,
    runSh: string,
    launch: string,
    extra: string[] = [],
  ): Promise<string> {
    return this.run([
      'sh',
      '-c',
      `umask 077 && mkdir -p "$1" && printf %s "$2" > "$1/env" && printf %s "$3" > "$1/run.sh" && ${launch}`,
      'sh',
      dir,
      env,
      runSh,
      ...extra,
    ]);
  }

  /** The generated bootstrap: no value is pasted in; everything comes from ./env or is quoted. */
  protected bootstrap(job: JobRequest, setupSteps: number): string {
    const setup = Array.from({ length: setupSteps }, (_, i) => `sh -c "$ADV_SETUP_${i}"`).join('\n');
    return `#!/bin/sh
# Generated by AdventureTime for ${shellQuote(job.jobName)}. Values come from ./env.
set -u
cd "$(dirname "$0")"
. ./env
fail() {
  printf '{"exitCode":127,"reason":"StartFailed","message":"%s","startedAt":"","finishedAt":""}\\n' "$1" > exit.json.tmp && mv exit.json.tmp exit.json
  echo "adv bootstrap: $1" >&2
  exit 127
}
command -v node >/dev/null 2>&1 || fail "Node.js >= 20 is required on $(hostname) and was not found in PATH"
[ "$(node -p 'process.versions.node.split(".")[0] >= 20')" = true ] || fail "Node.js >= 20 is required on $(hostname); found $(node --version)"
# On a multi-node job every process runs this script: each gets its own dir; only process 0
# talks to the object store (checkpoints, logs, heartbeats).
if [ "\${ADV_PROCESS_ID:-0}" != 0 ]; then
  ADV_JOB_DIR="$ADV_JOB_DIR/proc-$ADV_PROCESS_ID"; export ADV_JOB_DIR
  mkdir -p "$ADV_JOB_DIR" && cd "$ADV_JOB_DIR"
  unset ADV_STORE
fi
mkdir -p work && tar -xzf "$ADV_CODE_TARBALL" -C work || fail "cannot extract the code"

cd work
if [ -n "\${ADV_WORKDIR:-}" ]; then cd "$ADV_WORKDIR" || fail "no working dir $ADV_WORKDIR in the code"; fi
if [ -f pyproject.toml ] && command -v uv >/dev/null 2>&1; then uv sync || fail "uv sync failed"; fi
${setup}
node "$ADV_EXEC_BUNDLE" \${ADV_STORE:+--store "$ADV_STORE"} --run "$ADV_RUN" --attempt "$ADV_ATTEMPT" --job-dir "$ADV_JOB_DIR" -- ${shellJoin(job.argv)}
code=$?
# Clean the work dir on success; keep it on failure, for a person to look at.
if [ "$code" -eq 0 ]; then cd "$ADV_JOB_DIR" && rm -rf work; fi
exit "$code"
`;
  }

  async submit(job: JobRequest): Promise<JobHandle> {
    const { dir, env, runSh } = await this.prepare(job);
    // Idempotent by name: an existing pid file means this job was launched already.
    const pid = (
      await this.writeAndLaunch(
        dir,
        env,
        runSh,
        'cd "$1" && if [ ! -f pid ]; then setsid nohup sh ./run.sh > output.log 2>&1 < /dev/null & echo $! > pid; fi; cat pid',
      )
    ).trim();
    this.ctx.logger.info({ job: job.jobName, pid, host: this.transport.where }, 'started ssh job');
    return { backend: this.name, jobName: job.jobName, jobId: pid };
  }

  /**
   * Find-or-launch many jobs: one command to find those already launched (their pid files), the
   * code and runtime shipped once, and one command per ~96 KiB of job files to write and launch
   * the rest (sshd hands the whole command to the login shell as ONE argument, capped at 128 KiB).
   */
  async submitMany(jobs: readonly JobRequest[]): Promise<(SubmitResult | Error)[]> {
    if (!jobs.length) return [];
    const work = await this.workRoot();
    const dirs = jobs.map((j) => this.jobDir(work, j.jobName));
    const pids = async (script: string, args: string[]) => {
      const out = new Map<string, string>();
      for (const line of (await this.run(['sh', '-c', script, 'sh', ...args])).split('\n')) {
        const [dir, pid] = line.split('\t');
        if (dir && pid) out.set(dir, pid.trim());
      }
      return out;
    };
    const found = await pids(
      'for d in "$@"; do if [ -f "$d/pid" ]; then printf "%s\\t%s\\n" "$d" "$(cat "$d/pid")"; fi; done',
      dirs,
    );
    const results: (SubmitResult | Error)[] = jobs.map((j, i) =>
      found.has(dirs[i]!)
        ? { backend: this.name, jobName: j.jobName, jobId: found.get(dirs[i]!)!, adopted: true }
        : new Error('not launched'),
    );
    // Write and launch the rest, in chunks that fit one command line.
    let chunk: { i: number; args: string[] }[] = [];
    let size = 0;
    const flush = async () => {
      if (!chunk.length) return;
      const launched = await pids(
        `umask 077
while [ $# -gt 0 ]; do
  d=$1; mkdir -p "$d" && printf %s "$2" > "$d/env" && printf %s "$3" > "$d/run.sh" && (
    cd "$d" && if [ ! -f pid ]; then setsid nohup sh ./run.sh > output.log 2>&1 < /dev/null & echo $! > pid; fi
  ) && printf '%s\\t%s\\n' "$d" "$(cat "$d/pid")"
  shift 3
done`,
        chunk.flatMap((c) => c.args),
      );
      for (const { i } of chunk) {
        const pid = launched.get(dirs[i]!);
        results[i] = pid
          ? { backend: this.name, jobName: jobs[i]!.jobName, jobId: pid }
          : new Error(`could not write or launch ${dirs[i]} on ${this.transport.where}`);
        if (pid)
          this.ctx.logger.info({ job: jobs[i]!.jobName, pid, host: this.transport.where }, 'started ssh job');
      }
      chunk = [];
      size = 0;
    };
    for (let i = 0; i < jobs.length; i++) {
      if (found.has(dirs[i]!)) continue;
      try {
        const { dir, env, runSh } = await this.prepare(jobs[i]!);
        const n = dir.length + env.length + runSh.length + 16;
        if (size + n > 96 * 1024) await flush();
        chunk.push({ i, args: [dir, env, runSh] });
        size += n;
      } catch (e) {
        results[i] = e instanceof Error ? e : new Error(String(e));
      }
    }
    await flush();
    return results;
  }

  async find(jobName: string): Promise<JobHandle | undefined> {
    const dir = this.jobDir(await this.workRoot(), jobName);
    const r = await this.transport.exec(['sh', '-c', 'test -f "$1/pid" && cat "$1/pid"', 'sh', dir]);
    if (r.code !== 0) return undefined;
    return { backend: this.name, jobName, jobId: r.stdout.toString().trim() };
  }

  /** One remote command for every job of this host. */
  async poll(handles: readonly JobHandle[]): Promise<ObservedJob[]> {
    if (!handles.length) return [];
    const work = await this.workRoot();
    const script = `for d in "$@"; do
  printf '%s\\t' "$(basename "$d")"
  if [ -f "$d/exit.json" ]; then printf 'exit\\t'; tr -d '\\n' < "$d/exit.json"
  elif [ -f "$d/pid" ] && kill -0 "$(cat "$d/pid")" 2>/dev/null; then if [ -f "$d/exec.json" ]; then printf 'running\\t'; tr -d '\\n' < "$d/exec.json"; else printf 'starting'; fi
  elif [ -d "$d" ]; then printf 'gone'
  else printf 'missing'; fi
  echo
done`;
    let out: string;
    try {
      out = await this.run(['sh', '-c', script, 'sh', ...handles.map((h) => this.jobDir(work, h.jobName))]);
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
      const base = { jobName: h.jobName, jobId: h.jobId };
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
          message: `the job's process on ${this.transport.where} ended without an exit record`,
        };
      return {
        ...base,
        state: JobState.Lost,
        reason: 'JobDirMissing',
        message: `no job dir for ${h.jobName} on ${this.transport.where}`,
      };
    });
  }

  async cancel(h: JobHandle): Promise<void> {
    const dir = this.jobDir(await this.workRoot(), h.jobName);
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

  async *logs(h: JobHandle, opts: { follow?: boolean; since?: number } = {}): AsyncIterable<string> {
    const dir = this.jobDir(await this.workRoot(), h.jobName);
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

  /**
   * GPUs of the host from `nvidia-smi`: a GPU with 100 MiB or more in use is busy (another
   * process is on it). A host without nvidia-smi reports no GPUs and says why.
   */
  async capacity(): Promise<Capacity> {
    const r = await this.transport.exec([
      'nvidia-smi',
      '--query-gpu=index,name,memory.total,memory.used',
      '--format=csv,noheader,nounits',
    ]);
    if (r.code !== 0)
      return {
        freeGpus: 0,
        gpus: [],
        note: `nvidia-smi is not available on ${this.transport.where} (${r.stderr.trim() || `exit ${r.code}`})`,
      };
    const gpus = parseNvidiaSmi(r.stdout.toString());
    return { freeGpus: gpus.filter((g) => !g.busy).length, gpus };
  }

  async close(): Promise<void> {
    this.transport.close();
    await this.git?.close();
  }
}

/** `0, NVIDIA H100 80GB HBM3, 81559, 4` lines → GPUs; busy at ≥ 100 MiB used. */
export function parseNvidiaSmi(text: string): NonNullable<Capacity['gpus']> {
  return text
    .split('\n')
    .map((l) => l.split(',').map((x) => x.trim()))
    .filter((f) => f.length >= 4 && /^\d+$/.test(f[0]!))
    .map(([index, name, total, used]) => ({
      index: Number(index),
      name: name!,
      memoryTotalMiB: Number(total),
      memoryUsedMiB: Number(used),
      busy: Number(used) >= 100,
    }));
}

export const sshBackend: BackendFactory = {
  type: 'ssh',
  create(spec: BackendObject, ctx: BackendContext) {
    return new SshBackend(spec.metadata.name, spec.spec, ctx);
  },
};
