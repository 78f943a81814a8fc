/**
 * `gcp-tpu`: TPU VMs through the `gcloud` CLI (created on demand, spot or not, a job on every
 * worker of a slice). Declared (settings, rules, traits); its adapter is not built yet, so a
 * Backend of this type validates but takes no work ("no adapter for type gcp-tpu in this build yet").
 */
import { Type } from '@sinclair/typebox';
import { optional, strict } from '../../spec/schema-kit.js';
import type { BackendDescriptor } from '../types.js';

/** The `gcpTpu:` block (required for this type). */
export const gcpTpuSettings = {
  block: 'gcpTpu',
  required: true,
  schema: strict(
    {
      project: Type.String({ description: 'GCP project.' }),
      zone: Type.String({ description: 'Zone, e.g. `us-central2-b`.' }),
      acceleratorType: Type.String({ description: 'e.g. `v4-32`.' }),
      runtimeVersion: optional(Type.String({ description: 'TPU VM runtime version.' })),
      spot: optional(Type.Boolean({ description: 'Create spot VMs.' })),
      chips: optional(Type.Integer({ minimum: 1, description: 'Chips per host.' })),
    },
    '`gcp-tpu` settings.',
  ),
} as const;

/** `gcp-tpu`: the one type with TPU chips; a slice spans hosts; spot VMs are preemptible capacity. */
export const gcpTpuBackend: BackendDescriptor<'gcp-tpu', typeof gcpTpuSettings> = {
  type: 'gcp-tpu',
  settings: gcpTpuSettings,
  needsConnection: false,
  traits: {
    queuesWhenFull: false,
    multiNode: true,
    tpus: true,
    reportsCapacity: false,
    jobNameMax: 63,
    preemptible: (spec) => spec.gcpTpu?.spot === true || spec.capabilities?.preemptible === true,
  },
};
