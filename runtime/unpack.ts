/**
 * Extracts a code payload (the deterministic tar.gz of a git tree) into a directory, with Node's
 * zlib and tar-stream only, so `adv exec` can fetch its code where the image has no `tar` (a
 * container that has Node and `sh`). Nothing is written outside `dest`: absolute names, `..`,
 * links pointing out, and writes through a link are refused.
 */
import { createReadStream } from 'node:fs';
import { lstat, mkdir, symlink, writeFile, chmod } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';

/** Thrown for an archive entry that could write outside the destination. */
export class UnsafeEntryError extends Error {}

const inside = (root: string, p: string): boolean => {
  const rel = relative(root, p);
  return rel === '' || (!rel.startsWith(`..${sep}`) && rel !== '..' && !isAbsolute(rel));
};

/** No directory between `root` and `path` is a symbolic link (a link must not be written through). */
async function noLinkOnTheWay(root: string, path: string): Promise<void> {
  const parts = relative(root, dirname(path)).split(sep).filter(Boolean);
  let at = root;
  for (const part of parts) {
    at = join(at, part);
    const st = await lstat(at).catch(() => undefined);
    if (st?.isSymbolicLink())
      throw new UnsafeEntryError(`refusing to write through the link ${relative(root, at)}`);
  }
}

/** Extracts the tar.gz at `archive` into `dest` (created); resolves to the number of files. */
export async function unpackTarGz(archive: string, dest: string): Promise<number> {
  const root = resolve(dest);
  await mkdir(root, { recursive: true });
  const ex = extract();
  let files = 0;
  ex.on('entry', (header, stream, next) => {
    void (async () => {
      const name = header.name.replace(/^\.\//, '');
      const target = resolve(root, name);
      if (!name || isAbsolute(name) || !inside(root, target))
        throw new UnsafeEntryError(
          `archive entry ${JSON.stringify(header.name)} points outside the code dir`,
        );
      await noLinkOnTheWay(root, target);
      const mode = (header.mode ?? 0o644) & 0o777;
      if (header.type === 'directory') {
        await mkdir(target, { recursive: true });
        stream.resume();
      } else if (header.type === 'symlink') {
        const to = header.linkname ?? '';
        if (isAbsolute(to) || !inside(root, resolve(dirname(target), to)))
          throw new UnsafeEntryError(
            `archive link ${JSON.stringify(header.name)} points outside the code dir`,
          );
        await mkdir(dirname(target), { recursive: true });
        await symlink(to, target);
        stream.resume();
      } else if (header.type === 'file') {
        await mkdir(dirname(target), { recursive: true });
        const chunks: Buffer[] = [];
        for await (const c of stream) chunks.push(c as Buffer);
        await writeFile(target, Buffer.concat(chunks), { mode });
        await chmod(target, mode);
        files++;
      } else {
        stream.resume();
      }
    })().then(
      () => next(),
      (e: unknown) => next(e as Error),
    );
  });
  await pipeline(createReadStream(archive), createGunzip(), ex);
  return files;
}
