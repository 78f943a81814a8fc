import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { pack, type Header } from 'tar-stream';

type Headers = Partial<Header> & { name: string };
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { UnsafeEntryError, unpackTarGz } from './unpack.js';

async function tarGz(entries: { header: Headers; body?: string }[]): Promise<Buffer> {
  const tar = pack();
  const chunks: Buffer[] = [];
  tar.on('data', (b: unknown) => chunks.push(b as Buffer));
  const ended = new Promise<void>((r) => tar.on('end', () => r()));
  for (const e of entries)
    if (e.header.type && e.header.type !== 'file') tar.entry(e.header);
    else tar.entry(e.header, e.body ?? '');
  tar.finalize();
  await ended;
  return gzipSync(Buffer.concat(chunks));
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'adv-unpack-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const write = async (entries: { header: Headers; body?: string }[]) => {
  const archive = join(dir, 'code.tar.gz');
  await writeFile(archive, await tarGz(entries));
  return archive;
};

describe('unpackTarGz', () => {
  it('extracts files, directories, modes and links inside the tree', async () => {
    const archive = await write([
      { header: { name: 'src/', type: 'directory', mode: 0o755 } },
      { header: { name: 'src/train.py', mode: 0o644 }, body: 'print(1)\n' },
      { header: { name: 'run.sh', mode: 0o755 }, body: '#!/bin/sh\n' },
      { header: { name: 'latest.py', type: 'symlink', linkname: 'src/train.py' } },
    ]);
    expect(await unpackTarGz(archive, join(dir, 'work'))).toBe(2);
    expect(readFileSync(join(dir, 'work/src/train.py'), 'utf8')).toBe('print(1)\n');
    expect(statSync(join(dir, 'work/run.sh')).mode & 0o777).toBe(0o755);
    expect(readFileSync(join(dir, 'work/latest.py'), 'utf8')).toBe('print(1)\n');
  });
  it.each<[Headers]>([
    [{ name: '../evil', mode: 0o644 }],
    [{ name: '/etc/evil', mode: 0o644 }],
    [{ name: 'a/../../evil', mode: 0o644 }],
    [{ name: 'out', type: 'symlink' as const, linkname: '../../etc' }],
    [{ name: 'abs', type: 'symlink' as const, linkname: '/etc' }],
  ])('refuses an entry that points outside: %o', async (header) => {
    const archive = await write([{ header, ...(header.type ? {} : { body: 'x' }) }]);
    await expect(unpackTarGz(archive, join(dir, 'work'))).rejects.toThrow(UnsafeEntryError);
    expect(existsSync(join(dir, 'evil'))).toBe(false);
  });
  it('refuses to write through a link', async () => {
    const archive = await write([
      { header: { name: 'd', type: 'symlink', linkname: 'e' } },
      { header: { name: 'e/', type: 'directory' } },
      { header: { name: 'd/f', mode: 0o644 }, body: 'x' },
    ]);
    await expect(unpackTarGz(archive, join(dir, 'work'))).rejects.toThrow(/through the link d/);
  });
});
