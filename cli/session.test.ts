import { describe, expect, it } from 'vitest';
import { CROSS_FILE_CODES, SpecLoader } from '../controller/index.js';
import { remoteJobDir } from './commands/ssh.js';
import { sessionName, sessionRunYaml } from './session.js';

describe('session runs', () => {
  it('get a fresh, valid name from the user and the time', () => {
    const at = new Date('2026-01-21T10:15:00.123Z');
    expect(sessionName('notebook', 'Ada.Lovelace', at)).toBe('nb-ada-lovelace-20260121-101500');
    expect(sessionName('shell', '___', at)).toBe('sh-user-20260121-101500');
  });

  it('are written as a person would write them, and load without errors', () => {
    const yaml = sessionRunYaml('nb-ada-20260121-101500', 'notebook', {
      on: 'ssh-gpu',
      gpus: 1,
      envRef: 'cuda12@2',
      idleSec: 600,
      who: 'ada',
      at: '2026-01-21T10:15:00Z',
    });
    expect(yaml).toContain('# Written by adv notebook for ada at 2026-01-21T10:15:00Z');
    expect(yaml).toContain('  session:\n    kind: notebook\n    idleTimeoutSec: 600\n');
    expect(yaml).toContain(
      '  environment: cuda12@2\n  resources:\n    gpus: 1\n  backendSelector:\n    order: [ssh-gpu]\n',
    );
    const loader = new SpecLoader();
    loader.loadFile('runs/nb.yaml', Buffer.from(yaml), 'test');
    const r = loader.result();
    expect(r.diagnostics.filter((d) => d.severity === 'error' && !CROSS_FILE_CODES.has(d.code))).toEqual([]);
    expect([...r.objects, ...r.invalid][0]).toMatchObject({ kind: 'Run', name: 'nb-ada-20260121-101500' });
  });

  it('a session with a command is refused, with the line', () => {
    const loader = new SpecLoader();
    loader.loadFile(
      'runs/x.yaml',
      Buffer.from(
        'apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata: {name: x}\nspec:\n  command: [python, a.py]\n  session: {kind: shell}\n',
      ),
      'test',
    );
    const [d] = loader.result().diagnostics.filter((x) => x.severity === 'error');
    expect(d).toMatchObject({ code: 'SessionWithCommand', line: 6 });
  });

  it('adv ssh finds a job dir where the remote adapter puts it', () => {
    const ssh = { type: 'ssh', paths: { root: '/scratch/adv' } } as never;
    expect(remoteJobDir(ssh, 'adv-x-1')).toBe('/scratch/adv/work/adv-x-1');
    expect(remoteJobDir({ type: 'ssh' } as never, 'adv-x-1')).toBe('~/.adventuretime/work/adv-x-1');
    expect(remoteJobDir({ type: 'ssh', paths: { work: '/fast' } } as never, 'adv-x-1')).toBe('/fast/adv-x-1');
  });
});
