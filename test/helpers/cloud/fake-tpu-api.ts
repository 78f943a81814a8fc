/**
 * A fake of the Cloud TPU v2 REST API (tpu.googleapis.com/v2) on loopback, for the real `gcloud`
 * to drive: `gcloud compute tpus tpu-vm create|describe|list|delete` against it send exactly the
 * requests they send to Google (`configDir` points gcloud here). What gcloud sends, per command:
 *
 * - create: `POST /v2/projects/P/locations/Z/nodes?alt=json&nodeId=N`, body a Node
 *   (`acceleratorType`, `runtimeVersion`, `networkConfig`, `schedulingConfig`, `labels`,
 *   `metadata`) → an Operation; without `--async`, `GET /v2/projects/P/locations/Z/operations/ID`
 *   until `done`, then it prints the operation's `response` (the Node) or its `error`.
 * - describe: `GET …/nodes/N?alt=json`. list: `GET …/nodes?alt=json` (+`pageToken` while the answer
 *   has a `nextPageToken`); `--filter` is applied by gcloud itself, never sent.
 * - delete: `DELETE …/nodes/N?alt=json` → an Operation, polled like create's unless `--async`.
 *
 * Nodes step CREATING → READY, and DELETING → gone, once their operation or the node itself has
 * been read `createReads`/`deleteReads` times (each GET of the operation or the node, and each list
 * that shows it, is a read), or `createMs`/`deleteMs` after the request — whichever comes first.
 * gcloud's first poll comes 1 s after the request, so the defaults (one read) make a blocking
 * create take one poll. A READY node's `networkEndpoints` hold one address per worker host, from
 * `addresses` (distinct loopback addresses, so a real sshd can serve each worker); running out of
 * addresses is the zone running out of capacity.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeGcloudConfig } from './gcloud-config.js';
import {
  capacityStatus,
  googleError,
  invalidCreate,
  hostsOf as defaultHostsOf,
  nodeResource,
  operationId,
  quotaMessage,
  resourceInfo,
  TpuState,
  type NodeRequest,
  type NodeResource,
  type OperationResource,
  type RpcStatus,
} from './fake-tpu-nodes.js';

export {
  hostsOf,
  TpuState,
  type NodeRequest,
  type NodeResource,
  type OperationResource,
} from './fake-tpu-nodes.js';

export interface FakeTpuApiOptions {
  /** Worker addresses, handed out in order to READY nodes. Default 127.0.0.2 … 127.0.0.254. */
  addresses?: string[];
  /** Reads until a create settles (READY, or its injected error). Default 1. */
  createReads?: number;
  /** Reads until a deleted node is gone. Default 1. */
  deleteReads?: number;
  /** Or settle this long after the request, read or not. */
  createMs?: number;
  deleteMs?: number;
  /** Worker hosts of an accelerator type; undefined = unknown type (INVALID_ARGUMENT). */
  hostsOf?: (acceleratorType: string) => number | undefined;
  /** Most nodes one list page holds (the client's `pageSize`, if smaller, wins). Default 100. */
  pageSize?: number;
  /**
   * Called when a node is preempted or terminated, after its state changed: the VMs are going
   * away, so the test kills the node's worker processes here (`killTree` of ../processes.ts: SIGTERM,
   * then SIGKILL, as a VM shutdown does).
   */
  onPreempt?: (node: FakeNode, state: typeof TpuState.Preempted | typeof TpuState.Terminated) => unknown;
  /** Called when a node's delete begins: its VMs shut down, so the test kills its worker processes. */
  onDelete?: (node: FakeNode) => unknown;
}

/** A node as the fake holds it; `resource` is what the API returns for it now. */
export interface FakeNode {
  readonly zone: string;
  readonly id: string;
  readonly resource: NodeResource;
  /** One per worker host, once READY. */
  readonly addresses: readonly string[];
}

export interface RecordedRequest {
  method: string;
  /** The path without the query. */
  path: string;
  query: Record<string, string>;
  body?: unknown;
  /** The HTTP status the fake answered. */
  status: number;
}

