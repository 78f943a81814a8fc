/**
 * Hostile strings for the injection fuzz suite, generated deterministically: the same seed gives
 * the same strings, in the same order, on every machine (a seeded PRNG, never `Math.random`).
 *
 * Every string that could run a command if some layer pasted it into a shell, an sbatch script,
 * a printf format or an option list carries its own marker path under `markerDir` (`touch
 * <markerDir>/m<id>-<k>`): a file there after the jobs ran is an escape, and its name says which
 * string escaped. `markerDir` must be a plain absolute path (no shell characters of its own).
 */
import { MAX_ARG_BYTES } from '../../../controller/spec/rules.js';

/** One generated string. */
export interface Hostile {
  /** Position in the generated list (markers are named `m<n>-<k>` after it). */
  n: number;
  /** Stable id: `<family>-<i>`. */
  id: string;
  family: string;
  text: string;
  /** Marker files this string would create if any of its payloads ran. */
  markers: string[];
}

/** mulberry32: a tiny seeded PRNG with a 2^32 period, plenty for picking fragments. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const IFS = '${IFS}';

/** Payloads that run `touch <marker>` in some interpreter if the string is ever evaluated. */
const PAYLOADS: ((m: () => string) => string)[] = [
  (m) => `$(touch ${m()})`,
  (m) => `\`touch ${m()}\``,
  (m) => `;touch ${m()}`,
  (m) => `; touch ${m()};`,
  (m) => `&& touch ${m()}`,
  (m) => `|| touch ${m()}`,
  (m) => `| touch ${m()}`,
  (m) => `& touch ${m()} &`,
  (m) => `\ntouch ${m()}\n`,
  (m) => `\rtouch ${m()}\r`,
  (m) => `\r\ntouch ${m()}\r\n`,
  (m) => `'; touch ${m()}; '`,
  (m) => `"; touch ${m()}; "`,
  (m) => `'$(touch ${m()})'`,
  (m) => `"$(touch ${m()})"`,
  (m) => `'\\''$(touch ${m()})'\\''`,
  (m) => `\\'$(touch ${m()})`,
  (m) => `\\"$(touch ${m()})\\"`,
  (m) => `"'"'"'$(touch ${m()})"'"'"'`,
  (m) => `${IFS};touch${IFS}${m()}`,
  (m) => `$(touch${IFS}${m()})`,
  (m) => `\n#SBATCH --wrap="touch ${m()}"\ntouch ${m()}`,
  (m) => `#SBATCH --output=${m()}`,
  (m) => `\n#!/bin/sh\ntouch ${m()}\n`,
  (m) => `%s%n%x$(touch ${m()})`,
  (m) => `$'\\x74ouch' ${m()}`,
  (m) => `<(touch ${m()})`,
  (m) => `>(touch ${m()})`,
  (m) => `> ${m()}`,
  (m) => `>${m()}`,
  (m) => `2>${m()}`,
  (m) => `<<EOF\n$(touch ${m()})\nEOF\n`,
  (m) => `-oProxyCommand=touch ${m()}`,
  (m) => `--output=${m()}`,
  (m) => `-o${m()}`,
  (m) => `--wrap=touch ${m()}`,
  (m) => `-E${m()}`,
  (m) => `--upload-pack=touch ${m()}`,
  (m) => `{touch,${m()}}`,
  (m) => `\`\`touch ${m()}\`\``,
  (m) => `$((\`touch ${m()}\`))`,
  (m) => `\\\n$(touch ${m()})`,
  (m) => `\u202e$(touch ${m()})`,
  (m) => `a=$(touch ${m()})`,
  (m) => `export X=$(touch ${m()})`,
  (m) => `__import__('os').system('touch ${m()}')`,
  (m) => `\u001b]0;$(touch ${m()})\u0007`,
  (m) => `$(touch ${m()} \${IFS})`,
  (m) => `\u0000$(touch ${m()})`,
  (m) => `$(touch ${m()})\u0000`,
  (m) => `\u2028touch ${m()}\u2029`,
  (m) => `\u0085touch ${m()}`,
  (m) => `\ftouch ${m()}\v`,
];

/** Fragments that run nothing but break naive quoting, parsing, paths or terminals. */
const FRAGMENTS: string[] = [
  ...["'", '"', '\\', "\\'", '\\"', "'\\''", "''", '""', '', ' ', '\t', '  lead', 'trail  ', '`'],
  ...['../', '../../../../etc/passwd', '/etc/passwd', '/', '..', '.', './', 'a/../../b', '~', '~root'],
  ...['//', '/tmp/../', 'a//b', 'a/./b', 'dir/', '\\\\server\\share', 'C:\\Windows', 'file:///etc/passwd'],
  ...['%', '%%', '%s', '%n', '%99999999d', '%j', '%x', '%A', '%u%N%t', '\\x41', '\\n', '\\0', '%1$s'],
  ...['-', '--', '-rf', '--help', '-e', '-n', '-P', '-L', '--version', '-oFoo=bar', '--all'],
  ...['#', '#SBATCH', '# comment', '#!', '#SBATCH --mem=1', '\n#SBATCH --partition=high'],
  ...['*', '?', '[', '[a-z]', '/*', '*/*', '[!a]', '{a,b}', '**', ']', '[[', '{}'],
  ...['\u202e', '\u200b', '\u200d', '\ufeff', '😀', '👩‍👩‍👧‍👦', 'e\u0301', '\u0301', 'Ｓ', '\u2028', '\u2029'],
  ...['\u0085', '\u00a0', '中文', 'עברית', '\ufffd', '\uffff', 'İ', 'ß', 'ǅ', '\u{10FFFF}', '\u{1D11E}'],
  ...['\u001b[2J', '\u001b[31mred\u001b[0m', '\u001b]0;title\u0007', '\u0007', '\u0008', '\u007f'],
  ...['\u009b31m', '\u000b', '\u000c', '\u0001', '\u001f', '\r', '\n', '\r\n', '\n\n'],
  ...['\u0000', 'a\u0000b'],
  ...[
    '$',
    '$$',
    '$0',
    '$@',
    '$*',
    '$?',
    '$HOME',
    '${HOME}',
    '$PATH',
    '\\$HOME',
    '$ADV_RUN',
    '${ADV_JOB_DIR}',
  ],
  ...['=', 'A=B', 'key: value', '- item', '{', '}', '&anchor', '*alias', '!!binary', '---', '...', 'null'],
  ...['true', '0x1F', '1e3', 'NaN', '__proto__', 'constructor', 'toString', 'http://x', 'user@host:path'],
];

