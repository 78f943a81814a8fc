/**
 * The resource kinds, declared once. This file is the single source: the JSON Schemas in `crds/`
 * and `docs/reference/` are generated from it (`npm run gen`, drift-checked by a test), and the
 * TypeScript types below are inferred from it, never written by hand.
 *
 * Every field carries a description: they are the reference documentation.
 */
import { Type, type Static, type TOptional, type TSchema, type TString } from '@sinclair/typebox';
import { BACKENDS } from '../backends/registry.js';
import type { BackendList, BackendSchemaPart } from '../backends/types.js';
import { CHECKPOINT_MODE_CHOICES, STOP_SIGNALS } from '../backends/checkpoint-mode.js';
import {
  DNS1123_LABEL,
  DNS1123_SUBDOMAIN,
  ENV_NAME,
  HostPath,
  KeyedMap,
  Nullable,
  optional,
  strict,
  StringEnum,
  StringMap,
} from './schema-kit.js';
import {
  DatasetCacheSchema,
  datasetNameField,
  DatasetSpecSchema,
  RunInputsSchema,
} from './dataset-schema.js';

export { DNS1123_LABEL, DNS1123_SUBDOMAIN, ENV_NAME, isObjectName } from './schema-kit.js';
export {
  DATASET_REF,
  DatasetSourceSchema,
  DatasetSpecSchema,
  INPUT_AS,
  SHA256_DIGEST,
} from './dataset-schema.js';

export const API_VERSION = 'adventuretime.dev/v1alpha1';

/** Kinds, as constants (not an enum). */
export const Kind = {
  Run: 'Run',
  DAG: 'DAG',
  Backend: 'Backend',
  Storage: 'Storage',
  Environment: 'Environment',
  Provider: 'Provider',
  Alert: 'Alert',
  Sweep: 'Sweep',
  Dataset: 'Dataset',
} as const;
export type Kind = (typeof Kind)[keyof typeof Kind];
export const KINDS: readonly Kind[] = Object.values(Kind);

/**
 * A reference to an Environment: its name (a DNS label), optionally pinned to a version with
 * `@N`. Captures the name and the version.
 */
export const ENVIRONMENT_REF = '^([a-z0-9]([-a-z0-9]*[a-z0-9])?)(@([1-9][0-9]{0,8}))?$';

const nameField = (maxNameLength: number, what: string) =>
  Type.String({
    minLength: 1,
    maxLength: maxNameLength,
    pattern: DNS1123_SUBDOMAIN,
    description: `Name of the ${what}, unique per kind: a DNS-1123 subdomain of at most ${maxNameLength} characters (lowercase letters, digits, '-' and '.').`,
    'x-hint': `use lowercase letters, digits, '-' and '.', start and end with a letter or digit, at most ${maxNameLength} characters (e.g. "my-run-1")`,
  });

/** An Environment's name: a DNS label, so that `name@version` is never ambiguous. */
const environmentNameField = Type.String({
  minLength: 1,
  maxLength: 63,
  pattern: DNS1123_LABEL,
  description:
    "Name of the Environment: a DNS-1123 label of at most 63 characters (lowercase letters, digits and '-'). Several documents may share it with different `spec.version`s.",
  'x-hint': 'use lowercase letters, digits and \'-\' (no dots), at most 63 characters (e.g. "cuda12")',
});

const Metadata = (maxNameLength: number, what: string, name: TString = nameField(maxNameLength, what)) =>
  strict(
    {
      name,
      labels: optional(StringMap('Labels for selection (`adv get -l key=value`), as in Kubernetes.')),
      annotations: optional(
        StringMap(
          'Free-form annotations. `adventuretime.dev/reconcile-requested-at` forces a reconcile pass when its value changes.',
        ),
      ),
    },
    'Standard object metadata.',
  );

// ---------------------------------------------------------------------------------------------
// Run

const Quantity = Type.String({
  pattern: '^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$',
  description: 'A size in bytes with an optional suffix, Kubernetes style: `512Mi`, `64Gi`, `1.5Ti`.',
  'x-hint': 'write a number with an optional suffix Ki, Mi, Gi or Ti, e.g. "64Gi"',
});

export const ResourcesSchema = strict(
  {
    gpus: optional(
      Type.Integer({ minimum: 0, maximum: 1024, description: 'GPUs per node. Default 0.', default: 0 }),
    ),
    gpuType: optional(
      Type.String({
        pattern: '^[A-Za-z0-9_-]+(\\|[A-Za-z0-9_-]+)*$',
        description:
          'Acceptable GPU types in order of preference, separated by `|`: `H100|A100|any`. `any` accepts every type.',
        'x-hint': 'list GPU types separated by "|", e.g. "H100|A100|any"',
      }),
    ),
    tpus: optional(Type.Integer({ minimum: 0, description: 'TPU chips per host (for `gcp-tpu` backends).' })),
    tpuType: optional(Type.String({ description: 'TPU accelerator type, e.g. `v5litepod-8`.' })),
    cpus: optional(Type.Number({ exclusiveMinimum: 0, description: 'CPU cores per node.' })),
    memory: optional(Type.Unsafe<string>({ ...Quantity, description: 'Memory per node, e.g. `64Gi`.' })),
    nodes: optional(Type.Integer({ minimum: 1, maximum: 4096, description: 'Number of nodes. Default 1.' })),
  },
  'Compute the run asks for. Devices = gpus (or tpus) × nodes.',
);

const MeshSchema = strict(
  {
    axes: Type.Array(Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }), {
      minItems: 1,
      maxItems: 8,
      description: 'Mesh axis names, e.g. `[data, model]`.',
    }),
    shape: Type.Array(Nullable('integer', { minimum: 1 }), {
      minItems: 1,
      maxItems: 8,
      description:
        'Size of each axis, in the order of `axes`. At most one entry may be `null`: it takes the remaining devices. The product must equal the devices the run asks for.',
    }),
  },
  'Device mesh: named axes and their sizes.',
);

const TensorRuleSchema = strict(
  {
    param: Type.String({
      minLength: 1,
      description: 'Parameter path pattern, e.g. `transformer/attn/qkv/kernel`.',
    }),
    spec: Type.Array(Nullable('string'), {
      description: 'PartitionSpec: one mesh axis name (or `null`) per dimension of the parameter.',
    }),
  },
  'One tensor-parallel sharding rule.',
);

