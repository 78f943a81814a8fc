/** Small files sent to a host in one go (job dirs for a batch submit), and the bundled runtime. */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pack } from 'tar-stream';

/** A tar of small files, deterministic like the code payload (mtime 0, owner 0). */
export async function packFiles(
  files: readonly { name: string; body: string | Buffer; mode?: number }[],
): Promise<Buffer> {
  const tar = pack();
  const chunks: Buffer[] = [];
  tar.on('data', (b: unknown) => chunks.push(b as Buffer));
  const ended = new Promise<void>((r) => tar.on('end', () => r()));
  for (const f of files)
    tar.entry(
      { name: f.name, mode: f.mode ?? 0o600, mtime: new Date(0), uid: 0, gid: 0, uname: '', gname: '' },
      Buffer.from(f.body),
    );
  tar.finalize();
  await ended;
  return Buffer.concat(chunks);
}

/** Where the bundled worker runtime is (built by `npm run build`): remote hosts run this file. */
export function execBundlePath(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  for (const p of [
    join(here, '..', '..', '..', 'adv-exec.mjs'),
    join(here, '..', '..', '..', 'dist', 'adv-exec.mjs'),
  ])
    if (existsSync(p)) return p;
  throw new Error('dist/adv-exec.mjs is missing: run `npm run build` (backends ship the bundled adv exec)');
}
