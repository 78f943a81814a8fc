/**
 * The DAG planner: pure, like the Run planner. A DAG is reconciled into child Runs
 * (`<dag>.<node>`, owned by the DAG): a node's child exists once everything it needs has
 * succeeded and the outputs it reads are complete; from then on the child is an ordinary Run,
 * planned, retried and resumed by `planRun`. The DAG's status is the state of every node.
 *
 * Cancelling (suspending) the DAG suspends its children; a node removed from the DAG, or the
 * whole DAG removed, drops its child from the desired state, and the Run planner cancels it.
 */
import type { DagNode, DagSpec, RunSpec } from '../spec/schema.js';
import {
  ConditionType,
  Phase,
  Reason,
  setCondition,
  TERMINAL_PHASES,
  type DagNodeStatus,
  type DagStatusDoc,
  type RunStatusDoc,
} from '../status/types.js';
import { canonicalJson, generationOf, markInvalid, type DesiredRun, type InvalidRun } from './run-plan.js';

export interface DesiredDag {
  name: string;
  spec: DagSpec;
  labels?: Record<string, string>;
  generation: string;
  file: string;
}

/** A DAG spec that failed validation: its first error, located (the same shape as a Run's). */
export type InvalidDag = InvalidRun;

export interface DagPlanContext {
  now: number;
  specCommit: string;
  /** The object store outputs go to (`file:///…`, `s3://…`); absent without a Storage spec. */
  storeUrl?: string;
}

export interface DagPlan {
  /** The next status; the same object as `current` when nothing changed. */
  doc: DagStatusDoc | undefined;
  summary?: string;
  /** The child Runs that should exist now, with their specs. */
  children: DesiredRun[];
  /** Outputs (`run/output`) the planner needs to know are complete before it can go on. */
  unknownOutputs: string[];
}

/** Child run name of a node. */
export const childName = (dag: string, node: string): string => `${dag}.${node}`;

/** Labels every child carries, for `-l` selectors. */
export const DAG_LABEL = 'adventuretime.dev/dag';
export const NODE_LABEL = 'adventuretime.dev/node';

/** The child Run spec of a node: the DAG's defaults under the node's own fields. */
export function nodeRunSpec(
  dag: string,
  spec: DagSpec,
  node: DagNode,
  storeUrl: string | undefined,
): RunSpec {
  const d = spec.defaults ?? {};
  const run: RunSpec = { ...node.run };
  if (d.code && !run.code) run.code = d.code;
  if (d.backendSelector && !run.backendSelector) run.backendSelector = d.backendSelector;
  if (d.policy || node.retries !== undefined)
    run.policy = {
      ...(d.policy ?? {}),
      ...(run.policy ?? {}),
      ...(node.retries !== undefined ? { maxAttempts: node.retries + 1 } : {}),
    };
  const env: Record<string, string> = { ...(d.env ?? {}), ...(run.env ?? {}) };
  const inputs = Object.entries(node.inputs ?? {});
  if (inputs.length) {
    const refs: Record<string, { run: string; output: string }> = {};
    for (const [name, ref] of inputs) {
      const [src, , output] = ref.split('.');
      refs[name] = { run: childName(dag, src!), output: output! };
      if (storeUrl)
        env[`ADV_INPUT_${name}`] =
          `${storeUrl.replace(/\/$/, '')}/runs/${childName(dag, src!)}/outputs/${output}/`;
    }
    env.ADV_INPUTS = canonicalJson(refs);
  }
  const outputs = Object.keys(node.outputs ?? {});
  if (outputs.length) env.ADV_OUTPUTS = outputs.join(',');
  if (Object.keys(env).length) run.env = env;
  if (spec.suspend) run.suspend = true;
  return run;
}

