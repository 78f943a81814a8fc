/**
 * Cloud TPU VMs through the `gcloud` CLI: `gcloud compute tpus tpu-vm create|describe|list|delete`
 * as a typed client for the gcp-tpu adapter. Argument vectors only (never a shell), always
 * `--project --zone --format=json --quiet`, the caller's environment passed through unchanged so
 * the user's own `CLOUDSDK_CONFIG`, account and proxies apply; nothing is read from or copied out
 * of the user's gcloud configuration.
 *
 * What gcloud 528 does and prints (seen with the real gcloud against test/helpers/cloud/fake-tpu-api.ts,
 * which answers as tpu.googleapis.com/v2 does):
 * - describe: stdout the Node JSON. Missing: exit 1 and
 *   `ERROR: (gcloud.compute.tpus.tpu-vm.describe) NOT_FOUND: Resource 'projects/P/locations/Z/nodes/N' was not found`
 *   then a YAML block (`- '@type': type.googleapis.com/google.rpc.ResourceInfo` …).
 * - list: stdout a JSON array (`[]` when none). gcloud follows `nextPageToken` itself. `--filter`
 *   is never sent to the API (ListNodes has no filter field): gcloud applies it to what it got.
 *   Its `labels.K=V` is case-insensitive (`=run-a` matches `RUN-A`) and is turning into a word
 *   match (it warns on stderr that `run-a-2` "currently does not match but will match in the near
 *   future"), so labels are compared exactly here.
 * - create: stderr `Create request issued for: [N]`, `Waiting for operation [projects/P/locations/Z/operations/ID] to complete...`,
 *   dots, `done.`; stdout the operation's response, the Node (with an extra `@type` key). gcloud
 *   polls the operation 1 s after the request, then every 2–3 s growing ×1.4. With `--async`:
 *   stdout the pending Operation `{name, metadata, done: false}`; gcloud 528 has no command to
 *   poll a TPU operation later, so an async create that fails shows only as a node that goes away.
 *   A full zone: exit 1, `...failed.`, then a multi-line
 *   `ERROR: (gcloud.compute.tpus.tpu-vm.create) {\n  "code": 8,\n  "message": "There is no more capacity in the zone \"Z\"; …"\n}`.
 *   Over quota (HTTP 429 on the request itself): exit 1,
 *   `ERROR: (gcloud.compute.tpus.tpu-vm.create) RESOURCE_EXHAUSTED: Quota limit '…' has been exceeded. …`.
 *   An existing name: exit 1, `ERROR: (…create) ALREADY_EXISTS: Resource '…/nodes/N' already exists` + YAML.
 * - delete: stdout the finished Operation (`response: {"@type": "…protobuf.Empty"}`), or with
 *   `--async` the pending one. Missing: NOT_FOUND as for describe.
 * - Labels and metadata are gcloud "dict" flags split on `,` (and a value may hold `=`); a value
 *   holding a comma is passed with gcloud's `^DELIM^` escape (`gcloud topic escaping`).
 */
import { execFile } from 'node:child_process';
import { AdvError, ErrorCode } from '../../errors.js';
import { toolEnv } from '../../internal/child-env.js';

/** `google.cloud.tpu.v2.Node.State`. */
export const TpuNodeState = {
  Unspecified: 'STATE_UNSPECIFIED',
  Creating: 'CREATING',
  Ready: 'READY',
  Restarting: 'RESTARTING',
  Reimaging: 'REIMAGING',
  Deleting: 'DELETING',
  Repairing: 'REPAIRING',
  Stopped: 'STOPPED',
  Stopping: 'STOPPING',
  Starting: 'STARTING',
  Preempted: 'PREEMPTED',
  Terminated: 'TERMINATED',
  Hiding: 'HIDING',
  Hidden: 'HIDDEN',
  Unhiding: 'UNHIDING',
  Unknown: 'UNKNOWN',
} as const;
export type TpuNodeState = (typeof TpuNodeState)[keyof typeof TpuNodeState];

/** One worker host of a slice (`networkEndpoints[i]` is worker i). */
export interface TpuNetworkEndpoint {
  ipAddress: string;
  port?: number;
  accessConfig?: { externalIp?: string };
}

