/**
 * Volcano's admission for `batch.volcano.sh/v1alpha1` Jobs in the fake Kubernetes API server, in
 * the order the real apiserver applies it: the CRD's structural defaults (`spec.maxRetry` 3,
 * `spec.queue` 'default'), the mutating webhook `mutatejob.volcano.sh` on CREATE (schedulerName
 * 'volcano', task names `default<i>`, tasks' minAvailable = replicas and maxRetry 3, the job's
 * minAvailable = Σ tasks' minAvailable), the CRD schema (422 Invalid: a task name not a DNS-1123
 * label, a bad queue name, negative minAvailable/maxRetry), then the validating webhook
 * `validatejob.volcano.sh` on CREATE and UPDATE — a denial is HTTP 400 with no reason and the
 * message `admission webhook "validatejob.volcano.sh" denied the request: …`, as the apiserver
 * turns a webhook's bare `Result{Message}` into.
 *
 * The messages are volcano's (pkg/webhooks/admission/jobs/validate/admit_job.go): `No task
 * specified in job spec`, `duplicated task name x;`, `job 'minAvailable' should not be greater
 * than total replicas in tasks;`, `unable to find job queue: queue.scheduling.volcano.sh "q" not
 * found;` (the lister names the resource in the singular), ``can only submit job to queue with
 * state `Open`, queue `q` status is `Closed`;``, on UPDATE ``job updates may not change fields
 * other than `minAvailable`, `tasks[*].replicas under spec` and `PriorityClassName` ``.
 * Simplified: the pod template is checked only for containers with a name and an image; policy
 * errors are one line (volcano wraps them in a multierror block); no mpi/ssh plugin checks.
 */
import type { Admit, Cluster } from '../k8s/fake-k8s-api.js';
import { apiError, defOf, invalid, type FieldError, type Obj } from '../k8s/fake-k8s-store.js';

const EVENTS = [
  '*',
  'PodFailed',
  'PodEvicted',
  'PodPending',
  'Unknown',
  'TaskCompleted',
  'TaskFailed',
  'JobUpdated',
];
const ACTIONS = [
  'AbortJob',
  'RestartJob',
  'RestartTask',
  'RestartPod',
  'RestartPartition',
  'TerminateJob',
  'CompleteJob',
  'ResumeJob',
];
const PLUGINS = ['env', 'svc', 'ssh', 'mpi', 'pytorch', 'tensorflow', 'ray', 'hcclrank'];
const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** The admission hook for jobs (registered with `cluster.onAdmit('jobs', …)`). */
export function admitJob(cluster: Cluster): Admit {
  return (op, job, old) => {
    const spec = (job.spec ??= {});
    spec.maxRetry ??= 3;
    spec.queue ??= 'default';
    if (op === 'CREATE') mutate(job);
    schema(job);
    const msg = op === 'CREATE' ? validateCreate(cluster, job) : validateUpdate(old!, job);
    if (msg)
      throw apiError(400, '', `admission webhook "validatejob.volcano.sh" denied the request: ${msg.trim()}`);
  };
}

function mutate(job: Obj): void {
  const spec = job.spec;
  if (!spec.schedulerName) spec.schedulerName = 'volcano';
  if (!spec.maxRetry) spec.maxRetry = 3;
  const tasks: Obj[] = spec.tasks ?? [];
  tasks.forEach((t, i) => {
    if (!t.name) t.name = `default${i}`;
    t.replicas ??= 0;
    if (t.template?.spec?.hostNetwork && !t.template.spec.dnsPolicy)
      t.template.spec.dnsPolicy = 'ClusterFirstWithHostNet';
    t.minAvailable ??= t.replicas;
    if (!t.maxRetry) t.maxRetry = 3;
  });
  if (!spec.minAvailable)
    spec.minAvailable = tasks.reduce((n, t) => n + (t.minAvailable ?? t.replicas ?? 0), 0);
}

/** The CRD's openAPIV3Schema checks that matter here (422 Invalid). */
function schema(job: Obj): void {
  const errs: FieldError[] = [];
  const spec = job.spec;
  const bad = (field: string, value: unknown, why: string) =>
    errs.push({
      field,
      reason: 'FieldValueInvalid',
      message: `Invalid value: ${JSON.stringify(value)}: ${why}`,
    });
  if (typeof spec.queue === 'string' && (!SUBDOMAIN.test(spec.queue) || spec.queue.length > 253))
    bad('spec.queue', spec.queue, `spec.queue in body should match '${SUBDOMAIN.source}'`);
  for (const f of ['minAvailable', 'maxRetry'])
    if (typeof spec[f] === 'number' && spec[f] < 0)
      bad(`spec.${f}`, spec[f], `spec.${f} in body should be greater than or equal to 0`);
  (spec.tasks ?? []).forEach((t: Obj, i: number) => {
    const f = `spec.tasks[${i}].name`;
    if (typeof t.name !== 'string') return;
    if (t.name.length > 63)
      errs.push({
        field: f,
        reason: 'FieldValueTooLong',
        message: `Too long: may not be more than 63 bytes`,
      });
    else if (!LABEL.test(t.name))
      bad(f, t.name, `${f} in body should match '^${LABEL.source.slice(1, -1)}$'`);
  });
  if (errs.length) throw invalid(defOf('jobs'), job.metadata.name, errs);
}

const qualifiedErrors = (v: string): string[] => [
  ...(v.length > 63 ? ['must be no more than 63 characters'] : []),
  ...(!QUALIFIED.test(v)
    ? [
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
      ]
    : []),
];

