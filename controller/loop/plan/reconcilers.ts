/**
 * Reconciling one key: run the pure planner on what is desired, recorded and observed, stage the
 * status it returns, and hand back its actions and a result (when to look again). No backend is
 * asked here; the executor does that after the write-ahead commit.
 */
import type { Logger } from 'pino';
import type { ObjectStore } from '../../../runtime/store/index.js';
import { readOutputManifest } from '../../../runtime/artifacts.js';
import { EndClass } from '../../status/types.js';
import { DagPlanCaches, planDag, type DagPlanContext } from '../../reconcile/dag-plan.js';
import type { CodeRepoStates } from '../../reconcile/desired.js';
import { planContextOf } from '../../reconcile/plan-context.js';
import type { GitPort } from '../../git/port.js';
import { isLiveAttempt, planRun, type RunAction, type RunPlan } from '../../reconcile/run-plan.js';
import type { BackendInfo } from '../../reconcile/solver.js';
import type { ControllerMetrics } from '../../metrics.js';
import type { StatusWriter } from '../../status/writer.js';
import {
  Reason,
  type Attempt,
  type DagStatusDoc,
  type RunStatus,
  type RunStatusDoc,
} from '../../status/types.js';
import type { RunSpec } from '../../spec/schema.js';
import type { DesiredState } from '../desired/desired-state.js';
import { ownerKey, runKey, splitKey } from '../desired/desired-state.js';
import { SweepPlanCaches } from '../../reconcile/sweep-plan.js';
import { reconcileSweep } from './sweep-reconcile.js';
import type { Observation } from '../observe/observer.js';
import type { PassScope } from './pass-scope.js';
import { TERMINAL_PHASES } from '../../status/phases.js';
import type { ReconcileResult } from './requeue.js';

/** Where a pass's scope comes from: the controller's long-lived parts. */
export interface ScopeSources {
  desired: DesiredState;
  status: StatusWriter;
  git: GitPort;
  /** The specs repo is a clone of a remote one (code refs resolve against its remote branches). */
  remote: boolean;
  /** Code from other repositories (`code.repo`), fetched in the background. */
  codeRepos?: CodeRepoStates;
  /** What the solver knows of each backend now. */
  backends(): BackendInfo[];
  inputs: {
    readonly objects: ObjectStore | undefined;
    readonly storeUrl: string | undefined;
    missingSecrets(names: readonly string[]): string | undefined;
  };
  controllerId(): string;
  hint(key: string): void;
  metrics: ControllerMetrics;
  logger: Logger;
  now(): number;
}

/** Makes each pass's scope; keeps what outlives one pass (DAG caches, outputs seen, runs waiting). */
export class PassScopes {
  private readonly dagCaches = new DagPlanCaches();
  private readonly sweepCaches = new SweepPlanCaches();
  private readonly outputsReady = new Set<string>();
  private readonly waitingForCapacity = new Set<string>();

  constructor(private readonly s: ScopeSources) {}

  /** The desired runs with their status, for `resolveCodeRepos`. */
  private *codeRepoRuns(): Iterable<{ name: string; spec: RunSpec; status?: RunStatus | undefined }> {
    for (const [name, r] of this.s.desired.runs)
      if (r.spec.code?.repo)
        yield { name, spec: r.spec, status: this.s.status.get<RunStatusDoc>('Run', name)?.status };
  }

  async next(observation: Observation): Promise<PassScope> {
    const { s } = this;
    // Walked once, not copied: 10,000 desired runs are a pass's whole input, not its work.
    const specs = (function* () {
      for (const r of s.desired.runs.values()) yield r.spec;
    })();
    const planContext = await planContextOf({
      now: s.now(),
      specCommit: s.desired.head!,
      backends: s.backends(),
      git: s.git,
      remote: s.remote,
      specs,
      ...(s.codeRepos ? { codeRepos: { states: s.codeRepos, runs: this.codeRepoRuns() } } : {}),
      controllerId: s.controllerId(),
      missingSecrets: (names) => s.inputs.missingSecrets(names),
    });
    return {
      desired: s.desired,
      status: s.status,
      observation,
      planContext,
      infos: new Map(planContext.backends.map((b) => [b.name, b])),
      objects: s.inputs.objects,
      storeUrl: s.inputs.storeUrl,
      dagCaches: this.dagCaches,
      outputsReady: this.outputsReady,
      dagPassBase: new Map(),
      sweepCaches: this.sweepCaches,
      sweepPassBase: new Map(),
      waitingForCapacity: this.waitingForCapacity,
      hint: s.hint,
      metrics: s.metrics,
      logger: s.logger,
    };
  }
}

