/**
 * Commit signatures, checked with real git against an OpenSSH `allowed_signers` file (as git's
 * `gpg.ssh.allowedSignersFile` reads it): `git log --format=%G?`, which runs `ssh-keygen`. Only
 * SSH signatures count — an OpenPGP or X.509 one would be checked against the host's own keyring,
 * which is not the file. A commit's verdict never changes for one version of the file, so verdicts
 * are cached by commit id until the file's mtime, size or inode changes. Used by the controller's
 * gate (loop/desired/verified-head.ts) and by `adv plan --trusted-signers`.
 */
import { spawn } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { AdvError, ErrorCode } from '../errors.js';
import { toolEnv } from '../internal/child-env.js';
import { runGit } from './native.js';

const errText = (e: unknown): string => (e instanceof Error ? e.message : String(e));

/**
 * Why a head is not acted on (the `Verified` condition's reason when False). Declared here, where
 * they are decided; status/types.ts's `Reason` includes them.
 */
export const VerifyReason = {
  /** The head carries no signature. */
  Unsigned: 'Unsigned',
  /** The head is signed, but not by a key of the trusted signers file (or not by SSH). */
  UntrustedSigner: 'UntrustedSigner',
  /** The head's signature does not match its content. */
  BadSignature: 'BadSignature',
  /** The head does not descend from the last verified commit acted on: a rollback. */
  NotDescendant: 'NotDescendant',
  /** The signature could not be checked (ssh-keygen missing, the file unreadable). */
  VerificationError: 'VerificationError',
  /**
   * No verified commit to measure a rollback against: a fresh data dir and no
   * `--trust-from`. Nothing is acted on until the operator names one.
   */
  Unanchored: 'Unanchored',
} as const;
export type VerifyReason = (typeof VerifyReason)[keyof typeof VerifyReason];

/** The verdict on one commit. */
export interface Verdict {
  commit: string;
  ok: boolean;
  /** Who signed: the principal of the matching allowed_signers line, else the key's fingerprint. */
  signer?: string;
  reason?: VerifyReason;
  /** What was found, naming the commit. */
  message: string;
  /** What a person does about a refusal. */
  fix?: string;
}

type SignatureKind = 'none' | 'ssh' | 'openpgp' | 'x509' | 'other';

/** The kind of signature a raw commit object (`git cat-file commit`) carries, from its header. */
export function signatureKind(rawCommit: string): SignatureKind {
  const end = rawCommit.indexOf('\n\n');
  const m = /^gpgsig(?:-sha256)? (.*)$/m.exec(end < 0 ? rawCommit : rawCommit.slice(0, end + 1));
  if (!m) return 'none';
  const first = m[1]!.trim();
  if (first === '-----BEGIN SSH SIGNATURE-----') return 'ssh';
  if (first === '-----BEGIN PGP SIGNATURE-----') return 'openpgp';
  if (first === '-----BEGIN SIGNED MESSAGE-----') return 'x509';
  return 'other';
}

/**
 * The verdict from the signature's kind and git's `%G?`, `%GS`, `%GF` (pure). Only SSH signatures
 * are checked: an OpenPGP or X.509 signature would be checked against the controller's own keyring,
 * which is not the trusted signers file.
 */
