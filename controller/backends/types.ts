/**
 * The backend port. One adapter per backend type, each in its own folder, registered in
 * `registry.ts`. Adapters act only on what the planner's actions ask for.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import pLimit from 'p-limit';
import type { TSchema } from '@sinclair/typebox';
import type { Logger } from 'pino';
import type { SecretSource } from '../secrets.js';
import { ExitReason } from '../../runtime/records.js';
import type { SetupItem, UvSettings } from '../../runtime/setup.js';
import type { ObjectStore } from '../../runtime/store/types.js';
import type { Backend as BackendObject, RunSpec } from '../spec/schema.js';
import type { CheckpointMode } from './checkpoint-mode.js';
import type { SshConnection, SshTransport } from '../transport/ssh.js';
import type { TpuSlice } from './tpu-slice.js';
import { ENDED_STATES, JobState } from '../phase.js';

/** What the controller asks a backend to run: one attempt of one run. */
export interface JobRequest {
  /** Deterministic: `adv-<run>-<attempt>` (shortened with a hash where a backend limits length). */
  jobName: string;
  run: string;
  attempt: number;
  spec: RunSpec;
  /** The argument vector to run inside `adv exec` (from `command` or `entry`). */
  argv: string[];
  /** Code to run: a commit of the specs repo (or `code.repo`), and a sub-path. */
  code: { commit: string; path?: string };
  /** Environment for the workload (contract variables are added by `adv exec`). */
  env: Record<string, string>;
  /**
   * The run's secrets and the store's credentials: also the workload's environment, but delivered
   * out of band — never in a generated script, an argument vector, or a file left after the job
   * started — and masked in its logs by adv exec (`env.ADV_REDACT` names them).
   */
  secretEnv?: Record<string, string>;
  /** The object store for checkpoints, logs and heartbeats (its credentials are in `secretEnv`). */
  store?: { url: string };
  /** The run's `metadata.labels`, for backends whose hosts choose work by them (the pull agent). */
  labels?: Record<string, string>;
  /**
   * What `adv exec` runs before the command, in order: the Backend's steps, the Environment's
   * (modules, variables, steps), the run's (`loop/execute/setup-env.ts`). Delivered as `ADV_SETUP`.
   */
  setup?: SetupItem[];
  /** uv settings for a code tree that is a uv project. Delivered as `ADV_UV`. */
  uv?: UvSettings;
  /** The Environment's container image, for backends that run containers (volcano). */
  image?: string;
}

/** The setup contract's items and uv settings: adv exec's own types (runtime/setup.ts reads them). */
export type { SetupItem, UvSettings };

export interface JobHandle {
  backend: string;
  jobName: string;
  /** The backend's own id: a pid, a SLURM job id, … */
  jobId: string;
}

export interface SubmitResult extends JobHandle {
  /** The job already existed under its name and was adopted, not submitted again. */
  adopted?: boolean;
}

/** Observed states, the same for every backend: the phase words' observed subset (phase.ts). */
export { JobState } from '../phase.js';

export interface ObservedJob {
  jobName: string;
  jobId: string;
  state: JobState;
  /** The backend's own word for it: `PREEMPTED`, `NonZeroExitCode`, `OUT_OF_MEMORY`, … */
  reason?: string;
  message?: string;
  exitCode?: number;
  startedAt?: string;
  finishedAt?: string;
  /**
   * What the job is billed an hour, when the backend knows it better than the Backend's
   * `capabilities.costPerHour` (a rented instance's own rate): the attempt's price follows it.
   */
  pricePerHour?: number;
}

/** What a backend can tell about its free resources right now (for the solver). */
export interface Capacity {
  /** GPUs free to start on now, over the whole backend. */
  freeGpus: number;
  /** SLURM: per partition and GPU type. */
  partitions?: { partition: string; gpuType: string; totalGpus: number; freeGpus: number }[];
  /** A host: each GPU, and whether a process already uses it. */
  gpus?: { index: number; name: string; memoryTotalMiB: number; memoryUsedMiB: number; busy: boolean }[];
  /** Why the figures are partial (no nvidia-smi, …). */
  note?: string;
}

/** The job has ended (however): nothing more will happen to it. */
export const isEnded = (state: string): boolean => (ENDED_STATES as ReadonlySet<string>).has(state);

/**
 * `submit` for an adapter whose backend takes one job per call: each job's find-or-submit (`one`),
 * at most `concurrency` at once, each error kept apart as that job's result.
 */
