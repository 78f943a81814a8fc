/**
 * A dataset from the store into a job's scratch through the host cache (issue 33): cold (empty
 * cache: fetch, verify, link) against a plain parallel download of the same objects (p-limit +
 * `store.getToFile`, the same concurrency) in the same run; warm (the cache holds every blob:
 * re-verify by stat, link) against `cp -r` of the same bytes out of the cache dir. The code is the
 * one `adv exec` runs (materialiseDatasets), in-process: node's start is not counted.
 *
 * BENCH_DATASET_MIB (default 2048) over BENCH_DATASET_FILES files (default 16), on s3rver on
 * loopback (BENCH_DATASET_STORE=s3, the default) or a `file://` store (=file); cold and plain
 * alternate BENCH_REPS times (default 2), best of each.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { BlobCache } from '../runtime/datasets/cache.js';
import {
  contentDigest,
  pushedPrefix,
  type DatasetFile,
  type DatasetInput,
} from '../runtime/datasets/contract.js';
import { FETCH_CONCURRENCY, materialiseDatasets } from '../runtime/datasets/materialise.js';
import { FileStore } from '../runtime/store/file.js';
import { S3Store } from '../runtime/store/s3.js';
import type { ObjectStore } from '../runtime/store/types.js';
import { startS3, type S3Server } from '../test/helpers/servers/s3.js';
import { table, writeRandom } from './lib.js';

const MiB = 2 ** 20;
const TOTAL = Number(process.env.BENCH_DATASET_MIB ?? 2048) * MiB;
const FILES = Number(process.env.BENCH_DATASET_FILES ?? 16);
const KIND = process.env.BENCH_DATASET_STORE ?? 's3';
const REPS = Number(process.env.BENCH_REPS ?? 2);

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}

async function sha256(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of createReadStream(path, { highWaterMark: 4 * MiB })) h.update(c as Buffer);
  return h.digest('hex');
}

/** Writes FILES random files and pushes them as `adv dataset push` lays them out. */
async function push(store: ObjectStore, src: string): Promise<DatasetInput> {
  const files: DatasetFile[] = [];
  for (let i = 0; i < FILES; i++) {
    const path = `shards/${String(i).padStart(4, '0')}.bin`;
    const local = join(src, `${i}.bin`);
    await writeRandom(local, Math.floor(TOTAL / FILES));
    files.push({ path, size: (await stat(local)).size, sha256: await sha256(local) });
  }
  const digest = contentDigest(files);
  const prefix = pushedPrefix('bench', digest);
  for (let i = 0; i < FILES; i++) await store.putFile(prefix + files[i]!.path, join(src, `${i}.bin`));
  const totalBytes = files.reduce((n, f) => n + f.size, 0);
  const manifest = {
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'DatasetManifest',
    name: 'bench',
    digest,
    totalBytes,
    files,
  };
  await store.put(prefix + 'manifest.json', JSON.stringify(manifest));
  return { as: 'data', dataset: 'bench@1', digest, source: { store: { prefix } } };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'adv-bench-datasets-'));
  let s3: S3Server | undefined;
  try {
    let store: ObjectStore;
    if (KIND === 's3') {
      s3 = await startS3('bench');
      store = new S3Store({
        bucket: 'bench',
        prefix: 'p',
        endpoint: s3.endpoint,
        forcePathStyle: true,
        credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      });
    } else store = new FileStore(join(dir, 'store'));
    const src = join(dir, 'src');
    await mkdir(src);
    const input = await push(store, src);
    await rm(src, { recursive: true });
    const prefix = (input.source as { store: { prefix: string } }).store.prefix;
    const keys = Array.from({ length: FILES }, (_, i) => `${prefix}shards/${String(i).padStart(4, '0')}.bin`);
    const cacheDir = join(dir, 'cache');
    const job = (name: string) => ({
      store,
      cache: new BlobCache(cacheDir),
      inputsDir: join(dir, name, 'inputs'),
      log: () => {},
    });

    const plainDownload = async () => {
      const limit = pLimit(FETCH_CONCURRENCY);
      const t = await timed(() =>
        Promise.all(keys.map((k, i) => limit(() => store.getToFile(k, join(dir, 'plain', `${i}.bin`))))),
      );
      await rm(join(dir, 'plain'), { recursive: true });
      return t;
    };
    // Once untimed first: the store's first read of each object (its page cache, s3rver's) is paid
    // by neither side.
    await plainDownload();
    // Alternating, best of each: the write-back of one download slows the next, whichever it is.
    let plain = Infinity;
    let cold = Infinity;
    for (let r = 0; r < REPS; r++) {
      const coldOnce = async () => {
        await rm(cacheDir, { recursive: true, force: true });
        await rm(join(dir, 'cold'), { recursive: true, force: true });
        return timed(() => materialiseDatasets([input], job('cold')));
      };
      if (r % 2) {
        cold = Math.min(cold, await coldOnce());
        plain = Math.min(plain, await plainDownload());
      } else {
        plain = Math.min(plain, await plainDownload());
        cold = Math.min(cold, await coldOnce());
      }
    }
    const warm = await timed(() => materialiseDatasets([input], job('warm')));
    const cp = await timed(async () => execFileSync('cp', ['-r', join(cacheDir, 'blobs'), join(dir, 'cp')]));
    const full = await timed(() =>
      materialiseDatasets([input], { ...job('full'), cache: new BlobCache(cacheDir, { verify: 'full' }) }),
    );
    const mibs = (s: number) => (TOTAL / MiB / s).toFixed(0);
    console.log(
      `${(TOTAL / MiB).toFixed(0)} MiB in ${FILES} files, ${KIND === 's3' ? 's3rver on loopback' : 'file:// store'}; MiB/s (seconds)\n`,
    );
    console.log(
      table(
        ['transfer', 'baseline', 'cache', 'ratio (baseline time / ours)'],
        [
          [
            'cold: empty cache vs plain parallel getToFile',
            `${mibs(plain)} (${plain.toFixed(2)})`,
            `${mibs(cold)} (${cold.toFixed(2)})`,
            (plain / cold).toFixed(2),
          ],
          [
            'warm: cached vs `cp -r` from the cache dir',
            `${mibs(cp)} (${cp.toFixed(2)})`,
            `${mibs(warm)} (${warm.toFixed(2)})`,
            (cp / warm).toFixed(2),
          ],
          [
            'warm, ADV_DATASET_VERIFY=full vs `cp -r`',
            `${mibs(cp)} (${cp.toFixed(2)})`,
            `${mibs(full)} (${full.toFixed(2)})`,
            (cp / full).toFixed(2),
          ],
        ],
      ),
    );
  } finally {
    await s3?.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
