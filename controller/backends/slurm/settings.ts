/**
 * The `slurm:` settings block of a Backend, the rules the schema cannot say, and the traits they
 * imply (the descriptor declares them; the adapter reads them for the checkpoint mode).
 */
import { Type } from '@sinclair/typebox';
import { KeyedMap, optional, strict } from '../../spec/schema-kit.js';
import type { Backend as BackendObject } from '../../spec/schema.js';
import { CheckpointMode } from '../checkpoint-mode.js';
import { declaredGpuTypes, type BackendTraits, type RuleReport } from '../types.js';

const PartitionSchema = strict(
  {
    name: Type.String({ pattern: '^[A-Za-z0-9_.-]+$', description: 'SLURM partition name.' }),
    preemptible: optional(Type.Boolean({ description: 'Jobs here may be preempted.' })),
    gpuType: optional(Type.String({ description: 'GPU type of this partition’s nodes.' })),
    gpusPerNode: optional(Type.Integer({ minimum: 0, description: 'GPUs per node.' })),
    maxTime: optional(Type.String({ description: 'Partition time limit, SLURM format.' })),
  },
  'A SLURM partition the backend may use.',
);

const SbatchDefaultsSchema = strict(
  {
    partition: optional(
      Type.String({
        pattern: '^[A-Za-z0-9_.,-]+$',
        description: '`--partition` (several separated by commas).',
        'x-hint': 'use partition names of letters, digits, ".", "_" and "-", separated by commas',
      }),
    ),
    account: optional(
      Type.String({
        pattern: '^[A-Za-z0-9_.-]+$',
        description: '`--account`.',
        'x-hint': 'use letters, digits, ".", "_" and "-" only',
      }),
    ),
    qos: optional(
      Type.String({
        pattern: '^[A-Za-z0-9_.-]+$',
        description: '`--qos`.',
        'x-hint': 'use letters, digits, ".", "_" and "-" only',
      }),
    ),
    time: optional(
      Type.String({
        pattern: '^([0-9]+-)?[0-9]+(:[0-9]{2}){0,2}$',
        description: '`--time`, e.g. `24:00:00` or `2-00:00:00`.',
        'x-hint': 'use SLURM time format, e.g. "24:00:00" or "2-00:00:00"',
      }),
    ),
    mem: optional(
      Type.String({
        pattern: '^[0-9]+[KMGT]?$',
        description: '`--mem`, e.g. `64G`.',
        'x-hint': 'write e.g. "64G"',
      }),
    ),
    cpusPerTask: optional(Type.Integer({ minimum: 1, description: '`--cpus-per-task`.' })),
    exclude: optional(
      Type.String({
        pattern: '^[A-Za-z0-9_.,\\[\\]-]+$',
        description: '`--exclude` node list.',
        'x-hint': 'write a SLURM node list, e.g. "n[1-3],gpu07"',
      }),
    ),
    constraint: optional(Type.String({ description: '`--constraint`.' })),
    extra: optional(
      Type.Array(Type.String({ pattern: '^--[a-z][a-z-]*(=.*)?$' }), {
        description: 'Further `--flag=value` directives, each passed as one argument.',
      }),
    ),
  },
  'Directives every job gets unless the run says otherwise.',
);

/** The `slurm:` block: partitions, sbatch defaults, GRES names, signal grace, coordinator port. */
export const slurmSettings = {
  block: 'slurm',
  required: false,
  schema: strict(
    {
      partitions: optional(Type.Array(PartitionSchema, { description: 'Partitions this backend may use.' })),
      sbatchDefaults: optional(SbatchDefaultsSchema),
      gresMapping: optional(
        KeyedMap(
          '^[A-Za-z0-9_-]+$',
          Type.String({ pattern: '^[A-Za-z0-9_:-]+$' }),
          'GPU type → GRES name, e.g. `{H100: "gpu:h100"}`; `--gres=<name>:<count>`. `default` applies to `any`.',
        ),
      ),
      signalGraceSec: optional(
        Type.Integer({
          minimum: 1,
          description: 'Seconds before the time limit SLURM sends USR1 (`--signal=B:USR1@N`). Default 120.',
        }),
      ),
      accounting: optional(
        Type.Boolean({
          description: 'Use `sacct` (true) or `scontrol show job` (false). Default: detect.',
        }),
      ),
      coordinatorPort: optional(
        Type.Integer({
          minimum: 1024,
          maximum: 65535,
          description: 'JAX coordinator port. Default 29500.',
        }),
      ),
    },
    '`slurm` settings.',
  ),
} as const;

