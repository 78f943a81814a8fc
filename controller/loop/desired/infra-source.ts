/**
 * Where the infrastructure kinds come from. A Backend or a Storage names credentials, files,
 * endpoints and cluster contexts the controller itself uses (a kubeconfig whose exec plugin
 * kubectl runs, an identity file, an API URL that receives an API key, a bucket that receives
 * every checkpoint), so whoever may change them may act as the controller. Run and DAG specs
 * never can. The operator says which of three rules holds (docs/security.md, "Who can do what"):
 *
 * - `repo` — Backends and Storage are read from the watched branch like every spec: everyone who
 *   can push is trusted with infrastructure. The default for a local specs repo (the embedded
 *   setup, one person), and an explicit choice (`--trust-repo-infra`) for a shared one.
 * - `dir` — they are read from a directory of the controller's host (`--infra-dir`), as Argo CD
 *   keeps AppProjects beside the controller rather than in a tenant's repo; any in the specs repo
 *   is refused where it is written.
 * - `signed` — read from the specs repo, but as of the newest commit of the watched branch's
 *   first-parent history signed by a key of the admin signers file (`--admin-signers`): a change
 *   to a Backend takes effect once an admin signs a commit that has it, and until then the head's
 *   differing document says so where it is written.
 *
 * Run specs refer to Backends by name; the loader checks those names against what this rule
 * yields, not against the head's own Backend documents.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { AdvError, ErrorCode } from '../../errors.js';
import { CommitVerifier, type Verdict } from '../../git/signatures.js';
import { runGit } from '../../git/native.js';
import type { GitPort } from '../../git/port.js';
import { GitTreeSource, TreeListingCache } from '../../git/tree-source.js';
import type { BackendList } from '../../backends/types.js';
import { SpecLoader, type LoadedObject, type LoadResult } from '../../spec/loader.js';
import type { Backend as BackendObject, Kind, Storage, StorageSpec } from '../../spec/schema.js';
import { isSkippedDir, isSpecFile, type SpecFileRef, type SpecSource } from '../../spec/source.js';
import type { LoadError } from '../../status/types.js';
import type { LoadedBackend } from '../observe/adapters.js';
import { generationOf } from '../../reconcile/run-plan.js';
import { notifyObjectsOf, type NotifyObjects } from '../../notify/objects.js';

/** The kinds only the operator's rule may bring in (Environment, Alert and Provider join them). */
export const INFRA_KINDS: ReadonlySet<Kind> = new Set<Kind>(['Backend', 'Storage', 'Provider', 'Alert']);

/** Which rule holds (see the top of this file). */
export type InfraOption =
  { from: 'repo' } | { from: 'dir'; dir: string } | { from: 'signed'; signers: string };

/** The infrastructure the controller acts on, and what in the specs repo it refused. */
export interface Infra {
  backends: Map<string, LoadedBackend>;
  storage: StorageSpec | undefined;
  /** A refused document of the head, or a problem of the infra dir: reported like load errors. */
  errors: LoadError[];
  /** Where it came from, for the log: `repo`, the dir, or `signed <commit>`. */
  source: string;
  /** Providers and Alerts (notifications: they name endpoints and credentials). */
  notify?: NotifyObjects;
}

/** How far back the newest admin-signed commit is looked for. */
const SIGNED_LOOKBACK = 1000;

/** One rule; made by `infraSourceFor`. */
export interface InfraSource {
  readonly option: InfraOption;
  /** Reads the operator's side for the head about to be loaded (the dir, the signed commit). */
  prepare(head: string): Promise<void>;
  /** The Backend names Runs may name; undefined: the head's own Backend documents. */
  backendNames(): ReadonlySet<string> | undefined;
  /** What is acted on, given the head's load result. */
  take(head: LoadResult): Infra;
}

export function infraSourceFor(
  option: InfraOption,
  ctx: { git: GitPort; specsPath?: string; descriptors?: BackendList },
): InfraSource {
  if (option.from === 'repo') return new RepoInfra(option);
  if (option.from === 'dir') return new DirInfra(option, ctx.descriptors);
  return new SignedInfra(option, ctx);
}

/** Backends, Storage, Providers and Alerts of a load result. */
function infraOf(objects: readonly LoadedObject[]): Pick<Infra, 'backends' | 'storage' | 'notify'> {
  const backends = new Map<string, LoadedBackend>();
  let storage: StorageSpec | undefined;
  for (const o of objects) {
    if (o.kind === 'Backend')
      backends.set(o.name, { obj: o.object as BackendObject, gen: generationOf(o.object) });
    else if (o.kind === 'Storage') storage = (o.object as Storage).spec;
  }
  return { backends, storage, notify: notifyObjectsOf(objects) };
}

