import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileStore } from '../store/file.js';
import { waitFor } from '../../test/helpers/wait.js';
import { BlobCache, cacheOptionsFromEnv, datasetCacheDir } from './cache.js';
import { fetchBlob, storeSource, urlSource } from './fetch.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const CHILD = join(import.meta.dirname, 'testdata', 'fetch-child.ts');

/** A loopback HTTP server of blobs that honours Range, counts the bytes it sends, and can stall. */
interface BlobServer {
  url(name: string): string;
  requests: { name: string; range: string | undefined; bytes: number }[];
  /** The next response sends this many bytes, then waits for `release()`. */
  stallAfter(bytes: number): void;
  release(): void;
  close(): Promise<void>;
}

async function blobServer(blobs: Record<string, Buffer>): Promise<BlobServer> {
  let stallAt: number | undefined;
  let releaseStall: (() => void) | undefined;
  const requests: BlobServer['requests'] = [];
  const server: Server = createServer((req, res) => {
    const name = req.url!.slice(1);
    const body = blobs[name];
    if (!body) return void res.writeHead(404).end();
    const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
    const from = m ? Number(m[1]) : 0;
    const part = body.subarray(from);
    const rec = { name, range: req.headers.range, bytes: 0 };
    requests.push(rec);
    res.writeHead(m ? 206 : 200, { 'content-length': part.length });
    const stall = stallAt;
    stallAt = undefined;
    if (stall === undefined) {
      rec.bytes = part.length;
      return void res.end(part);
    }
    rec.bytes = stall;
    res.write(part.subarray(0, stall));
    releaseStall = () => {
      rec.bytes = part.length;
      res.end(part.subarray(stall));
    };
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (name) => `http://127.0.0.1:${port}/${name}`,
    requests,
    stallAfter: (n) => void (stallAt = n),
    release: () => releaseStall?.(),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function child(args: string[]): ChildProcess & { out: string } {
  const c = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  }) as ChildProcess & { out: string };
  c.out = '';
  c.stdout!.on('data', (b: Buffer) => (c.out += b.toString()));
  c.stderr!.on('data', (b: Buffer) => (c.out += b.toString()));
  return c;
}

const exited = (c: ChildProcess) =>
  c.exitCode !== null || c.signalCode !== null
    ? Promise.resolve()
    : new Promise<void>((r) => c.once('exit', () => r()));

describe('fetchBlob', () => {
  let dir: string;
  let server: BlobServer | undefined;
  const children: ChildProcess[] = [];
  const blob = randomBytes(4 * 1024 * 1024 + 123);
  const half = 2 * 1024 * 1024;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-ds-'));
  });
  afterEach(async () => {
    for (const c of children.splice(0)) {
      if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
      await exited(c);
    }
    await server?.close();
    server = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  const want = (s: BlobServer) => ({
    sha256: sha(blob),
    size: blob.length,
    label: 'ds@1 a.bin',
    source: urlSource(s.url('a.bin')),
  });
  const served = (s: BlobServer) => s.requests.reduce((n, r) => n + r.bytes, 0);

  it('two processes fetching one blob at once move its bytes once: the second waits on the lock', async () => {
    server = await blobServer({ 'a.bin': blob });
    server.stallAfter(half);
    const cacheDir = join(dir, 'cache');
    const args = [cacheDir, server.url('a.bin'), sha(blob), String(blob.length), '2000'];
    const a = child(args);
    children.push(a);
    const partial = new BlobCache(cacheDir).blobPath(sha(blob)) + '.partial';
    await waitFor(() => existsSync(partial) && statSync(partial).size === half, {
      what: 'the first fetcher half way',
      detail: () => a.out,
    });
    const b = child(args);
    children.push(b);
    await waitFor(() => b.out.includes('start'), { what: 'the second fetcher asking', detail: () => b.out });
    server.release();
    await Promise.all([exited(a), exited(b)]);
    expect([a.exitCode, b.exitCode], a.out + b.out).toEqual([0, 0]);
    expect(server.requests).toHaveLength(1);
    expect(served(server)).toBe(blob.length);
    expect([a.out, b.out].map((o) => /done (\d+)/.exec(o)?.[1]).sort()).toEqual(['0', String(blob.length)]);
  }, 120_000);

  it('a fetcher SIGKILLed mid-way is resumed from its partial file with a range read, then verified', async () => {
    server = await blobServer({ 'a.bin': blob });
    server.stallAfter(half);
    const cacheDir = join(dir, 'cache');
    const a = child([cacheDir, server.url('a.bin'), sha(blob), String(blob.length), '2000']);
    children.push(a);
    const cache = new BlobCache(cacheDir);
    const partial = cache.blobPath(sha(blob)) + '.partial';
    await waitFor(() => existsSync(partial) && statSync(partial).size === half, {
      what: 'the fetcher half way',
      detail: () => a.out,
    });
    a.kill('SIGKILL');
    await exited(a);
    // Its lock is left behind: this fetch waits for it to go stale, then takes over.
    const r = await fetchBlob(cache, want(server), { staleMs: 2000 });
    expect(r.moved).toBe(blob.length - half);
    expect(server.requests.map((q) => q.range)).toEqual([undefined, `bytes=${half}-`]);
    expect(served(server)).toBe(blob.length);
    expect(sha(readFileSync(r.path))).toBe(sha(blob));
    expect(existsSync(partial)).toBe(false);
  }, 120_000);

  it('resumes from a partial file over the store port (offset read)', async () => {
    const store = new FileStore(join(dir, 'store'));
    await store.put('ds/a.bin', blob);
    const cache = new BlobCache(join(dir, 'cache'));
    mkdirSync(dirname(cache.blobPath(sha(blob))), { recursive: true });
    writeFileSync(cache.blobPath(sha(blob)) + '.partial', blob.subarray(0, half));
    const source = storeSource(store, 'ds/a.bin');
    const r = await fetchBlob(cache, { sha256: sha(blob), size: blob.length, label: 'ds@1 a.bin', source });
    expect(r.moved).toBe(blob.length - half);
    expect(sha(readFileSync(r.path))).toBe(sha(blob));
  });

  it('a corrupted cached blob is detected (its stat changed), deleted and fetched again', async () => {
    server = await blobServer({ 'a.bin': blob });
    const cache = new BlobCache(join(dir, 'cache'));
    const first = await fetchBlob(cache, want(server));
    expect((await fetchBlob(cache, want(server))).moved).toBe(0);
    // A job writes into its hard-linked input: same size, other bytes.
    chmodSync(first.path, 0o644);
    const bad = Buffer.from(blob);
    bad[100] = bad[100]! ^ 0xff;
    writeFileSync(first.path, bad);
    const again = await fetchBlob(cache, want(server));
    expect(again.moved).toBe(blob.length);
    expect(sha(readFileSync(again.path))).toBe(sha(blob));
    expect(served(server)).toBe(2 * blob.length);
  });

  it('ADV_DATASET_VERIFY=full catches a change that kept the stat; the stat check trusts it', async () => {
    server = await blobServer({ 'a.bin': blob });
    const cacheDir = join(dir, 'cache');
    const first = await fetchBlob(new BlobCache(cacheDir), want(server));
    // A whole-second mtime, recorded by a warm lookup (re-hashed: it changed), that utimes can put back exactly.
    utimesSync(first.path, 1_700_000_000, 1_700_000_000);
    expect((await fetchBlob(new BlobCache(cacheDir), want(server))).moved).toBe(0);
    chmodSync(first.path, 0o644);
    const bad = Buffer.from(blob);
    bad[7] = bad[7]! ^ 0xff;
    writeFileSync(first.path, bad);
    utimesSync(first.path, 1_700_000_000, 1_700_000_000);
    expect((await fetchBlob(new BlobCache(cacheDir), want(server))).moved).toBe(0);
    const full = await fetchBlob(new BlobCache(cacheDir, { verify: 'full' }), want(server));
    expect(full.moved).toBe(blob.length);
    expect(sha(readFileSync(full.path))).toBe(sha(blob));
  });

  it('a stop notice abandons the wait for a lock another fetcher holds', async () => {
    server = await blobServer({ 'a.bin': blob });
    const cache = new BlobCache(join(dir, 'cache'));
    mkdirSync(dirname(cache.blobPath(sha(blob))), { recursive: true });
    const { lock } = await import('proper-lockfile');
    const release = await lock(cache.blobPath(sha(blob)), { realpath: false });
    try {
      const stop = new AbortController();
      const waiting = fetchBlob(cache, want(server), { signal: stop.signal });
      stop.abort(new Error('SIGTERM'));
      await expect(waiting).rejects.toThrow('SIGTERM');
      expect(server.requests).toHaveLength(0);
    } finally {
      await release();
    }
  });

  it('a source that keeps giving other bytes is tried twice, then named in the error', async () => {
    server = await blobServer({ 'a.bin': Buffer.from('not the dataset') });
    const cache = new BlobCache(join(dir, 'cache'));
    await expect(fetchBlob(cache, want(server))).rejects.toThrow(
      new RegExp(
        `ds@1 a\\.bin: ${server.url('a.bin').replace(/[.]/g, '\\.')} gave 15 bytes .* twice, expected ${blob.length} bytes`,
      ),
    );
    expect(server.requests).toHaveLength(2);
    expect(existsSync(cache.blobPath(sha(blob)))).toBe(false);
  });
});

describe('cacheOptionsFromEnv and datasetCacheDir', () => {
  it.each([
    [{ ADV_CACHE_DIR: '/c' }, '/c/datasets'],
    [{ XDG_CACHE_HOME: '/x', HOME: '/h' }, '/x/adventuretime/datasets'],
    [{ HOME: '/h' }, '/h/.cache/adventuretime/datasets'],
  ])('%j → %s', (env, dir) => expect(datasetCacheDir(env)).toBe(dir));

  it('reads the bound and the verification mode, refusing what they cannot be', () => {
    expect(cacheOptionsFromEnv({ ADV_CACHE_MAX_BYTES: '1024', ADV_DATASET_VERIFY: 'full' })).toEqual({
      maxBytes: 1024,
      verify: 'full',
    });
    expect(cacheOptionsFromEnv({})).toEqual({});
    expect(() => cacheOptionsFromEnv({ ADV_CACHE_MAX_BYTES: '10G' })).toThrow(
      'ADV_CACHE_MAX_BYTES=10G is not a number of bytes',
    );
    expect(() => cacheOptionsFromEnv({ ADV_DATASET_VERIFY: 'paranoid' })).toThrow(
      'ADV_DATASET_VERIFY=paranoid: use full (hash on every use) or stat (the default)',
    );
  });
});

describe('BlobCache.evict', () => {
  it('keeps the cache under its bound, least recently used first, never a kept or locked blob', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'adv-ds-'));
    try {
      let now = 1000;
      const store = new FileStore(join(dir, 'store'));
      const cache = new BlobCache(join(dir, 'cache'), { maxBytes: 3 * 1024, now: () => now });
      const blobs = [0, 1, 2, 3, 4].map(() => randomBytes(1024));
      const get = async (i: number) => {
        now += 1000;
        await store.put(`b${i}`, blobs[i]!);
        const source = storeSource(store, `b${i}`);
        return fetchBlob(cache, { sha256: sha(blobs[i]!), size: 1024, label: `b${i}`, source });
      };
      for (const i of [0, 1, 2, 3, 4]) await get(i);
      await get(0); // used again: now the newest
      const { lock } = await import('proper-lockfile');
      const release = await lock(cache.blobPath(sha(blobs[1]!)), { realpath: false });
      try {
        const r = await cache.evict(new Set([sha(blobs[2]!)]));
        // 5 KiB over a 3 KiB bound; oldest first: 1 is being fetched and 2 is the job's, so 3 and 4 go.
        expect(r.removed.sort()).toEqual([sha(blobs[3]!), sha(blobs[4]!)].sort());
        expect(r.bytes).toBe(3 * 1024);
      } finally {
        await release();
      }
      for (const i of [0, 1, 2]) expect(existsSync(cache.blobPath(sha(blobs[i]!)))).toBe(true);
      // A partial download nobody resumes counts, oldest first like the blobs.
      const stale = cache.blobPath(sha(blobs[3]!)) + '.partial';
      writeFileSync(stale, blobs[3]!.subarray(0, 512));
      utimesSync(stale, 1, 1);
      expect(await cache.evict()).toEqual({ removed: [`${sha(blobs[3]!)}.partial`], bytes: 3 * 1024 });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
