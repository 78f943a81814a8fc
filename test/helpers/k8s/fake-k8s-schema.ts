/**
 * Server-side field validation in the fake Kubernetes API server (fake-k8s.ts): the field names
 * each type declares, for `fieldValidation=Strict` (kubectl's default, `--validate=strict`) — an
 * unknown field is a 400 `Job in version "v1alpha1" cannot be handled as a Job: strict decoding
 * error: unknown field "spec.tasks[0].templat"` (kubectl prints it after `Error from server
 * (BadRequest): error when creating "STDIN": `) — and `Warn` (a `Warning:` header per field,
 * which kubectl prints as `Warning: unknown field "…"`).
 *
 * Simplified: the names are checked down to pod templates, containers, env, volume mounts and
 * volumes (Kubernetes 1.32 and Volcano's CRD); below those (resources, securityContext, probes,
 * affinity, volume sources, …) anything goes. Duplicate fields are not detected.
 */
import type { Obj } from './fake-k8s-store.js';

/** A schema: the known keys of an object (each with its own schema), `any`, a map, or a list. */
type Schema = 'any' | { map: true } | { list: Schema } | { [key: string]: Schema };

const ANY = 'any' as const;
const MAP = { map: true } as const;
const list = (s: Schema): Schema => ({ list: s });
const keys = (names: string, more: Record<string, Schema> = {}): Schema => ({
  ...Object.fromEntries(
    names
      .split(/\s+/)
      .filter(Boolean)
      .map((k) => [k, ANY]),
  ),
  ...more,
});

const META = keys(
  'name generateName namespace uid resourceVersion generation creationTimestamp deletionTimestamp deletionGracePeriodSeconds ownerReferences finalizers managedFields selfLink',
  { labels: MAP, annotations: MAP },
);
const ENV = keys('name value valueFrom');
const MOUNT = keys('mountPath mountPropagation name readOnly recursiveReadOnly subPath subPathExpr');
const CONTAINER = keys(
  'args command envFrom image imagePullPolicy lifecycle livenessProbe name ports readinessProbe resizePolicy resources restartPolicy securityContext startupProbe stdin stdinOnce terminationMessagePath terminationMessagePolicy tty volumeDevices workingDir',
  { env: list(ENV), volumeMounts: list(MOUNT) },
);
const VOLUME = keys(
  'name awsElasticBlockStore azureDisk azureFile cephfs cinder configMap csi downwardAPI emptyDir ephemeral fc flexVolume flocker gcePersistentDisk gitRepo glusterfs hostPath image iscsi nfs persistentVolumeClaim photonPersistentDisk portworxVolume projected quobyte rbd scaleIO secret storageos vsphereVolume',
);
const POD_SPEC = keys(
  'activeDeadlineSeconds affinity automountServiceAccountToken dnsConfig dnsPolicy enableServiceLinks ephemeralContainers hostAliases hostIPC hostNetwork hostPID hostUsers hostname imagePullSecrets nodeName os overhead preemptionPolicy priority priorityClassName readinessGates resourceClaims resources restartPolicy runtimeClassName schedulerName schedulingGates securityContext serviceAccount serviceAccountName setHostnameAsFQDN shareProcessNamespace subdomain terminationGracePeriodSeconds tolerations topologySpreadConstraints',
  { containers: list(CONTAINER), initContainers: list(CONTAINER), volumes: list(VOLUME), nodeSelector: MAP },
);
const POLICY = keys('action event events exitCode timeout');
const TASK = keys('dependsOn maxRetry minAvailable name partitionPolicy replicas topologyPolicy', {
  policies: list(POLICY),
  template: { metadata: META, spec: POD_SPEC },
});
const top = (more: Record<string, Schema>): Schema =>
  keys('apiVersion kind status', { metadata: META, ...more });

/** The schemas of the types whose fields are checked; others are not. */
const SCHEMAS: Record<string, Schema> = {
  jobs: top({
    spec: keys(
      'maxRetry minAvailable minSuccess networkTopology priorityClassName queue runningEstimate schedulerName ttlSecondsAfterFinished volumes',
      { plugins: MAP, policies: list(POLICY), tasks: list(TASK) },
    ),
  }),
  pods: top({ spec: POD_SPEC }),
  secrets: top({ data: MAP, stringData: MAP, type: ANY, immutable: ANY }),
  configmaps: top({ data: MAP, binaryData: MAP, immutable: ANY }),
  queues: top({ spec: ANY }),
};

/** The unknown fields of `o` (paths like `spec.tasks[0].foo`), for a type with a schema. */
export function unknownFields(resource: string, o: Obj): string[] {
  const schema = SCHEMAS[resource];
  const out: string[] = [];
  const walk = (v: unknown, s: Schema, path: string) => {
    if (s === ANY || v === null || typeof v !== 'object' || 'map' in s) return;
    if ('list' in s) {
      if (Array.isArray(v)) v.forEach((x, i) => walk(x, s.list as Schema, `${path}[${i}]`));
      return;
    }
    if (Array.isArray(v)) return;
    for (const [k, x] of Object.entries(v as Obj)) {
      const p = path ? `${path}.${k}` : k;
      const sub = (s as Record<string, Schema>)[k];
      if (sub === undefined) out.push(p);
      else walk(x, sub, p);
    }
  };
  if (schema) walk(o, schema, '');
  return out;
}
