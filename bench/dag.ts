/**
 * A 1,000-node DAG (issue 7): layered with fan-out 10 (1 → 10 → 100 → 889), trivial nodes
 * (`true`) on the local backend, 16 at a time. Per reconcile pass: the controller's CPU time and
 * wall time against the number of nodes whose state changed in it. The target: cost proportional
 * to the nodes that changed, not to the DAG's size. Also the controller's total CPU against the
 * sum of the node runtimes.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Controller } from '../controller/controller.js';
import { median, stopLocalJobs, table } from './lib.js';

const N = Number(process.env.BENCH_DAG_NODES ?? 1000);
const FAN = 10;

const dir = await mkdtemp(join(tmpdir(), 'adv-bench-dag-'));
await mkdir(join(dir, 'dags'), { recursive: true });
await mkdir(join(dir, 'backends'), { recursive: true });
await writeFile(
  join(dir, 'backends', 'local.yaml'),
  'apiVersion: adventuretime.dev/v1alpha1\nkind: Backend\nmetadata: {name: local}\nspec: {type: local, maxConcurrent: 16}\n',
);
const nodes = Array.from({ length: N }, (_, i) =>
  i === 0
    ? `    - {id: n0, run: {command: ['true']}}`
    : `    - {id: n${i}, needs: [n${Math.floor((i - 1) / FAN)}], run: {command: ['true']}}`,
);
await writeFile(
  join(dir, 'dags', 'big.yaml'),
  `apiVersion: adventuretime.dev/v1alpha1\nkind: DAG\nmetadata: {name: big}\nspec:\n  defaults: {backendSelector: {order: [local]}}\n  nodes:\n${nodes.join('\n')}\n`,
);
const ID = ['-c', 'user.name=Bench', '-c', 'user.email=bench@example.com'];
execFileSync('git', ['init', '-q', '-b', 'main'], { cwd: dir });
execFileSync('git', ['add', '-A'], { cwd: dir });
execFileSync('git', [...ID, 'commit', '-qm', 'big DAG'], { cwd: dir });

const c = await Controller.create({
  repo: dir,
  dataDir: join(dir, '.adv'),
  pollIntervalMs: 100,
  resyncIntervalMs: 3_600_000,
});
await c.init();
const phases = () => {
  const out = new Map<string, string>();
  for (let i = 0; i < N; i++) out.set(`n${i}`, c.runStatus(`big.n${i}`)?.status.phase ?? 'none');
  return out;
};
const passes: { changed: number; cpu: number; wall: number }[] = [];
const t0 = Date.now();
let before = phases();
for (;;) {
  const u0 = process.cpuUsage();
  const w0 = performance.now();
  await c.pass();
  const wall = performance.now() - w0;
  const u = process.cpuUsage(u0);
  const after = phases();
  let changed = 0;
  for (const [k, v] of after) if (before.get(k) !== v) changed++;
  before = after;
  passes.push({ changed, cpu: (u.user + u.system) / 1000, wall });
  const dag = c.view.dagStatus('big');
  if (dag?.status.phase === 'Succeeded' || dag?.status.phase === 'Failed') break;
  if (Date.now() - t0 > 30 * 60_000) throw new Error('timed out');
  await new Promise((r) => setTimeout(r, 50));
}
const total = Date.now() - t0;
let runtime = 0;
for (let i = 0; i < N; i++) {
  const a = c.runStatus(`big.n${i}`)!.status.attempts.at(-1)!;
  runtime += Date.parse(a.finishedAt!) - Date.parse(a.startedAt!);
}
await c.stop();
await stopLocalJobs(c.dataDir);
await rm(dir, { recursive: true, force: true });

const buckets: [string, (n: number) => boolean][] = [
  ['0', (n) => n === 0],
  ['1–10', (n) => n >= 1 && n <= 10],
  ['11–30', (n) => n > 10 && n <= 30],
  ['31+', (n) => n > 30],
];
const rows = buckets.map(([label, f]) => {
  const ps = passes.filter((p) => f(p.changed));
  if (!ps.length) return [label, 0, '-', '-', '-'];
  const perNode = ps.filter((p) => p.changed).map((p) => p.cpu / p.changed);
  return [
    label,
    ps.length,
    median(ps.map((p) => p.cpu)),
    median(ps.map((p) => p.wall)),
    perNode.length ? median(perNode) : '-',
  ];
});
const cpu = passes.reduce((s, p) => s + p.cpu, 0);
console.log(
  `\n${N}-node DAG, fan-out ${FAN}, trivial nodes on the local backend (16 at a time): ${passes.length} passes, ${(total / 1000).toFixed(1)} s\n`,
);
console.log(
  table(
    [
      'nodes changed in the pass',
      'passes',
      'controller CPU p50 ms',
      'wall p50 ms',
      'CPU ms per changed node',
    ],
    rows as (string | number)[][],
  ),
);
console.log(
  `\ncontroller CPU in all: ${(cpu / 1000).toFixed(1)} s; sum of node runtimes: ${(runtime / 1000).toFixed(1)} s; ratio ${(cpu / runtime).toFixed(2)}; DAG wall time ${(total / 1000).toFixed(1)} s`,
);
