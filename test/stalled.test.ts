/**
 * What a person must fix stalls a run; it is not a backend's failure. Three runs that name a secret
 * the controller does not have: each says which secret and where it was looked for, none is
 * submitted or retried, `--once` finishes, and the healthy backend is not marked Degraded (it used
 * to be: each missing secret was recorded as an infrastructure failure, retried without end).
 * When the secret appears, the run starts.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import type { BackendStatusDoc } from '../controller/status/types.js';
import { removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml } from './helpers/git/specs-repo.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('a run whose secret is missing', () => {
  it('stalls with a condition that names the secret, and leaves the backend healthy', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'adv-stalled-'));
    cleanups.push(() => removeTree(dataDir));
    const files: Record<string, string> = { 'backends/local.yaml': LOCAL_BACKEND };
    for (const n of ['s1', 's2', 's3'])
      files[`runs/${n}.yaml`] = runYaml(n, 'true', '  secrets: [WANDB_API_KEY]\n');
    files['runs/ok.yaml'] = runYaml('ok', 'true');
    const wt = await makeWorkTree(files);
    cleanups.push(() => wt.cleanup());
    const secretsFile = join(dataDir, 'secrets.env');
    await writeFile(secretsFile, 'OTHER_TOKEN=unrelated\n', { mode: 0o600 });
    const c = await Controller.create({
      repo: wt.dir,
      dataDir,
      pollIntervalMs: 100,
      secretEnv: { PATH: process.env.PATH },
      secrets: { file: secretsFile },
    });
    cleanups.push(() => c.stop());
    // --once semantics: finishes, because a stalled run waits for a person, not for a retry.
    await c.runUntilIdle({ timeoutMs: 60_000 });

    expect(c.runStatus('ok')?.status.phase).toBe('Succeeded');
    for (const n of ['s1', 's2', 's3']) {
      const st = c.runStatus(n)!.status;
      expect(st.phase).toBe('Pending');
      expect(st.reason).toBe('SecretMissing');
      expect(st.attempts).toHaveLength(0);
      expect(st.conditions.find((x) => x.type === 'Stalled')).toMatchObject({
        status: 'True',
        reason: 'SecretMissing',
      });
      expect(st.message).toContain(
        `secret WANDB_API_KEY is not set: looked in --secrets-file ${secretsFile}`,
      );
    }
    const backend = c.view.backendStatus('local')!.status as BackendStatusDoc['status'];
    expect(backend.conditions.find((x) => x.type === 'Degraded')?.status).toBe('False');
    expect(backend.failureStreak ?? []).toEqual([]);

    // The secret appears in the file (re-read when it changes; a reconcile asks again): the run starts.
    await writeFile(secretsFile, 'OTHER_TOKEN=unrelated\nWANDB_API_KEY=now-set\n');
    for (const n of ['s1', 's2', 's3']) c.requestReconcile('Run', n);
    await c.runUntilIdle({ timeoutMs: 60_000 });
    for (const n of ['s1', 's2', 's3']) {
      const st = c.runStatus(n)!.status;
      expect(st.phase).toBe('Succeeded');
      expect(st.conditions.find((x) => x.type === 'Stalled')).toBeUndefined();
    }
  });
});

describe('a run the operating system refuses to start', () => {
  it('stalls on E2BIG (a secret too large for an environment), is not retried, and starts once the secret is fixed', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'adv-e2big-'));
    cleanups.push(() => removeTree(dataDir));
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/big.yaml': runYaml('big', 'true', '  secrets: [HUGE_TOKEN]\n  policy: {maxAttempts: 1}\n'),
      'runs/ok.yaml': runYaml('ok', 'true'),
    });
    cleanups.push(() => wt.cleanup());
    // One environment string over Linux's 128 KiB limit: every spawn of this job fails the same way.
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HUGE_TOKEN: 'x'.repeat(200_000) };
    const c = await Controller.create({
      repo: wt.dir,
      dataDir,
      pollIntervalMs: 100,
      secretEnv: env,
      secrets: { env: ['HUGE_TOKEN'] },
    });
    cleanups.push(() => c.stop());
    await c.runUntilIdle({ timeoutMs: 60_000 });
    expect(c.runStatus('ok')?.status.phase).toBe('Succeeded');
    const st = c.runStatus('big')!.status;
    expect(st).toMatchObject({ phase: 'Pending', reason: 'ArgumentsTooLarge' });
    expect(st.conditions.find((x) => x.type === 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'ArgumentsTooLarge',
    });
    expect(st.attempts).toHaveLength(1);
    expect(st.attempts[0]).toMatchObject({ class: 'Stalled' });
    // A resync plans it again: the same spec is not tried again.
    for (let i = 0; i < 3; i++) {
      (c as unknown as { nextResyncAt: number }).nextResyncAt = 0;
      await c.pass();
    }
    expect(c.runStatus('big')!.status.attempts).toHaveLength(1);
    const backend = c.view.backendStatus('local')!.status;
    expect(backend.failureStreak ?? []).toEqual([]);

    // The secret is fixed and a person asks again (adv reconcile): it starts and succeeds.
    env.HUGE_TOKEN = 'small';
    await wt.write(
      'runs/big.yaml',
      runYaml('big', 'true', '  secrets: [HUGE_TOKEN]\n  policy: {maxAttempts: 1}\n').replace(
        'metadata:\n  name: big',
        'metadata:\n  name: big\n  annotations: {adventuretime.dev/reconcile-requested-at: "1"}',
      ),
    );
    await wt.commit('reconcile big');
    c.requestFetch('test');
    await c.runUntilIdle({ timeoutMs: 60_000 });
    expect(c.runStatus('big')!.status.phase).toBe('Succeeded');
  });
});
