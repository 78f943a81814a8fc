import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseSetArg } from './set-args.js';
import { nameFromCommand, stamp, submitSpecText, type SubmitSpecInput } from './submit-spec.js';

const input = (over: Partial<SubmitSpecInput> = {}): SubmitSpecInput => ({
  name: 'train-20261127-101500',
  command: ['python3', 'train.py', '--lr', '3e-4'],
  env: {},
  sets: [],
  code: { ref: 'a'.repeat(40) },
  workingDir: '',
  header: ['Written by adv submit from branch main at 0123456789.'],
  ...over,
});

describe('nameFromCommand', () => {
  it.each([
    [['python3', 'train.py'], 'train'],
    [['python', '-u', 'scripts/Fine_Tune.py', '--x'], 'fine-tune'],
    [['uv', 'run', 'python', '-m', 'lab.train_gpt'], 'train-gpt'],
    [['torchrun', '--nproc-per-node=8', 'pretrain.py'], 'pretrain'],
    [['bash', 'run.sh'], 'run'],
    [['./a.out'], 'a-out'],
    [['python3'], 'run'],
    [['LR=3', '..'], 'run'],
  ])('%j → %s', (command, name) => {
    expect(nameFromCommand(command)).toBe(name);
  });

  it('is a DNS-1123 label of at most 40 characters, so the stamp still fits a run name', () => {
    const n = nameFromCommand(['python3', `${'Very_Long-'.repeat(10)}.py`]);
    expect(n.length).toBeLessThanOrEqual(40);
    expect(n).toMatch(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/);
    expect(stamp(new Date('2026-11-27T10:15:00.123Z'))).toBe('20261127-101500');
  });
});

describe('submitSpecText', () => {
  it('writes a spec as a person would: header, the docs’ field order, short lists in flow style', () => {
    const text = submitSpecText(
      input({
        backend: 'ssh-local',
        gpus: 2,
        env: { LR: '3e-4' },
        workingDir: 'exp',
        sets: [parseSetArg('policy.maxAttempts=5')],
      }),
    );
    expect(text).toBe(`# Written by adv submit from branch main at 0123456789.
apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: train-20261127-101500
spec:
  command: [python3, train.py, --lr, "3e-4"]
  workingDir: exp
  code:
    ref: ${'a'.repeat(40)}
  resources:
    gpus: 2
  env:
    LR: "3e-4"
  backendSelector:
    order: [ssh-local]
  policy:
    maxAttempts: 5
`);
    // Strings stay strings ("3e-4" is not read back as a number).
    expect((parse(text) as { spec: { env: { LR: unknown } } }).spec.env.LR).toBe('3e-4');
  });

  it('-f: keeps the file’s fields and comments, replaces its command, name and code, keeps code.path', () => {
    const base = `# the lab's template
apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: base
  labels: {team: nlp}
spec:
  entry: train.py:main
  code: {ref: main, path: models}
  policy:
    maxAttempts: 9 # generous: preemptible nodes
`;
    const text = submitSpecText(
      input({
        base: { file: 'base.yaml', text: base },
        code: { ref: 'b'.repeat(40), repo: 'https://git.example.com/lab/mono.git' },
      }),
    );
    const doc = parse(text) as { metadata: unknown; spec: Record<string, unknown> };
    expect(doc.metadata).toEqual({ name: 'train-20261127-101500', labels: { team: 'nlp' } });
    expect(doc.spec).toEqual({
      code: { repo: 'https://git.example.com/lab/mono.git', ref: 'b'.repeat(40), path: 'models' },
      policy: { maxAttempts: 9 },
      command: ['python3', 'train.py', '--lr', '3e-4'],
    });
    expect(text).toContain('maxAttempts: 9 # generous: preemptible nodes');
    expect(text).not.toContain("the lab's template");
    expect(text.startsWith('# Written by adv submit')).toBe(true);
  });

  it('says what is wrong with a bad -f, a missing command or a --set through a scalar', () => {
    expect(() => submitSpecText(input({ base: { file: 'b.yaml', text: 'kind: DAG\n' } }))).toThrow(
      /b\.yaml: kind is DAG; -f takes one Run/,
    );
    expect(() =>
      submitSpecText(input({ base: { file: 'b.yaml', text: 'kind: Run\n---\nkind: Run\n' } })),
    ).toThrow(/2 documents/);
    expect(() => submitSpecText(input({ command: [] }))).toThrow(/no command/);
    expect(() => submitSpecText(input({ sets: [parseSetArg('command.x=1')] }))).toThrow(
      /command is not a map/,
    );
  });
});
