/**
 * The distributed contract `adv exec` gives every workload, derived in this one place from the
 * facts a backend's launcher knows (`ADV_PROCESS_ID`, `ADV_NUM_PROCESSES`, `ADV_COORDINATOR_ADDRESS`,
 * `ADV_LOCAL_PROCESS_ID`, `ADV_LOCAL_PROCESS_COUNT`, `ADV_LOCAL_DEVICE_COUNT`), so JAX and torch see
 * the same variables on every backend. A value a backend exported itself is replaced by this one.
 */

/** Where this process sits in its job. */
export interface Topology {
  /** k, 0..processes-1. */
  process: number;
  processes: number;
  /** `host:port` of process 0 (JAX's coordinator); required when processes > 1. */
  coordinator?: string;
  /** This process's index among those on its host, and how many share the host. */
  localProcess: number;
  localProcesses: number;
  /** Accelerators this process may use (0: unknown or none). */
  localDevices: number;
}

/**
 * The variables the workload sees. One process: `RANK=0 WORLD_SIZE=1 LOCAL_RANK=0
 * LOCAL_WORLD_SIZE=1` and no `JAX_*`/`MASTER_*`. Several: JAX's coordinator, process count and id;
 * torch's `MASTER_ADDR` and `MASTER_PORT` (the coordinator's port + 1: JAX's coordinator and
 * torch's TCPStore cannot share a port); `JAX_LOCAL_DEVICE_IDS` only where several processes share
 * a host and the device count is known (this process's slice of the host's devices).
 */
export function distributedEnv(t: Topology): Record<string, string> {
  const env: Record<string, string> = {
    RANK: String(t.process),
    WORLD_SIZE: String(t.processes),
    LOCAL_RANK: String(t.localProcess),
    LOCAL_WORLD_SIZE: String(t.localProcesses),
  };
  if (t.processes <= 1 || !t.coordinator) return env;
  const { host, port } = splitHostPort(t.coordinator);
  Object.assign(env, {
    JAX_COORDINATOR_ADDRESS: t.coordinator,
    JAX_NUM_PROCESSES: String(t.processes),
    JAX_PROCESS_ID: String(t.process),
    MASTER_ADDR: host,
    MASTER_PORT: String(port + 1),
  });
  if (t.localProcesses > 1 && t.localDevices > 0) {
    const first = t.localProcess * t.localDevices;
    env.JAX_LOCAL_DEVICE_IDS = Array.from({ length: t.localDevices }, (_, i) => first + i).join(',');
  }
  return env;
}

/** `host:port`, `[v6]:port`; throws with what is wrong. */
export function splitHostPort(addr: string): { host: string; port: number } {
  const m = /^(\[[^\]]+\]|[^:[\]\s]+):(\d{1,5})$/.exec(addr);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port < 1 || port > 65534)
    throw new Error(
      `ADV_COORDINATOR_ADDRESS ${JSON.stringify(addr)} is not host:port (a port 1..65534: torch gets port + 1)`,
    );
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port };
}

/** A whole number ≥ min from a flag or variable, or an error naming where it came from. */
function whole(raw: string | undefined, fallback: number, what: string, min: number): number {
  const s = (raw ?? String(fallback)).trim();
  if (!/^\d{1,6}$/.test(s) || Number(s) < min)
    throw new Error(`${what} takes a whole number ≥ ${min}, not ${JSON.stringify(raw)}`);
  return Number(s);
}

/**
 * The topology from flags (which win) and the launcher's `ADV_*` variables; throws a message that
 * says what is wrong and how to fix it.
 */
export function topologyFrom(
  flags: { process?: string; processes?: string },
  env: NodeJS.ProcessEnv,
): Topology {
  const process = whole(flags.process ?? env.ADV_PROCESS_ID, 0, '--process (or $ADV_PROCESS_ID)', 0);
  const processes = whole(
    flags.processes ?? env.ADV_NUM_PROCESSES,
    1,
    '--processes (or $ADV_NUM_PROCESSES)',
    1,
  );
  if (process >= processes)
    throw new Error(
      `--process ${process} is not one of --processes ${processes} (0..${processes - 1}): pass --processes N or set $ADV_NUM_PROCESSES`,
    );
  const localProcess = whole(env.ADV_LOCAL_PROCESS_ID, 0, '$ADV_LOCAL_PROCESS_ID', 0);
  const localProcesses = whole(env.ADV_LOCAL_PROCESS_COUNT, 1, '$ADV_LOCAL_PROCESS_COUNT', 1);
  if (localProcess >= localProcesses)
    throw new Error(
      `$ADV_LOCAL_PROCESS_ID ${localProcess} is not below $ADV_LOCAL_PROCESS_COUNT ${localProcesses}`,
    );
  const localDevices = whole(env.ADV_LOCAL_DEVICE_COUNT || undefined, 0, '$ADV_LOCAL_DEVICE_COUNT', 0);
  const coordinator = env.ADV_COORDINATOR_ADDRESS?.trim() || undefined;
  if (processes > 1 && !coordinator)
    throw new Error(
      `a job of ${processes} processes needs $ADV_COORDINATOR_ADDRESS (host:port of process 0, JAX's coordinator); the backend's launcher sets it`,
    );
  if (processes > 1) splitHostPort(coordinator!);
  return {
    process,
    processes,
    ...(processes > 1 ? { coordinator } : {}),
    localProcess,
    localProcesses,
    localDevices,
  };
}