export function verdictOf(
  commit: string,
  kind: SignatureKind,
  check: { status: string; signer: string; key: string },
  file: string,
): Verdict {
  const sign = `sign a new commit with a key listed in ${file} (git -c gpg.format=ssh -c user.signingkey=KEY commit -S) and push it`;
  const refuse = (reason: VerifyReason, message: string, fix = sign): Verdict => ({
    commit,
    ok: false,
    reason,
    message,
    fix,
    ...(check.key ? { signer: check.key } : {}),
  });
  if (kind === 'none') return refuse(VerifyReason.Unsigned, `commit ${commit} is not signed`);
  if (kind !== 'ssh')
    return refuse(
      VerifyReason.UntrustedSigner,
      `commit ${commit} has ${kind === 'openpgp' ? 'an OpenPGP' : kind === 'x509' ? 'an X.509' : 'an unknown'} signature; only SSH signatures by keys in ${file} are trusted`,
    );
  switch (check.status) {
    case 'G':
      return {
        commit,
        ok: true,
        signer: check.signer || check.key,
        message: `commit ${commit} is signed by ${check.signer || check.key}`,
      };
    case 'U':
      return refuse(
        VerifyReason.UntrustedSigner,
        `commit ${commit} is signed by key ${check.key || '(unknown)'}, which ${file} does not list`,
        `${sign}, or add the key to ${file} as a line "<principal> <key type> <public key>"`,
      );
    case 'X':
    case 'Y':
    case 'R':
      return refuse(
        VerifyReason.UntrustedSigner,
        `commit ${commit} is signed by key ${check.key || '(unknown)'}, which is expired or revoked`,
      );
    case 'B':
      return refuse(
        VerifyReason.BadSignature,
        `the signature of commit ${commit} does not verify: the commit was changed after it was signed, or the signature is corrupt`,
      );
    default:
      return refuse(
        VerifyReason.BadSignature,
        `the signature of commit ${commit} cannot be checked (git says ${check.status || 'nothing'})`,
      );
  }
}

/** The same head, refused because it does not descend from the anchor. */
export function notDescendant(v: Verdict, anchor: string): Verdict {
  return {
    commit: v.commit,
    ok: false,
    ...(v.signer ? { signer: v.signer } : {}),
    reason: VerifyReason.NotDescendant,
    message: `commit ${v.commit} (signed by ${v.signer ?? 'a trusted key'}) does not descend from ${anchor}, the last verified commit acted on: moving the branch back to older or other history is refused as a rollback`,
    fix: `to undo a change, sign a new commit on top of ${anchor} that reverts it (git revert) and push that`,
  };
}

const isObjectId = (s: string): boolean => /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(s);

/** Checks commits' SSH signatures against an allowed_signers file with real git. */
export class CommitVerifier {
  readonly file: string;
  private readonly verdicts = new Map<string, Verdict>();
  private readonly ancestry = new Map<string, boolean>();
  private fileStamp = '';

  constructor(
    file: string,
    private readonly gitdir: string,
  ) {
    this.file = resolve(file);
  }

  /** The commit's signature verdict (not its ancestry). Throws when it cannot be checked at all. */
  async verify(commit: string): Promise<Verdict> {
    if (!isObjectId(commit)) throw new AdvError(ErrorCode.GitError, `not a commit id: ${commit}`);
    await this.rereadIfChanged();
    const known = this.verdicts.get(commit);
    if (known) return known;
    const raw = await runGit(['cat-file', 'commit', commit], { gitdir: this.gitdir });
    if (raw.code !== 0)
      throw new AdvError(ErrorCode.GitError, `cannot read commit ${commit}: ${raw.stderr.trim()}`);
    const kind = signatureKind(raw.stdout.toString('utf8'));
    let check = { status: '', signer: '', key: '' };
    if (kind === 'ssh') {
      const r = await runGit(
        [
          ...[
            '-c',
            `gpg.ssh.allowedSignersFile=${this.file}`,
            'log',
            '-1',
            '--no-walk',
            '--no-show-signature',
          ],
          ...['--format=%G?%x00%GS%x00%GF', commit, '--'],
        ],
        { gitdir: this.gitdir },
      );
      if (/cannot run ssh-keygen/i.test(r.stderr))
        throw new AdvError(ErrorCode.GitError, 'git cannot run ssh-keygen to check SSH signatures', {
          hint: 'install openssh-client on the controller host',
        });
      if (r.code !== 0) throw new AdvError(ErrorCode.GitError, `git log failed: ${r.stderr.trim()}`);
      const [status = '', signer = '', key = ''] = r.stdout.toString('utf8').trim().split('\0');
      check = { status, signer, key };
    }
    const v = verdictOf(commit, kind, check, this.file);
    if (this.verdicts.size >= 10_000) this.verdicts.clear();
    this.verdicts.set(commit, v);
    return v;
  }