export async function oneByOne(
  jobs: readonly JobRequest[],
  one: (job: JobRequest) => Promise<SubmitResult>,
  concurrency = 8,
): Promise<(SubmitResult | Error)[]> {
  const limit = pLimit(concurrency);
  return Promise.all(
    jobs.map((job) =>
      limit(() => one(job)).catch((e: unknown) => (e instanceof Error ? e : new Error(String(e)))),
    ),
  );
}

/** One job through `submit` (tools, benchmarks, tests): its handle, or its error thrown. */
export async function submitOne(backend: Pick<Backend, 'submit'>, job: JobRequest): Promise<SubmitResult> {
  const [r] = await backend.submit([job]);
  if (r instanceof Error) throw r;
  if (!r) throw new Error(`submit of ${job.jobName} returned no result`);
  return r;
}

/** Every handle observed as `Unknown`: the backend could not be asked (not a failure). */
export function unobservable(handles: readonly JobHandle[], reason: string, message: string): ObservedJob[] {
  return handles.map((h) => ({
    jobName: h.jobName,
    jobId: h.jobId,
    state: JobState.Unknown,
    reason,
    message,
  }));
}

/** What `adv exec`'s exit record says, as an observation: the same on every backend that has one. */
export function observedFromExit(
  base: { jobName: string; jobId: string },
  x: { exitCode: number; reason: string; message?: string; startedAt?: string; finishedAt?: string },
): ObservedJob {
  const state =
    x.reason === ExitReason.Completed
      ? JobState.Succeeded
      : x.reason === ExitReason.Cancelled
        ? JobState.Cancelled
        : x.reason === ExitReason.Preempted
          ? JobState.Preempted
          : JobState.Failed;
  return {
    ...base,
    state,
    reason: x.reason,
    exitCode: x.exitCode,
    ...(x.message ? { message: x.message } : {}),
    ...(x.startedAt ? { startedAt: x.startedAt } : {}),
    ...(x.finishedAt ? { finishedAt: x.finishedAt } : {}),
  };
}

export interface Backend {
  readonly name: string;
  /** Its descriptor's type (`local`, `slurm`, …, or a type a test registers). */
  readonly type: string;
  /**
   * Find-or-submit every job of a pass to this backend, in one call (one native call where the
   * backend has one: one SSH command for SLURM and ssh hosts, one queue write for the agent).
   * Idempotence is the adapter's, and only the adapter's (the executor does not look first): a
   * job that exists under its name — a controller killed between submit and its record — is
   * returned `adopted`, never started a second time. Results are in order: a handle, or the error
   * for that job alone.
   */
  submit(jobs: readonly JobRequest[]): Promise<(SubmitResult | Error)[]>;
  /** Finds a job by name (adoption after a crash). */
  find(jobName: string): Promise<JobHandle | undefined>;
  /**
   * ONE native call per backend per poll, for all handles. `owned`: the job names of every live
   * attempt on this backend, those still being submitted (no handle yet) included — what an
   * adapter that sweeps orphans must never take for one.
   */
  poll(handles: readonly JobHandle[], owned?: ReadonlySet<string>): Promise<ObservedJob[]>;
  /**
   * It creates what it runs on and deletes what no live attempt owns (`poll` sweeps): polled every
   * pass, with no handles when nothing runs there, so a leftover is found at start-up too.
   */
  readonly sweepsOrphans?: boolean;
  cancel(handle: JobHandle): Promise<void>;
  logs(handle: JobHandle, opts?: { follow?: boolean; since?: number }): AsyncIterable<string>;
  /** Free resources, where the backend can tell. */
  capacity?(): Promise<Capacity>;
  close?(): Promise<void>;
}

/** The code of a run, as the adapters need it: every adapter gets it injected, none opens git. */
export interface CodeExporter {
  /** The tree to ship: the commit's, or its subtree at `path` (throws when that is not a folder). */
  treeOf(commit: string, path?: string): Promise<string>;
  /** The deterministic tar.gz of a tree (same tree, same bytes), named by the tree id. */
  payload(tree: string): Promise<Buffer>;
  /** Extracts `commit[:path]` into `dest` (the local backend's work dir). */
  extractTo(commit: string, path: string | undefined, dest: string): Promise<void>;
}

/** Opens an SSH transport to a host (tests and fakes inject their own). */
export type SshTransportFactory = (target: SshConnection) => SshTransport;

