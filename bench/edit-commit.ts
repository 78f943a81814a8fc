/**
 * An edit on an existing branch, for benches: one commit whose parent is the branch tip and whose
 * tree is the tip's with only the given files changed.
 *
 * `fastImport` (git-fixtures) cannot do this: a fast-import session starts a branch it has not seen
 * as a parentless commit holding only the files it names, so a second call on a branch replaces the
 * whole tree. Here `from <tip>` makes fast-import start from the tip's tree, and only the changed
 * files are streamed, so it stays cheap however many files the tree holds.
 */
import { git } from '../controller/git/native.js';

const data = (s: string): string => `data ${Buffer.byteLength(s)}\n${s}\n`;

/**
 * Commits `files` (path → new content) on top of `branch` in the repo at `gitdir`; returns the
 * new tip. Throws unless the new commit is a child of the old tip that changes exactly `files`.
 */
export async function commitEdit(
  gitdir: string,
  branch: string,
  message: string,
  files: Record<string, string>,
): Promise<string> {
  const ref = `refs/heads/${branch}`;
  const rev = async (r: string) => (await git(['rev-parse', '--verify', r], { gitdir })).toString().trim();
  const parent = await rev(`${ref}^{commit}`);
  const time = Math.floor(Date.now() / 1000);
  let stream = `commit ${ref}\ncommitter Bench <bench@example.com> ${time} +0000\n${data(message)}from ${parent}\n`;
  for (const [path, content] of Object.entries(files)) stream += `M 100644 inline ${path}\n${data(content)}`;
  // No --force: fast-import refuses to move the branch other than fast-forward.
  await git(['fast-import', '--quiet', '--done'], { gitdir, input: stream + 'done\n' });

  const tip = await rev(`${ref}^{commit}`);
  const parents = (await git(['rev-list', '--parents', '-n', '1', tip], { gitdir }))
    .toString()
    .trim()
    .split(' ');
  const changed = (
    await git(['diff-tree', '-r', '-z', '--name-only', '--no-commit-id', parent, tip], { gitdir })
  )
    .toString()
    .split('\0')
    .filter(Boolean)
    .sort();
  const want = Object.keys(files).sort();
  if (parents.length !== 2 || parents[1] !== parent || changed.join('\n') !== want.join('\n'))
    throw new Error(
      `edit commit on ${branch} is not a child of ${parent} changing only ${want.join(', ')}: ` +
        `parents ${parents.slice(1).join(' ') || '(none)'}, changed ${changed.join(', ') || '(nothing)'}`,
    );
  return tip;
}
