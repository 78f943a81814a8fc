/**
 * What the fake Kubernetes API server (fake-k8s.ts) answers kubectl besides objects: `/version`,
 * legacy discovery (`/api`, `/api/v1`, `/apis`, `/apis/G`, `/apis/G/V`), the OpenAPI documents
 * kubectl's `--validate=strict` looks at, and server-side printing (`as=Table`).
 *
 * What kubectl 1.32 does with them (found by driving it against this fake):
 * - Discovery: it first asks `/api` and `/apis` for the aggregated format (Accept
 *   `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,…,application/json`);
 *   an answer with a plain `application/json` Content-Type is read as the legacy format, and it
 *   then fetches each group version's APIResourceList. No warning is printed.
 * - `create -f -` (validation `strict`) asks, per object's group version, `/openapi/v3` (an index
 *   of `serverRelativeURL`s) and the group version's document, and looks for a PATCH operation
 *   tagged with the kind (`x-kubernetes-group-version-kind`) that has a `fieldValidation` query
 *   parameter: then it sends `fieldValidation=Strict` and leaves validation to the server. For a
 *   `kind: List` it always validates client-side, against `/openapi/v2` (protobuf); the fake
 *   serves an empty v2 document there (a valid protobuf message with no definitions), so the
 *   client-side validation finds no schema and passes.
 * - `get` (human output) asks for `as=Table;v=v1;g=meta.k8s.io` and prints the server's columns;
 *   priority-1 columns only with `-o wide`.
 *
 * Simplified: the OpenAPI v3 documents describe only the PATCH operations (no schemas, so
 * `kubectl explain` has nothing to show); Table cells are computed here the way the real
 * printers (pods) and CRD additionalPrinterColumns (Volcano) compute them.
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- Kubernetes objects are untyped JSON, read field by field */
import { createHash } from 'node:crypto';
import { RESOURCES, VERBS, type Obj, type ResourceDef } from './fake-k8s-store.js';

export const GIT_VERSION = 'v1.32.0-fake';

export const versionInfo = (): Obj => ({
  major: '1',
  minor: '32',
  gitVersion: GIT_VERSION,
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2024-12-11T18:04:20Z',
  goVersion: 'go1.23.3',
  compiler: 'gc',
  platform: 'linux/amd64',
});

const groups = (): string[] => [...new Set(RESOURCES.filter((d) => d.group).map((d) => d.group))];

const hash = (s: string) => createHash('sha256').update(s).digest('base64').slice(0, 11) + '=';

/** GET /api */
export const apiVersions = (serverAddress: string): Obj => ({
  kind: 'APIVersions',
  versions: ['v1'],
  serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }],
});

const groupOf = (g: string): Obj => {
  const v = RESOURCES.find((d) => d.group === g)!.version;
  const gv = { groupVersion: `${g}/${v}`, version: v };
  return { name: g, versions: [gv], preferredVersion: gv };
};

/** GET /apis */
export const apiGroupList = (): Obj => ({
  kind: 'APIGroupList',
  apiVersion: 'v1',
  groups: groups().map(groupOf),
});

/** GET /apis/G, or undefined for an unknown group. */
export const apiGroup = (g: string): Obj | undefined =>
  groups().includes(g) ? { kind: 'APIGroup', apiVersion: 'v1', ...groupOf(g) } : undefined;

/** GET /api/v1, /apis/G/V: the APIResourceList, or undefined for an unknown group version. */
export function apiResourceList(group: string, version: string): Obj | undefined {
  const defs = RESOURCES.filter((d) => d.group === group && d.version === version);
  if (!defs.length) return undefined;
  const resources: Obj[] = [];
  for (const d of defs) {
    resources.push({
      name: d.resource,
      singularName: d.singular,
      namespaced: d.namespaced,
      kind: d.kind,
      verbs: d.resource === 'namespaces' ? VERBS.filter((v) => v !== 'deletecollection') : VERBS,
      ...(d.shortNames.length ? { shortNames: d.shortNames } : {}),
      ...(d.categories ? { categories: d.categories } : {}),
      storageVersionHash: hash(`${d.group}/${d.resource}`),
    });
    for (const s of d.subresources)
      resources.push({
        name: `${d.resource}/${s}`,
        singularName: '',
        namespaced: d.namespaced,
        kind: STREAM_KINDS[s] ?? d.kind,
        verbs: s === 'log' ? ['get'] : STREAM_KINDS[s] ? ['create', 'get'] : ['get', 'patch', 'update'],
      });
  }
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: group ? `${group}/${version}` : version,
    resources,
  };
}

/** The option kinds the real server lists for the streaming subresources (fake-k8s-streams.ts). */
const STREAM_KINDS: Record<string, string> = { exec: 'PodExecOptions', portforward: 'PodPortForwardOptions' };

