/**
 * A 50 MB `.yaml` file committed to a specs repo (issue 13, item 5). It is over the spec size
 * limit, so it can only ever be a `FileTooLarge` diagnostic: the size comes from the tree and the
 * blob is never read. The other specs load; the controller and `adv plan` name the file and the fix.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { IsoGit } from '../controller/git/iso.js';
import { NativeGit } from '../controller/git/native.js';
import type { GitPort } from '../controller/git/port.js';
import { GitTreeSource, TreeListingCache } from '../controller/git/tree-source.js';
import { SpecLoader } from '../controller/spec/loader.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';

const LIMIT = 1024 * 1024;
const row = '- [0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.375, 1.5]\n';
/** A YAML data dump of 50 MiB or a little more. */
const BIG = 'samples:\n' + row.repeat(Math.ceil((50 * 2 ** 20) / row.length));
const BIG_FILE = 'data/samples.yaml';

/** A port that records which blobs it was asked for. */
function recording(port: GitPort): { port: GitPort; blobsRead: string[] } {
  const blobsRead: string[] = [];
  const wrapped = new Proxy(port, {
    get(target, key) {
      if (key === 'readBlobs')
        return (oids: readonly string[]) => {
          blobsRead.push(...oids);
          return target.readBlobs(oids);
        };
      const v = Reflect.get(target, key, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { port: wrapped, blobsRead };
}

let tmp: string;
let wt: WorkTree;
let bigOid: string;
let tree: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-big-blob-'));
  wt = await makeWorkTree({
    'backends/local.yaml': LOCAL_BACKEND,
    'runs/a.yaml': runYaml('a', ['true'], '  suspend: true\n'),
    'runs/b.yaml': runYaml('b', ['true'], '  suspend: true\n'),
    [BIG_FILE]: BIG,
  });
  bigOid = await wt.git('rev-parse', `HEAD:${BIG_FILE}`);
  tree = await wt.git('rev-parse', 'HEAD^{tree}');
});
afterAll(async () => {
  await wt.cleanup();
  await removeTree(tmp);
});

/** The diagnostic of the big file, as every reader must give it. */
const expectTooLarge = (d: unknown) =>
  expect(d).toMatchObject({
    severity: 'error',
    code: 'FileTooLarge',
    file: BIG_FILE,
    line: 1,
    column: 1,
    message: `file is ${BIG.length} bytes, over the limit of ${LIMIT}`,
    hint: expect.stringMatching(/split it into smaller files.*move it out of the specs folder/),
  });

describe('a 50 MB spec file in a git specs repo', () => {
  it('is refused from its size in the tree: the blob is never read, the other specs load', async () => {
    const { port, blobsRead } = recording(new NativeGit(join(wt.dir, '.git')));
    try {
      const listings = new TreeListingCache(port);
      const loader = new SpecLoader();
      const r = await loader.sync(new GitTreeSource(port, tree, listings));
      expect(blobsRead).not.toContain(bigOid);
      expect(blobsRead).toHaveLength(3);
      expect(r.objects.map((o) => `${o.kind}/${o.name}`).sort()).toEqual(['Backend/local', 'Run/a', 'Run/b']);
      expect(r.diagnostics).toHaveLength(1);
      expectTooLarge(r.diagnostics[0]);

      // Cached by blob id: a second sync of the same tree reads and parses nothing.
      const parsed = loader.parsedFiles;
      const again = await loader.sync(new GitTreeSource(port, tree, listings));
      expect(blobsRead).toHaveLength(3);
      expect(loader.parsedFiles).toBe(parsed);
      expect(again.diagnostics).toEqual(r.diagnostics);
    } finally {
      await port.close();
    }
  });

  it('gives the same diagnostic through a reader without sizes (isomorphic-git reads it, then refuses it)', async () => {
    const { port, blobsRead } = recording(new IsoGit(join(wt.dir, '.git')));
    try {
      const r = await new SpecLoader().sync(new GitTreeSource(port, tree, new TreeListingCache(port)));
      expect(blobsRead).toContain(bigOid);
      expect(r.objects).toHaveLength(3);
      expect(r.diagnostics).toHaveLength(1);
      expectTooLarge(r.diagnostics[0]);
    } finally {
      await port.close();
    }
  });

  it('the controller makes its first pass and records the file and the fix on the status branch', async () => {
    const c = await Controller.create({
      repo: wt.dir,
      dataDir: join(tmp, 'data'),
      resyncIntervalMs: 3_600_000,
      fetchIntervalMs: 3_600_000,
      pollIntervalMs: 3_600_000,
    });
    try {
      await c.init();
      await c.pass();
    } finally {
      await c.stop();
    }
    const source = parse(await wt.git('show', 'adventuretime/status:sources/specs.yaml')) as {
      status: { errors: unknown[] };
    };
    expect(source.status.errors).toEqual([
      {
        file: BIG_FILE,
        line: 1,
        column: 1,
        code: 'FileTooLarge',
        message: `file is ${BIG.length} bytes, over the limit of ${LIMIT}`,
        fix: expect.stringMatching(/split it into smaller files.*move it out of the specs folder/),
      },
    ]);
    for (const name of ['a', 'b'])
      expect(await wt.git('show', `adventuretime/status:runs/${name}.yaml`)).toMatch(/kind: RunStatus/);
  });

  it('adv plan names the file and the fix', async () => {
    const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') }, wt.dir);
    const code = await runCli(['plan', '--base', 'main', '--head', 'HEAD'], io);
    expect(code).toBe(1);
    expect(io.out()).toContain(
      `${BIG_FILE}:1:1: file is ${BIG.length} bytes, over the limit of ${LIMIT} (fix: split it into smaller files`,
    );
    expect(io.out()).toContain('move it out of the specs folder');
  });
});
