/**
 * `volcano`: a Kubernetes Volcano Job rendered from the spec, applied with `kubectl`. Declared
 * (settings, rules, traits); its adapter is not built yet, so a Backend of this type validates but
 * takes no work ("no adapter for type volcano in this build yet").
 */
import { Type } from '@sinclair/typebox';
import { optional, strict } from '../../spec/schema-kit.js';
import type { BackendDescriptor } from '../types.js';

/** The `volcano:` block (required for this type). */
export const volcanoSettings = {
  block: 'volcano',
  required: true,
  schema: strict(
    {
      context: optional(Type.String({ description: 'kubectl context.' })),
      namespace: Type.String({ description: 'Namespace for Volcano Jobs.' }),
      queue: optional(Type.String({ description: 'Volcano queue.' })),
      image: Type.String({ description: 'Container image with Node.js ≥ 20.' }),
      gpuResourceName: optional(Type.String({ description: 'Default `nvidia.com/gpu`.' })),
    },
    '`volcano` settings.',
  ),
} as const;

/** `volcano`: a gang scheduler, so it queues jobs until they fit and a job may span pods. */
export const volcanoBackend: BackendDescriptor<'volcano', typeof volcanoSettings> = {
  type: 'volcano',
  settings: volcanoSettings,
  needsConnection: false,
  traits: {
    queuesWhenFull: true,
    multiNode: true,
    tpus: false,
    reportsCapacity: false,
    // A Kubernetes name.
    jobNameMax: 63,
  },
};
