/**
 * The hub's state as its journal rebuilds it: enrolled agents, queued and claimed attempts, the
 * highest epoch handed out. Every change is an `Entry`, applied after it was journaled; `snapshot`
 * is the fewest entries that rebuild the state (what a compacted journal holds).
 */
import { JobState, type JobRequest, type ObservedJob } from '../types.js';
import type { AgentCapabilities, AgentSummary } from '../../../runtime/agent/protocol.js';
import { unfitBecause, type Need } from './match.js';

export interface AgentRec {
  name: string;
  tokenHash: string;
  pools: string[];
  labels: Record<string, string>;
  capabilities: AgentCapabilities;
  enrolledAt: string;
  drained?: boolean;
  revoked?: boolean;
}

export interface QueuedJob {
  job: string;
  backend: string;
  pool: string;
  run: string;
  attempt: number;
  need: Need;
  runLabels: Record<string, string>;
  queuedAt: string;
}

export interface JobEnd {
  state: JobState;
  reason: string;
  message?: string;
  exitCode?: number;
  startedAt?: string;
  finishedAt?: string;
}

export interface JobRec extends QueuedJob {
  agent?: string;
  /**
   * The enrollment that holds the claim (its token's hash), not only the agent's name: a name
   * revoked and enrolled again is a new identity, and inherits nothing of the old one's claims.
   */
  enrollment?: string;
  epoch?: number;
  claimedAt?: string;
  startedAt?: string;
  cancel?: boolean;
  end?: JobEnd;
}

export type Entry =
  | { op: 'agent'; a: AgentRec }
  /** The highest epoch handed out (a compacted journal may no longer hold its claim). */
  | { op: 'epoch'; n: number }
  | { op: 'queue'; j: QueuedJob }
  /** `enrollment` is absent from journals written before claims were bound to it: the name's enrollment then. */
  | { op: 'claim'; job: string; agent: string; enrollment?: string; epoch: number; at: string }
  | { op: 'start'; job: string; at: string }
  | { op: 'cancel'; job: string }
  | { op: 'release'; job: string }
  | { op: 'end'; job: string; end: JobEnd }
  | { op: 'forget'; job: string };

/** The hub's tables; `apply` is the only way they change. */
export class HubState {
  readonly agents = new Map<string, AgentRec>();
  readonly byToken = new Map<string, string>();
  readonly jobs = new Map<string, JobRec>();
  /** Queued job names, oldest first. */
  readonly queued = new Set<string>();
  /** Live attempts' requests (never journaled: they carry secrets). */
  readonly requests = new Map<string, JobRequest>();
  /** When each claimed attempt's agent last heartbeated it. */
  readonly lastBeat = new Map<string, number>();
  epoch = 0;

  apply(e: Entry): void {
    switch (e.op) {
      case 'agent': {
        const old = this.agents.get(e.a.name);
        if (old) this.byToken.delete(old.tokenHash);
        this.agents.set(e.a.name, e.a);
        if (!e.a.revoked) this.byToken.set(e.a.tokenHash, e.a.name);
        return;
      }
      case 'epoch':
        this.epoch = Math.max(this.epoch, e.n);
        return;
      case 'queue':
        this.jobs.set(e.j.job, { ...e.j });
        this.queued.add(e.j.job);
        return;
      case 'forget':
        this.jobs.delete(e.job);
        this.queued.delete(e.job);
        this.requests.delete(e.job);
        this.lastBeat.delete(e.job);
        return;
    }
    const j = this.jobs.get(e.job);
    if (!j) return;
    switch (e.op) {
      case 'claim':
        Object.assign(j, {
          agent: e.agent,
          enrollment: e.enrollment ?? this.agents.get(e.agent)?.tokenHash,
          epoch: e.epoch,
          claimedAt: e.at,
        });
        this.epoch = Math.max(this.epoch, e.epoch);
        this.queued.delete(e.job);
        return;
      case 'start':
        j.startedAt = e.at;
        return;
      case 'cancel':
        j.cancel = true;
        return;
      case 'release':
        delete j.agent;
        delete j.enrollment;
        delete j.epoch;
        delete j.claimedAt;
        this.queued.add(e.job);
        return;
      case 'end':
        j.end = e.end;
        this.queued.delete(e.job);
        this.lastBeat.delete(e.job);
        this.requests.delete(e.job);
        return;
    }
  }

