/**
 * The pull agent's queue, owned by the controller: attempts wait here until an agent claims one.
 * One hub per controller, shared by every `agent` Backend (each is a pool, or shares one). Every
 * change goes to the journal (write-ahead, fsynced) before it is answered, and state changes
 * happen synchronously after it: a claim is one step, so two agents can never win the same attempt.
 *
 * The lease: a claim is valid `staleAfterSec` after the last heartbeat. An attempt whose lease ran
 * out is ended `Lost` (the controller resumes it elsewhere) and its epoch is dead: the agent that
 * held it gets 409 for everything it says about it. After a restart every claim counts as renewed
 * at start-up (the agents had no one to talk to), so a claim is honoured, never handed out again.
 *
 * What the journal rebuilds (agents, attempts, claims, epochs) and the views of it are in
 * hub-state.ts; this class journals, answers and times.
 */
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type {
  AgentSummary,
  Claim,
  ClaimRequest,
  CompleteRequest,
  Enrolled,
  FailRequest,
  HeartbeatAnswer,
  HeartbeatRequest,
  RegisterRequest,
} from '../../../runtime/agent/protocol.js';
import { tokenMatches } from '../../api-token.js';
import {
  JobState,
  observedFromExit,
  type Capacity,
  type CodeExporter,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
} from '../types.js';
import { checkExit, checkTime, type TimeWindow } from './checks.js';
import { setupVariables } from '../job-env.js';
import { Journal } from './journal.js';
import { needOf, policyAllows, selectorMatches, unfitBecause } from './match.js';
import {
  agentSummary,
  HubState,
  OFFLINE_AFTER_MS,
  stateOf,
  type AgentRec,
  type Entry,
  type JobEnd,
  type JobRec,
  type QueuedJob,
} from './hub-state.js';

/** An `agent` Backend as the hub knows it: the pool its attempts go to, and how to reach its ports. */
export interface PoolBinding {
  backend: string;
  pool: string;
  staleAfterSec: number;
  /** Labels an agent must carry to take this backend's attempts. */
  selector?: Record<string, string>;
  /** The enrollment token now (the Backend's `tokenSecret`, resolved at each call). */
  enrollToken(): string | undefined;
  /** A live attempt's request, rebuilt after a restart (secrets are never journaled). */
  requestFor(job: string): JobRequest | undefined;
  code: CodeExporter;
}

/** An answer the HTTP layer sends as is. */
export interface Refusal {
  status: 400 | 401 | 403 | 404 | 409;
  error: string;
}

interface Waiter {
  agent: AgentRec;
  req: ClaimRequest;
  alive: () => boolean;
  resolve: (c: Claim | undefined) => void;
}

/**
 * An agent's changed capabilities are journaled at most this often; in between they are kept in
 * memory only (every claim sends them again, and claims match what the claim sends), so an agent
 * that varies them at each claim cannot make the hub write and flush an entry per request.
 */
const CAPABILITIES_JOURNALED_EVERY_MS = 60_000;
/** The journal is rewritten compact once it is past this and four times what it held after the last rewrite. */
const COMPACT_AT_BYTES = 1 << 20;
/** An enrollment token shorter than this opens nothing (as the API token): it could be guessed over the network. */
export const MIN_ENROLL_TOKEN_LENGTH = 16;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const iso = (ms: number) => new Date(ms).toISOString();

export interface HubOptions {
  /** Default `COMPACT_AT_BYTES`; tests make it small. */
  compactAtBytes?: number;
}

export class AgentHub {
  private readonly journal: Journal<Entry>;
  /** What the journal rebuilds: agents, attempts, claims, epochs. */
  private readonly s = new HubState();
  private readonly lastSeen = new Map<string, number>();
  private readonly bindings = new Map<string, PoolBinding>();
  private waiters: Waiter[] = [];
  private closed = false;
  private readonly closers: (() => void)[] = [];
  private readonly capabilitiesJournaledAt = new Map<string, number>();
  private readonly compactMin: number;
  private compactAt: number;

