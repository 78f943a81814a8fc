/**
 * Jobs inherit nothing from the controller. The controller runs with canary values in the
 * variables an attacker with push access would want (the git token, the webhook secret, a cloud
 * key, and an arbitrary one); a run on each real backend (local, ssh on a real sshd, slurm on a
 * real two-node SLURM) writes its whole environment to a file. None of the canaries may appear;
 * what the spec names (its env, a secret it declares, a variable its Backend passes) must.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import {
  FILE_STORAGE,
  slurmAvailable,
  slurmBackendYaml,
  sshBackendYaml,
  useSlurmCluster,
} from './helpers/backends/kinds.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const available = slurmAvailable('the job environment test');

const CANARIES = {
  ADV_GIT_TOKEN: 'canary-git-token-7f3a',
  ADV_WEBHOOK_SECRET: 'canary-webhook-9c1e',
  AWS_SECRET_ACCESS_KEY: 'canary-aws-2b8d',
  SOME_CONTROLLER_VARIABLE: 'canary-anything-5e0f',
};
const ALLOWED = { RUN_SECRET: 'declared-secret-value', LAB_PROXY: 'http://proxy.lab:3128' };

const run = (name: string, backend: string, out: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}}
spec:
  command: [sh, -c, 'env > "$OUT/$ADV_RUN.env"']
  env: {OUT: ${out}, FROM_SPEC: spec-value}
  secrets: [RUN_SECRET]
  backendSelector: {order: [${backend}]}
`;

describe.runIf(available)('jobs inherit nothing from the controller', () => {
  const cluster = useSlurmCluster('adv-jobenv-');
  const saved: Record<string, string | undefined> = {};
  let wt: WorkTree;
  let c: Controller | undefined;
  cluster.defer(async () => {
    await c?.stop();
    await wt?.cleanup();
  });
  beforeAll(() => {
    for (const [k, v] of Object.entries({ ...CANARIES, ...ALLOWED })) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  afterAll(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it('on local, ssh and slurm: no canary, but the spec env, its secret and passEnv', async () => {
    const out = cluster.tmp;
    const passEnv = '  passEnv: [LAB_PROXY]\n';
    wt = await makeWorkTree({
      'backends/local.yaml': `apiVersion: adventuretime.dev/v1alpha1\nkind: Backend\nmetadata: {name: local}\nspec:\n  type: local\n${passEnv}`,
      'backends/ssh.yaml': sshBackendYaml(cluster.sshd, 'ssh-local', join(cluster.tmp, 'ssh-root')) + passEnv,
      'backends/slurm.yaml': slurmBackendYaml(cluster.sshd, join(cluster.tmp, 'slurm-root'), 'debug').replace(
        '  type: slurm\n',
        `  type: slurm\n${passEnv}`,
      ),
      'storage.yaml': FILE_STORAGE,
      'runs/on-local.yaml': run('on-local', 'local', out),
      'runs/on-ssh.yaml': run('on-ssh', 'ssh-local', out),
      'runs/on-slurm.yaml': run('on-slurm', 'slurm-local', out),
    });
    // The controller reads its own process environment, where the canaries are.
    c = await Controller.create({
      repo: wt.dir,
      dataDir: join(cluster.tmp, 'data'),
      pollIntervalMs: 300,
      secrets: { env: ['RUN_SECRET'] },
    });
    await c.init();
    const names = ['on-local', 'on-ssh', 'on-slurm'];
    await waitFor(
      'the three runs to finish',
      async () => {
        await c!.pass();
        return names.every((n) => c!.runStatus(n)?.status.phase === 'Succeeded');
      },
      120_000,
      200,
    ).catch((e: Error) => {
      throw new Error(
        `${e.message}\n${JSON.stringify(
          names.map((n) => c!.runStatus(n)?.status),
          null,
          1,
        )}`,
      );
    });
    for (const name of names) {
      const env = await readFile(join(out, `${name}.env`), 'utf8');
      for (const [k, v] of Object.entries(CANARIES)) {
        expect(env, `${name} sees ${k}`).not.toContain(v);
        expect(env, `${name} has ${k}`).not.toMatch(new RegExp(`^${k}=`, 'm'));
      }
      expect(env).toMatch(/^FROM_SPEC=spec-value$/m);
      expect(env).toMatch(/^RUN_SECRET=declared-secret-value$/m);
      expect(env).toMatch(/^LAB_PROXY=http:\/\/proxy\.lab:3128$/m);
      expect(env).toMatch(new RegExp(`^ADV_RUN=${name}$`, 'm'));
      expect(env).toMatch(/^PATH=/m);
    }
  });
});
