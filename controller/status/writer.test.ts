import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { git, NativeGit } from '../git/native.js';
import type { RunStatusDoc, StatusDoc } from './types.js';
import { commitMessage, StatusWriter } from './writer.js';
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

describe('StatusWriter names and lookups', () => {
  const doc = (name: string, phase: string) =>
    ({
      apiVersion: 'v1',
      kind: 'RunStatus',
      metadata: { name },
      status: { phase, attempts: [] },
    }) as unknown as StatusDoc;
  const change = { summary: 's', trailers: [] as [string, string][] };

  it('names follow staging, commits and deletions; the sorted list is shared, never stale', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'adv-writer-'));
    try {
      const gitdir = join(dir, 'repo.git');
      await git(['init', '--quiet', '--bare', gitdir]);
      const g = new NativeGit(gitdir);
      const w = new StatusWriter(g, 'refs/heads/status', { name: 'a', email: 'a@b' });
      await w.load();
      w.stage('Run', 'b', doc('b', 'Pending'), change);
      w.stage('Run', 'a', doc('a', 'Pending'), change);
      w.stage('DAG', 'd', doc('d', 'Pending'), change);
      expect(w.names('Run')).toEqual(['a', 'b']);
      await w.commitBatch();
      expect(w.names('Run')).toEqual(['a', 'b']);
      expect(w.get<RunStatusDoc>('Run', 'a')?.status).toMatchObject({ phase: 'Pending' });
      // A staged deletion hides the name; staging it back to what is committed shows it again.
      w.stage('Run', 'a', null, change);
      expect(w.names('Run')).toEqual(['b']);
      expect(w.get('Run', 'a')).toBeUndefined();
      w.stage('Run', 'a', doc('a', 'Pending'), change);
      expect(w.names('Run')).toEqual(['a', 'b']);
      expect(w.stagedCount).toBe(0);
      // A changed document of a known name: a lookup sees it staged, the names stay.
      w.stage('Run', 'b', doc('b', 'Running'), change);
      expect(w.get<RunStatusDoc>('Run', 'b')?.status).toMatchObject({ phase: 'Running' });
      w.stage('Run', 'c', doc('c', 'Pending'), change);
      expect(w.names('Run')).toEqual(['a', 'b', 'c']);
      expect(w.stagedCount).toBe(2);
      await w.commitBatch();
      w.stage('Run', 'b', null, change);
      await w.commitBatch();
      expect(w.names('Run')).toEqual(['a', 'c']);
      expect(w.names('DAG')).toEqual(['d']);
      expect(Object.isFrozen(w.names('Run'))).toBe(true);
      // A fresh load of the branch says the same.
      const again = new StatusWriter(g, 'refs/heads/status', { name: 'a', email: 'a@b' });
      await again.load();
      expect(again.names('Run')).toEqual(['a', 'c']);
      expect(again.get<RunStatusDoc>('Run', 'c')?.status).toMatchObject({ phase: 'Pending' });
      await g.close();
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
