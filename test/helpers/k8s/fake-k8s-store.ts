/**
 * The storage half of the fake Kubernetes API server (fake-k8s.ts): the resource types it
 * serves, the object store with one global resourceVersion counter and a history of changes for
 * watches, label and field selectors, the `Status` error bodies the real apiserver answers with,
 * and resource quantities. No HTTP here; the controllers (fake-volcano.ts, fake-kubelet.ts) use
 * the store directly, as in-cluster controllers use an informer cache and the API.
 *
 * Faithful: the error messages and `details` of NotFound / AlreadyExists / Conflict / Invalid /
 * BadRequest (`jobs.batch.volcano.sh "x" not found`, …), resourceVersion bumped on every write
 * (status writes included), `generation` bumped on spec changes only, label selector syntax
 * (`=`, `==`, `!=`, `in`, `notin`, `key`, `!key`, `>`, `<`), field selectors `metadata.name`,
 * `metadata.namespace` (+ a few per-type fields), watch history replayed from a resourceVersion.
 * Simplified: no etcd compaction (history is kept whole, 410 Gone only for a version from the
 * future), one store for all namespaces.
 */
/* eslint-disable @typescript-eslint/no-explicit-any -- Kubernetes objects are untyped JSON, read field by field */
import { randomUUID } from 'node:crypto';

/** A Kubernetes object (JSON). */
export type Obj = Record<string, any>;

/** One served resource type: what discovery lists and what the paths name. */
export interface ResourceDef {
  /** '' for the core group. */
  group: string;
  version: string;
  /** The plural, as in paths: 'jobs'. */
  resource: string;
  singular: string;
  kind: string;
  namespaced: boolean;
  shortNames: string[];
  /** Subresources served: 'status', 'log', 'exec', 'portforward'. */
  subresources: string[];
  categories?: string[];
  /** Whether this is a CustomResourceDefinition's type (DELETE answers a Status, not the object). */
  crd?: boolean;
}

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];
export { VERBS };

/** The types the fake serves: core v1 and Volcano's CRDs (as its helm chart installs them). */
export const RESOURCES: ResourceDef[] = [
  core('pods', 'pod', 'Pod', true, ['po'], ['status', 'log', 'exec', 'portforward'], ['all']),
  core('configmaps', 'configmap', 'ConfigMap', true, ['cm']),
  core('secrets', 'secret', 'Secret', true, []),
  core('services', 'service', 'Service', true, ['svc'], ['status'], ['all']),
  core('namespaces', 'namespace', 'Namespace', false, ['ns'], ['status']),
  core('events', 'event', 'Event', true, ['ev']),
  core('persistentvolumeclaims', 'persistentvolumeclaim', 'PersistentVolumeClaim', true, ['pvc'], ['status']),
  {
    group: 'batch.volcano.sh',
    version: 'v1alpha1',
    resource: 'jobs',
    singular: 'job',
    kind: 'Job',
    namespaced: true,
    shortNames: ['vcjob', 'vj'],
    subresources: ['status'],
    crd: true,
  },
  {
    group: 'scheduling.volcano.sh',
    version: 'v1beta1',
    resource: 'queues',
    singular: 'queue',
    kind: 'Queue',
    namespaced: false,
    shortNames: ['q', 'queue-v1beta1'],
    subresources: ['status'],
    crd: true,
  },
  {
    group: 'scheduling.volcano.sh',
    version: 'v1beta1',
    resource: 'podgroups',
    singular: 'podgroup',
    kind: 'PodGroup',
    namespaced: true,
    shortNames: ['pg', 'podgroup-v1beta1'],
    subresources: ['status'],
    crd: true,
  },
];

function core(
  resource: string,
  singular: string,
  kind: string,
  namespaced: boolean,
  shortNames: string[],
  subresources: string[] = [],
  categories?: string[],
): ResourceDef {
  return {
    group: '',
    version: 'v1',
    resource,
    singular,
    kind,
    namespaced,
    shortNames,
    subresources,
    categories,
  };
}

