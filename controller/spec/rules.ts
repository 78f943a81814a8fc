/**
 * Stage 3 of loading: semantic rules the schema cannot say. Per-document rules see one validated
 * object; cross-file rules (duplicate names, references to backends) see the whole repo and work
 * only on the small summaries the loader keeps, so a reload of one file re-runs them cheaply.
 */
import { BACKENDS } from '../backends/registry.js';
import type { BackendList } from '../backends/types.js';
import { formatPath } from './diagnostic.js';
import type { Locator } from './parse.js';
import { Collector, type Located, type Path } from './rule-kit.js';
import { dagRules } from './dag-rules.js';
import { dagInputRules, datasetDocRules, runInputRules } from './dataset-rules.js';
import { backendSecretRefsOf } from './refs.js';
import { parallelismRules } from './parallelism-rules.js';
import { CONTRACT_VARIABLES, environmentRules, runScope, templateRules } from './environment-rules.js';
import type {
  Backend,
  Dag,
  Dataset,
  Environment,
  Run,
  RunSpec,
  SpecObject,
  Storage,
  Sweep,
} from './schema.js';
import { sweepRules } from './sweep-rules.js';
import { codeRepoUrlProblem } from '../git/code-repo-url.js';
import { alertRules, providerRules } from '../notify/rules.js';
import type { Alert, Provider } from './schema.js';
import { MAX_ARG_BYTES } from '../../runtime/exec-limits.js';

/** Runs the per-document rules for a schema-valid object (Backends by the types of `backends`). */
export function documentRules(obj: SpecObject, loc: Locator, backends: BackendList = BACKENDS): Located[] {
  const c = new Collector(loc);
  switch (obj.kind) {
    case 'Run':
      runSpecRules(c, (obj as Run).spec, ['spec']);
      break;
    case 'DAG':
      dagRules(c, obj as Dag, (spec, base) => runSpecRules(c, spec, base, { inDag: true }));
      dagDefaultsEnvRules(c, obj as Dag);
      dagInputRules(c, obj as Dag);
      break;
    case 'Dataset':
      datasetDocRules(c, obj as Dataset);
      break;
    case 'Backend':
      backendRules(c, obj as Backend, backends);
      backendSecretRules(c, obj as Backend, loc);
      nulRules(c, { ...(obj as Backend).spec, setup: undefined }, ['spec']);
      optionLikeRules(c, obj as Backend);
      backendSetupRules(c, obj as Backend);
      break;
    case 'Environment':
      environmentDocRules(c, obj as Environment);
      break;
    case 'Storage':
      storageRules(c, obj as Storage);
      nulRules(c, (obj as Storage).spec, ['spec']);
      break;
    case 'Alert':
      alertRules(c.error.bind(c), obj as Alert);
      break;
    case 'Provider':
      providerRules(c.error.bind(c), obj as Provider);
      break;
    case 'Sweep':
      runSpecRules(c, (obj as Sweep).spec.template, ['spec', 'template']);
      sweepRules(c.error.bind(c), obj as Sweep);
      break;
  }
  return c.out;
}

function isUnsafeRelPath(p: string): boolean {
  return p.startsWith('/') || p.split('/').includes('..');
}

/** A run's spec, on its own or as a DAG node's `run` (`inDag` changes only the wording). */
function runSpecRules(c: Collector, spec: RunSpec, base: Path, opts: { inDag?: boolean } = {}): void {
  commandRules(c, spec, base, opts.inDag);
  processArgumentRules(c, spec, base);
  pathRules(c, spec, base);
  reservedEnvRules(c, spec, base);
  secretRules(c, spec, base);
  derivedVariableRules(c, spec, base);
  nulRules(c, spec.code?.path, [...base, 'code', 'path']);
  selectorRules(c, spec.backendSelector, base);
  runInputRules(c, spec, base);
  if (spec.parallelism) parallelismRules(c, spec.parallelism, spec.resources ?? {}, [...base, 'parallelism']);
}

