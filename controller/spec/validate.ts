/**
 * Stage 2 of loading: dispatch on apiVersion/kind, then JSON Schema validation with ajv (all errors
 * at once), each error turned into a diagnostic a person can act on: located at the YAML node,
 * saying what was expected and, for a misspelt field or enum value, the closest known one.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { distance } from 'fastest-levenshtein';
import type { Diagnostic } from './diagnostic.js';
import { formatPath } from './diagnostic.js';
import type { Locator } from './parse.js';
import { BACKENDS } from '../backends/registry.js';
import type { BackendList } from '../backends/types.js';
import { API_VERSION, KINDS, schemasFor, type Kind } from './schema.js';

const compiled = new WeakMap<BackendList, Record<Kind, ValidateFunction>>();

/**
 * Validators are compiled once per list of backend types, on first use (this build's `BACKENDS`
 * in production; a test may pass a longer list). Each list gets its own ajv: the schemas keep
 * their `$id`s.
 */
function validators(list: BackendList): Record<Kind, ValidateFunction> {
  let v = compiled.get(list);
  if (!v) {
    const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, allowUnionTypes: true });
    ajv.addKeyword({ keyword: 'x-hint', schemaType: 'string' });
    const schemas = schemasFor(list);
    v = Object.fromEntries(KINDS.map((k) => [k, ajv.compile(schemas[k])])) as Record<Kind, ValidateFunction>;
    compiled.set(list, v);
  }
  return v;
}

/** Closest candidate within a small edit distance, for "did you mean". */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDist = Infinity;
  const lower = word.toLowerCase();
  for (const c of candidates) {
    const d = distance(lower, c.toLowerCase());
    if (d < bestDist) {
      best = c;
      bestDist = d;
    }
  }
  const allowed = Math.max(2, Math.floor(word.length / 3));
  return best !== undefined && bestDist <= allowed ? best : undefined;
}

type Located = Omit<Diagnostic, 'file'>;

/** Finds the kind of a parsed document, or explains why it has none. */
export function dispatchKind(value: unknown, loc: Locator): { kind: Kind } | { error: Located } {
  const err = (
    code: string,
    path: string[],
    message: string,
    hint: string,
    key = false,
  ): { error: Located } => ({
    error: { severity: 'error', code, ...loc.at(path, { key }), path: formatPath(path), message, hint },
  });
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return err(
      'NotAnObject',
      [],
      `a spec must be a mapping, got ${describe(value)}`,
      `start the document with "apiVersion: ${API_VERSION}", "kind: Run" (or DAG, Backend, Storage, Environment), "metadata:" and "spec:"`,
    );
  }
  const obj = value as Record<string, unknown>;
  if (obj.apiVersion === undefined) {
    return err(
      'MissingApiVersion',
      [],
      'missing required field "apiVersion"',
      `add "apiVersion: ${API_VERSION}"`,
    );
  }
  if (obj.apiVersion !== API_VERSION) {
    return err(
      'UnsupportedApiVersion',
      ['apiVersion'],
      `unsupported apiVersion ${JSON.stringify(obj.apiVersion)}`,
      `use "apiVersion: ${API_VERSION}"`,
    );
  }
  if (obj.kind === undefined) {
    return err(
      'MissingKind',
      [],
      'missing required field "kind"',
      `add "kind:" with one of ${KINDS.join(', ')}`,
    );
  }
  if (typeof obj.kind !== 'string' || !(KINDS as readonly string[]).includes(obj.kind)) {
    const guess = typeof obj.kind === 'string' ? closest(obj.kind, KINDS) : undefined;
    return err(
      'UnknownKind',
      ['kind'],
      `unknown kind ${JSON.stringify(obj.kind)}`,
      guess ? `did you mean "${guess}"? (kinds: ${KINDS.join(', ')})` : `use one of ${KINDS.join(', ')}`,
    );
  }
  return { kind: obj.kind as Kind };
}

