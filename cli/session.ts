/**
 * What `adv notebook`, `adv shell` and `adv ssh` share: a session Run committed to the specs repo
 * (GitOps: the controller places it like any run), the wait for its attempt to be Running with the
 * endpoint `adv exec` publishes in the store, and the way to its worker (forward.ts).
 */
import { spawn } from 'node:child_process';
import { userInfo } from 'node:os';
import {
  AdvError,
  CROSS_FILE_CODES,
  ErrorCode,
  SpecLoader,
  TERMINAL_PHASES,
  type Attempt,
  type BackendSpec,
  type LoadResult,
  type RunStatusDoc,
} from '../controller/index.js';
import { DEFAULT_IDLE_SEC, sessionKey, type SessionEndpoint, type SessionKind } from '../runtime/session.js';
import type { ObjectStore } from '../runtime/store/types.js';
import { shellJoin } from '../runtime/shell.js';
import { printableDiagnostic } from './format.js';
import { kubectlExecArgv, sshArgv, type Route } from './forward.js';
import { checkName } from './names.js';
import { printable, type Io } from './output.js';
import { gitToken, parseDuration, resolveRepo } from './repo.js';
import { openStatus, type StatusReader } from './status-reader.js';
import { openSpecsWorkTree, type RepoOpts } from './specs-writer.js';

/** The options `adv notebook` and `adv shell` take. */
export interface SessionOpts extends RepoOpts {
  on?: string;
  gpus?: string;
  envRef?: string;
  idle: string;
  name?: string;
  store?: string;
  /** How long to wait for the session to start (a duration). */
  wait: string;
}

/** A fresh, readable, valid name: `nb-<user>-<utc time>` / `sh-<user>-<utc time>`. */
export function sessionName(kind: SessionKind, user: string, now: Date): string {
  const who =
    user
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 30) || 'user';
  const t = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15).toLowerCase();
  return `${kind === 'notebook' ? 'nb' : 'sh'}-${who}-${t}`;
}

/** The Run, as a person would write it, with a header saying where it came from. */
export function sessionRunYaml(
  name: string,
  kind: SessionKind,
  o: { on?: string; gpus?: number; envRef?: string; idleSec: number; who: string; at: string },
): string {
  return [
    `# Written by adv ${kind === 'notebook' ? 'notebook' : 'shell'} for ${o.who} at ${o.at}: an interactive`,
    `# session (docs/sessions.md). It ends after ${o.idleSec} s unused; adv cancel ${name} ends it now.`,
    'apiVersion: adventuretime.dev/v1alpha1',
    'kind: Run',
    'metadata:',
    `  name: ${name}`,
    'spec:',
    '  session:',
    `    kind: ${kind}`,
    `    idleTimeoutSec: ${o.idleSec}`,
    ...(o.envRef ? [`  environment: ${o.envRef}`] : []),
    ...(o.gpus !== undefined ? ['  resources:', `    gpus: ${o.gpus}`] : []),
    ...(o.on ? ['  backendSelector:', `    order: [${o.on}]`] : []),
    '',
  ].join('\n');
}

/** Checks `--on` and `--env-ref` against what the branch has, so a typo fails here, not in status. */
function checkRefs(specs: LoadResult, o: SessionOpts): void {
  const names = (kind: string) => specs.objects.filter((x) => x.kind === kind).map((x) => x.name);
  if (o.on && !names('Backend').includes(o.on))
    throw new AdvError(ErrorCode.NotFound, `no Backend "${printable(o.on)}" in ${o.branch}`, {
      hint: `pick one of: ${names('Backend').join(', ') || '(none: add a Backend spec first)'}`,
    });
  const env = o.envRef?.split('@')[0];
  if (env && !names('Environment').includes(env))
    throw new AdvError(ErrorCode.NotFound, `no Environment "${printable(env)}" in ${o.branch}`, {
      hint: `pick one of: ${names('Environment').join(', ') || '(none: add an Environment spec first)'}`,
    });
}