export const ParallelismSchema = strict(
  {
    mesh: MeshSchema,
    dp: optional(
      strict(
        {
          axis: Type.String({ description: 'Mesh axis the batch is split across.' }),
          accumulateSteps: optional(
            Type.Integer({
              minimum: 1,
              description: 'Micro-batches accumulated per optimizer step. Default 1.',
            }),
          ),
          syncMetrics: optional(
            Type.Boolean({ description: 'Average metrics across the axis. Default true.' }),
          ),
        },
        'Data parallelism.',
      ),
    ),
    tp: optional(
      strict(
        {
          axis: Type.String({ description: 'Mesh axis tensors are sharded along.' }),
          rules: optional(
            Type.Array(TensorRuleSchema, { description: 'Parameter-path → PartitionSpec rules.' }),
          ),
          preferReduceScatter: optional(
            Type.Boolean({ description: 'Prefer reduce-scatter over all-reduce.' }),
          ),
        },
        'Tensor parallelism.',
      ),
    ),
    pp: optional(
      strict(
        {
          axis: Type.String({ description: 'Mesh axis pipeline stages are laid along.' }),
          stages: Type.Integer({
            minimum: 2,
            description: 'Number of pipeline stages; equals the axis size.',
          }),
          microbatchSize: optional(Type.Integer({ minimum: 1, description: 'Micro-batch size.' })),
          checkpointRatio: optional(
            Type.Number({ minimum: 0, maximum: 1, description: 'Fraction of activations rematerialised.' }),
          ),
        },
        'Pipeline parallelism.',
      ),
    ),
  },
  'Explicit parallelism plan, validated against `resources` before dispatch and passed to the workload as `ADV_PARALLELISM` (JSON).',
);

/** `policy.checkpoints`: which committed checkpoints the store keeps (runtime/retention.ts). */
export const RetentionSchema = strict(
  {
    keepLast: optional(
      Type.Integer({
        minimum: 1,
        description: 'Keep the newest N committed checkpoints (the newest is always kept).',
      }),
    ),
    keepEvery: optional(
      Type.Integer({ minimum: 1, description: 'Also keep every checkpoint whose step is a multiple of N.' }),
    ),
    keepBest: optional(
      strict(
        {
          metric: Type.String({
            minLength: 1,
            maxLength: 128,
            description:
              "A metric the workload logs (`$ADV_METRICS_FILE`), read at each step from the run's curve.",
          }),
          mode: StringEnum(
            ['min', 'max'] as const,
            '`min`: lower is better (a loss); `max`: higher is better.',
          ),
          count: optional(
            Type.Integer({ minimum: 1, description: 'How many of the best to keep. Default 1.' }),
          ),
        },
        'Also keep the checkpoints with the best value of a logged metric at their step.',
      ),
    ),
  },
  'Which committed checkpoints to keep; the others are deleted after each new commit (by adv exec) and by `adv ckpt gc`. A step that matches any rule is kept. Absent: every checkpoint is kept (adv ckpt gc keeps the newest 3).',
);

/** `policy.retryOn`: which user-code failures are worth another attempt. */
export const RetryOnSchema = strict(
  {
    exitCodes: Type.Array(Type.Integer({ minimum: 0, maximum: 255 }), {
      minItems: 1,
      description:
        'Exit codes that get another attempt (within maxAttempts); any other exit code fails the run at once (condition `Retryable` False, reason `ExitCodeNotRetryable`).',
    }),
  },
  'Which failures of the user code are retried. Absent: every one is, up to maxAttempts. Preemption and infrastructure failures are always retried.',
);

const BackoffSchema = strict(
  {
    initialSec: optional(Type.Number({ minimum: 0, description: 'First delay before a retry. Default 30.' })),
    maxSec: optional(Type.Number({ minimum: 0, description: 'Upper bound of the delay. Default 1800.' })),
    factor: optional(Type.Number({ minimum: 1, description: 'Multiplier per failure. Default 2.' })),
  },
  'Exponential backoff between attempts after user-code failures.',
);

export const OnSpecChange = { Reject: 'Reject', Restart: 'Restart' } as const;

export const PolicySchema = strict(
  {
    preemptible: optional(
      Type.Boolean({
        description: 'May run on preemptible capacity (spot, preempt partitions). Default false.',
      }),
    ),
    checkpointIntervalSec: optional(
      Type.Integer({
        minimum: 1,
        description: 'How often the workload should checkpoint; passed as `ADV_CKPT_INTERVAL_SEC`.',
      }),
    ),
    maxAttempts: optional(
      Type.Integer({
        minimum: 1,
        maximum: 1000,
        description: 'Attempts that may end in a user-code failure before the run fails. Default 3.',
      }),
    ),
    maxInfraAttempts: optional(
      Type.Integer({
        minimum: 1,
        description: 'Separate cap on attempts ended by preemption or infrastructure failure. Default 100.',
      }),
    ),
    maxHours: optional(
      Type.Number({ exclusiveMinimum: 0, description: 'Wall-clock limit of one attempt, in hours.' }),
    ),
    maxTotalHours: optional(
      Type.Number({ exclusiveMinimum: 0, description: 'Wall-clock limit over all attempts, in hours.' }),
    ),
    maxCost: optional(
      Type.Number({
        exclusiveMinimum: 0,
        description:
          "Money limit over all attempts (hours × each attempt's price, in the unit of the Backends' costPerHour): past it the attempt is stopped and the run fails.",
      }),
    ),
    heartbeatTimeoutSec: optional(
      Type.Integer({
        minimum: 10,
        description: 'A running attempt without heartbeat this long is Lost. Default 600.',
      }),
    ),
    queuedTimeoutSec: optional(
      Type.Integer({
        minimum: 10,
        description: 'Withdraw an attempt queued this long and try the next backend. Default: never.',
      }),
    ),
    failoverCooldownSec: optional(
      Type.Integer({
        minimum: 0,
        description:
          'After a backend preempts or fails this run, it is tried after every other candidate for this long. Default 600.',
      }),
    ),
    backoff: optional(BackoffSchema),
    stopSignal: optional(
      StringEnum(
        STOP_SIGNALS,
        'The signal the workload gets to stop (preemption notice, time limit, cancel), on every backend, whatever the scheduler sent `adv exec` (SLURM sends SIGUSR1); then the grace period. Default `SIGTERM`.',
      ),
    ),
    onSpecChange: optional(
      StringEnum(
        Object.values(OnSpecChange),
        'What an immutable change (command, code, resources) does to a live run: `Reject` (default) keeps the run and sets `SpecChangeRejected`; `Restart` cancels it and starts a new attempt from the last checkpoint.',
      ),
    ),
    checkpoints: optional(RetentionSchema),
    retryOn: optional(RetryOnSchema),
    optimize: optional(
      StringEnum(
        ['order', 'cost', 'time'],
        "How the solver ranks the backends that can take the run: `order` (default) by `backendSelector.order` or priority; `cost` by expected cost, `time` by expected finish, each counting the work a backend's preemptions lose (its preemption rate from the status branch × half the checkpoint interval, plus its restart time). The attempt's `why` gives the figures.",
      ),
    ),
  },
  'Retry, checkpoint and guardrail policy.',
);

