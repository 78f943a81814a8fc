/**
 * Multi-host checkpoints through real `adv exec` processes (the bundled single file, one per
 * process, as backends launch it) over a `file://` store: the gang commit, the restore barrier,
 * the distributed env contract and the one stop signal. The workload is stdlib Python that the
 * test drives through a control dir (`ckpt-<step>` files: write that step; `stop`: exit), so
 * nothing here depends on timing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { bundleExec } from '../runtime/bundle.js';
import { stepPrefix, uploadCheckpoint, type CheckpointManifest } from '../runtime/checkpoint.js';
import { partKey, type CheckpointPart } from '../runtime/gang.js';
import type { Heartbeat } from '../runtime/heartbeat.js';
import { openStore, type ObjectStore } from '../runtime/store/index.js';
import { S3Store } from '../runtime/store/s3.js';
import { removeTree } from './helpers/io.js';
import { startS3 } from './helpers/servers/s3.js';
import { waitFor } from './helpers/wait.js';

/** One step of these tests (start two adv execs and their workloads, restore, commit) on a busy machine. */
const STEP_MS = 60_000;
const COORDINATOR = '127.0.0.1:29400';

/**
 * Rank R of the test's gang. It reports what it finds in ADV_CKPT_DIR when it starts (with its
 * distributed env), then writes step S when `ckpt-S` appears in $CTRL: `rank-R.bin` and
 * `common.bin` (the same bytes from every rank unless LAYOUT=conflict). Per-process dirs: each
 * rank writes its own `S.tmp` and renames it. SHARED=1: all write into one `S.tmp`, rank 0
 * renames it once every rank's file is there (Orbax's pattern). COMMIT_FILE=1: all write into
 * `S/` in place and rank 0 writes `commit_success.txt` last (Orbax on an object store).
 */
const RANK_PY = String.raw`
import json, os, sys, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
ckpt, ctrl = os.environ["ADV_CKPT_DIR"], os.environ["CTRL"]
conflict, shared, commit_file = os.environ.get("LAYOUT") == "conflict", os.environ.get("SHARED") == "1", os.environ.get("COMMIT_FILE") == "1"
steps = sorted(int(n) for n in os.listdir(ckpt) if n.isdigit())
latest = steps[-1] if steps else None
files = {}
if latest is not None:
    root = os.path.join(ckpt, str(latest))
    for r, _, fs in os.walk(root):
        for f in fs:
            with open(os.path.join(r, f)) as fh: files[os.path.relpath(os.path.join(r, f), root)] = fh.read()
names = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES",
         "JAX_PROCESS_ID", "JAX_LOCAL_DEVICE_IDS", "MASTER_ADDR", "MASTER_PORT", "ADV_CKPT_DIR", "ADV_CKPT_URI"]
report = {"rank": rank, "latest": latest, "files": files, "env": {k: os.environ.get(k) for k in names}}
with open(os.path.join(ctrl, ".report-%d" % rank), "w") as fh: json.dump(report, fh)
os.rename(os.path.join(ctrl, ".report-%d" % rank), os.path.join(ctrl, "report-%d.json" % rank))
print("rank %d starts at step %s" % (rank, latest), flush=True)

def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".w", "w") as fh: fh.write(text)
    os.rename(path + ".w", path)

def checkpoint(step):
    d = os.path.join(ckpt, str(step) if commit_file else "%d.tmp" % step)
    write(os.path.join(d, "rank-%d.bin" % rank), "step %d rank %d\n" % (step, rank) * 100)
    common = "common %d%s\n" % (step, " from %d" % rank if conflict else "")
    if not (shared or commit_file): return write(os.path.join(d, "common.bin"), common) or os.rename(d, os.path.join(ckpt, str(step)))
    if rank != 0: return
    while not all(os.path.exists(os.path.join(d, "rank-%d.bin" % k)) for k in range(world)): time.sleep(0.02)
    write(os.path.join(d, "common.bin"), common)
    if commit_file: write(os.path.join(d, "commit_success.txt"), "done\n")
    else: os.rename(d, os.path.join(ckpt, str(step)))

done = set()
while True:
    for name in sorted(os.listdir(ctrl)):
        if name.startswith("ckpt-") and name not in done:
            done.add(name)
            checkpoint(int(name[5:]))
            print("rank %d wrote step %s" % (rank, name[5:]), flush=True)
    if os.path.exists(os.path.join(ctrl, "stop")):
        print("rank %d stops" % rank, flush=True)
        sys.exit(0)
    time.sleep(0.02)
`;

