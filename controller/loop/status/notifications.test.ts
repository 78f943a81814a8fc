import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeWorkTree, type WorkTree } from '../../../test/helpers/git/specs-repo.js';
import { removeTree } from '../../../test/helpers/io.js';
import { waitFor } from '../../../test/helpers/wait.js';
import { SpecsRepo } from '../../git/specs-repo.js';
import { NO_NOTIFY, type NotifyObjects } from '../../notify/objects.js';
import type { Alert, Provider } from '../../spec/schema.js';
import type { AlertStatusDoc, RunStatusDoc, SweepPointStatus, SweepStatusDoc } from '../../status/types.js';
import { StatusWriter } from '../../status/writer.js';
import { Notifications } from './notifications.js';

const provider: Provider = {
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'Provider',
  metadata: { name: 'p' },
  spec: { type: 'webhook', address: 'http://receiver.invalid/hook' },
};
const alert: Alert = {
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'Alert',
  metadata: { name: 'a' },
  spec: { providerRef: { name: 'p' }, events: ['RunFailed'] },
};

const failed = (name: string, at: string): RunStatusDoc => ({
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name },
  status: {
    phase: 'Failed',
    conditions: [],
    attempts: [
      { n: 1, backend: 'local', jobName: `adv-${name}-1`, phase: 'Failed', specCommit: 'c', finishedAt: at },
    ],
  },
});

let tmp: string;
let wt: WorkTree;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-notify-unit-'));
  wt = await makeWorkTree({ 'README.md': 'specs\n' });
});
afterAll(async () => {
  await wt.cleanup();
  await removeTree(tmp);
});

describe('Notifications', () => {
  it('sends a record only once its commit is in, without holding up the pass, and records the outcome next pass', async () => {
    const repo = await SpecsRepo.open({ repo: wt.dir, dataDir: tmp });
    let now = Date.parse('2026-01-01T00:00:00Z');
    const status = new StatusWriter(repo.git, repo.statusRef, { name: 't', email: 't@t' }, () => now);
    const desired: { notify: NotifyObjects } = { notify: NO_NOTIFY };
    const calls: { url: string; head: string | undefined; answer: (r: Response) => void }[] = [];
    const fetchImpl = ((url: string) =>
      new Promise<Response>((answer) => calls.push({ url, head: status.head, answer }))) as typeof fetch;
    const n = new Notifications({ isLeader: () => true }, status, desired, {
      secrets: { get: () => undefined, where: 'nowhere' },
      logger: pino({ level: 'silent' }),
      now: () => now,
      fetch: fetchImpl,
    });
    try {
      // The Alert is first seen now: a run that failed before it is history, not an event.
      status.stage('Run', 'old', failed('old', '2025-12-31T23:00:00Z'), { summary: 'run/old', trailers: [] });
      desired.notify = { providers: new Map([['p', provider]]), alerts: new Map([['a', alert]]) };
      n.stage();
      await status.commitBatch();
      now += 60_000;
      status.stage('Run', 'r', failed('r', new Date(now).toISOString()), { summary: 'run/r', trailers: [] });
      n.stage();
      const staged = status.get<AlertStatusDoc>('Alert', 'a')!;
      expect(Object.keys(staged.status.deliveries)).toEqual(['Run/r/1/RunFailed']);
      const commit = await status.commitBatch();
      // The request goes out after that commit, and no pass waits for its answer.
      await waitFor(() => calls.length === 1, { what: 'the delivery to be sent' });
      expect(calls[0]).toMatchObject({ url: 'http://receiver.invalid/hook', head: commit!.oid });
      n.stage();
      expect(status.stagedCount).toBe(0);
      calls[0]!.answer(new Response(null, { status: 204 }));
      await waitFor(
        () => {
          n.stage();
          return (
            status.get<AlertStatusDoc>('Alert', 'a')!.status.deliveries['Run/r/1/RunFailed']!.state ===
            'delivered'
          );
        },
        { what: 'the outcome recorded by a pass' },
      );
      expect(status.get<AlertStatusDoc>('Alert', 'a')!.status.counts).toEqual({
        pending: 0,
        delivered: 1,
        failed: 0,
      });
      await status.commitBatch();
      n.stage();
      expect(calls).toHaveLength(1);
    } finally {
      n.close();
      await repo.close();
    }
  });

  it("records SweepDone from the Sweep's status: not while a point waits for a slot, once it is Succeeded", async () => {
    const dir = await mkdtemp(join(tmp, 'sweep-'));
    const own = await makeWorkTree({ 'README.md': 'specs\n' });
    const repo = await SpecsRepo.open({ repo: own.dir, dataDir: dir });
    let now = Date.parse('2026-01-02T00:00:00Z');
    const status = new StatusWriter(repo.git, repo.statusRef, { name: 't', email: 't@t' }, () => now);
    const desired: { notify: NotifyObjects } = { notify: NO_NOTIFY };
    const n = new Notifications({ isLeader: () => true }, status, desired, {
      secrets: { get: () => undefined, where: 'nowhere' },
      logger: pino({ level: 'silent' }),
      now: () => now,
      fetch: (() => new Promise<Response>(() => undefined)) as typeof fetch,
    });
    const sweep = (phase: SweepStatusDoc['status']['phase'], second: SweepPointStatus): SweepStatusDoc => ({
      apiVersion: 'adventuretime.dev/v1alpha1',
      kind: 'SweepStatus',
      metadata: { name: 's' },
      status: {
        phase,
        conditions: [],
        points: {
          's-1': { phase: 'Succeeded', params: { lr: 1 }, since: new Date(now).toISOString() },
          's-2': second,
        },
      },
    });
    const deliveries = () => Object.keys(status.get<AlertStatusDoc>('Alert', 'a')?.status.deliveries ?? {});
    try {
      desired.notify = {
        providers: new Map([['p', provider]]),
        alerts: new Map([['a', { ...alert, spec: { ...alert.spec, events: ['SweepDone'] } }]]),
      };
      n.stage();
      await status.commitBatch();
      now += 60_000;
      status.stage('Sweep', 's', sweep('Running', { phase: 'Waiting', params: { lr: 2 } }), {
        summary: 'sweep/s',
        trailers: [],
      });
      n.stage();
      expect(deliveries()).toEqual([]);
      await status.commitBatch();
      now += 60_000;
      const done = { phase: 'Succeeded', params: { lr: 2 }, since: new Date(now).toISOString() } as const;
      status.stage('Sweep', 's', sweep('Succeeded', done), { summary: 'sweep/s', trailers: [] });
      n.stage();
      expect(deliveries()).toEqual(['Sweep/s/0/SweepDone']);
      await status.commitBatch();
    } finally {
      n.close();
      await repo.close();
      await own.cleanup();
    }
  });
});
