/**
 * Checkpoints that cannot be half-written, on both stores: a directory (`file://`) and a real
 * S3-protocol server on loopback (s3rver, behind a proxy that injects 500/503/dropped connections).
 * `adv exec` runs as the bundled single file, as it does on a worker without node_modules.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  attemptPrefix,
  latestCommitted,
  listCheckpoints,
  restoreLatest,
  stepPrefix,
  uploadCheckpoint,
} from '../runtime/checkpoint.js';
import { bundleExec } from '../runtime/bundle.js';
import { recordRestore } from '../runtime/restore-barrier.js';
import { openStore, type ObjectStore } from '../runtime/store/index.js';
import { S3Store } from '../runtime/store/s3.js';
import { removeTree } from './helpers/io.js';
import { startS3, type S3Server } from './helpers/servers/s3.js';
import { jitter, waitFor } from './helpers/wait.js';

const TRAIN = join(import.meta.dirname, '..', 'examples', 'toy-train', 'train.py');
let tmp: string;
let bundle: string;
let s3: S3Server;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-ckpt-'));
  // The worker runtime as one file, run from a folder with no node_modules anywhere above it.
  const bare = join(tmp, 'worker');
  await mkdir(bare);
  await bundleExec(join(bare, 'adv-exec.mjs'));
  bundle = join(bare, 'adv-exec.mjs');
  s3 = await startS3();
  Object.assign(process.env, s3.env);
}, 120_000);
afterAll(async () => {
  await s3?.stop();
  await removeTree(tmp);
});
/** adv exec processes still running when a test ends (it failed half-way): each goes, with its workload. */
const running = new Set<{ child: ChildProcess; job?: string }>();
afterEach(async () => {
  for (const r of running) {
    r.child.kill('SIGKILL');
    await new Promise((res) => r.child.once('close', res));
    if (r.job) killWorkload(r.job);
  }
  running.clear();
});

const stores: [string, () => Promise<{ store: ObjectStore; url: string }>][] = [
  [
    'file',
    async () => {
      const url = `file://${await mkdtemp(join(tmpdir(), 'adv-store-'))}`;
      return { store: await openStore(url), url };
    },
  ],
  [
    's3',
    async () => {
      const url = s3.url(`t${Math.random().toString(36).slice(2, 8)}`);
      return { store: await openStore(url, { ...process.env, ...s3.env }), url };
    },
  ],
];

async function stepDir(step: number, files: Record<string, string | Buffer>): Promise<string> {
  const dir = join(tmp, `src-${step}-${Math.random().toString(36).slice(2)}`);
  for (const [p, c] of Object.entries(files)) {
    await mkdir(join(dir, p, '..'), { recursive: true });
    await writeFile(join(dir, p), c);
  }
  return dir;
}

/**
 * How long one step of these tests may take before it counts as stuck: starting adv exec (node)
 * and the workload (python), restoring, writing and uploading one checkpoint. Seconds when the
 * machine is busy; a test's ceiling is this times the number of such steps it makes.
 */
const STEP_MS = 60_000;

