/**
 * Stage 1 of loading: bytes → YAML documents with source positions, bounded.
 *
 * Bounds: file size, documents per file, alias expansion (an alias bomb is an error, not a hang),
 * nesting depth; a binary or non-UTF-8 file is refused with a clear error. Keys that would touch
 * an object's prototype (`__proto__`, `constructor`, `prototype`) are refused wherever they occur.
 */
import { isMap, isScalar, isSeq, LineCounter, parseAllDocuments, type Document, type Node } from 'yaml';
import type { Diagnostic } from './diagnostic.js';
import { formatPath } from './diagnostic.js';

export interface ParseLimits {
  /** Largest file accepted, bytes. Default 1 MiB. */
  maxFileBytes: number;
  /** Most YAML documents in one file. Default 100. */
  maxDocuments: number;
  /** Most alias dereferences per document (yaml's `maxAliasCount`). Default 100. */
  maxAliasCount: number;
  /** Deepest nesting of mappings and sequences. Default 64. */
  maxDepth: number;
}

export const DEFAULT_LIMITS: ParseLimits = {
  maxFileBytes: 1024 * 1024,
  maxDocuments: 100,
  maxAliasCount: 100,
  maxDepth: 64,
};

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/** Locates paths of one document in its file. */
export class Locator {
  constructor(
    private readonly doc: Document.Parsed,
    private readonly lines: LineCounter,
  ) {}

  /** Line and column (1-based) of a byte offset. */
  pos(offset: number): { line: number; column: number } {
    const { line, col } = this.lines.linePos(offset);
    return { line, column: col };
  }

  /** Start of the document's content (or of the document). */
  start(): { line: number; column: number } {
    const contents = this.doc.contents as Node | null;
    return this.pos(contents?.range?.[0] ?? this.doc.range[0]);
  }

  /**
   * Position of the value at `path`; with `key`, of the key of the last segment instead. When the
   * path does not exist, the deepest existing ancestor is used.
   */
  at(path: readonly (string | number)[], opts: { key?: boolean } = {}): { line: number; column: number } {
    let node: unknown = this.doc.contents;
    let best: number = (node as Node | null)?.range?.[0] ?? this.doc.range[0];
    for (let i = 0; i < path.length; i++) {
      const seg = path[i];
      if (isMap(node)) {
        const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(seg));
        if (!pair) break;
        const keyRange = isScalar(pair.key) ? pair.key.range : undefined;
        if (i === path.length - 1 && opts.key && keyRange) return this.pos(keyRange[0]);
        node = pair.value;
        const r = (pair.value as Node | null)?.range ?? keyRange;
        if (r) best = r[0];
      } else if (isSeq(node) && typeof seg === 'number') {
        const item = node.items[seg] as Node | undefined;
        if (!item) break;
        node = item;
        if (item.range) best = item.range[0];
      } else {
        break;
      }
    }
    return this.pos(best);
  }
}

export interface ParsedDocument {
  /** 0-based index of the document in its file. */
  index: number;
  /** Plain JS value of the document. */
  value: unknown;
  locator: Locator;
}

