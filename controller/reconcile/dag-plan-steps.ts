/**
 * The DAG planner's steps, in the order `planDag` takes them. The first two settle the cases with
 * no spec to act on (never valid, removed from the branch); the rest edit one working state,
 * `DagWork`: adopt the spec, decide every node, then the DAG's own phase. Each is exported to be
 * tested on its own.
 */
import type { DagNode } from '../spec/schema.js';
import { BLOCKING_NODE_PHASES, LIVE_NODE_PHASES, TERMINAL_PHASES } from '../status/phases.js';
import { Phase, Reason, type DagNodeStatus, type DagStatusDoc, type RunStatusDoc } from '../status/types.js';
import { setOwnerPhase } from '../status/transition.js';
import { childName, type DagPlanCaches } from './dag-plan-children.js';
import type { DagPlan, DagPlanContext, DagPlanInput, DesiredDag, InvalidDag } from './dag-plan-model.js';
import {
  canonicalJson,
  generationOf,
  markInvalid,
  markValid,
  RETRY_ANNOTATION,
  type DesiredRun,
} from './run-plan-model.js';

/** The working state of one `planDag` call once there is a spec to act on. */
export interface DagWork {
  readonly name: string;
  readonly input: DagPlanInput;
  readonly ctx: DagPlanContext;
  readonly caches: DagPlanCaches;
  /** `ctx.now` as an ISO time, for the status. */
  readonly now: string;
  /**
   * The next status: a shallow copy of the current one. Nodes are rebuilt into `nodes`, and
   * conditions are replaced (never mutated) by setCondition, so the copy needs to go no deeper.
   */
  readonly doc: DagStatusDoc;
  /** The spec acted on: the desired one, or the last valid one while the desired one is invalid. */
  readonly desired: DesiredDag;
  /** The nodes decided so far this pass, in dependency order. */
  readonly nodes: Record<string, DagNodeStatus>;
  /** A node failed (this pass, or in the previous status): what failFast looks at. */
  failedSoFar: boolean;
  /** Some node differs from the previous status (nodes are compared one by one, not serialized). */
  nodesChanged: boolean;
  /** The child Runs that should exist now. */
  readonly children: DesiredRun[];
  /** Outputs whose completeness the caller must find out before the nodes reading them can go on. */
  readonly unknownOutputs: string[];
}

/** One step of the DAG pipeline. */
export type DagStep = (w: DagWork) => void;

/** The status to edit: a shallow copy of `current`, or a new one. */
export function copyStatus(current: DagStatusDoc | undefined, name: string, now: string): DagStatusDoc {
  if (current) return { ...current, metadata: { ...current.metadata }, status: { ...current.status } };
  return {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'DAGStatus',
    metadata: { name },
    status: { phase: Phase.Pending, createdAt: now, conditions: [], nodes: {} },
  };
}

/**
 * An invalid spec acts on nothing new: it is marked on `doc`, and the last valid spec goes on
 * (as a Run's does). Returns the spec to act on, if there is one.
 */
export function keepLastValid(
  name: string,
  doc: DagStatusDoc,
  invalid: InvalidDag,
  desired: DesiredDag | undefined,
  now: string,
): DesiredDag | undefined {
  markInvalid(doc.status, invalid, now);
  if (desired || !doc.appliedSpec) return desired;
  return {
    name,
    spec: doc.appliedSpec,
    generation: doc.status.observedGeneration ?? generationOf(doc.appliedSpec),
    file: invalid.file,
  };
}

/** Never valid yet: say so, create nothing. */
export function neverValid(
  name: string,
  current: DagStatusDoc | undefined,
  doc: DagStatusDoc,
  invalid: InvalidDag,
): DagPlan {
  doc.status.reason = Reason.SpecInvalid;
  doc.status.message = 'the spec is invalid; see the Valid condition';
  return finishEarly(current, doc, `dag/${name}: spec invalid (${invalid.file}:${invalid.line})`);
}

