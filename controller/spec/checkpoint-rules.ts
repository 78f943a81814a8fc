/**
 * A cross-file rule: a Run (or DAG node) that names a checkpoint mode no backend it may use can
 * offer is an error at its `checkpoint.mode`, found before any push reaches the controller. What
 * "may use" means is the solver's: `order` (else every Backend), within `allowed`, minus
 * `forbidden`; what a Backend offers is its descriptor's (`checkpoint-mode.ts`). Backends the
 * operator declares elsewhere are known by name only: nothing is said about them.
 */
import { descriptorFor } from '../backends/registry.js';
import { declaredMode, modeRefusal } from '../backends/checkpoint-mode.js';
import { ONE_HOST_TRAITS, type BackendList } from '../backends/types.js';
import type { Diagnostic } from './diagnostic.js';
import { formatPath } from './diagnostic.js';
import type { Locator } from './parse.js';
import type { Backend, Dag, Run, RunSpec, SpecObject } from './schema.js';

/** Where a Run or a DAG node declares a checkpoint mode: `node` is the DAG node's index. */
export interface ModeRef {
  node?: number;
  path: string;
  line: number;
  column: number;
}

/** Every declared `checkpoint.mode` other than `auto` of a Run or DAG, located. */
export function checkpointModeRefsOf(obj: SpecObject, loc: Locator): ModeRef[] {
  const at = (path: (string | number)[], node?: number): ModeRef => ({
    ...(node !== undefined ? { node } : {}),
    path: formatPath(path),
    ...loc.at(path),
  });
  if (obj.kind === 'Run') {
    const spec = (obj as Run).spec;
    return declaredMode(spec) === 'auto' ? [] : [at(['spec', 'checkpoint', 'mode'])];
  }
  if (obj.kind !== 'DAG') return [];
  return (obj as Dag).spec.nodes.flatMap((n, i) =>
    declaredMode(n.run) === 'auto' ? [] : [at(['spec', 'nodes', i, 'run', 'checkpoint', 'mode'], i)],
  );
}

/** The spec the solver sees for a ref: a DAG node's run with the DAG's default selector. */
function specOf(obj: SpecObject, ref: ModeRef): RunSpec {
  if (ref.node === undefined) return (obj as Run).spec;
  const dag = obj as Dag;
  const run = dag.spec.nodes[ref.node]!.run;
  return { ...run, backendSelector: run.backendSelector ?? dag.spec.defaults?.backendSelector };
}

/** The Backends (of `defined`) the solver may place `spec` on, in its order. */
function candidates(spec: RunSpec, defined: ReadonlyMap<string, Backend>): [string, Backend][] {
  const sel = spec.backendSelector ?? {};
  const names = sel.order?.length ? sel.order : [...defined.keys()].sort();
  return names.flatMap((n) => {
    const b = defined.get(n);
    if (!b || (sel.allowed?.length && !sel.allowed.includes(n)) || sel.forbidden?.includes(n)) return [];
    return [[n, b] as [string, Backend]];
  });
}

/**
 * For each located mode no candidate Backend offers: a diagnostic at the mode, naming every
 * candidate's refusal, the first one's fix as the hint. `defined`: the repo's valid Backends, or
 * undefined when Backends come from the operator (then nothing is known of what they offer).
 */
export function checkpointModeDiagnostics(
  file: string,
  obj: SpecObject,
  refs: readonly ModeRef[],
  defined: ReadonlyMap<string, Backend> | undefined,
  backends: BackendList,
): Diagnostic[] {
  if (!defined) return [];
  const out: Diagnostic[] = [];
  for (const ref of refs) {
    const spec = specOf(obj, ref);
    const list = candidates(spec, defined);
    if (!list.length) continue;
    const refusals: string[] = [];
    for (const [name, b] of list) {
      const traits = descriptorFor(b.spec.type, backends)?.traits ?? ONE_HOST_TRAITS;
      const why = modeRefusal(spec, traits, b.spec);
      if (!why) break;
      refusals.push(`${name} ${why}`);
    }
    if (refusals.length < list.length) continue;
    const mode = declaredMode(spec);
    out.push({
      severity: 'error',
      code: 'CheckpointModeUnavailable',
      file,
      line: ref.line,
      column: ref.column,
      path: ref.path,
      message: `no backend this run may use offers checkpoint.mode ${mode}: ${refusals.join('; ')}`,
      hint: refusals[0]!.replace(/^.*?\): /, ''),
    });
  }
  return out;
}
