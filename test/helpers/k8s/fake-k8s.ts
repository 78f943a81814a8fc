/**
 * A fake Kubernetes API server with Volcano installed, on loopback, for the real `kubectl` to
 * drive; with a fake Volcano job controller and scheduler (fake-volcano*.ts) and a fake kubelet
 * that runs each pod's container as a local process (fake-kubelet*.ts). Test infrastructure for
 * the `volcano` backend, which calls kubectl and reads what it prints.
 *
 * Layers: fake-k8s-store.ts (objects, resourceVersions, selectors, `Status` errors),
 * fake-k8s-api.ts (create/update/patch/delete semantics, admission, garbage collection),
 * fake-k8s-discovery.ts (discovery, OpenAPI, Tables — and what kubectl asks of them),
 * fake-k8s-streams.ts (`exec` and `port-forward`: WebSocket and SPDY/3.1), this file (HTTPS:
 * routing, auth, lists, watches, logs, upgrades, and `startFakeK8s`).
 *
 * Faithful, as kubectl sees it: HTTPS (a self-signed cert the kubeconfig trusts: kubectl sends a
 * kubeconfig's token only over TLS) with bearer-token auth (401 `Unauthorized` Status; kubectl
 * prints `error: You must be logged in to the server (Unauthorized)`), `/version`, discovery,
 * OpenAPI v3 advertising `fieldValidation` (so `kubectl create` validates server-side, without
 * warnings), the `Status` bodies of errors (from which kubectl prints `Error from server
 * (NotFound): jobs.batch.volcano.sh "x" not found` and the like), lists with label and field
 * selectors (`<Kind>List`; items of core types without kind/apiVersion, as the real server sends
 * them), watches (`?watch=true`: newline-delimited events from a resourceVersion, or the initial
 * ADDED events first; objects entering/leaving a selector as ADDED/DELETED) as `kubectl delete`
 * (waiting), `get -w` and `wait --for=delete` use them, server-side Tables, `pods/log`, dry runs,
 * garbage collection by ownerReferences, `kubectl exec` (stdin, stdout, stderr, exit code; a tty)
 * and `kubectl port-forward` over WebSocket (kubectl 1.32's default) and SPDY/3.1.
 * Simplified: one node (`fake-node`), no RBAC, no pagination (`limit` is ignored, every list is
 * one page), no server-side apply, no `attach`/`proxy`, no events recorded;
 * request bodies in protobuf (what kubectl's generators such as `kubectl create secret generic`
 * send) are refused with 415, JSON (`kubectl create|apply|replace -f`, patches) is served.
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- Kubernetes objects are untyped JSON, read field by field */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { delimiter, join } from 'node:path';
import { Cluster, type DeleteOptions } from './fake-k8s-api.js';
import {
  apiGroup,
  apiGroupList,
  apiResourceList,
  apiVersions,
  openApiV2Protobuf,
  openApiV3Doc,
  openApiV3Index,
  toTable,
  versionInfo,
} from './fake-k8s-discovery.js';
import {
  apiError,
  ApiError,
  apiVersionOf,
  badRequest,
  defOf,
  matchesLabels,
  parseFieldSelector,
  parseLabelSelector,
  RESOURCES,
  statusBody,
  type Change,
  type Obj,
  type ResourceDef,
} from './fake-k8s-store.js';
import { unknownFields } from './fake-k8s-schema.js';
import {
  acceptSpdy,
  execRequestOf,
  killExec,
  negotiate,
  refuseUpgrade,
  serveExecSpdy,
  serveExecWebSocket,
  servePortForward,
  SpdySession,
  upgradeOf,
  WebSocketConn,
} from './fake-k8s-streams.js';
import { FakeKubelet } from './fake-kubelet.js';
import { FakeVolcano } from '../volcano/fake-volcano.js';

export interface FakeK8sOptions {
  /** A temp dir the fake owns: kubelet pod dirs, container logs. */
  dir: string;
  /** Namespaces that exist (default ['default']). */
  namespaces?: string[];
  /** Volcano queues (cluster-scoped). Default: one queue 'default' with no capability limit. */
  queues?: { name: string; capability?: Record<string, string>; state?: 'Open' | 'Closed' }[];
  /** PersistentVolumeClaims: `${namespace}/${claimName}` → a host directory that backs it. */
  pvcs?: Record<string, string>;
  /** Bearer token required on every request (default: random). */
  token?: string;
}

