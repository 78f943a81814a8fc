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
import { API_VERSION, KINDS, SCHEMAS, type Kind } from './schema.js';

let compiled: Record<Kind, ValidateFunction> | undefined;

/** Validators are compiled once per process, on first use. */
function validators(): Record<Kind, ValidateFunction> {
  if (!compiled) {
    const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, allowUnionTypes: true });
    ajv.addKeyword({ keyword: 'x-hint', schemaType: 'string' });
    compiled = {
      Run: ajv.compile(SCHEMAS.Run),
      DAG: ajv.compile(SCHEMAS.DAG),
      Backend: ajv.compile(SCHEMAS.Backend),
      Storage: ajv.compile(SCHEMAS.Storage),
    };
  }
  return compiled;
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
      `start the document with "apiVersion: ${API_VERSION}", "kind: Run" (or DAG, Backend, Storage), "metadata:" and "spec:"`,
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

/** Validates a document of a known kind; returns diagnostics (empty when valid). */
export function validateSchema(kind: Kind, value: unknown, loc: Locator): Located[] {
  const validate = validators()[kind];
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

function toDiagnostic(e: ErrorObject, loc: Locator): Located {
  const path = pathOf(e.instancePath);
  const parent = (e.parentSchema ?? {}) as SchemaLike;
  const hint = parent['x-hint'];
  const base = (
    code: string,
    p: (string | number)[],
    message: string,
    fix?: string,
    key = false,
  ): Located => ({
    severity: 'error',
    code,
    ...loc.at(p, { key }),
    path: formatPath(p),
    message,
    ...(fix ? { hint: fix } : {}),
  });
  const params = e.params as Record<string, unknown>;

  switch (e.keyword) {
    case 'additionalProperties': {
      const field = String(params.additionalProperty);
      const p = [...path, field];
      if (parent.patternProperties) {
        const keySchema = Object.keys(parent.patternProperties)[0] ?? '';
        return base(
          'BadKey',
          p,
          `key "${field}" is not allowed here (keys must match ${keySchema})`,
          keySchema.includes('A-Za-z_')
            ? 'use letters, digits and "_", not starting with a digit (e.g. "LEARNING_RATE")'
            : 'rename the key',
          true,
        );
      }
      const known = Object.keys(parent.properties ?? {});
      const guess = closest(field, known);
      return base(
        'UnknownField',
        p,
        `unknown field "${field}"`,
        guess
          ? `did you mean "${guess}"?`
          : known.length > 0
            ? `remove it; known fields here: ${known.join(', ')}`
            : 'remove it',
        true,
      );
    }
    case 'required': {
      const field = String(params.missingProperty);
      const about = parent.properties?.[field]?.description;
      return base(
        'MissingField',
        path,
        `missing required field "${field}"`,
        about ? `add "${field}:" (${lowerFirst(about).replace(/\.$/, '')})` : `add "${field}:"`,
      );
    }
    case 'type':
      return base(
        'SchemaType',
        path,
        `expected ${typeWord(params.type)}, got ${describe(e.data)}`,
        hint ?? fixForType(params.type, e.data) ?? `write ${typeWord(params.type)}`,
      );
    case 'enum': {
      const allowed = (params.allowedValues as unknown[]).map(String);
      const guess = typeof e.data === 'string' ? closest(e.data, allowed) : undefined;
      return base(
        'SchemaEnum',
        path,
        `${describe(e.data)} is not one of: ${allowed.join(', ')}`,
        guess ? `did you mean "${guess}"?` : `use one of: ${allowed.join(', ')}`,
      );
    }
    case 'const':
      return base(
        'SchemaConst',
        path,
        `must be ${JSON.stringify(params.allowedValue)}, got ${describe(e.data)}`,
        `write ${JSON.stringify(params.allowedValue)}`,
      );
    case 'pattern':
      return base(
        'SchemaPattern',
        path,
        `${describe(e.data)} is not allowed here`,
        hint ?? `it must match the pattern ${String(params.pattern)}`,
      );
    case 'maxLength':
    case 'minLength': {
      const limit = Number(params.limit);
      const len = typeof e.data === 'string' ? e.data.length : 0;
      const msg =
        e.keyword === 'maxLength'
          ? `is ${len} characters long, at most ${limit} allowed`
          : limit === 1
            ? 'must not be empty'
            : `is ${len} characters long, at least ${limit} required`;
      return base(
        'SchemaLength',
        path,
        msg,
        hint ?? (e.keyword === 'maxLength' ? `shorten it to ${limit} characters` : 'give a value'),
      );
    }
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum': {
      const words: Record<string, string> = {
        minimum: 'at least',
        maximum: 'at most',
        exclusiveMinimum: 'greater than',
        exclusiveMaximum: 'less than',
      };
      const bound = `${words[e.keyword]} ${String(params.limit)}`;
      return base(
        'SchemaRange',
        path,
        `${describe(e.data)} is out of range: must be ${bound}`,
        `use a value ${e.keyword.startsWith('exclusive') ? '' : 'of '}${bound}${parent.description ? ` (${lowerFirst(parent.description).replace(/\.$/, '')})` : ''}`,
      );
    }
    case 'minItems':
    case 'maxItems': {
      const n = Array.isArray(e.data) ? e.data.length : 0;
      const more = e.keyword === 'minItems';
      return base(
        'SchemaLength',
        path,
        `list has ${n} item${n === 1 ? '' : 's'}, ${more ? 'at least' : 'at most'} ${String(params.limit)} allowed`,
        more ? `add at least ${String(params.limit)} item${params.limit === 1 ? '' : 's'}` : `remove items`,
      );
    }
    case 'uniqueItems':
      return base(
        'SchemaUnique',
        path,
        `list has duplicate items (${String(params.j)} and ${String(params.i)})`,
        'remove the duplicate',
      );
    case 'anyOf': {
      const options = (parent.anyOf ?? []).map((s) => typeWord(s.type ?? 'value'));
      return base(
        'SchemaType',
        path,
        `expected ${options.join(' or ')}, got ${describe(e.data)}`,
        `write ${options.join(' or ')}`,
      );
    }
    default:
      return base(
        'SchemaViolation',
        path,
        e.message ?? 'invalid value',
        hint ?? `see "adv schema" for what this field takes`,
      );
  }
}

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
