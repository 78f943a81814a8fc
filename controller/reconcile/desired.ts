/**
 * From loaded spec objects to what the planners take: the same for the controller and `adv plan`.
 */
import type { GitPort } from '../git/port.js';
import type { InvalidDocument, LoadedObject } from '../spec/loader.js';
import { resolvedRef, type EnvironmentIndex } from '../spec/environments.js';
import type { Dag, Run, RunSpec } from '../spec/schema.js';
import type { DesiredDag } from './dag-plan.js';
import { generationOf, type DesiredRun, type InvalidRun } from './run-plan.js';

/**
 * A Run as the planners see it. Its `environment` is resolved against `environments` and written
 * `name@version#digest` (`spec/environments.ts`): a new version of an Environment the run names
 * without a version, or an edit of the version it uses, changes the run's spec and generation,
 * like a change of its own `setup` or `env` (an immutable field: `policy.onSpecChange` decides).
 * A run pinned to `name@1` does not change when `name@2` is added.
 */
export function desiredRun(o: LoadedObject, environments?: EnvironmentIndex): DesiredRun {
  const run = o.object as Run;
  const spec = withResolvedEnvironment(run.spec, environments);
  return {
    name: o.name,
    spec,
    generation: generationOf(spec),
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

/** The spec with its Environment reference resolved; the same object when there is none to resolve. */
export function withResolvedEnvironment(spec: RunSpec, environments: EnvironmentIndex | undefined): RunSpec {
  const resolved = spec.environment ? environments?.resolve(spec.environment) : undefined;
  return resolved ? { ...spec, environment: resolvedRef(resolved) } : spec;
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

/**
 * `code.ref` → commit for the runs that name one: the remote-tracking branch first in a clone of a
 * remote repo (else the local branch), then whatever git makes of the name (a tag, a commit).
 * A ref that resolves to nothing is left out: the Run planner says so in the run's status.
 */
export async function resolveCodeRefs(
  git: GitPort,
  specs: Iterable<RunSpec>,
  remote: boolean,
): Promise<Map<string, string>> {
  const refs = new Set<string>();
  for (const s of specs) if (s.code?.ref) refs.add(s.code.ref);
  const out = new Map<string, string>();
  for (const ref of refs) {
    const oid =
      (await git.resolveRef(remote ? `refs/remotes/origin/${ref}` : `refs/heads/${ref}`)) ??
      (await git.resolveRef(ref));
    if (oid) out.set(ref, oid);
  }
  return out;
}
