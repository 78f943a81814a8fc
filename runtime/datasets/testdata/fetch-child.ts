/**
 * A second process fetching one blob into a cache (fetch.test.ts): prints `start` just before it
 * asks for the blob, then `done <bytes moved>`.
 * Usage: fetch-child.ts CACHE_DIR URL SHA256 SIZE STALE_MS
 */
import { BlobCache } from '../cache.js';
import { fetchBlob, urlSource } from '../fetch.js';

const [dir, url, sha256, size, staleMs] = process.argv.slice(2) as [string, string, string, string, string];
const cache = new BlobCache(dir);
process.stdout.write('start\n');
const r = await fetchBlob(
  cache,
  { sha256, size: Number(size), label: 'child', source: urlSource(url) },
  { staleMs: Number(staleMs) },
);
process.stdout.write(`done ${r.moved}\n`);
