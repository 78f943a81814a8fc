import { describe, expect, it } from 'vitest';
import { MASK, StreamRedactor, redactNames, redactText, secretValues } from './redact.js';

/** Feeds `text` to a redactor in pieces cut at `cuts`, and returns everything it let out. */
function streamed(values: string[], text: string, cuts: number[]): string {
  const r = new StreamRedactor(values);
  const bytes = Buffer.from(text);
  const out: Buffer[] = [];
  let from = 0;
  for (const c of [...cuts, bytes.length]) {
    out.push(r.push(bytes.subarray(from, c)));
    from = c;
  }
  out.push(r.end());
  return Buffer.concat(out).toString();
}

describe('secretValues', () => {
  it('reads the named values, skips short and unset ones, and masks a multi-line value line by line', () => {
    const env = { A: 'hunter2-long', B: 'abc', C: 'line-one\nline-two', D: undefined };
    expect(secretValues(['A', 'B', 'C', 'D', 'E'], env)).toEqual([
      'line-one\nline-two',
      'hunter2-long',
      'line-one',
      'line-two',
    ]);
  });
  it('parses ADV_REDACT', () => {
    expect(redactNames('A,B,,C')).toEqual(['A', 'B', 'C']);
    expect(redactNames(undefined)).toEqual([]);
  });
});

describe('redactText', () => {
  it('masks every occurrence, the longer value first', () => {
    expect(redactText('x=sekret-value y=sekret-value-2', ['sekret-value-2', 'sekret-value'])).toBe(
      `x=${MASK} y=${MASK}`,
    );
  });
});

describe('StreamRedactor', () => {
  const canary = 'canary-7f3a9c';
  const text = `token=${canary}\nagain ${canary}${canary} done\n`;
  const expected = `token=${MASK}\nagain ${MASK}${MASK} done\n`;

  it('masks a value however the stream is cut, including inside the value', () => {
    for (let a = 0; a <= text.length; a++)
      for (const b of [a, a + 3, a + 9])
        expect(streamed([canary], text, [a, Math.min(b, text.length)])).toBe(expected);
  });

  it('byte by byte', () => {
    const cuts = Array.from({ length: text.length }, (_, i) => i);
    expect(streamed([canary], text, cuts)).toBe(expected);
  });

  it('holds back only a tail that could begin a secret, and lets it out at the end', () => {
    const r = new StreamRedactor([canary]);
    expect(r.push(Buffer.from('step 1 can')).toString()).toBe('step 1 ');
    expect(r.push(Buffer.from('not')).toString()).toBe('cannot');
    expect(r.push(Buffer.from(' canar')).toString()).toBe(' ');
    expect(r.end().toString()).toBe('canar');
  });

  it('is a pass-through with no secrets', () => {
    const r = new StreamRedactor([]);
    const b = Buffer.from('anything');
    expect(r.push(b)).toBe(b);
    expect(r.active).toBe(false);
  });

  it('masks multi-byte values split inside a character', () => {
    const v = 'ключ-секрет';
    const t = `a ${v} b`;
    for (let i = 0; i < Buffer.byteLength(t); i++) expect(streamed([v], t, [i])).toBe(`a ${MASK} b`);
  });
});
