/**
 * What the fake kubelet (fake-kubelet.ts) derives from a pod before it starts the container: the
 * environment, the volumes materialized on the host (and the mounts the SETUP script makes), and
 * the pod's /etc/hosts.
 *
 * Faithful: envFrom (configMapRef/secretRef, prefix, optional) first, then env in order — `value`
 * with `$(VAR)` expanded against what is defined before it (`$$` escapes), valueFrom
 * secretKeyRef / configMapKeyRef (a missing object or key → CreateContainerConfigError with the
 * kubelet's message unless optional), fieldRef (metadata.name/namespace/uid/labels/annotations,
 * spec.nodeName, spec.serviceAccountName, status.podIP/hostIP = 127.0.0.1), resourceFieldRef;
 * PATH from the host, HOME=/root, HOSTNAME. configMap/secret volumes (items, one file per key,
 * read-only), persistentVolumeClaim (from `pvcs`, readOnly honoured), emptyDir (a per-pod dir;
 * `medium: Memory` → tmpfs of sizeLimit), hostPath; subPath. /etc/hosts: localhost and every host
 * of the pod's Volcano job at 127.0.0.1 (as `<host>.<subdomain>.<ns>.svc.cluster.local`,
 * `….svc`, `<host>.<subdomain>` and `<host>`). Simplified: other volume types are empty dirs.
 */
import { existsSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { defOf, expandVars, parseQuantity, type Obj, type Store } from './fake-k8s-store.js';

export const NODE_NAME = 'fake-node';
export const POD_IP = '127.0.0.1';

/** Why the pod cannot wait for the kubelet: a container config error (not retried until something changes). */
export class ConfigError extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** The per-pod directory under the kubelet's dir. */
export const podDir = (dir: string, pod: Obj): string => join(dir, 'pods', pod.metadata.uid);

/** Reads secrets and configmaps from the store to build a container's environment and volumes. */
export class PodConfig {
  constructor(
    private readonly store: Store,
    private readonly opts: { dir: string; pvcs: Record<string, string> },
  ) {}

  private get(resource: string, ns: string, name: string): Obj | undefined {
    return this.store.get(defOf(resource), ns, name);
  }

  private source(
    kind: 'configMap' | 'secret',
    ns: string,
    name: string,
    optional: boolean,
  ): Record<string, string> | undefined {
    const o = this.get(kind === 'secret' ? 'secrets' : 'configmaps', ns, name);
    if (!o) {
      if (optional) return undefined;
      throw new ConfigError(
        'CreateContainerConfigError',
        `${kind === 'secret' ? 'secret' : 'configmap'} "${name}" not found`,
      );
    }
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries<string>(o.data ?? {}))
      out[k] = kind === 'secret' ? Buffer.from(v, 'base64').toString() : v;
    for (const [k, v] of Object.entries<string>(o.binaryData ?? {}))
      out[k] = Buffer.from(v, 'base64').toString();
    return out;
  }

  env(pod: Obj, c: Obj): Record<string, string> {
    const ns = pod.metadata.namespace;
    const vars = new Map<string, string>();
    for (const ef of c.envFrom ?? []) {
      const ref = ef.configMapRef ?? ef.secretRef;
      const data = this.source(ef.secretRef ? 'secret' : 'configMap', ns, ref.name, !!ref.optional);
      for (const [k, v] of Object.entries(data ?? {})) vars.set(`${ef.prefix ?? ''}${k}`, v);
    }
    for (const e of c.env ?? []) {
      if (e.value !== undefined) vars.set(e.name, expandVars(String(e.value), vars));
      else if (e.valueFrom) {
        const v = this.valueFrom(pod, c, e.valueFrom);
        if (v !== undefined) vars.set(e.name, v);
      } else vars.set(e.name, '');
    }
    return {
      PATH: process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: '/root',
      ...Object.fromEntries(vars),
    };
  }

  private valueFrom(pod: Obj, c: Obj, vf: Obj): string | undefined {
    const ns = pod.metadata.namespace;
    const ref = vf.secretKeyRef ?? vf.configMapKeyRef;
    if (ref) {
      const kind = vf.secretKeyRef ? 'secret' : 'configMap';
      const data = this.source(kind, ns, ref.name, !!ref.optional);
      if (data && ref.key in data) return data[ref.key];
      if (ref.optional) return undefined;
      throw new ConfigError(
        'CreateContainerConfigError',
        `couldn't find key ${ref.key} in ${kind === 'secret' ? 'Secret' : 'ConfigMap'} ${ns}/${ref.name}`,
      );
    }
    if (vf.fieldRef) {
      const p: string = vf.fieldRef.fieldPath;
      const m = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(p);
      if (m) return pod.metadata[m[1]!]?.[m[2]!] ?? '';
      const fields: Record<string, string | undefined> = {
        'metadata.name': pod.metadata.name,
        'metadata.namespace': ns,
        'metadata.uid': pod.metadata.uid,
        'spec.nodeName': NODE_NAME,
        'spec.serviceAccountName': pod.spec.serviceAccountName,
        'status.hostIP': POD_IP,
        'status.hostIPs': POD_IP,
        'status.podIP': POD_IP,
        'status.podIPs': POD_IP,
      };
      return fields[p] ?? '';
    }
    if (vf.resourceFieldRef) {
      const [kind, res] = String(vf.resourceFieldRef.resource).split('.') as [string, string];
      const q = c.resources?.[kind]?.[res] ?? (kind === 'requests' ? c.resources?.limits?.[res] : undefined);
      if (q === undefined) return res === 'cpu' ? '1' : '0';
      const div = parseQuantity(vf.resourceFieldRef.divisor ?? '1');
      return String(Math.ceil(parseQuantity(q) / div));
    }
    return '';
  }

  /** Materializes the pod's volumes; the mounts for SETUP (kind, src, dst, opt), shallowest first. */
  volumes(pod: Obj, c: Obj): string[][] {
    const ns = pod.metadata.namespace;
    const dirs = new Map<string, { src: string; ro: boolean; tmpfs?: string }>();
    for (const v of pod.spec.volumes ?? []) {
      const dir = join(podDir(this.opts.dir, pod), 'volumes', v.name);
      if (v.configMap || v.secret) {
        const kind = v.secret ? 'secret' : 'configMap';
        const name = v.secret ? v.secret.secretName : v.configMap.name;
        const data = this.source(kind, ns, name, !!(v.secret ?? v.configMap).optional) ?? {};
        const items: Obj[] =
          (v.secret ?? v.configMap).items ?? Object.keys(data).map((k) => ({ key: k, path: k }));
        rmSync(dir, { recursive: true, force: true });
        mkdirSync(dir, { recursive: true });
        for (const it of items) {
          if (!(it.key in data))
            throw new ConfigError(
              'ContainerCreating',
              `MountVolume.SetUp failed for volume "${v.name}" : configmap references non-existent config key: ${it.key}`,
            );
          mkdirSync(dirname(join(dir, it.path)), { recursive: true });
          writeFileSync(join(dir, it.path), data[it.key]!);
        }
        dirs.set(v.name, { src: dir, ro: true });
      } else if (v.persistentVolumeClaim) {
        const host = this.opts.pvcs[`${ns}/${v.persistentVolumeClaim.claimName}`];
        if (!host)
          throw new ConfigError(
            'ContainerCreating',
            `persistentvolumeclaim "${v.persistentVolumeClaim.claimName}" not found`,
          );
        dirs.set(v.name, { src: host, ro: !!v.persistentVolumeClaim.readOnly });
      } else if (v.hostPath) {
        if (v.hostPath.type === 'DirectoryOrCreate') mkdirSync(v.hostPath.path, { recursive: true });
        dirs.set(v.name, { src: v.hostPath.path, ro: false });
      } else if (v.emptyDir?.medium === 'Memory') {
        const size = v.emptyDir.sizeLimit ? String(Math.floor(parseQuantity(v.emptyDir.sizeLimit))) : '';
        dirs.set(v.name, { src: '', ro: false, tmpfs: size });
      } else {
        mkdirSync(dir, { recursive: true });
        dirs.set(v.name, { src: dir, ro: false });
      }
    }
    const mounts: string[][] = [];
    const byDepth = [...(c.volumeMounts ?? [])].sort(
      (a: Obj, b: Obj) => a.mountPath.split('/').length - b.mountPath.split('/').length,
    );
    for (const m of byDepth) {
      const v = dirs.get(m.name);
      if (!v)
        throw new ConfigError(
          'CreateContainerConfigError',
          `cannot find volume "${m.name}" to mount into container "${c.name}"`,
        );
      if (v.tmpfs !== undefined) {
        mounts.push(['tmpfs', 'tmpfs', m.mountPath, v.tmpfs]);
        continue;
      }
      const src = m.subPath ? join(v.src, m.subPath) : v.src;
      if (m.subPath && !existsSync(src)) mkdirSync(src, { recursive: true });
      const kind = statSync(src).isFile() ? 'file' : 'dir';
      mounts.push([kind, src, m.mountPath, m.readOnly || v.ro ? 'ro' : 'rw']);
    }
    return mounts;
  }

  /** /etc/hosts: localhost, and every host of the pod's Volcano job (svc plugin names) at 127.0.0.1. */
  hostsFor(pod: Obj, hostname: string): string {
    const ns = pod.metadata.namespace;
    const lines = [
      '# Kubernetes-managed hosts file (fake kubelet).',
      '127.0.0.1\tlocalhost',
      '::1\tlocalhost ip6-localhost ip6-loopback',
    ];
    const names = new Map<string, string>();
    const add = (host: string, sub: string | undefined) =>
      names.set(
        host,
        sub
          ? [
              `${host}.${sub}.${ns}.svc.cluster.local`,
              `${host}.${sub}.${ns}.svc`,
              `${host}.${sub}`,
              host,
            ].join('\t')
          : host,
      );
    const jobName = pod.metadata.labels?.['volcano.sh/job-name'];
    const job = jobName ? this.get('jobs', ns, jobName) : undefined;
    for (const t of job?.spec?.tasks ?? []) {
      const tpl = t.template?.spec ?? {};
      for (let i = 0; i < (t.replicas ?? 0); i++)
        add(tpl.hostname ?? `${jobName}-${t.name}-${i}`, tpl.subdomain ?? jobName);
    }
    add(hostname, pod.spec.subdomain);
    for (const n of names.values()) lines.push(`127.0.0.1\t${n}`);
    return `${lines.join('\n')}\n`;
  }
}