export interface FakeTpuApi {
  /** The endpoint override for gcloud's `api_endpoint_overrides/tpu` (ends with `/`). */
  readonly url: string;
  /** Every request, in order. */
  readonly requests: RecordedRequest[];
  /** Settings that may be changed between calls (reads and delays of the next requests). */
  readonly options: Required<Pick<FakeTpuApiOptions, 'createReads' | 'deleteReads'>> &
    Pick<FakeTpuApiOptions, 'createMs' | 'deleteMs'>;
  nodes(zone?: string): FakeNode[];
  node(zone: string, id: string): FakeNode | undefined;
  /**
   * A node that is there already, READY, without a request (a leftover, a decoy for filters):
   * `body` as a create request's (`acceleratorType` is required).
   */
  seed(project: string, zone: string, id: string, body: NodeRequest & { acceleratorType: string }): FakeNode;
  /** READY → PREEMPTED (stays listed until deleted); then `onPreempt`. */
  preempt(zone: string, id: string): Promise<void>;
  /** READY → TERMINATED (maintenance, or a preemptible node's end of life); then `onPreempt`. */
  terminate(zone: string, id: string): Promise<void>;
  /** While on, creates in `zone` end with the real code-8 "no more capacity" operation error. */
  failCapacity(zone: string, on: boolean): void;
  /** While on, creates in `zone` are refused at once: HTTP 429 RESOURCE_EXHAUSTED "Quota limit …". */
  failQuota(zone: string, on: boolean): void;
  /** A create held back (a large `createReads`) settles at the next read of the node. */
  settleAtNextRead(zone: string, id: string): void;
  /** A fresh `CLOUDSDK_CONFIG` directory that points gcloud at this fake for `project`. */
  configDir(project: string): Promise<string>;
  stop(): Promise<void>;
}

interface Pending {
  kind: 'create' | 'delete';
  op: OperationResource;
  readsLeft: number;
  dueAt: number;
  /** How a create ends instead of READY (the zone was full when it was asked). */
  fail?: RpcStatus;
}

interface Held {
  zone: string;
  id: string;
  resource: NodeResource;
  addresses: string[];
  pending?: Pending;
}

type Reply = [number, unknown];

const ROUTE = /^\/v2\/projects\/([^/]+)\/locations\/([^/]+)\/(nodes|operations)(?:\/([^/:]+))?$/;

const defaultAddresses = () => Array.from({ length: 253 }, (_, i) => `127.0.0.${i + 2}`);