/** Runs the bundled adv exec; resolves to its exit code and output. */
function advExec(args: string[], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, [bundle, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const entry = { child, job: args[args.indexOf('--job-dir') + 1] };
  running.add(entry);
  let out = '';
  let exited = false;
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const done = new Promise<number | null>((r) =>
    child.on('close', (code) => {
      exited = true;
      running.delete(entry);
      r(code);
    }),
  );
  return {
    child,
    done,
    out: () => out,
    /** For waits: a reason to stop waiting once adv exec has exited. */
    gone: () => exited && `adv exec exited early:\n${out}`,
  };
}

/** Kills the workload's process group (as a lost host would), once adv exec can no longer write its pid. */
function killWorkload(job: string): void {
  if (!existsSync(join(job, 'exec.json'))) return;
  const { childPid } = JSON.parse(readFileSync(join(job, 'exec.json'), 'utf8')) as { childPid: number };
  try {
    process.kill(-childPid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/**
 * Where in an attempt's life the SIGKILL lands. Each kill waits until its moment has come — an
 * event it can see, so a slow machine only makes the test slower — then a random jitter varies
 * where inside that phase it falls. Every fourth kill comes after a fresh commit, so the run
 * always makes progress however slow the machine is.
 */
const KILL_MOMENTS = [
  'start-up and restore',
  'workload running',
  'checkpoint uploading',
  'just committed',
] as const;
type KillMoment = (typeof KILL_MOMENTS)[number];
const KILLS = 50;

describe.each(stores)('checkpoints on the %s store', (_name, make) => {
  it('uploads files then the manifest, and restores the newest step that verifies', async () => {
    const { store } = await make();
    await uploadCheckpoint(store, {
      run: 'r',
      step: 10,
      attempt: 1,
      dir: await stepDir(10, { 'a.bin': 'ten', 'sub/b.bin': Buffer.alloc(70_000, 7) }),
    });
    await uploadCheckpoint(store, {
      run: 'r',
      step: 20,
      attempt: 1,
      dir: await stepDir(20, { 'a.bin': 'twenty', 'sub/b.bin': Buffer.alloc(70_000, 9) }),
    });
    expect((await latestCommitted(store, 'r'))?.step).toBe(20);
    const dest = join(tmp, `restore-${Math.random()}`);
    const r = await restoreLatest(store, 'r', dest);
    expect(r?.step).toBe(20);
    expect(readFileSync(join(dest, '20', 'a.bin'), 'utf8')).toBe('twenty');
    expect(readFileSync(join(dest, '20', 'sub', 'b.bin'))).toEqual(Buffer.alloc(70_000, 9));
  });

  it('skips a step without a manifest, and one whose byte is corrupted, falling back to the previous', async () => {
    const { store } = await make();
    for (const step of [10, 20, 30]) {
      await uploadCheckpoint(store, {
        run: 'c',
        step,
        attempt: 1,
        dir: await stepDir(step, { 'w.bin': Buffer.alloc(50_000, step) }),
      });
    }
    // 30: the manifest never made it (an upload killed before its last write).
    await store.delete([`${stepPrefix('c', 30)}manifest.json`]);
    // 20: one byte flipped, same size, so only the sha256 can tell.
    const bytes = Buffer.from((await store.get(`${stepPrefix('c', 20)}w.bin`))!);
    bytes[12345] = bytes[12345]! ^ 0xff;
    await store.put(`${stepPrefix('c', 20)}w.bin`, bytes);
    const listed = await listCheckpoints(store, 'c');
    expect(listed.map((i) => [i.step, i.problem ?? 'ok'])).toEqual([
      [30, 'no manifest (an upload that did not finish)'],
      [20, 'ok'], // sizes match: only a restore reads every byte
      [10, 'ok'],
    ]);
    const warnings: string[] = [];
    const r = await restoreLatest(store, 'c', join(tmp, `rc-${Math.random()}`), {
      warn: (m) => warnings.push(m),
    });
    expect(r?.step).toBe(10);
    expect(r?.skipped.map((s) => s.step)).toEqual([30, 20]);
    expect(warnings[1]).toMatch(/^checkpoint 20 skipped: w\.bin does not match its manifest \(sha256 /);
  });

  it('process 1 of a multi-host attempt restores the step process 0 chose and uploads its finished step as a part, under its own prefix', async () => {
    const { store, url } = await make();
    await uploadCheckpoint(store, {
      run: 'mh',
      step: 5,
      attempt: 1,
      dir: await stepDir(5, { 'a.bin': 'five' }),
    });
    // Process 0's choice, as it records it before any workload of the attempt starts.
    await recordRestore(store, 'mh', 2, { step: 5, processes: 2, mode: 'per-process' });
    const job = join(tmp, `mh-${_name}`);
    const ckpt = join(job, 'ckpt');
    // It sees the restored step, writes a finished step and declares an output.
    const script = `echo "hello from $ADV_PROCESS_ID, restored $(cat "$ADV_CKPT_DIR/5/a.bin")"; mkdir -p "$ADV_CKPT_DIR/7" && echo seven > "$ADV_CKPT_DIR/7/w1.bin" && echo x > "$ADV_CKPT_DIR/7/COMMITTED"; mkdir -p "$ADV_ARTIFACT_DIR/model" && echo m > "$ADV_ARTIFACT_DIR/model/w"`;
    const e = advExec(
      ['--store', url, '--run', 'mh', '--attempt', '2', '--job-dir', job, '--', 'sh', '-c', script],
      {
        ADV_PROCESS_ID: '1',
        ADV_NUM_PROCESSES: '2',
        ADV_COORDINATOR_ADDRESS: '127.0.0.1:8476',
        ADV_CKPT_DIR: ckpt,
        ADV_OUTPUTS: 'model',
      },
    );
    expect(await e.done, e.out()).toBe(0);
    const keys: string[] = [];
    for await (const o of store.list('runs/mh/')) keys.push(o.key);
    const attempt2 = keys.filter(
      (k) => k.startsWith('runs/mh/attempts/2/') && k !== 'runs/mh/attempts/2/restore.json',
    );
    expect(
      attempt2.every((k) => k.startsWith('runs/mh/attempts/2/workers/1/')),
      attempt2.join(' '),
    ).toBe(true);
    const logs = attempt2.filter((k) => k.startsWith('runs/mh/attempts/2/workers/1/logs/part-')).sort();
    const text = (await Promise.all(logs.map((k) => store.get(k))))
      .map((b) => Buffer.from(b!).toString())
      .join('');
    expect(text).toContain('hello from 1, restored five');
    // Step 7 is uploaded with its part record; only process 0 writes its manifest, so none yet.
    const part = JSON.parse(
      new TextDecoder().decode((await store.get(`${stepPrefix('mh', 7)}_parts/2/1.json`))!),
    ) as { process: number; processes: number; files: { path: string }[] };
    expect(part).toMatchObject({ process: 1, processes: 2 });
    expect(part.files.map((f) => f.path).sort()).toEqual(['COMMITTED', 'w1.bin']);
    expect(await store.get(`${stepPrefix('mh', 7)}manifest.json`)).toBeUndefined();
    expect((await latestCommitted(store, 'mh'))?.step).toBe(5);
    // Its last heartbeat says it ended; no output published, no exit record in the store.
    const hb = JSON.parse(
      new TextDecoder().decode((await store.get('runs/mh/attempts/2/workers/1/heartbeat.json'))!),
    ) as { process: number; finishedAt?: string; restoredFrom?: number };
    expect(hb).toMatchObject({ process: 1, restoredFrom: 5 });
    expect(hb.finishedAt).toBeDefined();
    expect(keys.some((k) => k.includes('/outputs/'))).toBe(false);
    // The exit record stays in its own job dir, for the backend to read.
    expect(JSON.parse(readFileSync(join(job, 'exit.json'), 'utf8'))).toMatchObject({ exitCode: 0 });
  });

  it(
    'survives SIGKILL of adv exec at 50 random moments: restore never picks a bad checkpoint, and the run resumes',
    async () => {
      const { store, url } = await make();
      const kills: Record<KillMoment, number> = {
        'start-up and restore': 0,
        'workload running': 0,
        'checkpoint uploading': 0,
        'just committed': 0,
      };
      let lastGood = -1;
      for (let i = 0; i < KILLS; i++) {
        const job = join(tmp, `kill-${_name}-${i}`);
        const e = advExec(
          [
            '--store',
            url,
            '--run',
            'k',
            '--attempt',
            String(i + 1),
            '--job-dir',
            job,
            '--',
            'python3',
            TRAIN,
            '--steps',
            '1000000',
            '--ckpt-every',
            '3',
            '--ckpt-bytes',
            '200000',
            // A checkpoint every ~150 ms: fast, yet a pace adv exec keeps up with on a loaded machine
            // with the S3 server beside it (at 4 ms steps it fell behind by thousands of step dirs and
            // committed nothing for minutes; at 60 ms it once fell a minute behind on the S3 store).
            '--step-sleep',
            '0.05',
          ],
          { ADV_CKPT_DIR: join(job, 'ckpt') },
        );
        const moment = KILL_MOMENTS[i % KILL_MOMENTS.length]!;
        const until = (what: string, condition: () => unknown) =>
          waitFor(condition, {
            what: `${what} (kill ${i})`,
            timeoutMs: STEP_MS,
            everyMs: 10,
            giveUpIf: e.gone,
            detail: () => `adv exec so far:\n${e.out().slice(-3000)}`,
          });
        if (moment === 'start-up and restore') {
          await jitter(400);
        } else if (moment === 'workload running') {
          await until('adv exec to write the workload pid', () => existsSync(join(job, 'exec.json')));
          await jitter(150);
        } else if (moment === 'checkpoint uploading') {
          // Files of a new step past the last commit in the store: its upload is under way.
          const seen = new Set((await listCheckpoints(store, 'k')).map((c) => c.step));
          await until('an upload to start', async () =>
            (await listCheckpoints(store, 'k')).some((c) => c.step > lastGood && !seen.has(c.step)),
          );
          await jitter(30);
        } else {
          await until(
            `a checkpoint committed past step ${lastGood}`,
            async () => ((await latestCommitted(store, 'k'))?.step ?? -1) > lastGood,
          );
          await jitter(100);
        }
        kills[moment]++;
        e.child.kill('SIGKILL');
        await e.done;
        // Read after adv exec is dead: it can no longer write a pid we would miss.
        killWorkload(job);
        // Whatever the store now calls committed restores byte for byte.
        const latest = await latestCommitted(store, 'k');
        if (latest) {
          const r = await restoreLatest(store, 'k', join(job, 'verify'), { step: latest.step });
          expect(r?.step, `after kill ${i} (${moment})`).toBe(latest.step);
          expect(latest.step).toBeGreaterThanOrEqual(lastGood);
          lastGood = latest.step;
        }
      }
      expect(lastGood).toBeGreaterThan(0);
      // One more run to the end: it starts from the last committed step.
      const final = join(tmp, `kill-${_name}-final`);
      const target = lastGood + 9;
      const e = advExec(
        [
          '--store',
          url,
          '--run',
          'k',
          '--attempt',
          String(KILLS + 1),
          '--job-dir',
          final,
          '--',
          'python3',
          TRAIN,
          '--steps',
          String(target),
          '--ckpt-every',
          '3',
        ],
        {
          ADV_CKPT_DIR: join(final, 'ckpt'),
        },
      );
      expect(await e.done, e.out()).toBe(0);
      expect(e.out()).toContain(`resumed from step ${lastGood}`);
      expect(e.out()).toContain(`done: step ${target}`);
      expect((await latestCommitted(store, 'k'))?.step).toBe(target);
      console.log(
        `${_name}: ${KILLS} SIGKILLs (${Object.entries(kills)
          .map(([m, n]) => `${n} at ${m}`)
          .join(', ')}); last committed step ${lastGood}; resumed and finished at ${target}`,
      );
    },
    // Ceiling: each kill waits at most one step's worth of events; the final run is one more.
    (KILLS + 2) * STEP_MS,
  );

  it(
    'on SIGTERM: the workload’s last checkpoint in the grace period is committed and the exit record says Preempted',
    async () => {
      const { store, url } = await make();
      const job = join(tmp, `term-${_name}`);
      const e = advExec(
        [
          '--store',
          url,
          '--run',
          't',
          '--attempt',
          '1',
          '--job-dir',
          job,
          '--grace',
          '120', // a ceiling: the workload takes one step and a checkpoint, however slow the machine
          '--',
          'python3',
          TRAIN,
          '--steps',
          '100000',
          '--ckpt-every',
          '100000',
          '--step-sleep',
          '0.01',
        ],
        {
          ADV_CKPT_DIR: join(job, 'ckpt'),
        },
      );
      // Stop it once both sides would act on the signal. The workload prints its first line after
      // installing its handlers (train.py); adv exec installs its own before its first log part is
      // shipped, so a part holding that line in the store means both are ready.
      await waitFor(
        async () => {
          for await (const o of store.list(`${attemptPrefix('t', 1)}logs/`))
            if (/^starting from scratch$/m.test(new TextDecoder().decode((await store.get(o.key))!)))
              return true;
          return false;
        },
        {
          what: 'the workload’s first line shipped to the store',
          timeoutMs: STEP_MS,
          giveUpIf: e.gone,
          detail: e.out,
        },
      );
      e.child.kill('SIGTERM');
      expect(await e.done, e.out()).toBe(143);
      const stopped = /stopping at step (\d+) on signal 15/.exec(e.out());
      expect(stopped, e.out()).not.toBeNull();
      const step = Number(stopped![1]);
      expect((await latestCommitted(store, 't'))?.step).toBe(step);
      const exit = JSON.parse(
        new TextDecoder().decode((await store.get(`${attemptPrefix('t', 1)}exit.json`))!),
      ) as { reason: string; lastCheckpoint: { step: number } };
      expect(exit).toMatchObject({ reason: 'Preempted', lastCheckpoint: { step } });
      expect(JSON.parse(await readFile(join(job, 'exit.json'), 'utf8'))).toMatchObject({
        reason: 'Preempted',
        exitCode: 143,
      });
      // Logs and the heartbeat are in the store too.
      const logs: string[] = [];
      for await (const o of store.list(`${attemptPrefix('t', 1)}logs/`))
        logs.push(new TextDecoder().decode((await store.get(o.key))!));
      expect(logs.join('')).toContain(`stopping at step ${step}`);
      expect(await store.head(`${attemptPrefix('t', 1)}heartbeat.json`)).toBeDefined();
    },
    3 * STEP_MS,
  );
});

describe('S3 under faults', () => {
  it('retries 500, 503 SlowDown and dropped connections, and finishes the upload', async () => {
    const store = new S3Store({
      bucket: s3.bucket,
      prefix: 'faults',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      retryBaseMs: 50,
    });
    const before = s3.faultsServed;
    s3.fail(4, 'SlowDown');
    s3.fail(3, 'InternalError');
    s3.fail(2, 'Reset');
    const m = await uploadCheckpoint(store, {
      run: 'f',
      step: 5,
      attempt: 1,
      dir: await stepDir(5, { 'a.bin': Buffer.alloc(300_000, 1), 'b.bin': 'b' }),
    });
    expect(s3.faultsServed - before).toBe(9);
    expect((await latestCommitted(store, 'f'))?.step).toBe(5);
    expect((await restoreLatest(store, 'f', join(tmp, 'fr')))?.manifest.files).toEqual(m.files);
  });

  it('reports nothing committed when the store keeps failing', async () => {
    const store = new S3Store({
      bucket: s3.bucket,
      prefix: 'down',
      endpoint: s3.endpoint,
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      maxAttempts: 2,
      transferRetries: 1,
      retryBaseMs: 10,
    });
    await uploadCheckpoint(store, {
      run: 'd',
      step: 1,
      attempt: 1,
      dir: await stepDir(1, { 'x.bin': 'one' }),
    });
    s3.fail(1000, 'InternalError', 'PUT');
    try {
      await expect(
        uploadCheckpoint(store, { run: 'd', step: 2, attempt: 1, dir: await stepDir(2, { 'x.bin': 'two' }) }),
      ).rejects.toThrow(/InternalError|internal error/i);
    } finally {
      s3.clearFaults();
    }
    expect((await latestCommitted(store, 'd'))?.step).toBe(1);
  });
});

describe('the example workload run twice with a SIGKILL in between', () => {
  it.each(stores)(
    'resumes at the last committed step (%s)',
    async (_name, make) => {
      const { store, url } = await make();
      const first = join(tmp, `twice-${_name}-1`);
      const e1 = advExec(
        [
          '--store',
          url,
          '--run',
          'twice',
          '--attempt',
          '1',
          '--job-dir',
          first,
          '--',
          'python3',
          TRAIN,
          '--steps',
          '100000',
          '--ckpt-every',
          '5',
          '--step-sleep',
          '0.05',
        ],
        {
          ADV_CKPT_DIR: join(first, 'ckpt'),
        },
      );
      await waitFor(async () => (await latestCommitted(store, 'twice'))?.step, {
        what: 'a committed checkpoint',
        timeoutMs: STEP_MS,
        everyMs: 100,
        giveUpIf: e1.gone,
      });
      e1.child.kill('SIGKILL');
      await e1.done;
      killWorkload(first);
      const committed = (await latestCommitted(store, 'twice'))!.step;
      const second = join(tmp, `twice-${_name}-2`);
      await cp(TRAIN, join(tmp, 'train-copy.py'));
      const e2 = advExec(
        [
          '--store',
          url,
          '--run',
          'twice',
          '--attempt',
          '2',
          '--job-dir',
          second,
          '--',
          'python3',
          TRAIN,
          '--steps',
          String(committed + 5),
          '--ckpt-every',
          '5',
        ],
        {
          ADV_CKPT_DIR: join(second, 'ckpt'),
        },
      );
      expect(await e2.done, e2.out()).toBe(0);
      expect(e2.out()).toContain(`restored checkpoint ${committed}`);
      expect(e2.out()).toContain(`resumed from step ${committed}`);
      expect(e2.out()).toContain(`done: step ${committed + 5}`);
    },
    3 * STEP_MS,
  );
});
