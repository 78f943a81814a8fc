/**
 * Where spec files come from. One port, three implementations: a directory on disk (here), a git
 * work tree as the controller will see it (`worktree-source.ts`) and a git tree at a commit
 * (`controller/git`), so the loader never knows which it reads.
 */
import { lstat, readdir, readFile, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import type { Diagnostic } from './diagnostic.js';

export interface SpecFileRef {
  /** Path relative to the source root, with `/` separators. */
  path: string;
  /** Changes whenever the content may have changed (a blob id, or size+mtime+inode). */
  key: string;
  /**
   * Size in bytes, when the source knows it without reading the file (a stat, a git tree read
   * with sizes): the loader refuses a file over the size limit from it, unread.
   */
  size?: number;
}

export interface SpecSource {
  /** Every candidate spec file: `*.yaml` and `*.yml`, outside hidden directories. */
  list(): Promise<SpecFileRef[]>;
  /** Contents of the given files, in order. */
  readMany(paths: readonly string[]): Promise<Uint8Array[]>;
  /**
   * What the last `list()` met and did not hand over as a spec file, said where it is: an error
   * where the controller would read something else than the file (a committed symlink), a warning
   * where nothing is read (a link not followed, a submodule). Absent: nothing of the kind.
   */
  notices?(): Diagnostic[];
}

export const isSpecFile = (name: string): boolean => /\.ya?ml$/i.test(name);

/** Hidden directories (.git, .github, …) and node_modules are never spec folders. */
export const isSkippedDir = (name: string): boolean => name.startsWith('.') || name === 'node_modules';

/**
 * A directory tree, or a single file. Symlinks are not followed, so nothing outside is read; each
 * one that could hold specs (a link named like a spec, a link to a folder) is a warning, so that a
 * skipped file is never mistaken for a valid one.
 */
export class DirectorySource implements SpecSource {
  private skipped: Diagnostic[] = [];

  constructor(readonly root: string) {}

  async list(): Promise<SpecFileRef[]> {
    const st = await stat(this.root);
    this.skipped = [];
    if (st.isFile()) return [{ path: this.root, key: statKey(st), size: st.size }];
    const out: SpecFileRef[] = [];
    const walk = async (dir: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true });
      await Promise.all(
        entries.map(async (e) => {
          const full = join(dir, e.name);
          const rel = relative(this.root, full).split(sep).join('/');
          if (e.isDirectory()) {
            if (!isSkippedDir(e.name)) await walk(full);
          } else if (e.isFile() && isSpecFile(e.name)) {
            const s = await lstat(full);
            out.push({ path: rel, key: statKey(s), size: s.size });
          } else if (e.isSymbolicLink() && (isSpecFile(e.name) || (await isDirectory(full)))) {
            this.skipped.push(linkNotFollowed(rel));
          }
        }),
      );
    };
    await walk(this.root);
    this.skipped.sort((a, b) => (a.file < b.file ? -1 : 1));
    return out.sort((a, b) => (a.path < b.path ? -1 : 1));
  }

  notices(): Diagnostic[] {
    return this.skipped;
  }

  async readMany(paths: readonly string[]): Promise<Uint8Array[]> {
    return readFiles(this.root, paths);
  }
}

/** Files under `root` (or `root` itself), in order, 64 at a time. */
export async function readFiles(root: string, paths: readonly string[]): Promise<Uint8Array[]> {
  const out: Uint8Array[] = new Array(paths.length);
  const width = 64;
  for (let i = 0; i < paths.length; i += width) {
    const chunk = paths.slice(i, i + width);
    const bufs = await Promise.all(chunk.map((p) => readFile(p === root ? p : join(root, p))));
    bufs.forEach((b, j) => (out[i + j] = b));
  }
  return out;
}

/** Whether `path` is a folder, links followed; false when it cannot be read. */
export async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

/** A symlink outside a git work tree: not followed, so not validated. */
function linkNotFollowed(file: string): Diagnostic {
  return {
    severity: 'warning',
    code: 'SymlinkSkipped',
    file,
    line: 1,
    column: 1,
    path: '',
    message: 'a symbolic link: not followed, so nothing behind it is validated',
    hint: 'put the file (or folder) itself in the repo: once committed, git keeps a link as its target path only, and the controller never reads a spec through it',
  };
}

/** A stat signature: changes whenever the content may have. */
export function statKey(s: { size: number; mtimeMs: number; ino: number }): string {
  return `${s.size}:${s.mtimeMs}:${s.ino}`;
}
