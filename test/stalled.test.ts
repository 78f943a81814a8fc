/**
 * What a person must fix stalls a run; it is not a backend's failure. Three runs that name a secret
 * the controller does not have: each says which secret and where it was looked for, none is
 * submitted or retried, `--once` finishes, and the healthy backend is not marked Degraded (it used
 * to be: each missing secret was recorded as an infrastructure failure, retried without end).
 * When the secret appears, the run starts.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import type { BackendStatusDoc } from '../controller/status/types.js';
import { removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml } from './helpers/specs-repo.js';

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
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH };
    const c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100, secretEnv: env });
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
      expect(st.message).toContain("secret WANDB_API_KEY is not set: looked in the controller's environment");
    }
    const backend = c.view.backendStatus('local')!.status as BackendStatusDoc['status'];
    expect(backend.conditions.find((x) => x.type === 'Degraded')?.status).toBe('False');
    expect(backend.failureStreak ?? []).toEqual([]);

    // The secret appears (a restarted controller would see it; a reconcile asks again): the run starts.
    env.WANDB_API_KEY = 'now-set';
    for (const n of ['s1', 's2', 's3']) c.requestReconcile('Run', n);
    await c.runUntilIdle({ timeoutMs: 60_000 });
    for (const n of ['s1', 's2', 's3']) {
      const st = c.runStatus(n)!.status;
      expect(st.phase).toBe('Succeeded');
      expect(st.conditions.find((x) => x.type === 'Stalled')).toBeUndefined();
    }
  });
});
