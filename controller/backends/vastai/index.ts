/**
 * `vastai`: rented GPUs through the Vast.ai REST API (search offers, rent, wait, terminate), then
 * the ssh path to the instance. Declared (settings, rules, traits); its adapter is not built yet,
 * so a Backend of this type validates but takes no work ("no adapter for type vastai in this build yet").
 */
import { Type } from '@sinclair/typebox';
import { ENV_NAME, optional, strict } from '../../spec/schema-kit.js';
import { ONE_HOST_TRAITS, type BackendDescriptor } from '../types.js';

/** The `vastai:` block (required for this type). */
export const vastaiSettings = {
  block: 'vastai',
  required: true,
  schema: strict(
    {
      apiKeySecret: Type.String({
        pattern: ENV_NAME,
        description: 'Name of the secret holding the API key.',
      }),
      gpuName: optional(Type.String({ description: 'Offer filter, e.g. `RTX_4090`.' })),
      numGpus: optional(Type.Integer({ minimum: 1, description: 'GPUs per instance.' })),
      maxDollarsPerHour: optional(Type.Number({ minimum: 0, description: 'Price cap.' })),
      minReliability: optional(
        Type.Number({ minimum: 0, maximum: 1, description: 'Offer reliability floor.' }),
      ),
      image: optional(Type.String({ description: 'Docker image.' })),
      diskGiB: optional(Type.Integer({ minimum: 1, description: 'Disk size.' })),
    },
    '`vastai` settings.',
  ),
} as const;

/** `vastai`: one rented instance per job. */
export const vastaiBackend: BackendDescriptor<'vastai', typeof vastaiSettings> = {
  type: 'vastai',
  settings: vastaiSettings,
  needsConnection: false,
  traits: ONE_HOST_TRAITS,
};
