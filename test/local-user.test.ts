/**
 * A local job reads nothing of the controller's (probe N6). Started as the controller's own user,
 * a job read the controller's `ADV_GIT_TOKEN`, webhook secret and store key from
 * `/proc/<pid>/environ` — `delete process.env.X` does not clear it — and could read its secrets
 * file. With `local.user` the job runs as another system user (here `nobody`; the controller runs
 * as root, as in CI): the same probe gets "Permission denied" everywhere, and the job still
 * checkpoints into the run's part of the `file` store it was handed. A Backend without `local.user`
 * is probed the same way in the same run, to show the probe does find the canaries when it can.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatusDoc } from '../controller/status/types.js';
import { removeTree } from './helpers/io.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { stopProcess, waitFor } from './helpers/wait.js';

const ADV = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');
const CANARIES = {
  ADV_GIT_TOKEN: 'canary-git-token-local-5b1d',
  ADV_WEBHOOK_SECRET: 'canary-webhook-local-0e7a',
  AWS_SECRET_ACCESS_KEY: 'canary-store-key-local-9c3f',
};
const SECRET_IN_FILE = 'canary-secrets-file-local-2d8b';
const isRoot = process.getuid?.() === 0;
const hasNobody = isRoot && execFileSync('getent', ['passwd', 'nobody']).toString().includes('nobody');

if (!hasNobody && process.env.CI) throw new Error('the local.user test needs root and the user nobody in CI');
if (!hasNobody) console.warn('SKIPPING the local.user test: it needs to run as root, with a user nobody');

/** What a hostile job tries: the controller's environment (its grandparent), its secrets file. */
const probe = (secretsFile: string) =>
  [
    'echo "uid=$(id -u)"',
    'echo "tmp=$TMPDIR"',
    'ctrl=$(cut -d" " -f4 /proc/$PPID/stat)',
    'tr "\\0" "\\n" < /proc/$ctrl/environ 2>&1 | grep -E "^(ADV_|AWS_)" || echo "environ: unreadable"',
    `cat ${secretsFile} 2>&1 || true`,
    'mkdir -p "$ADV_CKPT_DIR/1" && echo w > "$ADV_CKPT_DIR/1/w" && touch "$ADV_CKPT_DIR/1/COMMITTED"',
    'sleep 1',
  ].join('; ');

describe.runIf(hasNobody)('local.user: jobs as another system user', () => {
  let tmp: string;
  let wt: WorkTree;

  beforeAll(async () => {
    // Every folder a job of `nobody` walks through is searchable by it: under /tmp itself, not the
    // test run's own TMPDIR (mode 700, like any mkdtemp).
    tmp = await mkdtemp(join('/tmp', 'adv-localuser-'));
    await chmod(tmp, 0o755);
  });
  afterAll(async () => {
    await wt?.cleanup();
    await removeTree(tmp);
  });

  it('cannot read the controller’s environment or secrets file, and still checkpoints', async () => {
    const data = join(tmp, 'data');
    await mkdir(data, { mode: 0o755 });
    const secretsFile = join(tmp, 'run-secrets.env');
    await writeFile(secretsFile, `SOME_SECRET=${SECRET_IN_FILE}\n`, { mode: 0o600 });
    const backend = (name: string, user?: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: ${name}}
spec:
  type: local
  local: {workDir: ${join(tmp, `jobs-${name}`)}${user ? `, user: ${user}` : ''}}
`;
    const run = (name: string, on: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: [sh, -c, ${JSON.stringify(probe(secretsFile))}]
  backendSelector: {order: [${on}]}
`;
    wt = await makeWorkTree({
      'backends/apart.yaml': backend('apart', 'nobody'),
      'backends/same.yaml': backend('same'),
      'storage.yaml': `apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: default}\nspec: {type: file, file: {path: ${join(data, 'store')}}}\n`,
      'runs/apart.yaml': run('apart', 'apart'),
      'runs/same.yaml': run('same', 'same'),
    });
    // The controller's install as nobody meets it: in a dir only root can enter (a checkout under
    // /root, a mode-700 temp dir). Jobs of the controller's user start it from there.
    const hidden = await mkdtemp(join('/tmp', 'adv-install-'));
    await symlink(join(import.meta.dirname, '..', 'dist'), join(hidden, 'dist'));
    const self = JSON.stringify([process.execPath, join(hidden, 'dist', 'cli', 'adv.js')]);
    const c = spawn(
      process.execPath,
      [ADV, 'controller', '--once', '--repo', wt.dir, '--data-dir', data, '--secrets-file', secretsFile],
      { env: { ...process.env, ...CANARIES, ADV_SELF_COMMAND: self }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let log = '';
    for (const s of [c.stdout, c.stderr]) s.on('data', (b: Buffer) => (log += b.toString()));
    const code = await waitFor(() => (c.exitCode !== null ? { code: c.exitCode } : undefined), {
      what: 'adv controller --once to finish',
      timeoutMs: 100_000,
      detail: () => log.slice(-3000),
    }).finally(() => Promise.all([stopProcess(c), removeTree(hidden)]));
    expect(code.code, log.slice(-3000)).toBe(0);
    const status = async (name: string) =>
      (parse(await wt.git('show', `adventuretime/status:runs/${name}.yaml`)) as RunStatusDoc).status;
    const output = (name: string) =>
      readFile(join(tmp, `jobs-${name}`, `adv-${name}-1`, 'output.log'), 'utf8');

    // As the controller's user: the probe finds every canary (what the probe report found).
    const same = await output('same');
    for (const v of [...Object.values(CANARIES), SECRET_IN_FILE]) expect(same).toContain(v);
    expect(log).toContain('local jobs run as this controller');

    // As nobody: nothing of the controller's, and the job did its work.
    const apart = await output('apart');
    expect(apart).toContain('uid=65534');
    expect(apart).toContain(`tmp=${join(tmp, 'jobs-apart', 'adv-apart-1', 'tmp')}`);
    expect(apart).toContain('environ: unreadable');
    expect(apart).toContain('Permission denied');
    for (const v of [...Object.values(CANARIES), SECRET_IN_FILE]) expect(apart).not.toContain(v);
    expect((await status('apart')).phase).toBe('Succeeded');
    expect(existsSync(join(data, 'store', 'runs', 'apart', 'ckpt', '1', 'manifest.json'))).toBe(true);
  });
});
