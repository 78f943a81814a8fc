/**
 * Names typed on the command line, checked before they reach a path, a store key or a message:
 * the same rule the spec schema has for `metadata.name` (a DNS-1123 subdomain), so `../x` is a
 * usage error, never an object key that escapes its folder.
 */
import { AdvError, ErrorCode } from '../controller/index.js';
import { printable } from './output.js';

import { DNS1123_SUBDOMAIN_RE as DNS1123_SUBDOMAIN, RUN_NAME_MAX } from '../runtime/names.js';

/** Longest name of each kind (the schema's `metadata.name` maxLength). */
const MAX = { run: RUN_NAME_MAX, DAG: 253, Sweep: 54 } as const;

/**
 * Returns `name` if it can name a run (or DAG); otherwise a usage error that says what a name is.
 * `fresh`: the name is being chosen (`--name`), so the fix is how to write one, not where the
 * existing ones are listed.
 */
export function checkName(name: string, what: keyof typeof MAX = 'run', fresh = false): string {
  if (name.length <= MAX[what] && DNS1123_SUBDOMAIN.test(name)) return name;
  throw new AdvError(
    ErrorCode.UsageError,
    `"${printable(name)}" is not a valid ${what} name: ${
      name.length > MAX[what]
        ? `it has ${name.length} characters, at most ${MAX[what]} are allowed`
        : "a name is a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
    }`,
    {
      hint: fresh
        ? `write it like ${printable(suggestName(name)) || 'train-2'} (lowercase, "-" between words)`
        : `adv get ${what === 'run' ? 'runs' : what === 'DAG' ? 'dags' : 'sweeps'} lists the names that exist`,
    },
  );
}

/** A valid name close to `name`: lowercased, runs of other characters as one "-", trimmed. */
function suggestName(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9.]+/g, '-')
    .replace(/^[-.]+|[-.]+$/g, '')
    .slice(0, 63)
    .replace(/[-.]+$/, '');
}