function policyErrors(policies: Obj[] | undefined, path: string): string {
  const seen = new Set<string>();
  for (const p of policies ?? []) {
    const events: string[] = [...(p.events ?? []), ...(p.event ? [p.event] : [])];
    if (events.length && p.exitCode !== undefined)
      return ' must not specify event and exitCode simultaneously;';
    if (!events.length && p.exitCode === undefined) return ' either event and exitCode should be specified;';
    for (const e of events) {
      if (!EVENTS.includes(e)) return ` ${path}: Invalid value: "${e}": invalid policy event;`;
      if (!ACTIONS.includes(p.action))
        return ` ${path}: Invalid value: "${p.action}": invalid policy action;`;
      if (seen.has(e)) return ` duplicate event ${e}  across different policy;`;
      seen.add(e);
    }
    if (!events.length && p.exitCode === 0) return ' 0 is not a valid error code;';
  }
  if (seen.has('*') && seen.size > 1) return " if there's * here, no other policy should be here;";
  return '';
}

function templateErrors(t: Obj, i: number): string {
  const errs: string[] = [];
  const cs: Obj[] = t.template?.spec?.containers ?? [];
  if (!cs.length) errs.push('template.spec.containers: Required value');
  cs.forEach((c, j) => {
    if (!c.name) errs.push(`template.spec.containers[${j}].name: Required value`);
    if (!c.image) errs.push(`template.spec.containers[${j}].image: Required value`);
  });
  return errs.length ? `spec.task[${i}].${errs.map((e) => `${e}. `).join('')}` : '';
}

function validateCreate(cluster: Cluster, job: Obj): string {
  const spec = job.spec;
  const tasks: Obj[] = spec.tasks ?? [];
  if (!tasks.length) return 'No task specified in job spec';
  let b = '';
  let total = 0;
  const names = new Set<string>();
  for (const [i, t] of tasks.entries()) {
    if (t.minAvailable !== undefined && t.minAvailable > t.replicas)
      b += ` 'minAvailable' is greater than 'replicas' in task: ${t.name}, job: ${job.metadata.name};`;
    total += t.replicas ?? 0;
    if (names.has(t.name)) {
      b += ` duplicated task name ${t.name};`;
      break;
    }
    names.add(t.name);
    b += policyErrors(t.policies, 'spec.tasks.policies');
    const podName = `${job.metadata.name}-${t.name}-${i}`;
    const pe = qualifiedErrors(podName);
    if (pe.length) b += `create pod with name ${podName} validate failed [${pe.join(' ')}];`;
    b += templateErrors(t, i);
  }
  const je = qualifiedErrors(job.metadata.name);
  if (je.length) b += `create job with name ${job.metadata.name} validate failed [${je.join(' ')}]`;
  if (total < spec.minAvailable)
    b += " job 'minAvailable' should not be greater than total replicas in tasks;";
  b += policyErrors(spec.policies, 'spec.policies');
  for (const p of Object.keys(spec.plugins ?? {}))
    if (!PLUGINS.includes(p)) b += ` unable to find job plugin: ${p};`;
  const queue = cluster.store.get(defOf('queues'), undefined, spec.queue);
  if (!queue) b += ` unable to find job queue: queue.scheduling.volcano.sh "${spec.queue}" not found;`;
  else {
    const state = queue.status?.state ?? '';
    if (state !== 'Open')
      b += ` can only submit job to queue with state \`Open\`, queue \`${queue.metadata.name}\` status is \`${state}\`;`;
    if (queue.metadata.name === 'root') b += ' can not submit job to root queue;';
  }
  return b;
}

function validateUpdate(old: Obj, job: Obj): string {
  const spec = job.spec;
  let total = 0;
  for (const t of spec.tasks ?? []) {
    if (t.replicas < 0) return `'replicas' must be >= 0 in task: ${t.name}`;
    if (t.minAvailable !== undefined && t.minAvailable < 0)
      return `'minAvailable' must be >= 0 in task: ${t.name}`;
    if (t.minAvailable !== undefined && t.minAvailable > t.replicas)
      return `'minAvailable' must be <= 'replicas' in task: ${t.name}`;
    total += t.replicas ?? 0;
  }
  if (spec.minAvailable > total) return "job 'minAvailable' must not be greater than total replicas";
  if (spec.minAvailable < 0) return "job 'minAvailable' must be >= 0";
  if ((old.spec.tasks ?? []).length !== (spec.tasks ?? []).length)
    return 'job updates may not add or remove tasks';
  const norm = (s: Obj, from: Obj) => {
    const c = structuredClone(s);
    c.minAvailable = from.minAvailable;
    c.priorityClassName = from.priorityClassName;
    (c.tasks ?? []).forEach((t: Obj, i: number) => {
      t.replicas = from.tasks[i].replicas;
      t.minAvailable = from.tasks[i].minAvailable;
    });
    return canonical(c);
  };
  if (norm(spec, old.spec) !== norm(old.spec, old.spec))
    return 'job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` and `PriorityClassName`';
  return '';
}

/** JSON with sorted keys and no undefined members: for "semantically equal". */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .filter((k) => (v as Obj)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Obj)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

/** Queue defaults (the CRD's and the queue webhook's): weight 1, reclaimable. */
export const admitQueue: Admit = (_op, q) => {
  const spec = (q.spec ??= {});
  spec.weight ??= 1;
  spec.reclaimable ??= true;
};
