/** Terminal-aware output helpers: colour only on a TTY and without NO_COLOR; spec text made printable. */
import { printable } from '../controller/index.js';

export interface Io {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  env: NodeJS.ProcessEnv;
  cwd: string;
}

export const defaultIo = (): Io => ({
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  cwd: process.cwd(),
});

export function colours(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv) {
  const on = Boolean(stream.isTTY) && env.NO_COLOR === undefined && env.TERM !== 'dumb';
  const wrap = (code: number) => (s: string) => (on ? `\x1b[${code}m${s}\x1b[0m` : s);
  return { red: wrap(31), green: wrap(32), yellow: wrap(33), dim: wrap(2), bold: wrap(1) };
}

export const OUTPUT_FORMATS = ['table', 'wide', 'yaml', 'json'] as const;

/**
 * Text the CLI did not write itself (names, labels, messages, file names: from specs, the status
 * branch, a backend or the command line) goes through the controller's `printable` before it
 * reaches a terminal: control characters, line separators and bidi overrides become visible
 * escapes (`\x1b`), so a value cannot clear the screen, move the cursor or forge a row. JSON and
 * YAML output is left to its serializer.
 */
export { printable };

/**
 * `printable` for a message of several lines (an error with git's stderr in it): each line is
 * escaped, the line breaks between them are kept.
 */
export function printableLines(text: string): string {
  return text
    .split('\n')
    .map((line) => printable(line))
    .join('\n');
}

/**
 * A template literal whose interpolated values are made `printable`, its literal parts kept:
 * `` safe`Name:  ${name}` `` — for lines the CLI composes from spec- or status-controlled text.
 */
export function safe(strings: TemplateStringsArray, ...values: unknown[]): string {
  let out = strings[0]!;
  values.forEach((v, i) => (out += printable(String(v)) + strings[i + 1]!));
  return out;
}
