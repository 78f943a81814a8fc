/**
 * The object semantics of the fake Kubernetes API server (fake-k8s.ts), under the HTTP layer:
 * create / replace / patch / delete as the kube-apiserver's generic registry does them, the
 * per-type strategies the real server applies (defaults, status subresource resets, Secret
 * `stringData`, pod graceful deletion, Service cluster IPs), admission hooks (fake-volcano.ts
 * registers Volcano's webhooks here), and the garbage collector (ownerReferences, background /
 * foreground / orphan propagation, finalizers).
 *
 * Faithful: a DELETE answers the object for pods and services (their registries set
 * ReturnDeletedObject) and a `Status` Success with `details {name, group, kind, uid}` for the
 * rest (CRDs included); a pod on a node is deleted gracefully (deletionTimestamp +
 * deletionGracePeriodSeconds, the kubelet finishes it), an unscheduled or terminal pod at once;
 * CRDs refuse an update without `metadata.resourceVersion` (422), core types allow it; `create`
 * in a missing namespace is a 404 `namespaces "x" not found`.
 * Simplified: strategic-merge patches are applied as JSON merge patches (lists replaced, not
 * merged by key); server-side apply is not served (415); few field validations beyond names.
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- Kubernetes objects are untyped JSON, read field by field */
import { randomBytes } from 'node:crypto';
import jsonpatch, { type Operation } from 'fast-json-patch';
import {
  apiError,
  apiVersionOf,
  badRequest,
  clone,
  defOf,
  invalid,
  notFound,
  now,
  parseQuantity,
  qualifiedName,
  RESOURCES,
  Store,
  type FieldError,
  type Obj,
  type ResourceDef,
} from './fake-k8s-store.js';

/** An admission hook: may change `obj` (mutating) or throw an ApiError (validating). */
export type Admit = (op: 'CREATE' | 'UPDATE', obj: Obj, old: Obj | undefined) => void;

export interface DeleteOptions {
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan';
  gracePeriodSeconds?: number;
  preconditions?: { uid?: string; resourceVersion?: string };
  dryRun?: string[];
}

export interface WriteOptions {
  dryRun?: boolean;
  /** A write by a controller (not through the API's admission chain): no webhooks. */
  internal?: boolean;
  subresource?: string;
}

const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL1035 = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

const subdomainMsg = (v: string) =>
  `Invalid value: "${v}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`;
const labelMsg = (v: string) =>
  `Invalid value: "${v}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`;
const label1035Msg = (v: string) =>
  `Invalid value: "${v}": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`;

/** Checks a DNS-1123 label (task names, container names); the FieldError or undefined. */
export function checkLabel(field: string, v: string): FieldError | undefined {
  if (LABEL.test(v) && v.length <= 63) return undefined;
  return { field, reason: 'FieldValueInvalid', message: labelMsg(v) };
}

/** The API's object semantics over a Store. */
export class Cluster {
  readonly store = new Store();
  private readonly admitters = new Map<string, Admit[]>();
  private nextIp = 1;

  /** Registers an admission hook for a resource type (CREATE and UPDATE through the API). */
  onAdmit(resource: string, fn: Admit): void {
    this.admitters.set(resource, [...(this.admitters.get(resource) ?? []), fn]);
  }

  constructor() {
    this.store.subscribe((c) => {
      if (c.type === 'DELETED') setImmediate(() => this.collect(c.object));
      else if (c.type === 'MODIFIED') this.maybeFinalize(c.def, c.object);
    });
  }

  // ---- create ----

  create(d: ResourceDef, ns: string | undefined, body: Obj, opts: WriteOptions = {}): Obj {
    const o = clone(body ?? {});
    this.checkKind(d, o);
    o.metadata ??= {};
    const m = o.metadata;
    if (!m.name && m.generateName) m.name = `${m.generateName}${randomName(5)}`;
    if (d.namespaced) {
      if (m.namespace && ns && m.namespace !== ns)
        throw badRequest(
          'the namespace of the provided object does not match the namespace sent on the request',
        );
      m.namespace = ns ?? m.namespace;
      if (!this.store.get(defOf('namespaces'), undefined, m.namespace))
        throw notFound(defOf('namespaces'), m.namespace);
    } else delete m.namespace;
    if (!m.name)
      throw invalid(d, '', [
        {
          field: 'metadata.name',
          reason: 'FieldValueRequired',
          message: 'Required value: name or generateName is required',
        },
      ]);
    this.checkName(d, m.name);
    if (d.subresources.includes('status') && !opts.internal) delete o.status;
    delete m.deletionTimestamp;
    for (const k of ['uid', 'resourceVersion', 'creationTimestamp', 'generation']) delete m[k];
    this.defaults(d, o);
    if (!opts.internal) for (const fn of this.admitters.get(d.resource) ?? []) fn('CREATE', o, undefined);
    this.validate(d, o);
    if (this.store.get(d, m.namespace, m.name)) throw this.alreadyExists(d, m.name);
    if (opts.dryRun) return { ...o, apiVersion: apiVersionOf(d), kind: d.kind };
    return this.store.create(d, o);
  }

