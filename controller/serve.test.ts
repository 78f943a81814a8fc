import { describe, expect, it } from 'vitest';
import { signBody, verifySignature } from './serve.js';

describe('webhook signatures', () => {
  // The example from GitHub's documentation on validating webhook deliveries.
  it('matches GitHub’s published example', () => {
    expect(signBody("It's a Secret to Everybody", 'Hello, World!')).toBe(
      'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
    );
  });
  it.each([
    ['right secret', 's', true],
    ['wrong secret', 'x', false],
  ])('%s', (_n, secret, ok) => {
    const body = Buffer.from('{"ref":"refs/heads/main"}');
    expect(verifySignature('s', body, signBody(secret, body))).toBe(ok);
  });
  it('refuses a missing header and a truncated one', () => {
    const body = Buffer.from('x');
    expect(verifySignature('s', body, undefined)).toBe(false);
    expect(verifySignature('s', body, signBody('s', body).slice(0, 20))).toBe(false);
  });
});