/** Validates a document of a known kind (Backends against the types of `backends`); returns diagnostics (empty when valid). */
export function validateSchema(
  kind: Kind,
  value: unknown,
  loc: Locator,
  backends: BackendList = BACKENDS,
): Located[] {
  const validate = validators(backends)[kind];
  if (validate(value)) return [];
  return reduceErrors(validate.errors ?? []).map((e) => toDiagnostic(e, loc));
}

/**
 * ajv reports every failed branch of an `anyOf` next to the `anyOf` itself. When the value's type
 * picks one branch (a list for `string | list`), keep that branch's errors, which say what is wrong
 * with the list; otherwise keep only the summary. Then keep one error per location: the first is
 * the most useful (an empty name is "empty", not also "does not match the pattern").
 */
function reduceErrors(errors: ErrorObject[]): ErrorObject[] {
  const drop = new Set<ErrorObject>();
  for (const any of errors.filter((e) => e.keyword === 'anyOf')) {
    const prefix = any.schemaPath + '/';
    const branches = ((any.parentSchema as SchemaLike | undefined)?.anyOf ?? []).map((b) => b.type);
    const matching = branches.findIndex((t) => t !== undefined && typeMatches(t, any.data));
    const inBranch = (e: ErrorObject) => e.schemaPath.startsWith(prefix);
    for (const e of errors) {
      if (!inBranch(e)) continue;
      const branch = Number(e.schemaPath.slice(prefix.length).split('/')[0]);
      if (matching < 0 || branch !== matching) drop.add(e);
    }
    if (matching >= 0) drop.add(any);
  }
  const seen = new Set<string>();
  return errors.filter((e) => {
    if (drop.has(e)) return false;
    const perChild = e.keyword === 'required' || e.keyword === 'additionalProperties';
    const key = perChild ? `${e.instancePath}|${e.keyword}|${JSON.stringify(e.params)}` : e.instancePath;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function typeMatches(type: string | string[], v: unknown): boolean {
  const types = Array.isArray(type) ? type : [type];
  return types.some((t) =>
    t === 'array'
      ? Array.isArray(v)
      : t === 'object'
        ? v !== null && typeof v === 'object' && !Array.isArray(v)
        : t === 'null'
          ? v === null
          : t === 'integer'
            ? Number.isInteger(v)
            : typeof v === t,
  );
}

function pathOf(instancePath: string): (string | number)[] {
  if (!instancePath) return [];
  return instancePath
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return `string ${JSON.stringify(v.length > 60 ? v.slice(0, 57) + '...' : v)}`;
  return `${typeof v} ${String(v)}`;
}

const typeWords: Record<string, string> = {
  integer: 'a whole number',
  number: 'a number',
  string: 'a string',
  boolean: 'true or false',
  object: 'a mapping',
  array: 'a list',
  null: 'null',
};

function typeWord(t: unknown): string {
  const list = Array.isArray(t) ? t : [t];
  return list.map((x) => typeWords[String(x)] ?? String(x)).join(' or ');
}

interface SchemaLike {
  description?: string;
  'x-hint'?: string;
  properties?: Record<string, SchemaLike>;
  patternProperties?: Record<string, SchemaLike>;
  anyOf?: SchemaLike[];
  type?: string | string[];
  enum?: unknown[];
  items?: SchemaLike;
  const?: unknown;
}

type Path = (string | number)[];

/** One ajv error, with the parts every explanation reads. */
interface Failure {
  keyword: string;
  /** Where the failing value is. */
  path: Path;
  data: unknown;
  params: Record<string, unknown>;
  /** The schema that holds the failed keyword. */
  schema: SchemaLike;
  /** The schema's `x-hint`: a fix written for this field, preferred to a generic one where it applies. */
  hint: string | undefined;
}

/** What to tell the user about a failure; `at` and `key` when it is shown elsewhere than the value. */
interface Explanation {
  code: string;
  message: string;
  fix?: string;
  at?: Path;
  key?: boolean;
}

/** One ajv error as a diagnostic, located at the value (or the key) it is about. */
function toDiagnostic(e: ErrorObject, loc: Locator): Located {
  const schema = (e.parentSchema ?? {}) as SchemaLike;
  const failure: Failure = {
    keyword: e.keyword,
    path: pathOf(e.instancePath),
    data: e.data,
    params: e.params as Record<string, unknown>,
    schema,
    hint: schema['x-hint'],
  };
  const x = Object.hasOwn(EXPLAIN, e.keyword)
    ? EXPLAIN[e.keyword]!(failure)
    : explainOther(failure, e.message);
  const at = x.at ?? failure.path;
  return {
    severity: 'error',
    code: x.code,
    ...loc.at(at, { key: x.key ?? false }),
    path: formatPath(at),
    message: x.message,
    ...(x.fix ? { hint: x.fix } : {}),
  };
}

/** A key the schema does not allow, shown at the key: a bad map key, or a field it does not know. */
function explainExtraKey(f: Failure): Explanation {
  const field = String(f.params.additionalProperty);
  const at = [...f.path, field];
  if (f.schema.patternProperties) {
    const keySchema = Object.keys(f.schema.patternProperties)[0] ?? '';
    return {
      code: 'BadKey',
      at,
      key: true,
      message: `key "${field}" is not allowed here (keys must match ${keySchema})`,
      fix: keySchema.includes('A-Za-z_')
        ? 'use letters, digits and "_", not starting with a digit (e.g. "LEARNING_RATE")'
        : 'rename the key',
    };
  }
  const known = Object.keys(f.schema.properties ?? {});
  const guess = closest(field, known);
  return {
    code: 'UnknownField',
    at,
    key: true,
    message: `unknown field "${field}"`,
    fix: guess
      ? `did you mean "${guess}"?`
      : known.length > 0
        ? `remove it; known fields here: ${known.join(', ')}`
        : 'remove it',
  };
}

function explainMissingField(f: Failure): Explanation {
  const field = String(f.params.missingProperty);
  const about = f.schema.properties?.[field]?.description;
  return {
    code: 'MissingField',
    message: `missing required field "${field}"`,
    fix: about ? `add "${field}:" (${asClause(about)})` : `add "${field}:"`,
  };
}

function explainWrongType(f: Failure): Explanation {
  return {
    code: 'SchemaType',
    message: `expected ${typeWord(f.params.type)}, got ${describe(f.data)}`,
    fix: f.hint ?? fixForType(f.params.type, f.data) ?? `write ${typeWord(f.params.type)}`,
  };
}

function explainNotInEnum(f: Failure): Explanation {
  const allowed = (f.params.allowedValues as unknown[]).map(String);
  const guess = typeof f.data === 'string' ? closest(f.data, allowed) : undefined;
  return {
    code: 'SchemaEnum',
    message: `${describe(f.data)} is not one of: ${allowed.join(', ')}`,
    fix: guess ? `did you mean "${guess}"?` : `use one of: ${allowed.join(', ')}`,
  };
}

function explainNotConst(f: Failure): Explanation {
  return {
    code: 'SchemaConst',
    message: `must be ${JSON.stringify(f.params.allowedValue)}, got ${describe(f.data)}`,
    fix: `write ${JSON.stringify(f.params.allowedValue)}`,
  };
}

function explainNoMatch(f: Failure): Explanation {
  return {
    code: 'SchemaPattern',
    message: `${describe(f.data)} is not allowed here`,
    fix: f.hint ?? `it must match the pattern ${String(f.params.pattern)}`,
  };
}

function explainTooLong(f: Failure): Explanation {
  const limit = Number(f.params.limit);
  const len = typeof f.data === 'string' ? f.data.length : 0;
  return {
    code: 'SchemaLength',
    message: `is ${len} characters long, at most ${limit} allowed`,
    fix: f.hint ?? `shorten it to ${limit} characters`,
  };
}

/** A minimum length of 1 means "not empty", and is said so. */
function explainTooShort(f: Failure): Explanation {
  const limit = Number(f.params.limit);
  const len = typeof f.data === 'string' ? f.data.length : 0;
  return {
    code: 'SchemaLength',
    message: limit === 1 ? 'must not be empty' : `is ${len} characters long, at least ${limit} required`,
    fix: f.hint ?? 'give a value',
  };
}

const boundWords: Record<string, string> = {
  minimum: 'at least',
  maximum: 'at most',
  exclusiveMinimum: 'greater than',
  exclusiveMaximum: 'less than',
};

/** The fix repeats the field's description: a bare bound rarely says what the number is. */
function explainOutOfRange(f: Failure): Explanation {
  const bound = `${boundWords[f.keyword]} ${String(f.params.limit)}`;
  const of = f.keyword.startsWith('exclusive') ? '' : 'of ';
  const about = f.schema.description ? ` (${asClause(f.schema.description)})` : '';
  return {
    code: 'SchemaRange',
    message: `${describe(f.data)} is out of range: must be ${bound}`,
    fix: `use a value ${of}${bound}${about}`,
  };
}

function explainItemCount(f: Failure): Explanation {
  const n = Array.isArray(f.data) ? f.data.length : 0;
  const more = f.keyword === 'minItems';
  const limit = String(f.params.limit);
  return {
    code: 'SchemaLength',
    message: `list has ${n} item${n === 1 ? '' : 's'}, ${more ? 'at least' : 'at most'} ${limit} allowed`,
    fix: more ? `add at least ${limit} item${f.params.limit === 1 ? '' : 's'}` : `remove items`,
  };
}

function explainDuplicateItems(f: Failure): Explanation {
  return {
    code: 'SchemaUnique',
    message: `list has duplicate items (${String(f.params.j)} and ${String(f.params.i)})`,
    fix: 'remove the duplicate',
  };
}

/** An `anyOf` left after `reduceErrors` matched no branch by type: name the types it takes. */
function explainNoBranch(f: Failure): Explanation {
  const options = (f.schema.anyOf ?? []).map((s) => typeWord(s.type ?? 'value'));
  return {
    code: 'SchemaType',
    message: `expected ${options.join(' or ')}, got ${describe(f.data)}`,
    fix: `write ${options.join(' or ')}`,
  };
}

/** A keyword without its own wording: ajv's message. */
function explainOther(f: Failure, ajvMessage: string | undefined): Explanation {
  return {
    code: 'SchemaViolation',
    message: ajvMessage ?? 'invalid value',
    fix: f.hint ?? `see "adv schema" for what this field takes`,
  };
}

/** How a failure of each JSON Schema keyword is put into words; others go to `explainOther`. */
const EXPLAIN: Readonly<Record<string, (f: Failure) => Explanation>> = {
  additionalProperties: explainExtraKey,
  required: explainMissingField,
  type: explainWrongType,
  enum: explainNotInEnum,
  const: explainNotConst,
  pattern: explainNoMatch,
  maxLength: explainTooLong,
  minLength: explainTooShort,
  minimum: explainOutOfRange,
  maximum: explainOutOfRange,
  exclusiveMinimum: explainOutOfRange,
  exclusiveMaximum: explainOutOfRange,
  minItems: explainItemCount,
  maxItems: explainItemCount,
  uniqueItems: explainDuplicateItems,
  anyOf: explainNoBranch,
};

function fixForType(type: unknown, data: unknown): string | undefined {
  if (type === 'integer' && typeof data === 'string' && /^\d+$/.test(data))
    return `remove the quotes: ${data}`;
  if (type === 'integer' && typeof data === 'number') return `use a whole number, e.g. ${Math.round(data)}`;
  if (type === 'boolean' && typeof data === 'string') return 'write true or false without quotes';
  if (type === 'string' && (typeof data === 'number' || typeof data === 'boolean'))
    return `quote it: "${String(data)}"`;
  if (type === 'array' && data !== null && typeof data !== 'object')
    return `write a list: [${JSON.stringify(data)}]`;
  return undefined;
}

/** "Attempts that…" → "attempts that…", but "GPUs per node" stays. */
function lowerFirst(s: string): string {
  return /^[A-Z][a-z]/.test(s) ? s.charAt(0).toLowerCase() + s.slice(1) : s;
}

/** A schema description as a clause inside a fix: "Attempts that fail." → "attempts that fail". */
function asClause(description: string): string {
  return lowerFirst(description).replace(/\.$/, '');
}
