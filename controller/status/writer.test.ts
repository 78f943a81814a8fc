import { describe, expect, it } from 'vitest';
import { commitMessage } from './writer.js';
import { printable } from './printable.js';

describe('commitMessage', () => {
  it('one change: its summary as the subject, then trailers', () => {
    expect(
      commitMessage(
        [
          {
            kind: 'Run',
            name: 'foo',
            summary: 'run/foo: Running (attempt 2 on slurm-a, job 81234)',
            trailers: [
              ['Run', 'foo'],
              ['Attempt', '2'],
            ],
          },
        ],
        'abc',
      ),
    ).toBe('run/foo: Running (attempt 2 on slurm-a, job 81234)\n\nSpec-Commit: abc\nRun: foo\nAttempt: 2\n');
  });

  it('one run among backend updates: the run is the subject', () => {
    const msg = commitMessage([
      { kind: 'Backend', name: 'local', summary: 'backend/local: Ready', trailers: [['Backend', 'local']] },
      { kind: 'Run', name: 'a', summary: 'run/a: Submitting attempt 1 to local', trailers: [['Run', 'a']] },
    ]);
    expect(msg.split('\n')[0]).toBe('run/a: Submitting attempt 1 to local (+1 more)');
  });

  it('several: a subject that counts them, a line each, every trailer once', () => {
    const msg = commitMessage(
      [
        {
          kind: 'Run',
          name: 'a',
          summary: 'run/a: Succeeded (attempt 1 on local, job 7, exit 0)',
          trailers: [
            ['Run', 'a'],
            ['Attempt', '1'],
          ],
        },
        {
          kind: 'Run',
          name: 'b',
          summary: 'run/b: Submitting attempt 1 to local',
          trailers: [
            ['Run', 'b'],
            ['Attempt', '1'],
          ],
        },
        { kind: 'Backend', name: 'local', summary: 'backend/local: Ready', trailers: [['Backend', 'local']] },
      ],
      'abc',
    );
    expect(msg).toBe(
      'status: 2 runs, 1 backend changed\n\n- run/a: Succeeded (attempt 1 on local, job 7, exit 0)\n- run/b: Submitting attempt 1 to local\n- backend/local: Ready\n\nSpec-Commit: abc\nRun: a\nAttempt: 1\nRun: b\nBackend: local\n',
    );
  });
});

describe('spec-controlled text in commit messages', () => {
  it('escapes control characters, so a message cannot clear a screen or forge a line', () => {
    const msg = commitMessage([
      {
        kind: 'Run',
        name: 'x',
        summary: 'run/x: spec invalid (a\u001b[2J\nforged: line\r\u202eevil)',
        trailers: [['Run', 'x\nSpec-Commit: forged']],
      },
    ]);
    expect(msg).toBe(
      'run/x: spec invalid (a\\x1b[2J\\x0aforged: line\\x0d\\u202eevil)\n\nRun: x\\x0aSpec-Commit: forged\n',
    );
  });

  it('leaves ordinary text alone', () => {
    expect(printable('run/é-ü: Running (attempt 1 on local) ✓')).toBe(
      'run/é-ü: Running (attempt 1 on local) ✓',
    );
    expect(printable('tab\there')).toBe('tab\\x09here');
  });
});