/** A Run's reconcile: its result, its actions, and whether an attempt ended (backend health changes). */
export interface RunReconcile {
  result: ReconcileResult;
  actions: RunAction[];
  attemptEnded: boolean;
}

export function reconcileRun(s: PassScope, name: string): RunReconcile {
  const current = s.status.get<RunStatusDoc>('Run', name);
  const last = current?.status.attempts.at(-1);
  const observed = last && s.observation.jobs.get(last.jobName);
  const heartbeat = s.observation.heartbeats.get(name);
  const desired = s.desired.runs.get(name);
  const invalid = s.desired.invalidRuns.get(name);
  const plan = planRun(
    {
      name,
      ...(desired ? { desired } : {}),
      ...(invalid ? { invalid } : {}),
      ...(current ? { current } : {}),
      ...(observed ? { observed } : {}),
      ...(heartbeat ? { heartbeat } : {}),
    },
    s.planContext,
  );
  reserveCapacity(s, plan, current);
  if (plan.doc && plan.doc !== current && plan.summary) stageRun(s, name, plan.doc, plan.summary);
  const owner = plan.doc && plan.doc !== current ? ownerKey(plan.doc) : undefined;
  if (owner) s.hint(owner);
  const ended =
    last !== undefined &&
    isLiveAttempt(last) &&
    !isLiveAttempt(plan.doc?.status.attempts.find((x) => x.n === last.n));
  if (ended) attemptEnded(s, last, plan.doc);
  if (plan.doc?.status.reason === Reason.NoCapacity) s.waitingForCapacity.add(name);
  else s.waitingForCapacity.delete(name);
  return {
    result: plan.requeueAfterMs !== undefined ? { requeueAfterMs: plan.requeueAfterMs } : {},
    actions: plan.actions,
    attemptEnded: ended,
  };
}

/** What this pass hands out counts against the backend for the next run planned. */
function reserveCapacity(s: PassScope, plan: RunPlan, current: RunStatusDoc | undefined): void {
  for (const act of plan.actions) {
    const info = s.infos.get(act.backend);
    const a = plan.doc?.status.attempts.find((x) => x.n === act.attempt);
    if (
      act.type !== 'submit' ||
      !info ||
      a?.jobId ||
      current?.status.attempts.some((x) => x.n === act.attempt)
    )
      continue;
    info.active = (info.active ?? 0) + 1;
    const res = plan.doc?.appliedSpec?.resources;
    info.reservedGpus = (info.reservedGpus ?? 0) + (res?.gpus ?? 0) * (res?.nodes ?? 1);
  }
}

function stageRun(s: PassScope, name: string, doc: RunStatusDoc, summary: string): void {
  const a = doc.status.attempts.at(-1);
  s.status.stage('Run', name, doc, {
    summary,
    trailers: [['Run', name], ...(a ? ([['Attempt', String(a.n)]] as [string, string][]) : [])],
  });
  s.logger.info({ run: name, attempt: a?.n, backend: a?.backend, phase: doc.status.phase }, summary);
}

/** An attempt that ended frees its place: runs waiting for one are looked at now, not at their timer. */
function attemptEnded(s: PassScope, last: Attempt, doc: RunStatusDoc | undefined): void {
  const cls = doc?.status.attempts.find((x) => x.n === last.n)?.class ?? 'Unknown';
  s.metrics.attemptEnds.inc({ backend: last.backend, class: cls });
  if (cls === EndClass.Preempted) s.metrics.preemptions.inc({ backend: last.backend });
  const info = s.infos.get(last.backend);
  if (info) info.active = Math.max(0, (info.active ?? 0) - 1);
  for (const waiting of s.waitingForCapacity) s.hint(runKey(waiting));
}

