/**
 * Multi-host checkpoints (issue 28). Two figures, each against its baseline measured in the same
 * run, with the real `adv exec` (the bundled dist/adv-exec.mjs) as processes:
 *
 * 1. Commit of a 2 GiB step from a shared dir (16 files of 128 MiB, as Orbax's OCDBT data files
 *    are several large files): 2 processes, each uploading the files whose sha256(path) mod 2 is
 *    its id, against 1 process uploading all of it. Timed from the rename that finishes the step to
 *    the manifest in the store.
 * 2. The restore barrier: from starting the processes to the last workload's start, restoring that
 *    step — 2 processes in a shared dir (process 0 restores, process 1 waits for its record) and 2
 *    processes with a dir each (both download the whole step) — against 1 process restoring it.
 *
 * Stores: file:// on this machine's disk, and S3 (s3rver on loopback). BENCH_GANG_MIB sets the size.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { openStore, type ObjectStore } from '../runtime/store/index.js';
import { startS3 } from '../test/helpers/servers/s3.js';
import { table, writeRandom } from './lib.js';

const BUNDLE = fileURLToPath(new URL('../dist/adv-exec.mjs', import.meta.url));
const MiB = 2 ** 20;
const TOTAL = Number(process.env.BENCH_GANG_MIB ?? 2048) * MiB;
const FILES = 16;
const STEP = 20;

interface Proc {
  child: ChildProcess;
  done: Promise<number | null>;
  out: () => string;
}

function advExec(args: string[], env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, [BUNDLE, ...args], {
    // A gang needs a coordinator address; these workloads are shell, nothing listens or dials it.
    env: { ...process.env, ADV_COORDINATOR_ADDRESS: '127.0.0.1:1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const done = new Promise<number | null>((r) => child.on('close', r));
  return { child, done, out: () => out };
}

/** Polls (20 ms) until `check` holds; fails with the processes' output after `ms`. */
async function until(
  what: string,
  check: () => Promise<boolean>,
  procs: Proc[],
  ms = Number(process.env.BENCH_GANG_WAIT_MS ?? 1_800_000),
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (procs.some((p) => p.child.exitCode !== null))
      throw new Error(
        `an adv exec ended while waiting for ${what}:\n${procs.map((p) => p.out()).join('\n---\n')}`,
      );
    if (Date.now() > end)
      throw new Error(`timed out waiting for ${what}:\n${procs.map((p) => p.out()).join('\n---\n')}`);
    await sleep(20);
  }
}

async function stopAll(procs: Proc[]): Promise<void> {
  for (const p of procs) p.child.kill('SIGTERM');
  await Promise.all(procs.map((p) => p.done));
}

interface Round {
  dir: string;
  url: string;
  store: ObjectStore;
  env: NodeJS.ProcessEnv;
}

/** Starts `n` adv execs of run `run`; `work(k)` is process k's workload (sh -c). */
function gang(
  r: Round,
  run: string,
  n: number,
  mode: string,
  work: (k: number) => string,
  attempt = 1,
): Proc[] {
  return Array.from({ length: n }, (_, k) =>
    advExec(
      [
        '--store',
        r.url,
        '--run',
        run,
        '--attempt',
        String(attempt),
        '--process',
        String(k),
        '--processes',
        String(n),
        '--ckpt-mode',
        mode,
        ...(mode === 'shared' ? ['--ckpt-dir', join(r.dir, `${run}-a${attempt}-shared`)] : []),
        '--job-dir',
        join(r.dir, `${run}-a${attempt}-job${k}`),
        '--grace',
        '600',
        '--',
        'sh',
        '-c',
        work(k),
      ],
      r.env,
    ),
  );
}

/** Seconds from the step's rename to its manifest, committed by `n` processes from a shared dir. */
async function commit(r: Round, src: string, run: string, n: number): Promise<number> {
  const staged = join(r.dir, `${run}-staged`);
  execFileSync('cp', ['-al', src, staged]); // hard links: the same bytes, no copy
  const mark = join(r.dir, `${run}-renamed`);
  const procs = gang(r, run, n, 'shared', (k) =>
    k === 0
      ? `mv ${staged} "$ADV_CKPT_DIR/${STEP}" && date +%s%3N > ${mark}; exec sleep 3600`
      : 'exec sleep 3600',
  );
  try {
    await until('the step renamed', async () => existsSync(mark), procs);
    const renamed = Number(await readFile(mark, 'utf8'));
    await until(
      'the manifest',
      async () => (await r.store.head(`runs/${run}/ckpt/${STEP}/manifest.json`)) !== undefined,
      procs,
    );
    return (Date.now() - renamed) / 1000;
  } finally {
    await stopAll(procs);
  }
}

/** Seconds from starting `n` processes of attempt 2 to the last one's workload start. */
async function restore(r: Round, run: string, n: number, mode: string, attempt: number): Promise<number> {
  const marks = Array.from({ length: n }, (_, k) => join(r.dir, `${run}-${mode}-${n}-started-${k}`));
  const t0 = Date.now();
  const procs = gang(
    r,
    run,
    n,
    mode,
    (k) => `date +%s%3N > ${marks[k]}; test -d "$ADV_CKPT_DIR/${STEP}"`,
    attempt,
  );
  try {
    const codes = await Promise.all(procs.map((p) => p.done));
    if (codes.some((c) => c !== 0))
      throw new Error(
        `a restore failed (${codes.join(', ')}):\n${procs.map((p) => p.out()).join('\n---\n')}`,
      );
    const starts = await Promise.all(marks.map(async (m) => Number(await readFile(m, 'utf8'))));
    return (Math.max(...starts) - t0) / 1000;
  } finally {
    await stopAll(procs);
  }
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'adv-bench-gang-'));
  const s3 = await startS3('gang');
  Object.assign(process.env, s3.env); // the SDK's default credential chain reads them here
  try {
    const src = join(dir, 'src');
    await mkdir(src);
    for (let i = 0; i < FILES; i++) await writeRandom(join(src, `d-${i}.bin`), TOTAL / FILES);
    const commitRows: (string | number)[][] = [];
    const restoreRows: (string | number)[][] = [];
    const gib = (TOTAL / 2 ** 30).toFixed(1);
    for (const kind of ['file', 's3'] as const) {
      const round = join(dir, kind);
      await mkdir(round);
      const url = kind === 'file' ? `file://${join(round, 'store')}` : s3.url(`gang-${kind}`);
      const env = kind === 's3' ? s3.env : {};
      const r: Round = { dir: round, url, store: await openStore(url, { ...process.env, ...env }), env };
      // One process first, then two; each run has its own prefix.
      const one = await commit(r, src, 'one', 1);
      const two = await commit(r, src, 'two', 2);
      commitRows.push([`${kind}://, ${gib} GiB in ${FILES} files`, one, two, one / two]);
      // Each a new attempt of the run, as a resume is.
      const single = await restore(r, 'two', 1, 'per-process', 2);
      const shared = await restore(r, 'two', 2, 'shared', 3);
      const perProcess = await restore(r, 'two', 2, 'per-process', 4);
      restoreRows.push([`${kind}://`, single, shared, shared / single, perProcess, perProcess / single]);
      await rm(round, { recursive: true, force: true });
    }
    console.log(table(['store, step', '1 process (s)', '2 processes (s)', 'speed-up ×'], commitRows));
    console.log();
    console.log(
      table(
        ['store', '1 process (s)', '2, shared dir (s)', '× of 1', '2, a dir each (s)', '× of 1'],
        restoreRows,
      ),
    );
  } finally {
    await s3.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
