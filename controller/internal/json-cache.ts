/**
 * Parse caches that survive restarts: plain JSON files in the data dir, stamped so that a new
 * version of the program never trusts a verdict of an old one. A missing, stale or unreadable
 * cache is simply empty.
 */
import { readFile, rename, writeFile } from 'node:fs/promises';

/**
 * The cached data, if the file holds a cache of this stamp whose data has the expected shape.
 * Caches are disposable: valid JSON of the wrong shape (a hand edit, another version, a bit flip)
 * is thrown away and rebuilt, never a crash at start-up.
 */
export async function readJsonCache<T>(
  file: string,
  stamp: string,
  isShape: (data: unknown) => data is T,
): Promise<T | undefined> {
  try {
    const saved = JSON.parse(await readFile(file, 'utf8')) as { stamp?: unknown; data?: unknown } | null;
    if (saved?.stamp !== stamp || !isShape(saved.data)) return undefined;
    return saved.data;
  } catch {
    return undefined;
  }
}

/** A list whose every element passes `isItem`. */
export const listOf =
  <T>(isItem: (x: unknown) => boolean) =>
  (data: unknown): data is T[] =>
    Array.isArray(data) && data.every(isItem);

/** Written to a temporary file and renamed, so a crash never leaves half a cache. */
export async function writeJsonCache(file: string, stamp: string, data: unknown): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  await writeFile(tmp, JSON.stringify({ stamp, data }));
  await rename(tmp, file);
}
