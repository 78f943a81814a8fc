/**
 * The backend contract: the same scenarios, one table, against every registered backend type on
 * the real component or the faithful fake each already has (test/helpers/backends/every-backend.ts). What
 * the controller counts on from an adapter, whatever it drives:
 *
 * - **runs and batches**: `poll` answers once per handle, in order, with the job's end (an exit
 *   code where the backend has one);
 * - **submit is idempotent by name**: a second submit of a name returns the job the first made,
 *   and the workload starts once;
 * - **found after a restart**: an adapter made anew (a changed spec, a restarted controller) finds
 *   a live job by its name and observes it, and finds nothing under a name never submitted;
 * - **close leaves jobs alone**: closing an adapter stops nothing that runs;
 * - **cancel**: the job ends `Cancelled`, and its workload stops;
 * - **orphans**: an adapter that creates what it runs on (`sweepsOrphans`) deletes a job no live
 *   attempt owns; one that does not leaves it running.
 *
 * A type registered in `controller/backends/registry.ts` is in the table by being registered: the
 * suite fails until the type has a fixture in `every-backend.ts`.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { BACKENDS } from '../controller/backends/registry.js';
import {
  isEnded,
  JobState,
  submitOne,
  type Backend,
  type JobHandle,
  type ObservedJob,
} from '../controller/backends/types.js';
import { buildJobRequest, envSecrets } from '../controller/loop/execute/job-request.js';
import type { RunSpec } from '../controller/spec/schema.js';
import { urlStoreTarget } from '../controller/storage.js';
import {
  BACKEND_KINDS,
  everyBackendAvailable,
  useEveryBackend,
  type BackendKind,
} from './helpers/backends/every-backend.js';
import { waitFor } from './helpers/wait.js';
import { alive } from './helpers/processes.js';

/**
 * Outside CI, `ADV_CONTRACT_WITHOUT=slurm,…` leaves kinds out (a SLURM cluster may be busy with
 * another run on a shared machine); in CI every kind runs.
 */
function kindsToRun(): readonly BackendKind[] {
  const without = (process.env.ADV_CONTRACT_WITHOUT ?? '').split(',').filter(Boolean);
  if (!without.length) return BACKEND_KINDS;
  if (process.env.CI) throw new Error('ADV_CONTRACT_WITHOUT is for local runs: in CI every backend runs');
  console.warn(`SKIPPING the backend contract on ${without.join(', ')} (ADV_CONTRACT_WITHOUT)`);
  return BACKEND_KINDS.filter((k) => !without.includes(k));
}

/** How long one job may take to start or end on a loaded machine (a TPU node or a rental is provisioned first). */
const JOB_MS = 120_000;

describe('every registered backend type has a contract fixture', () => {
  it('the table is the registry', () => {
    expect([...BACKEND_KINDS].sort()).toEqual(BACKENDS.map((d) => d.type).sort());
  });
});

const kinds = kindsToRun();
const available = everyBackendAvailable('the backend contract suite');

