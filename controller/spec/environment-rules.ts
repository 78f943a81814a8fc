/**
 * The rules of Environments and of the references to them: `name` or `name@version`, versions
 * unique per name, and the `{{ NAME }}` / `{{ secrets.NAME }}` names of setup steps and variables.
 *
 * The controller never substitutes a template: it checks at load that every name is one the job
 * will have (a contract variable, the run's `env`, its `secrets`), and `adv exec` substitutes the
 * values on the host. Names of an Environment are checked against every Run that uses it (an
 * Environment alone cannot know a run's variables), and reported at the Run's `environment`.
 */
import { JOB_BASE_ENV } from '../backends/job-env.js';
import type { Diagnostic } from './diagnostic.js';
import { formatPath } from './diagnostic.js';
import type { Locator } from './parse.js';
import { ENVIRONMENT_REF, type EnvironmentSpec, type RunSpec } from './schema.js';
import { closest } from './validate.js';

type Path = (string | number)[];
type Located = Omit<Diagnostic, 'file'>;
type Report = (code: string, path: Path, message: string, hint?: string, key?: boolean) => void;

/**
 * A template: `{{ NAME }}` or `{{ secrets.NAME }}`, spaces optional. Any other `{{ … }}` (a Go
 * template in a `docker inspect -f` step) is not one and is passed on untouched.
 */