export const BackendSelectorSchema = strict(
  {
    order: optional(
      Type.Array(Type.String({ pattern: DNS1123_SUBDOMAIN }), {
        description: 'Backends to try, in order of preference. Empty: all backends by priority.',
      }),
    ),
    allowed: optional(
      Type.Array(Type.String({ pattern: DNS1123_SUBDOMAIN }), {
        description: 'Only these backends may be used.',
      }),
    ),
    forbidden: optional(
      Type.Array(Type.String({ pattern: DNS1123_SUBDOMAIN }), {
        description: 'These backends are never used.',
      }),
    ),
    constraints: optional(
      strict(
        {
          minVramGiB: optional(Type.Number({ minimum: 0, description: 'Minimum memory per GPU, GiB.' })),
          minRamGiB: optional(Type.Number({ minimum: 0, description: 'Minimum host memory, GiB.' })),
          requireCuda: optional(Type.Boolean({ description: 'Only backends with CUDA.' })),
          preferCuda: optional(Type.Boolean({ description: 'Prefer backends with CUDA.' })),
          clusters: optional(
            Type.Array(Type.String(), { description: 'Only backends whose `cluster` is one of these.' }),
          ),
        },
        'Hardware constraints matched against what each backend declares.',
      ),
    ),
  },
  'Where the run may go. The solver walks `order`, then backend priority, and filters by constraints and free capacity.',
);

const CodeSchema = strict(
  {
    repo: optional(
      Type.String({
        maxLength: 2048,
        description:
          "Another git repository to take the code from: its `https://` clone URL (`http://` too; no `ssh://`, `git@…`, `file://` or credentials in the URL). The controller fetches it into a mirror of its own (branches, tags and `refs/adventuretime/snapshots/*`), with its submodules, and ships the pinned commit as it ships the specs repo's. The token: `tokenSecret`, else the controller's `ADV_GIT_TOKEN` where the repo is on the specs repo's host (or a host the operator lists). Default: the specs repo itself.",
        'x-hint': 'write the https:// URL git clone takes, e.g. https://github.com/lab/monorepo.git',
      }),
    ),
    tokenSecret: optional(
      Type.String({
        pattern: ENV_NAME,
        maxLength: 128,
        description:
          "With `repo`: the secret (resolved like `secrets`) that holds the token to fetch it with, sent only to the repo's own scheme, host and port. Default: the controller's `ADV_GIT_TOKEN`, on the specs repo's host only.",
      }),
    ),
    ref: optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        pattern: '^[A-Za-z0-9._/@-]+$',
        description:
          "Branch, tag or commit (of `repo` when set; a snapshot name under `refs/adventuretime/snapshots/` too). Pinned to a commit at the first submission; later attempts use the same commit. Default: the specs commit, or `repo`'s default branch.",
        'x-hint': 'use a branch, tag or commit hash (letters, digits, ".", "_", "/", "@", "-")',
      }),
    ),
    path: optional(
      Type.String({ description: 'Sub-directory of the repository to ship. Default: the root.' }),
    ),
  },
  'Which code runs: a git tree pinned to a commit.',
);

export const CheckpointSchema = strict(
  {
    mode: optional(
      StringEnum(
        CHECKPOINT_MODE_CHOICES,
        "Where a multi-host job's processes write their checkpoint. `per-process`: a dir of each process's own, every process uploads what it wrote and process 0 commits the union (torch DCP, per-rank files). `shared`: one dir all processes see (a cluster file system, `volcano.checkpointVolume`, `gcpTpu.sharedMount`): what Orbax needs. `store`: the workload writes to the object store itself (`ADV_CKPT_URI`). `auto` (default): the first mode the backend offers (a shared dir where it has one; docs/backends.md lists each backend's). A run that names a mode is placed only on a backend that offers it.",
      ),
    ),
  },
  'How the checkpoint of a multi-host job is written (see docs/checkpointing.md).',
);

export const ForkFromSchema = strict(
  {
    run: Type.String({
      pattern: DNS1123_SUBDOMAIN,
      maxLength: 63,
      description: 'The run whose checkpoint this one starts from.',
      'x-hint': 'write the name of a run (lowercase letters, digits, "-" and ".")',
    }),
    step: Type.Integer({
      minimum: 0,
      description:
        'Its committed checkpoint step. `adv fork` pins it (the latest when not given), so the spec says exactly where the run starts.',
    }),
  },
  "Start from another run's committed checkpoint (`adv fork` writes it): before this run's first attempt, while it has no checkpoint of its own, the controller copies `runs/<run>/ckpt/<step>/` into this run's checkpoints inside the object store, and the attempt restores it as it would its own. A missing source stalls the run with a condition saying which steps exist.",
);

