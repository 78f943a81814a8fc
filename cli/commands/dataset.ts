/**
 * `adv dataset push DIR NAME`: packs a directory into a content-addressed dataset in the object
 * store and records it as a new version of the Dataset NAME in the specs repo; `adv dataset ls`:
 * the repo's datasets and versions. A push is deterministic (the same files give the same digest
 * and a byte-identical manifest) and never overwrites: each content has its own prefix
 * (`pushedPrefix`), its files go up first and its manifest LAST, so a dataset exists iff its
 * manifest does.
 */
import type { Command } from 'commander';
import { lstat, readdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import pLimit from 'p-limit';
import {
  AdvError,
  DatasetIndex,
  ErrorCode,
  storeTarget,
  type DatasetSpec,
  type LoadResult,
  type Storage,
} from '../../controller/index.js';
import { sha256File } from '../../runtime/checkpoint.js';
import {
  contentDigest,
  DATASET_MANIFEST,
  pushedPrefix,
  type DatasetFile,
  type DatasetManifest,
} from '../../runtime/datasets/contract.js';
import { openStore, type ObjectStore } from '../../runtime/store/index.js';
import { renderTable } from '../format.js';
import { defaultDataDir, gitToken, resolveRepo } from '../repo.js';
import { openSpecsWorkTree, type SpecsWorkTree } from '../specs-writer.js';
import { openSpecsStore, type StoreOpts } from '../store.js';
import { printable, type Io } from '../output.js';

const NAME_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** Files hashed and uploaded at once. */
const PARALLEL = 8;

type PushOpts = StoreOpts & { branch: string; version?: string };

export function registerDataset(program: Command, io: Io): void {
  const dataset = program
    .command('dataset')
    .description('Datasets: push a directory as a new version, list versions');
  dataset
    .command('push')
    .description('Upload DIR as a content-addressed dataset and commit it as a new version of NAME')
    .argument('<dir>', 'the directory (regular files only)')
    .argument('<name>', 'the Dataset name (lowercase letters, digits and "-")')
    .option('--store <url>', 'object store (default: $ADV_STORE, else the Storage spec of the repo)')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .option('--data-dir <dir>', "the controller's data dir (where a file store's relative path starts)")
    .option('--version <n>', 'the version to record (default: the newest + 1)')
    .addHelpText('after', '\nExamples:\n  adv dataset push ./data/tokens tokens\n  adv dataset ls')
    .action((dir: string, name: string, opts: PushOpts) => push(resolve(io.cwd, dir), name, opts, io));
  dataset
    .command('ls')
    .description('List the datasets of the specs repo: versions, sources, digests and sizes')
    .option('--store <url>', 'object store, to read sizes (default: $ADV_STORE, else the Storage spec)')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .option('--data-dir <dir>', "the controller's data dir (where a file store's relative path starts)")
    .option('-o, --output <format>', 'table or json', 'table')
    .action((opts: StoreOpts & { branch: string; output: string }) => list(opts, io));
}

/**
 * The manifest of the regular files under `dir`, sorted by path: the same files give the same
 * manifest, byte for byte, wherever and whenever it is made. A symlink or any other non-regular
 * file is refused (what it points at is not part of the directory's content).
 */
export async function packDir(dir: string, name: string): Promise<DatasetManifest> {
  const paths: string[] = [];
  await walk(dir, '', paths);
  if (!paths.length)
    throw new AdvError(ErrorCode.UsageError, `${printable(dir)} holds no files`, {
      hint: 'push a directory with the files of the dataset',
    });
  const limit = pLimit(PARALLEL);
  const files: DatasetFile[] = await Promise.all(
    paths.map((path) =>
      limit(async () => {
        const full = join(dir, path);
        return { path, size: (await lstat(full)).size, sha256: await sha256File(full) };
      }),
    ),
  );
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'DatasetManifest',
    name,
    digest: contentDigest(files),
    totalBytes: files.reduce((n, f) => n + f.size, 0),
    files,
  };
}

async function walk(root: string, rel: string, out: string[]): Promise<void> {
  for (const e of await readdir(join(root, rel), { withFileTypes: true })) {
    const path = rel ? `${rel}/${e.name}` : e.name;
    // A manifest line is `<sha256> <size> <path>\n`: a control character would make it two.
    if ([...e.name].some((ch) => ch < ' ' || ch === '\x7f'))
      throw new AdvError(
        ErrorCode.UsageError,
        `${printable(join(root, path))} has a control character in its name`,
        {
          hint: 'rename the file: a dataset path is printable text',
        },
      );
    if (e.isDirectory()) await walk(root, path, out);
    else if (e.isFile()) out.push(path);
    else
      throw new AdvError(
        ErrorCode.UsageError,
        `${printable(join(root, path))} is ${e.isSymbolicLink() ? 'a symlink' : 'not a regular file'}: a dataset holds regular files only`,
        {
          hint: 'copy the file it stands for into the directory (cp -L), or push the directory it points into',
        },
      );
  }
}

