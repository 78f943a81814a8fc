/**
 * The Run that `adv submit` writes, as text a person would have written: a comment header that
 * says where it came from, the fields in the order the docs show them, short lists in flow style.
 * Pure: no git, no file system — the command gathers the inputs.
 */
import { Document, isMap, parseAllDocuments, parseDocument, type Node } from 'yaml';
import { AdvError, ErrorCode, codeRepoUrlProblem } from '../controller/index.js';
import { applySets, type SetArg } from './set-args.js';

export interface SubmitSpecInput {
  name: string;
  /** `-- CMD…` (empty: the command of `base`). */
  command: string[];
  /** The text of `-f FILE`, a Run document to start from. */
  base?: { file: string; text: string };
  backend?: string;
  gpus?: number;
  env: Record<string, string>;
  sets: readonly SetArg[];
  /** The pinned commit, and the repository URL when the code is not the specs repo. */
  code: { ref: string; repo?: string };
  /** The directory the command was started in, relative to the code's top ('' at the top). */
  workingDir: string;
  /** Comment lines for the header (without `# `). */
  header: string[];
}

const KEYS = ['command', 'entry', 'workingDir', 'code', 'resources', 'env', 'backendSelector'];

/** The spec file's text; a usage error when `-f` is not one Run or a value cannot be set. */
export function submitSpecText(input: SubmitSpecInput): string {
  const doc = input.base ? baseDocument(input.base) : new Document({});
  if (!input.base) {
    doc.set('apiVersion', 'adventuretime.dev/v1alpha1');
    doc.set('kind', 'Run');
    doc.set('metadata', doc.createNode({ name: input.name }));
    doc.set('spec', doc.createNode({}));
  }
  doc.setIn(['metadata', 'name'], input.name);
  const spec = doc.get('spec') as Node;
  if (!isMap(spec))
    throw new AdvError(ErrorCode.UsageError, `${input.base?.file ?? 'the spec'}: spec is not a map`, {
      hint: 'give -f a Run document (adv schema Run shows one)',
    });
  if (input.command.length) {
    spec.delete('entry');
    spec.set('command', doc.createNode(input.command, { flow: true }));
  } else if (!spec.has('command') && !spec.has('entry'))
    throw new AdvError(ErrorCode.UsageError, 'no command: nothing to run', {
      hint: 'write the command after "--": adv submit --on local -- python3 train.py',
    });
  if (input.workingDir && !spec.has('workingDir')) spec.set('workingDir', input.workingDir);
  // The code is what was snapshotted; a sub-directory the file ships (code.path) is kept.
  const path = doc.getIn(['spec', 'code', 'path']) as unknown;
  spec.set(
    'code',
    doc.createNode({
      ...(input.code.repo ? { repo: input.code.repo } : {}),
      ref: input.code.ref,
      ...(typeof path === 'string' ? { path } : {}),
    }),
  );
  if (input.gpus !== undefined) doc.setIn(['spec', 'resources', 'gpus'], input.gpus);
  for (const [k, v] of Object.entries(input.env)) doc.setIn(['spec', 'env', k], v);
  if (input.backend)
    doc.setIn(['spec', 'backendSelector', 'order'], doc.createNode([input.backend], { flow: true }));
  if (input.sets.length) {
    // The sets' own errors (a path through a scalar) first, in the words set-args uses.
    applySets(doc.toJS() as Record<string, unknown>, input.sets);
    for (const s of input.sets) doc.setIn(s.path, doc.createNode(s.value, { flow: Array.isArray(s.value) }));
  }
  if (!input.base) orderSpec(spec as unknown as SpecMap);
  // On the first node, not the document: a person writes no blank line under the header.
  (doc.contents as Node).commentBefore = input.header.map((l) => ` ${l}`).join('\n');
  return doc.toString({ lineWidth: 0, flowCollectionPadding: false });
}

type SpecMap = { items: { key: unknown }[] };

/** The generated spec's fields in the order of the docs' examples (sets may have added others). */
function orderSpec(spec: SpecMap): void {
  const rank = (k: unknown) => {
    const i = KEYS.indexOf(String((k as { value?: unknown }).value ?? k));
    return i < 0 ? KEYS.length : i;
  };
  spec.items.sort((a, b) => rank(a.key) - rank(b.key));
}

