/**
 * From loaded spec objects to what the planners take: the same for the controller and `adv plan`.
 */
import type { InvalidDocument, LoadedObject } from '../spec/loader.js';
import type { Dag, Run } from '../spec/schema.js';
import type { DesiredDag } from './dag-plan.js';
import { generationOf, type DesiredRun, type InvalidRun } from './run-plan.js';

export function desiredRun(o: LoadedObject): DesiredRun {
  const run = o.object as Run;
  return {
    name: o.name,
    spec: run.spec,
    generation: generationOf(run.spec),
    file: o.file,
    ...(run.metadata.labels ? { labels: run.metadata.labels } : {}),
    ...(run.metadata.annotations ? { annotations: run.metadata.annotations } : {}),
  };
}

export function desiredDag(o: LoadedObject): DesiredDag {
  const dag = o.object as Dag;
  return {
    name: o.name,
    spec: dag.spec,
    generation: generationOf(dag.spec),
    file: o.file,
    ...(dag.metadata.labels ? { labels: dag.metadata.labels } : {}),
  };
}

/** A document that failed validation, as the planners report it: its first error, located. */
export function invalidObject(d: InvalidDocument & { name: string }): InvalidRun {
  const first = d.diagnostics.find((x) => x.severity === 'error') ?? d.diagnostics[0];
  return {
    name: d.name,
    file: d.file,
    line: first?.line ?? d.line,
    column: first?.column ?? 1,
    message: first
      ? `${first.path ? first.path + ': ' : ''}${first.message}${first.hint ? ` (fix: ${first.hint})` : ''}`
      : 'invalid',
  };
}
