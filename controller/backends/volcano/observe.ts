/**
 * How a Volcano Job, its pods and its exit record read as an attempt's observation — pure, so
 * every phase is unit-tested.
 *
 * - `Pending`, `Restarting`: waiting for the gang (in the queue).
 * - `Running`: running — unless fewer pods run than the gang needs (volcano #2684: the job says
 *   `Running` while its pod is `Pending`), which is still pending.
 * - `Completing`, `Aborting`, `Terminating`: ending; the pods are being stopped. Not ended yet, so
 *   no next attempt starts while a pod of this one still runs.
 * - `Completed`: the exit record of process 0 says how (else Succeeded).
 * - `Aborted`: our policies abort on `PodEvicted` and `Unknown` (node lost), so Aborted is a
 *   preemption: the run resumes from its checkpoint and no retry is counted.
 * - `Terminated`: a pod failed (our `PodFailed → TerminateJob`): Failed, with that pod's exit
 *   code — process 0's record says Preempted then (it got SIGTERM), which is not the story —
 *   unless the failed pod was evicted (a kubelet eviction raises PodFailed): then preempted.
 * - `Failed`: Volcano's own retries ran out (a cluster whose defaults restart jobs): Failed, unless
 *   a pod was evicted (volcano #2560 counts evictions as retries): then preempted.
 * - No Job: its exit record if there is one (it ended and was deleted), cancelled if we deleted
 *   it, else Lost (someone deleted it).
 */
import { ExitReason, type ExitRecord } from '../../../runtime/records.js';
import { JobState, observedFromExit, type ObservedJob } from '../types.js';
import type { K8sObject } from './kubectl.js';

/** Volcano's Job phases (`batch.volcano.sh/v1alpha1` `JobPhase`). */
export const VcPhase = {
  Pending: 'Pending',
  Aborting: 'Aborting',
  Aborted: 'Aborted',
  Running: 'Running',
  Restarting: 'Restarting',
  Completing: 'Completing',
  Completed: 'Completed',
  Terminating: 'Terminating',
  Terminated: 'Terminated',
  Failed: 'Failed',
} as const;

/** Phases after which nothing of the job runs any more. */
export const FINISHED_PHASES = new Set<string>([
  VcPhase.Completed,
  VcPhase.Aborted,
  VcPhase.Terminated,
  VcPhase.Failed,
]);

interface JobStatus {
  state?: { phase?: string; reason?: string; message?: string; lastTransitionTime?: string };
  pending?: number;
  running?: number;
  succeeded?: number;
  failed?: number;
  minAvailable?: number;
}

interface PodStatus {
  phase?: string;
  reason?: string;
  message?: string;
  startTime?: string;
  conditions?: { type: string; status: string; reason?: string; message?: string }[];
  containerStatuses?: {
    state?: { terminated?: { exitCode?: number; reason?: string; message?: string; finishedAt?: string } };
  }[];
}

export const phaseOf = (job: K8sObject): string =>
  (job.status as JobStatus | undefined)?.state?.phase ?? VcPhase.Pending;

/** Pod status reasons of a pod taken away: kubelet eviction, preemption, a lost node, a node shutdown. */
const DISRUPTED_REASONS = new Set([
  'Evicted',
  'Preempted',
  'NodeLost',
  'Shutdown',
  'Terminated',
  'NodeShutdown',
]);

/** A pod that was taken away (evicted, preempted, its node lost) rather than failing on its own. */
export function disruption(pod: K8sObject): string | undefined {
  const s = (pod.status ?? {}) as PodStatus;
  if (s.reason && DISRUPTED_REASONS.has(s.reason))
    return `pod ${pod.metadata.name} ${s.reason === 'NodeLost' ? 'lost its node' : `was ${s.reason.toLowerCase()}`}${s.message ? `: ${s.message}` : ''}`;
  const dt = s.conditions?.find((c) => c.type === 'DisruptionTarget' && c.status === 'True');
  if (dt)
    return `pod ${pod.metadata.name} was disrupted (${dt.reason ?? 'DisruptionTarget'})${dt.message ? `: ${dt.message}` : ''}`;
  if (s.phase === 'Unknown') return `pod ${pod.metadata.name} is Unknown: its node stopped reporting`;
  return undefined;
}

/** A pod that failed on its own: its name and exit code. */
export function failedPod(
  pods: readonly K8sObject[],
): { name: string; exitCode?: number; message: string } | undefined {
  for (const pod of pods) {
    const s = (pod.status ?? {}) as PodStatus;
    if (s.phase !== 'Failed' || disruption(pod)) continue;
    const t = s.containerStatuses?.[0]?.state?.terminated;
    return {
      name: pod.metadata.name,
      ...(t?.exitCode !== undefined ? { exitCode: t.exitCode } : {}),
      message: `pod ${pod.metadata.name} failed${t?.exitCode !== undefined ? ` (exit ${t.exitCode}${t.reason ? `, ${t.reason}` : ''})` : ''}${t?.message ? `: ${t.message}` : s.message ? `: ${s.message}` : ''}`,
    };
  }
  return undefined;
}

export interface Seen {
  jobName: string;
  /** The Kubernetes name of the Job. */
  name: string;
  namespace: string;
  queue: string;
  job: K8sObject | undefined;
  /** The job's pods (label `volcano.sh/job-name`). */
  pods: readonly K8sObject[];
  /** Process 0's exit record from the store, when it was read (only for a finished or missing job). */
  exit?: ExitRecord;
  /** We deleted it (cancel). */
  cancelled: boolean;
}