  private alreadyExists(d: ResourceDef, name: string) {
    return apiError(409, 'AlreadyExists', `${qualifiedName(d)} "${name}" already exists`, {
      name,
      ...(d.group ? { group: d.group } : {}),
      kind: d.resource,
    });
  }

  // ---- update ----

  /** PUT: the whole object (or its status, with `subresource: 'status'`). */
  replace(d: ResourceDef, ns: string | undefined, name: string, body: Obj, opts: WriteOptions = {}): Obj {
    const o = clone(body ?? {});
    this.checkKind(d, o);
    o.metadata ??= {};
    if (o.metadata.name !== undefined && o.metadata.name !== name)
      throw badRequest(
        `the name of the object (${o.metadata.name}) does not match the name on the URL (${name})`,
      );
    if (d.namespaced && o.metadata.namespace && o.metadata.namespace !== ns)
      throw badRequest(
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    const old = this.store.must(d, ns, name);
    o.metadata.name = name;
    if (d.namespaced) o.metadata.namespace = ns;
    if (!o.metadata.resourceVersion && d.crd && !opts.internal)
      throw invalid(d, name, [
        {
          field: 'metadata.resourceVersion',
          reason: 'FieldValueInvalid',
          message: 'Invalid value: 0x0: must be specified for an update',
        },
      ]);
    if (o.metadata.resourceVersion && o.metadata.resourceVersion !== old.metadata.resourceVersion)
      throw apiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${qualifiedName(d)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        { name, ...(d.group ? { group: d.group } : {}), kind: d.resource },
      );
    let next: Obj;
    if (opts.subresource === 'status') {
      next = { ...clone(old), status: o.status };
    } else {
      next = o;
      if (d.subresources.includes('status') && !opts.internal) {
        if (old.status === undefined) delete next.status;
        else next.status = clone(old.status);
      }
      if (d.resource === 'secrets') foldStringData(next);
      if (!opts.internal) for (const fn of this.admitters.get(d.resource) ?? []) fn('UPDATE', next, old);
      if (d.resource === 'pods' && !opts.internal) checkPodUpdate(old, next);
    }
    this.validate(d, next);
    if (opts.dryRun) return next;
    const out = this.store.update(d, next, { checkVersion: false });
    return out;
  }

  /** PATCH: json-patch, merge-patch or strategic-merge-patch (applied as a merge patch). */
  patch(
    d: ResourceDef,
    ns: string | undefined,
    name: string,
    type: string,
    patch: any,
    opts: WriteOptions = {},
  ): Obj {
    const old = this.store.must(d, ns, name);
    let next: Obj;
    const base = clone(old);
    if (type.startsWith('application/json-patch+json')) {
      try {
        next = jsonpatch.applyPatch(base, patch as Operation[], true, false).newDocument;
      } catch (e) {
        throw apiError(
          422,
          'Invalid',
          `the server rejected our request due to an error in our request: ${String(e)}`,
        );
      }
    } else if (
      type.startsWith('application/merge-patch+json') ||
      type.startsWith('application/strategic-merge-patch+json')
    ) {
      next = mergePatch(base, patch) as Obj;
    } else {
      throw apiError(
        415,
        'UnsupportedMediaType',
        `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`,
      );
    }
    if (!next.metadata?.resourceVersion)
      next.metadata = { ...next.metadata, resourceVersion: old.metadata.resourceVersion };
    return this.replace(d, ns, name, next, { ...opts, internal: opts.internal });
  }

  // ---- delete ----

  /**
   * DELETE: what the handler answers (the object, or a Status for types that do not return the
   * deleted object) and whether it is gone already.
   */
  delete(
    d: ResourceDef,
    ns: string | undefined,
    name: string,
    opts: DeleteOptions = {},
  ): { body: Obj; gone: boolean } {
    const o = this.store.must(d, ns, name);
    const pre = opts.preconditions ?? {};
    if (pre.uid && pre.uid !== o.metadata.uid)
      throw apiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${qualifiedName(d)} "${name}": Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${o.metadata.uid}`,
        { name, ...(d.group ? { group: d.group } : {}), kind: d.resource },
      );
    if (pre.resourceVersion && pre.resourceVersion !== o.metadata.resourceVersion)
      throw apiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${qualifiedName(d)} "${name}": Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${o.metadata.resourceVersion}`,
        { name, ...(d.group ? { group: d.group } : {}), kind: d.resource },
      );
    if (opts.dryRun?.includes('All')) return { body: o, gone: false };
    const policy = opts.propagationPolicy ?? 'Background';
    if (policy === 'Orphan') this.orphan(o);
    // A pod on a node that has not ended is deleted gracefully: the kubelet stops it, then removes it.
    if (d.resource === 'pods') {
      const grace = opts.gracePeriodSeconds ?? o.spec?.terminationGracePeriodSeconds ?? 30;
      const terminal = ['Succeeded', 'Failed'].includes(o.status?.phase);
      if (o.spec?.nodeName && !terminal && !(grace === 0 && opts.gracePeriodSeconds === 0)) {
        const out = this.store.mutate(d, ns, name, (p) => {
          const cur = p.metadata.deletionGracePeriodSeconds;
          if (cur !== undefined && cur <= grace) return;
          p.metadata.deletionTimestamp = new Date(Date.now() + grace * 1000)
            .toISOString()
            .replace(/\.\d+Z$/, 'Z');
          p.metadata.deletionGracePeriodSeconds = grace;
        })!;
        return { body: out, gone: false };
      }
    }
    const finalizers: string[] = [...(o.metadata.finalizers ?? [])];
    if (policy === 'Foreground' && this.dependents(o).length) finalizers.push('foregroundDeletion');
    if (finalizers.length) {
      const out = this.store.mutate(d, ns, name, (p) => {
        p.metadata.deletionTimestamp ??= now();
        p.metadata.deletionGracePeriodSeconds ??= 0;
        p.metadata.finalizers = [...new Set(finalizers)];
      })!;
      if (policy === 'Foreground')
        for (const dep of this.dependents(o)) this.deleteQuietly(dep, 'Background');
      return { body: out, gone: false };
    }
    if (d.resource === 'namespaces') return this.deleteNamespace(o);
    const last = this.store.remove(d, ns, name)!;
    return { body: returnsObject(d) ? last : deletedStatus(d, last), gone: true };
  }