/** Exactly one of `command`, `entry` and `session` says what to run. */
function commandRules(c: Collector, spec: RunSpec, base: Path, inDag: boolean | undefined): void {
  if (spec.command !== undefined && spec.entry !== undefined) {
    c.error(
      'CommandAndEntry',
      [...base, 'entry'],
      'both "command" and "entry" are set',
      'keep one of them',
      true,
    );
  } else if (spec.session && (spec.command !== undefined || spec.entry !== undefined || inDag)) {
    c.error(
      'SessionWithCommand',
      [...base, 'session'],
      inDag
        ? 'a DAG node cannot be an interactive session'
        : `"session" and "${spec.command !== undefined ? 'command' : 'entry'}" are both set: a session runs Jupyter Lab or holds for shells, not a command`,
      inDag
        ? 'remove "session" from the node'
        : 'keep one of them (adv notebook and adv shell write session runs)',
      true,
    );
  } else if (spec.session && (spec.resources?.nodes ?? 1) > 1) {
    c.error(
      'SessionMultiNode',
      [...base, 'resources', 'nodes'],
      `a session runs on one node, not ${spec.resources!.nodes}`,
      'remove resources.nodes (a session holds one machine; run multi-node work as a Run)',
    );
  } else if (spec.command === undefined && spec.entry === undefined && !spec.session) {
    c.error(
      'MissingCommand',
      base,
      `${inDag ? 'node run' : 'run'} has neither "command" nor "entry"`,
      'add "command: python train.py" (or a list), or "entry: path/file.py:function"',
    );
  }
}

/**
 * Linux refuses one argument or one `NAME=value` over 128 KiB (MAX_ARG_STRLEN) and a whole argv +
 * environment over a few MiB (E2BIG); no process can get a NUL byte in either. Both would fail every
 * submission the same way, so they are errors here, with the line, not failures on a backend.
 */
export { MAX_ARG_BYTES };
/** What the command and `env` together may take, leaving room for the job's base environment. */
export const MAX_ARGV_ENV_BYTES = 512 * 1024;

function processArgumentRules(c: Collector, spec: RunSpec, base: Path): void {
  const strings: [Path, string, string][] = [];
  const command =
    spec.command === undefined ? [] : typeof spec.command === 'string' ? [spec.command] : spec.command;
  command.forEach((arg, i) =>
    strings.push([
      typeof spec.command === 'string' ? [...base, 'command'] : [...base, 'command', i],
      arg,
      'argument',
    ]),
  );
  for (const [k, v] of Object.entries(spec.env ?? {}))
    strings.push([[...base, 'env', k], `${k}=${v}`, 'variable']);
  if (spec.workingDir !== undefined) strings.push([[...base, 'workingDir'], spec.workingDir, 'path']);
  let total = 0;
  for (const [path, text, what] of strings) {
    const bytes = Buffer.byteLength(text);
    total += bytes + 1;
    const nul = text.indexOf('\0');
    if (nul >= 0)
      c.error(
        'NulByte',
        path,
        `the ${what} holds a NUL byte (at character ${nul}): no process can be given one`,
        'remove the \\0 escape from the string',
      );
    else if (bytes > MAX_ARG_BYTES)
      c.error(
        'ArgumentTooLarge',
        path,
        `the ${what} is ${bytes} bytes; Linux refuses one over ${MAX_ARG_BYTES} (E2BIG)`,
        'put large data in a file in the code tree or the object store and pass its path',
      );
  }
  if (total > MAX_ARGV_ENV_BYTES)
    c.error(
      'ArgumentsTooLarge',
      spec.command !== undefined ? [...base, 'command'] : base,
      `the command and env take ${total} bytes together, over ${MAX_ARGV_ENV_BYTES}`,
      'put large data in a file and pass its path',
    );
}

/** The working directory stays inside the code tree, and the code path inside the repository. */
function pathRules(c: Collector, spec: RunSpec, base: Path): void {
  for (const field of ['workingDir'] as const) {
    const v = spec[field];
    if (v !== undefined && isUnsafeRelPath(v)) {
      c.error(
        'PathEscape',
        [...base, field],
        `"${v}" leaves the code tree`,
        'use a relative path without ".."',
      );
    }
  }
  codeRepoRules(c, spec, base);
  if (spec.code?.path !== undefined && isUnsafeRelPath(spec.code.path)) {
    c.error(
      'PathEscape',
      [...base, 'code', 'path'],
      `"${spec.code.path}" leaves the repository`,
      'use a relative path without ".."',
    );
  }
}