let tmp: string;
let bundle: string;
let rankPy: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-multihost-'));
  const bare = join(tmp, 'worker');
  await mkdir(bare);
  bundle = join(bare, 'adv-exec.mjs');
  await bundleExec(bundle);
  rankPy = join(tmp, 'rank.py');
  await writeFile(rankPy, RANK_PY);
}, 120_000);
afterAll(() => removeTree(tmp));

/** adv exec processes still running when a test ends (it failed half-way): each goes, with its workload. */
const running = new Set<Exec>();
afterEach(async () => {
  for (const r of running) {
    r.child.kill('SIGKILL');
    await r.done;
    killWorkload(r.job);
  }
  running.clear();
});

interface Exec {
  child: ChildProcess;
  job: string;
  done: Promise<number | null>;
  out: () => string;
  gone: () => string | false;
}

/** Starts the bundled adv exec. */
function advExec(args: string[], job: string, env: NodeJS.ProcessEnv = {}): Exec {
  const child = spawn(process.execPath, [bundle, '--job-dir', job, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let exited = false;
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const e: Exec = {
    child,
    job,
    done: new Promise((r) =>
      child.on('close', (code) => {
        exited = true;
        running.delete(e);
        r(code);
      }),
    ),
    out: () => out,
    gone: () => exited && `adv exec exited early:\n${out}`,
  };
  running.add(e);
  return e;
}

/** Kills the workload's process group (as a lost host would) once adv exec can no longer write its pid. */
function killWorkload(job: string): void {
  if (!existsSync(join(job, 'exec.json'))) return;
  const { childPid } = JSON.parse(readFileSync(join(job, 'exec.json'), 'utf8')) as { childPid: number };
  try {
    process.kill(-childPid, 'SIGKILL');
  } catch {
    // already gone
  }
}

interface Report {
  rank: number;
  latest: number | null;
  files: Record<string, string>;
  env: Record<string, string | null>;
}

/** One attempt of a test's gang: its processes, their control dir and job dirs. */
class Attempt {
  readonly ctrl: string;
  readonly procs = new Map<number, Exec>();
  readonly root: string;

  constructor(
    readonly t: { store: ObjectStore; url: string; run: string; name: string },
    readonly n: number,
    readonly attempt: number,
    readonly mode: 'per-process' | 'shared' | 'store',
    readonly env: NodeJS.ProcessEnv = {},
  ) {
    this.root = join(tmp, t.name, `a${attempt}`);
    this.ctrl = join(this.root, 'ctrl');
  }

  job(k: number): string {
    return join(this.root, `p${k}`);
  }

  async start(
    ks: number[] = [...Array(this.n).keys()],
    o: { args?: string[]; env?: NodeJS.ProcessEnv; argv?: string[] } = {},
  ): Promise<void> {
    await mkdir(this.ctrl, { recursive: true });
    for (const k of ks) {
      const args = [
        '--store',
        this.t.url,
        '--run',
        this.t.run,
        '--attempt',
        String(this.attempt),
        '--process',
        String(k),
        '--processes',
        String(this.n),
        '--ckpt-mode',
        this.mode,
        ...(this.mode === 'shared' ? ['--ckpt-dir', join(this.root, 'shared')] : []),
        ...(o.args ?? []),
        '--',
        ...(o.argv ?? ['python3', rankPy]),
      ];
      this.procs.set(
        k,
        advExec(args, this.job(k), {
          ADV_COORDINATOR_ADDRESS: COORDINATOR,
          CTRL: this.ctrl,
          ...(this.mode === 'shared' ? { SHARED: '1' } : {}),
          ...(this.mode === 'store' ? { COMMIT_FILE: '1' } : {}),
          ...this.env,
          ...o.env,
        }),
      );
    }
  }

  /** Every started process's output, for failure messages. */
  out(): string {
    return [...this.procs].map(([k, e]) => `--- process ${k}:\n${e.out().slice(-3000)}`).join('\n');
  }

  private gone = () => [...this.procs.values()].map((e) => e.gone()).find(Boolean) ?? false;

  async until<T>(what: string, condition: () => Promise<T> | T): Promise<NonNullable<T>> {
    return waitFor(condition, {
      what,
      timeoutMs: STEP_MS,
      everyMs: 20,
      giveUpIf: this.gone,
      detail: () => this.out(),
    });
  }

  /** What each rank's workload found when it started. */
  async reports(ks: number[] = [...Array(this.n).keys()]): Promise<Report[]> {
    return this.until('every workload to report what it restored', () =>
      ks.every((k) => existsSync(join(this.ctrl, `report-${k}.json`)))
        ? ks.map((k) => JSON.parse(readFileSync(join(this.ctrl, `report-${k}.json`), 'utf8')) as Report)
        : undefined,
    );
  }

  async tell(what: string): Promise<void> {
    await writeFile(join(this.ctrl, what), '');
  }

  /** Tells every workload to stop, and waits for every adv exec to end (saying what each said if one does not). */
  async stop(): Promise<(number | null)[]> {
    await this.tell('stop');
    const ended = Promise.all([...this.procs.values()].map((e) => e.done));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `an adv exec had not ended ${(2 * STEP_MS) / 1000} s after its workload was told to stop:\n${this.out()}`,
            ),
          ),
        2 * STEP_MS,
      );
    });
    try {
      return await Promise.race([ended, late]);
    } finally {
      clearTimeout(timer);
    }
  }
}

