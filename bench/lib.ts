/** Small helpers shared by the benchmarks: timing, child-process isolation, tables, cleanup. */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { killTree } from '../test/helpers/processes.js';
import { localJobPids } from '../test/helpers/backends/job-pids.js';

export interface Sample {
  ms: number;
  maxRssMiB: number;
  [extra: string]: number;
}

/** Runs `script --mode M args…` in a fresh Node process (clean heap, own peak RSS) and parses its JSON line. */
export function isolated(script: string, args: string[], nodeFlags: string[] = []): Sample {
  const out = execFileSync(
    process.execPath,
    [...nodeFlags, '--import', 'tsx', fileURLToPath(new URL(script, import.meta.url)), ...args],

    {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  const line = out.trim().split('\n').pop()!;
  return JSON.parse(line) as Sample;
}

/** Prints one JSON sample line: wall time of `fn` and the process's peak RSS. */
export async function report(fn: () => Promise<Record<string, number> | void>): Promise<void> {
  const t0 = performance.now();
  const extra = (await fn()) ?? {};
  const ms = performance.now() - t0;
  const maxRssMiB = process.resourceUsage().maxRSS / 1024;
  console.log(JSON.stringify({ ms, maxRssMiB, ...extra }));
}

export const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

export const percentile = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

export function table(headers: string[], rows: (string | number)[][]): string {
  const fmt = (v: string | number) =>
    typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : v;
  return [
    `| ${headers.join(' | ')} |`,
    `|${headers.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.map(fmt).join(' | ')} |`),
  ].join('\n');
}

/** Controller intervals for a bench that drives passes itself: no timer fetches, polls or resyncs. */
export const PASSES_ONLY = {
  resyncIntervalMs: 3_600_000,
  fetchIntervalMs: 3_600_000,
  pollIntervalMs: 3_600_000,
} as const;

/**
 * Stops what a benchmark's controller started on the local backend, before its data dir goes:
 * each job's `adv exec` and everything under it, SIGTERM and then SIGKILL. A controller's `stop()`
 * leaves its jobs running (they outlive it by design); a benchmark's must not outlive the benchmark.
 */
export async function stopLocalJobs(dataDir: string): Promise<void> {
  await killTree(await localJobPids(dataDir));
}

/** Writes `size` random bytes to `path` (a checkpoint's data stands in: incompressible). */
export async function writeRandom(path: string, size: number): Promise<void> {
  const out = createWriteStream(path);
  const chunk = randomBytes(4 * 2 ** 20);
  for (let left = size; left > 0; left -= chunk.length) {
    if (!out.write(left >= chunk.length ? chunk : chunk.subarray(0, left)))
      await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((r, j) => out.end((e?: Error | null) => (e ? j(e) : r())));
}
