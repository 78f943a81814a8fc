/**
 * Interactive sessions in `adv exec`: a Run with `spec.session` runs Jupyter Lab (`notebook`) or
 * holds its machine for login shells (`shell`) instead of a command, and ends — exit 0, so the run
 * Succeeds and the backend gives the machine back — after `idleTimeoutSec` without use.
 *
 * The contract with the controller is one variable, `ADV_SESSION` (`{"kind", "idleTimeoutSec"}`),
 * and with the CLI one object in the store, `runs/<run>/session.json` (`SessionEndpoint`): where
 * the session listens, written once it answers, removed when it ends.
 *
 * Use, per kind:
 * - notebook: Jupyter's own `/api/status` (not counted as activity by Jupyter): in use while a
 *   kernel has an open connection (a notebook tab), else until `last_activity` (any request of
 *   the UI, any kernel message) is `idleTimeoutSec` old.
 * - shell: in use while a shell registered in `<job dir>/session/shells/<pid>` (what `adv shell`
 *   and `adv ssh` start) is alive.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { ObjectStore } from './store/types.js';

export const SessionKind = { Notebook: 'notebook', Shell: 'shell' } as const;
export type SessionKind = (typeof SessionKind)[keyof typeof SessionKind];

/** `spec.session` of a Run, as `ADV_SESSION` carries it. */
export interface SessionSpec {
  kind: SessionKind;
  /** Seconds without use after which the session ends (default `DEFAULT_IDLE_SEC`). */
  idleTimeoutSec?: number;
}

export const SESSION_VAR = 'ADV_SESSION';
export const DEFAULT_IDLE_SEC = 1800;

/** Where the endpoint of a run's live session is, in the store. */
export const sessionKey = (run: string): string => `runs/${run}/session.json`;

/** The dir under the job dir where attached shells register their pid (one empty file each). */
export const SHELLS_DIR = join('session', 'shells');

/** What `runs/<run>/session.json` holds: enough for the CLI to reach the session. */
export interface SessionEndpoint {
  run: string;
  attempt: number;
  kind: SessionKind;
  /** The worker's host name (for messages; the session listens on its loopback only). */
  host: string;
  /** The loopback port Jupyter listens on (notebook). */
  port?: number;
  /**
   * Jupyter's token (notebook). It is in the store because the CLI needs it; the store is the
   * operator's, as the checkpoints in it are. It is masked in the session's logs.
   */
  token?: string;
  /** The job dir on the worker: where `adv shell` starts, and where shells register. */
  jobDir?: string;
  idleTimeoutSec: number;
  startedAt: string;
}

/** The argv a session Run's job names (never run: adv exec replaces it with the session's). */
export const sessionPlaceholderArgv = (kind: SessionKind): string[] => ['adv-session', kind];

/** `ADV_SESSION`'s value, checked; undefined when it is not set. */
export function parseSessionVar(raw: string | undefined): SessionSpec | undefined {
  if (raw === undefined || raw === '') return undefined;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw new Error(`${SESSION_VAR} is not JSON: ${raw.slice(0, 80)}`);
  }
  const s = v as Partial<SessionSpec> | null;
  if (!s || (s.kind !== SessionKind.Notebook && s.kind !== SessionKind.Shell))
    throw new Error(`${SESSION_VAR} needs "kind": "notebook" or "shell", not ${raw.slice(0, 80)}`);
  if (s.idleTimeoutSec !== undefined && !(Number.isFinite(s.idleTimeoutSec) && s.idleTimeoutSec > 0))
    throw new Error(`${SESSION_VAR}'s idleTimeoutSec must be a number of seconds > 0`);
  return { kind: s.kind, ...(s.idleTimeoutSec !== undefined ? { idleTimeoutSec: s.idleTimeoutSec } : {}) };
}

/** A port free on the loopback now (the OS picks it). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Jupyter Lab from the job's environment: `jupyter-lab` on PATH (the Environment's or the uv
 * project's, set up before it), else `python3 -m jupyterlab`. The token travels in
 * `JUPYTER_TOKEN`, never on a command line other users of the host can read.
 */
const NOTEBOOK_SH =
  'if command -v jupyter-lab >/dev/null 2>&1; then exec jupyter-lab "$@"; fi; exec python3 -m jupyterlab "$@"';

/** What the session runs, and what it needs: decided before the job's setup session starts. */
export interface PreparedSession {
  spec: SessionSpec;
  argv: string[];
  env: Record<string, string>;
  /** Values to mask in everything shipped (Jupyter prints its URL with the token). */
  secrets: string[];
  port?: number;
  token?: string;
}

export async function prepareSession(spec: SessionSpec, jobDir: string): Promise<PreparedSession> {
  if (spec.kind === SessionKind.Shell)
    // Holds the attempt; adv exec ends it when no shell has been attached for the idle timeout.
    return { spec, argv: ['sh', '-c', 'exec tail -f /dev/null'], env: {}, secrets: [] };
  const port = await freeLoopbackPort();
  const token = randomBytes(24).toString('hex');
  const runtime = join(jobDir, 'session', 'jupyter');
  mkdirSync(runtime, { recursive: true });
  return {
    spec,
    port,
    token,
    secrets: [token],
    env: { JUPYTER_TOKEN: token, JUPYTER_RUNTIME_DIR: runtime },
    argv: [
      'sh',
      '-c',
      NOTEBOOK_SH,
      'adv-notebook',
      '--no-browser',
      '--ip=127.0.0.1',
      `--port=${port}`,
      '--port-retries=0',
      '--ServerApp.shutdown_no_activity_timeout=0',
      // Rented machines (a Vast.ai instance, a container) log in as root, where Jupyter refuses to start.
      ...(process.getuid?.() === 0 ? ['--allow-root'] : []),
    ],
  };
}

