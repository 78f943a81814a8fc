/**
 * Signed commits (`--trusted-signers`), end to end with real git and real ssh-keygen signatures:
 * the controller acts only on a watched-branch head signed by a trusted key that descends from the
 * last verified commit it acted on; anything else changes nothing, and the status, `adv get`, the
 * dashboard and `adv plan` say which commit and why.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { overviewView } from '../controller/dashboard/pages.js';
import type { Condition, SourceStatusDoc } from '../controller/status/types.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const WAIT_MS = 60_000;

let tmp: string;
/** Private keys: alice's is in the allowed_signers file, mallory's is not. */
const key = { alice: '', mallory: '' };
let allowed: string;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-signed-'));
  for (const name of ['alice', 'mallory'] as const) {
    key[name] = join(tmp, name);
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', key[name]]);
  }
  allowed = join(tmp, 'allowed_signers');
  await writeFile(allowed, `alice@example.com ${(await readFile(`${key.alice}.pub`, 'utf8')).trim()}\n`);
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

async function dataDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'adv-data-'));
  cleanups.push(() => removeTree(d));
  return d;
}

async function controller(repo: string, data: string, trustFrom?: string): Promise<Controller> {
  const c = await Controller.create({
    repo,
    dataDir: data,
    trustedSigners: allowed,
    ...(trustFrom ? { trustFrom } : {}),
    pollIntervalMs: 100,
    fetchIntervalMs: 100,
  });
  cleanups.push(() => c.stop());
  return c;
}

/** Commits what is in the work tree, signed with `signer`'s key (none: unsigned). */
async function commit(wt: WorkTree, message: string, signer?: keyof typeof key): Promise<string> {
  await wt.git('add', '-A');
  const sign = signer ? ['-c', 'gpg.format=ssh', '-c', `user.signingkey=${key[signer]}`] : [];
  await wt.git(...sign, 'commit', '--quiet', '--allow-empty', ...(signer ? ['-S'] : []), '-m', message);
  return wt.git('rev-parse', 'HEAD');
}

/** `sources/specs.yaml` as the status branch has it. */
async function source(wt: WorkTree): Promise<SourceStatusDoc | undefined> {
  const text = await wt.git('show', 'adventuretime/status:sources/specs.yaml').catch(() => undefined);
  return text === undefined ? undefined : (parse(text) as SourceStatusDoc);
}

const verified = (doc: SourceStatusDoc | undefined): Condition | undefined =>
  doc?.status.conditions.find((x) => x.type === 'Verified');

