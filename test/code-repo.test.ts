/**
 * Code from another repository (`code.repo`) over real git smart HTTP with a token: a private
 * repo with a submodule (a relative URL, on the same host) runs on the local backend and on the
 * ssh backend (a real sshd), and each job sees the repo's files and the submodule's. Beside them,
 * in the same specs repo, runs that must fail fail alone, each with its own condition: a wrong
 * token, a token secret that is not set, a submodule whose URL is `ext::` or `file://`, and
 * `code.repo: ext::…` / `file://…` (refused at validation, with file:line). A public repo on
 * another host is fetched without the controller's token ever reaching that host.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { gunzipSync } from 'node:zlib';
import { extract } from 'tar-stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { CodeRepos, type CodeRepoState } from '../controller/git/code-repos.js';
import { gitCodeExporter } from '../controller/backends/code.js';
import { git, NativeGit } from '../controller/git/native.js';
import type { RunStatusDoc } from '../controller/status/types.js';
import { FILE_STORAGE, sshBackendYaml } from './helpers/backends/kinds.js';
import { captureIo } from './helpers/io.js';
import { startGitHttp, type GitHttpServer } from './helpers/git/git-http.js';
import { LOCAL_BACKEND, makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { haveSshd, startSshd, type Sshd } from './helpers/servers/sshd.js';
import { waitFor } from './helpers/wait.js';

const TOKEN = 'code-repo-token-5c2e';
const sshOk = haveSshd();
if (!sshOk && process.env.CI) throw new Error('sshd is required in CI: apt-get install openssh-server');
if (!sshOk) console.warn('SKIPPING the ssh run of the code.repo test: no /usr/sbin/sshd here');

/** A command that prints what it sees and fails unless it is the repo's file and the submodule's. */
const CHECK = `printf 'app=%s lib=%s\\n' "$(cat app.txt)" "$(cat vendor/lib/version.txt)"; test "$(cat app.txt)" = app-v1 && test "$(cat vendor/lib/version.txt)" = lib-v1`;

const run = (
  name: string,
  backend: string,
  code: string,
  command = CHECK,
) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: ["sh", "-c", ${JSON.stringify(command)}]
  code: ${code}
  backendSelector: {order: [${backend}]}