export interface ParsedFile {
  docs: ParsedDocument[];
  diagnostics: Diagnostic[];
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Parses one file. Never throws for bad input: every problem is a diagnostic. */
export function parseFile(file: string, bytes: Uint8Array, limits: ParseLimits = DEFAULT_LIMITS): ParsedFile {
  const text = decodeFile(file, bytes, limits);
  if (typeof text !== 'string') return text;
  const lines = new LineCounter();
  const all = parseAllDocuments(text, { lineCounter: lines, prettyErrors: true, uniqueKeys: true });
  const documents = Array.isArray(all) ? all : [];
  if (documents.length > limits.maxDocuments) {
    return fileError(
      file,
      'TooManyDocuments',
      `file has ${documents.length} YAML documents, over the limit of ${limits.maxDocuments}`,
      'split it into several files',
    );
  }
  const diagnostics: Diagnostic[] = [];
  const docs: ParsedDocument[] = [];
  documents.forEach((doc, index) => {
    const parsed = parseDocument(file, doc, new Locator(doc, lines), limits, diagnostics);
    if (parsed) docs.push({ index, ...parsed });
  });
  return { docs, diagnostics };
}

/** A file that cannot be read at all: one diagnostic, no documents. */
function fileError(
  file: string,
  code: string,
  message: string,
  hint: string,
  line = 1,
  column = 1,
): ParsedFile {
  return {
    docs: [],
    diagnostics: [{ severity: 'error', code, file, line, column, path: '', message, hint }],
  };
}

/**
 * The diagnostic of a file over `limits.maxFileBytes`. The loader gives it from a size it knows
 * without reading the file (a git tree, a stat), so it never needs the bytes.
 */
export function fileTooLarge(
  file: string,
  size: number,
  limits: Pick<ParseLimits, 'maxFileBytes'>,
): Diagnostic {
  return {
    severity: 'error',
    code: 'FileTooLarge',
    file,
    line: 1,
    column: 1,
    path: '',
    message: `file is ${size} bytes, over the limit of ${limits.maxFileBytes}`,
    hint:
      'split it into smaller files; if it is not a spec (data, a dump), move it out of the specs folder ' +
      'or rename it so it does not end in .yaml/.yml',
  };
}

/** The file's text, or why it has none: too large, binary, not UTF-8. A BOM is dropped. */
function decodeFile(file: string, bytes: Uint8Array, limits: ParseLimits): string | ParsedFile {
  if (bytes.byteLength > limits.maxFileBytes)
    return { docs: [], diagnostics: [fileTooLarge(file, bytes.byteLength, limits)] };
  const nul = bytes.indexOf(0);
  if (nul !== -1) {
    return fileError(
      file,
      'BinaryFile',
      `file contains a NUL byte at offset ${nul}: it looks binary, not YAML`,
      'remove it from the specs directory, or rename it so it does not end in .yaml/.yml',
    );
  }
  try {
    const text = utf8.decode(bytes);
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  } catch {
    const bad = firstInvalidUtf8(bytes);
    return fileError(
      file,
      'NotUtf8',
      `file is not valid UTF-8 (first bad byte at offset ${bad})`,
      're-save the file as UTF-8',
      countLines(bytes, bad),
      1,
    );
  }
}

type YamlDocument = Document.Parsed;

/** One document's value, or undefined with its problems added to `diagnostics`. */
function parseDocument(
  file: string,
  doc: YamlDocument,
  locator: Locator,
  limits: ParseLimits,
  diagnostics: Diagnostic[],
): { value: unknown; locator: Locator } | undefined {
  if (doc.errors.length > 0) {
    for (const err of doc.errors) {
      const p = err.linePos?.[0] ?? locator.pos(err.pos[0]);
      diagnostics.push({
        severity: 'error',
        code: 'YamlSyntax',
        file,
        line: 'line' in p ? p.line : 1,
        column: 'col' in p ? p.col : 'column' in p ? p.column : 1,
        path: '',
        message: yamlMessage(err.message),
        hint: yamlHint(err.code, err.message),
      });
    }
    return undefined;
  }
  if (doc.contents === null) return undefined; // an empty document (e.g. a trailing `---`)
  let value: unknown;
  try {
    value = doc.toJS({ maxAliasCount: limits.maxAliasCount });
  } catch (e) {
    diagnostics.push({
      severity: 'error',
      code: 'AliasLimit',
      file,
      ...locator.start(),
      path: '',
      message: `YAML aliases expand too far (${(e as Error).message.replace(/\.$/, '')})`,
      hint: `write the values out instead of nesting aliases; at most ${limits.maxAliasCount} alias expansions are allowed per document`,
    });
    return undefined;
  }
  const problems = checkShape(value, limits.maxDepth);
  for (const p of problems) {
    diagnostics.push({
      severity: 'error',
      code: p.kind === 'key' ? 'ForbiddenKey' : 'TooDeep',
      file,
      ...locator.at(p.path, { key: p.kind === 'key' }),
      path: formatPath(p.path),
      message:
        p.kind === 'key'
          ? `key "${String(p.path[p.path.length - 1])}" is not allowed`
          : `nesting is deeper than ${limits.maxDepth} levels`,
      hint: p.kind === 'key' ? 'rename or remove this key' : 'flatten the structure',
    });
  }
  return problems.length ? undefined : { value, locator };
}

interface ShapeProblem {
  kind: 'key' | 'depth';
  path: (string | number)[];
}

/** Finds prototype-polluting keys and excessive depth in a plain value. */
function checkShape(value: unknown, maxDepth: number): ShapeProblem[] {
  const out: ShapeProblem[] = [];
  const walk = (v: unknown, path: (string | number)[], depth: number): void => {
    if (v === null || typeof v !== 'object') return;
    if (depth > maxDepth) {
      out.push({ kind: 'depth', path: [...path] });
      return;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        path.push(i);
        walk(v[i], path, depth + 1);
        path.pop();
      }
      return;
    }
    for (const k of Object.keys(v)) {
      path.push(k);
      if (FORBIDDEN_KEYS.has(k)) out.push({ kind: 'key', path: [...path] });
      else walk((v as Record<string, unknown>)[k], path, depth + 1);
      path.pop();
    }
  };
  walk(value, [], 0);
  return out;
}

/** yaml's pretty errors append a code frame after the first line; keep the sentence. */
function yamlMessage(message: string): string {
  const first = message.split('\n')[0] ?? message;
  return first.replace(/ at line \d+, column \d+:?$/, '');
}

function yamlHint(code: string, message: string): string {
  if (/closing .?quote/i.test(message))
    return 'close the quoted string on the same line, or use a block scalar (|) for text over several lines';
  if (/flow (sequence|mapping)/i.test(message))
    return 'close the [ ] or { } it opened, or write the list one "- item" per line';
  switch (code) {
    case 'DUPLICATE_KEY':
      return 'remove one of the two keys; a mapping may name a key only once';
    case 'BAD_INDENT':
    case 'MISSING_CHAR':
    case 'UNEXPECTED_TOKEN':
      return 'check the indentation (spaces, not tabs) and that every "key: value" has a space after the colon';
    case 'TAB_AS_INDENT':
      return 'indent with spaces, not tabs';
    case 'BLOCK_AS_IMPLICIT_KEY':
    case 'MULTILINE_IMPLICIT_KEY':
      return 'quote the value, or put a space after the colon';
    default:
      return 'fix the YAML syntax at this position (a YAML linter shows the same)';
  }
}

/** Offset of the first byte that breaks UTF-8 (lead byte, continuation or truncation). */
function firstInvalidUtf8(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length;) {
    const b = bytes[i]!;
    const len =
      b < 0x80 ? 1 : b >= 0xc2 && b < 0xe0 ? 2 : b >= 0xe0 && b < 0xf0 ? 3 : b >= 0xf0 && b < 0xf5 ? 4 : 0;
    if (len === 0) return i;
    for (let k = 1; k < len; k++) if (i + k >= bytes.length || (bytes[i + k]! & 0xc0) !== 0x80) return i;
    i += len;
  }
  return bytes.length;
}

function countLines(bytes: Uint8Array, end: number): number {
  let line = 1;
  for (let i = 0; i < end && i < bytes.length; i++) if (bytes[i] === 0x0a) line++;
  return line;
}
