/** Terminal-aware output helpers: colour only on a TTY and without NO_COLOR. */
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
