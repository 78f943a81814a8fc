/**
 * The git port's two readers and the commit writers, measured on the same repo in the same run
 * (issue 3 asks that the choice stay measured): 10,000 small Run specs in one pack.
 *   - read every blob: NativeGit (`cat-file --batch`) vs IsoGit (isomorphic-git with `cache`)
 *     and isomorphic-git without a cache (on 1,000 blobs: it is that slow);
 *   - list the tree: both readers;
 *   - build a commit of 1 and of 1,000 files: `git fast-import` (what the controller uses) vs
 *     isomorphic-git writeBlob/writeTree/writeCommit;
 *   - push one commit over smart HTTP onto a 5,000-commit history: git CLI vs isomorphic-git.
 */
import * as fs from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as isogit from 'isomorphic-git';
import http from 'isomorphic-git/http/node';
import { IsoGit } from '../controller/git/iso.js';
import { git, NativeGit } from '../controller/git/native.js';
import { TreeListingCache } from '../controller/git/tree-source.js';
import { startGitHttp } from '../test/helpers/git/git-http.js';
import { runYaml } from './gen-repo.js';
import { fastImport, statusHistory } from './git-fixtures.js';
import { median, table } from './lib.js';

const N = Number(process.env.BENCH_RUNS ?? 10_000);
const time = async (fn: () => Promise<unknown>, reps = 3): Promise<number> => {
  const xs: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    await fn();
    xs.push(performance.now() - t);
  }
  return median(xs);
};

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'adv-bench-git-'));
  const server = await startGitHttp();
  try {
    const gitdir = join(dir, 'repo.git');
    await git(['init', '--quiet', '--bare', '-b', 'main', gitdir]);
    const files: Record<string, string> = {};
    for (let i = 0; i < N; i++) files[`runs/sweep-${i}.yaml`] = runYaml(i);
    await fastImport(gitdir, [{ branch: 'main', message: 'runs', files }]);
    const head = (await git(['rev-parse', 'main'], { gitdir })).toString().trim();
    const native = new NativeGit(gitdir);
    const iso = new IsoGit(gitdir);
    const tree = (await native.readCommit(head)).tree;
    const oids = (await new TreeListingCache(native).list(tree)).map((f) => f.oid);

    const rows: (string | number)[][] = [];
    const nRead = await time(() => native.readBlobs(oids));
    const iRead = await time(() => iso.readBlobs(oids), 1);
    const noCache = await time(async () => {
      for (const oid of oids.slice(0, 1000)) await isogit.readBlob({ fs, gitdir, oid });
    }, 1);
    rows.push([`read ${N} blobs`, nRead, iRead, iRead / nRead]);
    rows.push(['read 1,000 blobs, isomorphic-git without cache', '', noCache, '']);
    const nList = await time(() => new TreeListingCache(native).list(tree));
    const iList = await time(() => new TreeListingCache(iso).list(tree));
    rows.push([`list a tree of ${N} files`, nList, iList, iList / nList]);

    const author = { name: 'b', email: 'b@example.com' };
    for (const count of [1, 1000]) {
      const changes = new Map<string, Uint8Array>();
      for (let i = 0; i < count; i++)
        changes.set(`runs/w-${i}.yaml`, new TextEncoder().encode(`status ${i} ${Math.random()}\n`));
      const fast = await time(() =>
        native.commitFiles({ parent: head, files: changes, message: 'm', author }),
      );
      const isoWrite = await time(async () => {
        const entries = [];
        for (const [path, content] of changes)
          entries.push({
            mode: '100644',
            path: path.slice(5),
            oid: await isogit.writeBlob({ fs, gitdir, blob: content }),
            type: 'blob' as const,
          });
        const sub = await isogit.writeTree({ fs, gitdir, tree: entries });
        const root = await isogit.writeTree({
          fs,
          gitdir,
          tree: [{ mode: '040000', path: 'runs', oid: sub, type: 'tree' }],
        });
        const who = { ...author, timestamp: 1, timezoneOffset: 0 };
        await isogit.writeCommit({
          fs,
          gitdir,
          commit: { tree: root, parent: [head], author: who, committer: who, message: 'm' },
        });
      });
      rows.push([
        `build a commit of ${count} file${count === 1 ? '' : 's'} (fast-import | isomorphic-git)`,
        fast,
        isoWrite,
        isoWrite / fast,
      ]);
    }

    // Push one commit onto a 5,000-commit history over smart HTTP.
    const remote = await server.createRepo('push');
    await fastImport(remote, statusHistory(5000, 'main'));
    const clone = join(dir, 'clone.git');
    await git(['clone', '--quiet', '--bare', server.url('push'), clone]);
    const local = new NativeGit(clone);
    let parent = (await git(['rev-parse', 'main'], { gitdir: clone })).toString().trim();
    const pushNative = await time(async () => {
      parent = await local.commitFiles({
        parent,
        files: new Map([['x', new TextEncoder().encode(String(Math.random()))]]),
        message: 'p',
        author,
      });
      if ((await local.push('origin', parent, 'refs/heads/main')) !== 'ok') throw new Error('push failed');
    });
    const pushIso = await time(async () => {
      parent = await local.commitFiles({
        parent,
        files: new Map([['x', new TextEncoder().encode(String(Math.random()))]]),
        message: 'p',
        author,
      });
      await git(['update-ref', 'refs/heads/main', parent], { gitdir: clone });
      await isogit.push({ fs, http, gitdir: clone, url: server.url('push'), ref: 'main', remoteRef: 'main' });
    });
    rows.push([
      'push one commit onto 5,000 commits over smart HTTP (git CLI | isomorphic-git)',
      pushNative,
      pushIso,
      pushIso / pushNative,
    ]);
    await native.close();
    await iso.close();
    await local.close();

    console.log(
      `\n### Git port: native (git CLI) against isomorphic-git, same repo, same run (medians, ms)\n`,
    );
    console.log(table(['operation', 'native ms', 'isomorphic-git ms', 'isomorphic / native'], rows));
  } finally {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