  /** Whether `commit` is `ancestor` or descends from it; an ancestor the repo lacks is not one. */
  async descends(ancestor: string, commit: string): Promise<boolean> {
    if (ancestor === commit) return true;
    const key = `${ancestor}..${commit}`;
    const known = this.ancestry.get(key);
    if (known !== undefined) return known;
    const r = await runGit(['merge-base', '--is-ancestor', ancestor, commit], { gitdir: this.gitdir });
    // A complete clone has every ancestor of the head: an object it lacks is in none of its history.
    const missing = /not a valid|bad object|unknown revision|no such commit/i.test(r.stderr);
    if (r.code > 1 && !missing)
      throw new AdvError(ErrorCode.GitError, `git merge-base failed: ${r.stderr.trim()}`);
    const yes = r.code === 0;
    if (this.ancestry.size >= 10_000) this.ancestry.clear();
    this.ancestry.set(key, yes);
    return yes;
  }

  /** A new version of the file (mtime, size or inode changed) may trust other keys: forget verdicts. */
  private async rereadIfChanged(): Promise<void> {
    let s;
    try {
      s = await stat(this.file);
    } catch (e) {
      throw new AdvError(
        ErrorCode.IoError,
        `cannot read the trusted signers file ${this.file}: ${errText(e)}`,
        {
          hint: 'restore the file, or restart the controller naming a signers file that exists',
        },
      );
    }
    const stamp = `${s.mtimeMs}:${s.size}:${s.ino}`;
    if (stamp === this.fileStamp) return;
    this.fileStamp = stamp;
    this.verdicts.clear();
  }
}

/**
 * Checked before a controller starts with `--trusted-signers`: the file is readable and lists at
 * least one key, and ssh-keygen (which git runs to verify) is installed. Returns the absolute path.
 */
export async function checkTrustedSigners(file: string, flag = '--trusted-signers'): Promise<string> {
  const path = resolve(file);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw new AdvError(ErrorCode.UsageError, `${flag} ${file}: cannot read it: ${errText(e)}`, {
      hint: 'name an OpenSSH allowed_signers file: one line per key, "<principal> <key type> <public key>"',
    });
  }
  const keys = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#') && /(^|\s)(ssh-|ecdsa-|sk-)\S+\s+[A-Za-z0-9+/=]{16,}/.test(l));
  if (keys.length === 0)
    throw new AdvError(ErrorCode.UsageError, `${flag} ${file} lists no public key`, {
      hint: 'add a line "<principal> <key type> <public key>", e.g. from: echo "you@example.com $(cat ~/.ssh/id_ed25519.pub)"',
    });
  const found = await new Promise<boolean>((done) => {
    const child = spawn('ssh-keygen', ['-?'], { stdio: 'ignore', env: toolEnv('ssh-keygen') });
    child.on('error', () => done(false));
    child.on('close', () => done(true));
  });
  if (!found)
    throw new AdvError(
      ErrorCode.UsageError,
      'ssh-keygen is not installed: git needs it to check SSH signatures',
      {
        hint: 'install openssh-client (apt-get install openssh-client)',
      },
    );
  return path;
}

/**
 * Would a controller act on `head`? Its signature, and whether it descends from `anchor` (the last
 * verified commit acted on, as the status branch records it). For `adv plan`.
 */
export async function verifyHead(
  verifier: CommitVerifier,
  head: string,
  anchor: string | undefined,
): Promise<Verdict> {
  const v = await verifier.verify(head);
  if (!v.ok || !anchor || (await verifier.descends(anchor, head))) return v;
  return notDescendant(v, anchor);
}
