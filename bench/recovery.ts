/**
 * Recovery (issue 6).
 *
 * 1. Preemption-to-resubmit latency: a run on the local backend is preempted (its `adv exec` takes
 *    a SIGTERM that is not a cancel, as from a spot reclaim); measured from the end the backend
 *    records (exit.json's finishedAt) to the next attempt accepted by the other backend (its job
 *    id recorded), with the controller's own loop, against the poll interval.
 * 2. Cost of a reconcile pass with 1,000 active runs: one poll call per backend, CPU time and
 *    wall time per pass, with nothing changing and with 10 runs preempted in the pass.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Controller } from '../controller/controller.js';
import { localBackend } from '../controller/backends/local/index.js';
import { BACKENDS } from '../controller/backends/registry.js';
import type { Backend, BackendDescriptor, JobHandle, ObservedJob } from '../controller/backends/types.js';
import { median, percentile, stopLocalJobs, table } from './lib.js';

const ID = ['-c', 'user.name=Bench', '-c', 'user.email=bench@example.com'];

async function repoWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'adv-bench-rec-'));
  for (const [rel, text] of Object.entries(files)) {
    await mkdir(join(dir, rel, '..'), { recursive: true });
    await writeFile(join(dir, rel), text);
  }
  execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: dir });
  execFileSync('git', ['add', '-A'], { cwd: dir });
  execFileSync('git', [...ID, 'commit', '-qm', 'bench'], { cwd: dir });
  return dir;
}

const backend = (name: string, type = 'local') =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: Backend\nmetadata: {name: ${name}}\nspec: {type: ${type}}\n`;

async function latency(pollMs: number, runs: number): Promise<number[]> {
  const files: Record<string, string> = {
    'backends/a.yaml': backend('local-a'),
    'backends/b.yaml': backend('local-b'),
  };
  for (let i = 0; i < runs; i++) {
    files[`runs/p${i}.yaml`] = `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: p${i}}
spec:
  command: [sh, -c, 'if [ "$ADV_ATTEMPT" = 1 ]; then sleep ${(1 + i * 0.37).toFixed(2)}; kill -TERM $PPID; sleep 30; fi']
  backendSelector: {order: [local-a, local-b]}
`;
  }
  const repo = await repoWith(files);
  const dataDir = join(repo, '.adv');
  const c = await Controller.create({ repo, dataDir, pollIntervalMs: pollMs, fetchIntervalMs: 60_000 });
  const loop = c.run();
  const accepted = new Map<string, number>();
  const deadline = Date.now() + 120_000;
  while (accepted.size < runs && Date.now() < deadline) {
    for (let i = 0; i < runs; i++) {
      const a = c.runStatus(`p${i}`)?.status.attempts[1];
      if (a?.jobId && !accepted.has(`p${i}`)) accepted.set(`p${i}`, Date.now());
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const first = c.runStatus(`p${i}`)!.status.attempts[0]!;
    if (first.class !== 'Preempted' || !accepted.has(`p${i}`))
      throw new Error(`p${i}: ${JSON.stringify(c.runStatus(`p${i}`)!.status.attempts)}`);
    out.push(accepted.get(`p${i}`)! - Date.parse(first.finishedAt!));
  }
  await c.stop();
  await loop;
  await stopLocalJobs(dataDir);
  // A job of the last attempt may still be writing its records: retry the removal.
  await rm(repo, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
  return out;
}

/** A backend that answers like a real one (one native call per poll) without running anything. */
class FleetBackend implements Backend {
  readonly type = 'local' as const;
  polls = 0;
  polled = 0;
  submitted = 0;
  readonly preempt = new Set<string>();
  private next = 1;
  constructor(readonly name: string) {}
  async submit(jobs: readonly { jobName: string }[]) {
    this.submitted += jobs.length;
    return jobs.map((j) => ({ backend: this.name, jobName: j.jobName, jobId: String(this.next++) }));
  }
  async find(): Promise<undefined> {
    return undefined;
  }
  async poll(handles: readonly JobHandle[]): Promise<ObservedJob[]> {
    this.polls++;
    this.polled += handles.length;
    return handles.map((h) => ({
      jobName: h.jobName,
      jobId: h.jobId,
      state: this.preempt.delete(h.jobName) ? ('Preempted' as const) : ('Running' as const),
      ...(this.preempt.has(h.jobName) ? {} : { startedAt: '2026-11-22T12:00:00.000Z' }),
    }));
  }
  async cancel(): Promise<void> {}
  async *logs(): AsyncIterable<string> {}
}

