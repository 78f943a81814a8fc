import { describe, expect, it } from 'vitest';
import { commandRunName } from './local-run.js';
import { checkName } from './names.js';

describe('the run name of adv run -- COMMAND', () => {
  it('is stable for a command in a directory, and another for other arguments or another directory', () => {
    const cmd = ['python3', 'train.py', '--lr', '0.1'];
    const name = commandRunName(cmd, '/home/me/proj');
    expect(name).toMatch(/^train-py-[0-9a-f]{8}$/);
    expect(commandRunName([...cmd], '/home/me/proj')).toBe(name);
    expect(commandRunName([...cmd], '/home/me/proj/')).toBe(name);
    expect(commandRunName(['python3', 'train.py', '--lr', '0.2'], '/home/me/proj')).not.toBe(name);
    expect(commandRunName(cmd, '/home/me/other')).not.toBe(name);
    // Arguments are kept apart: the same words split differently are another command.
    expect(commandRunName(['sh', '-c', 'a b'], '/d')).not.toBe(commandRunName(['sh', '-c a', 'b'], '/d'));
  });

  it('names the script an interpreter runs, else the program, and is always a valid run name', () => {
    expect(commandRunName(['python', '-m', 'lab.train'], '/d')).toMatch(/^lab-train-/);
    expect(commandRunName(['./scripts/Train_Big.sh'], '/d')).toMatch(/^train-big-sh-/);
    expect(commandRunName(['sh', '-c', 'echo "$ADV_RUN"; exit 3'], '/d')).toMatch(/^sh-/);
    for (const argv of [['---'], ['python3', 'x'.repeat(200) + '.py'], ['/usr/bin/ÉTÉ'], ['']])
      expect(checkName(commandRunName(argv, '/d'))).toBeTruthy();
  });
});