async function newStore(name: string) {
  const root = await mkdtemp(join(tmpdir(), 'adv-mh-store-'));
  const url = `file://${root}`;
  return { store: await openStore(url), url, root, run: 'mh', name };
}

async function manifest(
  store: ObjectStore,
  run: string,
  step: number,
): Promise<CheckpointManifest | undefined> {
  const raw = await store.get(`${stepPrefix(run, step)}manifest.json`);
  return raw && (JSON.parse(new TextDecoder().decode(raw)) as CheckpointManifest);
}

async function part(store: ObjectStore, run: string, step: number, attempt: number, k: number) {
  const raw = await store.get(partKey(run, step, attempt, k));
  return raw && (JSON.parse(new TextDecoder().decode(raw)) as CheckpointPart);
}

const rankFile = (step: number, rank: number) => `step ${step} rank ${rank}\n`.repeat(100);
/** The files of step S of a 2-rank gang, as a restore must give them to every rank. */
const unionOf = (step: number) => ({
  'common.bin': `common ${step}\n`,
  'rank-0.bin': rankFile(step, 0),
  'rank-1.bin': rankFile(step, 1),
});

/** Attempt 1 of a 2-process gang commits step 10, and stops. */
async function twoProcessCheckpoint(t: Awaited<ReturnType<typeof newStore>>, mode: 'per-process' | 'shared') {
  const a = new Attempt(t, 2, 1, mode);
  await a.start();
  await a.reports();
  await a.tell('ckpt-10');
  const m = await a.until('step 10 committed', () => manifest(t.store, t.run, 10));
  expect(await a.stop(), a.out()).toEqual([0, 0]);
  return { a, m };
}