/** `spec.session`: an interactive attempt (`adv notebook`, `adv shell`) instead of a command. */
export const SessionSchema = strict(
  {
    kind: StringEnum(
      ['notebook', 'shell'] as const,
      "`notebook`: Jupyter Lab from the run's environment on the worker's loopback, reached through `adv notebook`'s forwarded port. `shell`: the attempt holds the machine for `adv shell` / `adv ssh` login shells.",
    ),
    idleTimeoutSec: optional(
      Type.Integer({
        minimum: 1,
        description:
          'Seconds without use (no open notebook or kernel activity; no attached shell) after which the session ends: the run Succeeds and the backend gives the machine back. Default 1800.',
      }),
    ),
  },
  'An interactive session instead of a command (see docs/sessions.md). Not in a DAG node.',
);

/** Named outputs of a Run (or a DAG node, whose outputs become its run's). */
const OutputsSchema = KeyedMap(
  '^[A-Za-z_][A-Za-z0-9_-]*$',
  strict(
    { description: optional(Type.String({ description: 'What the output holds.' })) },
    'One declared output.',
  ),
  'Named outputs: artifact prefixes in the object store, written from `$ADV_ARTIFACT_DIR/<name>/`: committed parts (`<name>/parts/<part>/`) while the run goes on, the rest and the completion manifest when it succeeds (docs/data.md).',
);

/** Fields of a Run spec, shared by `Run.spec` and a DAG node's `run`. */
const runSpecProperties = {
  command: optional(
    Type.Union([Type.String({ minLength: 1 }), Type.Array(Type.String(), { minItems: 1 })], {
      description:
        'The command. A list is an argument vector run as is; a string is run by `sh -c`. Exactly one of `command` and `entry`.',
    }),
  ),
  entry: optional(
    Type.String({
      pattern: '^[A-Za-z0-9_./-]+\\.py:[A-Za-z_][A-Za-z0-9_]*$',
      description:
        'Sugar for a Python entry point: `path/file.py:func` runs `python -c` importing and calling `func()`.',
      'x-hint': 'write "path/to/file.py:function"',
    }),
  ),
  session: optional(SessionSchema),
  workingDir: optional(Type.String({ description: 'Directory inside the code tree to start in.' })),
  code: optional(CodeSchema),
  resources: optional(ResourcesSchema),
  parallelism: optional(ParallelismSchema),
  policy: optional(PolicySchema),
  checkpoint: optional(CheckpointSchema),
  forkFrom: optional(ForkFromSchema),
  backendSelector: optional(BackendSelectorSchema),
  env: optional(
    KeyedMap(
      ENV_NAME,
      Type.String({ maxLength: 65536 }),
      'Environment variables for the workload. Names starting with `ADV_` are reserved.',
    ),
  ),
  secrets: optional(
    Type.Array(Type.String({ pattern: ENV_NAME, maxLength: 128 }), {
      description:
        "Names of secrets the job receives as environment variables of the same name. The controller resolves them from `--secrets-file`, then `--secrets-dir`, then its own environment for the names `--secrets-env` lists; a missing one stalls the run. `ADV_*` and the object store's credentials cannot be named. Values travel out of band and are masked in logs (`***`); they never appear in git, status, the store or logs.",
    }),
  ),
  environment: optional(
    Type.String({
      maxLength: 80,
      pattern: ENVIRONMENT_REF,
      description:
        'The Environment the run runs in: `cuda12` (its newest version, so a new version restarts the run like any change of it) or `cuda12@2` (that version, whatever is added later).',
      'x-hint': 'write an Environment name, optionally with a version: "cuda12" or "cuda12@2"',
    }),
  ),
  setup: optional(
    Type.Array(Type.String({ minLength: 1 }), {
      description:
        "Shell steps `adv exec` runs in the work dir before the command, after the Backend's and the Environment's, in one shell session (an `export` reaches the command); the first that fails ends the attempt as `SetupFailed`. `{{ NAME }}` is a variable of the job's environment, `{{ secrets.NAME }}` one of `secrets`, substituted shell-quoted on the host.",
    }),
  ),
  outputs: optional(OutputsSchema),
  totalSteps: optional(
    Type.Integer({ minimum: 1, description: 'Expected final step, for progress display. Optional.' }),
  ),
  inputs: optional(RunInputsSchema),
  suspend: optional(Type.Boolean({ description: 'true cancels the run (live attempts are stopped).' })),
};

export const RunSpecSchema = strict(runSpecProperties, 'What to run, where, and how to recover it.');

export const RunSchema = strict(
  {
    apiVersion: Type.Literal(API_VERSION, { description: `Always \`${API_VERSION}\`.` }),
    kind: Type.Literal(Kind.Run, { description: 'Always `Run`.' }),
    metadata: Metadata(63, 'run'),
    spec: RunSpecSchema,
  },
  'One experiment: a command, its code, the compute it needs and its recovery policy.',
  { $id: 'https://adventuretime.dev/schemas/v1alpha1/run.json', title: 'Run' },
);

// ---------------------------------------------------------------------------------------------
// DAG

export const DagNodeSchema = strict(
  {
    id: Type.String({
      minLength: 1,
      maxLength: 63,
      pattern: DNS1123_LABEL,
      description: 'Node id, unique in the DAG; the child Run is named `<dag>.<id>`.',
      'x-hint': 'use lowercase letters, digits and \'-\' (e.g. "train")',
    }),
    needs: optional(
      Type.Array(Type.String(), {
        uniqueItems: true,
        description: 'Ids of the nodes that must succeed first.',
      }),
    ),
    retries: optional(
      Type.Integer({
        minimum: 0,
        maximum: 100,
        description:
          'Retries after a user-code failure (attempts = retries + 1). Overrides `policy.maxAttempts`.',
      }),
    ),
    inputs: optional(
      KeyedMap(
        ENV_NAME,
        Type.String({
          pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?\\.outputs\\.[A-Za-z_][A-Za-z0-9_-]*$',
          'x-hint': 'refer to an output as "<node>.outputs.<name>", e.g. "tokenize.outputs.shards"',
        }),
        'Inputs from earlier nodes: `NAME: <node>.outputs.<output>`. The URI arrives as `ADV_INPUT_<NAME>`.',
      ),
    ),
    outputs: optional(OutputsSchema),
    run: strict(runSpecProperties, 'The node’s Run spec (merged over the DAG’s `defaults`).'),
  },
  'One DAG node: a Run with dependencies.',
);

