/**
 * Where spec files come from. One port, two implementations: a directory on disk (here) and a git
 * tree at a commit (`controller/git`), so the loader never knows which it reads.
 */
import { lstat, readdir, readFile, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';

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
}

export const isSpecFile = (name: string): boolean => /\.ya?ml$/i.test(name);

/** Hidden directories (.git, .github, …) and node_modules are never spec folders. */
export const isSkippedDir = (name: string): boolean => name.startsWith('.') || name === 'node_modules';

/** A directory tree, or a single file. Symlinks are not followed, so nothing outside is read. */
export class DirectorySource implements SpecSource {
  constructor(readonly root: string) {}

  async list(): Promise<SpecFileRef[]> {
    const st = await stat(this.root);
    if (st.isFile()) return [{ path: this.root, key: statKey(st), size: st.size }];
    const out: SpecFileRef[] = [];
    const walk = async (dir: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true });
      await Promise.all(
        entries.map(async (e) => {
          const full = join(dir, e.name);
          if (e.isDirectory()) {
            if (!isSkippedDir(e.name)) await walk(full);
          } else if (e.isFile() && isSpecFile(e.name)) {
            const s = await lstat(full);
            out.push({ path: relative(this.root, full).split(sep).join('/'), key: statKey(s), size: s.size });
          }
        }),
      );
    };
    await walk(this.root);
    return out.sort((a, b) => (a.path < b.path ? -1 : 1));
  }

  async readMany(paths: readonly string[]): Promise<Uint8Array[]> {
    const out: Uint8Array[] = new Array(paths.length);
    const width = 64;
    for (let i = 0; i < paths.length; i += width) {
      const chunk = paths.slice(i, i + width);
      const bufs = await Promise.all(chunk.map((p) => readFile(p === this.root ? p : join(this.root, p))));
      bufs.forEach((b, j) => (out[i + j] = b));
    }
    return out;
  }
}

function statKey(s: { size: number; mtimeMs: number; ino: number }): string {
  return `${s.size}:${s.mtimeMs}:${s.ino}`;
}
