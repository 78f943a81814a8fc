/**
 * Who may change Backends and Storage (controller/loop/desired/infra-source.ts). A Backend names what the
 * controller itself uses — a kubeconfig whose `exec:` plugin kubectl runs on the controller's host,
 * keys, endpoints — so with `--infra-dir` they come only from the operator's directory, and with
 * `--admin-signers` only as of a commit an admin signed. The first case is the probe's N1: a
 * committed kubeconfig whose exec plugin dumped the controller's environment.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import type { SourceStatusDoc } from '../controller/status/types.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { passUntil } from './helpers/wait.js';

let tmp: string;
const key = { admin: '', other: '' };
let adminSigners: string;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-infra-'));
  for (const name of ['admin', 'other'] as const) {
    key[name] = join(tmp, name);
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', key[name]]);
  }
  adminSigners = join(tmp, 'admin_signers');
  await writeFile(adminSigners, `admin@example.com ${(await readFile(`${key.admin}.pub`, 'utf8')).trim()}\n`);
});
afterAll(() => removeTree(tmp));

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function workTree(files: Record<string, string>): Promise<WorkTree> {
  const wt = await makeWorkTree(files);
  cleanups.push(() => wt.cleanup());
  return wt;
}

async function controller(repo: string, infra: Parameters<typeof Controller.create>[0]['infra']) {
  const dataDir = await mkdtemp(join(tmp, 'data-'));
  const c = await Controller.create({ repo, dataDir, infra, pollIntervalMs: 100, fetchIntervalMs: 100 });
  cleanups.push(() => c.stop());
  await c.init();
  return c;
}

async function source(wt: WorkTree): Promise<SourceStatusDoc | undefined> {
  const text = await wt.git('show', 'adventuretime/status:sources/specs.yaml').catch(() => undefined);
  return text === undefined ? undefined : (parse(text) as SourceStatusDoc);
}

/** Commits the work tree, signed with `signer`'s key (none: unsigned). */
async function commit(wt: WorkTree, message: string, signer?: keyof typeof key): Promise<string> {
  await wt.git('add', '-A');
  const sign = signer ? ['-c', 'gpg.format=ssh', '-c', `user.signingkey=${key[signer]}`] : [];
  await wt.git(...sign, 'commit', '--quiet', '--allow-empty', ...(signer ? ['-S'] : []), '-m', message);
  return wt.git('rev-parse', 'HEAD');
}

const backendYaml = (name: string, extra = '') =>
  LOCAL_BACKEND.replace('name: local', `name: ${name}`) + extra;

/** A kubeconfig whose user's exec plugin writes a file: what kubectl would run on our host. */
const evilKubeconfig = (marker: string) => `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]
users:
  - name: u
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1beta1
        command: sh
        args: [-c, 'env > ${marker}; echo "{\\"apiVersion\\":\\"client.authentication.k8s.io/v1beta1\\",\\"kind\\":\\"ExecCredential\\",\\"status\\":{\\"token\\":\\"x\\"}}"']
        interactiveMode: Never
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`;