export const DagSpecSchema = strict(
  {
    nodes: Type.Array(DagNodeSchema, { minItems: 1, maxItems: 10000, description: 'The nodes.' }),
    defaults: optional(
      strict(
        {
          code: optional(CodeSchema),
          backendSelector: optional(BackendSelectorSchema),
          policy: optional(PolicySchema),
          env: optional(KeyedMap(ENV_NAME, Type.String(), 'Environment every node gets.')),
        },
        'Fields every node inherits unless it sets them.',
      ),
    ),
    failFast: optional(
      Type.Boolean({
        description:
          'On a node failure, stop scheduling the rest (true) or let independent branches finish (false, default).',
      }),
    ),
    suspend: optional(Type.Boolean({ description: 'true cancels all live nodes.' })),
  },
  'A graph of Runs.',
);

export const DagSchema = strict(
  {
    apiVersion: Type.Literal(API_VERSION, { description: `Always \`${API_VERSION}\`.` }),
    kind: Type.Literal(Kind.DAG, { description: 'Always `DAG`.' }),
    metadata: Metadata(253, 'DAG'),
    spec: DagSpecSchema,
  },
  'A pipeline of Runs: each node starts when the nodes it needs have succeeded.',
  { $id: 'https://adventuretime.dev/schemas/v1alpha1/dag.json', title: 'DAG' },
);

// ---------------------------------------------------------------------------------------------
// Sweep

/** A parameter's value: a scalar, so that it can be substituted into a string and an env value. */
const ParamValue = Type.Union([Type.String({ maxLength: 4096 }), Type.Number(), Type.Boolean()], {
  description: 'A parameter value: a string, a number or a boolean.',
});

/** A parameter's name: an identifier, so that it is a variable name after `ADV_PARAM_`. */
export const PARAM_NAME = '^[A-Za-z_][A-Za-z0-9_]{0,63}$';

export const SweepSpecSchema = strict(
  {
    template: strict(
      runSpecProperties,
      'The Run spec every point runs. `{{params.NAME}}` in `command`, `setup` and `env` values is replaced by the point’s value of NAME.',
    ),
    parameters: strict(
      {
        grid: optional(
          KeyedMap(
            PARAM_NAME,
            Type.Array(ParamValue, { minItems: 1, maxItems: 10000, uniqueItems: true }),
            'Values per parameter; every combination is a point (the cartesian product).',
          ),
        ),
        points: optional(
          Type.Array(KeyedMap(PARAM_NAME, ParamValue, 'One point: a value per parameter.'), {
            minItems: 1,
            maxItems: 10000,
            description:
              'Explicit points, each with the same parameter names. With `grid` too, each point is combined with every grid combination.',
          }),
        ),
      },
      'The points of the sweep: `grid` and/or `points` (at most 10,000 points in all).',
    ),
    maxConcurrent: optional(
      Type.Integer({
        minimum: 1,
        description:
          'At most this many points not finished at a time; the others wait (no child run yet) and are created, in order, as running ones finish. Default: no limit.',
      }),
    ),
    suspend: optional(Type.Boolean({ description: 'true cancels all live points and starts no new one.' })),
  },
  'A Run template and the parameter points to run it with.',
);

export const SweepSchema = strict(
  {
    apiVersion: Type.Literal(API_VERSION, { description: `Always \`${API_VERSION}\`.` }),
    kind: Type.Literal(Kind.Sweep, { description: 'Always `Sweep`.' }),
    // A point runs as `<sweep>-<8 hex>`, a Run name of at most 63 characters.
    metadata: Metadata(54, 'sweep'),
    spec: SweepSpecSchema,
  },
  'A parameter sweep: one child Run per point, named `<sweep>-<hash of its parameters>` (stable across edits).',
  { $id: 'https://adventuretime.dev/schemas/v1alpha1/sweep.json', title: 'Sweep' },
);

// ---------------------------------------------------------------------------------------------
// Backend

/** What the settings blocks of the descriptors in `L` add to `Backend.spec`: `{slurm?: …, gcpTpu?: …}`. */
type SettingsOf<D> = D extends { settings?: infer S } ? NonNullable<S> : never;
type SettingsBlocks<L extends readonly BackendSchemaPart[]> = {
  [S in SettingsOf<L[number]> as S['block']]: TOptional<S['schema']>;
};

function settingsBlocks<L extends readonly BackendSchemaPart[]>(list: L): SettingsBlocks<L> {
  const out: Record<string, TSchema> = {};
  for (const d of list) if (d.settings) out[d.settings.block] = Type.Optional(d.settings.schema);
  return out as SettingsBlocks<L>;
}

const ConnectionSchema = strict(
  {
    host: optional(
      Type.String({
        minLength: 1,
        pattern: '^[A-Za-z0-9._:\\[\\]-]+$',
        description:
          'Host name, address or `~/.ssh/config` alias. Required for `ssh` and `slurm`; a `gcp-tpu` backend reaches the workers of each node it creates instead.',
        'x-hint': 'a host name, an IP address or an ssh config alias (no spaces or shell characters)',
      }),
    ),
    port: optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'SSH port. Default 22.' })),
    user: optional(
      Type.String({
        pattern: '^[a-z_][a-z0-9_.-]*\\$?$',
        description: 'Login user. Default: from ssh config.',
      }),
    ),
    identityFile: optional(HostPath('Private key path on the controller. Default: the ssh agent.')),
    knownHostsFile: optional(HostPath('known_hosts file. Default `~/.ssh/known_hosts`.')),
    hostKeyPolicy: optional(
      StringEnum(
        ['strict', 'accept-new'] as const,
        '`strict` (default): the host key must be in known_hosts. `accept-new`: trust a first-seen key and record it.',
      ),
    ),
    proxyJump: optional(Type.String({ description: 'Jump host, `[user@]host[:port]`.' })),
    keepaliveSec: optional(Type.Integer({ minimum: 1, description: 'Keepalive interval. Default 15.' })),
  },
  'How the controller reaches the host over SSH.',
);

const PathsSchema = strict(
  {
    root: optional(
      Type.String({
        description:
          'Shared root on the cluster for code payloads and the runtime. Default `~/.adventuretime`.',
      }),
    ),
    work: optional(Type.String({ description: 'Scratch dir for per-job work dirs. Default `<root>/work`.' })),
    log: optional(Type.String({ description: 'Dir for scheduler output files. Default `<root>/logs`.' })),
  },
  'Paths on the backend.',
);