  constructor(
    dataDir: string,
    private readonly logger: Logger,
    private readonly now: () => number,
    opts: HubOptions = {},
  ) {
    this.journal = new Journal(join(dataDir, 'agents', 'journal.jsonl'));
    for (const e of this.journal.replay()) this.s.apply(e);
    const t = this.now();
    for (const j of this.s.jobs.values()) if (j.agent && !j.end) this.s.lastBeat.set(j.job, t);
    this.compactMin = this.compactAt = opts.compactAtBytes ?? COMPACT_AT_BYTES;
    this.compactIfGrown();
  }

  // --- the Backend side ---------------------------------------------------------------------

  attach(b: PoolBinding): void {
    this.bindings.set(b.backend, b);
    this.offer();
  }

  detach(b: PoolBinding): void {
    if (this.bindings.get(b.backend) === b) this.bindings.delete(b.backend);
  }

  /** Queues attempts (one flush for all); a job already known is left as it is (idempotent). */
  enqueue(backend: string, requests: readonly JobRequest[]): void {
    const b = this.bindings.get(backend);
    if (!b) throw new Error(`backend ${backend} is not attached to the agent hub`);
    const entries: Entry[] = [];
    const queued = new Set<string>();
    const t = iso(this.now());
    for (const r of requests) {
      this.s.requests.set(r.jobName, r);
      if (this.s.jobs.has(r.jobName) || queued.has(r.jobName)) continue;
      queued.add(r.jobName);
      const j: QueuedJob = {
        job: r.jobName,
        backend,
        pool: b.pool,
        run: r.run,
        attempt: r.attempt,
        need: needOf(r.spec),
        runLabels: r.labels ?? {},
        queuedAt: t,
      };
      entries.push({ op: 'queue', j });
    }
    this.commit(...entries);
    this.offer();
  }

  has(job: string): boolean {
    return this.s.jobs.has(job);
  }

  /**
   * What each handle's attempt is doing; ends claims whose lease ran out. With `owned`, also forgets
   * what no live attempt of this backend owns any more (and asks an agent to stop such a job).
   */
  observe(backend: string, handles: readonly JobHandle[], owned?: ReadonlySet<string>): ObservedJob[] {
    const out = handles.map((h) => this.observed(h));
    if (owned && !this.closed) {
      const polled = new Set(handles.map((h) => h.jobName));
      const sweep: Entry[] = [];
      for (const j of this.s.jobs.values()) {
        if (j.backend !== backend || owned.has(j.job) || polled.has(j.job)) continue;
        if (j.end || !j.agent) sweep.push({ op: 'forget', job: j.job });
        else if (!j.cancel) sweep.push({ op: 'cancel', job: j.job });
      }
      if (sweep.length)
        this.logger.info({ jobs: sweep.length }, 'agent jobs no live attempt owns: forgotten or stopped');
      this.commit(...sweep);
    }
    return out;
  }

  private observed(h: JobHandle): ObservedJob {
    const base = { jobName: h.jobName, jobId: h.jobId };
    const j = this.s.jobs.get(h.jobName);
    if (!j)
      return {
        ...base,
        state: JobState.Lost,
        reason: 'ClaimRecordMissing',
        message: 'the agent hub has no record of it',
      };
    this.expireIfStale(j);
    return { ...base, ...stateOf(j, this.s.agents.values()) };
  }

  /** Stops an attempt: a queued one ends now, a claimed one is told to stop at its next heartbeat. */
  cancel(job: string): void {
    const j = this.s.jobs.get(job);
    if (!j || j.end) return;
    if (!j.agent)
      this.commit({
        op: 'end',
        job,
        end: { state: JobState.Cancelled, reason: 'Cancelled', message: 'cancelled while queued' },
      });
    else if (!j.cancel) this.commit({ op: 'cancel', job });
  }