async function adv(wt: WorkTree, args: string[]) {
  const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') }, wt.dir);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

/** Passes until the status branch says `commit` was refused; the source status then. */
async function refused(c: Controller, wt: WorkTree, commit: string): Promise<SourceStatusDoc> {
  return waitFor(
    async () => {
      await c.pass();
      const doc = await source(wt);
      return doc?.status.refused?.commit === commit ? doc : undefined;
    },
    { what: `commit ${commit} refused`, timeoutMs: WAIT_MS, detail: () => source(wt) },
  );
}

describe('a controller with --trusted-signers', () => {
  it('acts only on signed descendants of the last verified commit, and keeps observing meanwhile', async () => {
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/first.yaml': runYaml('first', ['true']),
    });
    const s1 = await commit(wt, 'signed specs', 'alice');
    const data = await dataDir();
    const c = await controller(wt.dir, data, s1);
    await c.runUntilIdle({ timeoutMs: WAIT_MS });
    expect(c.runStatus('first')?.status.phase).toBe('Succeeded');
    expect(verified(await source(wt))).toMatchObject({
      status: 'True',
      reason: 'TrustedSigner',
      message: `commit ${s1} is signed by alice@example.com`,
    });
    expect((await source(wt))?.status.verified).toEqual({ commit: s1, signer: 'alice@example.com' });

    // A signed commit adds two runs; one waits for a flag file the test creates later.
    const flag = join(tmp, `flag-${Date.now()}`);
    await wt.write('runs/long.yaml', runYaml('long', ['sleep', '60']));
    await wt.write(
      'runs/gated.yaml',
      runYaml('gated', ['sh', '-c', `while [ ! -e ${flag} ]; do sleep 0.1; done`]),
    );
    const s2 = await commit(wt, 'add long and gated', 'alice');
    const phase = (name: string) => c.runStatus(name)?.status.phase;
    await waitFor(
      async () => {
        await c.pass();
        return phase('long') === 'Running' && phase('gated') === 'Running';
      },
      { what: 'long and gated running', timeoutMs: WAIT_MS },
    );

    // Unsigned: adds a run and deletes a running one's spec. Neither happens.
    await wt.write('runs/sneaky.yaml', runYaml('sneaky', ['true']));
    await wt.remove('runs/long.yaml');
    const unsigned = await commit(wt, 'add sneaky, delete long');
    const doc = await refused(c, wt, unsigned);
    expect(doc.status.refused).toEqual({ commit: unsigned, reason: 'Unsigned' });
    expect(doc.status.verified).toEqual({ commit: s2, signer: 'alice@example.com' });
    expect(verified(doc)).toMatchObject({ status: 'False', reason: 'Unsigned' });
    expect(verified(doc)!.message).toMatch(
      new RegExp(
        `^commit ${unsigned} is not signed; acting on ${s2}, the last verified commit\\. Fix: sign a new commit`,
      ),
    );
    // Running attempts are still observed and recorded: gated ends while the head is refused.
    await writeFile(flag, '');
    await waitFor(
      async () => {
        await c.pass();
        return phase('gated') === 'Succeeded';
      },
      { what: 'gated to succeed under a refused head', timeoutMs: WAIT_MS },
    );
    expect(c.runStatus('sneaky')).toBeUndefined();
    expect(phase('long')).toBe('Running');
    // What was written meanwhile is for the last verified spec commit.
    const trailers = await wt.git(
      'log',
      '-1',
      '--format=%(trailers:key=Spec-Commit,valueonly)',
      'adventuretime/status',
    );
    expect(trailers.trim()).toBe(s2);

    // `adv get` warns, the dashboard says it.
    const got = await adv(wt, ['get', 'runs']);
    expect(got.code).toBe(0);
    expect(got.err).toContain(
      `warning: the watched branch's head is not acted on (Unsigned): commit ${unsigned} is not signed; acting on ${s2}`,
    );
    const page = overviewView(c, Date.now()).sections.find((s) => s.id === 'verification')!.body.text;
    expect(page).toContain('not acted on');
    expect(page).toContain(`commit ${unsigned} is not signed`);

    // Signed, but by a key the file does not list.
    const untrusted = await commit(wt, 'mallory signs sneaky', 'mallory');
    const byMallory = await refused(c, wt, untrusted);
    expect(verified(byMallory)).toMatchObject({ status: 'False', reason: 'UntrustedSigner' });
    expect(verified(byMallory)!.message).toContain(`commit ${untrusted} is signed by key SHA256:`);
    expect(c.runStatus('sneaky')).toBeUndefined();

    // A force-push back to an older signed commit (which has no `long`) is a rollback: refused.
    await wt.git('reset', '--quiet', '--hard', s1);
    const rollback = await refused(c, wt, s1);
    expect(verified(rollback)).toMatchObject({ status: 'False', reason: 'NotDescendant' });
    expect(verified(rollback)!.message).toContain(
      `commit ${s1} (signed by alice@example.com) does not descend from ${s2}`,
    );
    expect(verified(rollback)!.message).toContain(`sign a new commit on top of ${s2} that reverts it`);
    expect(phase('long')).toBe('Running');

    // The last verified commit outlives the controller: in its data dir, and on the status branch,
    // from where a controller on a new data dir (a standby taking over, started with the commit
    // the operator trusts first) adopts it: forward from its own.
    await c.stop();
    const anchorIn = async (dir: string) =>
      JSON.parse(await readFile(join(dir, 'verified-head.json'), 'utf8'));
    expect(await anchorIn(data)).toEqual({ commit: s2, signer: 'alice@example.com' });
    const fresh = await dataDir();
    const standby = await controller(wt.dir, fresh, s1);
    await standby.init();
    await standby.syncDesired();
    expect(standby.view.sourceStatus()?.status.refused).toEqual({ commit: s1, reason: 'NotDescendant' });
    expect((await anchorIn(fresh)).commit).toBe(s2);
    await standby.stop();
    // Restarted on its data dir: still refused, and `long` is still wanted and still observed.
    const again = await controller(wt.dir, data);
    await again.init();
    for (let i = 0; i < 3; i++) await again.pass();
    expect(again.runStatus('long')?.status.phase).toBe('Running');
    expect(verified(await source(wt))).toMatchObject({ reason: 'NotDescendant' });

    // The fix: a new signed commit on top of the last verified one. It is acted on.
    await wt.git('reset', '--quiet', '--hard', s2);
    await wt.remove('runs/long.yaml');
    const s3 = await commit(wt, 'delete long', 'alice');
    await waitFor(
      async () => {
        await again.pass();
        return again.runStatus('long')?.status.phase === 'Cancelled';
      },
      { what: 'long cancelled by the signed deletion', timeoutMs: WAIT_MS },
    );
    expect(again.runStatus('long')?.status.reason).toBe('SpecDeleted');
    const after = await source(wt);
    expect(verified(after)).toMatchObject({
      status: 'True',
      message: `commit ${s3} is signed by alice@example.com`,
    });
    expect(after?.status.refused).toBeUndefined();
    expect(after?.status.verified?.commit).toBe(s3);
  });

  it('acts on nothing on a first start at an unsigned head, and says why', async () => {
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/early.yaml': runYaml('early', ['true']),
    });
    const head = await wt.git('rev-parse', 'HEAD');
    const data = await dataDir();
    const c = await controller(wt.dir, data, head);
    await expect(c.runUntilIdle({ timeoutMs: WAIT_MS })).rejects.toThrow(
      `not acting on the watched branch: --trust-from ${head}: commit ${head} is not signed`,
    );
    const doc = await source(wt);
    expect(doc?.status.refused).toEqual({ commit: head, reason: 'Unanchored' });
    expect(doc?.status.verified).toBeUndefined();
    expect(c.runStatus('early')).toBeUndefined();
    expect(existsSync(join(data, 'verified-head.json'))).toBe(false);
  });

  it('trusts no commit silently on a fresh data dir: a deleted status branch and an old signed head change nothing', async () => {
    // The probe's N7: signed history with r4 added then deleted; the status branch deleted and the
    // branch force-pushed back to the signed commit that had r4; a controller on a fresh data dir.
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/r1.yaml': runYaml('r1', ['true']),
    });
    const c1 = await commit(wt, 'c1', 'alice');
    const ledger = join(tmp, `r4-ran-${Date.now()}`);
    await wt.write('runs/r4.yaml', runYaml('r4', ['sh', '-c', `echo ran >> ${ledger}`]));
    const m = await commit(wt, 'M adds r4', 'alice');
    await wt.remove('runs/r4.yaml');
    const c6 = await commit(wt, 'c6 deletes r4', 'alice');
    const first = await controller(wt.dir, await dataDir(), c1);
    await first.runUntilIdle({ timeoutMs: WAIT_MS });
    expect(first.runStatus('r1')?.status.phase).toBe('Succeeded');
    expect(first.runStatus('r4')).toBeUndefined();
    await first.stop();
    await wt.git('branch', '-D', 'adventuretime/status');
    await wt.git('branch', '-D', 'adventuretime/status-lease').catch(() => '');
    await wt.git('reset', '--quiet', '--hard', m);

    const c = await controller(wt.dir, await dataDir());
    await expect(c.runUntilIdle({ timeoutMs: WAIT_MS })).rejects.toThrow('no verified commit is known');
    const doc = await source(wt);
    expect(doc?.status.refused).toEqual({ commit: m, reason: 'Unanchored' });
    expect(verified(doc)).toMatchObject({ status: 'False', reason: 'Unanchored' });
    expect(verified(doc)!.message).toContain('no verified commit is known to measure a rollback against');
    expect(verified(doc)!.message).toContain('--trust-from COMMIT');
    expect(c.runStatus('r4')).toBeUndefined();
    await c.stop();

    // Named by the operator, the newest commit they checked anchors it: M is then a rollback.
    const anchored = await controller(wt.dir, await dataDir(), c6);
    await anchored.init();
    await anchored.syncDesired();
    expect(anchored.view.sourceStatus()?.status.refused).toEqual({ commit: m, reason: 'NotDescendant' });
    expect(anchored.runStatus('r4')).toBeUndefined();
    expect(existsSync(ledger)).toBe(false);
  });

  it('refuses to start with a trusted signers file it cannot read, naming it', async () => {
    const wt = await workTree({ 'backends/local.yaml': LOCAL_BACKEND });
    const missing = join(tmp, 'no-such-allowed-signers');
    const r = await adv(wt, ['controller', '--once', '--trusted-signers', missing]);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`--trusted-signers ${missing}: cannot read it`);
  });
});

