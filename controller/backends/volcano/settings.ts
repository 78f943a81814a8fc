/** The `volcano:` settings block of a Backend, and the type the adapter and the renderer read. */
import { Type, type Static } from '@sinclair/typebox';
import {
  DNS1123_LABEL,
  DNS1123_SUBDOMAIN,
  HostPath,
  optional,
  strict,
  StringEnum,
} from '../../spec/schema-kit.js';

/** A Kubernetes quantity of bytes (`64Gi`), as `emptyDir.sizeLimit` takes it. */
const BYTES = '^[0-9]+(\\.[0-9]+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$';
const LABEL_KEY = '^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$';

/** The `volcano:` block (required for this type). */
export const volcanoSettings = {
  block: 'volcano',
  required: true,
  schema: strict(
    {
      kubeconfig: optional(HostPath('kubeconfig file. Default: `$KUBECONFIG`, else `~/.kube/config`.')),
      context: optional(
        Type.String({
          pattern: '^[A-Za-z0-9][A-Za-z0-9_.@:/-]*$',
          description: 'kubeconfig context. Default: the current context.',
        }),
      ),
      namespace: Type.String({
        pattern: DNS1123_LABEL,
        maxLength: 63,
        description: 'Namespace for the Jobs.',
      }),
      queue: optional(
        Type.String({
          pattern: DNS1123_SUBDOMAIN,
          description: 'Volcano queue: where jobs wait and where capacity is read. Default `default`.',
        }),
      ),
      image: Type.String({
        minLength: 1,
        pattern: '^[^\\s]+$',
        description:
          'Container image: your training environment, with Node.js ≥ 20 and `sh` in it (adv exec runs there).',
      }),
      imagePullPolicy: optional(
        StringEnum(
          ['Always', 'IfNotPresent', 'Never'],
          'Default: Kubernetes’ own (`Always` for `:latest`, else `IfNotPresent`).',
        ),
      ),
      gpuResourceName: optional(
        Type.String({ pattern: LABEL_KEY, description: 'GPU extended resource. Default `nvidia.com/gpu`.' }),
      ),
      priorityClassName: optional(
        Type.String({ pattern: DNS1123_SUBDOMAIN, description: 'Pod priority class.' }),
      ),
      serviceAccountName: optional(
        Type.String({ pattern: DNS1123_SUBDOMAIN, description: 'Pods’ service account.' }),
      ),
      nodeSelector: optional(
        Type.Record(Type.String({ pattern: LABEL_KEY }), Type.String({ maxLength: 63 }), {
          description: 'Node labels the pods must land on (`nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB`).',
        }),
      ),
      tolerations: optional(
        Type.Array(
          strict(
            {
              key: optional(
                Type.String({
                  pattern: LABEL_KEY,
                  description: 'Taint key; omitted with `Exists`: every taint.',
                }),
              ),
              operator: optional(StringEnum(['Exists', 'Equal'], 'Default `Equal`.')),
              value: optional(Type.String({ maxLength: 63, description: 'Taint value (with `Equal`).' })),
              effect: optional(
                StringEnum(
                  ['NoSchedule', 'PreferNoSchedule', 'NoExecute'],
                  'Taint effect; omitted: every effect.',
                ),
              ),
              tolerationSeconds: optional(
                Type.Integer({
                  minimum: 0,
                  description: 'With `NoExecute`: how long the pod stays once tainted.',
                }),
              ),
            },
            'A Kubernetes toleration.',
          ),
          {
            description:
              'Taints the pods tolerate (GPU nodes are often tainted `nvidia.com/gpu:NoSchedule`).',
          },
        ),
      ),
      shmSize: optional(
        Type.String({
          pattern: BYTES,
          description:
            'Size of `/dev/shm` (a memory emptyDir: PyTorch data loaders need more than 64 MB). Default `8Gi`.',
        }),
      ),
      volumes: optional(
        Type.Array(
          strict(
            {
              claimName: Type.String({ pattern: DNS1123_SUBDOMAIN, description: 'PersistentVolumeClaim.' }),
              mountPath: Type.String({ pattern: '^/[^\\s]*$', description: 'Where the pods see it.' }),
              readOnly: optional(Type.Boolean({ description: 'Mount read-only.' })),
            },
            'A PersistentVolumeClaim mounted into every pod.',
          ),
          {
            description:
              'Claims mounted into every pod: datasets, caches, and the directory of a `file://` Storage (mounted at the same path as the controller sees it).',
          },
        ),
      ),
      checkpointVolume: optional(
        Type.String({
          pattern: DNS1123_SUBDOMAIN,
          description:
            'A ReadWriteMany PersistentVolumeClaim mounted at `/adv/ckpt` in every pod: multi-host jobs get one checkpoint dir for all processes, `/adv/ckpt/<run>/<attempt>` (`checkpoint.mode: shared`, what Orbax needs). Without it each pod checkpoints into its own dir and every process uploads its part (`per-process`).',
        }),
      ),
      ttlSecondsAfterFinished: optional(
        Type.Integer({
          minimum: 0,
          description:
            'Volcano deletes a finished Job after this (the adapter deletes it itself once it read the end). Default 600.',
        }),
      ),
      coordinatorPort: optional(
        Type.Integer({
          minimum: 1,
          maximum: 65535,
          description: 'JAX coordinator port on the first pod. Default 8476.',
        }),
      ),
      graceSec: optional(
        Type.Integer({
          minimum: 0,
          maximum: 3600,
          description:
            'Seconds the workload gets after SIGTERM (eviction, cancel) to checkpoint. Default 30.',
        }),
      ),
    },
    '`volcano` settings.',
  ),
} as const;

/** The `volcano:` block as the adapter and the renderer get it. */
export type VolcanoSettings = Static<typeof volcanoSettings.schema>;

/** The GPU extended resource when `gpuResourceName` is not set. */
export const DEFAULT_GPU_RESOURCE = 'nvidia.com/gpu';
/** `/dev/shm` when `shmSize` is not set. */
export const DEFAULT_SHM = '8Gi';
/** `ttlSecondsAfterFinished` when not set. */
export const DEFAULT_TTL_SEC = 600;
/** The JAX coordinator's port on the first pod when `coordinatorPort` is not set. */
export const DEFAULT_COORDINATOR_PORT = 8476;
/** Seconds after SIGTERM when `graceSec` is not set. */
export const DEFAULT_GRACE_SEC = 30;
