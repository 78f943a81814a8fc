/**
 * What the Vast.ai API sends and takes, as the adapter reads it: instance statuses, offers,
 * instances, a rental's request, and where to reach an instance over SSH.
 */

/** `actual_status` (docs.vast.ai `show instances`); `null` while the machine is provisioned. */
export const VastActualStatus = {
  Loading: 'loading',
  Running: 'running',
  /** Halted: by the user, or (intended still `running`) an interruptible instance outbid. */
  Stopped: 'stopped',
  Frozen: 'frozen',
  /** The container's process exited unexpectedly. */
  Exited: 'exited',
  Rebooting: 'rebooting',
  /** No recent heartbeat from the host. */
  Unknown: 'unknown',
  /** The host is disconnected from Vast (computed, not stored). */
  Offline: 'offline',
  /** Seen by SkyPilot, not in Vast's list. */
  Created: 'created',
  Restarting: 'restarting',
} as const;
export type VastActualStatus = (typeof VastActualStatus)[keyof typeof VastActualStatus];

/** An offer as `POST /api/v0/bundles/` returns it (the fields the adapter reads; there are more). */
export interface VastOffer {
  id: number;
  ask_contract_id?: number;
  machine_id: number;
  host_id: number;
  gpu_name: string;
  num_gpus: number;
  /** Per GPU, MB. */
  gpu_ram: number;
  cpu_ram?: number;
  cpu_cores_effective?: number;
  /** $/hour with the storage asked for; for a `bid` search, at the minimum bid. */
  dph_total: number;
  dph_base?: number;
  min_bid?: number;
  reliability?: number;
  disk_space?: number;
  cuda_max_good?: number;
  driver_version?: string;
  geolocation?: string;
  verification?: string;
  verified?: boolean;
  inet_down?: number;
  inet_up?: number;
  rentable?: boolean;
  rented?: boolean;
  external?: boolean | null;
  is_bid?: boolean;
  duration?: number;
  direct_port_count?: number;
  public_ipaddr?: string;
}

/** One mapped container port (Docker's form). */
export interface VastPortBinding {
  HostIp?: string;
  HostPort: string;
}

/** An instance as `GET /api/v0/instances/{id}/` and `GET /api/v1/instances/` return it. */
export interface VastInstance {
  id: number;
  machine_id?: number;
  host_id?: number;
  /** A `VastActualStatus`, one this client does not know, or null while provisioning. */
  actual_status: VastActualStatus | (string & {}) | null;
  intended_status?: string | null;
  cur_state?: string | null;
  next_state?: string | null;
  status_msg?: string | null;
  label?: string | null;
  image_uuid?: string;
  image_runtype?: string;
  /** The rental's env as `[name, value]` pairs (`["-p 8080:8080", "1"]` for a port). */
  extra_env?: [string, string][] | null;
  onstart?: string | null;
  /** The ssh gateway (`ssh4.vast.ai`) and its port for this instance. */
  ssh_host?: string | null;
  ssh_port?: number | null;
  public_ipaddr?: string | null;
  /** Only while running: `{"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "41022"}]}`. */
  ports?: Record<string, VastPortBinding[] | null> | null;
  dph_total?: number;
  gpu_name?: string;
  num_gpus?: number;
  disk_space?: number;
  /** Epoch seconds. */
  start_date?: number;
  end_date?: number | null;
  is_bid?: boolean;
  min_bid?: number;
  reliability2?: number;
}

/** What to rent on an offer. */
export interface CreateInstanceRequest {
  image: string;
  /** The name to find the instance by later (the adapter's job name). ≤ 256 characters. */
  label: string;
  /** Environment; a `-p 8080:8080` key with value `"1"` maps a port. Values ≤ 256 characters. */
  env?: Record<string, string>;
  /** Shell run when the container starts (with `args`, ≤ 4096 characters together). */
  onstart?: string;
  /** Disk, GB (at least 8). */
  disk?: number;
  /** The bid, $/hour, for an interruptible rental; absent or null rents on demand. */
  price?: number | null;
  /** Default `ssh_direc ssh_proxy`: what `vastai create instance --ssh --direct` sends. */
  runtype?: string;
  args?: string[];
  /** Give up at once if the machine cannot start the instance now. */
  cancelUnavail?: boolean;
  /** `-u user -p token registry` for a private image. */
  imageLogin?: string;
}

/** Where to ssh: the gateway (`ssh_host:ssh_port`) or the machine (`public_ipaddr` and the mapped 22/tcp). */
export function vastSshEndpoint(
  inst: VastInstance,
  via: 'proxy' | 'direct' = 'proxy',
): { host: string; port: number } | undefined {
  if (via === 'direct') {
    const hostPort = Number(inst.ports?.['22/tcp']?.[0]?.HostPort);
    return inst.public_ipaddr && hostPort ? { host: inst.public_ipaddr, port: hostPort } : undefined;
  }
  return inst.ssh_host && inst.ssh_port ? { host: inst.ssh_host, port: inst.ssh_port } : undefined;
}

/** The rental's env as a map (the API lists `[name, value]` pairs). */
export function vastInstanceEnv(inst: VastInstance): Record<string, string> {
  return Object.fromEntries((inst.extra_env ?? []).filter((p) => Array.isArray(p) && p.length >= 2));
}