/** A request the server got. */
export interface FakeK8sRequest {
  method: string;
  /** The path, without the query. */
  path: string;
  query: Record<string, string>;
  at: number;
}

export interface FakeK8s {
  /** https://127.0.0.1:PORT (kubectl sends a token only over TLS; the kubeconfig trusts its self-signed cert) */
  url: string;
  token: string;
  /** A kubeconfig in opts.dir: cluster, user and context 'fake' (namespace 'default'), current. */
  kubeconfig: string;
  /** 'fake' */
  context: string;
  /** Every request the server got, in order. */
  requests: FakeK8sRequest[];
  /** The stored object, or undefined; `resource` is the plural ('jobs', 'pods', 'queues', …). */
  object(resource: string, namespace: string | undefined, name: string): Record<string, any> | undefined;
  objects(resource: string, namespace?: string): Record<string, any>[];
  /**
   * Kubelet eviction of a running pod: SIGTERM, its grace period, SIGKILL; the pod ends Failed,
   * reason Evicted, with a DisruptionTarget condition, and stays listed. Resolves when the process
   * is gone.
   */
  evict(namespace: string, pod: string): Promise<void>;
  /** volcano #2684: the job's pods are created but stay Pending while the job says Running, until released. */
  holdPods(namespace: string, job: string): void;
  releasePods(namespace: string, job: string): void;
  /** Sets a queue's `spec.capability`. */
  setQueueCapability(name: string, capability: Record<string, string>): void;
  /** PIDs of live container processes. */
  livePids(): number[];
  /** Kills every container process (SIGKILL) and stops the server. */
  close(): Promise<void>;
}

let canRun: boolean | undefined;

/** True when this machine can run the fake kubelet (root, `unshare --mount --uts` works, kubectl on PATH). */
export function canRunFakeK8s(): boolean {
  if (canRun !== undefined) return canRun;
  const onPath = (b: string) =>
    (process.env.PATH ?? '')
      .split(delimiter)
      .some((d) => d && spawnSync('test', ['-x', join(d, b)]).status === 0);
  canRun =
    process.getuid?.() === 0 &&
    onPath('kubectl') &&
    onPath('openssl') &&
    spawnSync('unshare', ['--mount', '--uts', '--propagation', 'private', '--', 'true']).status === 0;
  return canRun;
}

/**
 * Whether the volcano tests can run here (the real kubectl, and root for the fake kubelet's
 * namespaces). In CI they must: a missing piece throws; elsewhere the test is skipped, loudly.
 */
export function k8sAvailable(what: string): boolean {
  const ok = canRunFakeK8s();
  if (!ok && process.env.CI)
    throw new Error(`${what} needs kubectl on PATH and root (unshare --mount) in CI`);
  if (!ok) console.warn(`SKIPPING ${what}: it needs kubectl and root (unshare --mount --uts)`);
  return ok;
}

interface Route {
  def: ResourceDef;
  ns?: string;
  name?: string;
  sub?: string;
}