describe('a multi-host attempt commits as a gang', () => {
  it(
    'per-process dirs: the manifest lists every process’s files (processes: 2), every rank restores that step into its own dir, and the workload sees one distributed env',
    async () => {
      const t = await newStore('per-process');
      const { a, m } = await twoProcessCheckpoint(t, 'per-process');
      expect(m.processes).toBe(2);
      expect(m.files.map((f) => f.path)).toEqual(['common.bin', 'rank-0.bin', 'rank-1.bin']);
      expect(a.procs.get(0)!.out()).toContain('committed checkpoint 10 (3 files');
      // Each part lists what its process wrote; common.bin, the same bytes from both, once in the manifest.
      expect((await part(t.store, t.run, 10, 1, 1))!.files.map((f) => f.path)).toEqual([
        'common.bin',
        'rank-1.bin',
      ]);
      const b = new Attempt(t, 2, 2, 'per-process');
      await b.start();
      const reports = await b.reports();
      for (const r of reports) expect(r, b.out()).toMatchObject({ latest: 10, files: unionOf(10) });
      expect(reports.map((r) => r.env)).toEqual(
        [0, 1].map((k) => ({
          RANK: String(k),
          WORLD_SIZE: '2',
          LOCAL_RANK: '0',
          LOCAL_WORLD_SIZE: '1',
          JAX_COORDINATOR_ADDRESS: COORDINATOR,
          JAX_NUM_PROCESSES: '2',
          JAX_PROCESS_ID: String(k),
          JAX_LOCAL_DEVICE_IDS: null,
          MASTER_ADDR: '127.0.0.1',
          MASTER_PORT: '29401',
          ADV_CKPT_DIR: join(b.job(k), 'ckpt'),
          ADV_CKPT_URI: null,
        })),
      );
      expect(await b.stop()).toEqual([0, 0]);
    },
    4 * STEP_MS,
  );

  it(
    'shared dir: the processes split the upload, the manifest is the union, and both start from it',
    async () => {
      const t = await newStore('shared');
      const { m } = await twoProcessCheckpoint(t, 'shared');
      expect(m).toMatchObject({ processes: 2 });
      expect(m.files.map((f) => f.path)).toEqual(['common.bin', 'rank-0.bin', 'rank-1.bin']);
      const [p0, p1] = await Promise.all([0, 1].map((k) => part(t.store, t.run, 10, 1, k)));
      const shares = [p0!, p1!].map((p) => p.files.map((f) => f.path));
      // Every file uploaded by exactly one process.
      expect([...shares[0]!, ...shares[1]!].sort()).toEqual(['common.bin', 'rank-0.bin', 'rank-1.bin']);
      const b = new Attempt(t, 2, 2, 'shared');
      await b.start();
      for (const r of await b.reports()) expect(r, b.out()).toMatchObject({ latest: 10, files: unionOf(10) });
      expect(await b.stop()).toEqual([0, 0]);
    },
    4 * STEP_MS,
  );

  it(
    'a path two processes wrote with different contents aborts the step: no manifest, and a line that says why',
    async () => {
      const t = await newStore('conflict');
      const a = new Attempt(t, 2, 1, 'per-process', { LAYOUT: 'conflict' });
      await a.start();
      await a.reports();
      await a.tell('ckpt-10');
      const line =
        'checkpoint 10 aborted: path common.bin written by processes 0 and 1 with different contents';
      await a.until('process 0 to abort step 10', () => a.procs.get(0)!.out().includes(line));
      expect(await a.stop()).toEqual([0, 0]);
      expect(await manifest(t.store, t.run, 10)).toBeUndefined();
    },
    3 * STEP_MS,
  );

  it(
    'SIGKILL of process 1’s adv exec mid-upload leaves that step without a manifest, and the previous step restores on every rank',
    async () => {
      const t = await newStore('sigkill');
      const hold = join(tmp, 'sigkill-hold');
      const a = new Attempt(t, 2, 1, 'per-process');
      // Process 0 waits at most 5 s at its end for parts that will never come.
      await a.start([0], { args: ['--finish-timeout', '5'] });
      // Process 1 holds each part record while \`hold\` exists: its files are in, its part is not.
      await a.start([1], { env: { ADV_EXEC_HOLD_PART: hold } });
      await a.reports();
      await a.tell('ckpt-10');
      await a.until('step 10 committed', () => manifest(t.store, t.run, 10));
      await writeFile(hold, '');
      await a.tell('ckpt-20');
      const [p0, p1] = [a.procs.get(0)!, a.procs.get(1)!];
      await a.until('process 1 to upload its files of step 20 and hold its part', () =>
        p1.out().includes('checkpoint 20: files uploaded; holding the part record'),
      );
      await a.until('process 0’s part of step 20', () => part(t.store, t.run, 20, 1, 0));
      p1.child.kill('SIGKILL');
      await p1.done;
      killWorkload(a.job(1));
      await rm(hold);
      // Killed mid-upload: its files of step 20 are in the store, its part record is not.
      expect(await t.store.head(`${stepPrefix(t.run, 20)}rank-1.bin`)).toBeDefined();
      expect(await part(t.store, t.run, 20, 1, 1)).toBeUndefined();
      await a.tell('stop');
      expect(await p0.done, p0.out()).toBe(0);
      expect(p0.out()).toMatch(
        /checkpoint 20 not committed: no part from process 1 \(attempt 1; gave up after \d+ s\)/,
      );
      expect(await manifest(t.store, t.run, 20)).toBeUndefined();
      const b = new Attempt(t, 2, 2, 'per-process');
      await b.start();
      for (const r of await b.reports()) expect(r, b.out()).toMatchObject({ latest: 10, files: unionOf(10) });
      expect(await b.stop()).toEqual([0, 0]);
    },
    4 * STEP_MS,
  );

  it(
    'a resume with 1 process from a 2-process checkpoint gets the union',
    async () => {
      const t = await newStore('two-to-one');
      await twoProcessCheckpoint(t, 'per-process');
      const b = new Attempt(t, 1, 2, 'per-process');
      await b.start();
      const [r] = await b.reports();
      expect(r, b.out()).toMatchObject({ latest: 10, files: unionOf(10) });
      expect(r!.env).toMatchObject({ RANK: '0', WORLD_SIZE: '1', JAX_PROCESS_ID: null, MASTER_PORT: null });
      expect(await b.stop()).toEqual([0]);
    },
    4 * STEP_MS,
  );
  it(
    'an old single-process checkpoint (its manifest names no processes) restores on every rank',
    async () => {
      const t = await newStore('old-manifest');
      const src = join(tmp, 'old-manifest-src');
      for (const [p, c] of Object.entries(unionOf(10))) {
        await mkdir(src, { recursive: true });
        await writeFile(join(src, p), c);
      }
      const m = await uploadCheckpoint(t.store, { run: t.run, step: 10, attempt: 1, dir: src });
      expect(m.processes).toBeUndefined();
      const b = new Attempt(t, 2, 2, 'per-process');
      await b.start();
      for (const r of await b.reports()) expect(r, b.out()).toMatchObject({ latest: 10, files: unionOf(10) });
      expect(await b.stop()).toEqual([0, 0]);
    },
    3 * STEP_MS,
  );
});