/** A key of an object that owns child runs: `DAG/<name>` or `Sweep/<name>`, planned before runs. */
export const isOwnerKey = (key: string): boolean => key.startsWith('DAG/') || key.startsWith('Sweep/');

/** Plans the DAG or the Sweep of an owner key (see isOwnerKey). */
export async function reconcileOwner(s: PassScope, key: string): Promise<ReconcileResult> {
  const [kind, name] = splitKey(key);
  if (kind !== 'Sweep') return reconcileDag(s, name);
  reconcileSweep(s, name);
  return {};
}

/**
 * Plans one DAG: stages its status, and makes the desired state hold exactly its children (a
 * changed, new or dropped child is planned by the Run planner in this same pass).
 */
export async function reconcileDag(s: PassScope, name: string): Promise<ReconcileResult> {
  const current = s.status.get<DagStatusDoc>('DAG', name);
  // Planned more than once in a pass: the commit message still says every node that moved.
  if (!s.dagPassBase.has(name)) s.dagPassBase.set(name, current);
  const since = s.dagPassBase.get(name);
  const ctx: DagPlanContext = {
    now: s.planContext.now,
    specCommit: s.planContext.specCommit,
    caches: s.dagCaches,
    ...(s.storeUrl && s.objects ? { storeUrl: s.storeUrl } : {}),
  };
  const desired = s.desired.dags.get(name);
  const invalid = s.desired.invalidDags.get(name);
  const input = {
    name,
    ...(desired ? { desired } : {}),
    ...(invalid ? { invalid } : {}),
    ...(current ? { current } : {}),
    ...(since ? { since } : {}),
    child: (run: string) => s.status.get<RunStatusDoc>('Run', run),
    outputReady: (key: string) => (s.outputsReady.has(key) ? true : undefined),
  };
  let plan = planDag(input, ctx);
  let result: ReconcileResult = {};
  if (plan.unknownOutputs.length && s.objects) {
    // Ask the store once for each output not yet seen complete, then plan again.
    const seen = await outputsComplete(s, s.objects, plan.unknownOutputs);
    plan = planDag({ ...input, outputReady: (key) => seen.get(key) ?? s.outputsReady.has(key) }, ctx);
    if ([...seen.values()].some((ok) => !ok)) result = { requeueAfterMs: 2000 };
  }
  if (plan.doc && plan.doc !== current && plan.summary) {
    s.status.stage('DAG', name, plan.doc, { summary: plan.summary, trailers: [['DAG', name]] });
    s.logger.info({ dag: name, phase: plan.doc.status.phase }, plan.summary);
  }
  for (const key of s.desired.setDagChildren(name, plan.children)) s.hint(key);
  return result;
}

async function outputsComplete(
  s: PassScope,
  objects: ObjectStore,
  keys: readonly string[],
): Promise<Map<string, boolean>> {
  const seen = new Map<string, boolean>();
  await Promise.all(
    keys.map(async (key) => {
      const [run, output] = key.split('/') as [string, string];
      const m = await readOutputManifest(objects, run, output).catch(() => undefined);
      const ok = m !== undefined && typeof m !== 'string';
      seen.set(key, ok);
      if (ok) s.outputsReady.add(key);
    }),
  );
  return seen;
}

/** A due run that may be scheduled now and asks for GPUs: backends' free capacity is worth asking for. */
export function wantsCapacity(key: string, desired: DesiredState, status: StatusWriter): boolean {
  const [kind, name] = splitKey(key);
  const run = kind === 'Run' ? desired.runs.get(name) : undefined;
  if (!run || !(run.spec.resources?.gpus ?? 0)) return false;
  const st = status.get<RunStatusDoc>('Run', name)?.status;
  return !st || (!TERMINAL_PHASES.has(st.phase) && !isLiveAttempt(st.attempts.at(-1)));
}
