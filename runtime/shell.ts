/**
 * The one way a value reaches a shell: POSIX single quotes. Every command the controller runs
 * remotely is an argument vector joined with `shellJoin`; no spec value is pasted in unquoted.
 */

/** Quotes one argument for sh: `it's` → `'it'\''s'`. Refuses NUL, which no argv can hold. */
export function shellQuote(arg: string): string {
  if (arg.includes('\0')) throw new Error('a shell argument cannot contain a NUL byte');
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return arg;
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** An argument vector as one sh command line, every element quoted. */
export function shellJoin(argv: readonly string[]): string {
  return argv.map(shellQuote).join(' ');
}