describe('--infra-dir: Backends and Storage only from the operator', () => {
  it('refuses a Backend committed to the specs repo where it is written, and its kubeconfig never runs', async () => {
    const marker = join(tmp, 'pwned-dir');
    const infra = join(tmp, 'infra');
    await mkdir(infra);
    await writeFile(join(infra, 'local.yaml'), LOCAL_BACKEND);
    await writeFile(join(infra, 'storage.yaml'), FILE_STORAGE);
    const wt = await workTree({ 'runs/ok.yaml': runYaml('ok', ['true']) });
    await wt.write('evil-kube.yaml', evilKubeconfig(marker));
    await wt.write(
      'backends/k8s.yaml',
      `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: k8s}
spec:
  type: volcano
  volcano: {kubeconfig: ${join(wt.dir, 'evil-kube.yaml')}, context: c, namespace: team}
`,
    );
    await wt.write('runs/grab.yaml', runYaml('grab', ['true']).replace('order: [local]', 'order: [k8s]'));
    await commit(wt, 'a backend of my own');
    const c = await controller(wt.dir, { from: 'dir', dir: infra });
    const refused = await passUntil(
      c,
      'the repo Backend refused and ok succeeded',
      async () =>
        c.runStatus('ok')?.status.phase === 'Succeeded' &&
        Boolean((await source(wt))?.status.errors?.some((e) => e.code === 'InfraNotAllowed')),
    ).then(async () => (await source(wt))!.status.errors!.find((e) => e.code === 'InfraNotAllowed')!);
    expect(refused).toMatchObject({ file: 'backends/k8s.yaml', line: 1, kind: 'Backend' });
    expect(refused.message).toContain(`from its infra dir (${infra}), not from the specs repo`);
    expect(refused.fix).toContain('ask the operator');
    // The Run that names it is told the name is not one the operator declared, and never runs.
    const grab = c.runStatus('grab')!;
    expect(JSON.stringify(grab.status.conditions)).toContain(
      'backend \\"k8s\\" is not one of the Backends this controller\'s operator declared',
    );
    expect(grab.status.attempts ?? []).toEqual([]);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('--admin-signers: Backends and Storage as of the newest admin-signed commit', () => {
  it('acts on a Backend change only once an admin signs it, and says so at the file meanwhile', async () => {
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'storage.yaml': FILE_STORAGE,
      'runs/first.yaml': runYaml('first', ['true']),
    });
    await commit(wt, 'infra, signed by an admin', 'admin');
    const c = await controller(wt.dir, { from: 'signed', signers: adminSigners });
    await passUntil(c, 'first to succeed', () => c.runStatus('first')?.status.phase === 'Succeeded');
    expect(c.runStatus('first')?.status.phase).toBe('Succeeded');

    // Someone else (signed, by a key that is not an admin's) adds a Backend and a Run that uses it.
    await wt.write('backends/mine.yaml', backendYaml('mine'));
    await wt.write(
      'runs/second.yaml',
      runYaml('second', ['true']).replace('order: [local]', 'order: [mine]'),
    );
    await commit(wt, 'my own backend', 'other');
    const doc = await passUntil(c, 'the unsigned Backend reported', async () =>
      Boolean((await source(wt))?.status.errors?.some((e) => e.code === 'InfraNotSigned')),
    ).then(() => source(wt));
    const err = doc!.status.errors!.find((e) => e.code === 'InfraNotSigned')!;
    expect(err).toMatchObject({ file: 'backends/mine.yaml', kind: 'Backend' });
    expect(err.message).toContain('is not in');
    expect(err.message).toContain('(signed by admin@example.com), the newest admin-signed commit');
    expect(err.fix).toContain('an admin signs a commit that has it');
    expect(c.runStatus('second')?.status.attempts ?? []).toEqual([]);

    // The admin signs on top: now it is acted on.
    await commit(wt, 'reviewed', 'admin');
    await passUntil(
      c,
      'second to succeed on the signed backend',
      () => c.runStatus('second')?.status.phase === 'Succeeded',
    );
    expect(c.runStatus('second')!.status.attempts!.at(-1)!.backend).toBe('mine');
    expect((await source(wt))?.status.errors ?? []).toEqual([]);
  });
});

describe('adv plan --infra-dir', () => {
  it('plans against the operator’s Backends, and reports one committed to the repo', async () => {
    const infra = join(tmp, 'plan-infra');
    await mkdir(infra);
    await writeFile(join(infra, 'local.yaml'), LOCAL_BACKEND);
    const wt = await workTree({ 'runs/ok.yaml': runYaml('ok', ['true']) });
    await wt.git('checkout', '--quiet', '-b', 'change');
    await wt.write('runs/two.yaml', runYaml('two', ['true']));
    await wt.write('backends/mine.yaml', backendYaml('mine'));
    await commit(wt, 'a run, and a backend of my own');
    const plan = async (...extra: string[]) => {
      const io = captureIo({ ...process.env, HOME: tmp }, wt.dir);
      return { code: await runCli(['plan', ...extra], io), out: io.out() };
    };
    const without = await plan();
    expect(without.code).toBe(1);
    expect(without.out).toContain('backend "local" is not defined in this repo');
    const withDir = await plan('--infra-dir', infra);
    expect(withDir.code).toBe(1);
    expect(withDir.out).toContain('+ start');
    expect(withDir.out).toMatch(/two\s.*on local/);
    expect(withDir.out).toContain('backends/mine.yaml:1');
    expect(withDir.out).toContain(
      'is not acted on: this controller takes Backends and Storage from its infra dir',
    );
    await wt.remove('backends/mine.yaml');
    await commit(wt, 'no backend of my own');
    expect((await plan('--infra-dir', infra)).code).toBe(0);
  });
});

describe('adv controller on a shared specs repo', () => {
  const adv = async (args: string[]) => {
    const io = captureIo({ ...process.env, HOME: tmp }, tmp);
    return { code: await runCli(args, io), err: io.err() };
  };

  it('must say who may change Backends and Storage', async () => {
    const r = await adv(['controller', '--repo', 'https://git.example.invalid/lab/specs.git', '--once']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('must say who may change Backends and Storage');
    for (const flag of ['--infra-dir DIR', '--admin-signers FILE', '--trust-repo-infra'])
      expect(r.err).toContain(flag);
    const both = await adv(['controller', '--repo', tmp, '--trust-repo-infra', '--infra-dir', tmp, '--once']);
    expect(both.code).toBe(2);
    expect(both.err).toContain('--infra-dir and --trust-repo-infra cannot be used together');
  });

  it('refuses a relative kubeconfig or key path: it would resolve wherever the controller started', async () => {
    const wt = await workTree({
      'backends/k8s.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: k8s}
spec:
  type: volcano
  volcano: {kubeconfig: evil-kube.yaml, namespace: team}
`,
    });
    const io = captureIo({ ...process.env, HOME: tmp }, wt.dir);
    expect(await runCli(['validate', wt.dir], io)).toBe(1);
    expect(io.out()).toContain('backends/k8s.yaml:6:');
    expect(io.out()).toContain('spec.volcano.kubeconfig');
    expect(io.out()).toContain('write an absolute path');
  });
});
