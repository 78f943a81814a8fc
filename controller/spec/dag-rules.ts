/**
 * Rules of a DAG's graph: node ids that name child runs, needs that are known and form no cycle,
 * inputs read only from ancestors' declared outputs.
 */
import type { Collector, Path } from './rule-kit.js';
import type { Dag, RunSpec } from './schema.js';
import { closest } from './validate.js';

type DagNode = Dag['spec']['nodes'][number];

/** Node ids, needs (known, not itself, no cycle), inputs, and each node's run (by `runRules`). */
export function dagRules(
  c: Collector,
  dag: Dag,
  /** The rules of a node's run (rules.ts's, with the DAG wording). */
  runRules: (spec: RunSpec, base: Path) => void,
): void {
  const nodes = dag.spec.nodes;
  const firstIndex = nodeIdRules(c, dag);
  needsRules(c, nodes, firstIndex);
  const cycle = findCycle(nodes.map((n) => ({ id: n.id, needs: (n.needs ?? []).filter((d) => d !== n.id) })));
  if (cycle) {
    const at = firstIndex.get(cycle[0]!) ?? 0;
    c.error(
      'DagCycle',
      ['spec', 'nodes', at, 'needs'],
      `needs form a cycle: ${cycle.join(' → ')}`,
      'remove one of these needs so the graph has no loop',
    );
  }
  const ancestors = cycle ? undefined : ancestorSets(nodes);
  nodes.forEach((n, i) => {
    inputRules(c, nodes, i, ancestors);
    runRules(n.run, ['spec', 'nodes', i, 'run']);
  });
}

/**
 * Node ids are unique and short enough to name a child run (`<dag>.<id>`); returns the index
 * where each id is first declared.
 */
function nodeIdRules(c: Collector, dag: Dag): Map<string, number> {
  const firstIndex = new Map<string, number>();
  dag.spec.nodes.forEach((n, i) => {
    const prev = firstIndex.get(n.id);
    if (prev !== undefined) {
      c.error(
        'DuplicateNodeId',
        ['spec', 'nodes', i, 'id'],
        `node id "${n.id}" is used twice (first at spec.nodes[${prev}])`,
        'give every node its own id',
      );
    } else firstIndex.set(n.id, i);
    const child = `${dag.metadata.name}.${n.id}`;
    if (child.length > 63) {
      c.error(
        'ChildNameTooLong',
        ['spec', 'nodes', i, 'id'],
        `child run name "${child}" is ${child.length} characters, over the 63 a Run name may have`,
        'shorten the DAG name or the node id',
      );
    }
  });
  return firstIndex;
}

/** Every need names another node of the DAG. */
function needsRules(c: Collector, nodes: readonly DagNode[], firstIndex: Map<string, number>): void {
  const ids = [...firstIndex.keys()];
  nodes.forEach((n, i) =>
    (n.needs ?? []).forEach((dep, j) => {
      if (dep === n.id)
        c.error(
          'DagSelfNeed',
          ['spec', 'nodes', i, 'needs', j],
          `node "${n.id}" needs itself`,
          'remove it from its own needs',
        );
      else if (!firstIndex.has(dep)) {
        const guess = closest(dep, ids);
        c.error(
          'UnknownNeed',
          ['spec', 'nodes', i, 'needs', j],
          `node "${n.id}" needs "${dep}", which is not a node of this DAG`,
          guess ? `did you mean "${guess}"?` : `use one of: ${ids.join(', ')}`,
        );
      }
    }),
  );
}

/** A node's outputs: its own and its run's (both reach the child run as its outputs). */
const nodeOutputs = (n: DagNode): Record<string, unknown> => ({ ...n.run.outputs, ...n.outputs });

/**
 * Each input of node `i` is `<node>.outputs.<name>` of a node that declares that output and that
 * node `i` needs (directly or not), so the output exists before it starts. Without `ancestors`
 * (the needs have a cycle) the last check is skipped.
 */
function inputRules(
  c: Collector,
  nodes: readonly DagNode[],
  i: number,
  ancestors: Map<string, Set<string>> | undefined,
): void {
  const n = nodes[i]!;
  for (const [name, ref] of Object.entries(n.inputs ?? {})) {
    const [srcId, , output] = ref.split('.');
    const path = ['spec', 'nodes', i, 'inputs', name];
    const src = nodes.find((m) => m.id === srcId);
    if (!src) {
      c.error(
        'UnknownInput',
        path,
        `input "${name}" refers to node "${srcId}", which is not in this DAG`,
        'refer to "<node>.outputs.<name>" of an existing node',
      );
    } else if (!(output! in nodeOutputs(src))) {
      const declared = Object.keys(nodeOutputs(src));
      const guess = closest(output!, declared);
      c.error(
        'UnknownOutput',
        path,
        `node "${srcId}" declares no output "${output}"${declared.length ? ` (it has: ${declared.join(', ')})` : ''}`,
        guess
          ? `did you mean "${srcId}.outputs.${guess}"?`
          : `declare it under the "${srcId}" node's outputs`,
      );
    } else if (ancestors && !ancestors.get(n.id)?.has(srcId!)) {
      c.error(
        'InputNotNeeded',
        path,
        `input "${name}" comes from "${srcId}", which node "${n.id}" does not need`,
        `add "${srcId}" to the needs of "${n.id}" so its output exists before it starts`,
      );
    }
  }
}

/** Returns one cycle as a list of ids that starts and ends with the same id, or undefined. */
export function findCycle(nodes: readonly { id: string; needs: readonly string[] }[]): string[] | undefined {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const state = new Map<string, 1 | 2>(); // 1 = on the stack, 2 = done
  const stack: string[] = [];
  const visit = (id: string): string[] | undefined => {
    state.set(id, 1);
    stack.push(id);
    for (const dep of byId.get(id)?.needs ?? []) {
      if (!byId.has(dep)) continue;
      const s = state.get(dep);
      if (s === 1) return [...stack.slice(stack.indexOf(dep)), dep];
      if (s === undefined) {
        const found = visit(dep);
        if (found) return found;
      }
    }
    stack.pop();
    state.set(id, 2);
    return undefined;
  };
  for (const n of nodes) {
    if (state.has(n.id)) continue;
    const found = visit(n.id);
    if (found) return found.reverse();
  }
  return undefined;
}

function ancestorSets(nodes: Dag['spec']['nodes']): Map<string, Set<string>> {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const memo = new Map<string, Set<string>>();
  const get = (id: string): Set<string> => {
    const cached = memo.get(id);
    if (cached) return cached;
    const set = new Set<string>();
    memo.set(id, set);
    for (const dep of byId.get(id)?.needs ?? []) {
      if (!byId.has(dep)) continue;
      set.add(dep);
      for (const a of get(dep)) set.add(a);
    }
    return set;
  };
  for (const n of nodes) get(n.id);
  return memo;
}