describe('the restore barrier', () => {
  it(
    'process 1 waits for process 0’s choice, saying so in its heartbeat, and its workload never sees an empty dir',
    async () => {
      const t = await newStore('barrier');
      await twoProcessCheckpoint(t, 'per-process');
      const b = new Attempt(t, 2, 2, 'per-process');
      await b.start([1]);
      const hb = await b.until('process 1’s heartbeat while it waits', async () => {
        const raw = await t.store.get('runs/mh/attempts/2/workers/1/heartbeat.json');
        return raw && (JSON.parse(new TextDecoder().decode(raw)) as Heartbeat);
      });
      expect(hb).toMatchObject({ process: 1, processes: 2, waitingForRestore: true });
      // Its workload has not started: nothing reported, no restore record yet.
      expect(existsSync(join(b.ctrl, 'report-1.json'))).toBe(false);
      expect(await t.store.head('runs/mh/attempts/2/restore.json')).toBeUndefined();
      await b.start([0]);
      for (const r of await b.reports()) expect(r, b.out()).toMatchObject({ latest: 10, files: unionOf(10) });
      expect(await b.stop()).toEqual([0, 0]);
      const after = JSON.parse(
        new TextDecoder().decode((await t.store.get('runs/mh/attempts/2/workers/1/heartbeat.json'))!),
      ) as Heartbeat;
      expect(after).toMatchObject({ process: 1, restoredFrom: 10 });
      expect(after.waitingForRestore).toBeUndefined();
    },
    4 * STEP_MS,
  );

  it(
    'process 0 ends last: its adv exec waits for the other processes to end, so its end is the gang’s',
    async () => {
      const t = await newStore('ends-last');
      const a = new Attempt(t, 2, 1, 'per-process');
      // Rank 0's workload is done at once; rank 1's when the test says so.
      await a.start(undefined, {
        argv: ['sh', '-c', '[ "$RANK" = 0 ] || while [ ! -f "$CTRL/release" ]; do sleep 0.05; done'],
      });
      const [p0, p1] = [a.procs.get(0)!, a.procs.get(1)!];
      await a.until('process 0 to wait for process 1', () =>
        p0.out().includes('waiting for the other processes to end'),
      );
      expect(p0.gone()).toBe(false);
      expect(await t.store.head('runs/mh/attempts/1/exit.json')).toBeUndefined();
      await a.tell('release');
      expect([await p0.done, await p1.done], a.out()).toEqual([0, 0]);
      expect(await t.store.head('runs/mh/attempts/1/exit.json')).toBeDefined();
    },
    3 * STEP_MS,
  );

  it('process 1 gives up after --restore-wait when process 0 never records its choice, and runs nothing', async () => {
    const t = await newStore('no-primary');
    const a = new Attempt(t, 2, 1, 'per-process');
    await a.start([1], { args: ['--restore-wait', '1'] });
    const e = a.procs.get(1)!;
    expect(await e.done, e.out()).toBe(1);
    expect(e.out()).toContain('process 0 did not record which checkpoint to restore within 1 s');
    expect(existsSync(join(a.ctrl, 'report-1.json'))).toBe(false);
    expect(JSON.parse(readFileSync(join(a.job(1), 'exit.json'), 'utf8'))).toMatchObject({
      reason: 'Error',
      message: expect.stringContaining('no restore, so no workload'),
    });
  });
});