/** Node ids in an order where every node comes after what it needs (the spec is acyclic). */
const topoCache = new Map<string, string[]>();
function topoOrder(gen: string, nodes: readonly DagNode[]): string[] {
  const hit = topoCache.get(gen);
  if (hit) return hit;
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const out: string[] = [];
  const seen = new Set<string>();
  const visit = (id: string) => {
    if (seen.has(id)) return;
    seen.add(id);
    for (const d of byId.get(id)?.needs ?? []) visit(d);
    out.push(id);
  };
  for (const n of nodes) visit(n.id);
  if (topoCache.size > 100) topoCache.clear();
  topoCache.set(gen, out);
  return out;
}

const LIVE = new Set<string>([Phase.Pending, Phase.Scheduling, Phase.Queued, Phase.Running]);
const BLOCKING = new Set<string>([Phase.Failed, Phase.Cancelled, 'Skipped']);

export function planDag(
  input: {
    name: string;
    desired?: DesiredDag;
    invalid?: InvalidDag;
    current?: DagStatusDoc;
    /** The status the commit message compares against (default `current`): the one before this pass. */
    since?: DagStatusDoc;
    /** The child Run's status, by child name. */
    child: (name: string) => RunStatusDoc | undefined;
    /** Whether `run/output` has a manifest: true, false, or undefined when not known yet. */
    outputReady: (key: string) => boolean | undefined;
  },
  ctx: DagPlanContext,
): DagPlan {
  const { name, invalid, current, child, outputReady } = input;
  const now = new Date(ctx.now).toISOString();
  // Shallow copies: nodes are rebuilt below, conditions are replaced (never mutated) by setCondition.
  const doc: DagStatusDoc = current
    ? { ...current, metadata: { ...current.metadata }, status: { ...current.status } }
    : {
        apiVersion: 'adventuretime.dev/v1alpha1',
        kind: 'DAGStatus',
        metadata: { name },
        status: { phase: Phase.Pending, createdAt: now, conditions: [], nodes: {} },
      };
  const st = doc.status;

  // An invalid spec acts on nothing new: the last valid one goes on (as a Run's does).
  let desired = input.desired;
  if (invalid) {
    markInvalid(st, invalid, now);
    if (!desired && doc.appliedSpec)
      desired = {
        name,
        spec: doc.appliedSpec,
        generation: st.observedGeneration ?? generationOf(doc.appliedSpec),
        file: invalid.file,
      };
  }
  if (!desired && invalid) {
    // Never valid yet: say so, create nothing.
    st.reason = Reason.SpecInvalid;
    st.message = 'the spec is invalid; see the Valid condition';
    return finish(current, doc, [], [], `dag/${name}: spec invalid (${invalid.file}:${invalid.line})`, ctx);
  }
  if (!desired) {
    // Removed from the branch: its children go with it (the Run planner cancels live ones).
    if (current && !TERMINAL_PHASES.has(st.phase)) {
      st.phase = Phase.Cancelled;
      st.reason = Reason.SpecDeleted;
      st.message = 'the DAG was removed from the watched branch; its live nodes are cancelled';
    }
    return finish(current, doc, [], [], `dag/${name}: ${st.phase} (spec deleted)`, ctx);
  }
  if (!invalid) {
    st.conditions = setCondition(
      st.conditions,
      { type: ConditionType.Valid, status: 'True', reason: 'Valid', message: '' },
      now,
    );
    if (st.observedGeneration !== desired.generation) {
      doc.appliedSpec = desired.spec;
      st.observedGeneration = desired.generation;
      st.specCommit = ctx.specCommit;
    }
    st.specFile = desired.file;
  }
  if (desired.labels) doc.metadata.labels = desired.labels;
  else delete doc.metadata.labels;

  const spec = desired.spec;
  const byId = new Map(spec.nodes.map((n) => [n.id, n]));
  const nodes: Record<string, DagNodeStatus> = {};
  const children: DesiredRun[] = [];
  const unknown: string[] = [];
  // Nodes come in dependency order, so "a node failed" is known for every node after it; failFast
  // looks at failures anywhere, so it is decided from the previous status as well.
  let failedSoFar = Object.values(st.nodes).some((n) => n.phase === Phase.Failed);
  let nodesChanged = !current;
  const anyFailed = () => failedSoFar;
  for (const id of topoOrder(desired.generation, spec.nodes)) {
    const node = byId.get(id)!;
    const run = childName(name, id);
    const cs = child(run);
    const prev = st.nodes[id];
    const needs = node.needs ?? [];
    const blockedBy = needs.find((d) => BLOCKING.has(nodes[d]!.phase));
    const waitingOn = needs.filter((d) => nodes[d]!.phase !== Phase.Succeeded);
    let exists = Boolean(cs);
    let ns: DagNodeStatus;
    if (!exists && blockedBy) {
      ns = {
        phase: 'Skipped',
        run,
        reason: 'UpstreamFailed',
        message: `${blockedBy} ${nodes[blockedBy]!.phase}`,
      };
    } else if (!exists && spec.failFast && anyFailed()) {
      ns = { phase: 'Skipped', run, reason: 'FailFast', message: 'another node failed and failFast is set' };
    } else if (!exists && waitingOn.length) {
      ns = {
        phase: 'Waiting',
        run,
        reason: 'WaitingForNeeds',
        message: `waiting for ${waitingOn.map((d) => `${d} (${nodes[d]!.phase})`).join(', ')}`,
      };
    } else if (!exists && spec.suspend) {
      ns = { phase: 'Waiting', run, reason: Reason.Suspended, message: 'the DAG is suspended' };
    } else if (!exists) {
      // Everything it needs succeeded: are the outputs it reads complete (manifest written)?
      const missing: string[] = [];
      for (const ref of Object.values(node.inputs ?? {})) {
        const [src, , output] = ref.split('.');
        const key = `${childName(name, src!)}/${output}`;
        const ready = ctx.storeUrl ? outputReady(key) : false;
        if (ready === undefined) unknown.push(key);
        if (!ready) missing.push(`${src}.outputs.${output}`);
      }
      if (missing.length) {
        ns = {
          phase: 'Waiting',
          run,
          reason: ctx.storeUrl ? 'WaitingForOutputs' : 'NoStorage',
          message: ctx.storeUrl
            ? `waiting for ${missing.join(', ')} (no manifest yet)`
            : `${missing.join(', ')} cannot be passed on: the specs repo has no Storage`,
        };
      } else {
        exists = true;
        ns = { phase: Phase.Pending, run, reason: 'Created', message: 'child run created' };
      }
    } else {
      const s = cs!.status;
      const last = s.attempts.at(-1);
      ns = {
        phase: s.phase,
        run,
        attempts: s.attempts.length,
        ...(s.reason ? { reason: s.reason } : {}),
        ...(s.message ? { message: s.message } : {}),
        ...(last?.startedAt ? { startedAt: s.attempts.find((a) => a.startedAt)!.startedAt! } : {}),
        ...(TERMINAL_PHASES.has(s.phase) && last?.finishedAt ? { finishedAt: last.finishedAt } : {}),
      };
    }
    nodes[id] = ns;
    if (exists) {
      // failFast: live siblings of a failure are cancelled (suspended) too.
      const stop = Boolean(spec.failFast && failedSoFar && LIVE.has(ns.phase));
      children.push(childRun(desired, node, ctx.storeUrl, stop));
    }
    if (prev && prev.phase === ns.phase && prev.attempts === ns.attempts) ns.since = prev.since;
    else ns.since = now;
    if (ns.phase === Phase.Failed) failedSoFar = true;
    // The same node as before is the same object: nothing to compare or write for it.
    if (prev && sameNode(prev, ns)) nodes[id] = prev;
    else nodesChanged = true;
  }
  if (current && Object.keys(current.status.nodes).length !== Object.keys(nodes).length) nodesChanged = true;
  st.nodes = nodes;

  // The DAG's own phase.
  const all = Object.values(nodes);
  const count = (p: string) => all.filter((n) => n.phase === p).length;
  const live = all.filter((n) => LIVE.has(n.phase)).length;
  const waiting = all.filter(
    (n) => n.phase === 'Waiting' && n.reason !== Reason.Suspended && n.reason !== 'NoStorage',
  ).length;
  const failed = count(Phase.Failed);
  st.counts = Object.fromEntries([...new Set(all.map((n) => n.phase))].sort().map((p) => [p, count(p)]));
  const ok = `${count(Phase.Succeeded)}/${all.length} nodes succeeded`;
  if (count(Phase.Succeeded) === all.length) set(doc, Phase.Succeeded, Reason.Completed, ok);
  else if (spec.suspend) set(doc, Phase.Cancelled, Reason.Suspended, `spec.suspend is true; ${ok}`);
  else if ((failed || count(Phase.Cancelled)) && !live && !waiting)
    set(
      doc,
      Phase.Failed,
      'NodesFailed',
      `${all.filter((n) => n.phase === Phase.Failed || n.phase === Phase.Cancelled).length} failed or cancelled; ${ok}`,
    );
  else if (live || all.some((n) => n.phase === Phase.Succeeded)) set(doc, Phase.Running, 'Running', ok);
  else set(doc, Phase.Pending, 'Pending', ok);

  // Which nodes moved, for the commit message.
  const moved = Object.entries(nodes)
    .filter(([id, n]) => (input.since ?? current)?.status.nodes[id]?.phase !== n.phase)
    .map(([id, n]) => `${id} ${n.phase}`);
  const head = `dag/${name}: ${st.phase} (${ok})`;
  const summary = moved.length
    ? `${head}; ${moved.slice(0, 10).join(', ')}${moved.length > 10 ? `, and ${moved.length - 10} more` : ''}`
    : head;
  if (current && !nodesChanged && sameShell(current, doc))
    return { doc: current, children, unknownOutputs: unknown };
  return { doc, summary, children, unknownOutputs: unknown };
}