/** A document of an infrastructure kind in `result`, valid or not: file, line, kind, name. */
function infraDocs(
  result: LoadResult,
): { file: string; line: number; kind: Kind; name?: string; gen?: string }[] {
  const out: { file: string; line: number; kind: Kind; name?: string; gen?: string }[] = [];
  for (const o of result.objects)
    if (INFRA_KINDS.has(o.kind))
      out.push({ file: o.file, line: o.line, kind: o.kind, name: o.name, gen: generationOf(o.object) });
  for (const d of result.invalid)
    if (d.kind && INFRA_KINDS.has(d.kind))
      out.push({ file: d.file, line: d.line, kind: d.kind, ...(d.name ? { name: d.name } : {}) });
  return out;
}

class RepoInfra implements InfraSource {
  constructor(readonly option: InfraOption) {}
  async prepare(): Promise<void> {}
  backendNames(): undefined {
    return undefined;
  }
  take(head: LoadResult): Infra {
    return { ...infraOf(head.objects), errors: [], source: 'repo' };
  }
}

/** The operator's directory: every Backend and Storage in it, nothing else. */
class DirInfra implements InfraSource {
  private readonly loader: SpecLoader;
  private readonly dir: string;
  private loaded: { infra: Pick<Infra, 'backends' | 'storage' | 'notify'>; errors: LoadError[] } | undefined;

  constructor(
    readonly option: Extract<InfraOption, { from: 'dir' }>,
    descriptors: BackendList | undefined,
  ) {
    this.dir = resolve(option.dir);
    this.loader = new SpecLoader({ backends: descriptors });
  }

  /** Re-read at every load of the head (cheap: unchanged files are not parsed again). */
  async prepare(): Promise<void> {
    let result: LoadResult;
    try {
      result = await this.loader.sync(new InfraDirSource(this.dir));
    } catch (e) {
      throw new AdvError(
        ErrorCode.IoError,
        `cannot read the infra dir ${this.dir}: ${(e as Error).message}`,
        {
          hint: 'restore it, or restart the controller with --infra-dir naming a directory of Backend and Storage specs',
        },
      );
    }
    const errors: LoadError[] = [];
    for (const d of result.diagnostics)
      if (d.severity === 'error')
        errors.push(
          located(
            `${this.dir}/${d.file}`,
            d.line,
            d.column,
            d.code,
            d.path ? `${d.path}: ${d.message}` : d.message,
            d.hint,
          ),
        );
    for (const o of result.objects)
      if (!INFRA_KINDS.has(o.kind))
        errors.push(
          located(
            `${this.dir}/${o.file}`,
            o.line,
            1,
            'NotInfra',
            `a ${o.kind} is a spec of the specs repo, not of the infra dir: ignored here`,
            'commit it to the specs repo',
          ),
        );
    this.loaded = { infra: infraOf(result.objects.filter((o) => INFRA_KINDS.has(o.kind))), errors };
  }

  backendNames(): ReadonlySet<string> {
    return new Set(this.loaded?.infra.backends.keys() ?? []);
  }

  take(head: LoadResult): Infra {
    const errors = [...(this.loaded?.errors ?? [])];
    for (const d of infraDocs(head))
      errors.push(
        located(
          d.file,
          d.line,
          1,
          'InfraNotAllowed',
          `${d.kind} ${d.name ?? ''} is not acted on: this controller takes Backends and Storage from its infra dir (${this.dir}), not from the specs repo`,
          'ask the operator to add it to the infra dir, and remove it from the specs repo',
          d.kind,
        ),
      );
    return {
      backends: new Map(this.loaded?.infra.backends),
      storage: this.loaded?.infra.storage,
      ...(this.loaded?.infra.notify ? { notify: this.loaded.infra.notify } : {}),
      errors,
      source: this.dir,
    };
  }
}

/** The specs repo as of the newest admin-signed commit of the watched branch. */
class SignedInfra implements InfraSource {
  private readonly verifier: CommitVerifier;
  private readonly loader: SpecLoader;
  private readonly listings: TreeListingCache;
  private signed: { commit: string; verdict: Verdict; result: LoadResult } | undefined;
  private lastHead: string | undefined;

  constructor(
    readonly option: Extract<InfraOption, { from: 'signed' }>,
    private readonly ctx: { git: GitPort; specsPath?: string; descriptors?: BackendList },
  ) {
    this.verifier = new CommitVerifier(option.signers, ctx.git.gitdir);
    this.loader = new SpecLoader({ backends: ctx.descriptors });
    this.listings = new TreeListingCache(ctx.git);
  }

  async prepare(head: string): Promise<void> {
    if (head === this.lastHead) return;
    const found = await this.newestSigned(head);
    this.lastHead = head;
    if (!found) {
      this.signed = undefined;
      return;
    }
    if (found.commit === this.signed?.commit) return;
    const { tree } = await this.ctx.git.readCommit(found.commit);
    const result = await this.loader.sync(
      new GitTreeSource(this.ctx.git, tree, this.listings, this.ctx.specsPath ?? ''),
    );
    this.signed = { ...found, result };
  }