const gvPath = (group: string, version: string) => (group ? `apis/${group}/${version}` : `api/${version}`);

/** GET /openapi/v3: the index of group-version documents. */
export function openApiV3Index(): Obj {
  const paths: Obj = {};
  for (const gv of new Set(RESOURCES.map((d) => `${d.group}|${d.version}`))) {
    const [g, v] = gv.split('|') as [string, string];
    const p = gvPath(g, v);
    paths[p] = { serverRelativeURL: `/openapi/v3/${p}?hash=${hash(JSON.stringify(openApiV3Doc(p)))}` };
  }
  return { paths };
}

/** GET /openapi/v3/api/v1, /openapi/v3/apis/G/V: the PATCH operations, each with `fieldValidation`. */
export function openApiV3Doc(path: string): Obj | undefined {
  const defs = RESOURCES.filter((d) => gvPath(d.group, d.version) === path);
  if (!defs.length) return undefined;
  const paths: Obj = {};
  for (const d of defs) {
    const base = `/${path}/${d.namespaced ? 'namespaces/{namespace}/' : ''}${d.resource}/{name}`;
    const gvk = { group: d.group, version: d.version, kind: d.kind };
    const op = (id: string, extra: Obj[] = []) => ({
      operationId: id,
      parameters: [
        ...extra,
        { name: 'dryRun', in: 'query', schema: { type: 'string', uniqueItems: true } },
        { name: 'fieldManager', in: 'query', schema: { type: 'string', uniqueItems: true } },
        { name: 'fieldValidation', in: 'query', schema: { type: 'string', uniqueItems: true } },
      ],
      responses: { '200': { description: 'OK' } },
      'x-kubernetes-action': id.startsWith('patch') ? 'patch' : id.startsWith('replace') ? 'put' : 'post',
      'x-kubernetes-group-version-kind': gvk,
    });
    paths[base] = {
      put: op(`replace${d.kind}`),
      patch: op(`patch${d.kind}`, [
        { name: 'force', in: 'query', schema: { type: 'boolean', uniqueItems: true } },
      ]),
      parameters: [
        { name: 'name', in: 'path', required: true, schema: { type: 'string', uniqueItems: true } },
      ],
    };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: GIT_VERSION }, paths, components: {} };
}

/** GET /openapi/v2 (protobuf): a `swagger: "2.0"` Document with no definitions. */
export const openApiV2Protobuf = (): Buffer => Buffer.from([0x0a, 0x03, 0x32, 0x2e, 0x30]);

// ---- server-side printing ----

interface Column {
  name: string;
  type: string;
  format?: string;
  description: string;
  priority: number;
  cell: (o: Obj) => unknown;
}

const col = (
  name: string,
  type: string,
  cell: (o: Obj) => unknown,
  priority = 0,
  format?: string,
): Column => ({
  name,
  type,
  ...(format ? { format } : {}),
  description: name,
  priority,
  cell,
});

const nameCol = col('Name', 'string', (o) => o.metadata.name, 0, 'name');
const ageCol = col('Age', 'string', (o) => humanAge(o.metadata.creationTimestamp));
const path = (o: Obj, p: string) => p.split('.').reduce<any>((x, k) => (x == null ? undefined : x[k]), o);
const count = (o: Obj | undefined) => Object.keys(o ?? {}).length;

