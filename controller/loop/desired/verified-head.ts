/**
 * Signed commits, as Flux's `verify` and Argo CD's signature verification: with
 * `--trusted-signers FILE` the controller acts only on a watched-branch head that is signed by a
 * key of that file (git/signatures.ts) and descends from the last verified commit it acted on (the
 * *anchor*). Anything else — unsigned, an unknown key, a bad signature, a force-push back to older
 * history — changes nothing: the desired state stays the anchor's, while running attempts go on
 * being observed and recorded.
 *
 * The anchor is kept in the data dir, which only this controller writes: the status branch can be
 * rewritten by anyone who can push to the specs repo and is not signed, so it cannot be what stops
 * a rollback. It is also recorded on the status branch (`sources/specs.yaml`, `status.verified`),
 * from where a controller taking over adopts it — only forward (a descendant of its own anchor)
 * and only a commit signed by a trusted key, so a rewritten status branch never moves it back.
 *
 * Where the data dir holds no anchor (a new machine, an emptyDir, a standby that never acted),
 * nothing is trusted silently: whoever can push can also delete the status branch and force-push an
 * old signed commit. The operator names the first anchor with `--trust-from COMMIT`; without it
 * the `Verified` condition says `Unanchored` and nothing is acted on.
 */
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { AdvError, ErrorCode } from '../../errors.js';
import { runGit } from '../../git/native.js';
import { CommitVerifier, verifyHead, type Verdict } from '../../git/signatures.js';
import type { SpecsRepo } from '../../git/specs-repo.js';
import { Reason, SPECS_SOURCE, type SourceStatusDoc } from '../../status/types.js';
import { errText } from '../observe/observer.js';
import type { RepoSync } from '../status/repo-sync.js';
import { stageVerification } from './source-status.js';

/** A verified commit the controller acted on. */
export interface Anchor {
  commit: string;
  signer: string;
}

const isObjectId = (s: string): boolean => /^[0-9a-f]{40}([0-9a-f]{24})?$/.test(s);

const ANCHOR_FILE = 'verified-head.json';

/** The anchor as the data dir holds it; undefined when there is none (or it is unreadable). */
async function readAnchor(dataDir: string, logger: Logger): Promise<Anchor | undefined> {
  let text: string;
  try {
    text = await readFile(join(dataDir, ANCHOR_FILE), 'utf8');
  } catch {
    return undefined;
  }
  try {
    const a = JSON.parse(text) as Partial<Anchor> | null;
    if (a && typeof a.commit === 'string' && isObjectId(a.commit) && typeof a.signer === 'string')
      return { commit: a.commit, signer: a.signer };
  } catch {
    // reported below
  }
  logger.error(
    { file: join(dataDir, ANCHOR_FILE) },
    'the last verified commit record is unreadable: ignoring it',
  );
  return undefined;
}

/** The gate between the watched branch and the desired state (see the top of this file). */
export class VerifiedHead {
  private readonly verifier: CommitVerifier | undefined;
  private anchor: Anchor | undefined;
  private anchorRead = false;
  /** The status branch's record last looked at, so one not adopted is not looked at every pass. */
  private recordSeen: string | undefined;
  private last: Verdict | undefined;

  constructor(
    private readonly repo: SpecsRepo,
    private readonly sync: RepoSync,
    private readonly o: {
      trustedSigners?: string;
      /** The first anchor, where the data dir has none (`--trust-from`). */
      trustFrom?: string;
      dataDir: string;
      logger: Logger;
      now: () => number;
    },
  ) {
    this.verifier = o.trustedSigners ? new CommitVerifier(o.trustedSigners, repo.git.gitdir) : undefined;
  }

  /**
   * The commit whose desired state is acted on, given the watched branch's head: the head when it
   * verifies, else the last verified commit acted on (undefined: none yet). Stages the `Verified`
   * condition; with nothing to act on it commits it at once, so the status says why.
   */
  async select(head: string | undefined): Promise<string | undefined> {
    if (!this.verifier) {
      // Without trusted signers any head is acted on: a Verified condition or a last verified
      // commit left by an earlier run would be stale (and would refuse a later, legitimate history).
      stageVerification(this.sync.status, undefined, this.o.now());
      if (!this.anchorRead) await rm(join(this.o.dataDir, ANCHOR_FILE), { force: true });
      this.anchorRead = true;
      return head;
    }
    if (!head) return undefined;
    if (!this.anchorRead) {
      this.anchor = await readAnchor(this.o.dataDir, this.o.logger);
      this.anchorRead = true;
    }
    const unanchored = this.anchor ? undefined : await this.anchorFromOperator(this.verifier, head);
    await this.adoptRecorded(this.verifier);
    const v = unanchored ?? (await this.judge(this.verifier, head));
    this.report(v);
    if (v.ok && head !== this.anchor?.commit) await this.moveAnchor({ commit: head, signer: v.signer ?? '' });
    stageVerification(this.sync.status, { verdict: v, verified: this.anchor }, this.o.now());
    if (!this.anchor) {
      await this.sync.commit(undefined);
      await this.sync.publish();
    }
    return this.anchor?.commit;
  }