/** Starts the fake API server, its Volcano controller and kubelet. */
export async function startFakeK8s(opts: FakeK8sOptions): Promise<FakeK8s> {
  const token = opts.token ?? randomBytes(16).toString('hex');
  const cluster = new Cluster();
  for (const ns of opts.namespaces ?? ['default'])
    cluster.create(defOf('namespaces'), undefined, { metadata: { name: ns } }, { internal: true });
  const kubelet = new FakeKubelet(cluster, { dir: opts.dir, pvcs: opts.pvcs ?? {} });
  const volcano = new FakeVolcano(cluster, kubelet, opts.queues ?? [{ name: 'default' }]);
  // The claims of `opts.pvcs`, Bound (the kubelet mounts their host dirs).
  for (const key of Object.keys(opts.pvcs ?? {})) {
    const [ns, name] = key.split('/') as [string, string];
    if (!cluster.store.get(defOf('namespaces'), undefined, ns)) continue;
    cluster.create(
      defOf('persistentvolumeclaims'),
      ns,
      {
        metadata: { name },
        spec: {
          accessModes: ['ReadWriteMany'],
          resources: { requests: { storage: '1Gi' } },
          volumeName: `pv-${ns}-${name}`,
          storageClassName: 'fake-hostpath',
        },
        status: { phase: 'Bound', accessModes: ['ReadWriteMany'], capacity: { storage: '1Gi' } },
      },
      { internal: true },
    );
  }
  const requests: FakeK8sRequest[] = [];
  const watches = new Set<ServerResponse>();
  let serverAddress = '';

  /** Upgraded connections (exec, port-forward), the pods' sockets they opened, exec'd commands. */
  const upgraded = new Set<Duplex>();
  const podSockets = new Set<Socket>();
  const execs = new Set<ChildProcess>();

  const send = (res: ServerResponse, code: number, body: unknown) => {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    const query = Object.fromEntries(url.searchParams);
    requests.push({ method: req.method ?? '', path: url.pathname, query, at: Date.now() });
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (req.headers.authorization !== `Bearer ${token}`)
      return send(res, 401, statusBody(401, 'Unauthorized', 'Unauthorized'));
    try {
      if (/protobuf/.test(req.headers['content-type'] ?? ''))
        throw apiError(
          415,
          'UnsupportedMediaType',
          `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml`,
        );
      const text = Buffer.concat(chunks).toString();
      let body: any;
      if (text) {
        try {
          body = JSON.parse(text);
        } catch (e) {
          throw badRequest(`couldn't get version/kind; json parse error: ${String(e)}`);
        }
      }
      await route(req, res, url.pathname, query, body);
    } catch (e) {
      if (res.headersSent) return void res.end();
      if (e instanceof ApiError) return send(res, e.code, e.status);
      console.error('fake-k8s: internal error', e);
      send(res, 500, statusBody(500, 'InternalError', `Internal error occurred: ${String(e)}`));
    }
  };

  const route = async (
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    q: Record<string, string>,
    body: any,
  ) => {
    const method = req.method ?? 'GET';
    const accept = req.headers.accept ?? '';
    if (method === 'GET') {
      const doc = discovery(path);
      if (doc) {
        if (Buffer.isBuffer(doc)) {
          res.writeHead(200, {
            'content-type': 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf',
          });
          return void res.end(doc);
        }
        return send(res, 200, doc);
      }
    }
    const r = parseRoute(path);
    if (!r) throw apiError(404, 'NotFound', 'the server could not find the requested resource', {});
    const { def: d, ns, name, sub } = r;
    const table = /as=Table/.test(accept);
    if (sub === 'log') {
      if (method !== 'GET') throw methodNotAllowed();
      return kubelet.serveLog(ns!, name!, q, res);
    }
    if (d.resource === 'pods' && (sub === 'exec' || sub === 'portforward'))
      throw badRequest('Upgrade request required');
    if (sub && !d.subresources.includes(sub))
      throw apiError(404, 'NotFound', 'the server could not find the requested resource', {});
    const dryRun = q.dryRun === 'All';
    if ((method === 'POST' || method === 'PUT') && !sub) fieldValidation(res, d, q.fieldValidation, body);
    switch (method) {
      case 'GET':
        if (!name)
          return q.watch === 'true' || q.watch === '1'
            ? watch(req, res, d, ns, q, table)
            : send(res, 200, list(d, ns, q, table));
        {
          const o = cluster.store.must(d, ns, name);
          return send(res, 200, table ? toTable(d, [o], cluster.store.resourceVersion, q.includeObject) : o);
        }
      case 'POST':
        if (name) throw methodNotAllowed();
        return send(res, 201, cluster.create(d, ns, body, { dryRun }));
      case 'PUT':
        if (!name) throw methodNotAllowed();
        return send(res, 200, cluster.replace(d, ns, name, body, { dryRun, subresource: sub }));
      case 'PATCH':
        if (!name) throw methodNotAllowed();
        return send(
          res,
          200,
          cluster.patch(d, ns, name, req.headers['content-type'] ?? '', body, { dryRun, subresource: sub }),
        );
      case 'DELETE': {
        const o: DeleteOptions = { ...(body ?? {}) };
        if (q.propagationPolicy)
          o.propagationPolicy = q.propagationPolicy as DeleteOptions['propagationPolicy'];
        if (q.gracePeriodSeconds) o.gracePeriodSeconds = Number(q.gracePeriodSeconds);
        if (dryRun) o.dryRun = ['All'];
        if (name) {
          const out = cluster.delete(d, ns, name, o);
          return send(res, 200, out.body);
        }
        const items = selected(d, ns, q);
        for (const it of items) cluster.deleteQuietly(it, o.propagationPolicy);
        return send(res, 200, listOf(d, items));
      }
    }
    throw methodNotAllowed();
  };

  /**
   * `pods/NAME/exec` and `pods/NAME/portforward`: a WebSocket (kubectl's default) or SPDY/3.1
   * upgrade, served by fake-k8s-streams.ts against the pod's running container.
   */
  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://fake');
    requests.push({
      method: req.method ?? '',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      at: Date.now(),
    });
    socket.on('error', () => socket.destroy());
    if (req.headers.authorization !== `Bearer ${token}`)
      return refuseUpgrade(socket, 401, statusBody(401, 'Unauthorized', 'Unauthorized'));
    const r = parseRoute(url.pathname);
    const how = upgradeOf(req);
    if (
      !r ||
      r.def.resource !== 'pods' ||
      !r.ns ||
      !r.name ||
      (r.sub !== 'exec' && r.sub !== 'portforward') ||
      !how
    )
      return refuseUpgrade(
        socket,
        404,
        statusBody(404, 'NotFound', 'the server could not find the requested resource'),
      );
    const isExec = r.sub === 'exec';
    const protocol = negotiate(r.sub, how);
    if (!protocol)
      return refuseUpgrade(
        socket,
        400,
        statusBody(
          400,
          'BadRequest',
          `unable to negotiate a stream protocol from [${how.protocols.join(', ')}]`,
        ),
      );
    let target: ReturnType<FakeKubelet['runningContainer']>;
    try {
      target = kubelet.runningContainer(
        r.ns,
        r.name,
        isExec ? (url.searchParams.get('container') ?? undefined) : undefined,
      );
    } catch (e) {
      if (e instanceof ApiError) return refuseUpgrade(socket, e.code, e.status);
      throw e;
    }
    upgraded.add(socket);
    socket.on('close', () => upgraded.delete(socket));
    const exec = { pid: target.pid, env: target.env, processes: execs };
    if (how.kind === 'websocket') {
      const ws = new WebSocketConn(socket, req, head, protocol);
      if (isExec) return serveExecWebSocket(ws, exec, execRequestOf(url.searchParams));
      const session = new SpdySession((b) => ws.send(b));
      ws.onMessage = (m) => session.feed(m);
      ws.onClose = () => session.end();
      return servePortForward(session, { pod: r.name, uid: target.uid, sockets: podSockets });
    }
    const session = acceptSpdy(socket, head, protocol);
    if (isExec) serveExecSpdy(session, exec, execRequestOf(url.searchParams), () => socket.end());
    else servePortForward(session, { pod: r.name, uid: target.uid, sockets: podSockets });
  };

  const discovery = (path: string): Obj | Buffer | undefined => {
    const p = path.replace(/\/+$/, '') || '/';
    if (p === '/version') return versionInfo();
    if (p === '/api') return apiVersions(serverAddress);
    if (p === '/apis') return apiGroupList();
    if (p === '/openapi/v3') return openApiV3Index();
    if (p === '/openapi/v2') return openApiV2Protobuf();
    if (p.startsWith('/openapi/v3/')) return openApiV3Doc(p.slice('/openapi/v3/'.length));
    let m = /^\/api\/(v1)$/.exec(p);
    if (m) return apiResourceList('', m[1]!);
    m = /^\/apis\/([^/]+)$/.exec(p);
    if (m) return apiGroup(m[1]!);
    m = /^\/apis\/([^/]+)\/([^/]+)$/.exec(p);
    if (m) return apiResourceList(m[1]!, m[2]!);
    return undefined;
  };

  const selected = (d: ResourceDef, ns: string | undefined, q: Record<string, string>) => {
    const labels = q.labelSelector ? parseLabelSelector(q.labelSelector) : [];
    const fields = q.fieldSelector ? parseFieldSelector(d, q.fieldSelector) : () => true;
    return cluster.store.list(d, ns).filter((o) => matchesLabels(labels, o.metadata.labels) && fields(o));
  };

  const listOf = (d: ResourceDef, items: Obj[]): Obj => ({
    kind: `${d.kind}List`,
    apiVersion: apiVersionOf(d),
    metadata: { resourceVersion: cluster.store.resourceVersion },
    // The real server sends core types' items without kind/apiVersion (CRDs' items have them).
    items: d.crd ? items : items.map(({ kind: _k, apiVersion: _a, ...rest }) => rest),
  });

  const list = (d: ResourceDef, ns: string | undefined, q: Record<string, string>, table: boolean): Obj =>
    table
      ? toTable(d, selected(d, ns, q), cluster.store.resourceVersion, q.includeObject)
      : listOf(d, selected(d, ns, q));

  const watch = (
    req: IncomingMessage,
    res: ServerResponse,
    d: ResourceDef,
    ns: string | undefined,
    q: Record<string, string>,
    table: boolean,
  ) => {
    const labels = q.labelSelector ? parseLabelSelector(q.labelSelector) : [];
    const fields = q.fieldSelector ? parseFieldSelector(d, q.fieldSelector) : () => true;
    const matches = (o: Obj | undefined) =>
      !!o &&
      (!d.namespaced || ns === undefined || o.metadata.namespace === ns) &&
      matchesLabels(labels, o.metadata.labels) &&
      fields(o);
    const from = q.resourceVersion && q.resourceVersion !== '0' ? Number(q.resourceVersion) : undefined;
    if (from !== undefined && from > Number(cluster.store.resourceVersion))
      throw apiError(
        504,
        'Timeout',
        `Too large resource version: ${from}, current: ${cluster.store.resourceVersion}`,
      );
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
    watches.add(res);
    const write = (type: string, o: Obj) =>
      res.write(
        `${JSON.stringify({ type, object: table ? toTable(d, [o], o.metadata.resourceVersion, q.includeObject) : o })}\n`,
      );
    const translate = (c: Change) => {
      if (c.def !== d) return;
      const was = c.type !== 'ADDED' && matches(c.old);
      const is = c.type !== 'DELETED' && matches(c.object);
      if (is && !was) write('ADDED', c.object);
      else if (is && was) write('MODIFIED', c.object);
      else if (was && !is) write('DELETED', c.object);
    };
    if (from === undefined || q.sendInitialEvents === 'true') {
      for (const o of cluster.store.list(d, ns)) if (matches(o)) write('ADDED', o);
      if (q.sendInitialEvents === 'true')
        write('BOOKMARK', {
          kind: d.kind,
          apiVersion: apiVersionOf(d),
          metadata: {
            resourceVersion: cluster.store.resourceVersion,
            annotations: { 'k8s.io/initial-events-end': 'true' },
          },
        });
    } else for (const c of cluster.store.history) if (c.rv > from) translate(c);
    const unsubscribe = cluster.store.subscribe(translate);
    let stopped = false;
    const stop = () => {
      if (stopped) return;
      stopped = true;
      unsubscribe();
      clearTimeout(timer);
      watches.delete(res);
      res.end();
    };
    const timer = setTimeout(stop, (Number(q.timeoutSeconds) || 1800) * 1000);
    res.on('close', stop);
  };

  mkdirSync(opts.dir, { recursive: true });
  const tls = selfSignedCert(join(opts.dir, 'apiserver'));
  const server = createServer(tls, (req, res) => void handle(req, res));
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    try {
      upgrade(req, socket, head);
    } catch (e) {
      console.error('fake-k8s: internal error', e);
      refuseUpgrade(socket, 500, statusBody(500, 'InternalError', `Internal error occurred: ${String(e)}`));
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  serverAddress = `127.0.0.1:${port}`;
  const url = `https://${serverAddress}`;
  const kubeconfig = join(opts.dir, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: fake',
      '  cluster:',
      `    certificate-authority-data: ${tls.cert.toString('base64')}`,
      `    server: ${url}`,
      'users:',
      '- name: fake',
      '  user:',
      `    token: ${token}`,
      'contexts:',
      '- name: fake',
      '  context:',
      '    cluster: fake',
      '    user: fake',
      '    namespace: default',
      'current-context: fake',
      '',
    ].join('\n'),
    { mode: 0o600 },
  );

  return {
    url,
    token,
    kubeconfig,
    context: 'fake',
    requests,
    object: (resource, namespace, name) => cluster.store.get(defOf(resource), namespace, name),
    objects: (resource, namespace) => cluster.store.list(defOf(resource), namespace),
    evict: (namespace, pod) => kubelet.evict(namespace, pod),
    holdPods: (namespace, job) => volcano.hold(namespace, job),
    releasePods: (namespace, job) => volcano.release(namespace, job),
    setQueueCapability: (name, capability) => volcano.setQueueCapability(name, capability),
    livePids: () => kubelet.livePids(),
    async close() {
      volcano.close();
      for (const c of execs) killExec(c);
      for (const s of [...upgraded, ...podSockets]) s.destroy();
      await kubelet.close();
      for (const w of watches) w.end();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/**
 * A self-signed serving certificate for 127.0.0.1 (openssl), written to `base`.key/.crt: kubectl
 * sends a kubeconfig's credentials only over TLS (client-go's clientcmd applies the user's token
 * only when the transport is TLS), so the fake serves HTTPS and the kubeconfig trusts this cert.
 */
function selfSignedCert(base: string): { key: Buffer; cert: Buffer } {
  const out = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      `${base}.key`,
      '-out',
      `${base}.crt`,
      '-days',
      '7',
      '-subj',
      '/CN=fake-kube-apiserver',
      '-addext',
      'subjectAltName=IP:127.0.0.1,DNS:localhost',
    ],
    { encoding: 'utf8' },
  );
  if (out.status !== 0) throw new Error(`fake-k8s: openssl could not make a certificate: ${out.stderr}`);
  return { key: readFileSync(`${base}.key`), cert: readFileSync(`${base}.crt`) };
}

