import { describe, expect, it } from 'vitest';
import { applySets, parseSetArg } from './set-args.js';

describe('--set PATH=VALUE', () => {
  it('reads the path from spec and the value as YAML', () => {
    expect(parseSetArg('policy.maxAttempts=5')).toEqual({
      path: ['spec', 'policy', 'maxAttempts'],
      value: 5,
    });
    expect(parseSetArg('resources.gpus=2')).toEqual({ path: ['spec', 'resources', 'gpus'], value: 2 });
    // env, labels and annotations hold strings: what was typed, never a number YAML makes of it
    expect(parseSetArg('env.LR=3e-4')).toEqual({ path: ['spec', 'env', 'LR'], value: '3e-4' });
    expect(parseSetArg('env.DEBUG=true').value).toBe('true');
    expect(parseSetArg('metadata.labels.v=2').value).toBe('2');
    expect(parseSetArg('metadata.labels.team=nlp').path).toEqual(['metadata', 'labels', 'team']);
    expect(parseSetArg('spec.suspend=true')).toEqual({ path: ['spec', 'suspend'], value: true });
    expect(parseSetArg('command=[python3, a b.py]').value).toEqual(['python3', 'a b.py']);
    expect(parseSetArg('env.X=').value).toBe('');
  });

  it('refuses what is not a path, with the form to use', () => {
    expect(() => parseSetArg('policy')).toThrow(/no "="/);
    expect(() => parseSetArg('a..b=1')).toThrow(/dotted keys/);
    expect(() => parseSetArg('env.__proto__=1')).toThrow(/not a field/);
    expect(() => parseSetArg('spec=1')).toThrow(/not spec itself/);
    try {
      parseSetArg('x');
    } catch (e) {
      expect((e as { data: { hint?: string } }).data.hint).toMatch(/--set policy.maxAttempts=5/);
    }
  });

  it('sets values into a document, making maps on the way, and refuses to replace a scalar by a map', () => {
    const doc: Record<string, unknown> = { spec: { command: ['x'], policy: { maxAttempts: 3 } } };
    applySets(doc, [parseSetArg('policy.maxAttempts=5'), parseSetArg('env.A=b')]);
    expect(doc).toEqual({ spec: { command: ['x'], policy: { maxAttempts: 5 }, env: { A: 'b' } } });
    expect(() => applySets(doc, [parseSetArg('command.x=1')])).toThrow(/command is not a map/);
  });
});
