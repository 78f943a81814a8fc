/**
 * The machine-per-attempt lifecycle against a tiny in-memory cloud: what every adapter that
 * composes it (gcp-tpu, vastai) gets without writing it again.
 */
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/helpers/wait.js';
import type { RunSpec } from '../../spec/schema.js';
import {
  JobState,
  type BackendContext,
  type JobHandle,
  type JobRequest,
  type ObservedJob,
} from '../types.js';
import {
  MachineLifecycle,
  pause,
  type Base,
  type JobSeen,
  type Look,
  type MachineCloud,
  type Standing,
} from './machine-lifecycle.js';

/** One machine of the tiny cloud: a job name's, with an id, a state and the job on it. */
interface Box {
  key: string;
  id: number;
  state: 'creating' | 'usable' | 'preempted' | 'going';
  /** What the job on it says; undefined: never launched there. */
  job?: ObservedJob;
}

/** A cloud held in a map: `machines` is what it has, `asked` and `deleted` what it was told. */
class TinyCloud implements MachineCloud<Box, number> {
  readonly words = {
    adopting: 'adopting a box',
    orphan: 'deleting an orphaned box',
    notProvisioned: 'box could not be provisioned',
    neverLaunched: 'never started on the box',
    goneReason: 'BoxGone',
  };
  readonly machines = new Map<string, Box>();
  readonly asked: string[] = [];
  readonly deleted: number[] = [];
  nextId = 1;
  /** Set: `list` throws (the cloud cannot be asked). */
  down = false;
  /** Set: a machine that will not become usable has no other to replace it. */
  noOther = false;
  /** Set: deletes wait for `release`. */
  held: Promise<void> | undefined;
  release: () => void = () => {};

  hold(): void {
    this.held = new Promise((r) => (this.release = r));
  }

  keyOf(jobName: string): string {
    return jobName;
  }

  async list(): Promise<Map<string, Box>> {
    if (this.down) throw new Error('the tiny cloud is down');
    return new Map([...this.machines].map(([k, b]) => [k, { ...b }]));
  }

  async find(jobName: string): Promise<Box | undefined> {
    const b = this.machines.get(jobName);
    return b?.state === 'going' ? undefined : b;
  }

  async locate(jobName: string): Promise<Box | undefined> {
    return this.machines.get(jobName);
  }

  async show(jobName: string, id: number): Promise<Box | undefined> {
    const b = this.machines.get(jobName);
    return b?.id === id ? { ...b } : undefined;
  }

  placeOf(b: Box): number {
    return b.id;
  }

  jobIdOf(_jobName: string, id: number): string {
    return String(id);
  }

  standing(b: Box): Standing {
    if (b.state === 'preempted')
      return { kind: 'ended', reason: 'Reclaimed', message: `box ${b.id} reclaimed` };
    return { kind: b.state };
  }

  async ask(job: JobRequest): Promise<number> {
    const id = this.nextId++;
    this.asked.push(job.jobName);
    this.machines.set(job.jobName, { key: job.jobName, id, state: 'creating' });
    return id;
  }

  async waitUsable(
    job: JobRequest,
    id: number,
    look: (id: number) => Promise<Look<Box>>,
  ): Promise<Box | undefined> {
    for (;;) {
      const { machine, listed } = await look(id);
      if (!machine) return undefined;
      if (machine.state === 'usable') return machine;
      if (machine.state !== 'creating') throw new Error(`box ${id} went ${machine.state}`);
      if (!listed) await pause(5);
    }
  }

  async another(job: JobRequest, id: number, tried: string[]): Promise<number> {
    tried.push(String(id));
    if (this.noOther) throw new Error(`no other box after ${tried.join(', ')}`);
    return this.ask(job);
  }

  failureReason(): string {
    return 'NoCapacity';
  }

  async launch(job: JobRequest): Promise<void> {
    const b = this.machines.get(job.jobName)!;
    b.job = { jobName: job.jobName, jobId: String(b.id), state: JobState.Running };
  }

  base(h: JobHandle, b: Box | undefined): Base {
    return { jobName: h.jobName, jobId: b ? String(b.id) : h.jobId };
  }

  async observeJob(h: JobHandle, b: Box, base: Base): Promise<JobSeen> {
    const job = this.machines.get(b.key)?.job;
    if (!job) return { seen: { ...base, state: JobState.Lost, reason: 'JobDirMissing' }, unlaunched: 'all' };
    return { seen: { ...job, ...base } };
  }

