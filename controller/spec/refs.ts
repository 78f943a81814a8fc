/**
 * The summaries the cross-file rules work on: each reference to a backend or a secret, and each
 * child Run a DAG makes, kept with where it is written. The loader keeps these per file, so a
 * reload of one file re-runs the cross-file rules cheaply.
 */
import { formatPath } from './diagnostic.js';
import type { Locator } from './parse.js';
import type { Path } from './rule-kit.js';
import type { Backend, Dag, Run, RunSpec, SpecObject, Sweep } from './schema.js';

/** A reference from one object to a backend, kept with its position for cross-file checks. */
export interface BackendRef {
  name: string;
  path: string;
  line: number;
  column: number;
}

/** The child Run a DAG node makes (`<dag>.<node>`), kept with where the node's id is written. */
export interface ChildRef {
  name: string;
  node: string;
  path: string;
  line: number;
  column: number;
}

/** Every backend name an object refers to, with where it is written. */
export function backendRefsOf(obj: SpecObject, loc: Locator): BackendRef[] {
  const refs: BackendRef[] = [];
  const fromSelector = (sel: RunSpec['backendSelector'], base: Path): void => {
    if (!sel) return;
    for (const field of ['order', 'allowed', 'forbidden'] as const) {
      (sel[field] ?? []).forEach((name, i) => {
        const path = [...base, 'backendSelector', field, i];
        refs.push({ name, path: formatPath(path), ...loc.at(path) });
      });
    }
  };
  if (obj.kind === 'Run') fromSelector((obj as Run).spec.backendSelector, ['spec']);
  if (obj.kind === 'DAG') {
    const dag = obj as Dag;
    fromSelector(dag.spec.defaults?.backendSelector, ['spec', 'defaults']);
    dag.spec.nodes.forEach((n, i) => fromSelector(n.run.backendSelector, ['spec', 'nodes', i, 'run']));
  }
  if (obj.kind === 'Sweep') fromSelector((obj as Sweep).spec.template.backendSelector, ['spec', 'template']);
  return refs;
}

/**
 * Every secret a Backend names: the value of each `*Secret` field of its spec (`vastai.apiKeySecret`,
 * `agent.tokenSecret`, and whatever a backend type adds), with where it is written.
 */
export function backendSecretRefsOf(b: Backend, loc: Locator): BackendRef[] {
  const refs: BackendRef[] = [];
  const walk = (value: unknown, path: Path): void => {
    if (!value || typeof value !== 'object' || Array.isArray(value)) return;
    for (const [k, v] of Object.entries(value)) {
      if (typeof v === 'string' && k.endsWith('Secret'))
        refs.push({ name: v, path: formatPath([...path, k]), ...loc.at([...path, k]) });
      else walk(v, [...path, k]);
    }
  };
  walk(b.spec, ['spec']);
  return refs;
}

/** The child Runs of a DAG, one per node, each at its node's `id`. */
export function childRefsOf(dag: Dag, loc: Locator): ChildRef[] {
  return dag.spec.nodes.map((n, i) => {
    const path = ['spec', 'nodes', i, 'id'];
    return { name: `${dag.metadata.name}.${n.id}`, node: n.id, path: formatPath(path), ...loc.at(path) };
  });
}
