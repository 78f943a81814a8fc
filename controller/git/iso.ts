/**
 * GitPort that READS objects in-process with isomorphic-git (one shared `cache`, which it needs
 * to be usable on packed repos). Writing, refs, transport and log are as in NativeGit.
 * Kept so the choice of reader stays measured (`--git-reader isomorphic`, bench/git.ts).
 */
import * as fs from 'node:fs';
import * as isogit from 'isomorphic-git';
import { NativeGit, type GitEnvOptions } from './native.js';
import type { CommitInfo, CommitRequest, GitPort, PushResult, TreeEntry } from './port.js';

export class IsoGit implements GitPort {
  private readonly cache: object = {};
  private readonly native: NativeGit;

  constructor(
    readonly gitdir: string,
    opts: GitEnvOptions = {},
  ) {
    this.native = new NativeGit(gitdir, opts);
  }

  resolveRef(ref: string): Promise<string | undefined> {
    return this.native.resolveRef(ref);
  }

  async readCommit(oid: string): Promise<CommitInfo> {
    const { commit } = await isogit.readCommit({ fs, gitdir: this.gitdir, oid, cache: this.cache });
    return {
      oid,
      tree: commit.tree,
      parents: commit.parent,
      message: commit.message,
      time: commit.author.timestamp,
    };
  }

  /** No sizes: isomorphic-git has a blob's size only by reading (inflating) the blob. */
  async readTree(oid: string, _opts?: { sizes?: boolean }): Promise<TreeEntry[]> {
    const { tree } = await isogit.readTree({ fs, gitdir: this.gitdir, oid, cache: this.cache });
    return tree.map((e) => ({ mode: e.mode.padStart(6, '0'), path: e.path, oid: e.oid, type: e.type }));
  }

  async readBlobs(oids: readonly string[]): Promise<Uint8Array[]> {
    const out: Uint8Array[] = [];
    // Sequential: isomorphic-git reads pack files with synchronous-looking chains; parallel
    // calls only contend on the same cache.
    for (const oid of oids)
      out.push((await isogit.readBlob({ fs, gitdir: this.gitdir, oid, cache: this.cache })).blob);
    return out;
  }

  commitFiles(c: CommitRequest): Promise<string> {
    return this.native.commitFiles(c);
  }

  updateRef(ref: string, newOid: string, expectedOld: string | undefined): Promise<boolean> {
    return this.native.updateRef(ref, newOid, expectedOld);
  }

  fetch(remote: string, refspecs: readonly string[]): Promise<void> {
    return this.native.fetch(remote, refspecs);
  }

  push(remote: string, oid: string, remoteRef: string): Promise<PushResult> {
    return this.native.push(remote, oid, remoteRef);
  }

  log(ref: string, opts?: { path?: string; limit?: number }): Promise<CommitInfo[]> {
    return this.native.log(ref, opts);
  }

  close(): Promise<void> {
    return this.native.close();
  }
}