/** The observation of one attempt. */
export function observe(s: Seen): ObservedJob {
  const base = { jobName: s.jobName, jobId: s.name };
  const where = `Volcano Job ${s.name} in ${s.namespace}`;
  if (!s.job) {
    if (s.exit) return observedFromExit(base, s.exit);
    if (s.cancelled) return { ...base, state: JobState.Cancelled, reason: 'Cancelled' };
    return {
      ...base,
      state: JobState.Lost,
      reason: 'JobGone',
      message: `${where} is gone (deleted by someone else?)`,
    };
  }
  const st = (s.job.status ?? {}) as JobStatus;
  const phase = phaseOf(s.job);
  const said = st.state?.message ? `: ${st.state.message}` : '';
  const want = Number(
    (s.job.spec as { minAvailable?: number } | undefined)?.minAvailable ?? st.minAvailable ?? 1,
  );
  const podPhases = s.pods.map((p) => (p.status as PodStatus | undefined)?.phase ?? 'Pending');
  const count = (phase: string, fallback: number | undefined) =>
    s.pods.length ? podPhases.filter((p) => p === phase).length : (fallback ?? 0);
  // Pods that started: running, or already done (process 0 may finish before the others).
  const started = count('Running', st.running) + count('Succeeded', st.succeeded);
  const pending = count('Pending', st.pending);
  const disrupted = s.pods.map(disruption).find((d) => d !== undefined);
  // Process 0's record is the attempt's (as on every multi-host backend): once it completed, the
  // attempt has, and the rest of the gang is stopped with the Job.
  if (!FINISHED_PHASES.has(phase) && s.exit?.reason === ExitReason.Completed)
    return observedFromExit(base, s.exit);
  switch (phase) {
    case VcPhase.Running:
      if (pending > 0 || started < want)
        return {
          ...base,
          state: JobState.Pending,
          reason: 'PodsPending',
          message: `${where} says Running but ${started} of ${want} pods started (${pending} pending)`,
        };
      return { ...base, state: JobState.Running, reason: 'Running', ...startOf(s.pods) };
    case VcPhase.Completing:
    case VcPhase.Aborting:
    case VcPhase.Terminating:
      return { ...base, state: JobState.Running, reason: phase, message: `${where} is ${phase}${said}` };
    case VcPhase.Completed:
      if (s.exit) return observedFromExit(base, s.exit);
      return {
        ...base,
        state: JobState.Succeeded,
        reason: 'Completed',
        message: `${where} completed; no exit record in the store`,
      };
    case VcPhase.Aborted:
      if (s.exit?.reason === ExitReason.Completed) return observedFromExit(base, s.exit);
      return {
        ...base,
        state: JobState.Preempted,
        reason: disrupted ? 'Evicted' : 'Aborted',
        message: `${where} was aborted: ${disrupted ?? (st.state?.message || 'a pod was evicted or its node lost')}`,
      };
    case VcPhase.Terminated:
    case VcPhase.Failed:
      return failedOrDisrupted(s, phase, disrupted);
    default:
      return {
        ...base,
        state: JobState.Pending,
        reason: phase === VcPhase.Pending ? 'Queued' : phase,
        message:
          phase === VcPhase.Pending
            ? `${where} waits in queue ${s.queue} for its gang of ${want} pod${want === 1 ? '' : 's'}${said}`
            : `${where} is ${phase}${said}`,
      };
  }
}

/** `Terminated` (a pod failed) or `Failed` (Volcano's retries ran out, maybe over evictions). */
function failedOrDisrupted(s: Seen, phase: string, disrupted: string | undefined): ObservedJob {
  const base = { jobName: s.jobName, jobId: s.name };
  const where = `Volcano Job ${s.name} in ${s.namespace}`;
  // A pod the kubelet evicts turns Failed (reason Evicted) and raises PodFailed, not PodEvicted
  // (that one is for a deleted pod: volcano bus/v1alpha1/events.go), so an eviction arrives here
  // as Terminated, the evicted pod retained; Failed after one is volcano #2560.
  if (disrupted)
    return {
      ...base,
      state: JobState.Preempted,
      reason: 'Evicted',
      message:
        phase === VcPhase.Failed
          ? `${where} went Failed after an eviction (counted as a retry by Volcano): ${disrupted}`
          : `${where} was terminated: ${disrupted}`,
    };
  const failed = failedPod(s.pods);
  // Process 0 stopped by a SIGTERM while no pod failed on its own: something took the pods away
  // (their Failed statuses gone with them). A user-code failure exits non-zero instead.
  if (!failed && s.exit?.reason === ExitReason.Preempted)
    return {
      ...base,
      state: JobState.Preempted,
      reason: phase,
      message: `${where} was ${phase === VcPhase.Failed ? 'failed' : 'terminated'} after its pods were stopped from outside (process 0 got SIGTERM)`,
    };
  // Process 0's own failure says the most; a SIGTERM it got because another pod failed does not.
  const own =
    s.exit &&
    s.exit.reason !== ExitReason.Preempted &&
    s.exit.reason !== ExitReason.Cancelled &&
    !(failed && s.exit.reason === ExitReason.Completed);
  if (own) return observedFromExit(base, s.exit!);
  const said = (s.job?.status as JobStatus | undefined)?.state?.message;
  return {
    ...base,
    state: JobState.Failed,
    reason: failed ? 'PodFailed' : phase,
    ...(failed?.exitCode !== undefined ? { exitCode: failed.exitCode } : {}),
    message: `${where} ${phase === VcPhase.Failed ? 'failed' : 'was terminated'}: ${failed?.message ?? (said || 'no pod says why')}`,
  };
}

/** When the first pod started, when known. */
function startOf(pods: readonly K8sObject[]): { startedAt?: string } {
  const t = pods
    .map((p) => (p.status as PodStatus | undefined)?.startTime)
    .filter((x): x is string => Boolean(x))
    .sort()[0];
  return t ? { startedAt: t } : {};
}