/** The type named by its plural (`jobs`, `pods`, …). */
export function defOf(resource: string): ResourceDef {
  const d = RESOURCES.find((r) => r.resource === resource);
  if (!d) throw new Error(`fake-k8s: no resource type ${resource}`);
  return d;
}

export const apiVersionOf = (d: ResourceDef): string => (d.group ? `${d.group}/${d.version}` : d.version);
/** `jobs.batch.volcano.sh`, `pods`: how the apiserver names a type in messages. */
export const qualifiedName = (d: ResourceDef): string => (d.group ? `${d.resource}.${d.group}` : d.resource);

/** An error the API answers with: an HTTP code and a `Status` body. */
export class ApiError extends Error {
  constructor(readonly status: Obj) {
    super(String(status.message));
  }
  get code(): number {
    return this.status.code as number;
  }
}

/** A `Status` failure body, as the apiserver writes it. */
export function statusBody(code: number, reason: string, message: string, details?: Obj): Obj {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    ...(reason ? { reason } : {}),
    ...(details ? { details } : {}),
    code,
  };
}

export const apiError = (code: number, reason: string, message: string, details?: Obj): ApiError =>
  new ApiError(statusBody(code, reason, message, details));

const detailsOf = (d: ResourceDef, name: string): Obj => ({
  name,
  ...(d.group ? { group: d.group } : {}),
  kind: d.resource,
});

export const notFound = (d: ResourceDef, name: string): ApiError =>
  apiError(404, 'NotFound', `${qualifiedName(d)} "${name}" not found`, detailsOf(d, name));
export const alreadyExists = (d: ResourceDef, name: string): ApiError =>
  apiError(409, 'AlreadyExists', `${qualifiedName(d)} "${name}" already exists`, detailsOf(d, name));
export const conflict = (d: ResourceDef, name: string): ApiError =>
  apiError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${qualifiedName(d)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    detailsOf(d, name),
  );
export const badRequest = (message: string): ApiError => apiError(400, 'BadRequest', message);

/** One field error of a 422 Invalid answer. */
export interface FieldError {
  field: string;
  /** 'FieldValueInvalid' | 'FieldValueRequired' | … */
  reason: string;
  /** As printed after the field: `Invalid value: "x": …`, `Required value`. */
  message: string;
}

/** 422 Invalid: `The Job "x" is invalid: spec.tasks[0].name: Invalid value: …` (kubectl prints the causes). */
export function invalid(d: ResourceDef, name: string, errs: FieldError[]): ApiError {
  const list = errs.map((e) => `${e.field}: ${e.message}`);
  const message = `${d.kind}${d.group ? `.${d.group}` : ''} "${name}" is invalid: ${
    list.length === 1 ? list[0] : `[${list.join(', ')}]`
  }`;
  return apiError(422, 'Invalid', message, {
    name,
    ...(d.group ? { group: d.group } : {}),
    kind: d.kind,
    causes: errs.map((e) => ({ reason: e.reason, message: e.message, field: e.field })),
  });
}

/** A change, as watches and controllers see it. */
export interface Change {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  def: ResourceDef;
  /** The object after the change (for DELETED: its last state, with the deletion's resourceVersion). */
  object: Obj;
  /** The object before (MODIFIED, DELETED). */
  old?: Obj;
  rv: number;
}

export const clone = <T>(o: T): T => structuredClone(o);

const keyOf = (d: ResourceDef, ns: string | undefined, name: string) =>
  `${d.resource}/${d.namespaced ? (ns ?? '') : ''}/${name}`;

/**
 * All objects, one resourceVersion counter, and every change since the start (for watches from a
 * resourceVersion). Writes are synchronous; listeners run synchronously after each write, in
 * order, and must not throw.
 */
export class Store {
  private rv = 1;
  private readonly objects = new Map<string, Obj>();
  readonly history: Change[] = [];
  private readonly listeners = new Set<(c: Change) => void>();

  get resourceVersion(): string {
    return String(this.rv);
  }

