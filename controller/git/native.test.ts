import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, assert, beforeAll, describe, expect, it } from 'vitest';
import { BatchParser, git, NativeGit, type BatchObject } from './native.js';

const enc = (s: string) => Buffer.from(s, 'utf8');
const never = (): never => assert.fail('not expected');

/** What `git cat-file --batch` prints for these objects, one after the other. */
function batchOutput(objects: { oid: string; body?: Buffer }[]): Buffer {
  return Buffer.concat(
    objects.map((o) =>
      o.body
        ? Buffer.concat([enc(`${o.oid} blob ${o.body.length}\n`), o.body, enc('\n')])
        : enc(`${o.oid} missing\n`),
    ),
  );
}

/** Feeds `out` to a parser in the given chunk sizes (cycled); what each request got. */
function parseInChunks(oids: string[], out: Buffer, sizes: number[]): (BatchObject | Error)[] {
  const parser = new BatchParser(true);
  const got: (BatchObject | Error)[] = [];
  oids.forEach((oid, i) =>
    parser.expect(
      oid,
      (o) => (got[i] = o),
      (e) => (got[i] = e),
    ),
  );
  for (let off = 0, k = 0; off < out.length; k++) {
    const n = sizes[k % sizes.length]!;
    parser.push(out.subarray(off, off + n));
    off += n;
  }
  return got;
}

describe('BatchParser', () => {
  const objects = [
    { oid: 'a'.repeat(40), body: enc('kind: Run\n') },
    { oid: 'b'.repeat(40), body: Buffer.alloc(0) },
    { oid: 'c'.repeat(40) },
    // A body that looks like a header, and one with nothing but newlines.
    { oid: 'd'.repeat(40), body: enc(`${'e'.repeat(40)} blob 3\nxyz\n`) },
    { oid: 'f'.repeat(40), body: enc('\n\n\n') },
    { oid: '1'.repeat(40), body: randomBytes(5000) },
  ];
  const out = batchOutput(objects);

  it('splits the output into objects wherever the chunks end', () => {
    for (const sizes of [[1], [2], [3], [7], [41], [42], [43], [64], [4999, 1], [1, 5000], [out.length]]) {
      const got = parseInChunks(
        objects.map((o) => o.oid),
        out,
        sizes,
      );
      objects.forEach((o, i) => {
        if (o.body) {
          expect(got[i], `chunks of ${sizes.join(',')}`).toMatchObject({ type: 'blob', size: o.body.length });
          expect((got[i] as BatchObject).body!.equals(o.body)).toBe(true);
        } else expect((got[i] as Error).message).toMatch(/missing/);
      });
    }
  });

  it('gives sizes only, without bodies, for --batch-check output', () => {
    const parser = new BatchParser(false);
    const got: BatchObject[] = [];
    parser.expect('a'.repeat(40), (o) => got.push(o), never);
    parser.expect('b'.repeat(40), (o) => got.push(o), never);
    parser.push(enc(`${'a'.repeat(40)} blob 52428800\n${'b'.repeat(40)} tr`));
    parser.push(enc('ee 31\n'));
    expect(got).toEqual([
      { type: 'blob', size: 52428800 },
      { type: 'tree', size: 31 },
    ]);
  });

  it('rejects the object being read and every waiting one when git goes away', () => {
    const parser = new BatchParser(true);
    const errors: string[] = [];
    parser.expect('a'.repeat(40), never, (e) => errors.push(`a: ${e.message}`));
    parser.expect('b'.repeat(40), never, (e) => errors.push(`b: ${e.message}`));
    parser.push(enc(`${'a'.repeat(40)} blob 100\nhalf of it`));
    parser.fail(new Error('gone'));
    expect(errors).toEqual(['a: gone', 'b: gone']);
  });
});

describe('NativeGit on a real repository', () => {
  let dir: string;
  let gitdir: string;
  let port: NativeGit;
  const hash = async (content: Buffer) =>
    (await git(['hash-object', '-w', '--stdin'], { gitdir, input: content })).toString('utf8').trim();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-native-'));
    gitdir = join(dir, 'repo.git');
    await git(['init', '--quiet', '--bare', gitdir]);
    port = new NativeGit(gitdir);
  });
  afterAll(async () => {
    await port.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('reads a 24 MiB blob among many small ones, byte for byte', { timeout: 60_000 }, async () => {
    const big = randomBytes(24 * 2 ** 20);
    const small: Buffer[] = [];
    for (let i = 0; i < 300; i++) small.push(i % 50 === 0 ? Buffer.alloc(0) : randomBytes((i * 7919) % 9000));
    // Written by one fast-import; the blob ids read back from the tree.
    const files = new Map<string, Uint8Array>([['big', big], ...small.map((b, i) => [`s${i}`, b] as const)]);
    const commit = await port.commitFiles({
      files,
      message: 'blobs',
      author: { name: 'T', email: 't@e.com' },
    });
    const oidOf = new Map(
      (await port.readTree((await port.readCommit(commit)).tree)).map((e) => [e.path, e.oid]),
    );
    const bigOid = oidOf.get('big')!;
    const smallOids = small.map((_b, i) => oidOf.get(`s${i}`)!);

    // One pipelined request: small ones, the big one, small ones, the big one again.
    const oids = [...smallOids.slice(0, 150), bigOid, ...smallOids.slice(150), bigOid];
    const want = [...small.slice(0, 150), big, ...small.slice(150), big];
    const got = await port.readBlobs(oids);
    expect(got).toHaveLength(want.length);
    got.forEach((b, i) => expect(Buffer.compare(b, want[i]!), `object ${i}`).toBe(0));
  });

  it('reports a missing object and keeps reading the next ones', async () => {
    const oid = await hash(enc('still here\n'));
    await expect(port.readBlobs(['0123456789'.repeat(4)])).rejects.toThrow(/missing/);
    expect(Buffer.from((await port.readBlobs([oid]))[0]!).toString()).toBe('still here\n');
  });

  it('gives the size of every blob of a tree when asked, as git cat-file -s does', async () => {
    const files = new Map<string, Uint8Array>([
      ['a.yaml', enc('kind: Run\n')],
      ['empty.yml', new Uint8Array(0)],
      ['big.yaml', Buffer.alloc(3 * 2 ** 20, 0x61)],
      ['dir/b.yaml', enc('kind: DAG\n')],
    ]);
    const commit = await port.commitFiles({
      files,
      message: 'files',
      author: { name: 'T', email: 't@example.com' },
    });
    const tree = (await port.readCommit(commit)).tree;
    const entries = await port.readTree(tree, { sizes: true });
    for (const e of entries) {
      if (e.type === 'tree') expect(e.size).toBeUndefined();
      else expect(e.size, e.path).toBe(Number((await git(['cat-file', '-s', e.oid], { gitdir })).toString()));
    }
    expect(entries.find((e) => e.path === 'big.yaml')?.size).toBe(3 * 2 ** 20);
    // Without the option, no sizes are looked up.
    expect((await port.readTree(tree)).every((e) => e.size === undefined)).toBe(true);
  });
});