/** A TPU node as the v2 API returns it (the fields the adapter reads; the API has more). */
export interface TpuNode {
  /** The full path: `projects/P/locations/Z/nodes/N`. */
  name: string;
  acceleratorType?: string;
  /** A `TpuNodeState`, or a state this client does not know yet. */
  state: TpuNodeState | (string & {});
  health?: string;
  healthDescription?: string;
  runtimeVersion?: string;
  createTime?: string;
  cidrBlock?: string;
  labels?: Record<string, string>;
  metadata?: Record<string, string>;
  schedulingConfig?: { spot?: boolean; preemptible?: boolean; reserved?: boolean };
  networkEndpoints?: TpuNetworkEndpoint[];
  queuedResource?: string;
  symptoms?: unknown[];
  apiVersion?: string;
  id?: string;
}

/** A long-running operation (what `create`/`delete --async` print). */
export interface TpuOperation {
  name: string;
  done?: boolean;
  metadata?: { target?: string; verb?: string; createTime?: string; endTime?: string };
  error?: { code: number; message: string };
}

export interface TpuCreateOptions {
  name: string;
  zone: string;
  acceleratorType: string;
  runtimeVersion: string;
  spot?: boolean;
  preemptible?: boolean;
  labels?: Record<string, string>;
  metadata?: Record<string, string>;
  /** Return the pending operation at once instead of waiting for the node. */
  async?: boolean;
}

/** The short name of a node (`projects/P/locations/Z/nodes/N` → `N`). */
export const tpuNodeName = (node: Pick<TpuNode, 'name'>): string =>
  node.name.slice(node.name.lastIndexOf('/') + 1);

/** Worker addresses in worker order: external IPs, or the internal ones with `internal`. */
export const tpuWorkerAddresses = (node: TpuNode, opts: { internal?: boolean } = {}): string[] =>
  (node.networkEndpoints ?? []).map((e) =>
    opts.internal ? e.ipAddress : (e.accessConfig?.externalIp ?? e.ipAddress),
  );

/** Why a gcloud call failed (stable values: the adapter branches on them). */
export const GcloudFailure = {
  /** No `gcloud` executable. */
  NotInstalled: 'NotInstalled',
  /** It ran past its time limit and was killed. */
  Timeout: 'Timeout',
  NotFound: 'NotFound',
  AlreadyExists: 'AlreadyExists',
  /** The zone has no capacity for the slice now. */
  Capacity: 'Capacity',
  /** A quota (chips per zone/region, or requests per minute) is used up. */
  Quota: 'Quota',
  /** The request is wrong (an unknown accelerator type or version, a bad name): a person must fix it. */
  InvalidArgument: 'InvalidArgument',
  /** No credentials, or no permission on the project: a person must fix it. */
  Auth: 'Auth',
  /** Exit 0 but stdout is not the JSON expected. */
  BadOutput: 'BadOutput',
  Failed: 'Failed',
} as const;
export type GcloudFailure = (typeof GcloudFailure)[keyof typeof GcloudFailure];

export interface GcloudErrorData {
  reason: GcloudFailure;
  /** The gcloud command, e.g. `gcloud.compute.tpus.tpu-vm.create`. */
  command?: string;
  exitCode?: number;
  /** The API's status word (`NOT_FOUND`, `RESOURCE_EXHAUSTED`, …) when gcloud printed one. */
  status?: string;
  /** The gRPC code of a failed operation (8 = RESOURCE_EXHAUSTED). */
  grpcCode?: number;
  zone?: string;
  node?: string;
}

/** A gcloud call that failed; the message is gcloud's `ERROR: (…)` line, not its whole stderr. */
export class GcloudError extends AdvError<GcloudErrorData> {
  constructor(message: string, data: GcloudErrorData, options?: { cause?: unknown }) {
    super(ErrorCode.BackendError, message, data, options);
  }
}

type ErrorDetails = Partial<Omit<GcloudErrorData, 'reason'>>;

/** The zone has no room for the slice now (operation error code 8, "no more capacity"). */
export class TpuCapacityError extends GcloudError {
  constructor(message: string, data: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(message, { ...data, reason: GcloudFailure.Capacity }, options);
  }
}

/** A TPU quota is used up (HTTP 429 RESOURCE_EXHAUSTED "Quota limit …", or a rate quota). */
export class TpuQuotaError extends GcloudError {
  constructor(message: string, data: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(message, { ...data, reason: GcloudFailure.Quota }, options);
  }
}