  subscribe(fn: (c: Change) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  get(d: ResourceDef, ns: string | undefined, name: string): Obj | undefined {
    return this.objects.get(keyOf(d, ns, name));
  }

  /** The object or a 404 NotFound. */
  must(d: ResourceDef, ns: string | undefined, name: string): Obj {
    const o = this.get(d, ns, name);
    if (!o) throw notFound(d, name);
    return o;
  }

  list(d: ResourceDef, ns?: string): Obj[] {
    const out: Obj[] = [];
    for (const o of this.objects.values()) {
      if (o.kind !== d.kind || apiVersionOf(d) !== o.apiVersion) continue;
      if (d.namespaced && ns !== undefined && o.metadata.namespace !== ns) continue;
      out.push(o);
    }
    return out.sort((a, b) =>
      `${a.metadata.namespace ?? ''}/${a.metadata.name}`.localeCompare(
        `${b.metadata.namespace ?? ''}/${b.metadata.name}`,
      ),
    );
  }

  /** Stores a new object: uid, resourceVersion, creationTimestamp, generation 1. */
  create(d: ResourceDef, obj: Obj): Obj {
    const m = obj.metadata;
    if (this.get(d, m.namespace, m.name)) throw alreadyExists(d, m.name);
    const o = clone(obj);
    o.apiVersion = apiVersionOf(d);
    o.kind = d.kind;
    o.metadata = {
      ...o.metadata,
      uid: randomUUID(),
      resourceVersion: this.bump(),
      // Only custom resources carry a generation here (in 1.32 core types like Secret and Pod do not).
      ...(d.crd ? { generation: 1 } : {}),
      creationTimestamp: now(),
    };
    if (!d.namespaced) delete o.metadata.namespace;
    delete o.metadata.deletionTimestamp;
    this.objects.set(keyOf(d, m.namespace, m.name), o);
    this.emit({ type: 'ADDED', def: d, object: o, rv: this.rv });
    return o;
  }

  /**
   * Replaces a stored object (by its namespace/name) with `next`; bumps resourceVersion, and
   * generation when anything but metadata and status changed. Checks `next`'s resourceVersion
   * when it has one (409 Conflict if stale).
   */
  update(d: ResourceDef, next: Obj, opts: { checkVersion?: boolean } = {}): Obj {
    const m = next.metadata;
    const old = this.must(d, m.namespace, m.name);
    if (
      opts.checkVersion !== false &&
      m.resourceVersion &&
      m.resourceVersion !== old.metadata.resourceVersion
    )
      throw conflict(d, m.name);
    const o = clone(next);
    o.apiVersion = apiVersionOf(d);
    o.kind = d.kind;
    const specChanged = JSON.stringify(strip(old)) !== JSON.stringify(strip(o));
    o.metadata = {
      ...o.metadata,
      uid: old.metadata.uid,
      creationTimestamp: old.metadata.creationTimestamp,
      ...(d.crd ? { generation: (old.metadata.generation ?? 1) + (specChanged ? 1 : 0) } : {}),
      resourceVersion: this.bump(),
    };
    if (old.metadata.deletionTimestamp) {
      o.metadata.deletionTimestamp = old.metadata.deletionTimestamp;
      if (old.metadata.deletionGracePeriodSeconds !== undefined)
        o.metadata.deletionGracePeriodSeconds = old.metadata.deletionGracePeriodSeconds;
    }
    this.objects.set(keyOf(d, m.namespace, m.name), o);
    this.emit({ type: 'MODIFIED', def: d, object: o, old, rv: this.rv });
    return o;
  }

  /** Read-modify-write of a stored object (no version check): `fn` edits a copy. */
  mutate(d: ResourceDef, ns: string | undefined, name: string, fn: (o: Obj) => void): Obj | undefined {
    const cur = this.get(d, ns, name);
    if (!cur) return undefined;
    const o = clone(cur);
    fn(o);
    if (JSON.stringify(o) === JSON.stringify(cur)) return cur;
    return this.update(d, o, { checkVersion: false });
  }

  /** Removes an object for good. */
  remove(d: ResourceDef, ns: string | undefined, name: string): Obj | undefined {
    const k = keyOf(d, ns, name);
    const old = this.objects.get(k);
    if (!old) return undefined;
    this.objects.delete(k);
    const last = clone(old);
    last.metadata.resourceVersion = this.bump();
    this.emit({ type: 'DELETED', def: d, object: last, old, rv: this.rv });
    return last;
  }

  /** Every stored object (for the garbage collector). */
  all(): { def: ResourceDef; object: Obj }[] {
    return [...this.objects.values()].map((o) => ({
      def: RESOURCES.find((d) => d.kind === o.kind && apiVersionOf(d) === o.apiVersion)!,
      object: o,
    }));
  }

  private bump(): string {
    this.rv += 1;
    return String(this.rv);
  }

  private emit(c: Change): void {
    this.history.push(c);
    for (const fn of [...this.listeners]) {
      try {
        fn(c);
      } catch (e) {
        console.error('fake-k8s: a store listener threw', e);
      }
    }
  }
}

/** What counts toward `generation`: everything but metadata and status. */
function strip(o: Obj): Obj {
  const { metadata: _m, status: _s, ...rest } = o;
  return rest;
}

/**
 * Runs a controller's step; an error is logged, never thrown out of a timer (a real controller
 * logs it and retries on the next event).
 */
export function guarded(what: string, fn: () => void): void {
  try {
    fn();
  } catch (e) {
    console.error(`fake-k8s: ${what} failed:`, e);
  }
}

export const now = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

// ---- label selectors ----

interface Requirement {
  key: string;
  op: 'in' | 'notin' | 'exists' | '!' | 'gt' | 'lt';
  values: string[];
}

/** Parses a label selector (`a=b,c!=d,e in (f,g),!h,i`); a bad one is a 400 as the apiserver's. */
export function parseLabelSelector(sel: string): Requirement[] {
  const reqs: Requirement[] = [];
  let i = 0;
  const s = sel;
  const ws = () => {
    while (i < s.length && /\s/.test(s[i]!)) i++;
  };
  const word = () => {
    ws();
    const m = /^[A-Za-z0-9_.\-/]*/.exec(s.slice(i))![0];
    i += m.length;
    return m;
  };
  const fail = (why: string): never => {
    throw badRequest(`unable to parse requirement: ${why}`);
  };
  while (i < s.length) {
    ws();
    if (s[i] === '!') {
      i++;
      reqs.push({ key: word() || fail("found '', expected: identifier"), op: '!', values: [] });
    } else {
      const key = word();
      if (!key) fail(`found '${s[i] ?? ''}', expected: !, identifier, or 'end of string'`);
      ws();
      const rest = s.slice(i);
      let m: RegExpExecArray | null;
      if (rest.startsWith('==') || rest.startsWith('!=') || rest.startsWith('=')) {
        const op = rest.startsWith('!=') ? 'notin' : 'in';
        i += rest.startsWith('=') && !rest.startsWith('==') ? 1 : 2;
        reqs.push({ key, op, values: [word()] });
      } else if (rest.startsWith('>') || rest.startsWith('<')) {
        i += 1;
        reqs.push({ key, op: rest.startsWith('>') ? 'gt' : 'lt', values: [word()] });
      } else if ((m = /^(notin|in)\s*\(/.exec(rest))) {
        i += m[0].length;
        const close = s.indexOf(')', i);
        if (close < 0) fail("found 'end of string', expected: ')'");
        const values = s
          .slice(i, close)
          .split(',')
          .map((v) => v.trim());
        i = close + 1;
        reqs.push({ key, op: m[1] as 'in' | 'notin', values });
      } else {
        reqs.push({ key, op: 'exists', values: [] });
      }
    }
    ws();
    if (i < s.length) {
      if (s[i] !== ',') fail(`found '${s[i]}', expected: ',' or 'end of string'`);
      i++;
    }
  }
  return reqs;
}

export function matchesLabels(reqs: Requirement[], labels: Record<string, string> | undefined): boolean {
  const l = labels ?? {};
  return reqs.every((r) => {
    const has = Object.hasOwn(l, r.key);
    const v = l[r.key];
    switch (r.op) {
      case 'in':
        return has && r.values.includes(v!);
      case 'notin':
        return !has || !r.values.includes(v!);
      case 'exists':
        return has;
      case '!':
        return !has;
      case 'gt':
        return has && Number(v) > Number(r.values[0]);
      case 'lt':
        return has && Number(v) < Number(r.values[0]);
    }
    return false;
  });
}

/** The field selectors each type supports (beyond metadata.name / metadata.namespace). */
const FIELDS: Record<string, string[]> = {
  pods: [
    'spec.nodeName',
    'spec.restartPolicy',
    'spec.schedulerName',
    'spec.serviceAccountName',
    'status.phase',
    'status.podIP',
    'status.nominatedNodeName',
  ],
  secrets: ['type'],
  events: [
    'involvedObject.kind',
    'involvedObject.name',
    'involvedObject.namespace',
    'involvedObject.uid',
    'reason',
    'type',
  ],
  namespaces: ['status.phase'],
};

/** Parses `metadata.name=x,status.phase!=Running` into a predicate; unsupported fields are a 400. */
export function parseFieldSelector(d: ResourceDef, sel: string): (o: Obj) => boolean {
  const terms = sel
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      const m = /^([^=!]+?)\s*(==|!=|=)\s*(.*)$/.exec(t);
      if (!m) throw badRequest(`invalid selector: '${sel}'; can't understand '${t}'`);
      const [, field, op, value] = m as unknown as [string, string, string, string];
      if (!['metadata.name', 'metadata.namespace', ...(FIELDS[d.resource] ?? [])].includes(field))
        throw badRequest(`field label not supported: ${field}`);
      return { path: field.split('.'), neg: op === '!=', value };
    });
  return (o) =>
    terms.every((t) => {
      const v = t.path.reduce<any>((x, k) => (x == null ? undefined : x[k]), o);
      return (String(v ?? '') === t.value) !== t.neg;
    });
}