/** Everything but the nodes (compared one by one above) and the applied spec (compared by generation). */
function sameShell(a: DagStatusDoc, b: DagStatusDoc): boolean {
  const shell = (d: DagStatusDoc) =>
    canonicalJson({ ...d, appliedSpec: undefined, status: { ...d.status, nodes: undefined } });
  return a.appliedSpec === b.appliedSpec && shell(a) === shell(b);
}

/** Child runs by DAG generation, store, node and stop flag: built and hashed once, not every pass. */
const childCache = new Map<string, DesiredRun>();
function childRun(
  desired: DesiredDag,
  node: DagNode,
  storeUrl: string | undefined,
  stop: boolean,
): DesiredRun {
  const key = `${desired.name}|${desired.generation}|${JSON.stringify(desired.labels ?? {})}|${desired.file}|${storeUrl ?? ''}|${node.id}|${stop}`;
  const hit = childCache.get(key);
  if (hit) return hit;
  const spec = nodeRunSpec(desired.name, desired.spec, node, storeUrl);
  if (stop) spec.suspend = true;
  const made: DesiredRun = {
    name: childName(desired.name, node.id),
    spec,
    generation: generationOf(spec),
    file: desired.file,
    owner: desired.name,
    labels: { ...(desired.labels ?? {}), [DAG_LABEL]: desired.name, [NODE_LABEL]: node.id },
  };
  if (childCache.size > 50_000) childCache.clear();
  childCache.set(key, made);
  return made;
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

function set(doc: DagStatusDoc, phase: Phase, reason: string, message: string): void {
  doc.status.phase = phase;
  doc.status.reason = reason;
  doc.status.message = message;
}

function finish(
  current: DagStatusDoc | undefined,
  doc: DagStatusDoc,
  children: DesiredRun[],
  unknownOutputs: string[],
  summary: string,
  _ctx: DagPlanContext,
): DagPlan {
  if (current && canonicalJson(current) === canonicalJson(doc))
    return { doc: current, children, unknownOutputs };
  return { doc, summary, children, unknownOutputs };
}