  /** Free GPUs: those of the ready, idle agents of this backend's pool heard from lately. */
  capacity(backend: string): Capacity {
    const b = this.bindings.get(backend);
    const busy = new Set([...this.s.jobs.values()].filter((j) => j.agent && !j.end).map((j) => j.agent!));
    const t = this.now();
    const idle = [...this.s.agents.values()].filter(
      (a) =>
        b &&
        !a.revoked &&
        !a.drained &&
        a.pools.includes(b.pool) &&
        !busy.has(a.name) &&
        t - (this.lastSeen.get(a.name) ?? -Infinity) < OFFLINE_AFTER_MS,
    );
    return {
      freeGpus: idle.reduce((n, a) => n + a.capabilities.gpus.length, 0),
      note: `${idle.length} idle agent(s) of pool ${b?.pool ?? backend}`,
    };
  }

  // --- the agents' side -------------------------------------------------------------------------

  /** Exchanges an enrollment token for an agent token (shown once, kept hashed). */
  register(body: RegisterRequest): Enrolled | Refusal {
    const opened = [...this.bindings.values()].filter((b) => {
      const t = b.enrollToken();
      return t !== undefined && t.length >= MIN_ENROLL_TOKEN_LENGTH && tokenMatches(t, body.enrollToken);
    });
    if (!opened.length) {
      const short = [...this.bindings.values()].filter(
        (b) => (b.enrollToken()?.length ?? MIN_ENROLL_TOKEN_LENGTH) < MIN_ENROLL_TOKEN_LENGTH,
      );
      if (short.length)
        this.logger.error(
          { backends: short.map((b) => b.backend) },
          `an enrollment token shorter than ${MIN_ENROLL_TOKEN_LENGTH} characters opens nothing: give these Backends' tokenSecret a longer one (openssl rand -hex 32)`,
        );
      return {
        status: 401,
        error: 'enrollment token refused: use the value of the agent Backend’s tokenSecret',
      };
    }
    let pools = [...new Set(opened.map((b) => b.pool))];
    if (body.pools?.length) pools = pools.filter((p) => body.pools!.includes(p));
    if (!pools.length)
      return {
        status: 403,
        error: `this token opens pool(s) ${[...new Set(opened.map((b) => b.pool))].join(', ')}, not ${body.pools!.join(', ')}`,
      };
    const existing = this.s.agents.get(body.name);
    if (existing && !existing.revoked)
      return {
        status: 409,
        error: `an agent named ${body.name} is already enrolled: it keeps its token in its state dir; to enroll this host under that name, run adv agent revoke ${body.name} first`,
      };
    const token = 'adva_' + randomBytes(32).toString('base64url');
    const a: AgentRec = {
      name: body.name,
      tokenHash: sha256(token),
      pools,
      labels: body.labels ?? {},
      capabilities: body.capabilities,
      enrolledAt: iso(this.now()),
    };
    this.commit({ op: 'agent', a });
    this.logger.info({ agent: a.name, pools }, 'agent enrolled');
    return { agent: a.name, token, pools };
  }

  /** The agent a bearer token belongs to, unless revoked; marks it seen. */
  authenticate(token: string | undefined): AgentRec | undefined {
    if (!token) return undefined;
    const name = this.s.byToken.get(sha256(token));
    const a = name ? this.s.agents.get(name) : undefined;
    if (!a || a.revoked) return undefined;
    this.lastSeen.set(a.name, this.now());
    return a;
  }

