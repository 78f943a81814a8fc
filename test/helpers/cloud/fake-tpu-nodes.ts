/**
 * The pieces of the fake Cloud TPU v2 API (fake-tpu-api.ts) that are plain data: how many worker
 * hosts an accelerator type has, the Node and Operation resources as the real API spells them,
 * and Google's error bodies.
 *
 * Field names follow tpu.googleapis.com v2 (`google.cloud.tpu.v2.Node`); what the real service
 * would fill in that the fake cannot know (a real `id`, a service account's e-mail) is made up
 * but shaped the same. Marked [U] where the value, not the name, is an assumption.
 */
import { randomBytes } from 'node:crypto';

/** `google.cloud.tpu.v2.Node.State`. */
export const TpuState = {
  Creating: 'CREATING',
  Ready: 'READY',
  Deleting: 'DELETING',
  Preempted: 'PREEMPTED',
  Terminated: 'TERMINATED',
} as const;
export type TpuState = (typeof TpuState)[keyof typeof TpuState];

/** A Node resource in the API's JSON form (only the fields the fake sets). */
export interface NodeResource {
  name: string;
  acceleratorType: string;
  apiVersion: 'V2';
  state: string;
  health?: string;
  runtimeVersion: string;
  cidrBlock: string;
  createTime: string;
  id: string;
  labels?: Record<string, string>;
  metadata?: Record<string, string>;
  description?: string;
  schedulingConfig: { spot?: true; preemptible?: true; reserved?: true };
  networkConfig: { network: string; subnetwork: string; enableExternalIps?: true };
  networkEndpoints?: { ipAddress: string; port: number; accessConfig?: { externalIp: string } }[];
  serviceAccount: { email: string; scope: string[] };
  shieldedInstanceConfig: Record<string, never>;
  tags?: string[];
}

/** `google.rpc.Status` as it travels in an Operation's `error`. */
export interface RpcStatus {
  code: number;
  message: string;
  details?: unknown[];
}

/** `google.longrunning.Operation`. */
export interface OperationResource {
  name: string;
  metadata: {
    '@type': 'type.googleapis.com/google.cloud.tpu.v2.OperationMetadata';
    createTime: string;
    endTime?: string;
    target: string;
    verb: 'create' | 'delete';
    cancelRequested: false;
    apiVersion: 'v2';
  };
  done: boolean;
  response?: Record<string, unknown>;
  error?: RpcStatus;
}

/**
 * Worker hosts of a slice, from the accelerator type's name (the Cloud TPU docs' naming, as
 * remembered, not checked against a source here [U]; `hostsOf` in the options overrides it):
 * - `v2-N`, `v3-N`, `v4-N`, `v5p-N`: N counts TensorCores; 2 per chip on v4/v5p (v4-8 = 4
 *   chips), and every host holds 8 cores (4 chips on v4/v5p): hosts = N / 8 (v4-16 → 2, v4-32 → 4).
 * - `v5litepod-N` (v5e), `v6e-N`: N counts chips; one host up to 8 chips, then 4 chips per host
 *   (v5litepod-16 → 4 hosts).
 * Unknown names → undefined (the fake answers INVALID_ARGUMENT). Tests may pass their own rule.
 */
export function hostsOf(acceleratorType: string): number | undefined {
  const m = /^(v2|v3|v4|v5p|v5litepod|v6e)-(\d+)$/.exec(acceleratorType);
  if (!m) return undefined;
  const n = Number(m[2]);
  if (n <= 0) return undefined;
  if (m[1] === 'v5litepod' || m[1] === 'v6e') return n <= 8 ? 1 : Math.ceil(n / 4);
  return n % 8 === 0 ? n / 8 : undefined;
}

/** gRPC code → the `status` word and HTTP status of Google's JSON errors. */
const GRPC: Record<number, [string, number]> = {
  3: ['INVALID_ARGUMENT', 400],
  5: ['NOT_FOUND', 404],
  6: ['ALREADY_EXISTS', 409],
  7: ['PERMISSION_DENIED', 403],
  8: ['RESOURCE_EXHAUSTED', 429],
  9: ['FAILED_PRECONDITION', 400],
  13: ['INTERNAL', 500],
};

/** A Google API error: the HTTP status and the `{"error": {code, message, status, details}}` body. */
export function googleError(grpcCode: number, message: string, details?: unknown[]): [number, object] {
  const [status, http] = GRPC[grpcCode] ?? ['UNKNOWN', 500];
  return [http, { error: { code: http, message, status, ...(details ? { details } : {}) } }];
}

/** `google.rpc.ResourceInfo`, as the API attaches to NOT_FOUND and ALREADY_EXISTS. */
export const resourceInfo = (resourceName: string) => [
  { '@type': 'type.googleapis.com/google.rpc.ResourceInfo', resourceName },
];

/** The `[EID: 0x…]` the real service appends to capacity errors (an opaque event id). */
export const eid = (): string => `[EID: 0x${randomBytes(8).toString('hex').replace(/^0+/, '')}]`;

/** The capacity error a create's operation ends with in a full zone (the text is the real one). */
export const capacityStatus = (zone: string): RpcStatus => ({
  code: 8,
  message:
    `There is no more capacity in the zone "${zone}"; you can try in another zone where Cloud TPU ` +
    `Nodes are offered (see https://cloud.google.com/tpu/docs/regions) ${eid()}`,
});