`;

describe('code.repo over smart HTTP with a token, submodules included', () => {
  let server: GitHttpServer;
  let other: GitHttpServer;
  let sshd: Sshd | undefined;
  let tmp: string;
  const trees: WorkTree[] = [];
  let c: Controller | undefined;

  beforeAll(async () => {
    server = await startGitHttp({ token: TOKEN });
    other = await startGitHttp();
    if (sshOk) sshd = await startSshd();
    tmp = await mkdtemp(join(tmpdir(), 'adv-code-repo-'));
  });
  afterAll(async () => {
    await c?.stop();
    for (const t of trees) await t.cleanup();
    await sshd?.stop();
    await server?.stop();
    await other?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  const byName = new Map<string, WorkTree>();

  /** Commits `rel` = `content` on top of repo `name`'s main and pushes it to `ref`; its id. */
  async function pushTo(name: string, rel: string, content: string, ref: string): Promise<string> {
    const wt = byName.get(name)!;
    await wt.git('checkout', '--quiet', '--detach', 'main');
    await wt.write(rel, content);
    await wt.git('add', rel);
    await wt.git('commit', '--quiet', '-m', `${rel} for ${ref}`);
    await wt.git('push', '--quiet', 'origin', `HEAD:${ref}`);
    const sha = await wt.git('rev-parse', 'HEAD');
    await wt.git('checkout', '--quiet', 'main');
    return sha;
  }

  /** A repo on `on` with `files`, and (with `submodule`) a gitlink at vendor/lib and its .gitmodules. */
  async function codeRepo(
    on: GitHttpServer,
    name: string,
    files: Record<string, string>,
    submodule?: { url: string; commit: string },
  ): Promise<string> {
    await on.createRepo(name);
    const wt = await makeWorkTree(files, on.url(name), on === server ? TOKEN : undefined);
    trees.push(wt);
    byName.set(name, wt);
    if (!submodule) return wt.git('rev-parse', 'HEAD');
    await wt.write('.gitmodules', `[submodule "lib"]\n\tpath = vendor/lib\n\turl = ${submodule.url}\n`);
    await wt.git('add', '.gitmodules');
    await wt.git('update-index', '--add', '--cacheinfo', `160000,${submodule.commit},vendor/lib`);
    // Not wt.commit (`git add -A` would drop a gitlink whose folder is not checked out).
    await wt.git('commit', '--quiet', '-m', 'add the lib submodule');
    await wt.push();
    return wt.git('rev-parse', 'HEAD');
  }

  it(
    'runs the private repo with its submodule on local and ssh; every failing run fails alone, with its reason',
    { timeout: 300_000 },
    async () => {
      const lib = await codeRepo(server, 'lib', { 'version.txt': 'lib-v1' });
      const mono = await codeRepo(
        server,
        'mono',
        { 'app.txt': 'app-v1' },
        { url: '../lib.git', commit: lib },
      );
      const marker = join(tmp, 'pwned');
      const evil = await codeRepo(
        server,
        'evil',
        { 'app.txt': 'app-v1' },
        // No space in it: refused for its scheme, not for the space.
        { url: `ext::/usr/bin/touch%%20${marker}`, commit: lib },
      );
      const fileSub = await codeRepo(
        server,
        'filesub',
        { 'app.txt': 'x' },
        { url: `file://${server.root}/lib.git`, commit: lib },
      );
      await codeRepo(other, 'public', { 'app.txt': 'app-v1', 'vendor/lib/version.txt': 'lib-v1' });
      expect([evil, fileSub].every(Boolean)).toBe(true);

      // What adv submit pushes for a dirty work tree: a commit on no branch, under snapshots/.
      const snap = await pushTo('mono', 'snap.txt', 'snap', 'refs/adventuretime/snapshots/cr-snap');
      const url = server.url('mono');
      const runs: Record<string, string> = {
        'cr-snap': run(
          'cr-snap',
          'local',
          `{repo: "${url}", ref: ${snap}}`,
          `${CHECK} && test "$(cat snap.txt)" = snap`,
        ),
        'cr-local': run('cr-local', 'local', `{repo: "${url}", ref: main}`),
        'cr-path': run(
          'cr-path',
          'local',
          `{repo: "${url}", path: vendor/lib}`,
          'test "$(cat version.txt)" = lib-v1',
        ),
        'cr-public': run('cr-public', 'local', `{repo: "${other.url('public')}"}`),
        'cr-wrong-token': run('cr-wrong-token', 'local', `{repo: "${url}", tokenSecret: WRONG_TOKEN}`),
        'cr-no-secret': run('cr-no-secret', 'local', `{repo: "${url}", tokenSecret: NOT_SET_ANYWHERE}`),
        'cr-ext-sub': run('cr-ext-sub', 'local', `{repo: "${server.url('evil')}"}`),
        'cr-file-sub': run('cr-file-sub', 'local', `{repo: "${server.url('filesub')}"}`),
        'cr-ext': run('cr-ext', 'local', `{repo: "ext::sh -c touch% ${marker}"}`),
        'cr-file': run('cr-file', 'local', `{repo: "file://${server.root}/mono.git"}`),
      };
      if (sshd) runs['cr-ssh'] = run('cr-ssh', 'ssh-local', `{repo: "${url}", ref: main}`);
      await server.createRepo('specs');
      const specs = await makeWorkTree(
        {
          'backends/local.yaml': LOCAL_BACKEND,
          ...(sshd ? { 'backends/ssh.yaml': sshBackendYaml(sshd, 'ssh-local', join(tmp, 'ssh-root')) } : {}),
          'storage.yaml': FILE_STORAGE,
          ...Object.fromEntries(Object.entries(runs).map(([n, y]) => [`runs/${n}.yaml`, y])),
        },
        server.url('specs'),
        TOKEN,
      );
      trees.push(specs);
      const before = other.authorizations.length;

      c = await Controller.create({
        repo: server.url('specs'),
        token: TOKEN,
        dataDir: join(tmp, 'data'),
        pollIntervalMs: 200,
        fetchIntervalMs: 200,
        infra: { from: 'repo' },
        secrets: { env: ['WRONG_TOKEN'] },
        secretEnv: { ...process.env, WRONG_TOKEN: 'not-the-token' },
      });
      await c.init();
      const st = (n: string): RunStatusDoc['status'] | undefined => c!.runStatus(n)?.status;
      const ok = ['cr-local', 'cr-path', 'cr-public', 'cr-snap', ...(sshd ? ['cr-ssh'] : [])];
      const stalled = ['cr-wrong-token', 'cr-no-secret', 'cr-ext-sub', 'cr-file-sub'];
      const summary = () =>
        Object.keys(runs).map((n) => `${n}: ${st(n)?.phase} ${st(n)?.reason} ${st(n)?.message}`);
      await waitFor(
        async () => {
          await c!.pass();
          return (
            ok.every((n) => ['Succeeded', 'Failed'].includes(st(n)?.phase ?? '')) &&
            stalled.every((n) => st(n)?.conditions.some((x) => x.type === 'Stalled' && x.status === 'True'))
          );
        },
        {
          what: 'the runs with good code to end, and the others to say why they cannot start',
          timeoutMs: Number(process.env.CODE_REPO_WAIT_MS ?? 240_000),
          everyMs: 200,
          detail: summary,
        },
      );

      for (const n of ok) {
        expect(st(n)?.phase, `${n}: ${st(n)?.message}`).toBe('Succeeded');
        expect(st(n)?.codeRepo, n).toBe(n === 'cr-public' ? other.url('public') : url);
      }
      expect(st('cr-local')?.codeCommit).toBe(mono);
      expect(st('cr-snap')?.codeCommit).toBe(snap);
      const io = captureIo({ ...process.env, ADV_GIT_TOKEN: TOKEN, XDG_CACHE_HOME: join(tmp, 'cache') }, tmp);
      expect(await runCli(['describe', 'run', 'cr-local', '--repo', server.url('specs')], io), io.err()).toBe(
        0,
      );
      expect(io.out()).toContain(`Code:         ${mono.slice(0, 12)} of ${url}`);
      expect(st('cr-local')?.attempts.at(-1)?.codeCommit).toBe(mono);

      const why = (n: string) => st(n)?.conditions.find((x) => x.type === 'Stalled');
      expect(why('cr-wrong-token')).toMatchObject({
        reason: 'CodeFetchFailed',
        message: expect.stringMatching(/refused the token.*code\.tokenSecret/),
      });
      expect(why('cr-no-secret')).toMatchObject({
        reason: 'SecretMissing',
        message: expect.stringMatching(/secret NOT_SET_ANYWHERE \(code.tokenSecret\) is not set/),
      });
      expect(why('cr-ext-sub')).toMatchObject({
        reason: 'CodeRepoInvalid',
        message: expect.stringMatching(
          /submodule vendor\/lib of .*evil\.git: url "ext::.*": ext:\/\/ is not fetched/,
        ),
      });
      expect(why('cr-file-sub')).toMatchObject({
        reason: 'CodeRepoInvalid',
        message: expect.stringMatching(/submodule vendor\/lib .*file:\/\/ is not fetched/),
      });
      for (const [n, scheme] of [
        ['cr-ext', 'ext'],
        ['cr-file', 'file'],
      ] as const) {
        const valid = st(n)?.conditions.find((x) => x.type === 'Valid');
        expect(valid, n).toMatchObject({ status: 'False' });
        expect(valid?.message).toMatch(new RegExp(`^runs/${n}\\.yaml:6:\\d+: .*code\\.repo.*${scheme}`));
      }
      expect(existsSync(marker), 'nothing of a hostile URL ran on the controller host').toBe(false);
      // The token went to its own host only: the other server saw requests, none with a credential.
      const seen = other.authorizations.slice(before);
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.filter(Boolean)).toEqual([]);
      expect(
        server.authorizations.some((a) =>
          a.includes(Buffer.from(`x-access-token:${TOKEN}`).toString('base64')),
        ),
      ).toBe(true);
    },
  );

  it(
    'pins the commit at the first attempt: a retry runs it after the branch moved on',
    { timeout: 300_000 },
    async () => {
      const lib = await codeRepo(server, 'lib2', { 'version.txt': 'lib-v1' });
      const v1 = await codeRepo(
        server,
        'mono2',
        { 'app.txt': 'app-v1' },
        { url: '../lib2.git', commit: lib },
      );
      const go = join(tmp, 'attempt-1-may-end');
      const command = `if [ "$ADV_ATTEMPT" = 1 ]; then while [ ! -e ${go} ]; do sleep 0.1; done; exit 1; fi; ${CHECK}`;
      await server.createRepo('specs2');
      const specs = await makeWorkTree(
        {
          'backends/local.yaml': LOCAL_BACKEND,
          'runs/cr-pin.yaml':
            run('cr-pin', 'local', `{repo: "${server.url('mono2')}", ref: main}`, command) +
            '  policy: {maxAttempts: 3, backoff: {initialSec: 0}}\n',
        },
        server.url('specs2'),
        TOKEN,
      );
      trees.push(specs);
      const pc = await Controller.create({
        repo: server.url('specs2'),
        token: TOKEN,
        dataDir: join(tmp, 'data2'),
        pollIntervalMs: 200,
        fetchIntervalMs: 200,
        infra: { from: 'repo' },
      });
      try {
        await pc.init();
        const st = () => pc.runStatus('cr-pin')?.status;
        const step = (what: string, done: () => boolean | Promise<boolean>) =>
          waitFor(
            async () => {
              await pc.pass();
              return done();
            },
            { what, timeoutMs: 120_000, everyMs: 200, detail: () => st() },
          );
        await step('attempt 1 to run', () => st()?.attempts[0]?.phase === 'Running');
        // main moves on, and so does the watched branch (a new head makes unpinned runs fetch again).
        const v2 = await pushTo('mono2', 'app.txt', 'app-v2', 'refs/heads/main');
        await specs.write('notes.md', 'moved\n');
        const head = await specs.commit('a new head');
        await specs.push();
        await step('the controller to fetch the new head', async () => (await pc.repo.specHead()) === head);
        await writeFile(go, '');
        await step('the run to end', () => ['Succeeded', 'Failed'].includes(st()?.phase ?? ''));
        expect(v2).not.toBe(v1);
        expect(st()?.phase, st()?.message).toBe('Succeeded');
        expect(st()?.attempts.map((a) => a.codeCommit)).toEqual([v1, v1]);
      } finally {
        await pc.stop();
      }
    },
  );
});