const JOINERS = ['', '', ' ', '/', '\n', '-', '_', '\t', ';', "'", '"'];

/**
 * `count` hostile strings (at least the fixed cases: every payload and every fragment alone, the
 * very long strings and those around the per-argument limit), then random combinations of 1–4
 * pieces. Deterministic for a given `seed` and `markerDir`.
 */
export function hostileStrings(opts: { markerDir: string; seed?: number; count?: number }): Hostile[] {
  const rand = prng(opts.seed ?? 0x5eed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const out: Hostile[] = [];
  const add = (family: string, build: (m: () => string) => string) => {
    const id = `${family}-${out.filter((h) => h.family === family).length}`;
    const markers: string[] = [];
    const m = () => {
      const p = `${opts.markerDir}/m${out.length}-${markers.length}`;
      markers.push(p);
      return p;
    };
    const n = out.length;
    out.push({ n, id, family, text: build(m), markers });
  };
  for (const p of PAYLOADS) add('payload', p);
  for (const f of FRAGMENTS) add('fragment', () => f);
  for (const s of longStrings(rand)) add(s.family, s.build);
  while (out.length < (opts.count ?? 1200)) {
    add('combo', (m) => {
      const n = 1 + Math.floor(rand() * 4);
      let s = '';
      for (let i = 0; i < n; i++) {
        const piece = rand() < 0.5 ? pick(PAYLOADS)(m) : pick(FRAGMENTS);
        s += (i ? pick(JOINERS) : '') + piece;
      }
      return s;
    });
  }
  return out;
}

/** `text` repeated and cut to exactly `bytes` UTF-8 bytes (never inside a character). */
export function toBytes(text: string, bytes: number): string {
  let s = text.repeat(Math.ceil(bytes / Math.max(1, Buffer.byteLength(text))) + 1);
  const buf = Buffer.from(s);
  s = buf.subarray(0, bytes).toString('utf8');
  while (Buffer.byteLength(s) > bytes || s.endsWith('\ufffd')) s = s.slice(0, -1);
  return s.padEnd(s.length + (bytes - Buffer.byteLength(s)), 'x');
}

/** Very long strings: 100 KiB of payloads, and strings just under, at and over the argument limit. */
function longStrings(rand: () => number): { family: string; build: (m: () => string) => string }[] {
  const mixed = (m: () => string) => {
    let s = '';
    while (Buffer.byteLength(s) < 4096) s += PAYLOADS[Math.floor(rand() * PAYLOADS.length)]!(m);
    return s;
  };
  const KiB = 1024;
  return [
    { family: 'long', build: (m) => toBytes(mixed(m).replaceAll('\u0000', ''), 100 * KiB) },
    { family: 'long', build: () => toBytes('A', 100 * KiB) },
    { family: 'long', build: () => toBytes("'", 20 * KiB) },
    { family: 'long', build: () => toBytes('😀', 100 * KiB) },
    { family: 'long', build: (m) => toBytes(`$(touch ${m()}) `, 100 * KiB) },
    { family: 'limit', build: () => toBytes('a', MAX_ARG_BYTES - 1) },
    { family: 'limit', build: () => toBytes('b', MAX_ARG_BYTES) },
    { family: 'limit', build: () => toBytes('c', MAX_ARG_BYTES + 1) },
    { family: 'limit', build: () => toBytes('é', MAX_ARG_BYTES + 1) },
    { family: 'limit', build: (m) => toBytes(`';touch ${m()};'`, MAX_ARG_BYTES) },
    { family: 'limit', build: () => toBytes('d', 65536) },
    { family: 'limit', build: () => toBytes('e', 65537) },
  ];
}

/**
 * A YAML double-quoted scalar holding exactly `s`: printable ASCII as is, everything else as a
 * `\u`/`\U` escape, so the spec file is plain ASCII and one line whatever `s` holds.
 */
export function yamlQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += '\\' + ch;
    else if (c >= 0x20 && c < 0x7f) out += ch;
    else if (c <= 0xffff) out += '\\u' + c.toString(16).padStart(4, '0');
    else out += '\\U' + c.toString(16).padStart(8, '0');
  }
  return out + '"';
}
