/**
 * The host's dataset cache end to end: the bundled `adv exec` (as a worker runs it, no
 * node_modules) materialises a dataset pushed to a real S3-protocol server (s3rver), whose proxy
 * counts the bytes of every GET by key. Two jobs on one host with one cache dir, started together,
 * and a second attempt after them, move each object's bytes once; a dataset that is not there ends
 * the attempt as InputsFailed, naming it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { bundleExec } from '../runtime/bundle.js';
import { BlobCache, datasetCacheDir } from '../runtime/datasets/cache.js';
import type { DatasetInput } from '../runtime/datasets/contract.js';
import { openStore } from '../runtime/store/index.js';
import { removeTree } from './helpers/io.js';
import { startS3, type S3Server } from './helpers/servers/s3.js';
import { pushDataset, sha256Hex as sha } from './helpers/datasets.js';
import { waitFor } from './helpers/wait.js';

/** One adv exec that fetches a few MiB and runs `sh`, on a loaded machine: a ceiling, not a window. */
const JOB_MS = 60_000;

let tmp: string;
let s3: S3Server;
let bundle: string;
const running = new Set<ChildProcess>();

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-datasets-'));
  s3 = await startS3();
  // The SDK reads the credentials from the environment when a request is signed.
  Object.assign(process.env, s3.env);
  bundle = join(tmp, 'adv-exec.mjs');
  await bundleExec(bundle);
}, 180_000);
afterEach(() => {
  for (const c of running) c.kill('SIGKILL');
  running.clear();
});
afterAll(async () => {
  for (const k of Object.keys(s3?.env ?? {})) delete process.env[k];
  await s3?.stop();
  await removeTree(tmp);
});