describe('code.repo bounds: what a hostile repository cannot make the controller do', () => {
  let server: GitHttpServer;
  let tmp: string;
  const repos: CodeRepos[] = [];
  beforeAll(async () => {
    server = await startGitHttp({ token: TOKEN });
    tmp = await mkdtemp(join(tmpdir(), 'adv-code-bounds-'));
  });
  afterAll(async () => {
    for (const r of repos) await r.close();
    await server?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  /** The state of `repo`'s code once it is no longer being fetched. */
  async function settled(
    limits: { maxFiles?: number; maxBytes?: number; tokenOrigins?: string[] },
    repo: string,
  ): Promise<CodeRepoState> {
    const url = server.url(repo);
    const r = new CodeRepos({
      dir: join(tmp, `${repo}-${repos.length}`),
      token: TOKEN,
      tokenOrigins: [new URL(url).origin],
      logger: pino({ level: 'silent' }),
      now: Date.now,
      ...limits,
    });
    repos.push(r);
    return waitFor(
      async () => {
        const s = await r.state('r', { repo: url }, 'head-1');
        return s.state === 'pending' ? undefined : s;
      },
      { what: `the code of ${repo} to be fetched or refused`, timeoutMs: 60_000, everyMs: 100 },
    );
  }

  /** Points `main` of the server's repo `name` at a commit of `tree`, written there directly. */
  async function commitTree(gitdir: string, tree: string): Promise<void> {
    const env = {
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@e',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@e',
    };
    const commit = (await git(['commit-tree', tree, '-m', 'c'], { gitdir, env })).toString().trim();
    await git(['update-ref', 'refs/heads/main', commit], { gitdir });
  }

  it('refuses a tree that repeats one subtree ten billion times (a git bomb): over the file limit, unshipped', async () => {
    const gitdir = await server.createRepo('bomb');
    const blob = (await git(['hash-object', '-w', '--stdin'], { gitdir, input: 'x' })).toString().trim();
    let entry = `100644 blob ${blob}`;
    for (let level = 0; level < 10; level++) {
      const lines = Array.from({ length: 10 }, (_, i) => `${entry}\tf${i}\n`).join('');
      const tree = (await git(['mktree'], { gitdir, input: lines })).toString().trim();
      entry = `040000 tree ${tree}`;
    }
    await commitTree(gitdir, entry.split(' ')[2]!);
    expect(await settled({ maxFiles: 100_000 }, 'bomb')).toMatchObject({
      state: 'failed',
      reason: 'CodeRepoInvalid',
      message: expect.stringMatching(/more than 100000 files: it is not shipped/),
    });
  });

  it('stops a fetch that would write more than its byte limit', async () => {
    const gitdir = await server.createRepo('big');
    const blob = (await git(['hash-object', '-w', '--stdin'], { gitdir, input: randomBytes(3 << 20) }))
      .toString()
      .trim();
    const tree = (await git(['mktree'], { gitdir, input: `100644 blob ${blob}\tbig.bin\n` }))
      .toString()
      .trim();
    await commitTree(gitdir, tree);
    expect(await settled({ maxBytes: 1 << 20 }, 'big')).toMatchObject({
      state: 'failed',
      reason: 'CodeRepoInvalid',
      message: expect.stringMatching(/sends more than 1048576 bytes in one fetch/),
    });
  });

  it("never sends the controller's token to an origin the operator did not list", async () => {
    const before = server.authorizations.length;
    expect(await settled({ tokenOrigins: ['https://git.example.com'] }, 'big')).toMatchObject({
      state: 'failed',
      reason: 'CodeFetchFailed',
      message: expect.stringMatching(/refused the token/),
    });
    expect(server.authorizations.slice(before).filter(Boolean)).toEqual([]);
  });

  it('after a restart, ships a pinned commit with its submodule from the mirrors on disk alone', async () => {
    const blob = async (gitdir: string, text: string) =>
      (await git(['hash-object', '-w', '--stdin'], { gitdir, input: text })).toString().trim();
    const tree = async (gitdir: string, lines: string[]) =>
      (await git(['mktree', '--missing'], { gitdir, input: lines.map((l) => `${l}\n`).join('') }))
        .toString()
        .trim();
    const libDir = await server.createRepo('lib3');
    const libTree = await tree(libDir, [`100644 blob ${await blob(libDir, 'lib-v1')}\tversion.txt`]);
    await commitTree(libDir, libTree);
    const lib = (await git(['rev-parse', 'main'], { gitdir: libDir })).toString().trim();
    const monoDir = await server.createRepo('mono3');
    const modules = '[submodule "lib"]\n\tpath = vendor/lib\n\turl = ../lib3.git\n';
    const vendor = await tree(monoDir, [`160000 commit ${lib}\tlib`]);
    await commitTree(
      monoDir,
      await tree(monoDir, [
        `100644 blob ${await blob(monoDir, modules)}\t.gitmodules`,
        `100644 blob ${await blob(monoDir, 'app-v1')}\tapp.txt`,
        `040000 tree ${vendor}\tvendor`,
      ]),
    );
    const first = await settled({}, 'mono3');
    expect(first).toMatchObject({ state: 'ready' });
    const commit = (first as { commit: string }).commit;
    const dir = join(tmp, `mono3-${repos.length - 1}`);
    await repos.at(-1)!.close();

    // A new controller on the same data dir; the specs repo knows nothing of the commit.
    const again = new CodeRepos({ dir, logger: pino({ level: 'silent' }), now: Date.now });
    repos.push(again);
    const specsDir = join(tmp, 'specs-empty.git');
    await git(['init', '--quiet', '--bare', specsDir]);
    const specsGit = new NativeGit(specsDir);
    const before = server.requests;
    try {
      const code = gitCodeExporter(specsGit, again);
      const t = await code.treeOf(commit, undefined);
      const names: string[] = [];
      const ex = extract();
      ex.on('entry', (h, stream, next) => {
        names.push(h.name);
        stream.resume();
        next();
      });
      const done = new Promise<void>((r) => ex.on('finish', () => r()));
      ex.end(gunzipSync(await code.payload(t)));
      await done;
      expect(names.sort()).toEqual(['.gitmodules', 'app.txt', 'vendor/lib/version.txt']);
      const dest = await mkdtemp(join(tmp, 'extract-'));
      await code.extractTo(commit, 'vendor', dest);
      expect(await readFile(join(dest, 'lib', 'version.txt'), 'utf8')).toBe('lib-v1');
      expect(server.requests, 'nothing was fetched').toBe(before);
    } finally {
      await specsGit.close();
    }
  });

  it('fetches the same repository within its limits', async () => {
    const s = await settled({ maxBytes: 8 << 20 }, 'big');
    expect(s).toMatchObject({ state: 'ready', repo: server.url('big') });
  });
});
