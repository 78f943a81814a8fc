import { describe, expect, it } from 'vitest';
import { checkName } from './names.js';

const hintOf = (f: () => unknown): string | undefined => {
  try {
    f();
  } catch (e) {
    return (e as { data: { hint?: string } }).data.hint;
  }
  return undefined;
};

describe('checkName', () => {
  it('keeps a valid name', () => {
    expect(checkName('train-2')).toBe('train-2');
  });

  it('for a name being chosen, the fix is a valid name close to it; for an existing one, where they are listed', () => {
    expect(hintOf(() => checkName('My_Run 2', 'run', true))).toBe(
      'write it like my-run-2 (lowercase, "-" between words)',
    );
    expect(hintOf(() => checkName('__', 'run', true))).toMatch(/write it like train-2/);
    expect(hintOf(() => checkName('My_Run'))).toBe('adv get runs lists the names that exist');
  });
});