/** `code.repo` is a URL the controller may fetch; its token is named, and never one of the controller's. */
function codeRepoRules(c: Collector, spec: RunSpec, base: Path): void {
  const { repo, tokenSecret } = spec.code ?? {};
  const problem = repo !== undefined ? codeRepoUrlProblem(repo) : undefined;
  if (problem) c.error('CodeRepoInvalid', [...base, 'code', 'repo'], problem.message, problem.hint);
  if (tokenSecret !== undefined && repo === undefined)
    c.error(
      'TokenWithoutRepo',
      [...base, 'code', 'tokenSecret'],
      'code.tokenSecret names the token of code.repo, which is not set',
      'set code.repo, or remove code.tokenSecret',
    );
  if (tokenSecret?.startsWith('ADV_'))
    c.error(
      'ReservedSecret',
      [...base, 'code', 'tokenSecret'],
      `"${tokenSecret}" is one of the controller's own settings or credentials (ADV_*): no spec may name it`,
      "leave code.tokenSecret out to use the controller's ADV_GIT_TOKEN, or name a secret of its own",
    );
}

/**
 * One `NAME=value` a job gets in its environment besides `env`'s: a setup step (in `ADV_SETUP`),
 * the parallelism plan (`ADV_PARALLELISM`), a DAG default. The same limits as a variable of `env`:
 * no NUL byte, no more than MAX_ARG_BYTES.
 */
function jobVariableRule(c: Collector, path: Path, text: string, what: string): void {
  const nul = text.indexOf('\0');
  const bytes = Buffer.byteLength(text);
  if (nul >= 0)
    c.error(
      'NulByte',
      path,
      `the ${what} holds a NUL byte (at character ${nul}): it travels as an environment variable, which cannot hold one`,
      'remove the \\0 escape from the string',
    );
  else if (bytes > MAX_ARG_BYTES)
    c.error(
      'ArgumentTooLarge',
      path,
      `the ${what} takes ${bytes} bytes as an environment variable; Linux refuses one over ${MAX_ARG_BYTES} (E2BIG)`,
      'put large data in a file in the code tree or the object store and pass its path',
    );
}

/**
 * No string of `value` (walked through arrays and objects) holds a NUL byte: host names, users, key
 * files, paths and store settings all end up as arguments, paths or variables, none of which can.
 */
function nulRules(c: Collector, value: unknown, path: Path): void {
  if (typeof value === 'string') {
    const nul = value.indexOf('\0');
    if (nul >= 0)
      c.error(
        'NulByte',
        path,
        `the value holds a NUL byte (at character ${nul}): no path, argument or variable can hold one`,
        'remove the \\0 escape from the string',
      );
  } else if (Array.isArray(value)) value.forEach((v, i) => nulRules(c, v, [...path, i]));
  else if (value && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) nulRules(c, v, [...path, k]);
}

/**
 * A Backend's host and remote paths reach `ssh -G`, `mkdir -p`, `dirname` and friends as operands:
 * one starting with `-` would be read as an option there (and fail the job, or worse).
 */
function optionLikeRules(c: Collector, b: Backend): void {
  const values: [Path, string | undefined][] = [
    [['spec', 'connection', 'host'], b.spec.connection?.host],
    [['spec', 'connection', 'proxyJump'], b.spec.connection?.proxyJump?.replace(/^[^@]*@/, '')],
    [['spec', 'paths', 'root'], b.spec.paths?.root],
    [['spec', 'paths', 'work'], b.spec.paths?.work],
  ];
  for (const [path, v] of values)
    if (v?.startsWith('-'))
      c.error(
        'OptionLikeValue',
        path,
        `${formatPath(path.slice(1))} starts with "-": the commands it is passed to would read it as an option`,
        'use a host name or an absolute path (or one under ~/)',
      );
}

/**
 * Setup steps travel to `adv exec` in one variable, `ADV_SETUP` (a JSON list, see
 * `loop/execute/setup-env.ts`): no step may hold a NUL byte, and the steps of one spec must fit in it.
 * The steps of a Backend, an Environment and a run together are checked when they meet (submit).
 */
function setupVariableRules(c: Collector, steps: readonly [Path, string][], base: Path, from: string): void {
  for (const [path, text] of steps) jobVariableRule(c, path, text, 'setup step');
  if (!steps.length) return;
  const json = JSON.stringify(steps.map(([, text]) => ({ from, run: text })));
  jobVariableRule(c, base, `ADV_SETUP=${json}`, 'setup (ADV_SETUP, the steps as JSON)');
}

