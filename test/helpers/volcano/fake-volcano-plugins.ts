/**
 * The pods the fake Volcano job controller (fake-volcano.ts) creates: createJobPod
 * (pkg/controllers/job/job_controller_util.go) and the `env` and `svc` plugins' OnPodCreate
 * (pkg/controllers/job/plugins/{env,svc}), and the svc plugin's host list.
 *
 * Faithful: pod name `<job>-<task>-<i>`; labels = the template's + volcano.sh/task-index,
 * job-name, task-spec, job-namespace, queue-name; annotations = the template's + task-index,
 * task-spec, scheduling.k8s.io/group-name (`<job>-<uid>`), job-name, queue-name, job-version,
 * template-uid, job-retry-count; the job's schedulerName (and priorityClassName) when the template
 * has none; `env` → VK_TASK_INDEX and VC_TASK_INDEX; `svc` → hostname = pod name, subdomain = job
 * name, env VC_<TASK>_HOSTS / VC_<TASK>_NUM from the ConfigMap `<job>-svc` (configMapKeyRef) for
 * every task, the ConfigMap mounted at /etc/volcano.
 */
import { clone, type Obj } from '../k8s/fake-k8s-store.js';

/** The job's PodGroup: `<job>-<uid>`. */
export const podGroupName = (job: Obj): string => `${job.metadata.name}-${job.metadata.uid}`;

/** An ownerReference to the job, as metav1.NewControllerRef makes it. */
export function controllerRef(job: Obj): Obj {
  return {
    apiVersion: 'batch.volcano.sh/v1alpha1',
    kind: 'Job',
    name: job.metadata.name,
    uid: job.metadata.uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The svc plugin's ConfigMap data (GenerateHosts): `<task>.host`, `VC_<TASK>_HOSTS`, `VC_<TASK>_NUM`. */
export function svcHosts(job: Obj): Record<string, string> {
  const data: Record<string, string> = {};
  for (const t of job.spec.tasks ?? []) {
    const tpl = t.template?.spec ?? {};
    const hosts: string[] = [];
    for (let i = 0; i < (t.replicas ?? 0); i++) {
      hosts.push(
        `${tpl.hostname || `${job.metadata.name}-${t.name}-${i}`}.${tpl.subdomain || job.metadata.name}`,
      );
      if (tpl.hostname) break;
    }
    const key = t.name.replaceAll('-', '_');
    data[`${key}.host`] = hosts.join('\n');
    data[`VC_${key.toUpperCase()}_HOSTS`] = hosts.join(',');
    data[`VC_${key.toUpperCase()}_NUM`] = String(hosts.length);
  }
  return data;
}

/** createJobPod + the env and svc plugins' OnPodCreate: pod `i` of task `t`. */
export function newJobPod(job: Obj, t: Obj, i: number): Obj {
  const name = `${job.metadata.name}-${t.name}-${i}`;
  const tpl = clone(t.template ?? {});
  const spec = tpl.spec ?? {};
  spec.schedulerName ||= job.spec.schedulerName;
  if (!spec.priorityClassName && job.spec.priorityClassName)
    spec.priorityClassName = job.spec.priorityClassName;
  const v = job.status?.version ?? 0;
  const annotations = {
    ...(tpl.metadata?.annotations ?? {}),
    'volcano.sh/task-index': String(i),
    'volcano.sh/task-spec': t.name,
    'scheduling.k8s.io/group-name': podGroupName(job),
    'volcano.sh/job-name': job.metadata.name,
    'volcano.sh/queue-name': job.spec.queue,
    'volcano.sh/job-version': String(v),
    'volcano.sh/template-uid': `${job.metadata.name}-${t.name}`,
    'volcano.sh/job-retry-count': String(job.status?.retryCount ?? 0),
  };
  const labels = {
    ...(tpl.metadata?.labels ?? {}),
    'volcano.sh/task-index': String(i),
    'volcano.sh/job-name': job.metadata.name,
    'volcano.sh/task-spec': t.name,
    'volcano.sh/job-namespace': job.metadata.namespace,
    'volcano.sh/queue-name': job.spec.queue,
  };
  const containers: Obj[] = [...(spec.containers ?? []), ...(spec.initContainers ?? [])];
  const plugins = job.spec.plugins ?? {};
  if ('env' in plugins)
    for (const c of containers)
      c.env = [
        ...(c.env ?? []),
        { name: 'VK_TASK_INDEX', value: String(i) },
        { name: 'VC_TASK_INDEX', value: String(i) },
      ];
  if ('svc' in plugins) {
    spec.hostname ||= name;
    spec.subdomain ||= job.metadata.name;
    const cm = `${job.metadata.name}-svc`;
    const env = (job.spec.tasks ?? []).flatMap((ts: Obj) => {
      const k = ts.name.replaceAll('-', '_').toUpperCase();
      return [`VC_${k}_HOSTS`, `VC_${k}_NUM`].map((n) => ({
        name: n,
        valueFrom: { configMapKeyRef: { name: cm, key: n } },
      }));
    });
    for (const c of containers) {
      c.env = [...(c.env ?? []), ...env];
      c.volumeMounts = [...(c.volumeMounts ?? []), { mountPath: '/etc/volcano', name: cm }];
    }
    spec.volumes = [...(spec.volumes ?? []), { name: cm, configMap: { name: cm } }];
  }
  return {
    metadata: {
      name,
      namespace: job.metadata.namespace,
      ownerReferences: [controllerRef(job)],
      labels,
      annotations,
    },
    spec,
  };
}
