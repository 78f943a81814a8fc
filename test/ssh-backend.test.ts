/**
 * The ssh backend end to end: the controller runs the example workload on a real sshd (loopback),
 * and the same Run, with only its backend changed, on the local backend.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import pino from 'pino';
import { gitCodeExporter } from '../controller/backends/code.js';
import { bootstrapScript } from '../controller/backends/remote/bootstrap.js';
import { SshBackend } from '../controller/backends/ssh/adapter.js';
import { defaultSshTransport } from '../controller/transport/ssh.js';
import { NativeGit } from '../controller/git/native.js';
import { FILE_STORAGE, sshBackendYaml, TRAIN } from './helpers/backends/kinds.js';
import { haveSshd, sshConnection, startSshd, type Sshd } from './helpers/servers/sshd.js';
import { LOCAL_BACKEND, makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const available = haveSshd();
if (!available && process.env.CI) throw new Error('sshd is required in CI: apt-get install openssh-server');
if (!available)
  console.warn('SKIPPING the ssh backend tests: no /usr/sbin/sshd here (apt-get install openssh-server)');

const toy = (name: string, backend: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: ${name}
spec:
  command: [python3, train.py, --steps, '30', --ckpt-every, '10']
  backendSelector:
    order: [${backend}]
`;

describe.runIf(available)('ssh backend on a real sshd', () => {
  let sshd: Sshd;
  let tmp: string;
  let wt: WorkTree;
  beforeAll(async () => {
    sshd = await startSshd();
    tmp = await mkdtemp(join(tmpdir(), 'adv-sshb-'));
  });
  afterAll(async () => {
    await wt?.cleanup();
    await sshd?.stop();
    await rm(tmp, { recursive: true, force: true });
  });

  it('runs the same workload on the ssh host and locally, with no change but the backend', async () => {
    wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'backends/ssh-local.yaml': sshBackendYaml(sshd, 'ssh-local', join(tmp, 'root')),
      'backends/ssh-down.yaml': sshBackendYaml(sshd, 'ssh-down', join(tmp, 'root2'), 1),
      'storage.yaml': FILE_STORAGE,
      'train.py': await readFile(TRAIN, 'utf8'),
      'runs/on-ssh.yaml': toy('on-ssh', 'ssh-local'),
      'runs/on-local.yaml': toy('on-local', 'local'),
      'runs/unreachable.yaml': toy('unreachable', 'ssh-down'),
    });
    const c = await Controller.create({ repo: wt.dir, dataDir: join(tmp, 'data'), pollIntervalMs: 200 });
    try {
      await c.init();
      const deadline = Date.now() + 90_000;
      while (Date.now() < deadline) {
        await c.pass();
        const done = ['on-ssh', 'on-local'].every((n) => c.runStatus(n)?.status.phase === 'Succeeded');
        if (done && c.runStatus('unreachable')?.status.reason === 'SubmitFailed') break;
        await new Promise((r) => setTimeout(r, 200));
      }
      for (const n of ['on-ssh', 'on-local']) {
        const st = c.runStatus(n)!.status;
        expect(st.phase, n).toBe('Succeeded');
        expect(st.checkpoint?.step, n).toBe(30);
      }
      expect(c.runStatus('on-ssh')!.status.attempts[0]!.backend).toBe('ssh-local');
      // The job dir on the host: the work dir was cleaned after success, the records stay.
      const job = join(tmp, 'root', 'work', 'adv-on-ssh-1');
      expect(JSON.parse(await readFile(join(job, 'exit.json'), 'utf8'))).toMatchObject({
        reason: 'Completed',
        exitCode: 0,
      });
      // run.sh removes it right after adv exec returns, a moment after exit.json appears.
      await waitFor('work dir cleaned', () => !existsSync(join(job, 'work')), 10_000);
      // An unreachable host is a clear condition with ssh's own words, not a crash.
      const bad = c.runStatus('unreachable')!.status;
      expect(bad.message).toMatch(
        /could not be submitted to ssh-down: cannot connect to .*127\.0\.0\.1:1: .*ECONNREFUSED/,
      );
    } finally {
      await c.stop();
    }
  }, 120_000);

  it('ships the same code once: the payload is the same bytes for the same tree', async () => {
    const git = new NativeGit(join(wt.dir, '.git'));
    const code = gitCodeExporter(git);
    const head = (await wt.git('rev-parse', 'HEAD')).trim();
    const tree = await code.treeOf(head);
    const a = await code.payload(tree);
    const again = await code.payload(tree);
    expect(a.equals(again)).toBe(true);
    // A new commit with the same tree ships nothing new: the file is named by tree id.
    await wt.git('commit', '--quiet', '--allow-empty', '-m', 'same tree');
    expect(await code.treeOf((await wt.git('rev-parse', 'HEAD')).trim())).toBe(tree);
    // The adapter takes its code and its transport from the context, and ships the payload once.
    const shipped: string[] = [];
    const b = new SshBackend(
      'ssh-local',
      { type: 'ssh', connection: sshConnection(sshd), paths: { root: join(tmp, 'root') } },
      {
        dataDir: tmp,
        logger: pino({ level: 'silent' }),
        now: Date.now,
        code: {
          ...code,
          payload: (t) => {
            shipped.push(t);
            return code.payload(t);
          },
        },
        ssh: defaultSshTransport,
      },
    );
    const job = (n: number) => ({
      jobName: `adv-ship-${n}`,
      run: 'ship',
      attempt: n,
      spec: {},
      argv: ['true'],
      code: { commit: head },
      env: {},
    });
    await b.host.prepare(job(1));
    await b.host.prepare(job(2));
    expect(shipped).toEqual([tree]);
    await git.close();
    await b.close();
  });

  it('a host without Node.js says so, as the job’s exit record', async () => {
    const script = bootstrapScript({ jobName: 'adv-x-1', argv: ['true'] });
    const dir = join(tmp, 'nonode');
    execFileSync('mkdir', ['-p', dir]);
    await writeFile(join(dir, 'run.sh'), script);
    await writeFile(
      join(dir, 'env'),
      'export ADV_RUN=x\nexport ADV_ATTEMPT=1\nexport ADV_JOB_DIR=/nonexistent\nexport ADV_CODE_TARBALL=/nonexistent\nexport ADV_EXEC_BUNDLE=/nonexistent\n',
    );
    // A PATH with the usual tools but no node (Debian merges /bin into /usr/bin, node's home).
    const bin = join(dir, 'bin');
    execFileSync('mkdir', ['-p', bin]);
    for (const tool of ['sh', 'dirname', 'mv', 'hostname', 'mkdir', 'tar', 'cat']) {
      execFileSync('ln', [
        '-sf',
        execFileSync('sh', ['-c', `command -v ${tool}`])
          .toString()
          .trim(),
        join(bin, tool),
      ]);
    }
    let code = 0;
    try {
      execFileSync('/bin/sh', [join(dir, 'run.sh')], { env: { PATH: bin }, stdio: 'ignore' });
    } catch (e) {
      code = (e as { status: number }).status;
    }
    expect(code).toBe(127);
    expect(JSON.parse(await readFile(join(dir, 'exit.json'), 'utf8'))).toMatchObject({
      reason: 'StartFailed',
      message: expect.stringMatching(/^Node\.js >= 20 is required on .* and was not found in PATH$/),
    });
  });
});