/** The manifest as stored: its JSON text is a function of the files alone (and the name). */
export const manifestText = (m: DatasetManifest): string => JSON.stringify(m, null, 2) + '\n';

/**
 * Uploads the files not already under the dataset's prefix with the same size, then the manifest
 * LAST. A file that changed since it was hashed fails the push before the manifest is written.
 */
export async function uploadDataset(
  store: ObjectStore,
  dir: string,
  m: DatasetManifest,
): Promise<{ uploaded: number; skipped: number }> {
  const prefix = pushedPrefix(m.name, m.digest);
  const limit = pLimit(PARALLEL);
  let uploaded = 0;
  await Promise.all(
    m.files.map((f) =>
      limit(async () => {
        const key = prefix + f.path;
        if ((await store.head(key))?.size === f.size) return;
        const put = await store.putFile(key, join(dir, f.path));
        if (put.sha256 !== f.sha256 || put.size !== f.size)
          throw new AdvError(ErrorCode.UsageError, `${printable(f.path)} changed while it was being pushed`, {
            hint: 'push again once nothing writes into the directory',
          });
        uploaded++;
      }),
    ),
  );
  await store.put(prefix + DATASET_MANIFEST, manifestText(m));
  return { uploaded, skipped: m.files.length - uploaded };
}

/** The Dataset document of a pushed version. */
export function datasetDocument(
  name: string,
  version: number,
  digest: string,
  files: number,
  bytes: number,
): string {
  return [
    `# Pushed by adv dataset push: ${files} file${files === 1 ? '' : 's'}, ${sizeText(bytes)}.`,
    'apiVersion: adventuretime.dev/v1alpha1',
    'kind: Dataset',
    'metadata:',
    `  name: ${name}`,
    'spec:',
    `  version: ${version}`,
    `  digest: "${digest}"`,
    '  source:',
    `    store: { prefix: ${pushedPrefix(name, digest)} }`,
    '',
  ].join('\n');
}

async function push(dir: string, name: string, opts: PushOpts, io: Io): Promise<void> {
  if (!NAME_RE.test(name) || name.length > 63)
    throw new AdvError(ErrorCode.UsageError, `"${printable(name)}" is not a valid Dataset name`, {
      hint: 'use lowercase letters, digits and "-" (no dots), at most 63 characters, e.g. "tokens"',
    });
  const version = opts.version === undefined ? undefined : Number(opts.version);
  if (version !== undefined && !(Number.isInteger(version) && version >= 1))
    throw new AdvError(
      ErrorCode.UsageError,
      `--version ${printable(opts.version!)} is not a whole number ≥ 1`,
    );
  const manifest = await packDir(dir, name);
  const repo = await resolveRepo(opts.repo, io.cwd);
  const wt = await openSpecsWorkTree(repo, opts.branch, await gitToken(io.env));
  try {
    const specs = await wt.load();
    const versions = new DatasetIndex(specs.objects).all().filter((d) => d.name === name);
    const newest = versions.at(-1);
    const store = await commandStore(specs, repo, opts, io);
    await warnOtherStore(store, specs, repo, opts, io);
    const sent = await uploadDataset(store, dir, manifest);
    const what = `${manifest.files.length} files, ${sizeText(manifest.totalBytes)}, ${sent.uploaded} uploaded, ${sent.skipped} already there`;
    if (newest && newest.spec.digest === manifest.digest && version === undefined) {
      io.stdout.write(`${name}@${newest.version} already pushed: ${manifest.digest} (${what})\n`);
      return;
    }
    if (version !== undefined && versions.some((d) => d.version === version))
      throw new AdvError(ErrorCode.UsageError, `Dataset ${name}@${version} already exists`, {
        hint: `leave out --version to record ${name}@${(newest?.version ?? 0) + 1}`,
      });
    const n = version ?? (newest?.version ?? 0) + 1;
    const doc = datasetDocument(name, n, manifest.digest, manifest.files.length, manifest.totalBytes);
    const target = await recordVersion(wt, specs, name, doc);
    const sha = await wt.commit([target], `dataset ${name}@${n}: ${manifest.digest.slice(0, 19)}`);
    io.stdout.write(
      `${name}@${n} pushed to ${store.url.replace(/\/$/, '')}/${pushedPrefix(name, manifest.digest)} (${what})\n` +
        `recorded in ${printable(target)} (commit ${sha.slice(0, 10)}):\n\n${doc}`,
    );
  } finally {
    await wt.close();
  }
}

/** The store of `--store` / `ADV_STORE`, else of the repo's Storage spec (already loaded). */
function commandStore(specs: LoadResult, repo: string, opts: StoreOpts, io: Io): Promise<ObjectStore> {
  const explicit = opts.store ?? io.env.ADV_STORE;
  return explicit ? openStore(explicit, io.env) : openSpecsStore(specs, repo, opts, io);
}

/**
 * The recorded prefix is relative to the store: jobs read the repo's Storage, so a push to another
 * store (`--store`, `ADV_STORE`) records a version they cannot fetch unless the bytes are copied.
 */