  /** The newest commit of `head`'s first-parent history that an admin key signed. */
  private async newestSigned(head: string): Promise<{ commit: string; verdict: Verdict } | undefined> {
    const r = await runGit(['rev-list', '--first-parent', `--max-count=${SIGNED_LOOKBACK}`, head], {
      gitdir: this.ctx.git.gitdir,
    });
    if (r.code !== 0) throw new AdvError(ErrorCode.GitError, `git rev-list failed: ${r.stderr.trim()}`);
    for (const commit of r.stdout.toString('utf8').split('\n').filter(Boolean)) {
      const verdict = await this.verifier.verify(commit);
      if (verdict.ok) return { commit, verdict };
    }
    return undefined;
  }

  backendNames(): ReadonlySet<string> {
    return new Set(this.signed ? infraOf(this.signed.result.objects).backends.keys() : []);
  }

  take(head: LoadResult): Infra {
    const s = this.signed;
    const at = s ? `${s.commit.slice(0, 12)} (signed by ${s.verdict.signer ?? 'an admin key'})` : undefined;
    const fix = `an admin signs a commit that has it (git commit -S with a key of ${this.verifier.file}) and pushes it`;
    const signedDocs = new Map(
      (s ? infraDocs(s.result) : []).map((d) => [`${d.kind}/${d.name ?? ''}`, d] as const),
    );
    const errors: LoadError[] = [];
    for (const d of infraDocs(head)) {
      const was = signedDocs.get(`${d.kind}/${d.name ?? ''}`);
      if (was && was.gen !== undefined && was.gen === d.gen) continue;
      const message = !at
        ? `${d.kind} ${d.name ?? ''} is not acted on: no commit of the last ${SIGNED_LOOKBACK} on the watched branch is signed by an admin key`
        : was
          ? `${d.kind} ${d.name ?? ''} differs from its version in ${at}, the newest admin-signed commit: that version is acted on until an admin signs this one`
          : `${d.kind} ${d.name ?? ''} is not acted on: it is not in ${at}, the newest admin-signed commit`;
      errors.push(located(d.file, d.line, 1, 'InfraNotSigned', message, fix, d.kind));
    }
    const atHead = new Set(infraDocs(head).map((d) => `${d.kind}/${d.name ?? ''}`));
    for (const [key, d] of signedDocs)
      if (!atHead.has(key))
        errors.push(
          located(
            d.file,
            d.line,
            1,
            'InfraNotSigned',
            `${d.kind} ${d.name ?? ''} was removed after ${at}, the newest admin-signed commit: it is still acted on until an admin signs its removal`,
            fix,
            d.kind,
          ),
        );
    return {
      ...(s ? infraOf(s.result.objects) : { backends: new Map(), storage: undefined }),
      errors,
      source: at ? `signed ${at}` : 'signed (none yet)',
    };
  }
}

function located(
  file: string,
  line: number,
  column: number,
  code: string,
  message: string,
  fix?: string,
  kind?: string,
): LoadError {
  return { file, line, column, code, ...(kind ? { kind } : {}), message, ...(fix ? { fix } : {}) };
}

/**
 * The rule for a repo: the operator's choice; without one, `repo` for a local specs repo (whoever
 * can write it can write the controller's data dir inside it too) and a usage error for a shared
 * one, since trusting every pusher with infrastructure must be said.
 */
export function infraOptionFor(given: InfraOption | undefined, mode: 'local' | 'remote'): InfraOption {
  if (given) return given;
  if (mode === 'local') return { from: 'repo' };
  throw new AdvError(
    ErrorCode.UsageError,
    'a controller of a shared specs repo must say who may change Backends and Storage (they name the credentials, files and endpoints the controller itself uses)',
    {
      hint: '--infra-dir DIR (the operator keeps them on the controller host), --admin-signers FILE (only commits signed by these keys change them), or --trust-repo-infra (everyone who can push may)',
    },
  );
}

/**
 * The infra dir as a spec source. Unlike a specs repo's work tree its links are followed: it is the
 * operator's own, and a mounted Kubernetes ConfigMap is a file of links into `..data/`.
 */
class InfraDirSource implements SpecSource {
  constructor(private readonly root: string) {}

  async list(): Promise<SpecFileRef[]> {
    const out: SpecFileRef[] = [];
    const walk = async (dir: string, rel: string, depth: number): Promise<void> => {
      for (const name of (await readdir(dir)).sort()) {
        if (isSkippedDir(name)) continue;
        const st = await stat(join(dir, name)).catch(() => undefined);
        const path = rel ? `${rel}/${name}` : name;
        if (st?.isDirectory() && depth < 8) await walk(join(dir, name), path, depth + 1);
        else if (st?.isFile() && isSpecFile(name))
          out.push({ path, key: `${st.size}:${st.mtimeMs}:${st.ino}`, size: st.size });
      }
    };
    await walk(this.root, '', 0);
    return out;
  }

  readMany(paths: readonly string[]): Promise<Uint8Array[]> {
    return Promise.all(paths.map((p) => readFile(join(this.root, p))));
  }
}
