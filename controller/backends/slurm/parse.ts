/**
 * What SLURM says, read: `scontrol -o show job` lines, its job states mapped to observed states,
 * GRES fields and `sinfo` capacity; and sizes in sbatch's words.
 */
import { JobState, type Capacity, type ObservedJob } from '../types.js';

export interface SlurmJobInfo {
  jobId: string;
  jobName: string;
  state: string;
  reason: string;
  exitCode?: number;
  signal?: number;
  startTime?: string;
  endTime?: string;
  restarts?: number;
}

/** Parses `scontrol -o show job` output: one `Key=Value …` line per job. */
export function parseScontrol(text: string): SlurmJobInfo[] {
  const out: SlurmJobInfo[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('JobId=')) continue;
    const get = (k: string) => new RegExp(`(?:^| )${k}=(\\S*)`).exec(line)?.[1];
    const [code, sig] = (get('ExitCode') ?? '').split(':').map(Number);
    const time = (t?: string) =>
      t && t !== 'Unknown' && t !== 'None' ? new Date(t).toISOString() : undefined;
    const st = time(get('StartTime'));
    const et = time(get('EndTime'));
    out.push({
      jobId: get('JobId')!,
      jobName: get('JobName') ?? '',
      state: get('JobState') ?? 'UNKNOWN',
      reason: get('Reason') ?? 'None',
      ...(code !== undefined && !Number.isNaN(code) ? { exitCode: code } : {}),
      ...(sig ? { signal: sig } : {}),
      ...(st ? { startTime: st } : {}),
      ...(et ? { endTime: et } : {}),
      restarts: Number(get('Restarts') ?? 0),
    });
  }
  return out;
}

type SlurmMapping = Pick<ObservedJob, 'state' | 'reason' | 'message' | 'exitCode'>;

/** Not running now (queued, held, requeued, suspended or stopped): SLURM's state is the reason. */
const pending = (j: SlurmJobInfo): SlurmMapping => ({
  state: JobState.Pending,
  reason: j.state,
  message: `pending: ${j.reason}`,
});

const running = (j: SlurmJobInfo): SlurmMapping => ({ state: JobState.Running, reason: j.state });

const exitCodeOf = (j: SlurmJobInfo) => (j.exitCode !== undefined ? { exitCode: j.exitCode } : {});

/** An ended job, with SLURM's exit code when it reported one. */
const ended = (j: SlurmJobInfo, state: JobState, reason: string, message: string): SlurmMapping => ({
  state,
  reason,
  message,
  ...exitCodeOf(j),
});

/** Each SLURM job state (without the `+` SLURM may append) to what it means here. */
const SLURM_STATES: Readonly<Record<string, (j: SlurmJobInfo) => SlurmMapping>> = {
  PENDING: pending,
  REQUEUED: pending,
  REQUEUE_HOLD: pending,
  REQUEUE_FED: pending,
  SUSPENDED: pending,
  STOPPED: pending,
  RESV_DEL_HOLD: pending,
  CONFIGURING: running,
  RUNNING: running,
  COMPLETING: running,
  RESIZING: running,
  SIGNALING: running,
  STAGE_OUT: running,
  COMPLETED: (j) =>
    j.exitCode
      ? { state: JobState.Failed, reason: 'NonZeroExitCode', ...exitCodeOf(j) }
      : { state: JobState.Succeeded, reason: 'COMPLETED', ...exitCodeOf(j) },
  FAILED: (j) =>
    ended(
      j,
      JobState.Failed,
      j.reason === 'None' ? 'FAILED' : j.reason,
      `FAILED, exit code ${j.exitCode ?? '?'}`,
    ),
  OUT_OF_MEMORY: (j) => ended(j, JobState.Failed, 'OUT_OF_MEMORY', 'the job ran out of memory'),
  TIMEOUT: (j) => ended(j, JobState.Failed, 'TIMEOUT', 'the job reached its time limit'),
  DEADLINE: (j) => ended(j, JobState.Failed, 'DEADLINE', 'the job reached its deadline'),
  CANCELLED: (j) => ended(j, JobState.Cancelled, 'CANCELLED', `cancelled on the cluster (${j.reason})`),
  REVOKED: (j) =>
    ended(
      j,
      JobState.Cancelled,
      'REVOKED',
      'revoked: a sibling of this federated job started on another cluster',
    ),
  SPECIAL_EXIT: (j) =>
    ended(
      j,
      JobState.Failed,
      'SPECIAL_EXIT',
      `the job exited with a special exit code (${j.exitCode ?? '?'}) and was held`,
    ),
  PREEMPTED: (j) => ended(j, JobState.Preempted, 'PREEMPTED', 'preempted by a higher-priority job'),
  NODE_FAIL: (j) => ended(j, JobState.Lost, 'NODE_FAIL', 'a node of the job failed'),
  BOOT_FAIL: (j) => ended(j, JobState.Lost, 'BOOT_FAIL', 'a node failed to boot'),
};