/** Removed from the branch: its children go with it (the Run planner cancels the live ones). */
export function dagDeleted(name: string, current: DagStatusDoc | undefined, doc: DagStatusDoc): DagPlan {
  const st = doc.status;
  if (current && !TERMINAL_PHASES.has(st.phase)) {
    setOwnerPhase(
      st,
      Phase.Cancelled,
      Reason.SpecDeleted,
      'the DAG was removed from the watched branch; its live nodes are cancelled',
    );
  }
  return finishEarly(current, doc, `dag/${name}: ${st.phase} (spec deleted)`);
}

/** The plan of a DAG with no children: `current` itself when nothing changed. */
function finishEarly(current: DagStatusDoc | undefined, doc: DagStatusDoc, summary: string): DagPlan {
  if (current && canonicalJson(current) === canonicalJson(doc))
    return { doc: current, children: [], unknownOutputs: [] };
  return { doc, summary, children: [], unknownOutputs: [] };
}

/** The working state for `input`, acting on `desired`, editing `doc`. */
export function startWork(
  input: DagPlanInput,
  ctx: DagPlanContext,
  caches: DagPlanCaches,
  doc: DagStatusDoc,
  desired: DesiredDag,
): DagWork {
  return {
    name: input.name,
    input,
    ctx,
    caches,
    now: new Date(ctx.now).toISOString(),
    doc,
    desired,
    nodes: {},
    // Nodes come in dependency order, so "a node failed" is known for every node after it;
    // failFast looks at failures anywhere, so it starts from the previous status as well.
    failedSoFar: Object.values(doc.status.nodes).some((n) => n.phase === Phase.Failed),
    nodesChanged: !input.current,
    children: [],
    unknownOutputs: [],
  };
}

/** A valid spec is the one acted on (its generation, commit and file); labels follow the spec. */
export const adoptSpec: DagStep = (w) => {
  const { doc, desired } = w;
  const st = doc.status;
  if (!w.input.invalid) {
    markValid(st, w.now);
    if (st.observedGeneration !== desired.generation) {
      doc.appliedSpec = desired.spec;
      st.observedGeneration = desired.generation;
      st.specCommit = w.ctx.specCommit;
    }
    st.specFile = desired.file;
  }
  if (desired.labels) doc.metadata.labels = desired.labels;
  else delete doc.metadata.labels;
};

/** Every node, in dependency order: its status, and its child Run once it should exist. */
export const planNodes: DagStep = (w) => {
  const spec = w.desired.spec;
  const byId = new Map(spec.nodes.map((n) => [n.id, n]));
  for (const id of w.caches.topoOrder(w.desired.generation, spec.nodes)) planNode(w, byId.get(id)!);
  const before = w.input.current?.status.nodes;
  if (before && Object.keys(before).length !== Object.keys(w.nodes).length) w.nodesChanged = true;
  w.doc.status.nodes = w.nodes;
};

function planNode(w: DagWork, node: DagNode): void {
  const run = childName(w.name, node.id);
  const child = w.input.child(run);
  const prev = w.doc.status.nodes[node.id];
  const { ns, create } = child ? { ns: childNode(run, child), create: true } : unstartedNode(w, node, run);
  w.nodes[node.id] = ns;
  if (create) {
    // failFast: live siblings of a failure are cancelled (suspended) too.
    const stop = Boolean(w.desired.spec.failFast && w.failedSoFar && LIVE_NODE_PHASES.has(ns.phase));
    w.children.push(w.caches.childRun(w.desired, node, w.ctx.storeUrl, stop, retryOf(w, child)));
  }
  ns.since = prev && prev.phase === ns.phase && prev.attempts === ns.attempts ? prev.since : w.now;
  if (ns.phase === Phase.Failed) w.failedSoFar = true;
  // The same node as before is the same object: nothing to compare or write for it.
  if (prev && sameNode(prev, ns)) w.nodes[node.id] = prev;
  else w.nodesChanged = true;
}

