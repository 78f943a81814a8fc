/**
 * One value set in a YAML file by a minimal textual edit: the value's own source range replaced,
 * or the missing keys inserted as new lines at the indentation of their siblings (inside the
 * braces of a flow mapping). Every other byte of the file — comments, spacing, quoting, key order,
 * line endings, the other documents — is kept; `Document.toString()` would re-format all of it.
 *
 * The result is parsed again and must equal the old content with just that value set, or the
 * edit is refused (`YamlEditError`): a file is never committed with more changed than asked for.
 */
import {
  isAlias,
  isCollection,
  isMap,
  isPair,
  isScalar,
  parse,
  parseAllDocuments,
  type Document,
  type Node,
  type Pair,
  type YAMLMap,
} from 'yaml';

export class YamlEditError extends Error {}

/** A value `adv` sets: a flag or a string (annotations). */
export type EditValue = string | boolean;

interface Ctx {
  text: string;
  eol: string;
  /** The file's indentation step (2 unless the file nests block mappings otherwise). */
  step: number;
}

/** Sets `path` to `value` in the document `which` picks (by its content). */
export function setInYaml(
  text: string,
  which: (content: unknown) => boolean,
  path: readonly string[],
  value: EditValue,
): string {
  if (path.length === 0) throw new YamlEditError('an empty path');
  const before = documents(text);
  const index = before.findIndex((d) => d.errors.length === 0 && which(contentOf(d)));
  if (index < 0) throw new YamlEditError('no such document in the file');
  const doc = before[index]!;
  const ctx: Ctx = { text, eol: text.includes('\r\n') ? '\r\n' : '\n', step: indentStep(text, doc.contents) };
  const next = edit(ctx, doc.contents, path, value);

  // The edit must change exactly that value: everything else parses as it did.
  const expected = before.map(contentOf);
  expected[index] = withValue(expected[index], path, value);
  const after = documents(next);
  if (
    after.length !== before.length ||
    after.some((d) => d.errors.length > 0) ||
    JSON.stringify(after.map(contentOf)) !== JSON.stringify(expected)
  )
    throw new YamlEditError(`setting ${path.join('.')} would change more than that value`);
  return next;
}

function documents(text: string): Document.Parsed[] {
  const docs = parseAllDocuments(text);
  return Array.isArray(docs) ? docs : [];
}

function contentOf(d: Document.Parsed): unknown {
  try {
    return d.toJS() as unknown;
  } catch {
    return undefined;
  }
}

