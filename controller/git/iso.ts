/**
 * GitPort with objects read and written in-process by isomorphic-git (one shared `cache`, which
 * it needs to be usable on packed repos); refs, transport and log go through the git CLI, since
 * isomorphic-git has no compare-and-swap on refs and no `file://` transport.
 */
import * as fs from 'node:fs';
import * as isogit from 'isomorphic-git';
import { NativeGit, type GitEnvOptions } from './native.js';
import type { CommitInfo, GitPort, Identity, PushResult, TreeEntry } from './port.js';

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

  async readTree(oid: string): Promise<TreeEntry[]> {
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

  writeBlob(content: Uint8Array): Promise<string> {
    return isogit.writeBlob({ fs, gitdir: this.gitdir, blob: content });
  }

  writeTree(entries: readonly TreeEntry[]): Promise<string> {
    return isogit.writeTree({
      fs,
      gitdir: this.gitdir,
      tree: entries.map((e) => ({ mode: e.mode, path: e.path, oid: e.oid, type: e.type })),
    });
  }

  writeCommit(c: {
    tree: string;
    parents: string[];
    message: string;
    author: Identity;
    time?: number;
  }): Promise<string> {
    const who = {
      name: c.author.name,
      email: c.author.email,
      timestamp: c.time ?? Math.floor(Date.now() / 1000),
      timezoneOffset: 0,
    };
    return isogit.writeCommit({
      fs,
      gitdir: this.gitdir,
      commit: { tree: c.tree, parent: c.parents, author: who, committer: who, message: c.message },
    });
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