/**
 * Every SLURM state, mapped to an observed state and a reason the failover logic can use:
 * preemption and node/boot failures are infrastructure (a new attempt elsewhere); a non-zero exit,
 * OOM, a deadline and the time limit are the run's own.
 */
export function mapSlurmState(j: SlurmJobInfo): SlurmMapping {
  const state = j.state.replace(/\+$/, '');
  if (Object.hasOwn(SLURM_STATES, state)) return SLURM_STATES[state]!(j);
  return { state: JobState.Unknown, reason: j.state, message: `unrecognised SLURM state ${j.state}` };
}

/** `gpu:2`, `gpu:h100:8(S:0-1)`, `gpu:a100:1(IDX:0),shard:4` → GPUs by type (`any` when untyped). */
export function parseGres(field: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const part of field.replace(/\([^)]*\)/g, '').split(',')) {
    const bits = part.split(':');
    if (bits[0] !== 'gpu') continue;
    const count = Number(bits.at(-1));
    if (!Number.isFinite(count)) continue;
    const type = bits.length >= 3 ? bits[1]! : 'any';
    out.set(type, (out.get(type) ?? 0) + count);
  }
  return out;
}

/** Free GPUs per partition and type from `sinfo -N -O NodeList,Partition,Gres,GresUsed,StateCompact` (`|`-separated). */
export function parseSinfoCapacity(text: string): NonNullable<Capacity['partitions']> {
  const acc = new Map<string, { partition: string; gpuType: string; totalGpus: number; freeGpus: number }>();
  for (const line of text.split('\n')) {
    const [, partitionRaw, gres, used, state] = line.split('|').map((x) => x.trim());
    if (!partitionRaw || gres === undefined || used === undefined || !state) continue;
    const partition = partitionRaw.replace(/\*$/, '');
    const usable = !/down|drain|fail|maint|unk|boot|futr|inval|npc|plnd|pow/i.test(state);
    const usedBy = parseGres(used);
    for (const [type, total] of parseGres(gres)) {
      const key = `${partition}|${type}`;
      const row = acc.get(key) ?? { partition, gpuType: type, totalGpus: 0, freeGpus: 0 };
      row.totalGpus += total;
      if (usable) row.freeGpus += Math.max(0, total - (usedBy.get(type) ?? usedBy.get('any') ?? 0));
      acc.set(key, row);
    }
  }
  return [...acc.values()];
}

/** Kubernetes-style memory (`64Gi`) to sbatch's `--mem` (`65536M`). */
export function slurmMem(q: string): string {
  const m = /^([0-9.]+)(Ki|Mi|Gi|Ti|K|M|G|T)?$/.exec(q);
  if (!m) return q;
  const mult: Record<string, number> = {
    Ki: 1 / 1024,
    Mi: 1,
    Gi: 1024,
    Ti: 1024 * 1024,
    K: 1 / 1000,
    M: 1,
    G: 1000,
    T: 1_000_000,
  };
  const mib = Number(m[1]) * (m[2] ? mult[m[2]]! : 1 / (1024 * 1024));
  return `${Math.max(1, Math.ceil(mib))}M`;
}