  async stop(h: JobHandle): Promise<{ ended: Promise<unknown> }> {
    const b = this.machines.get(h.jobName)!;
    b.job = { ...b.job!, state: JobState.Cancelled };
    return { ended: Promise.resolve() };
  }

  async delete(key: string, id: number | undefined): Promise<void> {
    if (id === undefined) return;
    await this.held;
    this.deleted.push(id);
    if (this.machines.get(key)?.id === id) this.machines.delete(key);
  }

  provisioningMessage(jobName: string, b: Box | undefined): string {
    return b ? `box for ${jobName} is ${b.state}` : `box for ${jobName} being made`;
  }

  goneMessage(base: Base): string {
    return `box ${base.jobId} is gone`;
  }

  fields(key: string, id: number | undefined): Record<string, unknown> {
    return { key, id };
  }
}

const request = (jobName: string): JobRequest => ({
  jobName,
  run: jobName.replace(/^adv-|-\d+$/g, ''),
  attempt: 1,
  spec: {} as RunSpec,
  argv: ['true'],
  code: { commit: 'c0ffee' },
  env: {},
});

describe('MachineLifecycle', () => {
  const open: MachineLifecycle<Box, number>[] = [];
  afterEach(async () => {
    for (const life of open.splice(0)) await life.close();
  });

  /** A lifecycle over `cloud`; `live` is what the status branch says is live (adoption's requests). */
  function lifecycle(cloud: TinyCloud, live: JobRequest[] = []) {
    const lines: string[] = [];
    const ctx: BackendContext = {
      dataDir: '/nonexistent',
      logger: pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }),
      now: Date.now,
      code: { treeOf: async () => 't', payload: async () => Buffer.from(''), extractTo: async () => {} },
      ssh: () => {
        throw new Error('no ssh in the tiny cloud');
      },
      requestFor: (jobName) => live.find((j) => j.jobName === jobName),
    };
    const life = new MachineLifecycle('tiny', cloud, ctx, { checkEveryMs: 0, listWaitMs: 20 });
    open.push(life);
    const logged = (msg: string) =>
      lines.filter((l) => (JSON.parse(l) as { msg: string }).msg === msg).length;
    return { life, logged };
  }

  /** Polls `handles` (owned: their names) until one pass says what `until` wants; that pass. */
  const pollUntil = (
    life: MachineLifecycle<Box, number>,
    handles: JobHandle[],
    what: string,
    until: (o: ObservedJob[]) => boolean,
  ) =>
    waitFor(
      async () => {
        const seen = await life.poll(handles, new Set(handles.map((h) => h.jobName)));
        return until(seen) ? seen : undefined;
      },
      { what, timeoutMs: 20_000, everyMs: 10 },
    );

  it('a second submit of the same name asks for no second machine: it adopts the first', async () => {
    const cloud = new TinyCloud();
    const { life } = lifecycle(cloud);
    const first = await life.submit(request('adv-a-1'));
    const second = await life.submit(request('adv-a-1'));
    expect(cloud.asked).toEqual(['adv-a-1']);
    expect(first).toEqual({ backend: 'tiny', jobName: 'adv-a-1', jobId: '1' });
    expect(second).toEqual({ ...first, adopted: true });
  });

  it('a restarted controller adopts the machine still being created, with the request rebuilt, and launches on it', async () => {
    const cloud = new TinyCloud();
    const job = request('adv-b-1');
    const before = lifecycle(cloud).life;
    const h = await before.submit(job);
    await before.close();
    // The new controller never submitted it: it finds the machine at its first poll.
    const { life, logged } = lifecycle(cloud, [job]);
    const [pending] = await life.poll([h], new Set([h.jobName]));
    expect(pending).toMatchObject({ state: JobState.Pending, reason: 'Provisioning' });
    expect(logged('adopting a box')).toBe(1);
    cloud.machines.get('adv-b-1')!.state = 'usable';
    await pollUntil(life, [h], 'the adopted job running', ([o]) => o!.state === JobState.Running);
    expect(cloud.asked).toEqual(['adv-b-1']);
    expect(cloud.deleted).toEqual([]);
  });

  it('after a restart, a machine that stopped under its job is preempted, not adopted', async () => {
    const cloud = new TinyCloud();
    const job = request('adv-r-1');
    cloud.machines.set(job.jobName, { key: job.jobName, id: 7, state: 'preempted' });
    const { life, logged } = lifecycle(cloud, [job]);
    const h = { backend: 'tiny', jobName: job.jobName, jobId: '7' };
    const [o] = await life.poll([h], new Set([h.jobName]));
    expect(o).toMatchObject({ state: JobState.Preempted, reason: 'Reclaimed' });
    expect(logged('adopting a box')).toBe(0);
  });

  it('a usable machine the job was never launched on: launched when the request is live, else NeverLaunched', async () => {
    const cloud = new TinyCloud();
    const live = request('adv-n-1');
    for (const [name, id] of [
      ['adv-n-1', 3],
      ['adv-n-2', 4],
    ] as const)
      cloud.machines.set(name, { key: name, id, state: 'usable' });
    const { life } = lifecycle(cloud, [live]);
    const handles = [
      { backend: 'tiny', jobName: 'adv-n-1', jobId: '3' },
      { backend: 'tiny', jobName: 'adv-n-2', jobId: '4' },
    ];
    const [adopted, never] = await life.poll(handles, new Set(handles.map((h) => h.jobName)));
    expect(adopted).toMatchObject({ state: JobState.Pending, reason: 'Provisioning' });
    expect(never).toMatchObject({
      state: JobState.Lost,
      reason: 'NeverLaunched',
      message: 'never started on the box',
    });
    await pollUntil(
      life,
      handles.slice(0, 1),
      'the adopted job running',
      ([o]) => o!.state === JobState.Running,
    );
    await waitFor(() => cloud.deleted.includes(4), { what: 'the never-launched machine deleted' });
    expect(cloud.deleted).toEqual([4]);
  });

  it('a machine no live attempt owns is swept; one owned, being provisioned or already going is not', async () => {
    const cloud = new TinyCloud();
    const { life, logged } = lifecycle(cloud);
    await life.submit(request('adv-mine-1'));
    cloud.machines.set('adv-owned-1', { key: 'adv-owned-1', id: 50, state: 'usable' });
    cloud.machines.set('adv-ghost-1', { key: 'adv-ghost-1', id: 51, state: 'usable' });
    cloud.machines.set('adv-going-1', { key: 'adv-going-1', id: 52, state: 'going' });
    // No handles: nothing runs here, but the pass still sweeps (`sweepsOrphans`).
    await life.poll([], new Set(['adv-owned-1']));
    await waitFor(() => cloud.deleted.includes(51), { what: 'the orphan deleted' });
    expect(cloud.deleted).toEqual([51]);
    expect(logged('deleting an orphaned box')).toBe(1);
  });

  it('a machine that is gone ends the attempt Lost, or Cancelled after a cancel; either is deleted', async () => {
    const cloud = new TinyCloud();
    const { life } = lifecycle(cloud);
    const lost = await life.submit(request('adv-lost-1'));
    const cancelled = await life.submit(request('adv-cancel-1'));
    for (const b of cloud.machines.values()) b.state = 'usable';
    await pollUntil(life, [lost, cancelled], 'both running', (os) =>
      os.every((o) => o.state === JobState.Running),
    );
    cloud.machines.delete('adv-lost-1');
    await life.cancel(cancelled);
    await waitFor(() => cloud.deleted.includes(2), { what: 'the cancelled machine deleted' });
    const [l, c] = await life.poll([lost, cancelled], new Set());
    expect(l).toEqual({
      jobName: 'adv-lost-1',
      jobId: '1',
      state: JobState.Lost,
      reason: 'BoxGone',
      message: 'box 1 is gone',
    });
    expect(c).toEqual({
      jobName: 'adv-cancel-1',
      jobId: '2',
      state: JobState.Cancelled,
      reason: 'Cancelled',
    });
  });

  it('a preempted machine ends the attempt Preempted with the cloud’s reason, once, and is deleted', async () => {
    const cloud = new TinyCloud();
    const { life } = lifecycle(cloud);
    const h = await life.submit(request('adv-p-1'));
    cloud.machines.get('adv-p-1')!.state = 'usable';
    await pollUntil(life, [h], 'running', ([o]) => o!.state === JobState.Running);
    cloud.machines.get('adv-p-1')!.state = 'preempted';
    const [o] = await life.poll([h], new Set([h.jobName]));
    expect(o).toEqual({
      jobName: 'adv-p-1',
      jobId: '1',
      state: JobState.Preempted,
      reason: 'Reclaimed',
      message: 'box 1 reclaimed',
    });
    await waitFor(() => cloud.deleted.includes(1), { what: 'the preempted machine deleted' });
    // Its machine gone, a later poll still says how it ended (not Lost).
    expect(await life.poll([h], new Set([h.jobName]))).toEqual([o]);
  });

  it('a provisioning failure surfaces once, as the attempt’s end, and its machine is deleted', async () => {
    const cloud = new TinyCloud();
    cloud.noOther = true;
    const { life, logged } = lifecycle(cloud);
    const h = await life.submit(request('adv-f-1'));
    // It vanishes while being created (no capacity) and there is no other to try.
    cloud.machines.delete('adv-f-1');
    const [o] = await pollUntil(life, [h], 'the failure', ([o]) => o!.state === JobState.Lost);
    expect(o).toEqual({
      jobName: 'adv-f-1',
      jobId: '1',
      state: JobState.Lost,
      reason: 'NoCapacity',
      message: 'no other box after 1',
    });
    expect(await life.poll([h], new Set([h.jobName]))).toEqual([o]);
    expect(logged('box could not be provisioned')).toBe(1);
    expect(cloud.asked).toEqual(['adv-f-1']);
  });

  it('the list failing makes every handle Unknown, not ended', async () => {
    const cloud = new TinyCloud();
    const { life } = lifecycle(cloud);
    const h = await life.submit(request('adv-u-1'));
    cloud.down = true;
    expect(await life.poll([h], new Set([h.jobName]))).toEqual([
      {
        jobName: 'adv-u-1',
        jobId: '1',
        state: JobState.Unknown,
        reason: 'Unreachable',
        message: 'the tiny cloud is down',
      },
    ]);
    expect(cloud.deleted).toEqual([]);
  });

  it('a job this adapter launched is swept once the controller no longer owns it (a lost write-ahead record)', async () => {
    const cloud = new TinyCloud();
    const { life } = lifecycle(cloud);
    const h = await life.submit(request('adv-dropped-1'));
    cloud.machines.get('adv-dropped-1')!.state = 'usable';
    await pollUntil(life, [h], 'the job running', (o) => o[0]!.state === JobState.Running);
    const id = cloud.machines.get('adv-dropped-1')!.id;
    // The status branch was reset (another writer): the attempt is in no live record any more.
    await life.poll([], new Set());
    await waitFor(() => cloud.deleted.includes(id), { what: 'the dropped job’s machine deleted' });
  });

  it('a machine whose delete is under way is not asked for again by the next polls', async () => {
    const cloud = new TinyCloud();
    const { life, logged } = lifecycle(cloud);
    cloud.machines.set('adv-ghost-1', { key: 'adv-ghost-1', id: 7, state: 'usable' });
    cloud.hold();
    for (let i = 0; i < 3; i++) await life.poll([], new Set());
    cloud.release();
    await waitFor(() => cloud.deleted.includes(7), { what: 'the orphan deleted' });
    expect(cloud.deleted).toEqual([7]);
    expect(logged('deleting an orphaned box')).toBe(1);
  });

  it('two machines of one job being deleted at once are both deleted (a delete is one per machine, not per job)', async () => {
    const cloud = new TinyCloud();
    const { life } = lifecycle(cloud);
    cloud.hold();
    const first = life.remove('adv-two-1', 1, 'stuck loading');
    const second = life.remove('adv-two-1', 2, 'attempt Succeeded');
    cloud.release();
    await Promise.all([first, second]);
    expect(cloud.deleted.sort()).toEqual([1, 2]);
  });

  it('close waits for the deletes under way', async () => {
    const cloud = new TinyCloud();
    const { life } = lifecycle(cloud);
    cloud.machines.set('adv-ghost-1', { key: 'adv-ghost-1', id: 9, state: 'usable' });
    cloud.hold();
    await life.poll([], new Set());
    const closed = life.close().then(() => 'closed');
    const first = await Promise.race([closed, new Promise((r) => setImmediate(() => r('waiting')))]);
    expect(first).toBe('waiting');
    expect(cloud.deleted).toEqual([]);
    cloud.release();
    expect(await closed).toBe('closed');
    expect(cloud.deleted).toEqual([9]);
  });
});
