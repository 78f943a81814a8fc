/**
 * Every process the controller spawns gets an explicit environment, never the controller's own
 * (controller/internal/child-env.ts). The compiled controller runs with canary values in the
 * variables an attacker wants (the git token, the webhook secret, the API token, cloud keys, an
 * arbitrary one), its PATH starting with shims that record the environment each tool was started
 * with — git, ssh-keygen (signed commits), flock (the data dir's lock), tar (a local job's code),
 * kubectl and its kubeconfig's exec plugin (volcano), gcloud (gcp-tpu) — and, while a local job
 * runs, every live descendant's `/proc/PID/environ` is read too. No canary may appear anywhere.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeGcloudConfig } from './helpers/cloud/gcloud-config.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { stopProcess, waitFor } from './helpers/wait.js';

const ADV = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');
const TOOLS = ['git', 'ssh-keygen', 'flock', 'tar', 'kubectl', 'gcloud'] as const;
const CANARIES = {
  ADV_GIT_TOKEN: 'canary-git-token-4e1b',
  ADV_WEBHOOK_SECRET: 'canary-webhook-8d2c',
  ADV_API_TOKEN: 'canary-api-token-0123456789abcdef',
  AWS_SECRET_ACCESS_KEY: 'canary-aws-secret-6a9f',
  AWS_ACCESS_KEY_ID: 'canary-aws-id-3c7e',
  GOOGLE_OAUTH_ACCESS_TOKEN: 'canary-gcp-token-1b5d',
  SOME_CONTROLLER_VARIABLE: 'canary-anything-9e2a',
};

let tmp: string;
let dumps: string;
let wt: WorkTree;
let controller: ChildProcess | undefined;
let log = '';

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-childenv-'));
  dumps = join(tmp, 'dumps');
  const shims = join(tmp, 'shims');
  await mkdir(dumps);
  await mkdir(shims);
  for (const tool of TOOLS) {
    const real = execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim();
    await writeFile(join(shims, tool), `#!/bin/sh\nenv > '${dumps}/${tool}.'$$\nexec '${real}' "$@"\n`);
    await chmod(join(shims, tool), 0o755);
  }
  const key = join(tmp, 'admin');
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'admin', '-f', key]);
  const signers = join(tmp, 'allowed_signers');
  await writeFile(signers, `admin@example.com ${(await readFile(`${key}.pub`, 'utf8')).trim()}\n`);
  const kubeconfig = join(tmp, 'kubeconfig.yaml');
  await writeFile(
    kubeconfig,
    `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]
users:
  - name: u
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1beta1
        command: sh
        args: [-c, 'env > ${dumps}/exec-plugin.$$; echo "{\\"apiVersion\\":\\"client.authentication.k8s.io/v1beta1\\",\\"kind\\":\\"ExecCredential\\",\\"status\\":{\\"token\\":\\"x\\"}}"']
        interactiveMode: Never
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`,
  );
  const gcloudConfig = join(tmp, 'gcloud');
  await writeGcloudConfig(gcloudConfig, 'adv-canary', 'http://127.0.0.1:1/');
  const infra = join(tmp, 'infra');
  await mkdir(infra);
  await writeFile(join(infra, 'local.yaml'), LOCAL_BACKEND);
  await writeFile(join(infra, 'storage.yaml'), FILE_STORAGE);
  await writeFile(
    join(infra, 'k8s.yaml'),
    `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: k8s}
spec:
  type: volcano
  volcano: {kubeconfig: ${kubeconfig}, namespace: team, image: 'node:20'}
`,
  );
  await writeFile(
    join(infra, 'tpu.yaml'),
    `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: tpu}
spec:
  type: gcp-tpu
  gcpTpu: {project: adv-canary, zone: us-central2-b, acceleratorType: v4-8}
  connection: {user: root}
`,
  );
  const flag = join(tmp, 'flag');
  wt = await makeWorkTree({
    'runs/held.yaml': runYaml('held', ['sh', '-c', `while [ ! -e ${flag} ]; do sleep 0.1; done`]),
  });
  await wt.git(
    '-c',
    'gpg.format=ssh',
    '-c',
    `user.signingkey=${key}`,
    'commit',
    '-q',
    '-S',
    '--allow-empty',
    '-m',
    'signed',
  );
  controller = spawn(
    process.execPath,
    [
      ...[ADV, 'controller', '--repo', wt.dir, '--data-dir', join(tmp, 'data')],
      ...[
        '--infra-dir',
        infra,
        '--trusted-signers',
        signers,
        '--trust-from',
        await wt.git('rev-parse', 'HEAD'),
      ],
    ],
    {
      env: {
        ...process.env,
        ...CANARIES,
        PATH: `${shims}:${process.env.PATH}`,
        CLOUDSDK_CONFIG: gcloudConfig,
        HOME: tmp,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  for (const s of [controller.stdout!, controller.stderr!])
    s.on('data', (b: Buffer) => (log += b.toString()));
}, 120_000);

afterAll(async () => {
  // The held job ends on its own once the flag exists (a failed test never made it).
  await writeFile(join(tmp, 'flag'), '').catch(() => undefined);
  if (controller) await stopProcess(controller);
  await waitFor(
    async () => {
      const pid = Number(
        await readFile(join(tmp, 'data', 'local', 'local', 'jobs', 'adv-held-1', 'pid'), 'utf8').catch(
          () => '0',
        ),
      );
      return !pid || !existsSync(`/proc/${pid}`);
    },
    { what: 'the held job to end', timeoutMs: 60_000 },
  ).catch(() => undefined);
  await wt?.cleanup();
  await removeTree(tmp);
});

/** Pids of `root` and every process below it. */
async function descendants(root: number): Promise<number[]> {
  const parent = new Map<number, number>();
  for (const e of await readdir('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const stat = await readFile(`/proc/${e}/stat`, 'utf8').catch(() => '');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid) parent.set(Number(e), ppid);
  }
  return [...parent.keys()].filter((pid) => {
    for (let p: number | undefined = parent.get(pid); p; p = parent.get(p)) if (p === root) return true;
    return false;
  });
}

const leaked = (text: string): string[] =>
  Object.entries(CANARIES)
    .filter(([, v]) => text.includes(v))
    .map(([k]) => k);

describe('what the controller spawns', () => {
  it('inherits none of its credentials: every tool, the exec plugin, every live child', async () => {
    const exited = () => (controller!.exitCode !== null ? `controller exited: ${log.slice(-2000)}` : false);
    // While the local job is held, every process below the controller (flock, git cat-file, the
    // job's adv exec and its workload) is alive: read each one's environment from /proc.
    const live = await waitFor(
      async () => {
        const held = await readFile(
          join(tmp, 'data', 'local', 'local', 'jobs', 'adv-held-1', 'pid'),
          'utf8',
        ).catch(() => '');
        return held ? descendants(controller!.pid!) : undefined;
      },
      { what: 'the local job to run', timeoutMs: 90_000, giveUpIf: exited, detail: () => log.slice(-2000) },
    );
    expect(live.length).toBeGreaterThan(2);
    for (const pid of live) {
      const environ = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
      expect(leaked(environ), `process ${pid}`).toEqual([]);
    }
    await writeFile(join(tmp, 'flag'), '');
    // Every tool was started at least once, through its shim.
    const seen = await waitFor(
      async () => {
        const files = await readdir(dumps);
        const tools = [...TOOLS, 'exec-plugin'].filter((t) => files.some((f) => f.startsWith(`${t}.`)));
        return tools.length === TOOLS.length + 1 ? files : undefined;
      },
      {
        what: 'every tool to be spawned',
        timeoutMs: 90_000,
        giveUpIf: exited,
        detail: async () => [await readdir(dumps), log.slice(-2000)],
      },
    );
    for (const f of seen) expect(leaked(await readFile(join(dumps, f), 'utf8')), f).toEqual([]);
    // Tools still find their configuration: the exec plugin ran with kubectl's, gcloud got its own.
    expect(
      await readFile(
        join(
          dumps,
          seen.find((f) => f.startsWith('gcloud.'))!,
        ),
        'utf8',
      ),
    ).toContain('CLOUDSDK_CONFIG=');
  });
});