/**
 * `adv retry dag`: the DAG's retry annotation, passed to a failed child that has not handled it
 * yet; the Run planner then starts a new attempt with a fresh budget (`retryAnnotation`). Once the
 * child moves on it is no longer passed, so a child that fails again is not retried again by the
 * same request. The nodes skipped after it wait again by themselves, and the succeeded nodes
 * never see it.
 */
function retryOf(w: DagWork, child: RunStatusDoc | undefined): string | undefined {
  const retry = w.desired.annotations?.[RETRY_ANNOTATION];
  if (!retry || child?.status.phase !== Phase.Failed || child.status.lastHandledRetryAt === retry)
    return undefined;
  return retry;
}

/** A node whose child exists: the child's phase, attempts and times. */
export function childNode(run: string, child: RunStatusDoc): DagNodeStatus {
  const s = child.status;
  const last = s.attempts.at(-1);
  return {
    phase: s.phase,
    run,
    attempts: s.attempts.length,
    ...(s.reason ? { reason: s.reason } : {}),
    ...(s.message ? { message: s.message } : {}),
    ...(last?.startedAt ? { startedAt: s.attempts.find((a) => a.startedAt)!.startedAt! } : {}),
    ...(TERMINAL_PHASES.has(s.phase) && last?.finishedAt ? { finishedAt: last.finishedAt } : {}),
  };
}

/** A node without a child yet: skipped, waiting (and for what), or its child is to be created. */
export function unstartedNode(
  w: DagWork,
  node: DagNode,
  run: string,
): { ns: DagNodeStatus; create: boolean } {
  const spec = w.desired.spec;
  const needs = node.needs ?? [];
  const phaseOf = (id: string) => w.nodes[id]!.phase;
  const blockedBy = needs.find((d) => BLOCKING_NODE_PHASES.has(phaseOf(d)));
  const waitingOn = needs.filter((d) => phaseOf(d) !== Phase.Succeeded);
  const skip = (reason: string, message: string) =>
    ({ ns: { phase: 'Skipped', run, reason, message }, create: false }) as const;
  const wait = (reason: string, message: string) =>
    ({ ns: { phase: 'Waiting', run, reason, message }, create: false }) as const;
  if (blockedBy) return skip('UpstreamFailed', `${blockedBy} ${phaseOf(blockedBy)}`);
  if (spec.failFast && w.failedSoFar) return skip('FailFast', 'another node failed and failFast is set');
  if (waitingOn.length)
    return wait('WaitingForNeeds', `waiting for ${waitingOn.map((d) => `${d} (${phaseOf(d)})`).join(', ')}`);
  if (spec.suspend) return wait(Reason.Suspended, 'the DAG is suspended');
  const missing = missingInputs(w, node);
  if (!missing.length)
    return {
      ns: { phase: Phase.Pending, run, reason: 'Created', message: 'child run created' },
      create: true,
    };
  return w.ctx.storeUrl
    ? wait('WaitingForOutputs', `waiting for ${missing.join(', ')} (no manifest yet)`)
    : wait('NoStorage', `${missing.join(', ')} cannot be passed on: the specs repo has no Storage`);
}

/**
 * Everything the node needs succeeded: which outputs it reads are not complete (no manifest
 * yet)? Outputs not known either way are added to `unknownOutputs` for the caller to look up.
 */
function missingInputs(w: DagWork, node: DagNode): string[] {
  const missing: string[] = [];
  for (const ref of Object.values(node.inputs ?? {})) {
    const [src, , output] = ref.split('.');
    const key = `${childName(w.name, src!)}/${output}`;
    const ready = w.ctx.storeUrl ? w.input.outputReady(key) : false;
    if (ready === undefined) w.unknownOutputs.push(key);
    if (!ready) missing.push(`${src}.outputs.${output}`);
  }
  return missing;
}

