/** The `slurm:` settings block of a Backend, and the rules the schema cannot say. */
import { Type } from '@sinclair/typebox';
import { KeyedMap, optional, strict } from '../../spec/schema-kit.js';
import type { Backend as BackendObject } from '../../spec/schema.js';
import type { RuleReport } from '../types.js';

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

/** A partition listed twice is a mistake (which of its settings would count?). */
export function slurmRules(spec: BackendObject['spec'], report: RuleReport): void {
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
