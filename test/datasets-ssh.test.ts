/**
 * A dataset used by two runs on one SSH host, end to end: `adv dataset push` puts it in the repo's
 * S3 store (s3rver, whose proxy counts the bytes of every GET by key), a controller runs two Runs
 * that read it on a real sshd, and each object's bytes cross the network once: the second run (and
 * the first, if they start together) takes the host cache's copy.
 */
import { randomBytes, createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { packDir } from '../cli/commands/dataset.js';
import { Controller } from '../controller/controller.js';
import { pushedPrefix } from '../runtime/datasets/contract.js';
import { sshBackendYaml } from './helpers/backends/kinds.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { captureIo, removeTree } from './helpers/io.js';
import { haveSshd, startSshd, type Sshd } from './helpers/servers/sshd.js';
import { startS3, type S3Server } from './helpers/servers/s3.js';
import { passUntil } from './helpers/wait.js';

const available = haveSshd();
if (!available && process.env.CI) throw new Error('sshd is required in CI: apt-get install openssh-server');
if (!available) console.warn('SKIPPING the dataset-over-ssh test: no /usr/sbin/sshd here');

/** Two attempts on a loaded machine (bootstrap, fetch, run, observe): a ceiling, not a window. */
const RUNS_MS = 150_000;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe.runIf(available)('a dataset on an SSH host', { timeout: RUNS_MS + 60_000 }, () => {
  let sshd: Sshd;
  let s3: S3Server;
  let tmp: string;
  let wt: WorkTree | undefined;
  beforeAll(async () => {
    [sshd, s3] = await Promise.all([startSshd(), startS3()]);
    // The SDK reads the credentials from the environment when a request is signed (adv dataset push).
    Object.assign(process.env, s3.env);
    tmp = await mkdtemp(join(tmpdir(), 'adv-ds-ssh-'));
  }, 180_000);
  afterAll(async () => {
    for (const k of Object.keys(s3?.env ?? {})) delete process.env[k];
    await wt?.cleanup();
    await Promise.all([sshd?.stop(), s3?.stop()]);
    await removeTree(tmp);
  });

  it('is downloaded once for two runs: the store serves each object once', async () => {
    const data = join(tmp, 'data');
    await mkdir(join(data, 'shards'), { recursive: true });
    const files: Record<string, Buffer> = {
      'shards/0.bin': randomBytes(2 * 1024 * 1024 + 3),
      'shards/1.bin': randomBytes(512 * 1024),
      'vocab.txt': Buffer.from('a b c\n'),
    };
    for (const [p, b] of Object.entries(files)) await writeFile(join(data, p), b);
    const root = join(tmp, 'root');
    wt = await makeWorkTree({
      'backends/box.yaml': sshBackendYaml(sshd, 'box', root),
      'storage.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Storage
metadata: {name: store}
spec:
  type: s3
  s3: {bucket: ${s3.bucket}, endpoint: "${s3.endpoint}", region: us-east-1, forcePathStyle: true, prefix: lab}
`,
    });
    const env = { ...process.env, ...s3.env, HOME: tmp };
    const dataDir = join(tmp, 'controller');
    const io = captureIo(env, wt.dir);
    expect(
      await runCli(['dataset', 'push', data, 'tokens', '--repo', wt.dir, '--data-dir', dataDir], io),
      io.err(),
    ).toBe(0);
    // The repo's own store: no note about pushing elsewhere.
    expect(io.err()).not.toContain('note:');
    const { digest } = await packDir(data, 'tokens');
    const prefix = `lab/${pushedPrefix('tokens', digest)}`;
    // The push read nothing back; what the store served from here on is the runs' doing.
    s3.getBytes.clear();

    // Each run hashes what it was given, so a wrong or partial file fails the test, not only a count.
    const reader = (name: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: [sh, -c, 'cd "$ADV_INPUT_train_DIR" && sha256sum shards/0.bin shards/1.bin vocab.txt > ${join(tmp, name)}.sums']
  backendSelector: {order: [box]}
  inputs: [{dataset: tokens, as: train}]
`;
    await wt.write('runs/first.yaml', reader('first'));
    await wt.write('runs/second.yaml', reader('second'));
    await wt.commit('two runs that read tokens on one host');

    const c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100, secretEnv: env });
    try {
      await c.init();
      const phase = (n: string) => c.runStatus(n)?.status.phase;
      await passUntil(
        c,
        'both runs to end',
        () => ['first', 'second'].every((n) => ['Succeeded', 'Failed'].includes(phase(n) ?? '')),
        RUNS_MS,
      );
      for (const n of ['first', 'second'])
        expect(phase(n), JSON.stringify(c.runStatus(n)?.status)).toBe('Succeeded');
    } finally {
      await c.stop();
    }
    for (const n of ['first', 'second']) {
      const sums = await readFile(join(tmp, `${n}.sums`), 'utf8');
      for (const [p, b] of Object.entries(files)) expect(sums, `${n} ${p}`).toContain(`${sha(b)}  ${p}`);
    }
    // Counted at the store: every file's bytes once, however the two runs overlapped.
    for (const [p, b] of Object.entries(files)) expect(s3.getBytes.get(prefix + p), p).toBe(b.length);
    // And the host cache holds one blob per file, shared by both jobs.
    expect(
      (
        await readFile(
          join(
            root,
            'cache',
            'datasets',
            'blobs',
            sha(files['vocab.txt']!).slice(0, 2),
            sha(files['vocab.txt']!),
          ),
        )
      ).toString(),
    ).toBe('a b c\n');
  });
});