export const TEMPLATE_RE = /\{\{\s*(secrets\.)?([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

/**
 * The variables every job has when its setup runs (`adv exec` sets them, or the job's base
 * environment): what a template may name besides the run's own `env` and `secrets`.
 */
export const CONTRACT_VARIABLES: readonly string[] = [
  'ADV_RUN',
  'ADV_ATTEMPT',
  'ADV_JOB_DIR',
  'ADV_CKPT_DIR',
  'ADV_ARTIFACT_DIR',
  'ADV_CACHE_DIR',
  'ADV_PROCESS_ID',
  'ADV_NUM_PROCESSES',
  'ADV_LOCAL_PROCESS_ID',
  'ADV_LOCAL_PROCESS_COUNT',
  'ADV_LOCAL_DEVICE_COUNT',
  'ADV_TRACKING_ID',
  ...JOB_BASE_ENV,
];

/** One template in a text. */
export interface TemplateName {
  name: string;
  /** `{{ secrets.NAME }}`. */
  secret: boolean;
}

/** The templates of a text, in order. */
export function templateNames(text: string): TemplateName[] {
  return [...text.matchAll(TEMPLATE_RE)].map((m) => ({ name: m[2]!, secret: m[1] !== undefined }));
}

/** `cuda12` → `{name: 'cuda12'}`; `cuda12@2` → `{name: 'cuda12', version: 2}`; undefined when malformed. */
export function parseEnvironmentRef(ref: string): { name: string; version?: number } | undefined {
  const m = new RegExp(ENVIRONMENT_REF).exec(ref);
  if (!m) return undefined;
  return m[4] ? { name: m[1]!, version: Number(m[4]) } : { name: m[1]! };
}

/** What a template of a run's steps may name: the names the job has, and its secrets. */
export interface TemplateScope {
  /** Variables: contract variables, the run's env and secret names (and a Backend's passEnv). */
  variables: readonly string[];
  /** `{{ secrets.NAME }}`: the secrets the run lists. Undefined: no secret may be named here. */
  secrets: readonly string[] | undefined;
}

/** The scope of a run's templates. */
export function runScope(spec: Pick<RunSpec, 'env' | 'secrets'>): TemplateScope {
  const secrets = spec.secrets ?? [];
  return { variables: [...CONTRACT_VARIABLES, ...Object.keys(spec.env ?? {}), ...secrets], secrets };
}

/** Why a template is not in `scope`, with a fix; undefined when it is. */
export function templateProblem(
  t: TemplateName,
  scope: TemplateScope,
): { message: string; hint: string } | undefined {
  const written = `{{ ${t.secret ? 'secrets.' : ''}${t.name} }}`;
  if (t.secret) {
    if (!scope.secrets)
      return {
        message: `${written} names a secret, but a Backend's steps run for every run and have none`,
        hint: 'move the step to the Environment or the Run that lists the secret',
      };
    if (scope.secrets.includes(t.name)) return undefined;
    const guess = closest(t.name, scope.secrets);
    return {
      message: `${written} names secret "${t.name}", which the run does not list in spec.secrets`,
      hint: guess ? `did you mean "{{ secrets.${guess} }}"?` : `add "${t.name}" to the run's spec.secrets`,
    };
  }
  if (scope.variables.includes(t.name)) return undefined;
  const guess = closest(t.name, scope.variables);
  return {
    message: `${written} names "${t.name}", which is not a variable of the job (a contract variable such as ADV_RUN, or the run's env and secrets)`,
    hint: guess
      ? `did you mean "{{ ${guess} }}"?`
      : `add "${t.name}" to the run's spec.env, or use a contract variable (${CONTRACT_VARIABLES.slice(0, 4).join(', ')}, …)`,
  };
}

/** Checks the templates of `texts` (each with its path) against `scope`. */
export function templateRules(report: Report, texts: readonly [Path, string][], scope: TemplateScope): void {
  for (const [path, text] of texts)
    for (const t of templateNames(text)) {
      const problem = templateProblem(t, scope);
      if (problem) report('UnknownTemplateName', path, problem.message, problem.hint);
    }
}

/** The steps and variables of an Environment that may hold templates, with their paths. */
export function environmentTexts(spec: EnvironmentSpec): [Path, string][] {
  return [
    ...(spec.setup ?? []).map((s, i): [Path, string] => [['spec', 'setup', i], s]),
    ...Object.entries(spec.env ?? {}).map(([k, v]): [Path, string] => [['spec', 'env', k], v]),
  ];
}

/** A template an Environment holds, with where it is written (checked against the Runs that use it). */
export interface TemplateRef extends TemplateName {
  path: string;
  line: number;
}

export function templateRefsOf(spec: EnvironmentSpec, loc: Locator): TemplateRef[] {
  return environmentTexts(spec).flatMap(([path, text]) =>
    templateNames(text).map((t) => ({ ...t, path: formatPath(path), line: loc.at(path).line })),
  );
}

/** A located `name` / `name@N` reference of a Run (or a DAG node's run) to a versioned kind. */
export interface VersionedRef {
  ref: string;
  name: string;
  version?: number;
  path: string;
  line: number;
  column: number;
}

/** A reference of a Run (or a DAG node's run) to an Environment, located, with its template scope. */
export interface EnvironmentRef extends VersionedRef {
  scope: TemplateScope;
}

/** Every Environment a Run or DAG names, with where. */
export function environmentRefsOf(specs: readonly [Path, RunSpec][], loc: Locator): EnvironmentRef[] {
  const refs: EnvironmentRef[] = [];
  for (const [base, spec] of specs) {
    if (!spec.environment) continue;
    const parsed = parseEnvironmentRef(spec.environment);
    if (!parsed) continue;
    const path = [...base, 'environment'];
    refs.push({
      ref: spec.environment,
      ...parsed,
      path: formatPath(path),
      ...loc.at(path),
      scope: runScope(spec),
    });
  }
  return refs;
}

/** An Environment document as the cross-file rules see it. */
export interface EnvironmentDoc {
  file: string;
  name: string;
  version: number;
  line: number;
  /** Valid on its own and not duplicated. */
  usable: boolean;
  templates: readonly TemplateRef[];
}

/**
 * The Environment a reference resolves to among `docs` (every Environment document of the repo),
 * or the diagnostic that says why none does.
 */
export function resolveRef(
  r: EnvironmentRef,
  docs: readonly EnvironmentDoc[],
): { doc: EnvironmentDoc } | { problem: Omit<Located, 'severity' | 'line' | 'column' | 'path'> } {
  const sameName = docs.filter((d) => d.name === r.name);
  if (!sameName.length) {
    const names = [...new Set(docs.map((d) => d.name))].sort();
    const guess = closest(r.name, names);
    return {
      problem: {
        code: 'UnknownEnvironment',
        message: `Environment "${r.name}" is not defined in this repo`,
        hint: guess
          ? `did you mean "${r.version ? `${guess}@${r.version}` : guess}"?`
          : names.length
            ? `use one of: ${names.join(', ')}`
            : 'add an Environment spec (e.g. environments/cuda12.yaml with kind: Environment)',
      },
    };
  }
  const versions = [...new Set(sameName.map((d) => d.version))].sort((a, b) => a - b);
  const version = r.version ?? versions.at(-1)!;
  const chosen = sameName.filter((d) => d.version === version);
  if (!chosen.length)
    return {
      problem: {
        code: 'UnknownEnvironment',
        message: `Environment "${r.name}" has no version ${version} (versions: ${versions.join(', ')})`,
        hint: `use "${r.name}@${versions.at(-1)!}", or "${r.name}" for the newest`,
      },
    };
  const usable = chosen.filter((d) => d.usable);
  if (usable.length !== 1)
    return {
      problem: {
        code: 'EnvironmentInvalid',
        message: `Environment ${r.name}@${version} at ${chosen.map((d) => `${d.file}:${d.line}`).join(', ')} is invalid, so this run cannot start`,
        hint: 'fix the Environment (adv validate shows its errors)',
      },
    };
  return { doc: usable[0]! };
}

/**
 * Per-document rules of an Environment: no reserved variable, and what it adds to the job's
 * environment (`ADV_SETUP`) fits one variable.
 */
export function environmentRules(
  report: Report,
  spec: EnvironmentSpec,
  fits: (path: Path, text: string) => void,
): void {
  for (const name of Object.keys(spec.env ?? {}))
    if (name.startsWith('ADV_'))
      report(
        'ReservedEnv',
        ['spec', 'env', name],
        `"${name}" is reserved for AdventureTime`,
        'rename it (names starting with ADV_ are set by adv exec)',
        true,
      );
  for (const [path, text] of environmentTexts(spec)) fits(path, text);
}