/** What an adapter may use: everything injected, nothing global. */
export interface BackendContext {
  dataDir: string;
  logger: Logger;
  now: () => number;
  /** The run's code (a commit of the specs repo), exported for shipping. */
  code: CodeExporter;
  /** Where adapters that reach hosts over SSH get their transport from. */
  ssh: SshTransportFactory;
  /**
   * The environment of the controller's machine, which jobs started there take their small base
   * from (`job-env.ts`); default `process.env`. Nothing else of it reaches a job.
   */
  hostEnv?: NodeJS.ProcessEnv;
  /**
   * Where a Backend's own secrets (an API key, agent tokens) resolve: the same sources as the
   * secrets Runs name (`secrets.ts`), so they too never sit in a spec or a log.
   */
  secrets?: SecretSource;
  /**
   * The request of a live attempt on this backend, rebuilt from the status branch by job name
   * (secrets resolved again): for adapters that launch after `submit` returned (a node that is
   * still being created), so a restarted controller carries on with what it finds instead of
   * starting over. Undefined when no live attempt has that name.
   */
  requestFor?(jobName: string): JobRequest | undefined;
  /**
   * The object store of the repo's Storage spec, when one is configured: an adapter may read the
   * exit records and heartbeats workers write there instead of asking every host.
   */
  objects?(): ObjectStore | undefined;
  /**
   * The controller's HTTP listener, for backends whose workers call in (the pull agent): requests
   * under a mounted prefix go to its handler, which authenticates its own callers.
   */
  http?: HttpMounts;
  /**
   * One object per controller, made on first ask and shared by every adapter that asks for the
   * same key (the pull agent's queue, which all `agent` Backends feed); closed with the controller.
   */
  shared?<T extends { close?(): void | Promise<void> }>(key: string, make: () => T): T;
}

/**
 * Answers a request under a mounted prefix. `caller.operator`: it carries the controller's API
 * token (what operator endpoints require).
 */
export type HttpHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  caller: { operator: boolean },
) => Promise<void>;

export interface HttpMounts {
  /** Sends requests whose path is `prefix` or under `prefix/` to `handler`; returns how to unmount. */
  mount(prefix: string, handler: HttpHandler): () => void;
}

/**
 * What the solver and the planner need to know of a backend type, asked instead of its name.
 * Declared by each adapter's descriptor.
 */
export interface BackendTraits {
  /** It holds a job in its own queue until it fits (a batch scheduler): the solver may queue there when nothing can start now. */
  queuesWhenFull: boolean;
  /** A job may span several nodes when the spec declares no `capabilities.nodes`. */
  multiNode: boolean;
  /** It offers TPU chips (`resources.tpus`). */
  tpus: boolean;
  /**
   * When an attempt starts costing (`capabilities.costPerHour`, or the price a rented instance
   * reports): `submitted` where the machine is made or held for it at submit (a TPU node, a rental,
   * a host), `started` where a scheduler queues it for free until it runs (SLURM, Volcano, the
   * agent queue). Separate from `queuesWhenFull`, which is about placement.
   */
  billsFrom: 'submitted' | 'started';
  /** Longest job name it accepts (`adv-<run>-<n>` is shortened with a hash beyond it). */
  jobNameMax: number;
  /** Its capacity may be preempted, from the Backend spec (spot VMs, preemptible partitions). */
  preemptible?(spec: BackendObject['spec']): boolean;
  /**
   * The checkpoint modes it offers a job, from the Backend spec, in the order `checkpoint.mode:
   * auto` takes them (`checkpoint-mode.ts`). Absent: `per-process` only (one host, one process).
   */
  checkpointModes?(spec: BackendObject['spec']): CheckpointMode[];
  /** How a Backend of this type would offer a mode it does not offer now: the fix a refusal says. */
  howToOffer?: Partial<Record<CheckpointMode, string>>;
  /**
   * The GPU types a job can get here, from the Backend spec: `capabilities.gpuTypes` and what the
   * type's own settings name (SLURM partitions, a Vast.ai `gpuName`, Kubernetes node selectors).
   * `[]`: it declares none, so a run that names a type does not land here. `undefined`: any type a
   * run names (a marketplace rents what is asked). Absent: `capabilities.gpuTypes`
   * (`declaredGpuTypes`). The solver learns GPU types only from this and from `capacity()`.
   */
  gpuTypes?(spec: BackendObject['spec']): string[] | undefined;
  /**
   * The TPU slice a job gets here, from the Backend spec (its accelerator type, `tpu-slice.ts`);
   * undefined when the spec names none. Only for types with `tpus: true`.
   */
  tpuSlice?(spec: BackendObject['spec']): TpuSlice | undefined;
}

/** The GPU types a Backend declares in `capabilities.gpuTypes`: the default of `gpuTypes`. */
export const declaredGpuTypes = (spec: BackendObject['spec']): string[] => [
  ...(spec.capabilities?.gpuTypes ?? []),
];

