/**
 * The `agent` adapter: a queue the controller owns. `submit` queues the attempt in the hub (the
 * write-ahead journal makes it durable); agents claim it over HTTP; `poll` reads the hub. Nothing
 * here reaches a host: the host reaches us.
 */
import { AGENT_API, AGENTS_ADMIN_API } from '../../../runtime/agent/protocol.js';
import type { Backend as BackendObject } from '../../spec/schema.js';
import {
  type Backend,
  type BackendContext,
  type Capacity,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
  type SubmitResult,
} from '../types.js';
import { agentApi, agentsAdminApi } from './api.js';
import { AgentHub, MIN_ENROLL_TOKEN_LENGTH, type PoolBinding } from './hub.js';

/** Default lease: an agent silent this long has lost its attempt (GitHub runners: 10 min). */
export const DEFAULT_STALE_AFTER_SEC = 120;
const HUB_KEY = 'agent-hub';

/** The controller's one hub, made (and its routes mounted) by the first `agent` adapter. */
export function hubOf(ctx: BackendContext): AgentHub {
  const make = () => {
    const logger = ctx.logger.child({ component: 'agent-hub' });
    const hub = new AgentHub(ctx.dataDir, logger, ctx.now);
    for (const [prefix, handler] of [
      [AGENT_API, agentApi(hub, { logger, now: ctx.now })],
      [AGENTS_ADMIN_API, agentsAdminApi(hub)],
    ] as const) {
      const unmount = ctx.http?.mount(prefix, handler);
      if (unmount) hub.onClose(unmount);
    }
    return hub;
  };
  if (!ctx.shared)
    throw new Error(
      'the agent backend needs the controller’s shared ports (an embedded build without them cannot serve agents)',
    );
  return ctx.shared(HUB_KEY, make);
}

export class AgentBackend implements Backend {
  readonly type = 'agent' as const;
  readonly name: string;
  /** Attempts no live attempt owns any more are forgotten (or their agents told to stop). */
  readonly sweepsOrphans = true;
  private readonly hub: AgentHub;
  private readonly binding: PoolBinding;

  constructor(spec: BackendObject, ctx: BackendContext) {
    const s = spec.spec.agent!;
    this.name = spec.metadata.name;
    this.hub = hubOf(ctx);
    this.binding = {
      backend: this.name,
      pool: s.pool ?? this.name,
      staleAfterSec: s.staleAfterSec ?? DEFAULT_STALE_AFTER_SEC,
      ...(s.selector ? { selector: s.selector } : {}),
      enrollToken: () => ctx.secrets?.get(s.tokenSecret),
      requestFor: (job) => ctx.requestFor?.(job),
      code: ctx.code,
    };
    const token = ctx.secrets?.get(s.tokenSecret);
    if (!token)
      ctx.logger.warn(
        { secret: s.tokenSecret },
        `the enrollment token secret ${s.tokenSecret} is not set: no agent can enroll until it is (agents already enrolled keep working)`,
      );
    else if (token.length < MIN_ENROLL_TOKEN_LENGTH)
      ctx.logger.error(
        { secret: s.tokenSecret, backend: this.name },
        `the enrollment token in ${s.tokenSecret} is ${token.length} characters: at least ${MIN_ENROLL_TOKEN_LENGTH} are needed, so no agent can enroll with it (agents already enrolled keep working); make one with: openssl rand -hex 32`,
      );
    this.hub.attach(this.binding);
  }

  private handle(jobName: string): JobHandle {
    return { backend: this.name, jobName, jobId: jobName };
  }

  /** One queue write for all (the hub's journal): a job the hub knows is adopted. */
  async submit(jobs: readonly JobRequest[]): Promise<(SubmitResult | Error)[]> {
    const known = jobs.map((j) => this.hub.has(j.jobName));
    try {
      this.hub.enqueue(this.name, jobs);
    } catch (e) {
      return jobs.map(() => e as Error);
    }
    return jobs.map((j, i) => ({ ...this.handle(j.jobName), ...(known[i] ? { adopted: true } : {}) }));
  }

  async find(jobName: string): Promise<JobHandle | undefined> {
    return this.hub.has(jobName) ? this.handle(jobName) : undefined;
  }

  async poll(handles: readonly JobHandle[], owned?: ReadonlySet<string>): Promise<ObservedJob[]> {
    return this.hub.observe(this.name, handles, owned);
  }

  async cancel(h: JobHandle): Promise<void> {
    this.hub.cancel(h.jobName);
  }

  // eslint-disable-next-line require-yield
  async *logs(): AsyncIterable<string> {
    // The agent's adv exec ships the output to the object store: `adv logs` and the dashboard read it there.
    return;
  }

  async capacity(): Promise<Capacity> {
    return this.hub.capacity(this.name);
  }

  async close(): Promise<void> {
    this.hub.detach(this.binding);
  }
}
