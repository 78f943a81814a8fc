/**
 * Controller at scale (issue 3): a specs repo of 10,000 Run specs in one pack.
 *
 * - cold start: create + init + load the desired state with an empty data dir, against
 *   `git ls-tree -r` + `git cat-file --batch` + `yaml.parse` of the same blobs (the floor);
 * - warm restart: the same with the persisted parse cache;
 * - status write-back of 10,000 runs in one pass (one commit);
 * - a warm resync with nothing changed; one changed file among 10,000; RSS.
 *
 * The runs are suspended, so nothing is executed: this measures the controller, not the jobs.
 */
import { spawn } from 'node:child_process';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { Controller } from '../controller/controller.js';
import { git } from '../controller/git/native.js';
import { commitEdit } from './edit-commit.js';
import { SLURM_BACKENDS as BACKENDS, suspendedRunYaml as suspended } from './gen-repo.js';
import { fastImport } from './git-fixtures.js';
import { isolated, median, PASSES_ONLY, table } from './lib.js';

const N = Number(process.env.BENCH_RUNS ?? 10_000);

async function baseline(gitdir: string): Promise<{ ms: number; docs: number }> {
  const t0 = performance.now();
  const list = (await git(['ls-tree', '-r', '-z', 'main'], { gitdir }))
    .toString()
    .split('\0')
    .filter(Boolean);
  const oids = list.map((l) => l.split(/\s+/)[2]!);
  const out = await new Promise<Buffer>((res, rej) => {
    const p = spawn('git', ['cat-file', '--batch'], { env: { ...process.env, GIT_DIR: gitdir } });
    const chunks: Buffer[] = [];
    p.stdout.on('data', (b: Buffer) => chunks.push(b));
    p.on('close', () => res(Buffer.concat(chunks)));
    p.on('error', rej);
    p.stdin.end(oids.join('\n') + '\n');
  });
  let docs = 0;
  let i = 0;
  while (i < out.length) {
    const nl = out.indexOf(0x0a, i);
    const size = Number(out.subarray(i, nl).toString().split(' ')[2]);
    for (const d of [parseAllDocuments(out.subarray(nl + 1, nl + 1 + size).toString('utf8'))].flat())
      if (d.toJS()) docs++;
    i = nl + 1 + size + 1;
  }
  return { ms: performance.now() - t0, docs };
}

/** In a fresh process: a controller with the repo loaded and a first pass done; its RSS. */
/** A fresh copy of a data dir (its caches and controller id), beside it. */
async function copyOf(dataDir: string): Promise<string> {
  const copy = `${dataDir}-copy`;
  await rm(copy, { recursive: true, force: true });
  await cp(dataDir, copy, { recursive: true });
  return copy;
}