describe('adv plan --trusted-signers', () => {
  it('says whether the controller would act on the planned head, and why not', async () => {
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/a.yaml': runYaml('a', ['true']),
    });
    const s1 = await commit(wt, 'signed', 'alice');
    await wt.write('runs/b.yaml', runYaml('b', ['true']));
    const s2 = await commit(wt, 'add b', 'alice');
    const c = await controller(wt.dir, await dataDir(), s1);
    await c.runUntilIdle({ timeoutMs: WAIT_MS });
    await c.stop();

    await wt.git('checkout', '--quiet', '-b', 'feature');
    await wt.write('runs/c.yaml', runYaml('c', ['true']));
    const signed = await commit(wt, 'add c', 'alice');
    const ok = await adv(wt, ['plan', '--trusted-signers', allowed]);
    expect(ok.code).toBe(0);
    expect(ok.out).toContain(`Signature: accepted — commit ${signed} is signed by alice@example.com.`);
    expect(ok.out).toContain('+ start');

    const unsigned = await commit(wt, 'unsigned on top');
    const no = await adv(wt, ['plan', '--trusted-signers', allowed]);
    expect(no.code).toBe(1);
    expect(no.out).toContain('Signature: refused (Unsigned) — the controller would not act on this commit.');
    expect(no.out).toContain(`commit ${unsigned} is not signed`);
    const json = JSON.parse((await adv(wt, ['plan', '--trusted-signers', allowed, '-o', 'json'])).out) as {
      verification: { ok: boolean; reason: string; commit: string };
    };
    expect(json.verification).toMatchObject({ ok: false, reason: 'Unsigned', commit: unsigned });

    // An older signed commit than the one the controller last acted on: a rollback.
    const back = await adv(wt, ['plan', '--trusted-signers', allowed, '--head', s1, '-o', 'markdown']);
    expect(back.code).toBe(1);
    expect(back.out).toContain('**Signature: refused (NotDescendant)');
    expect(back.out).toContain(`does not descend from ${s2}`);
  });
});