function sameNode(a: DagNodeStatus, b: DagNodeStatus): boolean {
  return (
    a.phase === b.phase &&
    a.run === b.run &&
    a.attempts === b.attempts &&
    a.reason === b.reason &&
    a.message === b.message &&
    a.startedAt === b.startedAt &&
    a.finishedAt === b.finishedAt &&
    a.since === b.since
  );
}

/** `3/5 nodes succeeded` */
const succeededOf = (all: readonly DagNodeStatus[]) =>
  `${all.filter((n) => n.phase === Phase.Succeeded).length}/${all.length} nodes succeeded`;

/** The DAG's own phase, from its nodes', and the count of nodes by phase. */
export const dagPhase: DagStep = (w) => {
  const st = w.doc.status;
  const all = Object.values(st.nodes);
  const count = (p: string) => all.filter((n) => n.phase === p).length;
  const live = all.some((n) => LIVE_NODE_PHASES.has(n.phase));
  // A node waiting on a suspension or on storage that does not exist will not move by itself.
  const waiting = all.some(
    (n) => n.phase === 'Waiting' && n.reason !== Reason.Suspended && n.reason !== 'NoStorage',
  );
  const stopped = count(Phase.Failed) + count(Phase.Cancelled);
  st.counts = Object.fromEntries([...new Set(all.map((n) => n.phase))].sort().map((p) => [p, count(p)]));
  const ok = succeededOf(all);
  if (count(Phase.Succeeded) === all.length)
    setOwnerPhase(w.doc.status, Phase.Succeeded, Reason.Completed, ok);
  else if (w.desired.spec.suspend)
    setOwnerPhase(w.doc.status, Phase.Cancelled, Reason.Suspended, `spec.suspend is true; ${ok}`);
  else if (stopped && !live && !waiting)
    setOwnerPhase(w.doc.status, Phase.Failed, 'NodesFailed', `${stopped} failed or cancelled; ${ok}`);
  else if (live || count(Phase.Succeeded) > 0) setOwnerPhase(w.doc.status, Phase.Running, 'Running', ok);
  else setOwnerPhase(w.doc.status, Phase.Pending, 'Pending', ok);
};

/** The plan the working state amounts to: `current` itself when nothing changed. */
export function finishWork(w: DagWork): DagPlan {
  const { doc, children, unknownOutputs } = w;
  const current = w.input.current;
  if (current && !w.nodesChanged && sameShell(current, doc))
    return { doc: current, children, unknownOutputs };
  return { doc, summary: summaryOf(w), children, unknownOutputs };
}

/** `dag/p: Running (1/4 nodes succeeded); train Running, eval Waiting`: the nodes that moved. */
function summaryOf(w: DagWork): string {
  const st = w.doc.status;
  const before = (w.input.since ?? w.input.current)?.status.nodes;
  const moved = Object.entries(st.nodes)
    .filter(([id, n]) => before?.[id]?.phase !== n.phase)
    .map(([id, n]) => `${id} ${n.phase}`);
  const head = `dag/${w.name}: ${st.phase} (${succeededOf(Object.values(st.nodes))})`;
  if (!moved.length) return head;
  return `${head}; ${moved.slice(0, 10).join(', ')}${moved.length > 10 ? `, and ${moved.length - 10} more` : ''}`;
}

/** Everything but the nodes (compared one by one) and the applied spec (compared by generation). */
function sameShell(a: DagStatusDoc, b: DagStatusDoc): boolean {
  const shell = (d: DagStatusDoc) =>
    canonicalJson({ ...d, appliedSpec: undefined, status: { ...d.status, nodes: undefined } });
  return a.appliedSpec === b.appliedSpec && shell(a) === shell(b);
}

/** The pipeline, in order, once the spec to act on is known. */
export const DAG_STEPS: readonly DagStep[] = [adoptSpec, planNodes, dagPhase];
