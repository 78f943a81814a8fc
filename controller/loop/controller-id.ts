/** The controller's id: stable per data dir, so its write-ahead records can be told from another's. */
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** A stable id for this controller's data dir, made once. */
export async function loadControllerId(dataDir: string): Promise<string> {
  const file = join(dataDir, 'controller-id');
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch {
    const id = randomUUID();
    await writeFile(file, id + '\n', { flag: 'wx' }).catch(() => undefined);
    return (await readFile(file, 'utf8')).trim();
  }
}
