/** Seeds a specs repo's status branch as an earlier controller would have left it: run status files. */
import { execFileSync } from 'node:child_process';
import { stringify } from 'yaml';
import { ID } from './specs-repo.js';

/**
 * Commits `runs/<name>.yaml` for each document on `refs/heads/adventuretime/status` of the repo at
 * `dir` (a new root commit: whatever the branch held is replaced).
 */
export function seedRunStatuses(dir: string, docs: readonly { metadata: { name: string } }[]): void {
  const git = (args: string[], input?: string) =>
    execFileSync('git', [...ID, ...args], { cwd: dir, input, encoding: 'utf8' }).trim();
  const entries = docs.map((d) => {
    const blob = git(['hash-object', '-w', '--stdin'], stringify(d));
    return `100644 blob ${blob}\t${d.metadata.name}.yaml\n`;
  });
  const runs = git(['mktree'], entries.join(''));
  const root = git(['mktree'], `040000 tree ${runs}\truns\n`);
  const commit = git(['commit-tree', root, '-m', 'status: an earlier controller']);
  git(['update-ref', 'refs/heads/adventuretime/status', commit]);
}