/** A Backend's steps fit `ADV_SETUP` and name only contract variables and its `passEnv`. */
function backendSetupRules(c: Collector, b: Backend): void {
  const steps = (b.spec.setup ?? []).map((s, i): [Path, string] => [['spec', 'setup', i], s]);
  setupVariableRules(c, steps, ['spec', 'setup'], `Backend ${b.metadata.name}`);
  const scope = { variables: [...CONTRACT_VARIABLES, ...(b.spec.passEnv ?? [])], secrets: undefined };
  templateRules(c.error.bind(c), steps, scope);
}

/** An Environment's variables are not reserved and its steps and variables fit `ADV_SETUP`. */
function environmentDocRules(c: Collector, e: Environment): void {
  environmentRules(c.error.bind(c), e.spec, (path, text) => jobVariableRule(c, path, text, 'value'));
  const texts = [
    ...(e.spec.modules ?? []).map((m) => `module load ${m}`),
    JSON.stringify(e.spec.env ?? {}),
    ...(e.spec.setup ?? []),
  ];
  jobVariableRule(c, ['spec'], `ADV_SETUP=${JSON.stringify(texts)}`, 'environment (ADV_SETUP, as JSON)');
}

/** Setup steps and the parallelism plan reach the job as variables: they must fit in one. */
function derivedVariableRules(c: Collector, spec: RunSpec, base: Path): void {
  const steps = (spec.setup ?? []).map((s, i): [Path, string] => [[...base, 'setup', i], s]);
  setupVariableRules(c, steps, [...base, 'setup'], 'Run');
  templateRules(c.error.bind(c), steps, runScope(spec));
  if (spec.parallelism)
    jobVariableRule(
      c,
      [...base, 'parallelism'],
      `ADV_PARALLELISM=${JSON.stringify(spec.parallelism)}`,
      'parallelism plan (ADV_PARALLELISM)',
    );
}

/**
 * `defaults.env` reaches every node like a node's own `env`, so it gets the same rules: no name
 * reserved for AdventureTime (an `ADV_INPUTS` or `ADV_WORKDIR` there would steer where a node reads
 * and writes), and values a process can be given.
 */
function dagDefaultsEnvRules(c: Collector, dag: Dag): void {
  for (const [name, value] of Object.entries(dag.spec.defaults?.env ?? {})) {
    const path = ['spec', 'defaults', 'env', name];
    if (name.startsWith('ADV_'))
      c.error(
        'ReservedEnv',
        path,
        `"${name}" is reserved for AdventureTime`,
        'rename it (names starting with ADV_ are set by adv exec)',
        true,
      );
    jobVariableRule(c, path, `${name}=${value}`, 'variable');
  }
}

function reservedEnvRules(c: Collector, spec: RunSpec, base: Path): void {
  for (const name of Object.keys(spec.env ?? {})) {
    if (name.startsWith('ADV_')) {
      c.error(
        'ReservedEnv',
        [...base, 'env', name],
        `"${name}" is reserved for AdventureTime`,
        'rename it (names starting with ADV_ are set by adv exec)',
        true,
      );
    }
  }
}

/** Each secret is listed once, is not one of the controller's own, and has no plain value in `env`. */
function secretRules(c: Collector, spec: RunSpec, base: Path): void {
  const secrets = spec.secrets ?? [];
  secrets.forEach((s, i) => {
    if (secrets.indexOf(s) !== i)
      c.error(
        'DuplicateSecret',
        [...base, 'secrets', i],
        `secret "${s}" is listed twice`,
        'remove the duplicate',
      );
    if (s.startsWith('ADV_'))
      c.error(
        'ReservedSecret',
        [...base, 'secrets', i],
        `"${s}" is one of the controller's own settings or credentials (ADV_*): no spec may ask for it`,
        'give the job its own credential under another name',
      );
    if (spec.env && s in spec.env) {
      c.error(
        'SecretInEnv',
        [...base, 'env', s],
        `"${s}" is both a secret and a plain env value`,
        'remove it from env: secret values never belong in a spec',
        true,
      );
    }
  });
}

/** How to fix a Backend secret no spec may name. */
export const BACKEND_SECRET_HINT =
  'give the backend a secret of its own (e.g. VAST_API_KEY, AGENT_ENROLL_TOKEN), set where the controller reads secrets';