async function warnOtherStore(store: ObjectStore, specs: LoadResult, repo: string, opts: StoreOpts, io: Io) {
  const storage = specs.objects.find((o) => o.kind === 'Storage')?.object as Storage | undefined;
  if (!storage) return;
  const dataDir = opts.dataDir ?? (await defaultDataDir(repo, io.env));
  // A store's `url` never carries its query (endpoint, credentials name): compare bucket and prefix.
  const [theirs, ours] = [storeTarget(storage.spec, dataDir, io.env).url, store.url].map((u) =>
    u.replace(/\?.*$/, '').replace(/\/$/, ''),
  );
  if (theirs !== ours)
    io.stderr.write(
      `note: pushing to ${ours}, but the repo's Storage is ${theirs}: jobs read datasets from the latter\n`,
    );
}

/**
 * Adds the document to the file of the dataset's newest version (versions of a name live
 * together), else to `datasets/NAME.yaml`; checks the repo with it and undoes the write on error.
 */
async function recordVersion(
  wt: SpecsWorkTree,
  specs: LoadResult,
  name: string,
  doc: string,
): Promise<string> {
  const files = specs.objects.filter((o) => o.kind === 'Dataset' && o.name === name).map((o) => o.file);
  const target = files.at(-1) ?? `datasets/${name}.yaml`;
  const previous = await wt.read(target);
  const sep = previous === undefined ? '' : previous.endsWith('\n') ? '---\n' : '\n---\n';
  await wt.write(target, (previous ?? '') + sep + doc);
  const errors = (await wt.load()).diagnostics.filter((d) => d.file === target && d.severity === 'error');
  if (errors.length) {
    if (previous === undefined) await wt.remove(target);
    else await wt.write(target, previous);
    throw new AdvError(
      ErrorCode.SpecInvalid,
      `the new version does not fit ${printable(target)}: ${errors.map((e) => `line ${e.line}: ${e.message}`).join('; ')}`,
      { hint: 'fix the file (adv validate), then push again: the files are in the store already' },
    );
  }
  return target;
}

async function list(opts: StoreOpts & { branch: string; output: string }, io: Io): Promise<void> {
  const repo = await resolveRepo(opts.repo, io.cwd);
  const wt = await openSpecsWorkTree(repo, opts.branch, await gitToken(io.env), { anyBranch: true });
  try {
    const specs = await wt.load();
    const all = new DatasetIndex(specs.objects).all();
    const store = all.some((d) => d.spec.source.store)
      ? await commandStore(specs, repo, opts, io).catch(() => undefined)
      : undefined;
    const rows = await Promise.all(all.map(async (d) => ({ ...d, ...(await sizeOf(d.spec, store)) })));
    if (opts.output === 'json') {
      const out = rows.map((r) => ({
        name: r.name,
        version: r.version,
        source: sourceText(r.spec),
        ...(r.spec.digest ? { digest: r.spec.digest } : {}),
        ...(r.files !== undefined ? { files: r.files } : {}),
        ...(r.bytes !== undefined ? { bytes: r.bytes } : {}),
      }));
      return void io.stdout.write(JSON.stringify(out, null, 2) + '\n');
    }
    if (!rows.length) return void io.stdout.write('No datasets (adv dataset push DIR NAME adds one)\n');
    io.stdout.write(
      renderTable(
        ['NAME', 'VERSION', 'SOURCE', 'DIGEST', 'FILES', 'SIZE'],
        rows.map((r) => [
          r.name,
          String(r.version),
          sourceText(r.spec),
          r.spec.digest ? r.spec.digest.slice(0, 19) : '-',
          r.files === undefined ? '-' : String(r.files),
          r.bytes === undefined ? '-' : sizeText(r.bytes),
        ]),
      ),
    );
  } finally {
    await wt.close();
  }
}

function sourceText(spec: DatasetSpec): string {
  const { store, urls, output } = spec.source;
  if (store) return `store ${store.prefix}`;
  if (urls) return `${urls.length} url${urls.length === 1 ? '' : 's'}`;
  return output!.run
    ? `run ${output!.run} ${output!.output}`
    : `dag ${output!.dag}.${output!.node} ${output!.output}`;
}

/** Files and bytes: the store manifest's, the URL list's when every size is given; else unknown. */
async function sizeOf(
  spec: DatasetSpec,
  store: ObjectStore | undefined,
): Promise<{ files?: number; bytes?: number }> {
  const { urls } = spec.source;
  if (urls)
    return urls.every((u) => u.size !== undefined)
      ? { files: urls.length, bytes: urls.reduce((n, u) => n + u.size!, 0) }
      : { files: urls.length };
  if (!spec.source.store || !store) return {};
  const raw = await store.get(spec.source.store.prefix + DATASET_MANIFEST).catch(() => undefined);
  if (!raw) return {};
  try {
    const m = JSON.parse(Buffer.from(raw).toString('utf8')) as DatasetManifest;
    return { files: m.files.length, bytes: m.totalBytes };
  } catch {
    return {};
  }
}

function sizeText(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) [v, i] = [v / 1024, i + 1];
  return `${v.toFixed(1)} ${units[i]}`;
}
