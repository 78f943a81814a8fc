/** The `adv` verbs as a user runs them, against real repos (local, and smart HTTP for apply). */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { git } from '../controller/git/native.js';
import { captureIo, removeTree } from './helpers/io.js';
import { startGitHttp, type GitHttpServer } from './helpers/git/git-http.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml } from './helpers/git/specs-repo.js';

let tmp: string;
let repo: string;
const env = { HOME: '', XDG_CACHE_HOME: '' };

async function adv(args: string[], cwd = repo) {
  const io = captureIo({ ...env }, cwd);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}
const commits = async (dir: string) =>
  Number((await git(['rev-list', '--count', 'main'], { cwd: dir })).toString());

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-cli-'));
  env.HOME = tmp;
  env.XDG_CACHE_HOME = join(tmp, 'cache');
  repo = join(tmp, 'specs');
});
afterAll(() => removeTree(tmp));

describe('adv, as in the quickstart', () => {
  it('init makes a committed, valid specs repo', async () => {
    const r = await adv(['init', repo], tmp);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain(`Initialised a specs repo in ${repo}`);
    expect((await adv(['validate', '.'])).out).toContain('0 errors');
    expect(await commits(repo)).toBe(1);
    expect((await adv(['init', repo], tmp)).code).toBe(2);
  });

  it('get before any controller ran says what to do', async () => {
    const r = await adv(['get', 'runs']);
    expect(r.code).toBe(3);
    expect(r.err).toContain('no status branch adventuretime/status');
    expect(r.err).toContain('fix: start the controller on this repo');
  });

  it('controller --once runs hello to Succeeded; get and describe read it from git', async () => {
    const r = await adv(['controller', '--once', '--poll-interval', '100ms', '--log-level', 'warn']);
    expect(r.code, r.err).toBe(0);
    const get = await adv(['get', 'runs']);
    expect(get.out).toMatch(/^NAME\s+OWNER\s+PHASE\s+ATTEMPT\s+BACKEND\s+JOB\s+AGE\s+REASON$/m);
    expect(get.out).toMatch(/^hello\s+Succeeded\s+1\s+local\s+\d+\s+\S+\s+Completed$/m);
    const json = JSON.parse((await adv(['get', 'run', 'hello', '-o', 'json'])).out) as {
      status: { phase: string };
    };
    expect(json.status.phase).toBe('Succeeded');
    expect((await adv(['get', 'backends'])).out).toMatch(/^local\s+local\s+True\s+False\s+0$/m);
    const d = await adv(['describe', 'run', 'hello']);
    expect(d.out).toContain('Phase:        Succeeded (Completed)');
    expect(d.out).toMatch(
      /History \(git log adventuretime\/status -- runs\/hello\.yaml\):\n.*run\/hello: Submitting attempt 1 to local/,
    );
    expect(d.out).toMatch(/run\/hello: Succeeded \(attempt 1 on local, job \d+, exit 0\)/);
    expect((await adv(['get', 'runs', '-l', 'team=none'])).out).toBe('No runs found.\n');
    expect((await adv(['describe', 'run', 'nope'])).code).toBe(3);
  });

  it('apply validates, then commits to <kind dir>/<name>.yaml', async () => {
    const file = join(tmp, 'sweep.yaml');
    await writeFile(file, runYaml('sweep-1', ['echo', 'hi']));
    const before = await commits(repo);
    const r = await adv(['apply', '-f', file]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^run\/sweep-1 applied as runs\/sweep-1\.yaml \(commit [0-9a-f]{10}\)$/m);
    expect(await commits(repo)).toBe(before + 1);
    expect(await git(['log', '-1', '--format=%s'], { cwd: repo }).then(String)).toBe('apply run/sweep-1\n');
  });

  it('apply refuses an invalid spec and commits nothing', async () => {
    const file = join(tmp, 'bad.yaml');
    await writeFile(file, runYaml('Bad', ['true']));
    const before = await commits(repo);
    const r = await adv(['apply', '-f', file]);
    expect(r.code).toBe(1);
    expect(r.out).toContain('metadata.name: string "Bad" is not allowed here');
    expect(await commits(repo)).toBe(before);
    // One that is valid alone but names a backend the repo lacks.
    await writeFile(file, runYaml('orphan', ['true']).replace('order: [local]', 'order: [slurm-z]'));
    const r2 = await adv(['apply', '-f', file]);
    expect(r2.code).toBe(1);
    expect(r2.out).toContain('backend "slurm-z" is not defined in this repo');
    expect(await commits(repo)).toBe(before);
    expect((await git(['status', '--porcelain'], { cwd: repo })).toString()).toBe('');
  });

  it('cancel commits suspend: true and keeps the comments', async () => {
    const r = await adv(['cancel', 'hello']);
    expect(r.code, r.err).toBe(0);
    const text = await readFile(join(repo, 'runs', 'hello.yaml'), 'utf8');
    expect(text).toContain('# The smallest run.');
    expect(text).toMatch(/^ {2}suspend: true$/m);
    expect(await git(['log', '-1', '--format=%s'], { cwd: repo }).then(String)).toBe('cancel run/hello\n');
    expect((await adv(['cancel', 'ghost'])).code).toBe(3);
  });

  it('reconcile without a running controller leaves the request in git', async () => {
    const r = await adv(['reconcile', 'run', 'hello']);
    expect(r.code, r.err).toBe(0);
    expect(await readFile(join(repo, 'runs', 'hello.yaml'), 'utf8')).toMatch(
      /adventuretime\.dev\/reconcile-requested-at: \S+/,
    );
  });
});

describe('adv controller on bad input', () => {
  it('names a missing repo, and a missing branch, instead of finishing having done nothing', async () => {
    const missing = await adv(['controller', '--once', '--repo', join(tmp, 'nope')], tmp);
    expect(missing.code).toBe(3);
    expect(missing.err).toContain(`${join(tmp, 'nope')} does not exist`);
    const noBranch = await adv(['controller', '--once', '--branch', 'trunk', '--log-level', 'silent']);
    expect(noBranch.code).toBe(3);
    expect(noBranch.err).toContain(`branch trunk of ${repo} does not exist`);
    expect(noBranch.err).toContain('fix: commit your specs to trunk, or pass --branch');
  });
});

describe('adv apply to a remote repo', () => {
  let server: GitHttpServer;
  beforeAll(async () => {
    server = await startGitHttp({ token: 'tok' });
  });
  afterAll(() => server.stop());

  it('clones, commits and pushes with the token from the environment', async () => {
    const bare = await server.createRepo('remote-apply');
    const wt = await makeWorkTree(
      { 'backends/local.yaml': LOCAL_BACKEND },
      server.url('remote-apply'),
      'tok',
    );
    const file = join(tmp, 'remote.yaml');
    await writeFile(file, runYaml('remote-run', ['true']));
    const io = captureIo({ ...env, ADV_GIT_TOKEN: 'tok' }, tmp);
    expect(await runCli(['apply', '-f', file, '--repo', server.url('remote-apply')], io), io.err()).toBe(0);
    expect((await git(['show', 'main:runs/remote-run.yaml'], { gitdir: bare })).toString()).toContain(
      'name: remote-run',
    );
    const denied = captureIo({ ...env, ADV_GIT_TOKEN: 'wrong' }, tmp);
    expect(await runCli(['apply', '-f', file, '--repo', server.url('remote-apply')], denied)).toBe(4);
    expect(denied.err()).toContain('Authentication failed');
    await wt.cleanup();
  });
});