/**
 * What a path may not hold to be written into an `#SBATCH --output=` line: a line break would end
 * the directive and run the rest as the batch script's own shell code; a space, quote, `#` or `%`
 * would make sbatch read another path than the one meant.
 */
// eslint-disable-next-line no-control-regex
const SBATCH_UNSAFE = /[\u0000-\u0020\u007f-\u009f\u2028\u2029"'\\#%]/u;
/** `--constraint` syntax: features joined by `&`, `|`, `,`, with `[ ]`, `( )`, `*count` and `!`. */
const CONSTRAINT = /^[A-Za-z0-9_.,:&|*!()[\]-]+$/;

const codePoint = (ch: string): string =>
  `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;

/**
 * Values written unquoted into `#SBATCH` lines (the paths of the job dir, `--constraint`) fit in
 * one line and mean one thing to sbatch: anything else would end the directive and run as the batch
 * script's own shell code, or point sbatch at something else.
 */
function sbatchLineRules(spec: BackendObject['spec'], report: RuleReport): void {
  for (const field of ['root', 'work'] as const) {
    const bad = spec.paths?.[field]?.match(SBATCH_UNSAFE)?.[0];
    if (bad !== undefined)
      report(
        'SbatchUnsafeValue',
        ['spec', 'paths', field],
        `paths.${field} holds ${codePoint(bad)}, which cannot be written into the #SBATCH --output line of a job`,
        'use a path without spaces, quotes, line breaks, "#", "%" or "\\"',
      );
  }
  const constraint = spec.slurm?.sbatchDefaults?.constraint;
  if (constraint !== undefined && !CONSTRAINT.test(constraint))
    report(
      'SbatchUnsafeValue',
      ['spec', 'slurm', 'sbatchDefaults', 'constraint'],
      'constraint is not a SLURM feature expression: it would be written into an #SBATCH line as is',
      'write features joined by "&", "|" or ",", e.g. "a100&ib" or "[rack1|rack2]" (no spaces, quotes or line breaks)',
    );
}

/** A partition listed twice is a mistake (which of its settings would count?); #SBATCH values fit a line. */
export function slurmRules(spec: BackendObject['spec'], report: RuleReport): void {
  sbatchLineRules(spec, report);
  const parts = spec.slurm?.partitions ?? [];
  parts.forEach((p, i) => {
    if (parts.findIndex((q) => q.name === p.name) !== i)
      report(
        'DuplicatePartition',
        ['spec', 'slurm', 'partitions', i, 'name'],
        `partition "${p.name}" is listed twice`,
        'remove the duplicate',
      );
  });
}

/** `slurm`: a batch scheduler holds jobs until they fit, and a job may span nodes. */
export const SLURM_TRAITS: BackendTraits = {
  queuesWhenFull: true,
  multiNode: true,
  tpus: false,
  billsFrom: 'started',
  // Every node runs the job from its job dir, on the cluster's shared file system.
  checkpointModes: () => [CheckpointMode.Shared, CheckpointMode.PerProcess],
  // SLURM takes long names; 63 keeps the names every earlier version gave (adoption finds them).
  jobNameMax: 63,
  // The partitions' GPU types and the types `gresMapping` maps (its `default` is not a type).
  gpuTypes: (spec) => [
    ...declaredGpuTypes(spec),
    ...(spec.slurm?.partitions ?? []).flatMap((p) => (p.gpuType ? [p.gpuType] : [])),
    ...Object.keys(spec.slurm?.gresMapping ?? {}).filter((t) => t !== 'default'),
  ],
};
