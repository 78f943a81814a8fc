/**
 * `--set path=value`, as `adv submit` and `adv fork` take it: one field of a Run's spec, the path
 * dotted from `spec` (`policy.maxAttempts=5`, `env.LR=3e-4`; a leading `spec.` or `metadata.` says
 * where explicitly), the value read as YAML would read it (`5` a number, `true` a flag, `[a, b]` a
 * list, anything else a string) — except under `env`, `metadata.labels` and
 * `metadata.annotations`, whose values are always strings (`env.LR=1e-4` is the text `1e-4`, as a
 * shell would pass it). What the schema then makes of the result is the loader's to say.
 */
import { parse } from 'yaml';
import { AdvError, ErrorCode } from '../controller/index.js';

export interface SetArg {
  /** From the document's root: `['spec', 'policy', 'maxAttempts']`. */
  path: string[];
  value: unknown;
}

const KEY = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/** Parses one `--set` argument; a bad one is a usage error that shows the form. */
export function parseSetArg(arg: string): SetArg {
  const eq = arg.indexOf('=');
  const bad = (why: string) =>
    new AdvError(ErrorCode.UsageError, `--set ${JSON.stringify(arg)}: ${why}`, {
      hint: 'write --set PATH=VALUE, the path dotted from spec: --set policy.maxAttempts=5 --set env.LR=3e-4',
    });
  if (eq <= 0) throw bad('no "=" after the path');
  const keys = arg.slice(0, eq).split('.');
  if (keys.some((k) => k === '' || !/^[A-Za-z0-9_-]+$/.test(k)) || !KEY.test(arg.slice(0, eq)))
    throw bad('the path is not dotted keys (letters, digits, "_" and "-")');
  if (keys.some((k) => k === '__proto__' || k === 'constructor' || k === 'prototype'))
    throw bad(`"${keys.join('.')}" is not a field`);
  const path = keys[0] === 'spec' || keys[0] === 'metadata' ? keys : ['spec', ...keys];
  if (path.length < 2) throw bad(`set a field of ${path[0]}, not ${path[0]} itself`);
  const text = arg.slice(eq + 1);
  if (stringValued(path)) return { path, value: text };
  let value: unknown;
  try {
    value = text === '' ? '' : (parse(text) as unknown);
  } catch (e) {
    throw bad(`the value is not YAML (${(e as Error).message.split('\n')[0]})`);
  }
  return { path, value: value ?? null };
}

/** Maps of strings: what is typed is the value, never a number or a flag YAML would make of it. */
function stringValued(path: readonly string[]): boolean {
  const [root, map] = path;
  return (
    path.length === 3 &&
    ((root === 'spec' && map === 'env') ||
      (root === 'metadata' && (map === 'labels' || map === 'annotations')))
  );
}

/** Sets each of `sets` in `doc` (a parsed spec document), making the maps on the way. */
export function applySets(doc: Record<string, unknown>, sets: readonly SetArg[]): void {
  for (const { path, value } of sets) {
    let node = doc;
    for (const key of path.slice(0, -1)) {
      const next = Object.hasOwn(node, key) ? node[key] : undefined;
      if (next === undefined || next === null) node[key] = {};
      else if (typeof next !== 'object' || Array.isArray(next))
        throw new AdvError(ErrorCode.UsageError, `--set ${path.join('.')}: ${key} is not a map in the spec`, {
          hint: `set ${path.slice(0, path.indexOf(key) + 1).join('.')} itself, or pick another path`,
        });
      node = node[key] as Record<string, unknown>;
    }
    node[path.at(-1)!] = value;
  }
}

/** Commander's collector for a repeated `--set`. */
export function collectSet(arg: string, prev: SetArg[] = []): SetArg[] {
  return [...prev, parseSetArg(arg)];
}
