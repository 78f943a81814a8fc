import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { parseSetArg } from '../set-args.js';
import { forkDocument } from './fork.js';

const FILE = `# two runs in one file
apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: other
spec:
  command: [echo, other]
---
# the base run
apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: train
  labels: {project: fork}
  annotations:
    adventuretime.dev/retry-requested-at: "2026-11-01T00:00:00Z"
    owner: ada
spec:
  command: [python3, train.py]   # the entry point
  env: {LR: "3e-4"}
  suspend: true
`;

describe('forkDocument', () => {
  it('is the parent document renamed, with the sets, forkFrom added, and its own life left behind', () => {
    const text = forkDocument(
      FILE,
      'train',
      'train-fork-20',
      20,
      [parseSetArg('env.LR=1e-4'), parseSetArg('policy.maxAttempts=2')],
      'runs/train.yaml at abc',
    );
    expect(text).toContain('# the entry point');
    expect(text).toMatch(
      /^# Forked by adv fork from run\/train at checkpoint step 20 \(its spec: runs\/train.yaml at abc\)\./,
    );
    expect(parse(text)).toEqual({
      apiVersion: 'adventuretime.dev/v1alpha1',
      kind: 'Run',
      metadata: { name: 'train-fork-20', labels: { project: 'fork' }, annotations: { owner: 'ada' } },
      spec: {
        command: ['python3', 'train.py'],
        env: { LR: '1e-4' },
        policy: { maxAttempts: 2 },
        forkFrom: { run: 'train', step: 20 },
      },
    });
  });

  it('drops an annotations map left empty, and works on a run without one', () => {
    const bare =
      'apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: a\nspec:\n  command: [x]\n';
    expect(parse(forkDocument(bare, 'a', 'b', 0, [], 'f'))).toMatchObject({ metadata: { name: 'b' } });
    const only = bare.replace(
      '  name: a\n',
      '  name: a\n  annotations:\n    adventuretime.dev/reconcile-requested-at: x\n',
    );
    expect(parse(forkDocument(only, 'a', 'b', 0, [], 'f')).metadata).toEqual({ name: 'b' });
  });

  it('a set through a value that is not a map says so', () => {
    expect(() => forkDocument(FILE, 'train', 'n', 1, [parseSetArg('command.x=1')], 'f')).toThrow(
      /command is not a map in the spec/,
    );
  });
});
