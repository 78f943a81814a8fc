/**
 * `adv submit` as a researcher uses it: from a clone of the lab's specs repo (smart HTTP) with
 * uncommitted work, one command runs exactly that work on the ssh backend (a real sshd), through a
 * real controller in remote mode that fetches the snapshot ref — and the clone is left byte for
 * byte as it was.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { git } from '../controller/git/native.js';
import { FILE_STORAGE, sshBackendYaml } from './helpers/backends/kinds.js';
import { startGitHttp, type GitHttpServer } from './helpers/git/git-http.js';
import { captureIo, removeTree } from './helpers/io.js';
import { haveSshd, startSshd, type Sshd } from './helpers/servers/sshd.js';
import { LOCAL_BACKEND, makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';

const available = haveSshd();
if (!available && process.env.CI) throw new Error('sshd is required in CI: apt-get install openssh-server');
if (!available)
  console.warn('SKIPPING the adv submit tests: no /usr/sbin/sshd here (apt-get install openssh-server)');

// The lab's repositories are private: every request needs it (the user's and the controller's).
const TOKEN = 'adv-submit-token-7d1f';

// What the run prints is what its files held: the committed train.py says "committed".
const TRAIN = `import os
from lib import VALUE
print("train.py:", open(__file__).read().splitlines()[-1])
print("lib:", VALUE)
print("extra:", open("data/extra.txt").read().strip() if os.path.exists("data/extra.txt") else None)
print("ignored:", os.path.exists("debug.log"))
print("old.py:", os.path.exists("old.py"))
print("cwd:", os.path.basename(os.getcwd()))
# committed
`;

/**
 * Every file of the clone (its .git too) by hash: what a user could see change. Left out: the
 * object database, and the snapshot ref adv submit keeps in its own namespace (see snapshot.ts).
 */
async function fingerprint(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    const path = join(e.parentPath, e.name);
    if (!e.isFile() || /\/\.git\/(objects|refs\/adventuretime)\//.test(path)) continue;
    out[path.slice(dir.length + 1)] = createHash('sha256')
      .update(await readFile(path))
      .digest('hex');
  }
  return out;
}

