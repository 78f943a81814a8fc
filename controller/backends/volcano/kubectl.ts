/**
 * The user's `kubectl` as a typed client for the volcano adapter: argument vectors only (never a
 * shell), always `-o json`, with the Backend's kubeconfig and context, so whatever the user's
 * kubeconfig does to authenticate (exec plugins for EKS/GKE, OIDC, client certificates) applies
 * unchanged; nothing is read out of the kubeconfig here.
 *
 * Why kubectl and not `@kubernetes/client-node`: the people who run a lab's cluster already have
 * a kubectl context that works (their auth plugin, their proxy), and "does `kubectl get vcjob`
 * work for the controller's user?" is the one check they know how to make. A second client would
 * need its own support for every auth plugin.
 *
 * What kubectl 1.32 prints (seen with the real kubectl against test/helpers/k8s/fake-k8s.ts, which
 * answers as kube-apiserver does): an API error is one `Error from server (Reason): message` line
 * on stderr per failed object, with `error when creating "STDIN": ` inside it for `create -f -`;
 * an admission webhook's denial has no `(Reason)` (`Error from server: … admission webhook
 * "validatejob.volcano.sh" denied the request: …`; newer servers say 403 Forbidden); transport and
 * kubeconfig failures are `error: …`, `Unable to connect to the server: …` or `The connection to
 * the server H:P was refused …`, and a bad token `error: You must be logged in to the server
 * (Unauthorized)`. `create -f -` of a List creates each item in turn: an existing one is an
 * AlreadyExists line and exit 1 while the others are created; with `-o json` it prints one JSON
 * document per created object (not a List), so `-o name` is used. kubectl sends a kubeconfig's
 * bearer token over TLS only, and caches discovery under `~/.kube/cache` (`KUBECACHEDIR`).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { AdvError, ErrorCode } from '../../errors.js';
import { toolEnv } from '../../internal/child-env.js';

/** Why a kubectl call failed (stable values: the adapter branches on them). */
export const KubectlFailure = {
  NotInstalled: 'NotInstalled',
  Timeout: 'Timeout',
  NotFound: 'NotFound',
  AlreadyExists: 'AlreadyExists',
  Conflict: 'Conflict',
  /** The server refused the request as invalid (an admission webhook, a schema): a person must fix it. */
  Invalid: 'Invalid',
  /** No credentials, or no permission (RBAC): a person must fix it. */
  Auth: 'Auth',
  /** The API server cannot be reached. */
  Unreachable: 'Unreachable',
  BadOutput: 'BadOutput',
  Failed: 'Failed',
} as const;
export type KubectlFailure = (typeof KubectlFailure)[keyof typeof KubectlFailure];

/** A kubectl call that failed; the message is kubectl's error line(s), not its whole stderr. */
export class KubectlError extends AdvError<{ reason: KubectlFailure; exitCode?: number }> {
  constructor(message: string, reason: KubectlFailure, exitCode?: number) {
    super(ErrorCode.BackendError, message, { reason, ...(exitCode !== undefined ? { exitCode } : {}) });
  }
  get reason(): KubectlFailure {
    return this.data!.reason;
  }
}

export interface KubectlResult {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut?: boolean;
  missing?: boolean;
}

/** Runs kubectl with an argument vector and an optional stdin (injected in tests). */
export type KubectlRunner = (
  args: string[],
  opts: { timeoutMs: number; env: NodeJS.ProcessEnv; input?: string },
) => Promise<KubectlResult>;

