/** The controller's id: stable per data dir, so its write-ahead records can be told from another's. */
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** A stable id for this controller's data dir, made once. */
export async function loadControllerId(dataDir: string): Promise<string> {
  const file = join(dataDir, 'controller-id');
  const saved = (await readFile(file, 'utf8').catch(() => '')).trim();
  // An id is made once; an empty or unreadable one (a truncated write) is made again.
  if (/^[\w.-]{8,128}$/.test(saved)) return saved;
  const id = randomUUID();
  await writeFile(file, id + '\n');
  return id;
}

/** `<data-dir>/controller.json`: where a running controller can be reached (`adv reconcile`). */
export async function writeRuntimeInfo(dataDir: string, info: Record<string, unknown>): Promise<void> {
  await writeFile(join(dataDir, 'controller.json'), JSON.stringify({ pid: process.pid, ...info }, null, 2));
}