function baseDocument(base: { file: string; text: string }): Document {
  const all = parseAllDocuments(base.text);
  const docs = Array.isArray(all) ? all : [];
  const doc = docs[0] ?? parseDocument(base.text);
  const kind = doc.get('kind') as unknown;
  if (docs.length !== 1 || doc.errors.length || kind !== 'Run')
    throw new AdvError(
      ErrorCode.UsageError,
      `${base.file}: ${docs.length !== 1 ? `${docs.length} documents` : (doc.errors[0]?.message ?? `kind is ${String(kind)}`)}; -f takes one Run`,
      { hint: 'give -f a file with one Run document (adv schema Run shows the fields)' },
    );
  // Its own header is replaced by ours, which says where this copy came from.
  doc.commentBefore = null;
  const top = doc.contents as (Node & { items?: { key?: { commentBefore?: string | null } }[] }) | null;
  if (top) top.commentBefore = null;
  const firstKey = top?.items?.[0]?.key;
  if (firstKey) firstKey.commentBefore = null;
  return doc;
}

/** A run name from the command: the script or program it starts, made a DNS-1123 label. */
export function nameFromCommand(command: readonly string[]): string {
  const launchers =
    /^(python\d*(\.\d+)?|uv|run|uvx|node|bash|sh|zsh|torchrun|accelerate|launch|deepspeed|srun|env|exec)$/;
  const at = command.findIndex(
    (w) => !w.startsWith('-') && !w.includes('=') && !launchers.test(w.split('/').pop()!),
  );
  const word = at < 0 ? 'run' : command[at]!;
  const file = word.split('/').pop()!;
  // A module (-m pkg.train) is named by its last part; a script (train.py) without its extension.
  const base =
    command[at - 1] === '-m' ? file.split('.').pop()! : file.replace(/\.(py|sh|js|mjs|ts|ipynb|jl|r)$/i, '');
  const slug = base
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/, '');
  return slug || 'run';
}

/** `YYYYMMDD-HHMMSS` (UTC): the part of a generated name that makes it new. */
export function stamp(now: Date): string {
  return now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
}

/**
 * `code.repo` for a remote of the code's repository, as the controller may fetch it: an http(s)
 * URL without credentials (controller/git/code-repo-url.ts). Credentials in the remote's URL are
 * dropped, not written: the spec stays in git history, readable by everyone who reads the specs
 * repo (git still uses them to push the snapshot). An ssh, git:// or path remote is refused, with
 * the https remote to add: guessing one would pin the run to a URL nobody checked.
 */
export function codeRepoFromRemote(remote: string, url: string): string {
  const scp = /^(?:[^@/:]+@)?([^/:]+):(?!\/\/)(.+)$/.exec(url);
  const ssh = /^ssh:\/\/(?:[^@/]+@)?([^/:]+)(?::\d+)?\/(.+)$/i.exec(url);
  const m = ssh ?? (/^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? null : scp);
  if (m) {
    const https = `https://${m[1]}/${m[2]!.replace(/^~?\/*/, '')}`;
    throw new AdvError(
      ErrorCode.UsageError,
      `the code's remote "${remote}" is ${url}, an ssh URL: the controller fetches code over https only`,
      {
        hint: `add an https remote for the same repository and name it: git remote add https ${https} && adv submit --code-remote https … (or push the code to a repository you reach over https)`,
      },
    );
  }
  let clean = url;
  if (/^https?:\/\//i.test(url)) {
    try {
      const u = new URL(url);
      if (u.username || u.password) {
        u.username = '';
        u.password = '';
        clean = u.href;
      }
    } catch {
      // codeRepoUrlProblem says what is wrong with it.
    }
  }
  const problem = codeRepoUrlProblem(clean);
  if (problem)
    throw new AdvError(
      ErrorCode.UsageError,
      `the code's remote "${remote}" (${clean}) cannot be code.repo: ${problem.message}`,
      {
        hint: `pass --code-remote NAME with a remote whose URL is https://…, or push the code to such a repository (${problem.hint})`,
      },
    );
  return clean;
}