/** The fields every Backend has, whatever its type; `type` is one of the list's. */
const commonBackendFields = <const T extends readonly string[]>(types: T) => ({
  type: StringEnum(types, 'Adapter type.'),
  priority: optional(
    Type.Integer({ description: 'Higher is tried first when a run’s order does not decide. Default 0.' }),
  ),
  cluster: optional(
    Type.String({ description: 'Cluster name, for `backendSelector.constraints.clusters`.' }),
  ),
  maxConcurrent: optional(Type.Integer({ minimum: 1, description: 'Attempts running here at once.' })),
  degradeAfterFailures: optional(
    Type.Integer({
      minimum: 1,
      description:
        'Failed runs in a row (user errors or infrastructure, not preemptions) after which the backend is marked `Degraded` and tried after the others. Default 3.',
    }),
  ),
  capabilities: optional(
    strict(
      {
        gpus: optional(Type.Integer({ minimum: 0, description: 'GPUs per node.' })),
        gpuTypes: optional(Type.Array(Type.String(), { description: 'GPU types available.' })),
        vramGiB: optional(Type.Number({ minimum: 0, description: 'Memory per GPU.' })),
        ramGiB: optional(Type.Number({ minimum: 0, description: 'Host memory per node.' })),
        cpus: optional(Type.Number({ minimum: 0, description: 'Cores per node.' })),
        nodes: optional(Type.Integer({ minimum: 1, description: 'Nodes a job may span.' })),
        cuda: optional(Type.Boolean({ description: 'CUDA is available.' })),
        preemptible: optional(Type.Boolean({ description: 'Capacity here may be preempted.' })),
        costPerHour: optional(
          Type.Number({ minimum: 0, description: 'Price per node-hour, for guardrails.' }),
        ),
      },
      'What the backend offers, for the solver (a hint where the backend can also report capacity).',
    ),
  ),
  connection: optional(ConnectionSchema),
  paths: optional(PathsSchema),
  setup: optional(
    Type.Array(Type.String({ minLength: 1 }), {
      description:
        "Shell steps `adv exec` runs before every job here, before the Environment's and the run's, in the same shell session. `{{ NAME }}` may name a contract variable (`ADV_RUN`, …) or one of `passEnv`.",
    }),
  ),
  uv: optional(
    strict(
      {
        version: optional(
          Type.String({
            pattern: '^[0-9]+\\.[0-9]+\\.[0-9]+$',
            description:
              'The uv version `adv exec` installs (under `ADV_CACHE_DIR`) when a uv project runs on a host without uv. Default: the version this release was tested with.',
            'x-hint': 'write a uv release, e.g. "0.13.9"',
          }),
        ),
      },
      'How uv is provided on this backend.',
    ),
  ),
  datasetCache: optional(DatasetCacheSchema),
  passEnv: optional(
    Type.Array(Type.String({ pattern: ENV_NAME, maxLength: 128 }), {
      description:
        "Variables of the controller's own environment passed to jobs on this backend; nothing else of the controller's environment reaches a job.",
    }),
  ),
});

/**
 * The Backend spec for a list of backend types: the common fields, then each type's settings
 * block (in the list's order), then `suspend`.
 */
function backendSpecSchema<const L extends readonly BackendSchemaPart[]>(list: L) {
  return strict(
    {
      ...commonBackendFields(list.map((d) => d.type as L[number]['type'])),
      ...settingsBlocks(list),
      suspend: optional(Type.Boolean({ description: 'true: no new attempts are placed here.' })),
    },
    'A place to run. The settings block named like `type` configures it (`slurm:`, `gcpTpu:`, …).',
  );
}

const backendSchema = <S extends TSchema>(spec: S) =>
  strict(
    {
      apiVersion: Type.Literal(API_VERSION, { description: `Always \`${API_VERSION}\`.` }),
      kind: Type.Literal(Kind.Backend, { description: 'Always `Backend`.' }),
      metadata: Metadata(253, 'backend'),
      spec,
    },
    'A place to run jobs: the local machine, an SSH host, a SLURM cluster, TPU VMs, Kubernetes, Vast.ai, or pull agents.',
    { $id: 'https://adventuretime.dev/schemas/v1alpha1/backend.json', title: 'Backend' },
  );

/** A backend type of this build (`registry.ts`). */
export type BackendType = (typeof BACKENDS)[number]['type'];

/** `Backend.spec` with this build's backend types (`registry.ts`). */
export const BackendSpecSchema = backendSpecSchema(BACKENDS);
export const BackendSchema = backendSchema(BackendSpecSchema);

// ---------------------------------------------------------------------------------------------
// Storage

export const StorageSpecSchema = strict(
  {
    type: StringEnum(['s3', 'file'] as const, 'Store type.'),
    file: optional(
      strict(
        {
          path: Type.String({
            minLength: 1,
            description: 'Directory of the store. Relative paths are relative to the controller’s data dir.',
          }),
        },
        '`file` settings.',
      ),
    ),
    s3: optional(
      strict(
        {
          bucket: Type.String({
            minLength: 3,
            maxLength: 63,
            pattern: '^[a-z0-9][a-z0-9.-]*[a-z0-9]$',
            description: 'Bucket.',
          }),
          endpoint: optional(
            Type.String({ description: 'Endpoint URL for S3-compatible stores (MinIO, R2, …).' }),
          ),
          region: optional(Type.String({ description: 'Region. Default `us-east-1`.' })),
          prefix: optional(Type.String({ description: 'Key prefix for everything AdventureTime writes.' })),
          forcePathStyle: optional(
            Type.Boolean({ description: 'Path-style addressing (MinIO). Default false.' }),
          ),
          credentialsSecret: optional(
            Type.String({
              pattern: ENV_NAME,
              description:
                'Secret name prefix: `<NAME>_ACCESS_KEY_ID` / `<NAME>_SECRET_ACCESS_KEY`. Default: the SDK chain.',
            }),
          ),
        },
        '`s3` settings.',
      ),
    ),
  },
  'Where checkpoints, logs, heartbeats and code payloads live.',
);