/** One look at the session: whether it is in use now, and when it last was (ms since epoch). */
export interface Usage {
  /** The session answered (a notebook server is up). */
  ready: boolean;
  inUse: boolean;
  lastActivity?: number;
}

/** Jupyter's `/api/status`, which Jupyter itself does not count as activity. */
export async function notebookUsage(port: number, token: string, timeoutMs = 5_000): Promise<Usage> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/api/status`, {
      headers: { Authorization: `token ${token}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!res.ok) return { ready: false, inUse: false };
    const s = (await res.json()) as { last_activity?: string; connections?: number };
    const last = s.last_activity ? Date.parse(s.last_activity) : NaN;
    return {
      ready: true,
      inUse: (s.connections ?? 0) > 0,
      ...(Number.isFinite(last) ? { lastActivity: last } : {}),
    };
  } catch {
    return { ready: false, inUse: false };
  }
}

/** Shells registered under `<job dir>/session/shells/` that are still alive; dead ones are removed. */
export function shellUsage(jobDir: string): Usage {
  const dir = join(jobDir, SHELLS_DIR);
  if (!existsSync(dir)) return { ready: true, inUse: false };
  let alive = 0;
  for (const f of readdirSync(dir)) {
    const pid = Number(f);
    if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) alive++;
    else rmSync(join(dir, f), { force: true });
  }
  return { ready: true, inUse: alive > 0 };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export interface WatchOptions {
  probe: () => Promise<Usage> | Usage;
  idleMs: number;
  pollMs: number;
  /** The session answered for the first time. */
  onReady: () => Promise<void> | void;
  /** No use for `idleMs`: end the session. Called once. */
  onIdle: (idleForMs: number) => void;
  now?: () => number;
}

/**
 * Polls `probe` every `pollMs` until the session has been unused for `idleMs`: not in use, and
 * neither its own `lastActivity` nor the last poll that saw it in use (nor its start) is newer.
 * Returns a function that stops watching.
 */
export function watchIdle(o: WatchOptions): () => void {
  const now = o.now ?? Date.now;
  let lastUsed = now();
  let ready = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const tick = async () => {
    const u = await o.probe();
    if (stopped) return;
    if (u.ready && !ready) {
      ready = true;
      lastUsed = now();
      await o.onReady();
    }
    if (u.inUse) lastUsed = now();
    if (u.lastActivity !== undefined) lastUsed = Math.max(lastUsed, u.lastActivity);
    const idle = now() - lastUsed;
    if (ready && !u.inUse && idle >= o.idleMs) {
      stopped = true;
      return o.onIdle(idle);
    }
    timer = setTimeout(() => void tick(), o.pollMs);
  };
  timer = setTimeout(() => void tick(), Math.min(o.pollMs, 500));
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}

/** How often a session is looked at: often enough for the idle timeout, at most every 10 s. */
export const pollMsFor = (idleMs: number): number => Math.max(250, Math.min(10_000, idleMs / 4));

export interface LiveSessionOptions {
  prepared: PreparedSession;
  run: string;
  attempt: number;
  jobDir: string;
  store: ObjectStore | undefined;
  log: (line: string) => void;
  /** Called once, when the session has been idle for its timeout. */
  end: (why: string) => void;
}

/**
 * Watches a started session: publishes its endpoint once it answers, ends it when idle. Returns a
 * function that stops watching and removes the endpoint (the session is over).
 */
export function superviseSession(o: LiveSessionOptions): () => Promise<void> {
  const { prepared: p } = o;
  const idleSec = p.spec.idleTimeoutSec ?? DEFAULT_IDLE_SEC;
  const idleMs = idleSec * 1000;
  let published = false;
  const endpoint: SessionEndpoint = {
    run: o.run,
    attempt: o.attempt,
    kind: p.spec.kind,
    host: hostname(),
    ...(p.port ? { port: p.port } : {}),
    ...(p.token ? { token: p.token } : {}),
    jobDir: o.jobDir,
    idleTimeoutSec: idleSec,
    startedAt: new Date().toISOString(),
  };
  const stop = watchIdle({
    idleMs,
    pollMs: pollMsFor(idleMs),
    probe: () =>
      p.spec.kind === SessionKind.Notebook ? notebookUsage(p.port!, p.token!) : shellUsage(o.jobDir),
    onReady: async () => {
      try {
        await o.store?.put(sessionKey(o.run), JSON.stringify(endpoint, null, 2) + '\n');
        published = true;
        o.log(
          `${p.spec.kind} session ready${p.port ? ` on 127.0.0.1:${p.port}` : ''}; it ends after ${idleSec} s unused`,
        );
      } catch (e) {
        o.log(`cannot publish the session endpoint: ${(e as Error).message}`);
      }
    },
    onIdle: (ms) =>
      o.end(`the session was unused for ${Math.round(ms / 1000)} s (idleTimeoutSec ${idleSec})`),
  });
  return async () => {
    stop();
    if (published) await o.store?.delete([sessionKey(o.run)]).catch(() => undefined);
  };
}