/**
 * The quota refusal of the create call itself (HTTP 429 RESOURCE_EXHAUSTED; the sentence is the
 * real one, from a 429 on `nodes?nodeId=`; the quota's name is made up from the type [U]).
 */
export function quotaMessage(zone: string, acceleratorType: string, spot: boolean): string {
  const family = (acceleratorType.split('-')[0] ?? 'tpu').toUpperCase();
  return `Quota limit 'TPU${family}${spot ? 'Preemptible' : ''}PerProjectPerZoneForTPUAPI' has been exceeded. Limit: 0 in zone ${zone}.`;
}

/** A fresh operation id in the real shape (`operation-<ms>-<hex>-<hex>-<hex>`). */
export const operationId = (): string =>
  `operation-${Date.now()}-${randomBytes(6).toString('hex')}-${randomBytes(4).toString('hex')}-${randomBytes(4).toString('hex')}`;

/** A fresh numeric node id (the API's int64 `id`, as a JSON string). */
export const nodeNumericId = (): string => BigInt(`0x${randomBytes(7).toString('hex')}`).toString();

/** The region of a zone: `us-central2-b` → `us-central2`. */
export const regionOf = (zone: string): string => zone.replace(/-[a-z]$/, '');

/** Node ids the API accepts (RFC 1035 labels) [U: the exact limit]. */
const NODE_ID = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

/**
 * What GCP takes as labels (keys: a lowercase letter first, then lowercase letters, digits, `_`
 * and `-`, at most 63; values the same but may be empty or start with any of them) and as
 * metadata keys (letters, digits, `_`, `-`; at most 128).
 */
const LABEL_KEY = /^\p{Ll}[\p{Ll}\p{Lo}\p{N}_-]{0,62}$/u;
const LABEL_VALUE = /^[\p{Ll}\p{Lo}\p{N}_-]{0,63}$/u;
const METADATA_KEY = /^[A-Za-z0-9_-]{1,128}$/;

/** The INVALID_ARGUMENT a create request earns, if any (the rules are GCP's; the texts are made up [U]). */
export function invalidCreate(
  zone: string,
  id: string,
  b: NodeRequest,
  hostsOf: (acceleratorType: string) => number | undefined,
): [number, object] | undefined {
  if (!NODE_ID.test(id)) return googleError(3, `Invalid node id "${id}": must match ${NODE_ID.source}.`);
  if (!b.runtimeVersion) return googleError(3, 'runtime_version is required.');
  if (hostsOf(b.acceleratorType ?? '') === undefined)
    return googleError(3, `Accelerator type "${b.acceleratorType}" is not available in zone "${zone}".`);
  const label = Object.entries(b.labels ?? {}).find(([k, v]) => !LABEL_KEY.test(k) || !LABEL_VALUE.test(v));
  if (label) return googleError(3, `Invalid label ${JSON.stringify(label[0])}=${JSON.stringify(label[1])}.`);
  const key = Object.keys(b.metadata ?? {}).find((k) => !METADATA_KEY.test(k));
  if (key !== undefined) return googleError(3, `Invalid metadata key ${JSON.stringify(key)}.`);
  return undefined;
}

/** What a create request's body may hold (the Node fields gcloud sends). */
export type NodeRequest = Partial<Omit<NodeResource, 'networkConfig' | 'schedulingConfig'>> & {
  networkConfig?: { network?: string; enableExternalIps?: boolean };
  schedulingConfig?: { spot?: boolean; preemptible?: boolean; reserved?: boolean };
};

/**
 * A new node (CREATING) from a create request's body, with what the API fills in: the full names
 * of network and subnetwork, a service account, an id, the create time; false booleans left out
 * as proto3 JSON does. `cidrBlock` is the subnetwork's range unless `--range` gave one [U].
 */
export function nodeResource(project: string, zone: string, id: string, b: NodeRequest): NodeResource {
  const network = b.networkConfig?.network ?? 'default';
  const sched = b.schedulingConfig ?? {};
  return {
    name: `projects/${project}/locations/${zone}/nodes/${id}`,
    acceleratorType: b.acceleratorType!,
    apiVersion: 'V2',
    state: TpuState.Creating,
    runtimeVersion: b.runtimeVersion!,
    cidrBlock: b.cidrBlock ?? '10.130.0.0/20',
    createTime: new Date().toISOString(),
    id: nodeNumericId(),
    ...(b.labels && Object.keys(b.labels).length ? { labels: { ...b.labels } } : {}),
    ...(b.metadata && Object.keys(b.metadata).length ? { metadata: { ...b.metadata } } : {}),
    ...(b.description ? { description: b.description } : {}),
    schedulingConfig: {
      ...(sched.spot ? { spot: true } : {}),
      ...(sched.preemptible ? { preemptible: true } : {}),
      ...(sched.reserved ? { reserved: true } : {}),
    },
    networkConfig: {
      network: network.includes('/') ? network : `projects/${project}/global/networks/${network}`,
      subnetwork: `projects/${project}/regions/${regionOf(zone)}/subnetworks/default`,
      ...(b.networkConfig?.enableExternalIps ? { enableExternalIps: true as const } : {}),
    },
    serviceAccount: {
      email: '123456789012-compute@developer.gserviceaccount.com',
      scope: ['https://www.googleapis.com/auth/cloud-platform'],
    },
    shieldedInstanceConfig: {},
    ...(b.tags?.length ? { tags: [...b.tags] } : {}),
  };
}