function advExec(args: string[], env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, [bundle, ...args], {
    env: { ...process.env, ...s3.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let out = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const done = new Promise<number | null>((r) =>
    child.on('close', (code) => {
      running.delete(child);
      r(code);
    }),
  );
  return { child, done, out: () => out };
}

describe('datasets through the host cache (adv exec, S3)', { timeout: 4 * JOB_MS }, () => {
  it('two jobs and a second attempt on one host move each object once', async () => {
    const storePrefix = 'lab';
    const url = s3.url(storePrefix);
    const store = await openStore(url, { ...process.env, ...s3.env });
    const labels = Buffer.from('cat\ndog\n');
    const files = {
      'shards/0.bin': randomBytes(3 * 1024 * 1024 + 17),
      'shards/1.bin': randomBytes(1024 * 1024),
      'labels.txt': labels,
      'copy/labels.txt': labels, // the same content: one blob, linked twice
    };
    const { prefix, digest } = await pushDataset(store, 'toy', files);
    const input: DatasetInput = { as: 'data', dataset: 'toy@1', digest, source: { store: { prefix } } };
    const env = { ADV_DATASETS: JSON.stringify([input]), ADV_CACHE_DIR: join(tmp, 'host-cache') };
    const script = 'cat "$ADV_INPUT_data_DIR/copy/labels.txt"; wc -c < "$ADV_INPUT_data_DIR/shards/0.bin"';
    const job = (run: string, attempt: number) =>
      advExec(
        [
          '--store',
          url,
          '--run',
          run,
          '--attempt',
          String(attempt),
          '--job-dir',
          join(tmp, `${run}-${attempt}`),
          '--',
          'sh',
          '-c',
          script,
        ],
        env,
      );
    const [a, b] = [job('ra', 1), job('rb', 1)];
    expect(await a.done, a.out()).toBe(0);
    expect(await b.done, b.out()).toBe(0);
    for (const j of [a, b]) expect(j.out()).toContain(`cat\ndog\n${3 * 1024 * 1024 + 17}`);
    const key = (p: string) => `${storePrefix}/${prefix}${p}`;
    const fetched = () => ({
      shard0: s3.getBytes.get(key('shards/0.bin')) ?? 0,
      shard1: s3.getBytes.get(key('shards/1.bin')) ?? 0,
      labels: (s3.getBytes.get(key('labels.txt')) ?? 0) + (s3.getBytes.get(key('copy/labels.txt')) ?? 0),
    });
    expect(fetched()).toEqual({
      shard0: files['shards/0.bin'].length,
      shard1: 1024 * 1024,
      labels: labels.length,
    });
    // A second attempt of one of them: all from the cache (only the small manifest is read again).
    const again = job('ra', 2);
    expect(await again.done, again.out()).toBe(0);
    expect(again.out()).toContain('all from the host cache');
    expect(fetched()).toEqual({
      shard0: files['shards/0.bin'].length,
      shard1: 1024 * 1024,
      labels: labels.length,
    });
  });

  it('a partial blob left by a killed fetch is resumed with a range read of the rest, then verified', async () => {
    const storePrefix = 'lab3';
    const url = s3.url(storePrefix);
    const store = await openStore(url, { ...process.env, ...s3.env });
    const big = randomBytes(2 * 1024 * 1024 + 5);
    const { prefix, digest } = await pushDataset(store, 'resume', { 'big.bin': big });
    const cacheDir = join(tmp, 'resume-cache');
    // What a fetcher SIGKILLed half way leaves (fetch.test.ts kills a real one): the first MiB.
    const blob = new BlobCache(datasetCacheDir({ ADV_CACHE_DIR: cacheDir })).blobPath(sha(big));
    await mkdir(dirname(blob), { recursive: true });
    await writeFile(`${blob}.partial`, big.subarray(0, 1024 * 1024));
    const input: DatasetInput = { as: 'data', dataset: 'resume@1', digest, source: { store: { prefix } } };
    const jobDir = join(tmp, 'resume');
    const e = advExec(['--store', url, '--run', 'rr', '--attempt', '1', '--job-dir', jobDir, '--', 'true'], {
      ADV_DATASETS: JSON.stringify([input]),
      ADV_CACHE_DIR: cacheDir,
    });
    expect(await e.done, e.out()).toBe(0);
    expect(e.out()).toContain(`resuming at byte ${1024 * 1024}`);
    expect(s3.getBytes.get(`${storePrefix}/${prefix}big.bin`)).toBe(big.length - 1024 * 1024);
    expect(sha(await readFile(join(jobDir, 'inputs', 'data', 'big.bin')))).toBe(sha(big));
  });

  it('a stop notice during a long fetch ends the attempt at once as Preempted; the partial blob stays', async () => {
    const body = randomBytes(1024 * 1024);
    let requests = 0;
    // Sends half the file, then nothing: a fetch that would take for ever.
    const server = createServer((_req, res) => {
      requests++;
      res.writeHead(200, { 'content-length': body.length });
      res.write(body.subarray(0, body.length / 2));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/big.bin`;
      const input: DatasetInput = {
        as: 'data',
        dataset: 'slow@1',
        source: { urls: [{ url, sha256: sha(body), path: 'big.bin', size: body.length }] },
      };
      const cacheDir = join(tmp, 'stop-cache');
      const jobDir = join(tmp, 'stop');
      const e = advExec(
        ['--store', s3.url('lab4'), '--run', 'rs', '--attempt', '1', '--job-dir', jobDir, '--', 'true'],
        {
          ADV_DATASETS: JSON.stringify([input]),
          ADV_CACHE_DIR: cacheDir,
        },
      );
      const partial = `${new BlobCache(datasetCacheDir({ ADV_CACHE_DIR: cacheDir })).blobPath(sha(body))}.partial`;
      await waitFor(async () => (await stat(partial).catch(() => undefined))?.size === body.length / 2, {
        what: 'adv exec half way through the fetch',
        timeoutMs: JOB_MS,
        detail: e.out,
      });
      e.child.kill('SIGTERM');
      expect(await e.done, e.out()).toBe(143);
      const rec = JSON.parse(await readFile(join(jobDir, 'exit.json'), 'utf8')) as {
        reason: string;
        message: string;
      };
      expect(rec).toMatchObject({
        reason: 'Preempted',
        message: 'stopped by SIGTERM before the workload started',
      });
      expect((await stat(partial)).size).toBe(body.length / 2);
      // The fetch was abandoned, not left holding adv exec open past its end.
      expect(e.out()).not.toContain('still held the process open');
      expect(requests).toBe(1);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });

  it('a dataset that is not in the store ends the attempt as InputsFailed, naming it', async () => {
    const url = s3.url('lab2');
    const input: DatasetInput = {
      as: 'data',
      dataset: 'missing@3',
      source: { store: { prefix: 'datasets/missing/00/' } },
    };
    const jobDir = join(tmp, 'missing');
    const e = advExec(['--store', url, '--run', 'rm', '--attempt', '1', '--job-dir', jobDir, '--', 'true'], {
      ADV_DATASETS: JSON.stringify([input]),
      ADV_CACHE_DIR: join(tmp, 'host-cache'),
    });
    expect(await e.done, e.out()).toBe(1);
    const rec = JSON.parse(await readFile(join(jobDir, 'exit.json'), 'utf8')) as {
      reason: string;
      message: string;
    };
    expect(rec.reason).toBe('InputsFailed');
    expect(rec.message).toMatch(
      /^the datasets could not be fetched: dataset missing@3 \(input data\): no manifest\.json under s3:\/\//,
    );
  });
});