  /** Why nothing is acted on: the head was refused and nothing verified before; else why there is no head. */
  noSpecsError(): AdvError {
    const v = this.last;
    if (!v || v.ok || this.anchor) return this.sync.noSpecsError();
    return new AdvError(ErrorCode.SpecInvalid, `not acting on the watched branch: ${v.message}`, {
      reason: v.reason,
      commit: v.commit,
      ...(v.fix ? { hint: v.fix } : {}),
    });
  }

  private async judge(verifier: CommitVerifier, head: string): Promise<Verdict> {
    try {
      return await verifyHead(verifier, head, this.anchor?.commit);
    } catch (e) {
      // Not cached: checked again next pass (ssh-keygen installed, the file restored).
      const hint = e instanceof AdvError && typeof e.data.hint === 'string' ? e.data.hint : undefined;
      return {
        commit: head,
        ok: false,
        reason: Reason.VerificationError,
        message: `cannot check the signature of commit ${head}: ${errText(e)}`,
        ...(hint ? { fix: hint } : {}),
      };
    }
  }

  /**
   * With no anchor in the data dir: the commit `--trust-from` names becomes it, if it is signed by a
   * trusted key. Returns why nothing can be acted on otherwise.
   */
  private async anchorFromOperator(verifier: CommitVerifier, head: string): Promise<Verdict | undefined> {
    const refuse = (message: string, fix: string): Verdict => ({
      commit: head,
      ok: false,
      reason: Reason.Unanchored,
      message,
      fix,
    });
    const name = this.o.trustFrom;
    if (!name)
      return refuse(
        'no verified commit is known to measure a rollback against (a new data dir, and the status branch is not trusted on its own)',
        'restart the controller with --trust-from COMMIT, naming the newest signed commit of the watched branch you have checked (git log --show-signature)',
      );
    const r = await runGit(['rev-parse', '--verify', '--quiet', `${name}^{commit}`], {
      gitdir: this.repo.git.gitdir,
    });
    const commit = r.stdout.toString('utf8').trim();
    if (r.code !== 0 || !commit)
      return refuse(
        `--trust-from ${name} is not a commit of the specs repo`,
        'name a commit of the watched branch (a full id from git log)',
      );
    let v: Verdict;
    try {
      v = await verifier.verify(commit);
    } catch (e) {
      return {
        ...refuse(
          `cannot check --trust-from ${name}: ${errText(e)}`,
          'fix the host; checked again every pass',
        ),
        reason: Reason.VerificationError,
      };
    }
    if (!v.ok)
      return refuse(`--trust-from ${name}: ${v.message}`, v.fix ?? 'name a commit signed by a trusted key');
    this.o.logger.info({ commit, signer: v.signer }, 'first verified commit named by --trust-from');
    await this.moveAnchor({ commit, signer: v.signer ?? '' });
    return undefined;
  }

  /**
   * A controller that took the status branch over adopts the anchor its previous holder recorded:
   * only forward (a descendant of its own anchor, which it must have) and only a commit signed by a
   * trusted key.
   */
  private async adoptRecorded(verifier: CommitVerifier): Promise<void> {
    const rec = this.sync.status.get<SourceStatusDoc>('Source', SPECS_SOURCE)?.status.verified?.commit;
    if (!this.anchor || !rec || rec === this.anchor.commit || rec === this.recordSeen) return;
    this.recordSeen = rec;
    try {
      const v = await verifier.verify(rec);
      if (v.ok && (await verifier.descends(this.anchor.commit, rec))) {
        this.o.logger.info({ commit: rec }, 'adopted the last verified commit the status branch records');
        await this.moveAnchor({ commit: rec, signer: v.signer ?? '' });
        return;
      }
      this.o.logger.warn(
        { commit: rec, anchor: this.anchor?.commit, err: v.message },
        'the status branch records a last verified commit that is not signed by a trusted key or is older than ours: ignored',
      );
    } catch (e) {
      this.o.logger.warn(
        { commit: rec, err: errText(e) },
        'cannot check the status branch record of the last verified commit',
      );
    }
  }

  /** Written before anything is acted on: a restart never forgets what it verified. */
  private async moveAnchor(a: Anchor): Promise<void> {
    const file = join(this.o.dataDir, ANCHOR_FILE);
    const tmp = `${file}.tmp-${process.pid}`;
    await writeFile(tmp, JSON.stringify(a) + '\n');
    await rename(tmp, file);
    this.anchor = a;
  }

  /** Logs transitions only: a head refused for an hour is one line, not one per pass. */
  private report(v: Verdict): void {
    const prev = this.last;
    this.last = v;
    if (prev && prev.commit === v.commit && prev.ok === v.ok && prev.reason === v.reason) return;
    if (v.ok) this.o.logger.info({ commit: v.commit, signer: v.signer }, 'watched branch head verified');
    else
      this.o.logger.warn(
        { commit: v.commit, reason: v.reason, acting: this.anchor?.commit ?? null, fix: v.fix },
        `not acting on the watched branch head: ${v.message}`,
      );
  }
}
