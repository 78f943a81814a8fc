/**
 * How `adv cancel`, `adv retry` and `adv reconcile` change the specs repo: set one field of one
 * Run or DAG in its YAML file (comments and layout kept), commit, and push for a URL.
 */
import { parseAllDocuments } from 'yaml';
import { AdvError, ErrorCode } from '../controller/index.js';
import type { Io } from './output.js';
import { gitToken, resolveRepo } from './repo.js';
import { openSpecsWorkTree, type RepoOpts } from './specs-writer.js';

/** Sets a value at a path of the spec's YAML document, e.g. `['spec', 'suspend']`. */
export type SpecEdit = (set: (path: string[], v: unknown) => void) => void;

/** Edits the Run or DAG `name`, commits it with `message` and prints the commit. */
export async function commitSpecEdit(
  io: Io,
  kind: 'Run' | 'DAG',
  name: string,
  opts: RepoOpts,
  edit: SpecEdit,
  message: string,
): Promise<void> {
  const repo = await resolveRepo(opts.repo, io.cwd);
  const wt = await openSpecsWorkTree(repo, opts.branch, await gitToken(io.env));
  try {
    const specs = await wt.load();
    const found =
      specs.objects.find((o) => o.kind === kind && o.name === name) ??
      specs.invalid.find((o) => o.kind === kind && o.name === name);
    if (!found)
      throw new AdvError(ErrorCode.NotFound, `no ${kind} "${name}" in ${repo}`, {
        hint:
          kind === 'Run' && name.includes('.')
            ? `"${name}" looks like a DAG node: cancel its DAG (adv cancel dag ${name.split('.')[0]}) or remove the node from it`
            : `adv get ${kind === 'Run' ? 'runs' : 'dags'} lists them`,
      });
    const text = (await wt.read(found.file))!;
    const docs = parseAllDocuments(text);
    const list = Array.isArray(docs) ? docs : [];
    const doc = list.find((d) => {
      const v = d.toJS() as { kind?: string; metadata?: { name?: string } } | null;
      return v?.kind === kind && v.metadata?.name === name;
    });
    if (!doc) throw new AdvError(ErrorCode.NotFound, `cannot find ${kind} "${name}" in ${found.file}`);
    edit((path, v) => doc.setIn(path, v));
    await wt.write(found.file, list.map((d) => d.toString()).join(''));
    const sha = await wt.commit([found.file], message);
    io.stdout.write(`${message} (${found.file}, commit ${sha.slice(0, 10)})\n`);
  } finally {
    await wt.close();
  }
}