/** The default runner: `spawn(kubectl, args)`, no shell, SIGTERM at the time limit. */
export const execKubectl =
  (executable = 'kubectl'): KubectlRunner =>
  (args, { timeoutMs, env, input }) =>
    new Promise((resolve) => {
      const child = spawn(executable, args, { env, stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGTERM');
      }, timeoutMs);
      child.stdout.on('data', (b: Buffer) => out.push(b));
      child.stderr.on('data', (b: Buffer) => err.push(b));
      child.stdin.on('error', () => {});
      child.stdin.end(input ?? '');
      const done = (r: KubectlResult) => {
        clearTimeout(timer);
        resolve(r);
      };
      child.on('error', (e: NodeJS.ErrnoException) =>
        done({
          code: null,
          stdout: '',
          stderr: e.message,
          ...(e.code === 'ENOENT' ? { missing: true } : {}),
        }),
      );
      child.on('close', (code) =>
        done({
          code,
          stdout: Buffer.concat(out).toString('utf8'),
          stderr: Buffer.concat(err).toString('utf8'),
          ...(timedOut ? { timedOut: true } : {}),
        }),
      );
    });

/** One `Error from server (Reason): message` line of kubectl's stderr, parsed. */
export interface ServerError {
  reason: string;
  message: string;
  /** The object named in the message (`jobs.batch.volcano.sh "NAME"` → `NAME`). */
  name?: string;
  /** Its resource (`jobs.batch.volcano.sh`, `secrets`). */
  resource?: string;
}

/** Every `Error from server (…)` line of kubectl's stderr. */
export function parseServerErrors(stderr: string): ServerError[] {
  const out: ServerError[] = [];
  for (const line of stderr.split('\n')) {
    const m = /^Error from server(?: \(([A-Za-z]+)\))?: (.*)$/.exec(line.trim());
    if (!m) continue;
    const message = m[2]!.replace(/^error when [a-z]+ "[^"]*": /, '');
    const named = /^([a-z0-9.-]+) "([^"]+)"/.exec(message);
    out.push({
      reason: m[1] ?? 'Failed',
      message,
      ...(named ? { resource: named[1]!, name: named[2]! } : {}),
    });
  }
  return out;
}

/** Sorts a failed call into a reason from what kubectl printed. */
export function classifyKubectl(stderr: string): KubectlFailure {
  const server = parseServerErrors(stderr);
  const reasons = new Set(server.map((e) => e.reason));
  if (reasons.has('NotFound') && reasons.size === 1) return KubectlFailure.NotFound;
  if (reasons.has('AlreadyExists') && reasons.size === 1) return KubectlFailure.AlreadyExists;
  if (reasons.has('Conflict')) return KubectlFailure.Conflict;
  if (
    reasons.has('Forbidden') ||
    reasons.has('Unauthorized') ||
    /\(Unauthorized\)|must be logged in|forbidden/i.test(stderr)
  )
    return KubectlFailure.Auth;
  if (reasons.has('Invalid') || reasons.has('BadRequest') || /denied the request/.test(stderr))
    return KubectlFailure.Invalid;
  if (
    /Unable to connect to the server|connection to the server .* was refused|dial tcp|no such host|i\/o timeout|TLS handshake timeout|ServiceUnavailable|\(InternalError\)|Timeout/.test(
      stderr,
    )
  )
    return KubectlFailure.Unreachable;
  return KubectlFailure.Failed;
}

/** A klog line's header (`E1124 12:06:28.094241   20626 memcache.go:265] `): kubectl's own logging. */
const KLOG = /^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]]*\] ?/;

/**
 * kubectl's error text, trimmed to what says what went wrong: its own lines (`The connection to
 * the server … was refused`, `Error from server …`), not the klog lines its client libraries log on
 * the way — an unreachable server logs the same one six times before the line that says so. Only
 * where there is nothing else, the last klog error, without its header.
 */
export function errorText(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const own = lines.filter((l) => !KLOG.test(l));
  const chosen = own.length
    ? own
    : lines
        .filter((l) => /^[EF]/.test(l))
        .slice(-1)
        .map((l) => l.replace(KLOG, ''));
  return [...new Set(chosen)].join('; ').slice(0, 2000) || 'kubectl failed without a message';
}

/** A Kubernetes object as kubectl prints it (the fields the adapter reads; the API has more). */
export interface K8sObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    creationTimestamp?: string;
    deletionTimestamp?: string;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  data?: Record<string, string>;
}

