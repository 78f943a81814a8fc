/**
 * A 50 MB file in a specs repo (issue 13, item 5): the time to the controller's first pass
 * (create + init + pass, empty data dir) and of `adv plan`, on a small specs repo with a 50 MB
 * `.yaml` file added, against the same repo without it (the baseline, measured in the same run).
 *
 * The file is over the spec size limit (1 MiB), so it can only ever be a `FileTooLarge`
 * diagnostic; the controller and `adv plan` should cost about what they cost without it.
 * The runs are suspended, so nothing is executed.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { git, NativeGit, runGit } from '../controller/git/native.js';
import { SLURM_BACKENDS as BACKENDS, suspendedRunYaml as suspended } from './gen-repo.js';
import { fastImport } from './git-fixtures.js';
import { median, PASSES_ONLY, table } from './lib.js';

const N = Number(process.env.BENCH_RUNS ?? 100);
const BLOB_MB = Number(process.env.BENCH_BLOB_MB ?? 50);
const REPS = Number(process.env.BENCH_REPS ?? 3);
const ID = ['-c', 'user.name=Bench', '-c', 'user.email=bench@example.com'];

/** A YAML data dump of about `mb` MiB (what ends up committed next to the specs by mistake). */
function bigYaml(mb: number): string {
  const row = '- [0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.125, 1.25, 1.375, 1.5]\n';
  return 'samples:\n' + row.repeat(Math.ceil((mb * 2 ** 20) / row.length));
}

/** A specs repo on `main` (N runs, two backends, maybe the big file) and `feature` editing one run. */
async function makeRepo(dir: string, big: boolean): Promise<string> {
  const repo = join(dir, big ? 'with-blob' : 'plain');
  await git(['init', '--quiet', '-b', 'main', repo]);
  const gitdir = join(repo, '.git');
  const files: Record<string, string> = { 'backends/slurm.yaml': BACKENDS };
  for (let i = 0; i < N; i++) files[`runs/sweep-${i}.yaml`] = suspended(i);
  if (big) files['data/samples.yaml'] = bigYaml(BLOB_MB);
  await fastImport(gitdir, [{ branch: 'main', message: `${N} runs`, files }]);
  await git(['reset', '--quiet', '--hard'], { cwd: repo });
  await git(['checkout', '--quiet', '-b', 'feature'], { cwd: repo });
  await writeFile(
    join(repo, 'runs/sweep-7.yaml'),
    suspended(7).replace('WANDB_PROJECT: sweep', 'WANDB_PROJECT: edited'),
  );
  await git([...ID, 'commit', '--quiet', '-am', 'edit one run'], { cwd: repo });
  await git(['checkout', '--quiet', 'main'], { cwd: repo });
  return repo;
}

/** Create + init + first pass on an empty data dir. */
async function firstPass(repo: string, dataDir: string): Promise<number> {
  await rm(dataDir, { recursive: true, force: true });
  const t0 = performance.now();
  const c = await Controller.create({
    repo,
    dataDir,
    ...PASSES_ONLY,
  });
  await c.init();
  await c.pass();
  const ms = performance.now() - t0;
  await c.stop();
  return ms;
}

/** `adv plan --base main --head feature` in-process, output discarded; its wall time and exit code. */
async function plan(repo: string, home: string): Promise<{ ms: number; code: number }> {
  const sink = () => new Writable({ write: (_c, _e, cb) => cb() });
  const io = {
    stdout: sink(),
    stderr: sink(),
    env: { ...process.env, HOME: home, XDG_CACHE_HOME: join(home, 'cache') },
    cwd: repo,
  };
  const t0 = performance.now();
  const code = await runCli(
    ['plan', '--base', 'main', '--head', 'feature', '--repo', repo, '-o', 'json'],
    io,
  );
  return { ms: performance.now() - t0, code };
}

/** The reader alone: the 50 MiB blob through `NativeGit.readBlobs`, and `git cat-file blob` (the floor). */
async function readBlob(repo: string): Promise<{ port: number; floor: number }> {
  const gitdir = join(repo, '.git');
  const oid = (await git(['rev-parse', 'main:data/samples.yaml'], { gitdir })).toString().trim();
  let t = performance.now();
  const r = await runGit(['cat-file', 'blob', oid], { gitdir });
  const floor = performance.now() - t;
  const port = new NativeGit(gitdir);
  try {
    t = performance.now();
    const [body] = await port.readBlobs([oid]);
    const ms = performance.now() - t;
    if (Buffer.compare(body!, r.stdout) !== 0) throw new Error('NativeGit read the blob wrong');
    return { port: ms, floor };
  } finally {
    await port.close();
  }
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'adv-bench-blob-'));
  try {
    const plain = await makeRepo(dir, false);
    const withBlob = await makeRepo(dir, true);
    const pass = { plain: [] as number[], blob: [] as number[] };
    const planMs = { plain: [] as number[], blob: [] as number[] };
    const codes = { plain: new Set<number>(), blob: new Set<number>() };
    const reads = { port: [] as number[], floor: [] as number[] };
    // Warm-up (module loading, JIT), not counted.
    await firstPass(plain, join(dir, 'data-warm'));
    await plan(plain, join(dir, 'home-warm'));
    // Interleaved, so a change in the machine's load hits both sides alike.
    for (let r = 0; r < REPS; r++) {
      pass.plain.push(await firstPass(plain, join(dir, `data-plain-${r}`)));
      pass.blob.push(await firstPass(withBlob, join(dir, `data-blob-${r}`)));
      const p = await plan(plain, join(dir, `home-plain-${r}`));
      planMs.plain.push(p.ms);
      codes.plain.add(p.code);
      const q = await plan(withBlob, join(dir, `home-blob-${r}`));
      planMs.blob.push(q.ms);
      codes.blob.add(q.code);
      const b = await readBlob(withBlob);
      reads.port.push(b.port);
      reads.floor.push(b.floor);
    }
    const row = (what: string, base: number[], blob: number[]): (string | number)[] => [
      what,
      median(base),
      median(blob),
      median(blob) / median(base),
    ];
    console.log(
      `\n### ${N} runs, with and without a ${BLOB_MB} MiB .yaml file (medians of ${REPS}; baseline in the same run)\n`,
    );
    console.log(
      table(
        ['what', 'without (ms)', `with the ${BLOB_MB} MiB file (ms)`, 'ratio'],
        [
          row('controller: create + init + first pass (empty data dir)', pass.plain, pass.blob),
          row('`adv plan --base main --head feature` (in-process)', planMs.plain, planMs.blob),
        ],
      ),
    );
    console.log(`\n### Reading the ${BLOB_MB} MiB blob itself (what a reader without sizes still does)\n`);
    console.log(
      table(
        ['what', 'ms', 'ratio'],
        [
          ['floor: `git cat-file blob` into one buffer', median(reads.floor), 1],
          [
            '`NativeGit.readBlobs` (cat-file --batch)',
            median(reads.port),
            median(reads.port) / median(reads.floor),
          ],
        ],
      ),
    );
    console.log(
      `\nadv plan exit codes: without ${[...codes.plain].join(',')}, with ${[...codes.blob].join(',')} (1: HEAD has an invalid spec file, the big one)`,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
