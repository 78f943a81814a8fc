/**
 * Parse caches that survive restarts: plain JSON files in the data dir, stamped so that a new
 * version of the program never trusts a verdict of an old one. A missing, stale or unreadable
 * cache is simply empty.
 */
import { readFile, rename, writeFile } from 'node:fs/promises';

export async function readJsonCache<T>(file: string, stamp: string): Promise<T | undefined> {
  try {
    const saved = JSON.parse(await readFile(file, 'utf8')) as { stamp?: string; data?: T };
    return saved.stamp === stamp ? saved.data : undefined;
  } catch {
    return undefined;
  }
}

/** Written to a temporary file and renamed, so a crash never leaves half a cache. */
export async function writeJsonCache(file: string, stamp: string, data: unknown): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  await writeFile(tmp, JSON.stringify({ stamp, data }));
  await rename(tmp, file);
}
