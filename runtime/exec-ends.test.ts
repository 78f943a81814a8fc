/**
 * `adv exec` ends once its workload has: whatever the workload left behind, whatever happened to
 * its job dir, whatever its store does — and it says what it could not write.
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { spawn } from 'node:child_process';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { advExec } from './exec.js';
import { processStartTicks } from './proc.js';
import { FileStore } from './store/file.js';
import type { ObjectStore } from './store/types.js';

let tmp: string;
/** Files where a test's workload wrote the pids of processes it started: killed after each test, whatever happened. */
const strays: string[] = [];
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-exec-ends-'));
});
afterEach(() => {
  for (const file of strays.splice(0)) {
    const pid = pidIn(file);
    if (!pid) continue;
    for (const target of [-pid, pid])
      try {
        process.kill(target, 'SIGKILL');
      } catch {
        // gone, or not a group leader
      }
  }
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

/** A file store whose small writes (heartbeats, logs, manifests, the exit record) never answer: a store behind a dead link. */
function stallingStore(root: string): ObjectStore {
  return Object.assign(Object.create(new FileStore(root)) as FileStore, {
    put: () => new Promise<void>(() => {}),
  });
}

function pidIn(file: string): number | undefined {
  try {
    return Number(readFileSync(file, 'utf8').trim()) || undefined;
  } catch {
    return undefined;
  }
}
/** tsx's loader, to run a TypeScript program in a child process. */
const tsxLoader = () =>
  pathToFileURL(join(createRequire(import.meta.url).resolve('tsx/package.json'), '..', 'dist', 'loader.mjs'))
    .href;

const alive = (pid: number) => processStartTicks(pid) !== undefined;

describe('adv exec ends when its workload has', () => {
  it('though the workload left processes behind that hold its output open', async () => {
    const jobDir = join(tmp, 'left-behind');
    const lines: string[] = [];
    // One child stays in the workload's group, one leaves it (setsid): both keep the output pipe.
    strays.push(join(jobDir, 'escaped.pid'), join(jobDir, 'in-group.pid'));
    const { record } = await advExec({
      run: 'left-behind',
      attempt: 1,
      argv: [
        'sh',
        '-c',
        'sleep 600 & echo $! > "$ADV_JOB_DIR/in-group.pid"; setsid sleep 600 & echo $! > "$ADV_JOB_DIR/escaped.pid"; echo done',
      ],
      jobDir,
      store: new FileStore(join(tmp, 'store')),
      log: (l) => lines.push(l),
    });
    expect(record.reason).toBe('Completed');
    // What stayed in its group went with it (killed; gone once reaped, which a loaded machine may
    // take a moment to do); what left it no longer holds adv exec.
    const inGroup = pidIn(join(jobDir, 'in-group.pid'))!;
    await vi.waitFor(() => expect(alive(inGroup)).toBe(false), { timeout: 30_000, interval: 50 });
    expect(JSON.parse(await readFile(join(jobDir, 'exit.json'), 'utf8'))).toMatchObject({
      reason: 'Completed',
    });
  }, 60_000);

  it('though its job dir was removed under the workload, and says what it could not write', async () => {
    const jobDir = join(tmp, 'removed');
    const lines: string[] = [];
    const { record } = await advExec({
      run: 'removed',
      attempt: 1,
      argv: ['sh', '-c', 'rm -rf "$ADV_JOB_DIR"'],
      jobDir,
      store: new FileStore(join(tmp, 'store')),
      log: (l) => lines.push(l),
    });
    expect(record.reason).toBe('Completed');
    expect(lines.join('\n')).toMatch(/cannot write exit\.json in .*removed .*was the job dir removed\?/);
  }, 60_000);

  it('though its store stopped answering: the final writes are given up after --finish-timeout, and named', async () => {
    const lines: string[] = [];
    const { record } = await advExec({
      run: 'stalled',
      attempt: 1,
      argv: ['sh', '-c', 'echo some output; mkdir -p "$ADV_CKPT_DIR/10" && echo w > "$ADV_CKPT_DIR/10/w"'],
      jobDir: join(tmp, 'stalled'),
      store: stallingStore(join(tmp, 'stalled-store')),
      finishTimeoutSec: 1,
      log: (l) => lines.push(l),
    });
    expect(record.reason).toBe('Completed');
    const log = lines.join('\n');
    expect(log).toMatch(/gave up on the upload of its last checkpoint to file:/);
    expect(log).toMatch(/gave up on writing the exit record to file:/);
    expect(JSON.parse(await readFile(join(tmp, 'stalled', 'exit.json'), 'utf8'))).toMatchObject({
      reason: 'Completed',
    });
  }, 60_000);

  it('forwards a SIGTERM that comes while it still waits on the store at start-up', async () => {
    const jobDir = join(tmp, 'early-term');
    const lines: string[] = [];
    strays.push(join(jobDir, 'ready'));
    const run = advExec({
      run: 'early-term',
      attempt: 1,
      // The workload says it got the signal, then ends.
      argv: [
        'sh',
        '-c',
        'trap "echo term > \\"$ADV_JOB_DIR/got-term\\"; exit 0" TERM; echo $$ > "$ADV_JOB_DIR/ready"; while :; do sleep 0.1; done',
      ],
      jobDir,
      // Its first heartbeat never returns.
      store: stallingStore(join(tmp, 'early-store')),
      finishTimeoutSec: 1,
      graceSec: 30,
      log: (l) => lines.push(l),
    });
    await vi.waitFor(() => readFile(join(jobDir, 'ready'), 'utf8'), { timeout: 30_000 });
    // As Node delivers a signal to listeners; with none, a real SIGTERM would end adv exec and leave
    // the workload (in its own group) running.
    expect(process.emit('SIGTERM' as never)).toBe(true);
    const { record } = await run;
    expect(await readFile(join(jobDir, 'got-term'), 'utf8')).toBe('term\n');
    expect(record).toMatchObject({ reason: 'Completed', message: 'stopped by SIGTERM' });
  }, 60_000);

  it('exits, naming what held it open, when something still does once it is done', async () => {
    // A server left listening stands for a transfer adv exec gave up on: its socket stays open.
    const program = `import { createServer } from 'node:net';
      import { exitSoon } from ${JSON.stringify(pathToFileURL(join(import.meta.dirname, 'exec-cli.ts')).href)};
      createServer().listen(0, '127.0.0.1', () => exitSoon(3, 100));`;
    const child = spawn(process.execPath, ['--import', tsxLoader(), '--input-type=module', '-e', program], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const watchdog = setTimeout(() => child.kill('SIGKILL'), 50_000);
    const code = await new Promise((r) => child.on('exit', (c) => r(c)));
    clearTimeout(watchdog);
    expect(code).toBe(3);
    expect(stderr).toMatch(
      /adv exec: exiting 0\.1 s after the workload ended, although .*TCPServerWrap.* still held the process open/,
    );
  }, 60_000);
});