export const StorageSchema = strict(
  {
    apiVersion: Type.Literal(API_VERSION, { description: `Always \`${API_VERSION}\`.` }),
    kind: Type.Literal(Kind.Storage, { description: 'Always `Storage`.' }),
    metadata: Metadata(253, 'storage'),
    spec: StorageSpecSchema,
  },
  'The object store: S3-compatible or a local directory (`file`).',
  { $id: 'https://adventuretime.dev/schemas/v1alpha1/storage.json', title: 'Storage' },
);

// ---------------------------------------------------------------------------------------------
// Environment

export const EnvironmentSpecSchema = strict(
  {
    version: Type.Integer({
      minimum: 1,
      maximum: 999999999,
      description:
        'The version of this recipe, unique per name. Keep old versions in the repo: runs pinned to `name@N` keep using them; runs naming `name` alone take the highest.',
    }),
    description: optional(Type.String({ maxLength: 4096, description: 'What the environment is for.' })),
    modules: optional(
      Type.Array(
        Type.String({
          minLength: 1,
          maxLength: 256,
          pattern: '^[A-Za-z0-9_.+/@:-]+$',
          'x-hint': 'write a module name as `module load` takes it, e.g. "cuda/12.4"',
        }),
        {
          description:
            'Environment modules (Lmod or environment-modules) to load, in order, as `module load <name>` steps before `env` and `setup`.',
        },
      ),
    ),
    env: optional(
      KeyedMap(
        ENV_NAME,
        Type.String({ maxLength: 65536 }),
        'Variables exported after the modules are loaded, in the same shell session as the steps and the command. Names starting with `ADV_` are reserved; `{{ NAME }}` and `{{ secrets.NAME }}` are substituted on the host (raw).',
      ),
    ),
    setup: optional(
      Type.Array(Type.String({ minLength: 1 }), {
        description:
          "Shell steps run after the Backend's and before the run's, in one shell session; the first that fails ends the attempt as `SetupFailed`. `{{ NAME }}` names a variable of the job's environment (a contract variable such as `ADV_RUN`, or one of the run's `env` and `secrets`), `{{ secrets.NAME }}` a secret the run lists: substituted shell-quoted on the host.",
      }),
    ),
    uv: optional(
      strict(
        {
          groups: optional(
            Type.Array(Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]*$', maxLength: 128 }), {
              uniqueItems: true,
              description: 'Dependency groups of the uv project to sync (`uv sync --group <g>`).',
            }),
          ),
          python: optional(
            Type.String({
              pattern: '^[A-Za-z0-9][A-Za-z0-9.+@_-]*$',
              maxLength: 64,
              description: 'The Python version uv syncs with (`--python`), e.g. `3.12`.',
              'x-hint': 'write a Python version such as "3.12"',
            }),
          ),
          project: optional(
            StringEnum(
              ['auto', 'off'] as const,
              '`auto` (default): a code tree with `pyproject.toml` and `uv.lock` is synced and the command runs in that environment. `off`: no uv.',
            ),
          ),
        },
        'How the code tree, when it is a uv project, is synced on the host: once per lock file, cached per host.',
      ),
    ),
    image: optional(
      Type.String({
        minLength: 1,
        maxLength: 1024,
        pattern: '^[^\\s]+$',
        description:
          "The container image the job runs in on backends that run containers (`volcano`: it replaces the Backend's `volcano.image`). Other backends ignore it.",
        'x-hint': 'write an image reference, e.g. "ghcr.io/lab/train:2024.06"',
      }),
    ),
  },
  'A named, versioned recipe a run runs in: modules, variables, setup steps, uv settings and a container image.',
);

export const EnvironmentSchema = strict(
  {
    apiVersion: Type.Literal(API_VERSION, { description: `Always \`${API_VERSION}\`.` }),
    kind: Type.Literal(Kind.Environment, { description: 'Always `Environment`.' }),
    metadata: Metadata(63, 'environment', environmentNameField),
    spec: EnvironmentSpecSchema,
  },
  'A named, versioned environment a Run runs in: the same setup on every backend (`spec.environment: name` or `name@version`).',
  { $id: 'https://adventuretime.dev/schemas/v1alpha1/environment.json', title: 'Environment' },
);

// ---------------------------------------------------------------------------------------------
// Dataset

export const DatasetSchema = strict(
  {
    apiVersion: Type.Literal(API_VERSION, { description: `Always \`${API_VERSION}\`.` }),
    kind: Type.Literal(Kind.Dataset, { description: 'Always `Dataset`.' }),
    metadata: Metadata(63, 'dataset', datasetNameField),
    spec: DatasetSpecSchema,
  },
  'Input data a Run names in `inputs`: cached per host by content and materialised into the job dir.',
  { $id: 'https://adventuretime.dev/schemas/v1alpha1/dataset.json', title: 'Dataset' },
);

// ---------------------------------------------------------------------------------------------
// Provider and Alert (notifications, controller/notify/)

/** Provider types: where a notification goes and in what shape. */
export const PROVIDER_TYPES = ['slack', 'webhook', 'github'] as const;

/** The events an Alert can ask for (controller/notify/events.ts derives them from status). */
export const NOTIFY_EVENTS = [
  'RunFailed',
  'RunSucceeded',
  'RunPreempted',
  'RunStalled',
  'ProvisioningStuck',
  'HeartbeatLost',
  'DagDone',
  'SweepDone',
] as const;