const COLUMNS: Record<string, Column[]> = {
  pods: [
    nameCol,
    col('Ready', 'string', (o) => {
      const cs: Obj[] = o.status?.containerStatuses ?? [];
      return `${cs.filter((c) => c.ready).length}/${(o.spec?.containers ?? []).length}`;
    }),
    col('Status', 'string', podStatusReason),
    col('Restarts', 'string', (o) =>
      String((o.status?.containerStatuses ?? []).reduce((n: number, c: Obj) => n + (c.restartCount ?? 0), 0)),
    ),
    ageCol,
    col('IP', 'string', (o) => o.status?.podIP ?? '<none>', 1),
    col('Node', 'string', (o) => o.spec?.nodeName ?? '<none>', 1),
    col('Nominated Node', 'string', (o) => o.status?.nominatedNodeName ?? '<none>', 1),
    col('Readiness Gates', 'string', () => '<none>', 1),
  ],
  configmaps: [nameCol, col('Data', 'integer', (o) => count(o.data) + count(o.binaryData)), ageCol],
  secrets: [
    nameCol,
    col('Type', 'string', (o) => o.type),
    col('Data', 'integer', (o) => count(o.data)),
    ageCol,
  ],
  services: [
    nameCol,
    col('Type', 'string', (o) => o.spec?.type),
    col('Cluster-IP', 'string', (o) => o.spec?.clusterIP),
    col('External-IP', 'string', () => '<none>'),
    col(
      'Port(s)',
      'string',
      (o) => (o.spec?.ports ?? []).map((p: Obj) => `${p.port}/${p.protocol}`).join(',') || '<none>',
    ),
    ageCol,
    col(
      'Selector',
      'string',
      (o) =>
        Object.entries(o.spec?.selector ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(',') || '<none>',
      1,
    ),
  ],
  namespaces: [nameCol, col('Status', 'string', (o) => o.status?.phase), ageCol],
  persistentvolumeclaims: [
    nameCol,
    col('Status', 'string', (o) => o.status?.phase),
    col('Volume', 'string', (o) => o.spec?.volumeName ?? ''),
    col('Capacity', 'string', (o) => o.status?.capacity?.storage ?? ''),
    col('Access Modes', 'string', (o) =>
      (o.status?.accessModes ?? [])
        .map((m: string) => ({ ReadWriteOnce: 'RWO', ReadOnlyMany: 'ROX', ReadWriteMany: 'RWX' })[m] ?? m)
        .join(','),
    ),
    col('StorageClass', 'string', (o) => o.spec?.storageClassName ?? '<unset>'),
    col('VolumeAttributesClass', 'string', () => '<unset>'),
    ageCol,
  ],
  events: [
    col('Last Seen', 'string', (o) => humanAge(o.lastTimestamp ?? o.metadata.creationTimestamp)),
    col('Type', 'string', (o) => o.type),
    col('Reason', 'string', (o) => o.reason),
    col(
      'Object',
      'string',
      (o) => `${String(o.involvedObject?.kind ?? '').toLowerCase()}/${o.involvedObject?.name ?? ''}`,
    ),
    col('Message', 'string', (o) => o.message),
  ],
  // Volcano's CRDs: their additionalPrinterColumns (the header is the column's name, upper-cased by kubectl).
  jobs: [
    nameCol,
    col('STATUS', 'string', (o) => path(o, 'status.state.phase')),
    col('minAvailable', 'integer', (o) => path(o, 'status.minAvailable')),
    col('RUNNINGS', 'integer', (o) => path(o, 'status.running')),
    col('AGE', 'date', (o) => humanAge(o.metadata.creationTimestamp)),
    col('QUEUE', 'string', (o) => path(o, 'spec.queue'), 1),
  ],
  queues: [nameCol, col('PARENT', 'string', (o) => path(o, 'spec.parent'))],
  podgroups: [
    nameCol,
    col('STATUS', 'string', (o) => path(o, 'status.phase')),
    col('minMember', 'integer', (o) => path(o, 'spec.minMember')),
    col('RUNNINGS', 'integer', (o) => path(o, 'status.running')),
    col('AGE', 'date', (o) => humanAge(o.metadata.creationTimestamp)),
    col('QUEUE', 'string', (o) => path(o, 'spec.queue'), 1),
  ],
};

/** The `meta.k8s.io/v1` Table of `objects`; `includeObject` 'None' | 'Metadata' (default) | 'Object'. */
export function toTable(
  d: ResourceDef,
  objects: Obj[],
  resourceVersion: string,
  includeObject = 'Metadata',
): Obj {
  const cols = COLUMNS[d.resource] ?? [nameCol, ageCol];
  return {
    kind: 'Table',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { resourceVersion },
    columnDefinitions: cols.map(({ cell: _c, ...c }) => c),
    rows: objects.map((o) => ({
      cells: cols.map((c) => c.cell(o) ?? null),
      object:
        includeObject === 'Object'
          ? o
          : includeObject === 'None'
            ? undefined
            : { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: o.metadata },
    })),
  };
}

/** The STATUS column of `kubectl get pods`, as the pod printer derives it. */
function podStatusReason(o: Obj): string {
  let reason: string = o.status?.reason ?? o.status?.phase ?? 'Pending';
  for (const c of o.status?.containerStatuses ?? []) {
    if (c.state?.waiting?.reason) reason = c.state.waiting.reason;
    else if (c.state?.terminated)
      reason =
        c.state.terminated.reason ??
        (c.state.terminated.signal
          ? `Signal:${c.state.terminated.signal}`
          : `ExitCode:${c.state.terminated.exitCode}`);
  }
  if (o.status?.reason === 'Evicted') reason = 'Evicted';
  if (o.metadata.deletionTimestamp) reason = 'Terminating';
  return reason;
}

/** `duration.HumanDuration` of the time since `ts`, as kubectl's AGE column shows it. */
export function humanAge(ts: string | undefined): string {
  if (!ts) return '<unknown>';
  const s = Math.floor((Date.now() - Date.parse(ts)) / 1000);
  if (s < -1) return '<invalid>';
  if (s < 0) return '0s';
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 ? `${m}m${s % 60}s` : `${m}m`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
  if (h < 48) return `${h}h`;
  if (h < 192) return h % 24 ? `${Math.floor(h / 24)}d${h % 24}h` : `${h / 24}d`;
  return `${Math.floor(h / 24)}d`;
}