/** Writes `runs/<name>.yaml` and commits it (pushes, for a URL). Returns the run's name. */
export async function commitSessionRun(io: Io, kind: SessionKind, o: SessionOpts): Promise<string> {
  const idleSec = Math.max(1, Math.round(parseDuration(o.idle) / 1000));
  const gpus = o.gpus === undefined ? undefined : Number(o.gpus);
  if (gpus !== undefined && !(Number.isInteger(gpus) && gpus >= 0))
    throw new AdvError(ErrorCode.UsageError, `--gpus takes a whole number, not "${printable(o.gpus!)}"`);
  // Names only: what reaches the YAML below can be nothing else.
  for (const [flag, v, re] of [
    ['--on', o.on, /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/],
    ['--env-ref', o.envRef, /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(@\d+)?$/],
  ] as const)
    if (v !== undefined && !re.test(v))
      throw new AdvError(ErrorCode.UsageError, `${flag} takes a name, not "${printable(v)}"`, {
        hint: flag === '--on' ? 'adv get backends lists them' : 'an Environment name, or name@version',
      });
  const who = io.env.USER ?? userInfo().username;
  const name = checkName(o.name ?? sessionName(kind, who, new Date()), 'run', true);
  const rel = `runs/${name}.yaml`;
  const yaml = sessionRunYaml(name, kind, {
    ...(o.on ? { on: o.on } : {}),
    ...(gpus !== undefined ? { gpus } : {}),
    ...(o.envRef ? { envRef: o.envRef } : {}),
    idleSec,
    who,
    at: new Date().toISOString(),
  });
  const loader = new SpecLoader();
  loader.loadFile(rel, Buffer.from(yaml), 'session');
  const errors = loader
    .result()
    .diagnostics.filter((d) => d.severity === 'error' && !CROSS_FILE_CODES.has(d.code));
  if (errors.length) {
    for (const d of errors) io.stderr.write(printableDiagnostic(d) + '\n');
    throw new AdvError(ErrorCode.SpecInvalid, `the session's Run would be invalid; nothing was committed`);
  }
  const repo = await resolveRepo(o.repo, io.cwd);
  const wt = await openSpecsWorkTree(repo, o.branch, await gitToken(io.env));
  try {
    const parent = await wt.branchHead();
    const specs = await wt.loadCommitted(parent);
    checkRefs(specs, o);
    if (specs.objects.some((x) => x.kind === 'Run' && x.name === name))
      throw new AdvError(ErrorCode.UsageError, `a Run named ${name} is already in ${o.branch}`, {
        hint: 'pick another --name, or leave it out for a fresh one',
      });
    const state = await wt.fileState(rel, parent);
    if (state.staged || state.worktree !== undefined)
      throw new AdvError(ErrorCode.UsageError, `${rel} already exists in the work tree (uncommitted)`, {
        hint: 'pick another --name, or remove that file',
      });
    // The file is in the work tree too, as after a commit of one's own (its folder may be new).
    await wt.write(rel, yaml);
    let sha: string;
    try {
      sha = await wt.commitFile(rel, yaml, `session: ${kind} ${name}`, parent);
    } catch (e) {
      await wt.remove(rel);
      throw e;
    }
    io.stderr.write(`${kind} session ${name}: committed ${rel} (${sha.slice(0, 10)})\n`);
    return name;
  } finally {
    await wt.close();
  }
}

/** A session that is up: where it runs, and how to reach it. */
export interface LiveSession {
  status: RunStatusDoc;
  attempt: Attempt;
  endpoint: SessionEndpoint;
  backend: { name: string; spec: BackendSpec };
}

const POLL_MS = 500;

/** The run's status now (re-read from git), or undefined before the controller has written any. */
async function readStatus(
  o: RepoOpts,
  io: Io,
  reader: { r?: StatusReader },
  name: string,
): Promise<RunStatusDoc | undefined> {
  if (!reader.r) {
    try {
      reader.r = await openStatus({ ...(o.repo ? { repo: o.repo } : {}) }, io);
    } catch (e) {
      if ((e as AdvError).code === ErrorCode.NotFound) return undefined;
      throw e;
    }
  } else {
    if (reader.r.repo.mode === 'remote') await reader.r.repo.refresh();
    await reader.r.store.load();
  }
  return reader.r.store.get<RunStatusDoc>('Run', name);
}

/** The committed Backend spec named `name` on the watched branch. */
async function backendSpec(io: Io, o: RepoOpts, name: string): Promise<BackendSpec> {
  const wt = await openSpecsWorkTree(await resolveRepo(o.repo, io.cwd), o.branch, await gitToken(io.env));
  try {
    const specs = await wt.loadCommitted(await wt.branchHead());
    const b = specs.objects.find((x) => x.kind === 'Backend' && x.name === name);
    if (!b) throw new AdvError(ErrorCode.NotFound, `Backend ${name} is no longer in ${o.branch}`);
    return (b.object as { spec: BackendSpec }).spec;
  } finally {
    await wt.close();
  }
}

/**
 * Waits until the run's current attempt is Running and its session has published its endpoint;
 * says each phase it passes through on stderr. A run that ends first is an error with its message.
 */
