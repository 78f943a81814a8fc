/**
 * A secret reaches its job and nothing else. The controller resolves `CANARY_TOKEN` (a random value
 * made for this test) from a `--secrets-file`; a run on each real backend (local, ssh on a real
 * sshd, slurm on a real two-node SLURM) proves it has the value (its sha256 matches) and prints it.
 * Then the value is looked for everywhere it must not be: every object of the specs repo
 * (`git cat-file --batch-all-objects`, any ref or none), the controller's data dir, the object
 * store, the hosts' job dirs (no `secrets` file is left once a job started), the controller's
 * logs, `adv logs`, `adv describe`, the dashboard's pages and APIs, and `/metrics`. The printed
 * line must be there, masked.
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { makeLogger } from '../cli/logger.js';
import { Controller } from '../controller/controller.js';
import { dashboardRoute } from '../controller/dashboard/index.js';
import { serve, type Serving } from '../controller/serve.js';
import {
  FILE_STORAGE,
  slurmAvailable,
  slurmBackendYaml,
  sshBackendYaml,
  useSlurmCluster,
} from './helpers/backends/kinds.js';
import { captureIo } from './helpers/io.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const available = slurmAvailable('the secrets canary test');

const CANARY = `canary-${randomBytes(16).toString('hex')}`;
const SHA = createHash('sha256').update(CANARY).digest('hex');
const RUNS = { 'canary-local': 'local', 'canary-ssh': 'ssh-local', 'canary-slurm': 'slurm-local' };

const run = (name: string, backend: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command:
    - sh
    - -c
    - |
      printf 'token=%s\\n' "$CANARY_TOKEN"
      test "$(printf %s "$CANARY_TOKEN" | sha256sum | cut -c1-64)" = "$EXPECT_SHA" && echo secret-verified
  env: {EXPECT_SHA: ${SHA}}
  secrets: [CANARY_TOKEN]
  backendSelector: {order: [${backend}]}
`;

/** Every regular file under `dir` (symlinks not followed), as paths. */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []))
    if (e.isFile()) out.push(join(e.parentPath, e.name));
  return out;
}

/** The files under `dir` whose bytes hold the canary. */
async function leaksIn(dir: string): Promise<string[]> {
  const found: string[] = [];
  for (const f of await filesUnder(dir))
    if ((await readFile(f).catch(() => Buffer.alloc(0))).includes(CANARY)) found.push(f);
  return found;
}

describe.runIf(available)('a secret reaches its job and appears nowhere else', () => {
  const cluster = useSlurmCluster('adv-canary-');
  let wt: WorkTree;
  let c: Controller | undefined;
  let serving: Serving | undefined;
  cluster.defer(async () => {
    await serving?.close();
    await c?.stop();
    await wt?.cleanup();
  });

  it('on local, ssh and slurm', async () => {
    const tmp = cluster.tmp;
    const secretsFile = join(tmp, 'secrets.env');
    await writeFile(secretsFile, `# test secrets\nCANARY_TOKEN=${CANARY}\n`, { mode: 0o600 });
    const roots = { ssh: join(tmp, 'ssh-root'), slurm: join(tmp, 'slurm-root') };
    wt = await makeWorkTree({
      'backends/local.yaml':
        'apiVersion: adventuretime.dev/v1alpha1\nkind: Backend\nmetadata: {name: local}\nspec: {type: local}\n',
      'backends/ssh.yaml': sshBackendYaml(cluster.sshd, 'ssh-local', roots.ssh),
      'backends/slurm.yaml': slurmBackendYaml(cluster.sshd, roots.slurm, 'debug'),
      'storage.yaml': FILE_STORAGE,
      ...Object.fromEntries(Object.entries(RUNS).map(([n, b]) => [`runs/${n}.yaml`, run(n, b)])),
    });
    const logLines: string[] = [];
    const logIo = {
      ...captureIo(),
      stderr: new Writable({
        write(chunk, _enc, cb) {
          logLines.push(String(chunk));
          cb();
        },
      }),
    };
    const dataDir = join(tmp, 'data');
    c = await Controller.create({
      repo: wt.dir,
      dataDir,
      pollIntervalMs: 300,
      logger: makeLogger(logIo, 'debug'),
      secrets: { file: secretsFile },
    });
    await c.init();
    serving = await serve(c, { httpAddr: '127.0.0.1:0', watch: false, routes: [dashboardRoute(c)] });
    await waitFor(
      'the three runs to finish',
      async () => {
        await c!.pass();
        return Object.keys(RUNS).every((n) =>
          ['Succeeded', 'Failed'].includes(c!.runStatus(n)?.status.phase ?? ''),
        );
      },
      180_000,
      300,
    );

    const shown: Record<string, string> = {};
    for (const name of Object.keys(RUNS)) {
      // It reached the job: the run only succeeds when the value's sha256 matched.
      expect(c.runStatus(name)?.status.phase, name).toBe('Succeeded');
      const logs = captureIo();
      expect(await runCli(['logs', name, '--repo', wt.dir, '--data-dir', dataDir], logs)).toBe(0);
      expect(logs.out()).toContain('secret-verified');
      // What it printed is there, masked.
      expect(logs.out()).toContain('token=***');
      shown[`adv logs ${name}`] = logs.out() + logs.err();
      const describeIo = captureIo();
      expect(await runCli(['describe', 'run', name, '--repo', wt.dir], describeIo)).toBe(0);
      shown[`adv describe ${name}`] = describeIo.out() + describeIo.err();
      for (const path of [
        `/ui/runs/${name}`,
        `/ui/api/runs/${name}`,
        `/ui/api/runs/${name}/logs?attempt=1&after=0`,
      ]) {
        const res = await fetch(`${serving.url}${path}`);
        expect(res.status, path).toBe(200);
        shown[path] = await res.text();
      }
    }
    for (const path of ['/ui/', '/ui/api/overview', '/metrics']) {
      const res = await fetch(`${serving.url}${path}`);
      expect(res.status, path).toBe(200);
      shown[path] = await res.text();
    }
    expect(shown['/ui/api/runs/canary-local/logs?attempt=1&after=0']).toContain('token=***');
    shown['controller log'] = logLines.join('');
    expect(shown['controller log']).toContain('started local job');

    // Nowhere it must not be.
    const leaks = Object.entries(shown)
      .filter(([, text]) => text.includes(CANARY))
      .map(([where]) => where);
    const objects = execFileSync('git', ['cat-file', '--batch-all-objects', '--batch'], {
      cwd: wt.dir,
      maxBuffer: 1 << 30,
    });
    if (objects.includes(CANARY)) leaks.push('an object of the specs repo');
    expect(objects.length).toBeGreaterThan(1000); // the repo was read: specs and status commits
    for (const dir of [dataDir, roots.ssh, roots.slurm]) leaks.push(...(await leaksIn(dir)));
    expect(leaks).toEqual([]);
    // No job dir keeps a secrets file once its job started.
    const secretsFiles = [...(await filesUnder(roots.ssh)), ...(await filesUnder(roots.slurm))].filter((f) =>
      f.endsWith('/secrets'),
    );
    expect(secretsFiles).toEqual([]);
    expect((await filesUnder(join(dataDir, 'store'))).length).toBeGreaterThan(0);
  }, 300_000);
});