/**
 * A Backend's secrets (an API key, an enrollment token) are resolved from the controller's secrets
 * and sent where the spec says: like a Run's, none may be one of the controller's own (`ADV_*`).
 * The store's credentials are refused across files, where the Storage spec is known (loader.ts).
 */
function backendSecretRules(c: Collector, b: Backend, loc: Locator): void {
  for (const ref of backendSecretRefsOf(b, loc)) {
    if (!ref.name.startsWith('ADV_')) continue;
    c.out.push({
      severity: 'error',
      code: 'ReservedSecret',
      line: ref.line,
      column: ref.column,
      path: ref.path,
      message: `"${ref.name}" is one of the controller's own settings or credentials (ADV_*): no spec may name it`,
      hint: BACKEND_SECRET_HINT,
    });
  }
}

/** No backend is both wanted (in `order` or `allowed`) and forbidden. */
function selectorRules(c: Collector, sel: RunSpec['backendSelector'], base: Path): void {
  if (!sel?.forbidden) return;
  const forbidden = sel.forbidden;
  for (const field of ['order', 'allowed'] as const) {
    (sel[field] ?? []).forEach((name, i) => {
      if (forbidden.includes(name)) {
        c.error(
          'SelectorConflict',
          [...base, 'backendSelector', field, i],
          `backend "${name}" is both in ${field} and forbidden`,
          'remove it from one of the two lists',
        );
      }
    });
  }
}

/**
 * The rules every Backend gets from the registry: `connection` where its type needs one, its
 * settings block where its type requires it, no block of another type; then the rules of each
 * descriptor whose type this is or whose block is present.
 */
function backendRules(c: Collector, b: Backend, list: BackendList): void {
  const spec = b.spec;
  const blocks = spec as Record<string, unknown>;
  const own = list.find((d) => d.type === spec.type);
  const block = own?.settings?.block;
  if (own?.needsConnection && !spec.connection) {
    c.error(
      'MissingConnection',
      ['spec'],
      `a ${spec.type} backend needs "connection"`,
      'add "connection: {host: login.example.edu, user: me}"',
    );
  }
  if (own?.needsConnection && spec.connection && !spec.connection.host) {
    c.error(
      'MissingHost',
      ['spec', 'connection'],
      `a ${spec.type} backend's connection needs "host"`,
      'add "host: login.example.edu" (a host name, an address or an ssh config alias)',
    );
  }
  if (block && own.settings?.required && !blocks[block]) {
    c.error(
      'MissingSettings',
      ['spec'],
      `a ${spec.type} backend needs its "${block}:" settings`,
      `add "${block}:" (see adv schema Backend)`,
    );
  }
  (spec.passEnv ?? []).forEach((name, i) => {
    if (name.startsWith('ADV_'))
      c.error(
        'ReservedEnv',
        ['spec', 'passEnv', i],
        `"${name}" is one of the controller's own settings or credentials (ADV_*): no job may be given it`,
        'remove it from passEnv',
      );
  });
  for (const other of list) {
    const theirs = other.settings?.block;
    if (theirs && theirs !== block && blocks[theirs] !== undefined) {
      c.error(
        'WrongSettings',
        ['spec', theirs],
        `"${theirs}:" settings are for ${other.type} backends, but this one is ${spec.type}`,
        `remove "${theirs}:" or set "type: ${other.type}"`,
        true,
      );
    }
  }
  const report = c.error.bind(c);
  for (const d of list) {
    const present = d.settings !== undefined && blocks[d.settings.block] !== undefined;
    if (d.rules && (d.type === spec.type || present)) d.rules(spec, report);
  }
}

function storageRules(c: Collector, s: Storage): void {
  const { type } = s.spec;
  const other = type === 's3' ? 'file' : 's3';
  if (!s.spec[type])
    c.error(
      'MissingSettings',
      ['spec'],
      `${type === 's3' ? 'an' : 'a'} ${type} store needs its "${type}:" settings`,
      type === 's3' ? 'add "s3: {bucket: my-bucket}"' : 'add "file: {path: ./store}"',
    );
  if (s.spec[other])
    c.error(
      'WrongSettings',
      ['spec', other],
      `"${other}:" settings given, but type is ${type}`,
      `remove "${other}:" or set "type: ${other}"`,
      true,
    );
}
