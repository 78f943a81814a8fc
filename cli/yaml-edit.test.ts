import { describe, expect, it } from 'vitest';
import { setInYaml, YamlEditError } from './yaml-edit.js';

const isRun = (name: string) => (v: unknown) =>
  (v as { kind?: string; metadata?: { name?: string } } | null)?.kind === 'Run' &&
  (v as { metadata: { name?: string } }).metadata.name === name;

const SUSPEND = ['spec', 'suspend'];
const RETRY = ['metadata', 'annotations', 'adventuretime.dev/retry-requested-at'];
const AT = '2026-05-01T12:00:00.000Z';

describe('setInYaml: a minimal edit, the rest of the file byte for byte', () => {
  it('inserts a missing key as one line at the indentation of its siblings', () => {
    const text = `# head comment
kind: Run   # odd spacing
metadata:
    name: x
spec:
    command: [ "sh",  "-c" ]   # trailing comment
    backendSelector:
        order:
          - local
    # a comment at the end of spec

other: 1
`;
    expect(setInYaml(text, isRun('x'), SUSPEND, true)).toBe(
      text.replace('          - local\n', '          - local\n    suspend: true\n'),
    );
  });

  it('replaces an existing value and keeps the comment after it', () => {
    const text = 'kind: Run\nmetadata: {name: x}\nspec:\n  suspend:   false # was running\n  command: [a]\n';
    expect(setInYaml(text, isRun('x'), SUSPEND, true)).toBe(text.replace('false', 'true'));
  });

  it('fills `key:` with nothing after it', () => {
    const text = 'kind: Run\nmetadata: {name: x}\nspec:\n  suspend:\n  command: [a]\n';
    expect(setInYaml(text, isRun('x'), SUSPEND, true)).toBe(text.replace('suspend:', 'suspend: true'));
  });

  it('adds missing parents with the file’s own indentation step', () => {
    const text = 'kind: Run\nmetadata:\n    name: x\n    labels:\n        a: b\nspec:\n    command: [a]\n';
    expect(setInYaml(text, isRun('x'), RETRY, AT)).toBe(
      text.replace(
        '        a: b\n',
        `        a: b\n    annotations:\n        adventuretime.dev/retry-requested-at: ${AT}\n`,
      ),
    );
  });

  it('adds to an existing mapping, and replaces an existing annotation', () => {
    const text = `kind: Run\nmetadata:\n  name: x\n  annotations:\n    note: "keep"\n    adventuretime.dev/retry-requested-at: "old"  # c\nspec: {}\n`;
    expect(setInYaml(text, isRun('x'), RETRY, AT)).toBe(text.replace('"old"', AT));
    const none = text.replace('    adventuretime.dev/retry-requested-at: "old"  # c\n', '');
    expect(setInYaml(none, isRun('x'), RETRY, AT)).toBe(
      none.replace('"keep"\n', `"keep"\n    adventuretime.dev/retry-requested-at: ${AT}\n`),
    );
  });

  it('writes inside the braces of a flow mapping', () => {
    const text = 'kind: Run\nmetadata: {name: x,  labels: {a: b} }\nspec: {command: [a]}\n';
    expect(setInYaml(text, isRun('x'), SUSPEND, true)).toBe(text.replace('[a]}', '[a], suspend: true}'));
    expect(setInYaml(text, isRun('x'), RETRY, AT)).toBe(
      text.replace('{a: b} }', `{a: b}, annotations: {adventuretime.dev/retry-requested-at: "${AT}"} }`),
    );
    const empty = 'kind: Run\nmetadata: {name: x}\nspec: {}\n';
    expect(setInYaml(empty, isRun('x'), SUSPEND, true)).toBe(empty.replace('{}', '{suspend: true}'));
  });

  it('edits only the named document of several, and keeps CRLF line endings', () => {
    const one = (n: string) => `kind: Run\r\nmetadata:\r\n  name: ${n}\r\nspec:\r\n  command: [a]\r\n`;
    const text = `${one('a')}---\r\n${one('b')}---\r\n${one('c')}`;
    expect(setInYaml(text, isRun('b'), SUSPEND, true)).toBe(
      `${one('a')}---\r\n${one('b')}  suspend: true\r\n---\r\n${one('c')}`,
    );
  });

  it('keeps a file without a final newline without one', () => {
    const text = 'kind: Run\nmetadata:\n  name: x\nspec:\n  command: [a]';
    expect(setInYaml(text, isRun('x'), SUSPEND, true)).toBe(text + '\n  suspend: true');
  });

  it('replaces a block scalar whole', () => {
    const text =
      'kind: Run\nmetadata:\n  name: x\n  annotations:\n    note: |\n      two\n      lines\nspec: {}\n';
    expect(setInYaml(text, isRun('x'), ['metadata', 'annotations', 'note'], 'one')).toBe(
      'kind: Run\nmetadata:\n  name: x\n  annotations:\n    note: one\nspec: {}\n',
    );
  });

  it('quotes what would not read back as the same string', () => {
    const text = 'kind: Run\nmetadata:\n  name: x\nspec: {}\n';
    for (const v of ['true', '1.5', 'a: b', 'x #y', '', 'null'])
      expect(setInYaml(text, isRun('x'), ['metadata', 'annotations', 'k'], v)).toContain(
        `k: ${JSON.stringify(v)}`,
      );
  });

  it('refuses what it cannot do as a small edit, and a document it cannot find', () => {
    const text = 'kind: Run\nmetadata:\n  name: x\nspec:\n  suspend:\n    - true\n';
    expect(() => setInYaml(text, isRun('x'), SUSPEND, true)).toThrow(YamlEditError);
    expect(() => setInYaml(text, isRun('y'), SUSPEND, true)).toThrow('no such document');
    expect(() => setInYaml('kind: Run\nmetadata: {name: x}\nspec: [a]\n', isRun('x'), SUSPEND, true)).toThrow(
      'spec is not a mapping',
    );
  });
});