describe('store mode: the workload writes straight to the store', () => {
  it(
    'over a file:// store: steps written in place with commit_success.txt get our manifest from process 0 (hashing split), and a newer step never committed is removed before the next attempt starts',
    async () => {
      const t = await newStore('store');
      const ckpt = join(fileURLToPath(t.store.url), 'runs', 'mh', 'ckpt');
      const a = new Attempt(t, 2, 1, 'store');
      await a.start();
      for (const r of await a.reports())
        expect(r.env).toMatchObject({ ADV_CKPT_DIR: ckpt, ADV_CKPT_URI: `${t.store.url}runs/mh/ckpt/` });
      await a.tell('ckpt-10');
      const m = await a.until('step 10 committed', () => manifest(t.store, t.run, 10));
      expect(m.processes).toBe(2);
      expect(m.files.map((f) => f.path)).toEqual([
        'commit_success.txt',
        'common.bin',
        'rank-0.bin',
        'rank-1.bin',
      ]);
      const parts = await Promise.all([0, 1].map((k) => part(t.store, t.run, 10, 1, k)));
      expect(parts.flatMap((p) => p!.files.map((f) => f.path)).sort()).toEqual(m.files.map((f) => f.path));
      expect(await a.stop(), a.out()).toEqual([0, 0]);
      // What a killed attempt leaves: a newer step the framework began, never committed.
      await mkdir(join(ckpt, '20'), { recursive: true });
      await writeFile(join(ckpt, '20', 'rank-0.bin'), 'half');
      const b = new Attempt(t, 2, 2, 'store');
      await b.start();
      for (const r of await b.reports()) expect(r, b.out()).toMatchObject({ latest: 10, files: unionOf(10) });
      expect(b.procs.get(0)!.out()).toContain('checkpoint 20 in the store was never committed');
      expect(await readdir(ckpt)).not.toContain('20');
      expect(await b.stop()).toEqual([0, 0]);
    },
    4 * STEP_MS,
  );

  it(
    'over S3: a step the framework wrote straight into the store, commit_success.txt last, is committed by the gang',
    async () => {
      const s3 = await startS3();
      try {
        // A request s3rver leaves unanswered under load (seen twice in loaded CI runs: both adv
        // execs silent after their workload ended) fails after 30 s and is tried again, instead of
        // holding adv exec's end for the default 120 s, this test's whole window for stop().
        const url = `${s3.url('store-mode')}&idleTimeout=30`;
        const t = {
          store: new S3Store({
            bucket: s3.bucket,
            prefix: 'store-mode',
            endpoint: s3.endpoint,
            forcePathStyle: true,
            credentials: {
              accessKeyId: s3.env.AWS_ACCESS_KEY_ID!,
              secretAccessKey: s3.env.AWS_SECRET_ACCESS_KEY!,
            },
          }),
          url,
          run: 'mh',
          name: 's3-store',
        };
        const a = new Attempt(t, 2, 1, 'store', s3.env);
        // The workload only reports its ADV_CKPT_URI; the test writes the step as Orbax would on GCS.
        const report =
          'printf \'{"rank":%s,"latest":null,"files":{},"env":{"ADV_CKPT_URI":"%s"}}\' "$RANK" "$ADV_CKPT_URI" > "$CTRL/.r$RANK" && mv "$CTRL/.r$RANK" "$CTRL/report-$RANK.json"; while [ ! -f "$CTRL/stop" ]; do sleep 0.05; done';
        await a.start(undefined, { argv: ['sh', '-c', report] });
        for (const r of await a.reports()) expect(r.env.ADV_CKPT_URI).toBe(`${t.store.url}runs/mh/ckpt/`);
        const step = stepPrefix(t.run, 10);
        for (const k of [0, 1]) await t.store.put(`${step}default/ocdbt.process_${k}/d/x`, `shard ${k}`);
        await t.store.put(`${step}default/manifest.ocdbt`, 'merged');
        await t.store.put(`${step}commit_success.txt`, '');
        const m = await a.until('step 10 committed', () => manifest(t.store, t.run, 10));
        expect(m).toMatchObject({ processes: 2 });
        expect(m.files.map((f) => f.path)).toEqual([
          'commit_success.txt',
          'default/manifest.ocdbt',
          'default/ocdbt.process_0/d/x',
          'default/ocdbt.process_1/d/x',
        ]);
        expect(await a.stop(), a.out()).toEqual([0, 0]);
      } finally {
        await s3.stop();
      }
    },
    4 * STEP_MS,
  );
});