  /** Removes a pod whose containers have stopped (the kubelet's final, grace-0 delete), if it is still that pod. */
  finishPodDeletion(ns: string, name: string, uid: string): void {
    if (this.store.get(defOf('pods'), ns, name)?.metadata.uid === uid)
      this.store.remove(defOf('pods'), ns, name);
  }

  private deleteNamespace(o: Obj): { body: Obj; gone: boolean } {
    const out = this.store.mutate(defOf('namespaces'), undefined, o.metadata.name, (n) => {
      n.metadata.deletionTimestamp ??= now();
      n.status = { phase: 'Terminating' };
    })!;
    setImmediate(() => {
      for (const { def, object } of this.store.all())
        if (def.namespaced && object.metadata.namespace === o.metadata.name)
          this.deleteQuietly(object, 'Background');
      const drained = () =>
        !this.store.all().some((x) => x.def.namespaced && x.object.metadata.namespace === o.metadata.name);
      const poll = setInterval(() => {
        if (!drained()) return;
        clearInterval(poll);
        this.store.remove(defOf('namespaces'), undefined, o.metadata.name);
      }, 50);
      poll.unref();
    });
    return { body: out, gone: false };
  }

  /** A delete by a controller or the GC: NotFound and the like are ignored. */
  deleteQuietly(o: Obj, policy: DeleteOptions['propagationPolicy'] = 'Background'): void {
    const d = defByObject(o);
    try {
      this.delete(d, o.metadata.namespace, o.metadata.name, {
        propagationPolicy: policy,
        preconditions: { uid: o.metadata.uid },
      });
    } catch {
      // Gone already, or replaced by a new object of that name.
    }
  }

  // ---- garbage collection ----

  /** Objects that name `owner` (by uid) in their ownerReferences. */
  dependents(owner: Obj): Obj[] {
    const uid = owner.metadata.uid;
    return this.store
      .all()
      .map((x) => x.object)
      .filter((x) => (x.metadata.ownerReferences ?? []).some((r: Obj) => r.uid === uid));
  }

  private orphan(owner: Obj): void {
    for (const dep of this.dependents(owner))
      this.store.mutate(defByObject(dep), dep.metadata.namespace, dep.metadata.name, (x) => {
        x.metadata.ownerReferences = x.metadata.ownerReferences.filter(
          (r: Obj) => r.uid !== owner.metadata.uid,
        );
        if (!x.metadata.ownerReferences.length) delete x.metadata.ownerReferences;
      });
  }

