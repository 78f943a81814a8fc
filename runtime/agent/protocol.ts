/**
 * The pull agent's wire contract: what `adv agent` and the controller's `agent` backend say to each
 * other over HTTP. Every request goes agent → controller (the host may sit behind NAT); the agent
 * authenticates with its own bearer token, got once in exchange for the Backend's enrollment token.
 *
 *   POST /api/v1/agent/register             {enrollToken, name, capabilities, labels} → Enrolled
 *   POST /api/v1/agent/claims?wait=SECONDS  {capabilities, labels, policy} → 200 Claim | 204
 *   GET  /api/v1/agent/jobs/JOB/code?epoch=E                            → the code (tar.gz)
 *   POST /api/v1/agent/jobs/JOB/heartbeat   {epoch, started?}           → {cancel} | 409
 *   POST /api/v1/agent/jobs/JOB/complete    {epoch, exit}               → 200 | 409
 *   POST /api/v1/agent/jobs/JOB/fail        {epoch, reason, message}    → 200 | 409
 *   POST /api/v1/agent/jobs/JOB/release     {epoch, why}                → 200 | 409
 *
 * A claim carries a lease epoch: the controller's fencing token. A heartbeat, completion or code
 * fetch with an epoch that is not the job's current one is answered 409, and the agent must kill
 * what it runs for that job: someone else may be running it.
 */
import type { ExitRecord } from '../records.js';

export const AGENT_API = '/api/v1/agent';
/** The operator's endpoints (the controller's API token): list, drain, resume, revoke. */
export const AGENTS_ADMIN_API = '/api/v1/agents';
/** Longest long poll the controller holds a claim request (seconds). */
export const MAX_CLAIM_WAIT_SEC = 50;

/**
 * What the controller accepts from an agent: beyond these a request is refused (400) with what is
 * wrong. Each bound is far above what a real host reports; together they keep what one agent can
 * make the controller store (its journal), match (policy globs) or print (`adv get agents`) small.
 */
export const AGENT_LIMITS = {
  /** Globs in each policy list (`--accept-run`, `--deny-run`), and characters in one. */
  globs: 64,
  globLength: 253,
  /** Labels in one map (the agent's, or a policy's). */
  labels: 32,
  /** Pools named at enrollment. */
  pools: 64,
  /** GPUs of one host, and characters of one's name. */
  gpus: 64,
  gpuName: 128,
  /** A host name (RFC 1035's whole-name limit). */
  hostname: 253,
  /** The other text fields of capabilities: `os`, `node`, `python`, `torch`, `cuda`. */
  text: 128,
} as const;

/** A label's key and value (`adv agent --label team=vision`): the same rules on both sides. */
export const LABEL_KEY = /^[A-Za-z0-9._/-]{1,253}$/;
export const LABEL_VALUE = /^[A-Za-z0-9._-]{0,63}$/;

/** What a host offers, detected by the agent at start. */
export interface AgentCapabilities {
  hostname: string;
  cores: number;
  ramGiB: number;
  os: string;
  node: string;
  python?: string;
  torch?: string;
  /** The CUDA version the driver supports (`nvidia-smi`), absent without an NVIDIA driver. */
  cuda?: string;
  gpus: { name: string; vramGiB: number }[];
}

/** What the agent's owner lets it take (empty lists allow everything). */
export interface AgentPolicy {
  /** Run-name globs it takes (`*` wildcard); empty: any. */
  runs?: string[];
  /** Run-name globs it never takes. */
  denyRuns?: string[];
  /** Run labels a run must carry to be taken (`team=vision`). */
  labels?: Record<string, string>;
  /** Run labels that make it refuse a run. */
  denyLabels?: Record<string, string>;
}

export interface RegisterRequest {
  enrollToken: string;
  name: string;
  capabilities: AgentCapabilities;
  labels?: Record<string, string>;
  /** Only these of the pools the token opens (empty: all of them). */
  pools?: string[];
}

export interface Enrolled {
  agent: string;
  /** The per-agent bearer token: shown once, stored hashed by the controller. */
  token: string;
  pools: string[];
}

export interface ClaimRequest {
  capabilities: AgentCapabilities;
  labels?: Record<string, string>;
  policy?: AgentPolicy;
}

/** An attempt handed to one agent. */
export interface Claim {
  job: string;
  epoch: number;
  backend: string;
  run: string;
  attempt: number;
  argv: string[];
  /** The run's spec (its `workingDir`, for one); nothing secret lives in a spec. */
  spec: { workingDir?: string; [k: string]: unknown };
  code: { commit: string; path?: string };
  env: Record<string, string>;
  /** The run's secrets and the store's credentials: for the job's environment only. */
  secretEnv: Record<string, string>;
  store?: { url: string };
  /** Seconds a lease lasts without a heartbeat; heartbeat every `heartbeatSec`. */
  leaseSec: number;
  heartbeatSec: number;
  runLabels: Record<string, string>;
}

export interface HeartbeatRequest {
  epoch: number;
  /** When the workload started (adv exec's record), once it has. */
  startedAt?: string;
}

export interface HeartbeatAnswer {
  /** The controller wants the job stopped (the run was cancelled, the spec changed…). */
  cancel: boolean;
  leaseSec: number;
}

export interface CompleteRequest {
  epoch: number;
  exit: Pick<ExitRecord, 'exitCode' | 'reason' | 'message' | 'startedAt' | 'finishedAt'>;
}

export interface FailRequest {
  epoch: number;
  /** A short CamelCase reason: `CodeFetchFailed`, `StartFailed`, … */
  reason: string;
  message: string;
}

/** One agent as the operator sees it (`adv get agents`). */
export interface AgentSummary {
  name: string;
  pools: string[];
  labels: Record<string, string>;
  capabilities: AgentCapabilities;
  state: 'Ready' | 'Draining' | 'Drained' | 'Revoked' | 'Offline';
  enrolledAt: string;
  lastSeen?: string;
  /** Jobs it holds now. */
  jobs: string[];
}