  /** The state as the fewest entries that rebuild it. */
  snapshot(): Entry[] {
    const out: Entry[] = [{ op: 'epoch', n: this.epoch }];
    for (const a of this.agents.values()) out.push({ op: 'agent', a });
    for (const j of this.jobs.values()) {
      const { agent, enrollment, epoch, claimedAt, startedAt, cancel, end, ...q } = j;
      out.push({ op: 'queue', j: q });
      if (agent && epoch !== undefined)
        out.push({
          op: 'claim',
          job: j.job,
          agent,
          enrollment: enrollment ?? '', // bound to no enrollment: nobody holds it
          epoch,
          at: claimedAt ?? q.queuedAt,
        });
      if (startedAt) out.push({ op: 'start', job: j.job, at: startedAt });
      if (cancel) out.push({ op: 'cancel', job: j.job });
      if (end) out.push({ op: 'end', job: j.job, end });
    }
    return out;
  }
}

/** Why a queued attempt waits: which agents could take it, and why the others cannot. */
export function whyQueued(agents: Iterable<AgentRec>, j: JobRec): string {
  const pool = [...agents].filter((a) => !a.revoked && a.pools.includes(j.pool));
  if (!pool.length) return `waiting for an agent of pool ${j.pool}: none is enrolled`;
  const reasons = pool.map((a) => {
    if (a.drained) return `${a.name}: drained`;
    const why = unfitBecause(j.need, a.capabilities);
    return why ? `${a.name}: ${why}` : undefined;
  });
  const fit = reasons.filter((r) => r === undefined).length;
  if (fit) return `waiting for one of ${fit} fitting agent(s) of pool ${j.pool} to be free`;
  return `no agent of pool ${j.pool} can run it (${reasons.slice(0, 3).join('; ')}${reasons.length > 3 ? '; …' : ''})`;
}

/** An agent not heard from for this long shows as Offline (a long poll lasts at most 50 s). */
export const OFFLINE_AFTER_MS = 90_000;

/** How `adv get agents` shows an agent: its state from its flags, its claims and when it was last heard. */
export function agentSummary(
  a: AgentRec,
  jobs: string[],
  seen: number | undefined,
  now: number,
): AgentSummary {
  const state: AgentSummary['state'] = a.revoked
    ? 'Revoked'
    : a.drained
      ? jobs.length
        ? 'Draining'
        : 'Drained'
      : seen === undefined || now - seen > OFFLINE_AFTER_MS
        ? 'Offline'
        : 'Ready';
  return {
    name: a.name,
    pools: a.pools,
    labels: a.labels,
    capabilities: a.capabilities,
    state,
    enrolledAt: a.enrolledAt,
    ...(seen !== undefined ? { lastSeen: new Date(seen).toISOString() } : {}),
    jobs,
  };
}

/** What an attempt the hub knows is now, as the controller observes it (its name and id aside). */
export function stateOf(j: JobRec, agents: Iterable<AgentRec>): Omit<ObservedJob, 'jobName' | 'jobId'> {
  if (j.end) {
    const { state, reason, ...rest } = j.end;
    return { state, reason, ...rest };
  }
  if (!j.agent)
    return {
      state: JobState.Pending,
      reason: 'Queued',
      message: whyQueued(agents, j),
    };
  if (!j.startedAt)
    return {
      state: JobState.Pending,
      reason: 'Claimed',
      message: `claimed by agent ${j.agent}, starting`,
    };
  return { state: JobState.Running, startedAt: j.startedAt, message: `on agent ${j.agent}` };
}
