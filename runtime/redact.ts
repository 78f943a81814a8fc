/**
 * Masking of secret values in what a job prints, as CI runners mask theirs: `adv exec` is told the
 * names of the variables it got out of band (`ADV_REDACT`), reads their values from its own
 * environment, and replaces every occurrence in the output it copies and ships, its own log lines
 * and its exit record. Values shorter than `MIN_SECRET_CHARS` are not masked (a 2-character value
 * would mask half the log); a multi-line value is masked whole and line by line.
 *
 * Output is a stream: a secret may arrive split across two reads. `StreamRedactor` holds back the
 * longest tail that could still begin a secret and releases it with the next read or at the end, so
 * a value is never shipped in pieces.
 */

/** The variable that names the variables whose values are masked. */
export const REDACT_VAR = 'ADV_REDACT';

export const MASK = '***';
export const MIN_SECRET_CHARS = 4;

/** The values to mask for `names`, read from `env` (longest first, so a longer one wins). */
export function secretValues(names: readonly string[], env: NodeJS.ProcessEnv): string[] {
  const values = new Set<string>();
  for (const name of names) {
    const v = env[name];
    if (!v) continue;
    for (const x of [v, ...v.split(/\r?\n/)]) if (x.length >= MIN_SECRET_CHARS) values.add(x);
  }
  return [...values].sort((a, b) => b.length - a.length);
}

/** The names in `ADV_REDACT` (comma-separated). */
export function redactNames(raw: string | undefined): string[] {
  return (raw ?? '').split(',').filter(Boolean);
}

/** Masks whole values in a complete text (a log line, an exit record's message). */
export function redactText(text: string, values: readonly string[]): string {
  let out = text;
  for (const v of values) if (out.includes(v)) out = out.split(v).join(MASK);
  return out;
}

/** Masks values in a byte stream; `push` returns what may be written now, `end` the rest. */
export class StreamRedactor {
  private readonly secrets: Buffer[];
  private readonly mask = Buffer.from(MASK);
  private held = Buffer.alloc(0);

  constructor(values: readonly string[]) {
    this.secrets = values.map((v) => Buffer.from(v));
  }

  get active(): boolean {
    return this.secrets.length > 0;
  }

  push(chunk: Buffer): Buffer {
    if (!this.active) return chunk;
    const masked = this.replace(Buffer.concat([this.held, chunk]));
    const keep = this.pendingPrefix(masked);
    this.held = Buffer.from(masked.subarray(masked.length - keep));
    return masked.subarray(0, masked.length - keep);
  }

  end(): Buffer {
    const rest = this.held;
    this.held = Buffer.alloc(0);
    return rest;
  }

  private replace(buf: Buffer): Buffer {
    let out = buf;
    for (const s of this.secrets) {
      let at = out.indexOf(s);
      if (at < 0) continue;
      const parts: Buffer[] = [];
      let from = 0;
      while (at >= 0) {
        parts.push(out.subarray(from, at), this.mask);
        from = at + s.length;
        at = out.indexOf(s, from);
      }
      parts.push(out.subarray(from));
      out = Buffer.concat(parts);
    }
    return out;
  }

  /** Length of the longest tail of `buf` that is a proper prefix of some secret. */
  private pendingPrefix(buf: Buffer): number {
    let best = 0;
    const len = buf.length;
    for (const s of this.secrets) {
      // Candidate starts are where the secret's first byte is, earliest (longest tail) first.
      for (let at = Math.max(0, len - s.length + 1); at < len - best; at++) {
        if (buf[at] === s[0] && buf.compare(s, 0, len - at, at, len) === 0) {
          best = len - at;
          break;
        }
      }
    }
    return best;
  }
}