export interface KubectlOptions {
  kubeconfig?: string;
  context?: string;
  /** Default `kubectl` on PATH. */
  executable?: string;
  run?: KubectlRunner;
  /**
   * The environment kubectl runs in (its auth plugins read it). Default: `toolEnv('kubectl')`, the
   * controller's own environment without its credentials (internal/child-env.ts).
   */
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
  /**
   * The lists under way this client shares with the other clients of its environment (one
   * `ListsUnderWay` per environment, from `BackendContext.shared`: see `listsKey`). Default: its own.
   */
  lists?: ListsUnderWay;
}

/** What `create` made (`kind.group/name`, as `-o name` prints it) and what existed already. */
export interface CreateResult {
  created: string[];
  existing: { resource: string; name: string }[];
}

/** Lists under way, by executable and argv: each lives only while under way. */
export class ListsUnderWay {
  readonly byArgs = new Map<string, Promise<K8sObject[]>>();

  /** With the controller: a list still under way is forgotten (its callers keep their answer). */
  close(): void {
    this.byArgs.clear();
  }
}

/**
 * The `BackendContext.shared` key of the lists under way that kubectl clients of environment `env`
 * share: by its contents, as each client builds its own copy of the environment.
 */
export function listsKey(env: NodeJS.ProcessEnv): string {
  const entries = Object.entries(env).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `volcano/kubectl-lists/${createHash('sha256').update(JSON.stringify(entries)).digest('hex')}`;
}

export class Kubectl {
  private readonly run: KubectlRunner;
  private readonly timeoutMs: number;
  /** Lists under way that a caller asking the same shares (see `KubectlOptions.lists`). */
  private readonly lists: Map<string, Promise<K8sObject[]>>;
  private readonly env: NodeJS.ProcessEnv;

  constructor(private readonly opts: KubectlOptions = {}) {
    this.run = opts.run ?? execKubectl(opts.executable);
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.env = opts.env ?? toolEnv('kubectl');
    this.lists = opts.lists?.byArgs ?? new Map();
  }

  /** The flags every call starts with. */
  private base(namespace?: string, timeout = true): string[] {
    return [
      ...(this.opts.kubeconfig ? ['--kubeconfig', this.opts.kubeconfig] : []),
      ...(this.opts.context ? ['--context', this.opts.context] : []),
      ...(namespace ? ['--namespace', namespace] : []),
      ...(timeout ? ['--request-timeout', `${Math.ceil(this.timeoutMs / 1000)}s`] : []),
    ];
  }

  /** Runs kubectl; throws a `KubectlError` unless it exits 0 (or `ok` accepts the failure). */
  private async call(
    args: string[],
    opts: { input?: string; ok?: (r: KubectlResult) => boolean } = {},
  ): Promise<KubectlResult> {
    const r = await this.run(args, {
      timeoutMs: this.timeoutMs + 5_000,
      env: this.env,
      ...(opts.input !== undefined ? { input: opts.input } : {}),
    });
    if (r.missing)
      throw new KubectlError(
        'kubectl is not installed (or not on PATH) on the controller’s machine: install it, or set the Backend’s volcano.kubeconfig and PATH',
        KubectlFailure.NotInstalled,
      );
    if (r.timedOut)
      throw new KubectlError(
        `kubectl ${args.find((a) => !a.startsWith('-'))} timed out`,
        KubectlFailure.Timeout,
      );
    if (r.code === 0 || opts.ok?.(r)) return r;
    throw new KubectlError(errorText(r.stderr), classifyKubectl(r.stderr), r.code ?? undefined);
  }

  private parse<T>(stdout: string, what: string): T {
    try {
      return JSON.parse(stdout) as T;
    } catch {
      // Never the output itself in the message: it may hold a Secret's data.
      throw new KubectlError(
        `kubectl ${what} printed ${stdout.length} bytes that are not one JSON document`,
        KubectlFailure.BadOutput,
      );
    }
  }