  /**
   * A claim for `agent` now, else the first one that comes within `waitMs` (long poll); undefined
   * when none came. `alive` says whether the agent is still waiting on the other end.
   */
  claim(
    agent: AgentRec,
    req: ClaimRequest,
    waitMs: number,
    alive: () => boolean,
  ): Promise<Claim | undefined> {
    if (this.closed) return Promise.resolve(undefined);
    this.noteCapabilities(agent, req);
    const now = this.tryClaim(agent, req);
    if (now || waitMs <= 0) return Promise.resolve(now);
    return new Promise((resolve) => {
      const w: Waiter = { agent, req, alive, resolve: (c) => (clearTimeout(timer), resolve(c)) };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((x) => x !== w);
        resolve(undefined);
      }, waitMs);
      this.waiters.push(w);
    });
  }

  /**
   * An agent's capabilities are detected again at each start: keep the newest (journaled when they
   * change, at most every `CAPABILITIES_JOURNALED_EVERY_MS`). Its labels are not taken from a
   * claim: they are those it enrolled with, so a Backend's `selector` means what enrollment said.
   */
  private noteCapabilities(agent: AgentRec, req: ClaimRequest): void {
    const a = this.s.agents.get(agent.name);
    if (!a || a.tokenHash !== agent.tokenHash) return;
    if (JSON.stringify(req.capabilities) === JSON.stringify(a.capabilities)) return;
    const next: AgentRec = { ...a, capabilities: req.capabilities };
    const t = this.now();
    if (t - (this.capabilitiesJournaledAt.get(a.name) ?? -Infinity) < CAPABILITIES_JOURNALED_EVERY_MS)
      return void this.s.agents.set(a.name, next); // journaled with its next change or compaction
    this.capabilitiesJournaledAt.set(a.name, t);
    this.commit({ op: 'agent', a: next });
  }

  heartbeat(agent: AgentRec, job: string, body: HeartbeatRequest): HeartbeatAnswer | Refusal {
    const j = this.held(agent, job, body.epoch);
    if ('status' in j) return j;
    const started = checkTime(body.startedAt, 'startedAt', this.window(j));
    if ('error' in started) return { status: 400, error: started.error };
    this.s.lastBeat.set(job, this.now());
    if (started.value && !j.startedAt) this.commit({ op: 'start', job, at: started.value });
    return { cancel: Boolean(j.cancel), leaseSec: this.binding(j)?.staleAfterSec ?? 0 };
  }

  complete(agent: AgentRec, job: string, body: CompleteRequest): { ok: true } | Refusal {
    const j = this.held(agent, job, body.epoch);
    if ('status' in j) return j;
    const exit = checkExit(body.exit, this.window(j));
    if ('error' in exit) return { status: 400, error: exit.error };
    const o = observedFromExit({ jobName: job, jobId: job }, exit.value);
    const end: JobEnd = {
      state: o.state,
      reason: o.reason ?? 'Completed',
      ...(o.message ? { message: o.message } : {}),
      ...(o.exitCode !== undefined ? { exitCode: o.exitCode } : {}),
      ...(o.startedAt ? { startedAt: o.startedAt } : {}),
      ...(o.finishedAt ? { finishedAt: o.finishedAt } : {}),
    };
    this.commit({ op: 'end', job, end });
    return { ok: true };
  }

  /** When a claimed attempt's workload may have started or ended: since it was queued, until now. */
  private window(j: JobRec): TimeWindow {
    return { from: Date.parse(j.queuedAt), to: this.now() };
  }

  fail(agent: AgentRec, job: string, body: FailRequest): { ok: true } | Refusal {
    const j = this.held(agent, job, body.epoch);
    if ('status' in j) return j;
    const reason = /^[A-Za-z]{1,64}$/.test(body.reason) ? body.reason : 'AgentFailed';
    this.commit({
      op: 'end',
      job,
      end: {
        state: JobState.Failed,
        reason,
        message: `agent ${agent.name}: ${String(body.message).slice(0, 2000)}`,
      },
    });
    return { ok: true };
  }

  /** The agent gives a claim back unrun (its owner's policy refuses it): queued again, new epoch when claimed. */
  release(agent: AgentRec, job: string, epoch: number): { ok: true } | Refusal {
    const j = this.held(agent, job, epoch);
    if ('status' in j) return j;
    this.commit({ op: 'release', job });
    this.offer();
    return { ok: true };
  }

  /** The code of a claimed attempt, as the deterministic tar.gz. */
  async code(agent: AgentRec, job: string, epoch: number): Promise<Buffer | Refusal> {
    const j = this.held(agent, job, epoch);
    if ('status' in j) return j;
    const b = this.binding(j);
    const r = this.s.requests.get(job) ?? b?.requestFor(job);
    if (!b || !r) return { status: 409, error: `${job} has no live attempt any more` };
    return b.code.payload(await b.code.treeOf(r.code.commit, r.code.path));
  }

  /** The claim `agent` holds on `job` under `epoch`, or the 409 that tells it to stop. */
  private held(agent: AgentRec, job: string, epoch: number): JobRec | Refusal {
    const j = this.s.jobs.get(job);
    if (j) this.expireIfStale(j);
    if (!j || j.enrollment !== agent.tokenHash || j.epoch !== epoch || j.end)
      return {
        status: 409,
        error: `lease lost: agent ${agent.name} does not hold ${job} under epoch ${epoch}${j?.end ? ` (it ended ${j.end.state}: ${j.end.reason})` : ''}; stop it`,
      };
    return j;
  }

  // --- operators ------------------------------------------------------------------------------

  summaries(): AgentSummary[] {
    const t = this.now();
    return [...this.s.agents.values()].map((a) =>
      agentSummary(
        a,
        this.claimsOf(a).map((j) => j.job),
        this.lastSeen.get(a.name),
        t,
      ),
    );
  }

  /**
   * drain: no new claims (what it runs finishes); resume undoes it; revoke: its token stops working
   * and its claims end now, `Lost` (`AgentRevoked`), so their runs resume elsewhere: a revoked
   * host is no longer trusted to run or report them, and no later enrollment of its name can.
   */
  setAgent(name: string, change: 'drain' | 'resume' | 'revoke'): AgentSummary | Refusal {
    const a = this.s.agents.get(name);
    if (!a) return { status: 404, error: `no agent named ${name} is enrolled (adv get agents lists them)` };
    if (a.revoked && change !== 'revoke')
      return { status: 409, error: `agent ${name} is revoked: enroll it again` };
    const next = { ...a, ...(change === 'revoke' ? { revoked: true } : { drained: change === 'drain' }) };
    const ended: Entry[] = (change === 'revoke' ? this.claimsOf(a) : []).map((j) => ({
      op: 'end',
      job: j.job,
      end: {
        state: JobState.Lost,
        reason: 'AgentRevoked',
        message: `agent ${name} was revoked by an operator while it held the attempt`,
        ...(j.startedAt ? { startedAt: j.startedAt } : {}),
      },
    }));
    this.commit({ op: 'agent', a: next }, ...ended);
    if (change !== 'drain') this.offer();
    for (const w of this.waiters.filter((x) => x.agent.name === name && change !== 'resume')) {
      this.waiters = this.waiters.filter((x) => x !== w);
      w.resolve(undefined);
    }
    this.logger.info({ agent: name, change, ended: ended.length }, 'agent changed by an operator');
    return this.summaries().find((s) => s.name === name)!;
  }

  /** Runs `fn` when the hub closes (its routes are unmounted then). */
  onClose(fn: () => void): void {
    this.closers.push(fn);
  }

  /** Whether the hub has closed: the controller is stopping, and agents should come back later. */
  get closing(): boolean {
    return this.closed;
  }

  /**
   * Closes the hub as the controller stops: every waiting long poll is answered now (the API
   * answers 503 with Retry-After, and `adv agent` asks again later, its jobs running on), no claim
   * is granted and no lease expires from here on (the agents have no one to renew with; a
   * restarted hub counts every claim as renewed at start), and nothing more is journaled.
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const w of this.waiters.splice(0)) w.resolve(undefined);
    for (const fn of this.closers.splice(0)) fn();
    this.journal.close();
  }

  // --- state ---------------------------------------------------------------------------------

  private binding(j: QueuedJob): PoolBinding | undefined {
    return this.bindings.get(j.backend);
  }

  private expireIfStale(j: JobRec): void {
    if (!j.agent || j.end || this.closed) return;
    const stale = (this.binding(j)?.staleAfterSec ?? 120) * 1000;
    const last = this.s.lastBeat.get(j.job) ?? this.now();
    if (this.now() - last <= stale) return;
    const secs = Math.round((this.now() - last) / 1000);
    this.logger.warn({ job: j.job, agent: j.agent, epoch: j.epoch }, 'agent lease expired');
    this.commit({
      op: 'end',
      job: j.job,
      end: {
        state: JobState.Lost,
        reason: 'LeaseExpired',
        message: `agent ${j.agent} sent no heartbeat for ${secs}s (staleAfterSec ${stale / 1000})`,
        ...(j.startedAt ? { startedAt: j.startedAt } : {}),
      },
    });
  }

  /** The live claims this enrollment holds. */
  private claimsOf(a: AgentRec): JobRec[] {
    return [...this.s.jobs.values()].filter((j) => j.enrollment === a.tokenHash && !j.end);
  }

  /** The first queued attempt this agent can take, claimed for it; undefined when none fits. */
  private tryClaim(agent: AgentRec, req: ClaimRequest): Claim | undefined {
    if (this.closed) return undefined;
    const a = this.s.agents.get(agent.name);
    if (!a || a.tokenHash !== agent.tokenHash || a.revoked || a.drained) return undefined;
    for (const job of this.s.queued) {
      const j = this.s.jobs.get(job)!;
      const b = this.binding(j);
      if (!b || !a.pools.includes(j.pool) || !selectorMatches(b.selector, a.labels)) continue;
      if (unfitBecause(j.need, req.capabilities) || !policyAllows(req.policy, j.run, j.runLabels)) continue;
      const r = this.s.requests.get(job) ?? b.requestFor(job);
      if (!r) continue; // no live attempt (yet): the sweep forgets it
      const epoch = this.s.epoch + 1;
      this.commit({ op: 'claim', job, agent: a.name, enrollment: a.tokenHash, epoch, at: iso(this.now()) });
      this.s.lastBeat.set(job, this.now());
      this.logger.info({ job, agent: a.name, epoch }, 'attempt claimed');
      const leaseSec = b.staleAfterSec;
      return {
        job,
        epoch,
        backend: j.backend,
        run: r.run,
        attempt: r.attempt,
        argv: r.argv,
        spec: r.spec as Claim['spec'],
        code: r.code,
        // The setup travels in the claim's env (ADV_SETUP, ADV_UV); the agent adds its own cache dir.
        env: { ...r.env, ...setupVariables(r) },
        secretEnv: r.secretEnv ?? {},
        ...(r.store ? { store: r.store } : {}),
        leaseSec,
        heartbeatSec: Math.max(1, Math.min(15, Math.floor(leaseSec / 5))),
        runLabels: j.runLabels,
      };
    }
    return undefined;
  }

  /** Hands queued attempts to waiting agents, oldest waiter first. */
  private offer(): void {
    if (!this.s.queued.size || !this.waiters.length) return;
    for (const w of [...this.waiters]) {
      if (!w.alive()) {
        this.waiters = this.waiters.filter((x) => x !== w);
        w.resolve(undefined);
        continue;
      }
      const c = this.tryClaim(w.agent, w.req);
      if (!c) continue;
      this.waiters = this.waiters.filter((x) => x !== w);
      w.resolve(c);
      if (!this.s.queued.size) return;
    }
  }

  /** Writes ahead, then applies: nothing is answered that a crash could forget. */
  private commit(...entries: Entry[]): void {
    if (this.closed) throw new Error('the agent hub is closed: the controller is stopping');
    this.journal.append(...entries);
    for (const e of entries) this.s.apply(e);
    this.compactIfGrown();
  }

  /** Rewrites the journal as a snapshot once it has grown well past what it describes. */
  private compactIfGrown(): void {
    if (this.journal.bytes <= this.compactAt) return;
    const before = this.journal.bytes;
    this.journal.rewrite(this.s.snapshot());
    this.compactAt = Math.max(this.compactMin, 4 * this.journal.bytes);
    this.logger.debug({ before, after: this.journal.bytes }, 'agent journal compacted');
  }
}