/** Starts the fake on 127.0.0.1 (a free port). */
export async function startFakeTpuApi(opts: FakeTpuApiOptions = {}): Promise<FakeTpuApi> {
  const options = {
    createReads: opts.createReads ?? 1,
    deleteReads: opts.deleteReads ?? 1,
    createMs: opts.createMs,
    deleteMs: opts.deleteMs,
  };
  const free = [...(opts.addresses ?? defaultAddresses())];
  const hostsOf = opts.hostsOf ?? defaultHostsOf;
  const held: Held[] = [];
  const ops = new Map<string, { op: OperationResource; node?: Held }>();
  const full = new Set<string>();
  const quota = new Set<string>();
  const requests: RecordedRequest[] = [];
  const dirs: string[] = [];
  const now = () => new Date().toISOString();

  const find = (zone: string, id: string) => held.find((n) => n.zone === zone && n.id === id);
  const drop = (n: Held) => {
    held.splice(held.indexOf(n), 1);
    free.unshift(...n.addresses);
  };

  const finish = (op: OperationResource, result: { response?: object; error?: RpcStatus }) => {
    op.done = true;
    op.metadata.endTime = now();
    if (result.error) op.error = result.error;
    else op.response = result.response as Record<string, unknown>;
  };

  /** A create or delete settles: the node turns READY (or fails and goes), or is gone. */
  const settle = (n: Held, p: Pending) => {
    n.pending = undefined;
    if (p.kind === 'delete') {
      drop(n);
      return finish(p.op, { response: { '@type': 'type.googleapis.com/google.protobuf.Empty' } });
    }
    const hosts = hostsOf(n.resource.acceleratorType) ?? 1;
    if (p.fail || free.length < hosts) {
      drop(n);
      return finish(p.op, { error: p.fail ?? capacityStatus(n.zone) });
    }
    n.addresses = free.splice(0, hosts);
    Object.assign(n.resource, {
      state: TpuState.Ready,
      health: 'HEALTHY',
      networkEndpoints: n.addresses.map((ip) => ({
        ipAddress: ip,
        port: 8470,
        accessConfig: { externalIp: ip },
      })),
    });
    finish(p.op, { response: { '@type': 'type.googleapis.com/google.cloud.tpu.v2.Node', ...n.resource } });
  };

  /** One read of a node (or of its operation): counts toward settling what is pending on it. */
  const touch = (n: Held) => {
    const p = n.pending;
    if (!p) return;
    p.readsLeft -= 1;
    if (p.readsLeft <= 0 || Date.now() >= p.dueAt) settle(n, p);
  };

  const startOp = (n: Held, verb: 'create' | 'delete'): OperationResource => {
    const op: OperationResource = {
      name: `${n.resource.name.replace(/\/nodes\/[^/]+$/, '')}/operations/${operationId()}`,
      metadata: {
        '@type': 'type.googleapis.com/google.cloud.tpu.v2.OperationMetadata',
        createTime: now(),
        target: n.resource.name,
        verb,
        cancelRequested: false,
        apiVersion: 'v2',
      },
      done: false,
    };
    const ms = verb === 'create' ? options.createMs : options.deleteMs;
    n.pending = {
      kind: verb,
      op,
      readsLeft: verb === 'create' ? options.createReads : options.deleteReads,
      dueAt: ms === undefined ? Infinity : Date.now() + ms,
    };
    ops.set(op.name, { op, node: n });
    return op;
  };

  const create = (project: string, zone: string, query: Record<string, string>, body: unknown): Reply => {
    const id = query.nodeId ?? '';
    const name = `projects/${project}/locations/${zone}/nodes/${id}`;
    const b = (body ?? {}) as NodeRequest;
    const invalid = invalidCreate(zone, id, b, hostsOf);
    if (invalid) return invalid;
    if (find(zone, id)) return googleError(6, `Resource '${name}' already exists`, resourceInfo(name));
    const sched = b.schedulingConfig ?? {};
    if (quota.has(zone))
      return googleError(8, quotaMessage(zone, b.acceleratorType!, !!(sched.spot || sched.preemptible)));
    const n: Held = { zone, id, addresses: [], resource: nodeResource(project, zone, id, b) };
    held.push(n);
    const op = startOp(n, 'create');
    if (full.has(zone)) n.pending!.fail = capacityStatus(zone);
    return [200, op];
  };

  const remove = (n: Held): Reply => {
    if (n.pending?.kind === 'delete') return [200, n.pending.op]; // [U] what a second delete answers
    if (n.pending) {
      finish(n.pending.op, {
        error: { code: 1, message: 'The node was deleted while it was being created.' },
      });
      n.pending = undefined;
    }
    n.resource.state = TpuState.Deleting;
    delete n.resource.health;
    void Promise.resolve(opts.onDelete?.(n)).catch(() => {});
    return [200, startOp(n, 'delete')];
  };

  const list = (zone: string, query: Record<string, string>): Reply => {
    const inZone = held.filter((n) => n.zone === zone);
    for (const n of inZone) touch(n);
    const all = held.filter((n) => n.zone === zone);
    const size = Math.min(Number(query.pageSize) || Infinity, opts.pageSize ?? 100);
    const start = query.pageToken ? Number(Buffer.from(query.pageToken, 'base64url').toString()) : 0;
    const page = all.slice(start, start + size);
    const next =
      start + size < all.length ? Buffer.from(String(start + size)).toString('base64url') : undefined;
    return [
      200,
      {
        ...(page.length ? { nodes: page.map((n) => n.resource) } : {}),
        ...(next ? { nextPageToken: next } : {}),
      },
    ];
  };

  const route = (method: string, path: string, query: Record<string, string>, body: unknown): Reply => {
    const m = ROUTE.exec(path);
    if (!m) return googleError(5, `Method not found: ${method} ${path}`);
    const [, project, zone, kind, id] = m.map((s) =>
      s === undefined ? s : decodeURIComponent(s),
    ) as string[];
    const resourceName = `projects/${project}/locations/${zone}/${kind}/${id}`;
    if (kind === 'operations' && id && method === 'GET') {
      const o = ops.get(resourceName);
      if (!o) return googleError(5, `Operation '${resourceName}' not found`);
      if (o.node?.pending?.op === o.op) touch(o.node);
      return [200, o.op];
    }
    if (kind !== 'nodes') return googleError(5, `Method not found: ${method} ${path}`);
    if (!id && method === 'GET') return list(zone!, query);
    if (!id && method === 'POST') return create(project!, zone!, query, body);
    const n = id ? find(zone!, id) : undefined;
    if (n && method === 'GET') touch(n);
    if (!n || !held.includes(n))
      return googleError(5, `Resource '${resourceName}' was not found`, resourceInfo(resourceName));
    if (method === 'GET') return [200, n.resource];
    if (method === 'DELETE') return remove(n);
    return googleError(5, `Method not found: ${method} ${path}`);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString();
    const url = new URL(req.url ?? '/', 'http://fake');
    const query = Object.fromEntries(url.searchParams);
    let body: unknown;
    let reply: Reply;
    try {
      body = text ? JSON.parse(text) : undefined;
      try {
        reply = route(req.method ?? 'GET', url.pathname, query, body);
      } catch (e) {
        reply = googleError(13, `fake TPU API: ${String(e)}`);
      }
    } catch (e) {
      reply = googleError(3, `Invalid JSON payload received. ${String(e)}`);
    }
    requests.push({
      method: req.method ?? '',
      path: url.pathname,
      query,
      ...(text ? { body } : {}),
      status: reply[0],
    });
    res.writeHead(reply[0], { 'content-type': 'application/json; charset=UTF-8' });
    res.end(JSON.stringify(reply[1], null, 2));
  };

  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

  const stopNode = async (
    zone: string,
    id: string,
    state: typeof TpuState.Preempted | typeof TpuState.Terminated,
  ) => {
    const n = find(zone, id);
    if (!n || n.resource.state !== TpuState.Ready)
      throw new Error(`fake TPU: ${zone}/${id} is ${n?.resource.state ?? 'absent'}, not READY`);
    n.resource.state = state;
    delete n.resource.health; // [U] what health a preempted node reports
    await opts.onPreempt?.(n, state);
  };

  return {
    url,
    requests,
    options,
    nodes: (zone) => held.filter((n) => !zone || n.zone === zone),
    node: (zone, id) => find(zone, id),
    seed(project, zone, id, body) {
      if (find(zone, id)) throw new Error(`fake TPU: ${zone}/${id} exists already`);
      const n: Held = {
        zone,
        id,
        addresses: [],
        resource: nodeResource(project, zone, id, { runtimeVersion: 'tpu-ubuntu2204-base', ...body }),
      };
      held.push(n);
      startOp(n, 'create');
      settle(n, n.pending!);
      if (n.resource.state !== TpuState.Ready) throw new Error(`fake TPU: no capacity to seed ${zone}/${id}`);
      return n;
    },
    preempt: (zone, id) => stopNode(zone, id, TpuState.Preempted),
    terminate: (zone, id) => stopNode(zone, id, TpuState.Terminated),
    failCapacity: (zone, on) => void (on ? full.add(zone) : full.delete(zone)),
    failQuota: (zone, on) => void (on ? quota.add(zone) : quota.delete(zone)),
    settleAtNextRead: (zone, id) => {
      const p = find(zone, id)?.pending;
      if (!p) throw new Error(`nothing pending on ${zone}/${id}`);
      p.readsLeft = 1;
    },
    async configDir(project) {
      const dir = await mkdtemp(join(tmpdir(), 'adv-gcloud-'));
      dirs.push(dir);
      await writeGcloudConfig(dir, project, url);
      return dir;
    },
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      for (const d of dirs) await rm(d, { recursive: true, force: true });
    },
  };
}
