/** The `gcpTpu:` settings block of a Backend, its defaults, and how the adapter reads them. */
import { Type, type Static } from '@sinclair/typebox';
import { optional, strict } from '../../spec/schema-kit.js';

/** GCP zone names: `us-central2-b`. */
const ZONE = '^[a-z]+-[a-z]+[0-9]+-[a-z]$';

/** The `gcpTpu:` block (required for this type). */
export const gcpTpuSettings = {
  block: 'gcpTpu',
  required: true,
  schema: strict(
    {
      project: Type.String({ pattern: '^[a-z][a-z0-9-]{4,28}[a-z0-9]$', description: 'GCP project id.' }),
      zone: Type.String({ pattern: ZONE, description: 'Zone, e.g. `us-central2-b`: tried first.' }),
      zones: optional(
        Type.Array(Type.String({ pattern: ZONE }), {
          description:
            'More zones, tried in order when the ones before have no capacity (as SkyPilot tries the next region).',
        }),
      ),
      acceleratorType: Type.String({
        pattern: '^[a-z0-9][a-z0-9-]{1,40}$',
        description: 'e.g. `v4-32`, `v5litepod-16`.',
      }),
      runtimeVersion: optional(
        Type.String({
          pattern: '^[a-z0-9][a-z0-9._-]{1,62}$',
          description: 'TPU VM runtime version. Default `tpu-ubuntu2204-base`.',
        }),
      ),
      spot: optional(Type.Boolean({ description: 'Create spot VMs (`--spot`).' })),
      preemptible: optional(Type.Boolean({ description: 'Create preemptible VMs (`--preemptible`).' })),
      chips: optional(Type.Integer({ minimum: 1, description: 'Chips per host.' })),
      externalIp: optional(
        Type.Boolean({
          description:
            "Reach workers at their external IP (`accessConfig.externalIp`) rather than the internal address: when the controller is outside the node's VPC.",
        }),
      ),
      coordinatorPort: optional(
        Type.Integer({
          minimum: 1,
          maximum: 65535,
          description: 'JAX coordinator port on worker 0. Default 8476.',
        }),
      ),
      sharedMount: optional(
        Type.String({
          pattern: '^/[^\\s]*$',
          description:
            'A directory every worker sees at this path (a Filestore or NFS mount the runtime image or `setup` provides): multi-host jobs get one checkpoint dir for all processes, `<sharedMount>/<run>/<attempt>` (`checkpoint.mode: shared`, what Orbax needs). Without it each worker checkpoints per process (`per-process`), or to the object store when the Run declares `checkpoint.mode: store`.',
        }),
      ),
      readyTimeoutSec: optional(
        Type.Integer({ minimum: 1, description: 'How long a new node may take to be READY. Default 900.' }),
      ),
    },
    '`gcp-tpu` settings. Workers are reached over SSH with the `connection` block (user, identityFile, port, known hosts; no host).',
  ),
} as const;

/** The `gcpTpu:` block as the adapter gets it. */
export type TpuSettings = Static<typeof gcpTpuSettings.schema>;

/** How long a new node may take to be READY when `readyTimeoutSec` is not set. */
export const DEFAULT_READY_TIMEOUT_SEC = 900;
/** The TPU VM runtime when `runtimeVersion` is not set. */
export const DEFAULT_RUNTIME_VERSION = 'tpu-ubuntu2204-base';
/** The JAX coordinator's port on worker 0 when `coordinatorPort` is not set. */
export const DEFAULT_COORDINATOR_PORT = 8476;

/** The zones to try, in order: `zone`, then `zones`, each once. */
export const zonesOf = (s: TpuSettings): string[] =>
  [s.zone, ...(s.zones ?? [])].filter((z, i, all) => all.indexOf(z) === i);