describe.runIf(available)('adv submit', () => {
  let sshd: Sshd;
  let server: GitHttpServer;
  let tmp: string;
  let wt: WorkTree;
  let c: Controller;
  let loop: Promise<void>;
  let url: string;
  const env = { HOME: '', XDG_CACHE_HOME: '', ADV_GIT_TOKEN: TOKEN };

  async function adv(args: string[], cwd = wt.dir) {
    const io = captureIo({ ...env }, cwd);
    const code = await runCli(args, io);
    return { code, out: io.out(), err: io.err() };
  }
  const follow = () => ['--repo', url, '--follow', '--store', `file://${join(tmp, 'data', 'store')}`];
  const remote = async (...args: string[]) => bare('specs', ...args);
  const bare = async (repo: string, ...args: string[]) =>
    (await git(args, { gitdir: join(server.root, `${repo}.git`) })).toString('utf8').trim();

  beforeAll(async () => {
    sshd = await startSshd();
    server = await startGitHttp({ token: TOKEN });
    tmp = await mkdtemp(join(tmpdir(), 'adv-submit-'));
    env.HOME = tmp;
    env.XDG_CACHE_HOME = join(tmp, 'cache');
    await server.createRepo('specs');
    url = server.url('specs');
    wt = await makeWorkTree(
      {
        'backends/ssh-local.yaml': sshBackendYaml(sshd, 'ssh-local', join(tmp, 'root')),
        'backends/local.yaml': LOCAL_BACKEND,
        'storage.yaml': FILE_STORAGE,
        '.gitignore': '*.log\n',
        'train.py': TRAIN,
        'lib/__init__.py': 'VALUE = "committed"\n',
        'old.py': 'print("old")\n',
        'sub/README': 'a subdirectory\n',
      },
      url,
      TOKEN,
    );
    c = await Controller.create({
      repo: url,
      token: TOKEN,
      infra: { from: 'repo' },
      dataDir: join(tmp, 'data'),
      fetchIntervalMs: 300,
      pollIntervalMs: 300,
    });
    loop = c.run();
  });
  afterAll(async () => {
    await c?.stop();
    await loop;
    await wt?.cleanup();
    await server?.stop();
    await sshd?.stop();
    await removeTree(tmp);
  });

  it('runs exactly the dirty work tree on the ssh host and leaves the clone byte-identical', async () => {
    await wt.write('lib/__init__.py', 'VALUE = "staged"\n');
    await wt.git('add', 'lib/__init__.py');
    await wt.write('lib/__init__.py', 'VALUE = "work tree"\n');
    await wt.write('train.py', TRAIN + '# dirty\n');
    await wt.write('data/extra.txt', 'untracked\n');
    await wt.write('debug.log', 'ignored\n');
    await wt.remove('old.py');
    const head = await wt.git('rev-parse', 'HEAD');
    const before = await fingerprint(wt.dir);
    const status = await wt.git('status', '--porcelain');

    const r = await adv([
      'submit',
      '--on',
      'ssh-local',
      '--name',
      'dirty',
      ...follow(),
      '--',
      'python3',
      'train.py',
    ]);

    expect(r.code, r.err + r.out).toBe(0);
    expect(r.out).toContain('train.py: # dirty');
    expect(r.out).toContain('lib: work tree');
    expect(r.out).toContain('extra: untracked');
    expect(r.out).toContain('ignored: False');
    expect(r.out).toContain('old.py: False');
    // Phases as they change (a short run may pass Running between two looks).
    expect(r.err).toMatch(/run\/dirty: (Scheduling|Queued|Running) \(attempt 1 on ssh-local\)/);
    expect(r.err).toMatch(/run\/dirty: Succeeded \(attempt 1 on ssh-local\)/);
    // The clone: branch, HEAD, index and every file as they were.
    expect(await fingerprint(wt.dir)).toEqual(before);
    expect(await wt.git('status', '--porcelain')).toBe(status);
    expect(await wt.git('rev-parse', 'HEAD')).toBe(head);
    expect(await wt.git('rev-parse', 'refs/adventuretime/snapshots/dirty')).toBe(
      await remote('rev-parse', 'refs/adventuretime/snapshots/dirty'),
    );
    // On the remote: the spec on main, pinned to the snapshot, whose parent is the clone's HEAD.
    const snap = await remote('rev-parse', 'refs/adventuretime/snapshots/dirty');
    expect(await remote('rev-parse', `${snap}^`)).toBe(head);
    const text = await remote('show', 'main:runs/dirty.yaml');
    expect(text).toMatch(/^# Written by adv submit from branch main at [0-9a-f]{10}\.$/m);
    const spec = parse(text) as { spec: Record<string, unknown> };
    expect(spec.spec).toEqual({
      command: ['python3', 'train.py'],
      code: { ref: snap },
      backendSelector: { order: ['ssh-local'] },
    });
    expect(c.runStatus('dirty')!.status.attempts[0]!.backend).toBe('ssh-local');
  });

  it('code in another repository: the snapshot goes there, the spec names it by its URL, the ssh host runs exactly it', async () => {
    await server.createRepo('code');
    const codeUrl = server.url('code');
    // A researcher's clone of the code repo (their credentials in its config), specs elsewhere.
    const code = await makeWorkTree(
      {
        '.gitignore': '*.log\n',
        'train.py': TRAIN,
        'lib/__init__.py': 'VALUE = "committed"\n',
        'old.py': 'print("old")\n',
      },
      codeUrl,
      TOKEN,
    );
    try {
      await code.write('lib/__init__.py', 'VALUE = "staged"\n');
      await code.git('add', 'lib/__init__.py');
      await code.write('lib/__init__.py', 'VALUE = "other repo"\n');
      await code.write('train.py', TRAIN + '# dirty in the code repo\n');
      await code.write('data/extra.txt', 'untracked\n');
      await code.write('debug.log', 'ignored\n');
      await code.remove('old.py');
      const head = await code.git('rev-parse', 'HEAD');
      const before = await fingerprint(code.dir);
      const status = await code.git('status', '--porcelain');

      const r = await adv(
        ['submit', '--on', 'ssh-local', '--name', 'other-repo', ...follow(), '--', 'python3', 'train.py'],
        code.dir,
      );

      expect(r.code, r.err + r.out).toBe(0);
      expect(r.out).toContain('train.py: # dirty in the code repo');
      expect(r.out).toContain('lib: other repo');
      expect(r.out).toContain('extra: untracked');
      expect(r.out).toContain('ignored: False');
      expect(r.out).toContain('old.py: False');
      expect(r.err).toMatch(/run\/other-repo: Succeeded \(attempt 1 on ssh-local\)/);
      expect(await fingerprint(code.dir)).toEqual(before);
      expect(await code.git('status', '--porcelain')).toBe(status);
      expect(await code.git('rev-parse', 'HEAD')).toBe(head);
      // The snapshot is in the code repo only: what ran came through code.repo.
      const snap = await bare('code', 'rev-parse', 'refs/adventuretime/snapshots/other-repo');
      expect(await bare('code', 'rev-parse', `${snap}^`)).toBe(head);
      expect(await code.git('rev-parse', 'refs/adventuretime/snapshots/other-repo')).toBe(snap);
      await expect(remote('cat-file', '-e', snap)).rejects.toThrow();
      const text = await remote('show', 'main:runs/other-repo.yaml');
      expect(text).not.toContain(TOKEN);
      const spec = parse(text) as { spec: Record<string, unknown> };
      expect(spec.spec).toEqual({
        command: ['python3', 'train.py'],
        code: { repo: codeUrl, ref: snap },
        backendSelector: { order: ['ssh-local'] },
      });
      expect(c.runStatus('other-repo')!.status).toMatchObject({ codeRepo: codeUrl });
      expect(c.runStatus('other-repo')!.status.attempts[0]!.backend).toBe('ssh-local');
    } finally {
      await code.cleanup();
    }
  });

  it('a token in the code remote’s URL pushes the snapshot and is never written; an ssh remote is refused before anything moves', async () => {
    await server.createRepo('code-token');
    const codeUrl = server.url('code-token');
    const withToken = codeUrl.replace('://', `://x-access-token:${TOKEN}@`);
    const code = await makeWorkTree({ 'train.py': 'print("code from", "the token URL")\n' }, withToken);
    try {
      await code.write('train.py', 'print("dirty code from", "the token URL")\n');
      const r = await adv(
        ['submit', '--on', 'local', '--name', 'token-url', ...follow(), '--', 'python3', 'train.py'],
        code.dir,
      );
      expect(r.code, r.err + r.out).toBe(0);
      expect(r.out).toContain('dirty code from the token URL');
      const spec = parse(await remote('show', 'main:runs/token-url.yaml')) as { spec: { code: unknown } };
      expect(spec.spec.code).toEqual({
        repo: codeUrl,
        ref: await bare('code-token', 'rev-parse', 'refs/adventuretime/snapshots/token-url'),
      });
      expect(await remote('log', '-p', '--all')).not.toContain(TOKEN);

      await code.git('remote', 'set-url', 'origin', 'git@git.example.com:lab/code.git');
      const main = await remote('rev-parse', 'main');
      const ssh = await adv(
        ['submit', '--on', 'local', '--name', 'ssh-remote', '--repo', url, '--', 'true'],
        code.dir,
      );
      expect(ssh.code).toBe(2);
      expect(ssh.err).toContain(
        'the code\'s remote "origin" is git@git.example.com:lab/code.git, an ssh URL',
      );
      expect(ssh.err).toContain('git remote add https https://git.example.com/lab/code.git');
      expect(await remote('rev-parse', 'main')).toBe(main);
      expect(await bare('code-token', 'for-each-ref', 'refs/adventuretime/snapshots/ssh-remote')).toBe('');
    } finally {
      await code.cleanup();
    }
  });

  it('from a subdirectory with a detached, clean HEAD: HEAD pinned, started in that subdirectory', async () => {
    await wt.git('stash', '--include-untracked');
    await wt.git('checkout', '--quiet', '--detach');
    const head = await wt.git('rev-parse', 'HEAD');
    const r = await adv(
      ['submit', '--on', 'ssh-local', '--name', 'clean-sub', ...follow(), '--', 'python3', '../train.py'],
      join(wt.dir, 'sub'),
    );
    expect(r.code, r.err + r.out).toBe(0);
    expect(r.out).toContain('train.py: # committed');
    expect(r.out).toContain('lib: committed');
    expect(r.out).toContain('cwd: sub');
    const spec = parse(await remote('show', 'main:runs/clean-sub.yaml')) as { spec: Record<string, unknown> };
    expect(spec.spec).toMatchObject({ workingDir: 'sub', code: { ref: head } });
    expect(await remote('show', 'main:runs/clean-sub.yaml')).toContain('from a detached HEAD at');
    expect(await wt.git('rev-parse', 'HEAD')).toBe(head);
  });

  it('--follow exits with the command’s exit code when the run fails, and with 1 when it waits for a fix', async () => {
    const r = await adv([
      'submit',
      '--on',
      'local',
      '--name',
      'fails',
      '--set',
      'policy.maxAttempts=1',
      ...follow(),
      '--',
      'sh',
      '-c',
      'echo about to fail; exit 3',
    ]);
    expect(r.out).toContain('about to fail');
    expect(r.err).toMatch(/run\/fails: Failed/);
    expect(r.code, r.err).toBe(3);
    // A run that waits for a person (a secret nobody set) stops the following, non-zero, saying why.
    const stuck = await adv([
      'submit',
      '--on',
      'local',
      '--name',
      'needs-secret',
      '--set',
      'secrets=[SUBMIT_TEST_NEVER_SET]',
      ...follow(),
      '--',
      'true',
    ]);
    expect(stuck.err).toMatch(/run\/needs-secret waits for a fix \(SecretMissing\): .*SUBMIT_TEST_NEVER_SET/);
    expect(stuck.code).toBe(1);
  });

  it('--review puts the run on its own branch, prints the plan, and leaves main alone', async () => {
    const main = await remote('rev-parse', 'main');
    const r = await adv([
      'submit',
      '--on',
      'local',
      '--name',
      'proposed',
      '--review',
      '--repo',
      url,
      '--',
      'true',
    ]);
    expect(r.code, r.err + r.out).toBe(0);
    expect(r.out).toContain('run/proposed submitted: runs/proposed.yaml on branch adv/submit/proposed');
    expect(r.out).toMatch(/\+ start\s+proposed\s+on local/);
    expect(await remote('rev-parse', 'main')).toBe(main);
    expect(await remote('rev-parse', 'adv/submit/proposed^')).toBe(main);
    // A name already on the watched branch is refused, with what to do.
    const first = await adv(['submit', '--on', 'local', '--name', 'twice', '--repo', url, '--', 'true']);
    expect(first.code, first.err).toBe(0);
    expect(first.out).toContain(`Next:\n  adv get runs twice --repo ${url}\n`);
    const again = await adv(['submit', '--on', 'local', '--name', 'twice', '--repo', url, '--', 'true']);
    expect(again.code).toBe(2);
    expect(again.err).toContain('a run named twice already exists in main');
  });
});

describe('adv submit in a local specs repo (the embedded default)', () => {
  let dir: string;
  afterAll(() => (dir ? rm(dir, { recursive: true, force: true }) : undefined));

  it('commits to the checked-out watched branch, and the new file is in the index and the tree as after a commit', async () => {
    const local = await makeWorkTree({ 'backends/local.yaml': LOCAL_BACKEND, 'storage.yaml': FILE_STORAGE });
    dir = local.dir;
    await local.write('train.py', 'print(1)\n');
    const io = captureIo({ HOME: dir, XDG_CACHE_HOME: join(dir, '.cache') }, dir);
    const code = await runCli(['submit', '--on', 'local', '--', 'python3', 'train.py'], io);
    expect(code, io.err()).toBe(0);
    const name = /run\/(train-\d{8}-\d{6}) submitted/.exec(io.out())?.[1];
    expect(name, io.out()).toBeDefined();
    expect(await local.git('log', '-1', '--format=%s')).toContain(`adv submit: run/${name}`);
    // Only the user's own change is left to commit: the untracked train.py.
    expect(await local.git('status', '--porcelain')).toBe('?? train.py');
    const spec = parse(await readFile(join(dir, 'runs', `${name}.yaml`), 'utf8')) as {
      spec: { code: { ref: string } };
    };
    expect(await local.git('rev-parse', `refs/adventuretime/snapshots/${name}`)).toBe(spec.spec.code.ref);
    expect(await local.git('show', `${spec.spec.code.ref}:train.py`)).toBe('print(1)');
  });
});
