/**
 * Checkpoint transfer throughput (issue 4): upload and restore of a 1 GiB checkpoint — one large
 * file, and 1,000 small files — through the checkpoint protocol (sha256 of every byte, manifest
 * last, verification on restore), against the plain transfer of the same bytes in the same run:
 * `@aws-sdk/lib-storage` Upload / GetObject on S3 (s3rver on loopback), `cp -r` for file://.
 */
import { execFileSync } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';

import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { restoreLatest, uploadCheckpoint } from '../runtime/checkpoint.js';
import { FileStore } from '../runtime/store/file.js';
import { partSizeFor, S3Store } from '../runtime/store/s3.js';
import { startS3 } from '../test/helpers/servers/s3.js';
import { table, writeRandom } from './lib.js';

const MiB = 2 ** 20;
const TOTAL = Number(process.env.BENCH_CKPT_MIB ?? 1024) * MiB;

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return (performance.now() - t) / 1000;
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'adv-bench-ckpt-'));
  const s3 = await startS3('bench');
  try {
    const big = join(dir, 'big');
    await mkdir(big);
    await writeRandom(join(big, 'params.bin'), TOTAL);
    const small = join(dir, 'small');
    await mkdir(small);
    const n = 1000;
    for (let i = 0; i < n; i++)
      await writeFile(
        join(small, `shard-${String(i).padStart(4, '0')}.bin`),
        randomBytes(Math.floor(TOTAL / n)),
      );

    const s3store = new S3Store({
      bucket: 'bench',
      prefix: 'p',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    });
    const client = s3store.client;
    const rows: (string | number)[][] = [];
    const gib = TOTAL / 2 ** 30;
    const row = (what: string, plain: number, ours: number) =>
      rows.push([what, (TOTAL / MiB / plain).toFixed(0), (TOTAL / MiB / ours).toFixed(0), plain / ours]);

    for (const [label, src, files] of [
      ['one file', big, ['params.bin']],
      [`${n} files`, small, Array.from({ length: n }, (_, i) => `shard-${String(i).padStart(4, '0')}.bin`)],
    ] as const) {
      // S3: plain SDK upload of the same files, same part size and concurrency.
      const plainUp = await timed(async () => {
        let next = 0;
        await Promise.all(
          Array.from({ length: 4 }, async () => {
            while (next < files.length) {
              const f = files[next++]!;
              const size = (await import('node:fs')).statSync(join(src, f)).size;
              await new Upload({
                client,
                params: {
                  Bucket: 'bench',
                  Key: `plain/${label}/${f}`,
                  Body: createReadStream(join(src, f)),
                  ContentLength: size,
                },
                partSize: partSizeFor(size),
                queueSize: 4,
              }).done();
            }
          }),
        );
      });
      const oursUp = await timed(() =>
        uploadCheckpoint(s3store, { run: label.replace(/ /g, '-'), step: 1, attempt: 1, dir: src }),
      );
      row(`S3 upload, ${label}`, plainUp, oursUp);
      const dl = join(dir, 'dl');
      const plainOnce = () =>
        timed(async () => {
          let next = 0;
          await Promise.all(
            Array.from({ length: 4 }, async () => {
              while (next < files.length) {
                const f = files[next++]!;
                const r = await client.send(
                  new GetObjectCommand({ Bucket: 'bench', Key: `plain/${label}/${f}` }),
                );
                await mkdir(join(dl, 'plain'), { recursive: true });
                await pipeline(r.Body as Readable, createWriteStream(join(dl, 'plain', f)));
              }
            }),
          );
        });
      const oursOnce = async () => {
        await rm(join(dl, 'ours'), { recursive: true, force: true });
        return timed(() => restoreLatest(s3store, label.replace(/ /g, '-'), join(dl, 'ours')));
      };
      // Alternate, best of two each: the write-back of one 1 GiB download slows the next.
      const o1 = await oursOnce();
      const p1 = await plainOnce();
      const o2 = await oursOnce();
      const p2 = await plainOnce();
      const plainDown = Math.min(p1, p2);
      const oursDown = Math.min(o1, o2);
      row(`S3 restore (sha256-verified), ${label}`, plainDown, oursDown);
      await rm(dl, { recursive: true, force: true });

      // file://: cp -r against the store.
      const root = join(dir, 'fs-store');
      const cpUp = await timed(async () => execFileSync('cp', ['-r', src, join(dir, 'cp-copy')]));
      const fs = new FileStore(root);
      const fsUp = await timed(() =>
        uploadCheckpoint(fs, { run: label.replace(/ /g, '-'), step: 1, attempt: 1, dir: src }),
      );
      row(`file:// upload, ${label} (baseline cp -r)`, cpUp, fsUp);
      // The floor with checksums: cp -r, then sha256 of every file (node's crypto, as ours uses).
      const cpHash = await timed(async () => {
        execFileSync('cp', ['-r', src, join(dir, 'cp-copy2')]);
        for (const f of files)
          createHash('sha256')
            .update(await readFile(join(dir, 'cp-copy2', f)))
            .digest('hex');
      });
      row(`file:// upload, ${label} (baseline cp -r + sha256)`, cpHash, fsUp);
      const cpDown = await timed(async () =>
        execFileSync('cp', ['-r', join(dir, 'cp-copy'), join(dir, 'cp-back')]),
      );
      const fsDown = await timed(() => restoreLatest(fs, label.replace(/ /g, '-'), join(dir, 'fs-back')));
      row(`file:// restore (sha256-verified), ${label} (baseline cp -r)`, cpDown, fsDown);
      for (const d of ['cp-copy', 'cp-copy2', 'cp-back', 'fs-back', 'fs-store'])
        await rm(join(dir, d), { recursive: true, force: true });
    }
    console.log(`\n### Checkpoint transfers: ${gib.toFixed(2)} GiB, one run each, same bytes (MiB/s)\n`);
    console.log(
      table(['transfer', 'plain MiB/s', 'checkpoint protocol MiB/s', 'ratio (target ≥ 0.9)'], rows),
    );
  } finally {
    await s3.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