/** A node of that name exists already in the zone. */
export class TpuAlreadyExistsError extends GcloudError {
  constructor(message: string, data: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(message, { ...data, reason: GcloudFailure.AlreadyExists }, options);
  }
}

export interface GcloudResult {
  /** The exit code; null when killed by a signal. */
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut?: boolean;
  /** The executable was not found. */
  missing?: boolean;
}

/** Runs gcloud with an argument vector (injected in tests; the default uses `execFile`). */
export type GcloudRunner = (
  args: string[],
  opts: { timeoutMs: number; env: NodeJS.ProcessEnv },
) => Promise<GcloudResult>;

/**
 * The default runner: `execFile(gcloud, args)`, no shell, SIGTERM at the time limit, stdin closed
 * (without `--quiet`, `delete` asks "Do you want to continue (Y/n)?" and waits on an open stdin
 * forever).
 */
export const execGcloud =
  (executable = 'gcloud'): GcloudRunner =>
  (args, { timeoutMs, env }) =>
    new Promise((resolve) => {
      const child = execFile(
        executable,
        args,
        { env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8', windowsHide: true },
        (err, stdout, stderr) => {
          const e = err as (NodeJS.ErrnoException & { killed?: boolean; signal?: string | null }) | null;
          if (e?.code === 'ENOENT') return resolve({ code: null, stdout, stderr, missing: true });
          const code = !e ? 0 : typeof e.code === 'number' ? e.code : null;
          resolve({ code, stdout, stderr, ...(e?.killed && code === null ? { timedOut: true } : {}) });
        },
      );
      // Should anything prompt, it reads EOF instead of waiting forever.
      child.stdin?.end();
    });

/** Node names the API takes (RFC 1035 labels) and zone names (`us-central2-b`). */
const NODE_NAME = /^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$/;
const ZONE = /^[a-z][a-z0-9-]*[a-z0-9]$/;

/** gRPC code → status word, for the JSON form of operation errors. */
const GRPC_STATUS: Record<number, string> = {
  1: 'CANCELLED',
  2: 'UNKNOWN',
  3: 'INVALID_ARGUMENT',
  4: 'DEADLINE_EXCEEDED',
  5: 'NOT_FOUND',
  6: 'ALREADY_EXISTS',
  7: 'PERMISSION_DENIED',
  8: 'RESOURCE_EXHAUSTED',
  9: 'FAILED_PRECONDITION',
  10: 'ABORTED',
  13: 'INTERNAL',
  14: 'UNAVAILABLE',
};

/** What gcloud's stderr says went wrong: the one `ERROR: (…)` statement, parsed. */
export interface GcloudErrorLine {
  /** `ERROR: (command) STATUS: message`, on one line (an operation's JSON error is rewritten so). */
  line: string;
  command: string;
  status?: string;
  grpcCode?: number;
  message: string;
}

/**
 * Finds gcloud's error statement in its stderr: the last `ERROR: (command) …` line, without the
 * YAML details gcloud prints under it; a failed operation's multi-line JSON (`{"code": 8,
 * "message": …}`) is read and written as `STATUS: message`. Undefined when there is none.
 */
export function parseGcloudError(stderr: string): GcloudErrorLine | undefined {
  const at = [...stderr.matchAll(/^ERROR: \(/gm)].pop()?.index;
  if (at === undefined) return undefined;
  const rest = stderr.slice(at);
  const m = /^ERROR: \(([^)]*)\) ?/.exec(rest);
  if (!m) return undefined;
  const command = m[1]!;
  const body = rest.slice(m[0].length);
  if (body.startsWith('{')) {
    const json = readJsonPrefix(body) as { code?: unknown; message?: unknown } | undefined;
    if (json && typeof json.message === 'string') {
      const grpcCode = typeof json.code === 'number' ? json.code : undefined;
      const status = grpcCode === undefined ? undefined : (GRPC_STATUS[grpcCode] ?? `CODE_${grpcCode}`);
      const message = json.message;
      return {
        line: `ERROR: (${command}) ${status ? `${status}: ` : ''}${message}`,
        command,
        ...(status ? { status } : {}),
        ...(grpcCode !== undefined ? { grpcCode } : {}),
        message,
      };
    }
  }
  const first = body.split('\n', 1)[0]!.trimEnd();
  const s = /^([A-Z][A-Z_]+): (.*)$/.exec(first);
  return {
    line: `ERROR: (${command}) ${first}`,
    command,
    ...(s ? { status: s[1] } : {}),
    message: s ? s[2]! : first,
  };
}

/** The JSON value at the start of `text` (gcloud prints text after it), or undefined. */
function readJsonPrefix(text: string): unknown {
  for (let end = text.indexOf('\n}'); end >= 0; end = text.indexOf('\n}', end + 1)) {
    try {
      return JSON.parse(text.slice(0, end + 2));
    } catch {
      // Not the closing brace of the outer object yet.
    }
  }
  try {
    return JSON.parse(text.trim());
  } catch {
    return undefined;
  }
}

/** Sorts a parsed error into a reason (and so an error class). */
export function classifyGcloudError(
  e: Pick<GcloudErrorLine, 'status' | 'grpcCode' | 'message'>,
): GcloudFailure {
  if (e.status === 'NOT_FOUND') return GcloudFailure.NotFound;
  if (e.status === 'ALREADY_EXISTS') return GcloudFailure.AlreadyExists;
  if (e.status === 'INVALID_ARGUMENT' || e.grpcCode === 3) return GcloudFailure.InvalidArgument;
  if (
    e.status === 'PERMISSION_DENIED' ||
    e.status === 'UNAUTHENTICATED' ||
    /active account selected|gcloud auth login|reauthenticat|credentials? (?:have|has) expired/i.test(
      e.message,
    )
  )
    return GcloudFailure.Auth;
  if (/\bquota\b|requests per minute/i.test(e.message)) return GcloudFailure.Quota;
  if (e.grpcCode === 8 || e.status === 'RESOURCE_EXHAUSTED' || /no more capacity|stockout/i.test(e.message))
    return GcloudFailure.Capacity;
  return GcloudFailure.Failed;
}

/**
 * A dict flag's value (`--labels`, `--metadata`): `k=v,k2=v2`, or when a key or value holds a
 * comma, gcloud's `^D^k=v…` form with a delimiter D found in none of them.
 */
export function encodeDictFlag(entries: Record<string, string>): string {
  const pairs = Object.entries(entries);
  for (const [k] of pairs)
    if (!k || k.includes('='))
      throw new TypeError(`gcloud cannot pass the key ${JSON.stringify(k)} (empty, or holding "=")`);
  const joined = (d: string) => pairs.map(([k, v]) => `${k}=${v}`).join(d);
  const plain = joined(',');
  const clash = (d: string) => pairs.some(([k, v]) => k.includes(d) || v.includes(d));
  if (!clash(',') && !plain.startsWith('^')) return plain;
  for (const d of [';', '|', '~', '@', '#', '%', ':', '+']) if (!clash(d)) return `^${d}^${joined(d)}`;
  for (let i = 0; ; i++) {
    const d = `~adv${i}~`;
    if (!clash(d)) return `^${d}^${joined(d)}`;
    if (i > 100) throw new TypeError('gcloud cannot pass these labels or metadata: no free delimiter');
  }
}

export interface GcloudTpuOptions {
  project: string;
  /** Spawns gcloud; default `execGcloud('gcloud')`. */
  run?: GcloudRunner;
  /**
   * The environment gcloud runs in; default `toolEnv('gcloud')`: the controller's own without its
   * credentials (the user's CLOUDSDK_CONFIG applies).
   */
  env?: NodeJS.ProcessEnv;
  /** describe, list, and `--async` create/delete. Default 60 s. */
  callTimeoutMs?: number;
  /** A create or delete that waits for its operation. Default 30 min (a v4 slice takes minutes). */
  waitTimeoutMs?: number;
}

/** `gcloud compute tpus tpu-vm` for one project. */
export class GcloudTpu {
  private readonly run: GcloudRunner;
  private readonly env: NodeJS.ProcessEnv;
  private readonly callTimeoutMs: number;
  private readonly waitTimeoutMs: number;

  constructor(private readonly opts: GcloudTpuOptions) {
    this.run = opts.run ?? execGcloud();
    this.env = opts.env ?? toolEnv('gcloud');
    this.callTimeoutMs = opts.callTimeoutMs ?? 60_000;
    this.waitTimeoutMs = opts.waitTimeoutMs ?? 30 * 60_000;
  }

  /**
   * Creates a node. Waits until its operation is done and resolves to the node (READY), or with
   * `async` resolves to the pending operation. Throws TpuCapacityError, TpuQuotaError,
   * TpuAlreadyExistsError or GcloudError.
   */
  create(o: TpuCreateOptions & { async: true }): Promise<TpuOperation>;
  create(o: TpuCreateOptions & { async?: false }): Promise<TpuNode>;
  async create(o: TpuCreateOptions): Promise<TpuNode | TpuOperation> {
    if (o.spot && o.preemptible) throw new TypeError('a TPU node is spot or preemptible, not both');
    const args = [
      'create',
      o.name,
      `--accelerator-type=${o.acceleratorType}`,
      `--version=${o.runtimeVersion}`,
      ...(o.spot ? ['--spot'] : []),
      ...(o.preemptible ? ['--preemptible'] : []),
      ...(o.labels && Object.keys(o.labels).length ? [`--labels=${encodeDictFlag(o.labels)}`] : []),
      ...(o.metadata && Object.keys(o.metadata).length ? [`--metadata=${encodeDictFlag(o.metadata)}`] : []),
      ...(o.async ? ['--async'] : []),
    ];
    const out = await this.call(
      'create',
      o.zone,
      args,
      o.async ? this.callTimeoutMs : this.waitTimeoutMs,
      o.name,
    );
    if (o.async) return expectObject<TpuOperation>(out, 'gcloud.compute.tpus.tpu-vm.create', 'name');
    const { '@type': _type, ...node } = expectObject<TpuNode & { '@type'?: string }>(
      out,
      'gcloud.compute.tpus.tpu-vm.create',
      'name',
    );
    return node;
  }

  /** The node, or undefined when there is none of that name (any other failure throws). */
  async describe(zone: string, name: string): Promise<TpuNode | undefined> {
    try {
      const out = await this.call('describe', zone, ['describe', name], this.callTimeoutMs, name);
      return expectObject<TpuNode>(out, 'gcloud.compute.tpus.tpu-vm.describe', 'name');
    } catch (e) {
      if (e instanceof GcloudError && e.data.reason === GcloudFailure.NotFound) return undefined;
      throw e;
    }
  }

  /**
   * The nodes of one zone, only those carrying every label given (exact matches). One gcloud call;
   * a failure throws, never an empty list.
   */
  async list(zone: string, labels: Record<string, string> = {}): Promise<TpuNode[]> {
    const out = await this.call('list', zone, ['list', ...labelFilter(labels)], this.callTimeoutMs);
    if (!Array.isArray(out))
      throw new GcloudError(`gcloud.compute.tpus.tpu-vm.list printed no JSON array`, {
        reason: GcloudFailure.BadOutput,
        command: 'gcloud.compute.tpus.tpu-vm.list',
        zone,
      });
    const nodes = out as TpuNode[];
    return nodes.filter((n) => Object.entries(labels).every(([k, v]) => n.labels?.[k] === v));
  }

  /**
   * Deletes a node: waits for the operation, or with `async` returns once it is accepted. A node
   * that is not there is not an error (resolves to undefined); else resolves to the operation.
   */
  async delete(
    zone: string,
    name: string,
    opts: { async?: boolean } = {},
  ): Promise<TpuOperation | undefined> {
    try {
      const args = ['delete', name, ...(opts.async ? ['--async'] : [])];
      const out = await this.call(
        'delete',
        zone,
        args,
        opts.async ? this.callTimeoutMs : this.waitTimeoutMs,
        name,
      );
      return out && typeof out === 'object' ? (out as TpuOperation) : undefined;
    } catch (e) {
      if (e instanceof GcloudError && e.data.reason === GcloudFailure.NotFound) return undefined;
      throw e;
    }
  }

  /** Runs one `tpu-vm` verb and returns its parsed stdout, or throws the typed error. */
  private async call(
    verb: string,
    zone: string,
    args: string[],
    timeoutMs: number,
    node?: string,
  ): Promise<unknown> {
    const command = `gcloud.compute.tpus.tpu-vm.${verb}`;
    // Checked here because a positional starting with `-` would be read by gcloud as a flag.
    const bad = !ZONE.test(zone)
      ? `zone ${JSON.stringify(zone)}`
      : node && !NODE_NAME.test(node)
        ? `node name ${JSON.stringify(node)}`
        : '';
    if (bad)
      throw new GcloudError(
        `${command}: invalid ${bad} (a TPU node name is [a-z]([-a-z0-9]*[a-z0-9])?, at most 63 characters)`,
        {
          reason: GcloudFailure.InvalidArgument,
          command,
          zone,
          ...(node ? { node } : {}),
        },
      );
    const argv = [
      'compute',
      'tpus',
      'tpu-vm',
      ...args,
      `--zone=${zone}`,
      `--project=${this.opts.project}`,
      '--format=json',
      '--quiet',
    ];
    const r = await this.run(argv, { timeoutMs, env: this.env });
    const where = { command, zone, ...(node ? { node } : {}) };
    if (r.missing)
      throw new GcloudError('gcloud is not installed (no `gcloud` on PATH): install the Google Cloud SDK', {
        reason: GcloudFailure.NotInstalled,
        ...where,
      });
    if (r.timedOut)
      throw new GcloudError(
        `${command} in zone ${zone} did not finish within ${Math.round(timeoutMs / 1000)} s`,
        {
          reason: GcloudFailure.Timeout,
          ...where,
        },
      );
    if (r.code !== 0) throw errorOf(r, where);
    if (!r.stdout.trim()) return undefined;
    try {
      return JSON.parse(r.stdout) as unknown;
    } catch (e) {
      throw new GcloudError(
        `${command} printed no JSON: ${r.stdout.slice(0, 200)}`,
        { reason: GcloudFailure.BadOutput, ...where },
        { cause: e },
      );
    }
  }
}

/** The typed error for a gcloud exit other than 0. */
function errorOf(r: GcloudResult, where: { command: string; zone: string; node?: string }): GcloudError {
  const parsed = parseGcloudError(r.stderr);
  const exitCode = r.code ?? undefined;
  if (!parsed) {
    const last = r.stderr.trim().split('\n').pop() ?? '';
    return new GcloudError(`${where.command} exited ${r.code ?? 'on a signal'}${last ? `: ${last}` : ''}`, {
      reason: GcloudFailure.Failed,
      ...where,
      ...(exitCode !== undefined ? { exitCode } : {}),
    });
  }
  const reason = classifyGcloudError(parsed);
  const data: GcloudErrorData = {
    reason,
    ...where,
    command: parsed.command || where.command,
    ...(exitCode !== undefined ? { exitCode } : {}),
    ...(parsed.status ? { status: parsed.status } : {}),
    ...(parsed.grpcCode !== undefined ? { grpcCode: parsed.grpcCode } : {}),
  };
  const message =
    reason === GcloudFailure.Capacity && !parsed.line.includes(where.zone)
      ? `${parsed.line} (zone ${where.zone})`
      : parsed.line;
  if (reason === GcloudFailure.Capacity) return new TpuCapacityError(message, data);
  if (reason === GcloudFailure.Quota) return new TpuQuotaError(message, data);
  if (reason === GcloudFailure.AlreadyExists) return new TpuAlreadyExistsError(message, data);
  return new GcloudError(message, data);
}

/**
 * `--filter=labels.K=V AND …` for the labels gcloud's filter language can hold as plain words
 * (GCP label keys and values are `[a-z0-9_-]`); it only trims gcloud's output, as gcloud's `=` is
 * a loose word match — `list` compares every label exactly afterwards.
 */
function labelFilter(labels: Record<string, string>): string[] {
  const terms = Object.entries(labels)
    .filter(([k, v]) => /^[a-z][a-z0-9_-]*$/.test(k) && /^[a-z0-9_-]+$/.test(v))
    .map(([k, v]) => `labels.${k}=${v}`);
  return terms.length ? [`--filter=${terms.join(' AND ')}`] : [];
}

/** Stdout parsed as an object with `key`, or a BadOutput error. */
function expectObject<T>(out: unknown, command: string, key: string): T {
  if (out && typeof out === 'object' && !Array.isArray(out) && key in out) return out as T;
  throw new GcloudError(
    `${command} printed no ${key === 'name' ? 'resource' : key}: ${JSON.stringify(out)?.slice(0, 200)}`,
    {
      reason: GcloudFailure.BadOutput,
      command,
    },
  );
}
