/**
 * From loaded spec objects to what the planners take: the same for the controller and `adv plan`.
 */
import type { CodeRepoState, CodeRepos } from '../git/code-repos.js';
import type { GitPort } from '../git/port.js';
import { TERMINAL_PHASES } from '../status/phases.js';
import type { RunStatus } from '../status/types.js';
import type { InvalidDocument, LoadedObject } from '../spec/loader.js';
import { withResolvedInputs, type DatasetIndex } from '../spec/datasets.js';
import { resolvedRef, type EnvironmentIndex } from '../spec/environments.js';
import type { DagSpec, Run, RunSpec, SweepSpec } from '../spec/schema.js';
import type { DesiredDag } from './dag-plan.js';
import type { DesiredSweep } from './sweep-plan.js';
import { generationOf, isLiveAttempt, type DesiredRun, type InvalidRun } from './run-plan.js';

/**
 * A Run as the planners see it. Its `environment` is resolved against `environments` and written
 * `name@version#digest` (`spec/environments.ts`): a new version of an Environment the run names
 * without a version, or an edit of the version it uses, changes the run's spec and generation,
 * like a change of its own `setup` or `env` (an immutable field: `policy.onSpecChange` decides).
 * A run pinned to `name@1` does not change when `name@2` is added. The datasets of its `inputs`
 * are resolved the same way against `datasets` (`spec/datasets.ts`).
 */
export function desiredRun(
  o: LoadedObject,
  environments?: EnvironmentIndex,
  datasets?: DatasetIndex,
): DesiredRun {
  const run = o.object as Run;
  const spec = withResolvedInputs(withResolvedEnvironment(run.spec, environments), datasets);
  return {
    name: o.name,
    spec,
    generation: generationOf(spec),
    file: o.file,
    ...(run.metadata.labels ? { labels: run.metadata.labels } : {}),
    ...(run.metadata.annotations ? { annotations: run.metadata.annotations } : {}),
  };
}

export const desiredDag = (o: LoadedObject): DesiredDag => desiredOwner<DagSpec>(o);

export const desiredSweep = (o: LoadedObject): DesiredSweep => desiredOwner<SweepSpec>(o);

/** A DAG or a Sweep as its planner takes it: the spec, its generation, where it is, its labels. */
function desiredOwner<S>(o: LoadedObject): {
  name: string;
  spec: S;
  generation: string;
  file: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
} {
  const obj = o.object as unknown as {
    spec: S;
    metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  };
  return {
    name: o.name,
    spec: obj.spec,
    generation: generationOf(obj.spec),
    file: o.file,
    ...(obj.metadata.labels ? { labels: obj.metadata.labels } : {}),
    // `adv retry dag` is an annotation: the DAG planner passes it to its failed children.
    ...(obj.metadata.annotations ? { annotations: obj.metadata.annotations } : {}),
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
 * `code.ref` → commit for the runs that name one in the specs repo (not `code.repo`: see
 * `resolveCodeRepos`): the remote-tracking branch first in a clone of a remote repo (else the
 * local branch), then whatever git makes of the name (a tag, a commit).
 * A ref that resolves to nothing is left out: the Run planner says so in the run's status.
 */
export async function resolveCodeRefs(
  git: GitPort,
  specs: Iterable<RunSpec>,
  remote: boolean,
): Promise<Map<string, string>> {
  const refs = new Set<string>();
  for (const s of specs) if (s.code?.ref && !s.code.repo) refs.add(s.code.ref);
  const out = new Map<string, string>();
  for (const ref of refs) {
    const oid =
      (await git.resolveRef(remote ? `refs/remotes/origin/${ref}` : `refs/heads/${ref}`)) ??
      (await git.resolveRef(ref));
    if (oid) out.set(ref, oid);
  }
  return out;
}

/** What `resolveCodeRepos` asks of the code repositories (`git/code-repos.ts`). */
export type CodeRepoStates = Pick<CodeRepos, 'state'>;

/**
 * Run name → where its code from another repository stands, for the runs with `code.repo` that
 * may start an attempt now (no status yet, or no live attempt and not ended); `pinned`: the
 * commit their first attempt took. Never waits on the network: fetches run in the background.
 */
export async function resolveCodeRepos(
  repos: CodeRepoStates,
  runs: Iterable<{ name: string; spec: RunSpec; status?: RunStatus | undefined }>,
  head: string,
): Promise<Map<string, CodeRepoState>> {
  const out = new Map<string, CodeRepoState>();
  for (const { name, spec, status } of runs) {
    if (!spec.code?.repo) continue;
    if (status && (TERMINAL_PHASES.has(status.phase) || isLiveAttempt(status.attempts.at(-1)))) continue;
    out.set(name, await repos.state(name, { ...spec.code, repo: spec.code.repo }, head, status?.codeCommit));
  }
  return out;
}