export const ProviderSpecSchema = strict(
  {
    type: StringEnum(
      PROVIDER_TYPES,
      '`slack`: POSTs `{"text": …}` to a Slack-compatible incoming webhook. `webhook`: POSTs the event as JSON, signed with HMAC-SHA256 when `secretRef` is set (`X-AdventureTime-Signature: sha256=<hex>`). `github`: sets a commit status on the spec commit of the run.',
    ),
    address: optional(
      Type.String({
        minLength: 1,
        maxLength: 2048,
        pattern: '^https?://[^\\s]+$',
        description:
          '`webhook`: the URL events are POSTed to. `slack`: the webhook URL, when it is not secret (prefer `secretRef`). `github`: the specs repository, `https://github.com/<owner>/<repo>` (any host: only the path is read).',
        'x-hint': 'write an http(s) URL, e.g. "https://hooks.example.com/adventuretime"',
      }),
    ),
    apiUrl: optional(
      Type.String({
        minLength: 1,
        maxLength: 2048,
        pattern: '^https?://[^\\s]+$',
        description:
          '`github` only: the API base URL. Default `https://api.github.com`; GitHub Enterprise: `https://<host>/api/v3`.',
      }),
    ),
    secretRef: optional(
      strict(
        {
          name: Type.String({
            pattern: ENV_NAME,
            description:
              'The secret name, resolved by the controller (`--secrets-file`, `--secrets-dir`, `--secrets-env`); its value is never written anywhere.',
          }),
        },
        '`slack`: the webhook URL. `webhook`: the HMAC key. `github`: the token (sent as `Authorization: Bearer`).',
      ),
    ),
    timeoutSec: optional(
      Type.Integer({ minimum: 1, maximum: 300, description: 'How long one delivery may take. Default 10.' }),
    ),
    suspend: optional(
      Type.Boolean({ description: 'true holds deliveries through this provider (they stay pending).' }),
    ),
  },
  'Where notifications go: a Slack-compatible webhook, a signed generic webhook, or GitHub commit statuses.',
);

export const ProviderSchema = strict(
  {
    apiVersion: Type.Literal(API_VERSION, { description: `Always \`${API_VERSION}\`.` }),
    kind: Type.Literal(Kind.Provider, { description: 'Always `Provider`.' }),
    metadata: Metadata(253, 'provider'),
    spec: ProviderSpecSchema,
  },
  'A notification endpoint Alerts send through. It names an endpoint and a credential: an infrastructure kind (who may change it: loop/desired/infra-source.ts).',
  { $id: 'https://adventuretime.dev/schemas/v1alpha1/provider.json', title: 'Provider' },
);

export const AlertSpecSchema = strict(
  {
    providerRef: strict(
      {
        name: Type.String({
          minLength: 1,
          maxLength: 253,
          pattern: DNS1123_SUBDOMAIN,
          description: 'The Provider.',
        }),
      },
      'The Provider the events are sent through.',
    ),
    events: Type.Array(StringEnum(NOTIFY_EVENTS, 'An event.'), {
      minItems: 1,
      uniqueItems: true,
      description:
        'Which events: `RunFailed`, `RunSucceeded`, `RunPreempted`, `RunStalled` (a human must act), `ProvisioningStuck` (queued past `policy.queuedTimeoutSec`), `HeartbeatLost`, `DagDone`, `SweepDone`.',
    }),
    selector: optional(
      Type.String({
        maxLength: 4096,
        description:
          'A label selector as `adv get -l` takes it (`team=ml,size!=big`, `key`, `!key`): only objects whose labels match. Default: every object.',
      }),
    ),
    suspend: optional(Type.Boolean({ description: 'true: no new events are recorded for this alert.' })),
  },
  'Which events notify, for which objects, through which Provider.',
);

export const AlertSchema = strict(
  {
    apiVersion: Type.Literal(API_VERSION, { description: `Always \`${API_VERSION}\`.` }),
    kind: Type.Literal(Kind.Alert, { description: 'Always `Alert`.' }),
    metadata: Metadata(253, 'alert'),
    spec: AlertSpecSchema,
  },
  'Events of runs, DAGs and sweeps to send through a Provider, each delivered once (recorded on the status branch).',
  { $id: 'https://adventuretime.dev/schemas/v1alpha1/alert.json', title: 'Alert' },
);

// ---------------------------------------------------------------------------------------------

export type RunSpec = Static<typeof RunSpecSchema>;
export type Run = Static<typeof RunSchema>;
export type DagNode = Static<typeof DagNodeSchema>;
export type DagSpec = Static<typeof DagSpecSchema>;
export type Dag = Static<typeof DagSchema>;
export type BackendSpec = Static<typeof BackendSpecSchema>;
export type Backend = Static<typeof BackendSchema>;
export type StorageSpec = Static<typeof StorageSpecSchema>;
export type Storage = Static<typeof StorageSchema>;
export type Resources = Static<typeof ResourcesSchema>;
export type Policy = Static<typeof PolicySchema>;
export type Parallelism = Static<typeof ParallelismSchema>;
export type EnvironmentSpec = Static<typeof EnvironmentSpecSchema>;
export type Environment = Static<typeof EnvironmentSchema>;
export type ProviderSpec = Static<typeof ProviderSpecSchema>;
export type Provider = Static<typeof ProviderSchema>;
export type AlertSpec = Static<typeof AlertSpecSchema>;
export type Alert = Static<typeof AlertSchema>;
export type SweepSpec = Static<typeof SweepSpecSchema>;
export type Sweep = Static<typeof SweepSchema>;
export type DatasetSpec = Static<typeof DatasetSpecSchema>;
export type Dataset = Static<typeof DatasetSchema>;
export type NotifyEvent = (typeof NOTIFY_EVENTS)[number];

/** Any resource, discriminated by kind. */
export type SpecObject = Run | Dag | Backend | Storage | Environment | Provider | Alert | Sweep | Dataset;

/** Schema per kind, for validation and generation (with this build's backend types). */
export const SCHEMAS = {
  Run: RunSchema,
  DAG: DagSchema,
  Backend: BackendSchema,
  Storage: StorageSchema,
  Environment: EnvironmentSchema,
  Provider: ProviderSchema,
  Alert: AlertSchema,
  Sweep: SweepSchema,
  Dataset: DatasetSchema,
} as const satisfies Record<Kind, TSchema>;

const schemasByList = new WeakMap<BackendList, Record<Kind, TSchema>>();

/**
 * Schema per kind for a list of backend types: `SCHEMAS` for this build's `BACKENDS`; for another
 * list (a test that registers a type), the same kinds with that list's Backend. Built once per list.
 */
export function schemasFor(list: BackendList): Record<Kind, TSchema> {
  if (list === BACKENDS) return SCHEMAS;
  let schemas = schemasByList.get(list);
  if (!schemas) {
    schemas = { ...SCHEMAS, Backend: backendSchema(backendSpecSchema(list)) };
    schemasByList.set(list, schemas);
  }
  return schemas;
}
