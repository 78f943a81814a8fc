/**
 * Spec-controlled text made safe to print on a terminal or to put in a commit message: control
 * characters (C0 including newline and tab, DEL, C1), line and paragraph separators and bidi
 * overrides are written as visible escapes (`\x1b`, `\u202e`). A name holding `ESC[2J` then cannot
 * clear a screen, forge a row of a table or a line of `git log --oneline`.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/g;

export function printable(text: string): string {
  return text.replace(UNSAFE, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff
      ? `\\x${code.toString(16).padStart(2, '0')}`
      : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
