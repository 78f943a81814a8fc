/**
 * The worker's own ordering, where two of its activities overlap: a periodic scan with the final
 * one, and two heartbeats. Each test holds the first activity open until the second starts (which
 * only an unordered worker lets happen) or a short while passes, so it fails every time without
 * the ordering and passes every time with it, whatever the machine's load.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attemptPrefix } from './checkpoint.js';
import { workerHeartbeatKey, type Heartbeat } from './heartbeat.js';
import { ExitReason, type ExitRecord } from './records.js';
import { DirStepFinder } from './step-finder.js';
import { FileStore } from './store/file.js';
import { Worker } from './worker.js';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-worker-'));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

const RECORD: ExitRecord = { exitCode: 0, reason: ExitReason.Completed, startedAt: '', finishedAt: '' };

/** A promise and the function that settles it. */
function latch(): { done: Promise<void>; open: () => void } {
  let open!: () => void;
  const done = new Promise<void>((r) => (open = r));
  return { done, open };
}

/**
 * A finder whose first periodic scan takes step `step` as finished and then holds, until the
 * final scan starts (which a worker that waits for the scan under way never does) or `fallbackMs`
 * passes. It notes whether two scans ever ran at once.
 */
class HoldingFinder extends DirStepFinder {
  readonly entered = latch();
  private readonly release = latch();
  private inFlight = 0;
  private held = false;
  overlapped = false;

  constructor(
    dir: string,
    private readonly step: number,
    private readonly fallbackMs = 100,
  ) {
    super(dir, { settleMs: 100 });
  }

  override async finished(final: boolean): Promise<number[]> {
    if (this.inFlight) this.overlapped = true;
    this.inFlight++;
    try {
      if (final) {
        // Let the held scan go on only after this one has returned (a macrotask later).
        setTimeout(this.release.open, 0);
        return [];
      }
      if (this.held) return [];
      this.held = true;
      this.entered.open();
      setTimeout(this.release.open, this.fallbackMs);
      await this.release.done;
      return [this.step];
    } finally {
      this.inFlight--;
    }
  }
}

describe('worker ordering', () => {
  it('the final scan waits for a scan under way, so a step it took as finished is committed before adv exec ends', async () => {
    const ckptDir = join(tmp, 'scan', 'ckpt');
    await mkdir(join(ckptDir, '30'), { recursive: true });
    await writeFile(join(ckptDir, '30', 'state.bin'), 'weights');
    const store = new FileStore(join(tmp, 'scan', 'store'));
    const finder = new HoldingFinder(ckptDir, 30);
    const w = new Worker({ store, run: 'r', attempt: 1, ckptDir, log: () => {}, finder, heartbeatSec: 3600 });
    await w.start();
    await finder.entered.done;
    await w.finish(RECORD, { workloadExitedOnItsOwn: true });
    expect(finder.overlapped).toBe(false);
    expect(w.lastCommitted?.step).toBe(30);
    const exit = JSON.parse(await readFile(join(store.root, attemptPrefix('r', 1), 'exit.json'), 'utf8')) as {
      lastCheckpoint?: { step: number };
    };
    expect(exit.lastCheckpoint?.step).toBe(30);
  });

  it('writes heartbeats one after another: the last one written is the one that lands', async () => {
    const root = join(tmp, 'hb', 'store');
    const store = new FileStore(root);
    const key = workerHeartbeatKey('r', 1, 1);
    // The first heartbeat's put is held until a second one is put (and has landed), or 100 ms.
    const second = latch();
    const firstLanded = latch();
    let puts = 0;
    const put = store.put.bind(store);
    store.put = async (k, body) => {
      if (k !== key) return put(k, body);
      const n = ++puts;
      if (n === 1) {
        setTimeout(second.open, 100);
        await second.done;
        await put(k, body);
        return firstLanded.open();
      }
      await put(k, body);
      second.open();
    };
    const ckptDir = join(tmp, 'hb', 'ckpt');
    await mkdir(ckptDir, { recursive: true });
    const w = new Worker({
      store,
      run: 'r',
      attempt: 1,
      ckptDir,
      log: () => {},
      process: 1,
      processes: 2,
      heartbeatSec: 3600,
    });
    await w.start();
    await w.finish(RECORD, { workloadExitedOnItsOwn: true });
    await firstLanded.done;
    expect(puts).toBe(2);
    const hb = JSON.parse(await readFile(join(root, key), 'utf8')) as Heartbeat;
    // What process 0 reads to know this process wrote its last part.
    expect(hb.finishedAt).toBeDefined();
  });
});
