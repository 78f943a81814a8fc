/**
 * The building blocks of the spec schemas, apart from the kinds themselves: `schema.ts` declares
 * the kinds with them, and each backend folder declares its settings block with them. Backend
 * folders import this module, never `schema.ts` (which imports the backend registry): that keeps
 * the import graph free of cycles.
 */
import { DNS1123_SUBDOMAIN_RE } from '../../runtime/names.js';
import { Type, type TObject, type TProperties, type TSchema } from '@sinclair/typebox';

/** DNS-1123 subdomain: lowercase alphanumerics, '-' and '.', starting and ending alphanumeric. */
export const DNS1123_SUBDOMAIN = DNS1123_SUBDOMAIN_RE.source;
/**
 * Whether a string is a valid object name (DNS-1123 subdomain, at most 253 characters): the only
 * names the controller uses as status file names, job names and shell words. A name that fails
 * this is reported by the file it is in, never used as a key.
 */
export const isObjectName = (name: unknown): name is string =>
  typeof name === 'string' && name.length > 0 && name.length <= 253 && DNS1123_SUBDOMAIN_RE.test(name);
/** DNS-1123 label: like a subdomain without dots (DAG node ids, partitions-as-names). */
export const DNS1123_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
/** POSIX-portable environment variable name. */
export const ENV_NAME = '^[A-Za-z_][A-Za-z0-9_]*$';

/** An object that refuses unknown fields (a typo is an error, not a silently ignored key). */
export const strict = <T extends TProperties>(
  props: T,
  description: string,
  extra: object = {},
): TObject<T> => Type.Object(props, { additionalProperties: false, description, ...extra });

/** An optional field. */
export const optional = <T extends TSchema>(schema: T) => Type.Optional(schema);

/** A string enum as JSON Schema `enum` (one clear error, unlike a union of literals). */
export const StringEnum = <const T extends readonly string[]>(values: T, description: string) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], description });

/** A value that may also be null, as `type: [T, "null"]`. */
export const Nullable = <T extends 'string' | 'integer'>(type: T, extra: object = {}) =>
  Type.Unsafe<(T extends 'string' ? string : number) | null>({ type: [type, 'null'], ...extra });

/** A map whose keys must match `keyPattern`; other keys are errors (TypeBox omits that by default). */
export const KeyedMap = <V extends TSchema>(keyPattern: string, value: V, description: string) =>
  Type.Record(Type.String({ pattern: keyPattern }), value, { description, additionalProperties: false });

/** A map of label-like keys to strings (labels, annotations). */
export const StringMap = (description: string) =>
  KeyedMap(
    '^[A-Za-z0-9]([-A-Za-z0-9_./]{0,251}[A-Za-z0-9])?$',
    Type.String({ maxLength: 4096 }),
    description,
  );

/**
 * A file on the controller's host (a key, known_hosts, a kubeconfig): absolute, or under the home
 * directory. A relative path would resolve against wherever the controller was started — in a local
 * specs repo, a file anyone who can push may have committed.
 */
export const HostPath = (description: string) =>
  Type.String({
    minLength: 2,
    maxLength: 4096,
    pattern: '^(/|~/)[^\\u0000\\n\\r]*$',
    description,
    'x-hint': 'write an absolute path (/etc/adventuretime/…) or one under the home directory (~/.ssh/…)',
  });
