/**
 * The one small port all git access goes through. Two implementations: `NativeGit` (the `git` CLI,
 * with a long-lived `cat-file --batch` for blobs) and `IsoGit` (isomorphic-git in-process, with a
 * shared cache). Both use the CLI for transport (fetch, push) and for compare-and-swap on refs,
 * which isomorphic-git lacks. `bench/git.ts` measures both so the choice stays measured.
 */

export interface TreeEntry {
  mode: string;
  path: string;
  oid: string;
  type: 'blob' | 'tree' | 'commit';
  /** A blob's size in bytes, when asked for and the reader has it cheaply (see `readTree`). */
  size?: number;
}

export interface CommitInfo {
  oid: string;
  tree: string;
  parents: string[];
  message: string;
  /** Author time, seconds since the epoch. */
  time: number;
}

export interface Identity {
  name: string;
  email: string;
}

export interface CommitRequest {
  parent?: string;
  files: ReadonlyMap<string, Uint8Array | null>;
  message: string;
  author: Identity;
  /** Seconds since the epoch. */
  time?: number;
}

export type PushResult = 'ok' | 'rejected' | 'unreachable';

export interface GitPort {
  /** The repository's git directory. */
  readonly gitdir: string;
  resolveRef(ref: string): Promise<string | undefined>;
  readCommit(oid: string): Promise<CommitInfo>;
  /**
   * One level of a tree. With `sizes`, blob entries carry their `size` where the reader gets it
   * without reading the blob (NativeGit does; IsoGit leaves it undefined): a caller that refuses
   * large files can then refuse them unread.
   */
  readTree(oid: string, opts?: { sizes?: boolean }): Promise<TreeEntry[]>;
  /** Blob contents, in order. */
  readBlobs(oids: readonly string[]): Promise<Uint8Array[]>;
  /**
   * Writes one commit on top of `parent` (none: a root commit) that sets the given files
   * (content) or deletes them (null), and returns its id. No ref is moved.
   */
  commitFiles(c: CommitRequest): Promise<string>;
  /**
   * Compare-and-swap: sets `ref` to `newOid` only if it currently is `expectedOld` (undefined: the
   * ref must not exist). Returns false when someone else moved it.
   */
  updateRef(ref: string, newOid: string, expectedOld: string | undefined): Promise<boolean>;
  /** `git fetch` of the given refspecs; throws GitError when the remote cannot be reached. */
  fetch(remote: string, refspecs: readonly string[]): Promise<void>;
  /** Fast-forward-only push of `oid` to `remoteRef`; never forces. */
  push(remote: string, oid: string, remoteRef: string): Promise<PushResult>;
  /** Commits reachable from `ref` that touched `path` (newest first). */
  log(ref: string, opts?: { path?: string; limit?: number }): Promise<CommitInfo[]>;
  close(): Promise<void>;
}