export async function waitForSession(
  io: Io,
  o: RepoOpts,
  store: ObjectStore,
  name: string,
  timeoutMs: number,
): Promise<LiveSession> {
  const reader: { r?: StatusReader } = {};
  const deadline = Date.now() + timeoutMs;
  let said = '';
  try {
    for (;;) {
      const doc = await readStatus(o, io, reader, name);
      const st = doc?.status;
      const attempt = st?.attempts.at(-1);
      const now = st
        ? `${st.phase}${attempt ? ` (attempt ${attempt.n} on ${attempt.backend})` : ''}`
        : 'Pending';
      if (now !== said) io.stderr.write(`${name}: ${(said = now)}\n`);
      if (st && TERMINAL_PHASES.has(st.phase))
        throw new AdvError(
          ErrorCode.BackendError,
          `session ${name} ended (${st.phase}) before it could be reached`,
          {
            hint: `${st.message ?? ''} — adv describe run ${name}`.replace(/^ — /, ''),
          },
        );
      if (doc && st?.phase === 'Running' && attempt) {
        const raw = await store.get(sessionKey(name));
        const ep = raw ? (JSON.parse(Buffer.from(raw).toString('utf8')) as SessionEndpoint) : undefined;
        if (ep?.attempt === attempt.n) {
          const spec = await backendSpec(io, o, attempt.backend);
          return { status: doc, attempt, endpoint: ep, backend: { name: attempt.backend, spec } };
        }
      }
      if (Date.now() > deadline)
        throw new AdvError(
          ErrorCode.Waiting,
          `session ${name} was not up after ${timeoutMs / 1000} s (${said})`,
          {
            hint: `it may still start: adv describe run ${name}; adv cancel ${name} gives it up`,
          },
        );
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    await reader.r?.close();
  }
}

/** Resolves with the run's final phase once it has ended (the idle timeout, a cancel). */
export async function untilEnded(
  io: Io,
  o: RepoOpts,
  name: string,
  signal: AbortSignal,
): Promise<string | undefined> {
  const reader: { r?: StatusReader } = {};
  try {
    while (!signal.aborted) {
      const st = (await readStatus(o, io, reader, name))?.status;
      if (st && TERMINAL_PHASES.has(st.phase)) return st.phase;
      await new Promise((r) => setTimeout(r, POLL_MS * 2));
    }
    return undefined;
  } finally {
    await reader.r?.close();
  }
}

export const DEFAULT_IDLE = `${DEFAULT_IDLE_SEC / 60}m`;

/**
 * The remote side of `adv shell` / `adv ssh`: a login shell in the job's work dir (its job dir when
 * the work dir is gone) with the run's contract variables; `register` = 1 records its pid where a
 * shell session counts attached shells (`SHELLS_DIR`), so the session lives while it does.
 */
const SHELL_SH = [
  'd=$1',
  'case $d in "~/"*) d=$HOME/${d#"~/"} ;; esac',
  'if [ -n "$d" ]; then',
  '  if [ "$4" = 1 ]; then mkdir -p "$d/session/shells" && : > "$d/session/shells/$$"; fi',
  '  cd "$d/work" 2>/dev/null || cd "$d" || exit 1',
  'fi',
  'export ADV_RUN="$2" ADV_ATTEMPT="$3"',
  '[ -n "$d" ] && export ADV_JOB_DIR="$d"',
  'exec "${SHELL:-/bin/sh}" -l',
].join('\n');

/** The shell command line (for `sh -c` on the worker) that opens the login shell. */
export function shellCommand(jobDir: string, run: string, attempt: number, register: boolean): string[] {
  return ['sh', '-c', SHELL_SH, 'adv-shell', jobDir, run, String(attempt), register ? '1' : '0'];
}

/**
 * Opens the interactive shell over `route` with this terminal (a pseudo-terminal when stdin is
 * one; plain pipes otherwise, for scripts). Resolves to the shell's exit code.
 */
export async function openShell(route: Route, remote: string[], io: Io): Promise<number> {
  const tty = Boolean(process.stdin.isTTY);
  const line = shellJoin(remote);
  const [cmd, args] =
    route.via === 'ssh'
      ? ['ssh', sshArgv(route.target, line, tty)]
      : route.via === 'kubectl'
        ? ['kubectl', kubectlExecArgv(route, line, tty)]
        : [remote[0]!, remote.slice(1)];
  // Ctrl-C belongs to the remote shell (through the terminal); this process waits for it.
  const ignore = () => {};
  process.on('SIGINT', ignore);
  try {
    const child = spawn(cmd, args, { stdio: 'inherit', env: io.env });
    return await new Promise<number>((resolve, reject) => {
      child.once('error', (e) =>
        reject(
          new AdvError(ErrorCode.NotFound, `cannot start ${cmd}: ${e.message}`, {
            hint: cmd === 'ssh' ? 'install an OpenSSH client' : 'install kubectl',
          }),
        ),
      );
      child.once('exit', (code, sig) => resolve(code ?? (sig ? 128 : 1)));
    });
  } finally {
    process.off('SIGINT', ignore);
  }
}