  /** After `gone` was removed: delete what it owned; finish foreground deletions it was holding up. */
  private collect(gone: Obj): void {
    for (const dep of this.dependents(gone)) {
      const others = dep.metadata.ownerReferences.filter(
        (r: Obj) =>
          r.uid !== gone.metadata.uid && this.store.all().some((x) => x.object.metadata.uid === r.uid),
      );
      if (!others.length) this.deleteQuietly(dep, 'Background');
    }
    for (const r of gone.metadata.ownerReferences ?? []) {
      const owner = this.store.all().find((x) => x.object.metadata.uid === r.uid);
      if (owner) this.maybeFinalize(owner.def, owner.object);
    }
  }

  /** A deleting object whose finalizers are all done (or whose dependents are gone) is removed. */
  private maybeFinalize(d: ResourceDef, o: Obj): void {
    if (!o.metadata.deletionTimestamp || d.resource === 'pods' || d.resource === 'namespaces') return;
    let fin: string[] = o.metadata.finalizers ?? [];
    if (fin.includes('foregroundDeletion') && !this.dependents(o).length)
      fin = fin.filter((f) => f !== 'foregroundDeletion');
    if (fin.length === (o.metadata.finalizers ?? []).length && fin.length) return;
    setImmediate(() => {
      const cur = this.store.get(d, o.metadata.namespace, o.metadata.name);
      if (!cur || cur.metadata.uid !== o.metadata.uid) return;
      const left = (cur.metadata.finalizers ?? []).filter(
        (f: string) => f !== 'foregroundDeletion' || this.dependents(cur).length,
      );
      if (left.length) {
        if (left.length !== cur.metadata.finalizers.length)
          this.store.mutate(
            d,
            cur.metadata.namespace,
            cur.metadata.name,
            (x) => void (x.metadata.finalizers = left),
          );
        return;
      }
      this.store.remove(d, cur.metadata.namespace, cur.metadata.name);
    });
  }

  // ---- per-type strategy ----

  private checkKind(d: ResourceDef, o: Obj): void {
    if (o.apiVersion && o.apiVersion !== apiVersionOf(d))
      throw badRequest(
        `the API version in the data (${o.apiVersion}) does not match the expected API version (${apiVersionOf(d)})`,
      );
    if (o.kind && o.kind !== d.kind)
      throw badRequest(`the kind in the data (${o.kind}) does not match the expected kind (${d.kind})`);
    o.apiVersion = apiVersionOf(d);
    o.kind = d.kind;
  }

  private checkName(d: ResourceDef, name: string): void {
    const [re, msg] =
      d.resource === 'services'
        ? [LABEL1035, label1035Msg]
        : d.resource === 'namespaces'
          ? [LABEL, labelMsg]
          : [SUBDOMAIN, subdomainMsg];
    if (!re.test(name) || name.length > (d.resource === 'services' || d.resource === 'namespaces' ? 63 : 253))
      throw invalid(d, name, [{ field: 'metadata.name', reason: 'FieldValueInvalid', message: msg(name) }]);
  }

  private defaults(d: ResourceDef, o: Obj): void {
    switch (d.resource) {
      case 'secrets':
        o.type ??= 'Opaque';
        foldStringData(o);
        break;
      case 'pods':
        podDefaults(o);
        break;
      case 'services': {
        const s = (o.spec ??= {});
        s.type ??= 'ClusterIP';
        s.sessionAffinity ??= 'None';
        s.ipFamilies ??= ['IPv4'];
        s.ipFamilyPolicy ??= 'SingleStack';
        s.internalTrafficPolicy ??= 'Cluster';
        if (!s.clusterIP) s.clusterIP = `10.96.${Math.floor(this.nextIp / 250)}.${(this.nextIp++ % 250) + 2}`;
        s.clusterIPs ??= [s.clusterIP];
        for (const p of s.ports ?? []) {
          p.protocol ??= 'TCP';
          p.targetPort ??= p.port;
        }
        o.status ??= { loadBalancer: {} };
        break;
      }
      case 'namespaces':
        o.metadata.labels = { ...o.metadata.labels, 'kubernetes.io/metadata.name': o.metadata.name };
        o.spec ??= { finalizers: ['kubernetes'] };
        o.status = { phase: 'Active' };
        break;
      case 'persistentvolumeclaims':
        o.spec ??= {};
        o.spec.volumeMode ??= 'Filesystem';
        o.status ??= { phase: 'Pending' };
        break;
    }
  }

