import { readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { uploadOutput } from '../artifacts.js';
import { heartbeatKey, type Heartbeat } from '../heartbeat.js';
import { FileStore } from '../store/file.js';
import { Worker } from '../worker.js';
import { pushDataset, sha256Hex as sha } from '../../test/helpers/datasets.js';
import { waitFor } from '../../test/helpers/wait.js';
import { BlobCache } from './cache.js';
import { contentDigest, type DatasetFile, type DatasetInput } from './contract.js';
import { materialiseDatasets, type DatasetProgress } from './materialise.js';

let dir: string;
let store: FileStore;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'adv-mat-'));
  store = new FileStore(join(dir, 'store'));
});
afterEach(() => rm(dir, { recursive: true, force: true }));

const push = (name: string, files: Record<string, string>) => pushDataset(store, name, files);

const opts = (over: Partial<Parameters<typeof materialiseDatasets>[1]> = {}) => ({
  store,
  cache: new BlobCache(join(dir, 'cache')),
  inputsDir: join(dir, 'job', 'inputs'),
  log: () => {},
  ...over,
});

describe('materialiseDatasets', () => {
  it('links a pushed dataset from the cache into inputs/<as>/; a second job moves no bytes', async () => {
    const input = await push('toy', { 'a.txt': 'alpha', 'sub/b.txt': 'beta', 'sub/c.txt': 'alpha' });
    const seen: DatasetProgress[] = [];
    const first = await materialiseDatasets([input], opts({ onProgress: (p) => seen.push(p) }));
    expect(first.moved).toBe(9); // alpha once (a.txt and sub/c.txt share it), beta once
    const d = first.env.ADV_INPUT_data_DIR!;
    expect(d).toBe(join(dir, 'job', 'inputs', 'data'));
    expect(readFileSync(join(d, 'sub', 'b.txt'), 'utf8')).toBe('beta');
    expect(seen.at(-1)).toEqual({ dataset: 'toy@1', bytes: 14, total: 14 });
    // The job's file is the cache's blob (a hard link), not a copy.
    const blob = new BlobCache(join(dir, 'cache')).blobPath(sha('alpha'));
    expect(statSync(join(d, 'a.txt')).ino).toBe(statSync(blob).ino);
    const second = await materialiseDatasets([input], opts({ inputsDir: join(dir, 'job2', 'inputs') }));
    expect(second.moved).toBe(0);
    expect(readFileSync(join(second.env.ADV_INPUT_data_DIR!, 'sub', 'c.txt'), 'utf8')).toBe('alpha');
  });

  it('keeps the dir a sibling process of the job put in place; replaces one of another version', async () => {
    const input = await push('toy', { 'a.txt': 'alpha', 'sub/b.txt': 'beta' });
    const first = await materialiseDatasets([input], opts());
    const dest = first.env.ADV_INPUT_data_DIR!;
    const ino = statSync(dest).ino;
    // Two processes of one job on one host, one job dir: the second leaves the first's dir alone.
    const again = await materialiseDatasets([input], opts());
    expect(statSync(again.env.ADV_INPUT_data_DIR!).ino).toBe(ino);
    expect(readdirSync(join(dir, 'job', 'inputs'))).toEqual(['data']);
    const v2 = await push('toy', { 'a.txt': 'alpha', 'sub/b.txt': 'beta', 'c.txt': 'gamma' });
    await materialiseDatasets([v2], opts());
    expect(readdirSync(dest).sort()).toEqual(['a.txt', 'c.txt', 'sub']);
    expect(statSync(dest).ino).not.toBe(ino);
  });

  it('refuses a manifest whose files do not hash to the pinned digest, naming the dataset', async () => {
    const input = await push('toy', { 'a.txt': 'alpha' });
    const other = contentDigest([{ path: 'a.txt', size: 1, sha256: sha('x') }]);
    await expect(materialiseDatasets([{ ...input, digest: other }], opts())).rejects.toThrow(
      `dataset toy@1 (input data): ${store.url}${(input.source as { store: { prefix: string } }).store.prefix} holds ${input.digest}, but the spec pins ${other}`,
    );
  });

  it('says which dataset is missing when the push never finished', async () => {
    const input: DatasetInput = {
      as: 'x',
      dataset: 'gone@2',
      source: { store: { prefix: 'datasets/gone/ab/' } },
    };
    await expect(materialiseDatasets([input], opts())).rejects.toThrow(
      /dataset gone@2 \(input x\): no manifest\.json under .*datasets\/gone\/ab\/ \(was the push finished\?\)/,
    );
  });

  it("reads a run's output through its completion manifest", async () => {
    const out = join(dir, 'out');
    await mkdir(out, { recursive: true });
    await writeFile(join(out, 'w.bin'), 'weights');
    await uploadOutput(store, { run: 'train', output: 'model', attempt: 1, dir: out });
    const input: DatasetInput = {
      as: 'model',
      dataset: 'model@1',
      source: { output: { run: 'train', output: 'model' } },
    };
    const r = await materialiseDatasets([input], opts());
    expect(await readFile(join(r.env.ADV_INPUT_model_DIR!, 'w.bin'), 'utf8')).toBe('weights');
  });

  it('copies when the cache is on another file system (no hard link across devices)', async () => {
    const shm = await mkdtemp('/dev/shm/adv-mat-').catch(() => undefined);
    if (!shm)
      throw new Error(
        'this test needs /dev/shm (a tmpfs beside the temp dir) to put the cache on another file system',
      );
    try {
      const input = await push('toy', { 'a.txt': 'alpha' });
      const cache = new BlobCache(join(shm, 'cache'));
      const r = await materialiseDatasets([input], opts({ cache }));
      const placed = join(r.env.ADV_INPUT_data_DIR!, 'a.txt');
      expect(readFileSync(placed, 'utf8')).toBe('alpha');
      expect(statSync(placed).dev).not.toBe(statSync(cache.blobPath(sha('alpha'))).dev);
    } finally {
      await rm(shm, { recursive: true, force: true });
    }
  });

  it('fetches a URL list over http(s), checked against the pinned digest', async () => {
    const server = createServer((_req, res) => res.end('alpha'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/a.txt`;
      const urls = [{ url, sha256: sha('alpha'), path: 'd/a.txt' }];
      const pinned = contentDigest([{ path: 'd/a.txt', size: 5, sha256: sha('alpha') }]);
      const ok = await materialiseDatasets(
        [{ as: 'u', dataset: 'u@1', digest: pinned, source: { urls } }],
        opts(),
      );
      expect(readFileSync(join(ok.env.ADV_INPUT_u_DIR!, 'd', 'a.txt'), 'utf8')).toBe('alpha');
      const other = contentDigest([{ path: 'd/a.txt', size: 6, sha256: sha('alpha') }]);
      await expect(
        materialiseDatasets([{ as: 'v', dataset: 'v@1', digest: other, source: { urls } }], opts()),
      ).rejects.toThrow(`dataset v@1 (input v): its files hash to ${pinned}, not the pinned ${other}`);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it("takes s3:// URLs only from the job's store, and no other scheme", async () => {
    const urls = [{ url: 's3://b/raw/a.txt', sha256: sha('alpha'), path: 'a.txt' }];
    await expect(
      materialiseDatasets([{ as: 'u', dataset: 'u@1', source: { urls } }], opts()),
    ).rejects.toThrow(
      `dataset u@1 (input u): s3://b/raw/a.txt is not in the job's store (${store.url}): s3:// URLs must name keys of it`,
    );
    const file = [{ ...urls[0]!, url: `${store.url}raw/a.txt` }];
    await expect(
      materialiseDatasets([{ as: 'u', dataset: 'u@1', source: { urls: file } }], opts()),
    ).rejects.toThrow('only https:// and s3:// URLs are fetched');
  });

  it('a file missing from the store fails the dataset and leaves no half-built dir', async () => {
    const files = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`f${i}.txt`, `body ${i}`]));
    const input = await push('toy', files);
    await store.delete([`${input.prefix}f3.txt`]);
    await expect(materialiseDatasets([input], opts({ concurrency: 2 }))).rejects.toThrow(
      `dataset toy@1 (input data): toy@1 f3.txt: ${store.url}${input.prefix}f3.txt does not exist`,
    );
    expect(readdirSync(join(dir, 'job', 'inputs'))).toEqual([]);
  });

  it('refuses an "as" that is not a plain name', async () => {
    const input = await push('toy', { 'a.txt': 'alpha' });
    await expect(materialiseDatasets([{ ...input, as: '../up' }], opts())).rejects.toThrow(
      'dataset toy@1 (input ../up): "as" must match',
    );
  });

  it('refuses a file list with one path twice', async () => {
    const input = await push('toy', { 'a.txt': 'alpha' });
    const prefix = (input.source as { store: { prefix: string } }).store.prefix;
    const m = JSON.parse(Buffer.from((await store.get(prefix + 'manifest.json'))!).toString()) as {
      files: DatasetFile[];
      digest: string;
    };
    m.files.push(m.files[0]!);
    m.digest = contentDigest(m.files);
    await store.put(prefix + 'manifest.json', JSON.stringify({ ...m, kind: 'DatasetManifest' }));
    await expect(materialiseDatasets([{ ...input, digest: m.digest }], opts())).rejects.toThrow(
      'it lists a.txt twice',
    );
  });

  it('the heartbeat shows the dataset being fetched while it is', async () => {
    const w = new Worker({
      store,
      run: 'r',
      attempt: 1,
      ckptDir: join(dir, 'ckpt'),
      log: () => {},
      heartbeatSec: 3600,
    });
    w.datasetProgress({ dataset: 'toy@1', bytes: 5, total: 14 });
    const hb = await waitFor(
      async () => {
        const raw = await store.get(heartbeatKey('r', 1));
        return raw ? (JSON.parse(Buffer.from(raw).toString()) as Heartbeat) : undefined;
      },
      { what: 'the first heartbeat' },
    );
    expect(hb.fetchingDataset).toEqual({ dataset: 'toy@1', bytes: 5, total: 14 });
    w.datasetProgress(undefined);
    await w.finish(
      { exitCode: 0, reason: 'Completed', startedAt: '', finishedAt: '' },
      { workloadExitedOnItsOwn: true },
    );
    const last = JSON.parse(Buffer.from((await store.get(heartbeatKey('r', 1)))!).toString()) as Heartbeat;
    expect(last.fetchingDataset).toBeUndefined();
  });
});
