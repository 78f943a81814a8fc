/**
 * A git tree at one commit as a SpecSource. Subtree listings are cached by tree id, so after a new
 * commit only the subtrees whose id changed are read again; blob ids are the loader's change keys,
 * so only changed files are parsed again.
 */
import { isSkippedDir, isSpecFile, type SpecFileRef, type SpecSource } from '../spec/source.js';
import type { GitPort } from './port.js';

/** A spec file of a listing: path relative to the listed tree, blob id, size when the reader has it. */
interface ListedFile {
  path: string;
  oid: string;
  size?: number;
}

/** Flattened listing of a tree: spec files below it, paths relative to it. */
type Listing = readonly ListedFile[];

export class TreeListingCache {
  private readonly byTree = new Map<string, Listing>();
  /** Trees read from git (not served from the cache) since construction. */
  treesRead = 0;

  constructor(private readonly git: GitPort) {}

  async list(treeOid: string): Promise<Listing> {
    const cached = this.byTree.get(treeOid);
    if (cached) return cached;
    this.treesRead++;
    // Sizes from the tree, so a file over the size limit is refused without reading its blob.
    const entries = await this.git.readTree(treeOid, { sizes: true });
    const out: ListedFile[] = [];
    const subtrees = entries.filter((e) => e.type === 'tree' && !isSkippedDir(e.path));
    const listings = await Promise.all(subtrees.map((e) => this.list(e.oid)));
    subtrees.forEach((e, i) => {
      for (const f of listings[i]!) out.push({ ...f, path: `${e.path}/${f.path}` });
    });
    for (const e of entries)
      if (e.type === 'blob' && isSpecFile(e.path)) out.push({ path: e.path, oid: e.oid, size: e.size });
    out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    this.byTree.set(treeOid, out);
    // Bound the cache: listings of old commits are rarely asked for again.
    if (this.byTree.size > 10_000) this.byTree.delete(this.byTree.keys().next().value!);
    return out;
  }
}

export class GitTreeSource implements SpecSource {
  private oids = new Map<string, string>();

  constructor(
    private readonly git: GitPort,
    private readonly treeOid: string,
    private readonly listings: TreeListingCache,
    /** Only files under this folder of the repo (no leading or trailing slash); empty: all. */
    private readonly subdir = '',
  ) {}

  async list(): Promise<SpecFileRef[]> {
    let listing = await this.listings.list(this.treeOid);
    if (this.subdir) {
      const prefix = this.subdir + '/';
      listing = listing
        .filter((f) => f.path.startsWith(prefix))
        .map((f) => ({ ...f, path: f.path.slice(prefix.length) }));
    }
    this.oids = new Map(listing.map((f) => [f.path, f.oid]));
    return listing.map((f) => ({ path: f.path, key: f.oid, size: f.size }));
  }

  readMany(paths: readonly string[]): Promise<Uint8Array[]> {
    return this.git.readBlobs(paths.map((p) => this.oids.get(p)!));
  }
}
