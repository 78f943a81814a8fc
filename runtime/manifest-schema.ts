/**
 * The checkpoint manifest, declared once: its TypeScript type is inferred from this schema, and
 * `crds/checkpointmanifest.schema.json` is generated from it (`npm run gen`).
 */
import { Type, type Static } from '@sinclair/typebox';

export const ManifestFileSchema = Type.Object(
  {
    path: Type.String({ description: 'Path inside the step dir, `/`-separated, never `..`.' }),
    size: Type.Integer({ minimum: 0, description: 'Size in bytes.' }),
    sha256: Type.String({ pattern: '^[0-9a-f]{64}$', description: 'Hex sha256 of the content.' }),
  },
  { additionalProperties: false, description: 'One file of the checkpoint.' },
);

export const CheckpointManifestSchema = Type.Object(
  {
    apiVersion: Type.Literal('adventuretime.dev/v1alpha1', {
      description: 'Always `adventuretime.dev/v1alpha1`.',
    }),
    kind: Type.Literal('CheckpointManifest', { description: 'Always `CheckpointManifest`.' }),
    run: Type.String({ description: 'Run the checkpoint belongs to.' }),
    step: Type.Integer({ minimum: 0, description: 'Training step (the step dir name).' }),
    attempt: Type.Integer({ minimum: 1, description: 'Attempt that wrote it.' }),
    createdAt: Type.String({ description: 'When the manifest was written (ISO 8601).' }),
    totalBytes: Type.Integer({ minimum: 0, description: 'Sum of the file sizes.' }),
    files: Type.Array(ManifestFileSchema, { description: 'Every file, with size and sha256.' }),
    processes: Type.Optional(
      Type.Integer({
        minimum: 2,
        description:
          'How many processes wrote it (a multi-host gang commit: the union of their parts). Absent: one.',
      }),
    ),
    forkedFrom: Type.Optional(
      Type.Object(
        {
          run: Type.String({ description: 'The run it was copied from.' }),
          step: Type.Integer({ minimum: 0, description: 'Its step there (the same as here).' }),
          attempt: Type.Integer({ minimum: 1, description: 'The attempt of that run that wrote it.' }),
        },
        {
          additionalProperties: false,
          description:
            "Set when the controller copied this checkpoint from another run's for a fork (`spec.forkFrom`); `attempt` above is then the fork's attempt it was copied for.",
        },
      ),
    ),
    metadata: Type.Record(Type.String(), Type.Unknown(), {
      description:
        'Free-form, from `adv-metadata.json` in the step dir: mesh, partitioning, framework versions.',
    }),
  },
  {
    additionalProperties: false,
    $id: 'https://adventuretime.dev/schemas/v1alpha1/checkpointmanifest.json',
    title: 'CheckpointManifest',
    description:
      'Written LAST into `runs/<run>/ckpt/<step>/manifest.json`: the checkpoint exists iff this verifies.',
  },
);

export type ManifestFile = Static<typeof ManifestFileSchema>;
export type CheckpointManifest = Static<typeof CheckpointManifestSchema>;