async function passCost(n: number) {
  const files: Record<string, string> = {
    'backends/a.yaml': backend('fleet-a'),
    'backends/b.yaml': backend('fleet-b'),
  };
  for (let i = 0; i < n; i++)
    files[`runs/r${i}.yaml`] =
      `apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata: {name: r${i}}\nspec:\n  command: [train]\n  backendSelector: {order: [${i % 2 ? 'fleet-b, fleet-a' : 'fleet-a, fleet-b'}]}\n`;
  const repo = await repoWith(files);
  const fleets = new Map<string, FleetBackend>();
  // Every `local` Backend of this repo gets a fleet adapter instead of processes.
  const fleet: BackendDescriptor = {
    ...localBackend,
    create: (spec) => {
      const b = new FleetBackend(spec.metadata.name);
      fleets.set(b.name, b);
      return b;
    },
  };
  const c = await Controller.create({
    repo,
    dataDir: join(repo, '.adv'),
    backends: BACKENDS.map((d) => (d.type === 'local' ? fleet : d)),
    pollIntervalMs: 0,
    resyncIntervalMs: 3_600_000,
  });
  await c.init();
  for (let i = 0; i < 5; i++) await c.pass(); // submit all, see them running
  const measure = async (passes: number, before?: () => void) => {
    const wall: number[] = [];
    const cpu: number[] = [];
    const polls: number[] = [];
    const commits: number[] = [];
    for (let i = 0; i < passes; i++) {
      before?.();
      const p0 = [...fleets.values()].reduce((s, f) => s + f.polls, 0);
      const u0 = process.cpuUsage();
      const t0 = performance.now();
      const stats = await c.pass();
      wall.push(performance.now() - t0);
      const u = process.cpuUsage(u0);
      cpu.push((u.user + u.system) / 1000);
      polls.push([...fleets.values()].reduce((s, f) => s + f.polls, 0) - p0);
      commits.push(stats.commits);
    }
    return {
      wall: median(wall),
      p95: percentile(wall, 95),
      cpu: median(cpu),
      polls: median(polls),
      commits: median(commits),
    };
  };
  const live = () =>
    [...Array(n).keys()].filter((i) => c.runStatus(`r${i}`)?.status.attempts.at(-1)?.phase === 'Running')
      .length;
  if (live() !== n) throw new Error(`only ${live()} of ${n} running`);
  const steady = await measure(20);
  let k = 0;
  const churn = await measure(10, () => {
    // 10 runs preempted in this pass: each gets a new attempt on the other backend.
    for (let j = 0; j < 10; j++) {
      const name = `r${(k++ * 97) % n}`;
      const a = c.runStatus(name)!.status.attempts.at(-1)!;
      fleets.get(a.backend)!.preempt.add(a.jobName);
    }
  });
  const resubmitted = [...fleets.values()].reduce((s, f) => s + f.submitted, 0) - n;
  await c.stop();
  // A job of the last attempt may still be writing its records: retry the removal.
  await rm(repo, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
  return { steady, churn, resubmitted };
}

const rows: (string | number)[][] = [];
for (const poll of [250, 1000, 2000]) {
  const xs = await latency(poll, 6);
  rows.push([`${poll} ms`, median(xs), Math.max(...xs), median(xs) / poll]);
}
console.log('\nPreemption → next attempt accepted by the other backend (local backends, 6 runs each)\n');
console.log(table(['poll interval', 'p50 ms', 'max ms', 'p50 / poll interval'], rows));

const N = Number(process.env.BENCH_ACTIVE ?? 1000);
const cost = await passCost(N);
console.log(
  `\nOne reconcile pass with ${N} active runs on two backends (fake in-process backends: this measures the controller)\n`,
);
console.log(
  table(
    ['pass', 'wall p50 ms', 'wall p95 ms', 'CPU p50 ms', 'backend polls', 'commits'],
    [
      [
        'nothing changed',
        cost.steady.wall,
        cost.steady.p95,
        cost.steady.cpu,
        cost.steady.polls,
        cost.steady.commits,
      ],
      [
        '10 preempted → 10 resubmitted',
        cost.churn.wall,
        cost.churn.p95,
        cost.churn.cpu,
        cost.churn.polls,
        cost.churn.commits,
      ],
    ],
  ),
);
console.log(`\n(${cost.resubmitted} resubmissions in the churn passes)`);