function withValue(content: unknown, path: readonly string[], value: EditValue): unknown {
  const root = structuredClone(content) as Record<string, unknown>;
  let node = root;
  for (const key of path.slice(0, -1)) {
    const child = node[key];
    if (child === null || child === undefined || typeof child !== 'object') node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[path.at(-1)!] = value;
  return root;
}

const splice = (ctx: Ctx, start: number, end: number, insert: string) =>
  ctx.text.slice(0, start) + insert + ctx.text.slice(end);

/** The column of an offset: how far it is from the start of its line. */
const column = (text: string, pos: number) => pos - (text.lastIndexOf('\n', pos - 1) + 1);

const rangeOf = (n: Node | null | undefined): [number, number] | undefined =>
  n?.range ? [n.range[0], n.range[1]] : undefined;

function edit(ctx: Ctx, root: Node | null, path: readonly string[], value: EditValue): string {
  let map: Node | null = root;
  for (let i = 0; i < path.length; i++) {
    if (!isMap(map))
      throw new YamlEditError(`${path.slice(0, i).join('.') || 'the document'} is not a mapping`);
    const key = path[i]!;
    const pair = map.items.find((p) => isScalar(p.key) && p.key.value === key);
    if (!pair) return insertInto(ctx, map, path.slice(i), value);
    const v = pair.value as Node | null;
    if (i === path.length - 1) return replaceValue(ctx, pair, value, path);
    if (isScalar(v) && v.value === null) return fillNull(ctx, map, pair, path.slice(i + 1), value);
    map = v;
  }
  throw new YamlEditError('unreachable');
}

/** The key already has a value: its source range is replaced (comments after it stay). */
function replaceValue(ctx: Ctx, pair: Pair, value: EditValue, path: readonly string[]): string {
  const v = pair.value as Node | null;
  const r = rangeOf(v);
  if (!v || !r || (isCollection(v) && !v.flow))
    throw new YamlEditError(`${path.join('.')} holds a ${isMap(v) ? 'mapping' : 'list'}, not a value`);
  const text = scalarText(value, false);
  if (r[0] === r[1]) return splice(ctx, r[0], r[0], ` ${text}`); // `key:` with nothing after it
  if (!isScalar(v) && !isAlias(v) && !isCollection(v))
    throw new YamlEditError(`cannot replace ${path.join('.')}`);
  // A block scalar's range holds its last line break: keep it.
  const tail = /[\r\n]*$/.exec(ctx.text.slice(r[0], r[1]))![0];
  return splice(ctx, r[0], r[1], text + tail);
}

/** `key:` (or `key: null`) on the way: the rest of the path becomes its value. */
function fillNull(ctx: Ctx, parent: YAMLMap, pair: Pair, rest: readonly string[], value: EditValue): string {
  const r = rangeOf(pair.value as Node)!;
  if (r[0] !== r[1] || parent.flow) {
    const sep = r[0] === r[1] ? ' ' : '';
    return splice(ctx, r[0], r[1], sep + flowEntry(rest, value, true));
  }
  const indent = column(ctx.text, rangeOf(pair.key as Node)![0]) + ctx.step;
  return insertLines(ctx, r[0], blockLines(ctx, indent, rest, value));
}

/** The key is missing from `map`: add it (and the keys below it) after the last entry. */
function insertInto(ctx: Ctx, map: YAMLMap, keys: readonly string[], value: EditValue): string {
  const last = map.items.at(-1);
  if (map.flow) {
    const r = rangeOf(map)!;
    if (last) return splice(ctx, endOf(last), endOf(last), `, ${flowEntry(keys, value, false)}`);
    const open = ctx.text.indexOf('{', r[0]);
    if (open < 0 || open >= r[1]) throw new YamlEditError('a flow mapping without braces');
    return splice(ctx, open + 1, open + 1, flowEntry(keys, value, false));
  }
  if (!last?.key) throw new YamlEditError('an empty block mapping');
  const indent = column(ctx.text, rangeOf(map.items[0]!.key as Node)![0]);
  return insertLines(ctx, endOf(last), blockLines(ctx, indent, keys, value));
}

/** Where an entry's text ends: its value's, or the last entry's of a block collection value. */
function endOf(n: Pair | Node): number {
  if (isPair(n)) return n.value ? endOf(n.value as Node) : endOf(n.key as Node);
  if (isCollection(n) && !n.flow && n.items.length) return endOf(n.items.at(-1) as Pair | Node);
  return rangeOf(n)![1];
}

/** Inserts whole lines after the line that holds offset `pos`. */
function insertLines(ctx: Ctx, pos: number, lines: string[]): string {
  let p = pos;
  while (p > 0 && (ctx.text[p - 1] === '\n' || ctx.text[p - 1] === '\r')) p--;
  const nl = ctx.text.indexOf('\n', p);
  if (nl < 0) return ctx.text + ctx.eol + lines.join(ctx.eol);
  return splice(ctx, nl + 1, nl + 1, lines.join(ctx.eol) + ctx.eol);
}

function blockLines(ctx: Ctx, indent: number, keys: readonly string[], value: EditValue): string[] {
  return keys.map(
    (k, j) =>
      `${' '.repeat(indent + j * ctx.step)}${keyText(k, false)}:${j === keys.length - 1 ? ` ${scalarText(value, false)}` : ''}`,
  );
}

/** `a: {b: value}` for keys a, b; `inFlow` when the text goes inside braces already. */
function flowEntry(keys: readonly string[], value: EditValue, asValue: boolean): string {
  const inner = keys
    .slice(1)
    .reduceRight((acc, k) => `{${keyText(k, true)}: ${acc}}`, scalarText(value, true));
  const entry = `${keyText(keys[0]!, true)}: ${inner}`;
  return asValue ? `{${entry}}` : entry;
}

const keyText = (k: string, flow: boolean) => scalarText(k, flow);

/** A value as YAML: plain when it reads back as the same string, else double-quoted (JSON). */
function scalarText(v: EditValue, flow: boolean): string {
  if (typeof v === 'boolean') return String(v);
  if (/^[A-Za-z0-9_./][A-Za-z0-9_./:+-]*$/.test(v) && !(flow && v.includes(':'))) {
    try {
      if (parse(v) === v) return v;
    } catch {
      // not plain, then
    }
  }
  return JSON.stringify(v);
}

/** The file's own step between a key and the keys of the mapping under it; 2 if none nests. */
function indentStep(text: string, root: Node | null): number {
  const walk = (n: Node | null | undefined): number | undefined => {
    if (!isMap(n) || n.flow) return undefined;
    for (const p of n.items) {
      const child = p.value as Node | null;
      if (isMap(child) && !child.flow && child.items[0]?.key && p.key) {
        const d =
          column(text, rangeOf(child.items[0].key as Node)![0]) - column(text, rangeOf(p.key as Node)![0]);
        if (d > 0) return d;
      }
      const deeper = walk(child);
      if (deeper) return deeper;
    }
    return undefined;
  };
  return walk(root) ?? 2;
}
