/** The signature checks, against real git and real ssh-keygen signatures in a temp repo. */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { git } from './native.js';
import { CommitVerifier, checkTrustedSigners, signatureKind, verdictOf, verifyHead } from './signatures.js';

let tmp: string;
let repo: string;
let allowed: string;
const c: Record<'signed' | 'child' | 'untrusted' | 'unsigned' | 'tampered', string> = {
  signed: '',
  child: '',
  untrusted: '',
  unsigned: '',
  tampered: '',
};

const run = async (...args: string[]) =>
  (await git(['-c', 'user.name=T', '-c', 'user.email=t@example.com', ...args], { cwd: repo }))
    .toString()
    .trim();

async function commit(message: string, key?: string): Promise<string> {
  const sign = key ? ['-c', 'gpg.format=ssh', '-c', `user.signingkey=${key}`] : [];
  await run(...sign, 'commit', '--quiet', '--allow-empty', ...(key ? ['-S'] : []), '-m', message);
  return run('rev-parse', 'HEAD');
}

const publicKey = async (name: string) => (await readFile(join(tmp, `${name}.pub`), 'utf8')).trim();

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-sig-'));
  repo = join(tmp, 'repo');
  await git(['init', '--quiet', repo]);
  for (const name of ['alice', 'mallory'])
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', join(tmp, name)]);
  allowed = join(tmp, 'allowed_signers');
  await writeFile(allowed, `# trusted\nalice@example.com ${await publicKey('alice')}\n`);
  c.signed = await commit('signed', join(tmp, 'alice'));
  c.child = await commit('child', join(tmp, 'alice'));
  c.untrusted = await commit('untrusted', join(tmp, 'mallory'));
  c.unsigned = await commit('unsigned');
  // The signed commit with its message changed after signing.
  const raw = await run('cat-file', 'commit', c.signed);
  c.tampered = (
    await git(['hash-object', '-t', 'commit', '-w', '--stdin'], {
      cwd: repo,
      input: raw.replace(/\n\nsigned$/, '\n\ntampered') + '\n',
    })
  )
    .toString()
    .trim();
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

describe('CommitVerifier', () => {
  it('accepts a commit signed by a key of the file, naming the principal', async () => {
    const v = await new CommitVerifier(allowed, join(repo, '.git')).verify(c.signed);
    expect(v).toMatchObject({ commit: c.signed, ok: true, signer: 'alice@example.com' });
    expect(v.message).toBe(`commit ${c.signed} is signed by alice@example.com`);
  });

  it('refuses an unknown key, an unsigned commit and a tampered one, each with its reason', async () => {
    const verifier = new CommitVerifier(allowed, join(repo, '.git'));
    const untrusted = await verifier.verify(c.untrusted);
    expect(untrusted).toMatchObject({ ok: false, reason: 'UntrustedSigner' });
    expect(untrusted.signer).toMatch(/^SHA256:/);
    expect(untrusted.message).toContain(`commit ${c.untrusted} is signed by key SHA256:`);
    expect(untrusted.message).toContain(`which ${allowed} does not list`);
    expect(await verifier.verify(c.unsigned)).toMatchObject({
      ok: false,
      reason: 'Unsigned',
      message: `commit ${c.unsigned} is not signed`,
    });
    const tampered = await verifier.verify(c.tampered);
    expect(tampered).toMatchObject({ ok: false, reason: 'BadSignature' });
    expect(tampered.message).toContain(`the signature of commit ${c.tampered} does not verify`);
    expect(tampered.fix).toContain('sign a new commit');
  });

  it('forgets its verdicts when the file changes', async () => {
    const file = join(tmp, 'changing_signers');
    await writeFile(file, `alice@example.com ${await publicKey('alice')}\n`);
    const verifier = new CommitVerifier(file, join(repo, '.git'));
    expect((await verifier.verify(c.untrusted)).reason).toBe('UntrustedSigner');
    await writeFile(
      file,
      `alice@example.com ${await publicKey('alice')}\nmallory@example.com ${await publicKey('mallory')}\n`,
    );
    expect(await verifier.verify(c.untrusted)).toMatchObject({ ok: true, signer: 'mallory@example.com' });
    await rm(file);
    await expect(verifier.verify(c.untrusted)).rejects.toThrow(/cannot read the trusted signers file/);
  });

  it('tells descendants from rollbacks, and an ancestor the repo lacks is none', async () => {
    const verifier = new CommitVerifier(allowed, join(repo, '.git'));
    expect(await verifier.descends(c.signed, c.child)).toBe(true);
    expect(await verifier.descends(c.child, c.child)).toBe(true);
    expect(await verifier.descends(c.child, c.signed)).toBe(false);
    expect(await verifier.descends('0'.repeat(40), c.child)).toBe(false);
    expect(await verifyHead(verifier, c.child, c.signed)).toMatchObject({ ok: true });
    const back = await verifyHead(verifier, c.signed, c.child);
    expect(back).toMatchObject({ ok: false, reason: 'NotDescendant', signer: 'alice@example.com' });
    expect(back.message).toContain(`does not descend from ${c.child}`);
    expect(back.fix).toContain(`on top of ${c.child} that reverts it`);
  });
});

describe('signatureKind and verdictOf', () => {
  const header = (sig: string) =>
    `tree ${'a'.repeat(40)}\nauthor A <a@b> 1 +0000\ngpgsig ${sig}\n line\n\nmessage\n`;
  it.each([
    [header('-----BEGIN SSH SIGNATURE-----'), 'ssh'],
    [header('-----BEGIN PGP SIGNATURE-----'), 'openpgp'],
    [header('-----BEGIN SIGNED MESSAGE-----'), 'x509'],
    [`tree ${'a'.repeat(40)}\n\nmessage\ngpgsig -----BEGIN SSH SIGNATURE-----\n`, 'none'],
  ])('%#: %s', (raw, kind) => {
    expect(signatureKind(raw)).toBe(kind);
  });

  it('never trusts an OpenPGP signature: the host keyring is not the file', () => {
    const v = verdictOf('c0ffee', 'openpgp', { status: 'G', signer: 'x', key: '' }, '/etc/allowed');
    expect(v).toMatchObject({ ok: false, reason: 'UntrustedSigner' });
    expect(v.message).toBe(
      'commit c0ffee has an OpenPGP signature; only SSH signatures by keys in /etc/allowed are trusted',
    );
  });
});

describe('checkTrustedSigners', () => {
  it('names a missing file, and one that lists no key, as usage errors', async () => {
    await expect(checkTrustedSigners(join(tmp, 'nope'))).rejects.toMatchObject({
      code: 'UsageError',
      message: expect.stringContaining(`--trusted-signers ${join(tmp, 'nope')}: cannot read it`),
    });
    const empty = join(tmp, 'empty_signers');
    await writeFile(empty, '# nobody yet\n');
    await expect(checkTrustedSigners(empty)).rejects.toMatchObject({
      code: 'UsageError',
      message: `--trusted-signers ${empty} lists no public key`,
    });
    expect(await checkTrustedSigners(allowed)).toBe(allowed);
  });
});