/** Records which signal it got into $OUT and exits 0; $READY once its handlers are in place. */
const SIGNALS_PY = String.raw`
import os, signal, sys, time
def on(sig, _):
    with open(os.environ["OUT"], "w") as fh: fh.write(signal.Signals(sig).name)
    sys.exit(0)
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2): signal.signal(s, on)
open(os.environ["READY"], "w").close()
while True: time.sleep(0.05)
`;

describe('one stop signal', () => {
  it.each([
    ['SIGUSR1', [], 'SIGTERM'],
    ['SIGINT', [], 'SIGTERM'],
    ['SIGTERM', ['--stop-signal', 'SIGUSR2'], 'SIGUSR2'],
  ] as const)(
    'adv exec gets %s (%j): the workload gets %s',
    async (received, flags, expected) => {
      const dir = join(tmp, `signal-${received}-${flags.length}`);
      await mkdir(dir, { recursive: true });
      const py = join(dir, 'signals.py');
      await writeFile(py, SIGNALS_PY);
      const e = advExec(['--run', 'sig', ...flags, '--', 'python3', py], join(dir, 'job'), {
        OUT: join(dir, 'out'),
        READY: join(dir, 'ready'),
      });
      await waitFor(() => existsSync(join(dir, 'ready')), {
        what: 'the workload’s handlers',
        timeoutMs: STEP_MS,
        giveUpIf: e.gone,
        detail: e.out,
      });
      e.child.kill(received);
      expect(await e.done, e.out()).toBe(0);
      expect(readFileSync(join(dir, 'out'), 'utf8')).toBe(expected);
      expect(JSON.parse(readFileSync(join(dir, 'job', 'exit.json'), 'utf8'))).toMatchObject({
        message: `stopped by ${received}`,
      });
    },
    2 * STEP_MS,
  );

  it(
    'a stop notice while process 1 waits for the restore ends it at once, before any workload starts',
    async () => {
      const t = await newStore('stop-in-barrier');
      const a = new Attempt(t, 2, 1, 'per-process');
      await a.start([1]);
      await a.until('process 1 to wait for the restore', async () =>
        t.store.head('runs/mh/attempts/1/workers/1/heartbeat.json'),
      );
      const e = a.procs.get(1)!;
      e.child.kill('SIGUSR1');
      expect(await e.done, e.out()).toBe(128 + 10);
      expect(existsSync(join(a.ctrl, 'report-1.json'))).toBe(false);
      expect(JSON.parse(readFileSync(join(a.job(1), 'exit.json'), 'utf8'))).toMatchObject({
        reason: 'Preempted',
        message: 'stopped by SIGUSR1 before the workload started',
      });
    },
    2 * STEP_MS,
  );
});