async function memory(repo: string, dataDir: string): Promise<void> {
  const c = await Controller.create({ repo, dataDir, resyncIntervalMs: 3_600_000 });
  await c.init();
  await c.pass();
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc) for (let i = 0; i < 3; i++) gc();
  const m = process.memoryUsage();
  console.log(
    JSON.stringify({
      ms: 0,
      maxRssMiB: process.resourceUsage().maxRSS / 1024,
      rssMiB: m.rss / 2 ** 20,
      heapMiB: m.heapUsed / 2 ** 20,
    }),
  );
  await c.stop();
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--memory') return memory(args[1]!, args[2]!);
  const dir = await mkdtemp(join(tmpdir(), 'adv-bench-scale-'));
  try {
    const repo = join(dir, 'specs');
    await git(['init', '--quiet', '-b', 'main', repo]);
    const gitdir = join(repo, '.git');
    const files: Record<string, string> = { 'backends/slurm.yaml': BACKENDS };
    for (let i = 0; i < N; i++) files[`runs/sweep-${i}.yaml`] = suspended(i);
    await fastImport(gitdir, [{ branch: 'main', message: `${N} runs`, files }]);
    await git(['reset', '--quiet', '--hard'], { cwd: repo });
    // Memory first, in its own process, on a fresh data dir.
    await git(['clone', '--quiet', repo, join(dir, 'mem-repo')]);
    const mem = isolated(
      './controller-scale.ts',
      ['--memory', join(dir, 'mem-repo'), join(dir, 'mem-data')],
      ['--expose-gc'],
    );

    const base = [];
    for (let r = 0; r < 3; r++) base.push((await baseline(gitdir)).ms);

    const dataDir = join(dir, 'data');
    const cold: number[] = [];
    let c: Controller | undefined;
    for (let r = 0; r < 3; r++) {
      await rm(dataDir, { recursive: true, force: true });
      const t0 = performance.now();
      c = await Controller.create({
        repo,
        dataDir,
        ...PASSES_ONLY,
      });
      await c.init();
      await c.syncDesired();
      cold.push(performance.now() - t0);
      if (r < 2) await c.stop();
    }
    const warm: number[] = [];
    for (let r = 0; r < 3; r++) {
      // A copy of the data dir: the running controller holds the original's lock.
      const copy = await copyOf(dataDir);
      const t0 = performance.now();
      const w = await Controller.create({ repo, dataDir: copy, resyncIntervalMs: 3_600_000 });
      await w.init();
      await w.syncDesired();
      warm.push(performance.now() - t0);
      await w.stop();
    }
    // First pass: every run gets a status file (Cancelled: suspended) — one commit.
    const t1 = performance.now();
    const first = await c!.pass();
    const writeBack = performance.now() - t1;
    console.log(
      'first pass steps (ms):',
      JSON.stringify(first.ms, (_k, v: unknown) => (typeof v === 'number' ? Math.round(v) : v)),
    );

    // Warm resync: every key planned again, nothing changed, nothing written.
    const resync: number[] = [];
    for (let r = 0; r < 5; r++) {
      (c as unknown as { nextResyncAt: number }).nextResyncAt = 0;
      const t = performance.now();
      const s = await c!.pass();
      resync.push(performance.now() - t);
      if (s.commits !== 0) throw new Error('a resync with nothing changed wrote a commit');
    }

    // A restart with N status files on the branch: with the persisted caches, and without.
    const restart = async (dropCaches: boolean) => {
      const copy = await copyOf(dataDir);
      if (dropCaches)
        for (const f of ['spec-cache.json', 'status-cache.json']) await rm(join(copy, f), { force: true });
      const t = performance.now();
      const r = await Controller.create({ repo, dataDir: copy, resyncIntervalMs: 3_600_000 });
      await r.init();
      await r.syncDesired();
      const ms = performance.now() - t;
      await r.stop();
      return ms;
    };
    await c!.saveStatusCache();
    const restartWarm = await restart(false);
    const restartCold = await restart(true);

    // One changed file among N: commit it, then one pass (load + plan + write).
    const oneFile: number[] = [];
    for (let r = 0; r < 5; r++) {
      // A child of main's tip with this one file changed and the other N files kept.
      await commitEdit(gitdir, 'main', `edit ${r}`, {
        'runs/sweep-7.yaml': suspended(7).replace('WANDB_PROJECT: sweep', `WANDB_PROJECT: edit-${r}`),
      });
      const t = performance.now();
      const s = await c!.pass();
      oneFile.push(performance.now() - t);
      if (!s.loadedSpecs) throw new Error('the change was not seen');
      // Every run is still desired: the edit changed one file, it did not drop the others.
      const runs = (c as unknown as { desired?: { runs?: Map<string, unknown> } }).desired?.runs;
      if (runs && runs.size !== N) throw new Error(`after the edit ${runs.size} runs are desired, not ${N}`);
    }
    await c!.stop();

    const b = median(base);
    console.log(`\n### Controller at ${N} runs (one pack; medians; baseline measured in the same run)\n`);
    console.log(
      table(
        ['what', 'ms', 'ratio', 'target'],
        [
          ['floor: ls-tree + cat-file --batch + yaml.parse', b, 1, ''],
          [
            'cold start: create + init + load desired (empty data dir)',
            median(cold),
            median(cold) / b,
            '≤ 1.5×',
          ],
          ['warm restart: same, with the persisted parse cache', median(warm), median(warm) / b, ''],
          [
            `first pass: ${N} status files in one commit (${first.commits} commit)`,
            writeBack,
            writeBack / b,
            '',
          ],
          [`restart with ${N} status files, persisted caches`, restartWarm, restartWarm / b, ''],
          [`restart with ${N} status files, no caches`, restartCold, restartCold / b, ''],
          [
            'warm resync, nothing changed (plan every run, write nothing)',
            median(resync),
            median(resync) / b,
            '< 500 ms',
          ],

          ['one changed file among them: a full pass', median(oneFile), median(oneFile) / b, '< 50 ms'],
        ],
      ),
    );
    console.log(
      `\nA controller process with ${N} runs loaded, their status written and in memory: RSS ${mem.rssMiB!.toFixed(0)} MiB after GC (JS heap ${mem.heapMiB!.toFixed(0)} MiB; peak RSS ${mem.maxRssMiB.toFixed(0)} MiB). Target < 300 MiB.`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
