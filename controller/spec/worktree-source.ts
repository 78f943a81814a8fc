/**
 * A folder of a git work tree as the controller will read it once committed: the files git tracks
 * or would track (tracked, and untracked but not ignored; an ignored file never reaches the
 * controller), read from the working tree so uncommitted edits are checked too.
 *
 * The controller reads git objects, not files. What git stores as something other than a file is
 * therefore reported, never read (see `notices`):
 * - a symlink named like a spec is an error: git keeps only its target path, and the controller
 *   reads that text as the spec;
 * - a symlink to a folder, a submodule (a gitlink) or a repository nested in the work tree (git
 *   would add it as a gitlink) is a warning: the controller never reads what is behind them.
 * Hidden folders and node_modules are skipped, as every source skips them.
 */
import { lstat, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { runGit } from '../git/native.js';
import type { Diagnostic } from './diagnostic.js';
import {
  isDirectory,
  isSkippedDir,
  isSpecFile,
  readFiles,
  statKey,
  type SpecFileRef,
  type SpecSource,
} from './source.js';

/** git with settings a checked-out repo cannot turn into a command run here. */
const SAFE = ['-c', 'core.fsmonitor=false'];

/** A path git lists, and what the index says it is. */
interface Listed {
  path: string;
  /** The index's mode: '160000' for a gitlink, '120000' for a symlink; undefined when untracked. */
  mode?: string;
}

export class WorkTreeSource implements SpecSource {
  private skipped: Diagnostic[] = [];

  private constructor(readonly root: string) {}

  /** The source for the folder `root`; undefined when it is not in a git work tree (or git is missing). */
  static async open(root: string): Promise<WorkTreeSource | undefined> {
    const r = await runGit([...SAFE, 'rev-parse', '--is-inside-work-tree'], { cwd: root }).catch(
      () => undefined,
    );
    return r?.code === 0 && r.stdout.toString().trim() === 'true' ? new WorkTreeSource(root) : undefined;
  }

  async list(): Promise<SpecFileRef[]> {
    this.skipped = [];
    const listed = (await this.listed()).filter((l) => !inSkippedDir(l));
    const out: SpecFileRef[] = [];
    await Promise.all(
      listed.map(async (l) => {
        const ref = await this.classify(l);
        if (ref) out.push(ref);
      }),
    );
    this.skipped.sort((a, b) => (a.file < b.file ? -1 : a.file > b.file ? 1 : 0));
    return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  notices(): Diagnostic[] {
    return this.skipped;
  }

  readMany(paths: readonly string[]): Promise<Uint8Array[]> {
    return readFiles(this.root, paths);
  }

  /** Tracked paths with their index modes, then untracked ones that are not ignored; each once. */
  private async listed(): Promise<Listed[]> {
    const ls = async (args: string[]): Promise<string[]> => {
      const r = await runGit([...SAFE, 'ls-files', '-z', ...args], { cwd: this.root });
      if (r.code !== 0) throw new Error(`git ls-files failed in ${this.root}: ${r.stderr.trim()}`);
      return r.stdout.toString('utf8').split('\0').filter(Boolean);
    };
    const [tracked, untracked] = await Promise.all([ls(['--stage']), ls(['--others', '--exclude-standard'])]);
    const byPath = new Map<string, Listed>();
    for (const entry of tracked) {
      const m = /^(\d{6}) [0-9a-f]+ \d\t(.*)$/s.exec(entry);
      if (m) byPath.set(m[2]!, { path: m[2]!, mode: m[1]! }); // a conflict's stages: one path
    }
    for (const path of untracked) if (!byPath.has(path)) byPath.set(path, { path });
    return [...byPath.values()];
  }

  /** The spec file `l` is, or undefined (with a notice when the controller would see it otherwise). */
  private async classify(l: Listed): Promise<SpecFileRef | undefined> {
    const nested = l.path.endsWith('/');
    if (l.mode === '160000' || nested) {
      this.skipped.push(gitlinkSkipped(l.path.replace(/\/$/, ''), nested));
      return undefined;
    }
    const spec = isSpecFile(l.path);
    // Only a spec, a link (in the index or untracked) can matter: anything else is never read.
    if (!spec && l.mode !== '120000' && l.mode !== undefined) return undefined;
    const full = join(this.root, l.path);
    const st = await lstat(full).catch(() => undefined); // undefined: deleted from the working tree
    if (st?.isSymbolicLink()) {
      if (spec) this.skipped.push(linkAsSpec(l.path, await readlink(full)));
      else if (await isDirectory(full)) this.skipped.push(linkToFolder(l.path));
      return undefined;
    }
    return st?.isFile() && spec ? { path: l.path, key: statKey(st), size: st.size } : undefined;
  }
}

/**
 * Whether `l` is in (or, for a submodule or nested repository, is) a folder no source reads:
 * hidden, or node_modules.
 */
function inSkippedDir(l: Listed): boolean {
  const folder = l.mode === '160000' || l.path.endsWith('/');
  const segments = l.path.replace(/\/$/, '').split('/');
  return (folder ? segments : segments.slice(0, -1)).some(isSkippedDir);
}

const at = (file: string) => ({ file, line: 1, column: 1, path: '' });

function linkAsSpec(file: string, target: string): Diagnostic {
  return {
    severity: 'error',
    code: 'SymlinkSpec',
    ...at(file),
    message: `a symbolic link (to ${JSON.stringify(target)}): git stores a link as its target path, so the controller would read the text ${JSON.stringify(target)} as this spec, not the file it points to`,
    hint: 'commit the file itself, not a link: replace the link with a copy of the file',
  };
}

function linkToFolder(file: string): Diagnostic {
  return {
    severity: 'warning',
    code: 'SymlinkSkipped',
    ...at(file),
    message:
      'a symbolic link to a folder: git stores only the link, so the controller never reads the specs in that folder',
    hint: 'move the folder itself into the repo if its specs should run; otherwise nothing to do',
  };
}

function gitlinkSkipped(file: string, nested: boolean): Diagnostic {
  return {
    severity: 'warning',
    code: 'SubmoduleSkipped',
    ...at(file),
    message: nested
      ? 'a git repository inside this one: git would add it as a submodule, and the controller never reads a submodule'
      : 'a git submodule: the controller reads only this repository, never the files of a submodule',
    hint: 'move its specs into this repository if they should run; otherwise nothing to do',
  };
}
