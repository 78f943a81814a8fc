import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SecretSources } from './secrets.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'adv-secrets-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function secretsFile(text: string, mode = 0o600): Promise<string> {
  const f = join(dir, 'secrets.env');
  await writeFile(f, text);
  await chmod(f, mode);
  return f;
}

describe('SecretSources', () => {
  it('reads a dotenv file: quotes, export, comments, multi-line values', async () => {
    const file = await secretsFile(
      '# lab secrets\nWANDB_API_KEY=w-123\nexport HF_TOKEN="hf # not a comment\\nline 2"\nSINGLE=\'$NOT_EXPANDED\'\nKEY="a\nb"\n',
    );
    const s = new SecretSources({ file }, {});
    expect(s.get('WANDB_API_KEY')).toBe('w-123');
    expect(s.get('HF_TOKEN')).toBe('hf # not a comment\nline 2');
    expect(s.get('SINGLE')).toBe('$NOT_EXPANDED');
    expect(s.get('KEY')).toBe('a\nb');
    expect(s.get('MISSING')).toBeUndefined();
  });

  it('refuses a secrets file group or others may read, naming the fix', async () => {
    const file = await secretsFile('A=1\n', 0o644);
    expect(() => new SecretSources({ file }, {})).toThrow(
      /may be read or written by group or others \(mode 644\)/,
    );
    try {
      new SecretSources({ file }, {});
    } catch (e) {
      expect((e as { data: { hint: string } }).data.hint).toBe(`chmod 600 ${file}`);
    }
    expect(() => new SecretSources({ file: join(dir, 'nope') }, {})).toThrow(/no such file/);
  });

  it('re-reads the file when it changes', async () => {
    const file = await secretsFile('A=1\n');
    const s = new SecretSources({ file }, {});
    expect(s.get('B')).toBeUndefined();
    await writeFile(file, 'A=1\nB=two-two\n');
    expect(s.get('B')).toBe('two-two');
  });

  it('reads a Kubernetes-style dir (symlinked files, content kept as is)', async () => {
    const data = join(dir, '..2026_11_24');
    await mkdir(data);
    await writeFile(join(data, 'HF_TOKEN'), 'hf-value\n');
    await symlink(join(data, 'HF_TOKEN'), join(dir, 'HF_TOKEN'));
    const s = new SecretSources({ dir }, {});
    expect(s.get('HF_TOKEN')).toBe('hf-value\n');
    expect(s.get('../etc/passwd')).toBeUndefined();
    expect(() => new SecretSources({ dir: join(dir, 'missing') }, {})).toThrow(/is not a directory/);
  });

  it('takes the environment only for the names it is told, and never ADV_*', async () => {
    const env = { ALLOWED: 'a-value', OTHER: 'o-value', ADV_GIT_TOKEN: 'git' };
    const s = new SecretSources({ env: ['ALLOWED'] }, env);
    expect(s.get('ALLOWED')).toBe('a-value');
    expect(s.get('OTHER')).toBeUndefined();
    expect(s.get('ADV_GIT_TOKEN')).toBeUndefined();
    expect(() => new SecretSources({ env: ['ADV_GIT_TOKEN'] }, env)).toThrow(/controller's own settings/);
    expect(() => new SecretSources({ env: ['A-B'] }, env)).toThrow(/not a variable name/);
  });

  it('looks in order: file, dir, environment; and says where it looked', async () => {
    const file = await secretsFile('X=from-file\n');
    const sdir = join(dir, 'd');
    await mkdir(sdir);
    await writeFile(join(sdir, 'X'), 'from-dir');
    await writeFile(join(sdir, 'Y'), 'from-dir');
    const s = new SecretSources({ file, dir: sdir, env: ['X', 'Y', 'Z'] }, { X: 'e', Y: 'e', Z: 'from-env' });
    expect([s.get('X'), s.get('Y'), s.get('Z')]).toEqual(['from-file', 'from-dir', 'from-env']);
    expect(s.where).toBe(
      `--secrets-file ${file}, --secrets-dir ${sdir}, the controller's environment (--secrets-env X,Y,Z)`,
    );
    expect(new SecretSources({}, {}).where).toMatch(
      /^no source \(the controller was started without --secrets-file/,
    );
  });
});