  private validate(d: ResourceDef, o: Obj): void {
    if (d.resource !== 'pods') return;
    const errs: FieldError[] = [];
    const cs: Obj[] = o.spec?.containers ?? [];
    if (!cs.length)
      errs.push({ field: 'spec.containers', reason: 'FieldValueRequired', message: 'Required value' });
    cs.forEach((c, i) => {
      if (!c.name)
        errs.push({
          field: `spec.containers[${i}].name`,
          reason: 'FieldValueRequired',
          message: 'Required value',
        });
      else {
        const e = checkLabel(`spec.containers[${i}].name`, c.name);
        if (e) errs.push(e);
      }
      if (!c.image)
        errs.push({
          field: `spec.containers[${i}].image`,
          reason: 'FieldValueRequired',
          message: 'Required value',
        });
    });
    if (errs.length) throw invalid(d, o.metadata.name, errs);
  }
}

/** Pod defaults as the apiserver (and its ServiceAccount admission) fill them in. */
function podDefaults(o: Obj): void {
  const s = (o.spec ??= {});
  s.restartPolicy ??= 'Always';
  s.terminationGracePeriodSeconds ??= 30;
  s.dnsPolicy ??= 'ClusterFirst';
  s.schedulerName ??= 'default-scheduler';
  s.securityContext ??= {};
  s.serviceAccountName ??= 'default';
  s.serviceAccount ??= s.serviceAccountName;
  s.enableServiceLinks ??= true;
  s.priority ??= 0;
  s.preemptionPolicy ??= 'PreemptLowerPriority';
  for (const c of s.containers ?? []) {
    c.terminationMessagePath ??= '/dev/termination-log';
    c.terminationMessagePolicy ??= 'File';
    const tag = /:([^/:@]+)$/.exec(c.image ?? '')?.[1];
    c.imagePullPolicy ??= !tag || tag === 'latest' ? 'Always' : 'IfNotPresent';
    c.resources ??= {};
  }
  o.status = { phase: 'Pending', qosClass: qosClass(s.containers ?? []) };
}

function qosClass(cs: Obj[]): string {
  const req = cs.map((c) => ({ ...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {}) }));
  if (req.every((r) => !Object.keys(r).length)) return 'BestEffort';
  const guaranteed = cs.every((c) => {
    const l = c.resources?.limits ?? {};
    const r = c.resources?.requests ?? l;
    return ['cpu', 'memory'].every(
      (k) => l[k] !== undefined && parseQuantity(r[k] ?? l[k]) === parseQuantity(l[k]),
    );
  });
  return guaranteed ? 'Guaranteed' : 'Burstable';
}

/** A pod's spec may change only in images, activeDeadlineSeconds, tolerations and scheduling gates. */
function checkPodUpdate(old: Obj, next: Obj): void {
  const norm = (p: Obj) => {
    const s = clone(p.spec ?? {});
    for (const c of s.containers ?? []) delete c.image;
    delete s.activeDeadlineSeconds;
    delete s.tolerations;
    delete s.schedulingGates;
    return JSON.stringify(s);
  };
  if (norm(old) !== norm(next))
    throw invalid(defOf('pods'), old.metadata.name, [
      {
        field: 'spec',
        reason: 'FieldValueForbidden',
        message:
          'Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)',
      },
    ]);
}

function foldStringData(o: Obj): void {
  if (!o.stringData) return;
  o.data ??= {};
  for (const [k, v] of Object.entries(o.stringData)) o.data[k] = Buffer.from(String(v)).toString('base64');
  delete o.stringData;
}

/** RFC 7386 JSON merge patch. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Obj =
    target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Obj) } : {};
  for (const [k, v] of Object.entries(patch as Obj)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

const returnsObject = (d: ResourceDef) => d.resource === 'pods' || d.resource === 'services';

function deletedStatus(d: ResourceDef, o: Obj): Obj {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Success',
    details: {
      name: o.metadata.name,
      ...(d.group ? { group: d.group } : {}),
      kind: d.resource,
      uid: o.metadata.uid,
    },
  };
}

/** The type of a stored object (by its kind and apiVersion). */
export function defByObject(o: Obj): ResourceDef {
  const d = RESOURCES.find((x) => x.kind === o.kind && apiVersionOf(x) === o.apiVersion);
  if (!d) throw new Error(`fake-k8s: no type for ${o.apiVersion} ${o.kind}`);
  return d;
}

function randomName(n: number): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  return [...randomBytes(n)].map((b) => alphabet[b % alphabet.length]).join('');
}