  /**
   * Creates objects in one call (`create -f -` of a List). Objects that exist already are not an
   * error: they are returned in `existing`, so a caller can adopt them by name. (`-o name`: with
   * `-o json` kubectl prints one JSON document per object, Secrets' data included.)
   */
  async create(namespace: string, objects: readonly object[]): Promise<CreateResult> {
    const input = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects });
    const r = await this.call([...this.base(namespace), 'create', '-f', '-', '-o', 'name'], {
      input,
      // Exit 1 with only AlreadyExists errors: the rest was created.
      ok: (res) => {
        const errs = parseServerErrors(res.stderr);
        return errs.length > 0 && errs.every((e) => e.reason === 'AlreadyExists');
      },
    });
    const existing = parseServerErrors(r.stderr)
      .filter((e) => e.reason === 'AlreadyExists' && e.name)
      .map((e) => ({ resource: e.resource ?? '', name: e.name! }));
    return { created: r.stdout.split('\n').filter(Boolean), existing };
  }

  /** One object, or undefined when it does not exist. */
  async get(namespace: string | undefined, resource: string, name: string): Promise<K8sObject | undefined> {
    const r = await this.call([...this.base(namespace), 'get', resource, name, '-o', 'json'], {
      ok: (res) => classifyKubectl(res.stderr) === KubectlFailure.NotFound,
    });
    return r.code === 0 ? this.parse<K8sObject>(r.stdout, 'get') : undefined;
  }

  /**
   * Every object of the given resources that carries the label selector: ONE kubectl call. The
   * same list asked while one is under way (several Backends in a namespace, polled in the same
   * pass) shares that call's answer instead of starting another. Callers must not modify it.
   */
  list(namespace: string, resources: readonly string[], selector: string): Promise<K8sObject[]> {
    const args = [...this.base(namespace), 'get', resources.join(','), '-l', selector, '-o', 'json'];
    const key = JSON.stringify([this.opts.executable ?? 'kubectl', args]);
    const underWay = this.lists.get(key);
    if (underWay) return underWay;
    const p = this.call(args)
      .then((r) => {
        const list = this.parse<{ items?: K8sObject[] }>(r.stdout, 'get');
        if (!Array.isArray(list.items))
          throw new KubectlError('kubectl get printed no items', KubectlFailure.BadOutput);
        return list.items;
      })
      .finally(() => this.lists.delete(key));
    this.lists.set(key, p);
    return p;
  }

  /**
   * Deletes objects (`resource/name`), missing ones being no error; does not wait for them to be
   * gone (pods get their grace period).
   */
  async delete(namespace: string, refs: readonly string[]): Promise<void> {
    if (!refs.length) return;
    await this.call([...this.base(namespace), 'delete', ...refs, '--ignore-not-found', '--wait=false']);
  }

  /** The last `tail` lines of a pod's output. */
  async logs(namespace: string, pod: string, tail: number): Promise<string> {
    const r = await this.call([
      ...this.base(namespace),
      'logs',
      pod,
      '--tail',
      String(tail),
      '--all-containers',
    ]);
    return r.stdout;
  }

  /** `kubectl logs -f`: the pod's output as it comes, until the pod ends or `signal` aborts. */
  async *follow(namespace: string, pod: string, signal?: AbortSignal): AsyncIterable<string> {
    const child = spawn(
      this.opts.executable ?? 'kubectl',
      [...this.base(namespace, false), 'logs', pod, '-f', '--all-containers'],
      {
        env: this.env,
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    const stop = () => child.kill('SIGTERM');
    signal?.addEventListener('abort', stop, { once: true });
    try {
      child.stdout.setEncoding('utf8');
      for await (const chunk of child.stdout) yield chunk as string;
    } finally {
      signal?.removeEventListener('abort', stop);
      stop();
    }
  }
}