// ---- quantities ----

const SUFFIX: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A resource quantity (`500m`, `2Gi`, `4`, `1e3`) as a number of base units. */
export function parseQuantity(q: string | number): number {
  if (typeof q === 'number') return q;
  const m = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/.exec(
    q.trim(),
  );
  if (!m)
    throw badRequest(
      `quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'`,
    );
  const n = Number(m[1]) * (m[2] ? 10 ** Number(m[2].slice(1)) : 1);
  return n * SUFFIX[m[3] ?? '']!;
}

/** Formats a number of base units back into a quantity (`cpu` in millicores when fractional). */
export function formatQuantity(n: number, resource: string): string {
  if (resource === 'cpu' && !Number.isInteger(n)) return `${Math.round(n * 1000)}m`;
  if (resource === 'memory' || resource.endsWith('storage')) {
    for (const [s, f] of [
      ['Gi', 2 ** 30],
      ['Mi', 2 ** 20],
      ['Ki', 2 ** 10],
    ] as const)
      if (n >= f && n % f === 0) return `${n / f}${s}`;
  }
  return String(Math.round(n * 1000) / 1000);
}

/** `VAR` → value for the `$(VAR)` references Kubernetes expands in command, args and env (`$$` escapes). */
export function expandVars(s: string, vars: Map<string, string>): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c !== '$' || i + 1 >= s.length) {
      out += c;
      continue;
    }
    const n = s[i + 1];
    if (n === '$') {
      out += '$';
      i++;
    } else if (n === '(') {
      const close = s.indexOf(')', i + 2);
      if (close < 0) {
        out += s.slice(i);
        break;
      }
      const name = s.slice(i + 2, close);
      out += vars.has(name) ? vars.get(name) : `$(${name})`;
      i = close;
    } else {
      out += c;
    }
  }
  return out;
}
