/**
 * How `adv cancel`, `adv retry` and `adv reconcile` change the specs repo: set one field of one
 * Run or DAG as it is COMMITTED on the watched branch, by a minimal textual edit of its file (every
 * other byte kept), commit that alone, and push for a URL.
 *
 * The work tree is a person's: what they have not committed is neither committed nor lost.
 *
 * - The file is clean: the index and the file get the new version, as after any commit.
 * - It has uncommitted changes: the commit is made anyway — the branch is what the controller
 *   watches, and "cancel" should not wait on an unrelated edit — and the same minimal edit is made
 *   to the person's copy, so their edit stays, on top of the new commit (what `git stash`, the
 *   commit, `git stash pop` would leave; what `git pull --autostash` does). Had the copy been left
 *   without it, `git diff` would show the cancel undone and the next `git commit -a` would undo
 *   it. A copy that cannot take the edit (it does not parse, the object is gone from it) is left
 *   exactly as it is, with a warning naming the file and what to do.
 * - It has staged changes: refused, naming the file. A commit of our own would leave the index
 *   holding their version over ours (staging the change undone), and rewriting what they chose
 *   to stage is not ours to do — as git refuses to merge over local changes.
 */
import { AdvError, ErrorCode, type LoadResult } from '../controller/index.js';
import { printable, type Io } from './output.js';
import { gitToken, resolveRepo } from './repo.js';
import { openSpecsWorkTree, type RepoOpts } from './specs-writer.js';
import { setInYaml, YamlEditError, type EditValue } from './yaml-edit.js';

/** Sets a value at a path of the spec's YAML document, e.g. `['spec', 'suspend']`. */
export type SpecEdit = (set: (path: string[], v: EditValue) => void) => void;

type Found = { file: string };

/** The kinds `adv cancel` and `adv retry` edit. */
type EditKind = 'Run' | 'DAG' | 'Sweep';

function find(specs: LoadResult | undefined, kind: EditKind, name: string): Found | undefined {
  return (
    specs?.objects.find((o) => o.kind === kind && o.name === name) ??
    specs?.invalid.find((o) => o.kind === kind && o.name === name)
  );
}

/** Every set of `edit`, made to `text` one after the other. */
function applyEdit(text: string, kind: EditKind, name: string, sets: [string[], EditValue][]): string {
  const which = (v: unknown) => {
    const doc = v as { kind?: string; metadata?: { name?: string } } | null;
    return doc?.kind === kind && doc.metadata?.name === name;
  };
  return sets.reduce((t, [path, v]) => setInYaml(t, which, path, v), text);
}

/** Edits the Run, DAG or Sweep `name` on the watched branch, commits it with `message` and prints the commit. */
export async function commitSpecEdit(
  io: Io,
  kind: EditKind,
  name: string,
  opts: RepoOpts,
  edit: SpecEdit,
  message: string,
): Promise<void> {
  const repo = await resolveRepo(opts.repo, io.cwd);
  const wt = await openSpecsWorkTree(repo, opts.branch, await gitToken(io.env));
  try {
    const parent = await wt.branchHead();
    const found = find(await wt.loadCommitted(parent), kind, name);
    if (!found) {
      const uncommitted = find(await wt.load().catch(() => undefined), kind, name);
      throw new AdvError(
        ErrorCode.NotFound,
        uncommitted
          ? `${kind} "${printable(name)}" is in ${printable(uncommitted.file)} but not committed to ${opts.branch}`
          : `no ${kind} "${printable(name)}" in ${opts.branch} of ${repo}`,
        {
          hint: uncommitted
            ? `commit ${printable(uncommitted.file)} first (the controller only sees what is committed)`
            : kind === 'Run' && name.includes('.')
              ? `"${printable(name)}" looks like a DAG node: cancel its DAG (adv cancel dag ${printable(name.split('.')[0]!)}) or remove the node from it`
              : `adv get ${kind === 'Run' ? 'runs' : kind === 'DAG' ? 'dags' : 'sweeps'} lists them`,
        },
      );
    }
    const file = found.file;
    const shown = printable(file);
    const sets: [string[], EditValue][] = [];
    edit((path, v) => sets.push([path, v]));

    const state = await wt.fileState(file, parent);
    if (state.staged)
      throw new AdvError(ErrorCode.UsageError, `${shown} has staged changes; nothing was committed`, {
        hint: `commit them, or unstage them (git restore --staged ${shown}), then run the command again`,
      });
    let next: string;
    try {
      next = applyEdit(state.committed!, kind, name, sets);
    } catch (e) {
      if (!(e instanceof YamlEditError)) throw e;
      throw new AdvError(ErrorCode.UsageError, `cannot change ${shown} by a small edit: ${e.message}`, {
        hint: 'make the change by hand, commit and push',
      });
    }
    if (next === state.committed)
      throw new AdvError(ErrorCode.UsageError, 'nothing to commit: the specs repo already has this content', {
        hint: 'no change needed',
      });

    // The person's copy: see the header for why it gets the same edit when it can.
    let worktree: string | undefined;
    let note = '';
    if (state.worktree === state.committed) worktree = next;
    else if (state.worktree === undefined)
      note = `warning: ${shown} is deleted in the work tree; the change was committed to ${opts.branch}, the work tree left as it is\n`;
    else {
      try {
        worktree = applyEdit(state.worktree, kind, name, sets);
        note = `note: ${shown} has uncommitted changes: they are not in the commit, and the same change was made to them, so what is left to commit is only yours\n`;
      } catch (e) {
        if (!(e instanceof YamlEditError)) throw e;
        note =
          `warning: ${shown} has uncommitted changes that cannot take the change (${e.message}): ` +
          `it was committed to ${opts.branch} without them, and the file was left as it is\n` +
          `  fix: "git diff ${shown}" now shows the change undone: make it in your copy too, or drop your edits (git checkout ${shown}), before you commit the file\n`;
      }
    }
    const sha = await wt.commitFile(file, next, message, parent, worktree);
    io.stdout.write(`${message} (${shown}, commit ${sha.slice(0, 10)})\n`);
    if (note) io.stderr.write(note);
  } finally {
    await wt.close();
  }
}