/**
 * `fieldValidation`: Strict → 400 for unknown fields (the decoder's message), Warn → a Warning
 * header per field (kubectl prints `Warning: unknown field "…"`), Ignore or none → nothing.
 */
function fieldValidation(res: ServerResponse, d: ResourceDef, mode: string | undefined, body: unknown): void {
  if (mode !== 'Strict' && mode !== 'Warn') return;
  const unknown = body && typeof body === 'object' ? unknownFields(d.resource, body as Obj) : [];
  if (!unknown.length) return;
  const each = unknown.map((f) => `unknown field "${f}"`);
  if (mode === 'Strict')
    throw badRequest(
      `${d.kind} in version "${d.version}" cannot be handled as a ${d.kind}: strict decoding error: ${each.join(', ')}`,
    );
  res.setHeader(
    'Warning',
    each.map((w) => `299 - ${JSON.stringify(w)}`),
  );
}

const methodNotAllowed = () =>
  apiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource', {});

/** `/api/v1/namespaces/NS/pods/NAME/log`, `/apis/G/V/queues/NAME`, … → the type, namespace, name, subresource. */
function parseRoute(path: string): Route | undefined {
  const seg = path.split('/').filter(Boolean).map(decodeURIComponent);
  let group = '';
  let version: string;
  let rest: string[];
  if (seg[0] === 'api' && seg.length >= 3) [version, rest] = [seg[1]!, seg.slice(2)];
  else if (seg[0] === 'apis' && seg.length >= 4) [group, version, rest] = [seg[1]!, seg[2]!, seg.slice(3)];
  else return undefined;
  const find = (resource: string) =>
    RESOURCES.find((d) => d.group === group && d.version === version && d.resource === resource);
  if (
    rest[0] === 'namespaces' &&
    rest.length >= 3 &&
    !(rest.length === 3 && ['status', 'finalize'].includes(rest[2]!))
  ) {
    const def = find(rest[2]!);
    if (!def?.namespaced || rest.length > 5) return undefined;
    return { def, ns: rest[1], name: rest[3], sub: rest[4] };
  }
  const def = find(rest[0]!);
  if (!def || rest.length > 3) return undefined;
  if (def.namespaced && rest.length > 1) return undefined;
  return { def, name: rest[1], sub: rest[2] };
}

/**
 * Every container log the fake kubelet kept under `dir` (the `dir` given to startFakeK8s), pod by
 * pod in the order they started: what a failed assertion prints, since a pod's own output (its adv
 * exec's lines) is not in the object store.
 */
export async function podLogs(dir: string): Promise<string> {
  const pods = join(dir, 'pods');
  const files: { path: string; at: number }[] = [];
  for (const uid of await readdir(pods).catch(() => []))
    for (const container of await readdir(join(pods, uid, 'logs')).catch(() => []))
      for (const f of await readdir(join(pods, uid, 'logs', container)).catch(() => [])) {
        const path = join(pods, uid, 'logs', container, f);
        files.push({ path, at: (await stat(path).catch(() => undefined))?.birthtimeMs ?? 0 });
      }
  files.sort((a, b) => a.at - b.at);
  const out: string[] = [];
  for (const f of files)
    out.push(`--- ${f.path}\n${await readFile(f.path, 'utf8').catch(() => '(unreadable)')}`);
  return out.join('\n');
}
