import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { heartbeatKey, workerHeartbeatKey } from '../../../runtime/heartbeat.js';
import { FileStore } from '../../../runtime/store/file.js';
import type { Attempt } from '../../status/types.js';
import type { BackendAdapters } from './adapters.js';
import { Observer } from './observer.js';

const dirs: string[] = [];
afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

describe('the observer reads heartbeats', () => {
  it('of every process of a multi-host attempt, hung on process 0’s', async () => {
    const root = await mkdtemp(join(tmpdir(), 'adv-observer-'));
    dirs.push(root);
    const store = new FileStore(root);
    const beat = (k: number) =>
      JSON.stringify({
        time: 't',
        run: 'r',
        attempt: 3,
        host: `h${k}`,
        pid: 1,
        processes: 3,
        ...(k ? { process: k } : {}),
      });
    await store.put(heartbeatKey('r', 3), beat(0));
    await store.put(workerHeartbeatKey('r', 3, 2), beat(2)); // process 1 has not written one yet
    const observer = new Observer({} as BackendAdapters, pino({ enabled: false }), () => 1e9);
    const attempt = { n: 3, backend: 'b', jobName: 'adv-r-3', phase: 'Running', specCommit: 'c' } as Attempt;
    const hb = (await observer.heartbeats([{ run: 'r', attempt }], new Map(), store)).get('r');
    expect(hb).toMatchObject({ host: 'h0', workers: [{ process: 2, host: 'h2' }] });
  });
});