describe.runIf(available)('the backend contract', { timeout: 6 * JOB_MS }, () => {
  const every = useEveryBackend('adv-contract-', kinds);
  const store = () => join(every.tmp, 'store');
  const marks = () => join(store(), 'marks');
  let head = '';
  /** Per kind, the contract jobs not known to have ended: what every poll passes as `owned`. */
  const live = new Map<BackendKind, Set<string>>();
  const liveOn = (kind: BackendKind) => live.get(kind) ?? live.set(kind, new Set()).get(kind)!;

  const adapter = (kind: BackendKind): Backend => {
    const b = every.controller.adapters.instance(kind);
    if (!b) throw new Error(`no adapter for the ${kind} backend`);
    return b;
  };

  /** One attempt's request, built the way the controller builds it, for a shell `script`. */
  const request = (kind: BackendKind, run: string, script: string) => {
    const spec: RunSpec = {
      command: ['sh', '-c', script],
      env: { MARK: join(marks(), `${kind}-${run}`) },
      backendSelector: { order: [kind] },
    } as RunSpec;
    const jobName = `adv-${run}-1`;
    return buildJobRequest(run, { n: 1, jobName, codeCommit: head }, spec, {
      secrets: envSecrets({}),
      controllerEnv: {},
      passEnv: [],
      store: urlStoreTarget(`file://${store()}`),
    });
  };

  const submit = async (kind: BackendKind, run: string, script: string): Promise<JobHandle> => {
    const job = request(kind, run, script);
    liveOn(kind).add(job.jobName);
    return submitOne(adapter(kind), job);
  };

  /** Polls `handles` (with every live contract job as owned) until `done` holds for the answer. */
  const pollUntil = async (
    kind: BackendKind,
    handles: JobHandle[],
    what: string,
    done: (o: ObservedJob[]) => boolean,
  ): Promise<ObservedJob[]> => {
    let last: ObservedJob[] = [];
    return waitFor(
      async () => {
        last = await adapter(kind).poll(handles, liveOn(kind));
        for (const o of last) if (isEnded(o.state)) liveOn(kind).delete(o.jobName);
        return done(last) ? last : undefined;
      },
      { what: `${kind}: ${what}`, timeoutMs: JOB_MS, everyMs: 250, detail: () => last },
    );
  };

  /**
   * The pids the job's workload wrote at each start. A line that is not a pid is the command
   * changed on its way (a backend that lets `$$` be rewritten runs another command than `local`).
   */
  const starts = async (kind: BackendKind, run: string): Promise<number[]> => {
    const text = await readFile(join(marks(), `${kind}-${run}`), 'utf8').catch(() => '');
    const lines = text.split('\n').filter(Boolean);
    for (const l of lines)
      if (!/^\d+$/.test(l) || Number(l) < 2)
        throw new Error(
          `${kind}: the workload wrote ${JSON.stringify(l)} for its pid ($$): its command was changed on the way`,
        );
    return lines.map(Number);
  };

  const LONG = 'echo "$$" >> "$MARK"; exec sleep 600';

  beforeAll(async () => {
    await every.start({ 'README.md': 'the backend contract\n' });
    // One rental per contract job (a destroyed instance's offer does not come back).
    for (let i = 0; i < 8; i++) every.vast.seedOffer({ dph_total: 0.3 });
    head = (await every.repo.git('rev-parse', 'HEAD')).trim();
    await mkdir(marks(), { recursive: true });
  }, 2 * JOB_MS);

  describe.each(kinds)('%s', (kind) => {
    let long: JobHandle;

    it('runs jobs and polls them in one batch: one answer per handle, in order, with the end', async () => {
      const ok = await submit(kind, `ct-${kind}-ok`, 'echo fine');
      const bad = await submit(kind, `ct-${kind}-bad`, 'exit 3');
      const seen = await pollUntil(kind, [bad, ok], 'both jobs ended', (o) =>
        o.every((x) => isEnded(x.state)),
      );
      expect(seen.map((o) => o.jobName)).toEqual([bad.jobName, ok.jobName]);
      expect(seen.map((o) => o.state)).toEqual([JobState.Failed, JobState.Succeeded]);
      if (seen[0]!.exitCode !== undefined) expect(seen[0]!.exitCode).toBe(3);
    });

    it('is idempotent by name: a second submit returns the same job, and the workload starts once', async () => {
      long = await submit(kind, `ct-${kind}-long`, LONG);
      const again = await submitOne(adapter(kind), request(kind, `ct-${kind}-long`, LONG));
      expect(again.jobId).toBe(long.jobId);
      // The adapter owns idempotence: it says it found the job rather than made it.
      expect(again.adopted).toBe(true);
      await pollUntil(kind, [long], 'the long job running', (o) => o[0]!.state === JobState.Running);
      await waitFor(async () => (await starts(kind, `ct-${kind}-long`)).length > 0, {
        what: `${kind}: the long job's start mark`,
        timeoutMs: JOB_MS,
      });
    });

    it('a new adapter (restart, changed spec) finds the live job by name and observes it; close stops nothing', async () => {
      const fresh = await every.controller.adapters.restart(kind);
      expect(fresh).toBeDefined();
      const found = await adapter(kind).find(long.jobName);
      expect(found?.jobId).toBe(long.jobId);
      expect(await adapter(kind).find(`adv-ct-${kind}-never-1`)).toBeUndefined();
      await pollUntil(
        kind,
        [long],
        'the long job running, seen by the new adapter',
        (o) => o[0]!.state === JobState.Running,
      );
      expect(await starts(kind, `ct-${kind}-long`)).toHaveLength(1);
    });

    it('cancel ends the job Cancelled', async () => {
      await adapter(kind).cancel(long);
      const [o] = await pollUntil(kind, [long], 'the long job ended after cancel', (x) =>
        isEnded(x[0]!.state),
      );
      expect(o!.state).toBe(JobState.Cancelled);
      // Submitted twice, found by a second adapter, cancelled: it started once, and it stopped.
      const pids = await starts(kind, `ct-${kind}-long`);
      expect(pids).toHaveLength(1);
      await waitFor(() => !alive(pids[0]!), {
        what: `${kind}: the cancelled workload (pid ${pids[0]}) gone`,
        timeoutMs: JOB_MS,
      });
    });

    it('a job no live attempt owns is deleted where the adapter sweeps orphans, and left alone elsewhere', async () => {
      const orphan = await submit(kind, `ct-${kind}-orphan`, LONG);
      await pollUntil(kind, [orphan], 'the orphan-to-be running', (o) => o[0]!.state === JobState.Running);
      const pid = await waitFor(async () => (await starts(kind, `ct-${kind}-orphan`))[0], {
        what: `${kind}: the orphan's start mark`,
        timeoutMs: JOB_MS,
        detail: () => adapter(kind).poll([orphan], new Set([orphan.jobName])),
      });
      liveOn(kind).delete(orphan.jobName);
      const b = adapter(kind);
      if (b.sweepsOrphans) {
        await waitFor(
          async () => {
            await b.poll([], liveOn(kind));
            return (await b.find(orphan.jobName)) === undefined && !alive(pid);
          },
          {
            what: `${kind}: the orphan deleted by a poll that does not own it`,
            timeoutMs: JOB_MS,
            everyMs: 250,
          },
        );
      } else {
        await b.poll([], liveOn(kind));
        const [o] = await b.poll([orphan], new Set([orphan.jobName]));
        expect(o!.state).toBe(JobState.Running);
        await b.cancel(orphan);
        liveOn(kind).add(orphan.jobName);
        await pollUntil(kind, [orphan], 'the job ended after cancel', (x) => isEnded(x[0]!.state));
      }
    });
  });
});
