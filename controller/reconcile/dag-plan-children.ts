/**
 * A DAG's child Runs: their names, labels and specs (the DAG's defaults under each node's own
 * fields), and the caches that keep the DAG planner from rebuilding and rehashing them, and from
 * sorting the nodes again, on every pass.
 */
import type { DagNode, DagSpec, RunSpec } from '../spec/schema.js';
import { canonicalJson, generationOf, RETRY_ANNOTATION, type DesiredRun } from './run-plan-model.js';

/** Child run name of a node. */
export const childName = (dag: string, node: string): string => `${dag}.${node}`;

/** Labels every child carries, for `-l` selectors. */
export const DAG_LABEL = 'adventuretime.dev/dag';
/** The node a child run was made for (with DAG_LABEL). */
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
  const env: Record<string, string> = { ...(d.env ?? {}), ...(run.env ?? {}), ...ioEnv(dag, node, storeUrl) };
  if (Object.keys(env).length) run.env = env;
  if (spec.suspend) run.suspend = true;
  return run;
}

/** `ADV_INPUT_<name>` (where each input is), `ADV_INPUTS` and `ADV_OUTPUTS`, for `adv exec`. */
function ioEnv(dag: string, node: DagNode, storeUrl: string | undefined): Record<string, string> {
  const env: Record<string, string> = {};
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
  return env;
}

/** A Map that forgets its least recently used entry beyond `max` entries. */
class LruMap<K, V> {
  private readonly map = new Map<K, V>();
  constructor(private readonly max: number) {}

  get size(): number {
    return this.map.size;
  }

  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      // Re-inserted: a Map iterates in insertion order, so the first key is the least recent.
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  set(key: K, v: V): void {
    this.map.delete(key);
    this.map.set(key, v);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as K);
  }
}

/** Bounds of DagPlanCaches: entries kept before the least recently used go. */
export interface DagPlanCacheLimits {
  /** Topological orders, one per DAG generation in use (default 1,000). */
  maxTopoOrders?: number;
  /** Child runs, one per node of each DAG generation and failFast state (default 50,000). */
  maxChildRuns?: number;
}

/**
 * What `planDag` keeps between calls: node orders by DAG generation, and child Runs by what they
 * are built from. One per controller: the controller relies on an unchanged child being the same
 * object as before. LRU-bounded, so generations no longer planned age out of a long-running
 * controller instead of piling up.
 */
export class DagPlanCaches {
  private readonly topo: LruMap<string, string[]>;
  private readonly childRuns: LruMap<string, DesiredRun>;

  constructor(limits: DagPlanCacheLimits = {}) {
    this.topo = new LruMap(limits.maxTopoOrders ?? 1_000);
    this.childRuns = new LruMap(limits.maxChildRuns ?? 50_000);
  }

  /** Entries held now, for metrics and tests. */
  get size(): { topoOrders: number; childRuns: number } {
    return { topoOrders: this.topo.size, childRuns: this.childRuns.size };
  }

  /** Node ids in an order where every node comes after what it needs (the spec is acyclic). */
  topoOrder(generation: string, nodes: readonly DagNode[]): string[] {
    const hit = this.topo.get(generation);
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
    this.topo.set(generation, out);
    return out;
  }

  /**
   * The child Run of `node`; `stop` suspends it (failFast), `retry` (the DAG's retry annotation)
   * asks the Run planner for a new attempt of it. Built and hashed once, not every pass.
   */
  childRun(
    /** The DAG (a `DesiredDag`, by shape: the caches sit below the planner's model). */
    desired: {
      name: string;
      spec: DagSpec;
      labels?: Record<string, string>;
      generation: string;
      file: string;
    },
    node: DagNode,
    storeUrl: string | undefined,
    stop: boolean,
    retry?: string,
  ): DesiredRun {
    const key = `${desired.name}|${desired.generation}|${JSON.stringify(desired.labels ?? {})}|${desired.file}|${storeUrl ?? ''}|${node.id}|${stop}|${retry ?? ''}`;
    const hit = this.childRuns.get(key);
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
      ...(retry ? { annotations: { [RETRY_ANNOTATION]: retry } } : {}),
    };
    this.childRuns.set(key, made);
    return made;
  }
}
