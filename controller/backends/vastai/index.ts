/**
 * `vastai`: rented GPUs through the Vast.ai REST API — search offers that fit the run, rent one per
 * attempt, run it over SSH through the shared remote-host module, destroy it when the attempt
 * ends. See `adapter.ts`.
 */
import { Type } from '@sinclair/typebox';
import { ENV_NAME, optional, strict } from '../../spec/schema-kit.js';
import { declaredGpuTypes, ONE_HOST_TRAITS, type BackendDescriptor } from '../types.js';
import { VastBackend } from './adapter.js';
import { vastGpuNames } from './query.js';

/** The `vastai:` block (required for this type). */
export const vastaiSettings = {
  block: 'vastai',
  required: true,
  schema: strict(
    {
      apiKeySecret: Type.String({
        pattern: ENV_NAME,
        description:
          "Name of the secret holding the API key (resolved from the controller's secrets, never written in a spec).",
      }),
      apiUrl: optional(
        Type.String({
          pattern: '^https?://[^\\s]+$',
          description: 'API base URL. Default `$VAST_URL`, else `https://console.vast.ai`.',
        }),
      ),
      gpuName: optional(Type.String({ description: 'Offer filter, e.g. `RTX_4090`.' })),
      numGpus: optional(Type.Integer({ minimum: 1, description: 'GPUs per instance.' })),
      maxDollarsPerHour: optional(Type.Number({ minimum: 0, description: 'Price cap.' })),
      minReliability: optional(
        Type.Number({ minimum: 0, maximum: 1, description: 'Offer reliability floor.' }),
      ),
      image: optional(
        Type.String({
          pattern: '^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$',
          description:
            'Docker image; it needs Python and Node.js ≥ 20 (the bootstrap runs `adv exec` with Node). Default `nikolaik/python-nodejs:python3.12-nodejs22`.',
        }),
      ),
      diskGiB: optional(Type.Integer({ minimum: 8, description: 'Disk size, GB. Default 32.' })),
      minCuda: optional(
        Type.Number({
          minimum: 0,
          description: 'Lowest CUDA version the host driver must support, e.g. 12.1.',
        }),
      ),
      verifiedOnly: optional(Type.Boolean({ description: 'Only hosts Vast.ai has verified. Default true.' })),
      interruptible: optional(
        Type.Boolean({
          description:
            'Rent interruptible (bid) instances for runs with `policy.preemptible: true`; others are rented on demand.',
        }),
      ),
      bidMarginPct: optional(
        Type.Number({
          minimum: 0,
          maximum: 1000,
          description: "An interruptible rental's bid: the offer's `min_bid` plus this margin. Default 10.",
        }),
      ),
      loadingTimeoutSec: optional(
        Type.Integer({
          minimum: 1,
          description:
            'An instance still loading after this long is destroyed, its machine excluded, and the next offer rented. Default 600.',
        }),
      ),
      readyTimeoutSec: optional(
        Type.Integer({
          minimum: 1,
          description: 'How long a rental may take to run with an SSH endpoint. Default 1200.',
        }),
      ),
    },
    '`vastai` settings.',
  ),
} as const;

/** `vastai`: one rented instance per job. */
export const vastaiBackend: BackendDescriptor<'vastai', typeof vastaiSettings> = {
  type: 'vastai',
  settings: vastaiSettings,
  needsConnection: false,
  traits: {
    ...ONE_HOST_TRAITS,
    // `gpuName` (with the names Vast lists for it) limits the rentals; without it, or a declared
    // `capabilities.gpuTypes`, the marketplace rents any type a run names (none fits: NoCapacity).
    gpuTypes: (spec) => {
      const name = spec.vastai?.gpuName;
      const types = [...declaredGpuTypes(spec), ...(name ? [name, ...vastGpuNames(name)] : [])];
      return types.length ? types : undefined;
    },
  },
  create(spec, ctx) {
    return new VastBackend(spec.metadata.name, spec.spec, ctx);
  },
};
