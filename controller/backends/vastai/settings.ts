/** The `vastai:` settings block of a Backend, its defaults, and how the adapter reads them. */
import { Type, type Static } from '@sinclair/typebox';
import { ENV_NAME, optional, strict } from '../../spec/schema-kit.js';

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

/** The `vastai:` block as the adapter gets it. */
export type VastSettings = Static<typeof vastaiSettings.schema>;

/** The image when the Backend names none: Python and Node.js (the bootstrap needs Node ≥ 20). */
export const DEFAULT_IMAGE = 'nikolaik/python-nodejs:python3.12-nodejs22';
export const DEFAULT_DISK_GB = 32;
export const DEFAULT_LOADING_TIMEOUT_SEC = 600;
export const DEFAULT_READY_TIMEOUT_SEC = 1200;
export const DEFAULT_BID_MARGIN_PCT = 10;