/**
 * A backend type's settings block in `Backend.spec`, named like the type (`slurm:`, `gcpTpu:`, …).
 * The Backend schema is assembled from these; the TypeScript types follow from the schema.
 */
export interface BackendSettings<B extends string = string, S extends TSchema = TSchema> {
  /** The key of the block in `Backend.spec`. */
  readonly block: B;
  /** Its JSON Schema (TypeBox), declared with the helpers of `spec/schema-kit.ts`. */
  readonly schema: S;
  /** A backend of this type must have the block (the `MissingSettings` rule). */
  readonly required: boolean;
}

/** Reports one problem of a Backend document at a path (`['spec', 'slurm', 'partitions', 0]`). */
export type RuleReport = (
  code: string,
  path: (string | number)[],
  message: string,
  hint?: string,
  /** Point at the key rather than its value. */
  key?: boolean,
) => void;

/**
 * One backend type: its settings, its rules, its traits and its adapter. Registered in
 * `registry.ts`; a new backend touches its folder and one line there.
 */
/**
 * The traits of a backend that runs each job on one host and has no scheduler of its own: the
 * default a descriptor spreads and overrides (`{ ...ONE_HOST_TRAITS, multiNode: true }`).
 */
export const ONE_HOST_TRAITS: BackendTraits = {
  queuesWhenFull: false,
  multiNode: false,
  tpus: false,
  billsFrom: 'submitted',
  jobNameMax: 63,
  gpuTypes: declaredGpuTypes,
};

export interface BackendDescriptor<
  T extends string = string,
  S extends BackendSettings | undefined = BackendSettings | undefined,
> {
  type: T;
  /** Its settings block, when it has one (`ssh` has none: `connection` and `paths` say it all). */
  settings?: S;
  /** A backend of this type must have `connection` (the `MissingConnection` rule). */
  needsConnection: boolean;
  /**
   * Semantic rules of its settings block, beyond what the schema says. They run when the backend
   * is of this type or carries this type's block.
   */
  rules?(spec: BackendObject['spec'], report: RuleReport): void;
  /**
   * The adapter; absent while the type is declared (schema, rules) but not built yet. The built-in
   * types load their `adapter.ts` here (a dynamic import), so what reads only the schema, rules and
   * traits (validating YAML) loads no adapter and none of its clients.
   */
  create?(spec: BackendObject, ctx: BackendContext): Backend | Promise<Backend>;
  /**
   * What `run` would cost per hour here, asked of the backend itself (a marketplace's cheapest
   * fitting offer) before anything is submitted; absent: the Backend's `capabilities.costPerHour`
   * is the price. Loaded lazily like `create`; never throws (a failed quote says why).
   */
  quote?(spec: BackendObject, run: RunSpec, src: QuoteSources): Promise<Quote>;
  traits: BackendTraits;
}

/** A descriptor whose adapter is built: `create` is there. */
export interface AdapterDescriptor<
  T extends string = string,
  S extends BackendSettings | undefined = BackendSettings | undefined,
> extends BackendDescriptor<T, S> {
  create(spec: BackendObject, ctx: BackendContext): Backend | Promise<Backend>;
}

/**
 * What the Backend schema is assembled from: a descriptor's type and settings block. (The schema
 * reads no more of a descriptor, so the types derived from it do not depend on the adapters.)
 */
export interface BackendSchemaPart {
  readonly type: string;
  readonly settings?: BackendSettings | undefined;
}

/** A backend's answer to "what would this run cost per hour on you": a price, or why there is none. */
export type Quote = { perHour: number; note: string } | { error: string };

/** Where a quote's API key and URL come from (for `adv plan`, the CLI's environment). */
export interface QuoteSources {
  /** The value of a secret by name (`apiKeySecret`), or undefined when it is not set. */
  secret(name: string): string | undefined;
  /** `VAST_URL`, where set (the fake in tests; a proxy). */
  env: NodeJS.ProcessEnv;
  logger?: Logger;
}

/** A list of backend types: the registry's `BACKENDS`, or that plus types a test registers. */
export type BackendList = readonly BackendDescriptor[];

/** `adv-<run>-<n>`, shortened with a hash when longer than `max` (SLURM allows long names; k8s 63). */
export function jobNameFor(run: string, attempt: number, max = 63): string {
  const full = `adv-${run}-${attempt}`;
  if (full.length <= max) return full;
  let h = 0x811c9dc5;
  for (const ch of full) h = Math.imul(h ^ ch.charCodeAt(0), 0x01000193) >>> 0;
  const tail = `-${h.toString(36)}-${attempt}`;
  return `adv-${run.slice(0, max - 4 - tail.length)}${tail}`;
}
