import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * The pids of the jobs a remote host launched under `workDir` (`<work>/<job>/pid`), those whose job
 * name `keep` accepts: what a test or a benchmark kills when a fake machine goes away or it ends.
 */
export async function jobPids(
  workDir: string,
  keep: (job: string) => boolean = () => true,
): Promise<number[]> {
  const pids: number[] = [];
  for (const d of await readdir(workDir).catch(() => [])) {
    if (!keep(d)) continue;
    const pid = Number(await readFile(join(workDir, d, 'pid'), 'utf8').catch(() => '0'));
    if (pid) pids.push(pid);
  }
  return pids;
}

/**
 * The pids of the local backend's jobs under a controller's data dir
 * (`<data>/local/<backend>/jobs/<job>/pid`: each job's `adv exec`).
 */
export async function localJobPids(dataDir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const backend of await readdir(join(dataDir, 'local')).catch(() => []))
    pids.push(...(await jobPids(join(dataDir, 'local', backend, 'jobs'))));
  return pids;
}

/**
 * Every job's `output.log` under `workDir` (what `adv exec` itself said, beside the workload), job
 * by job: what a failed multi-host assertion prints, since the store's logs hold the workload's only.
 */
export async function jobOutputs(
  workDir: string,
  keep: (job: string) => boolean = () => true,
): Promise<string> {
  const out: string[] = [];
  for (const d of (await readdir(workDir).catch(() => [])).sort()) {
    if (!keep(d)) continue;
    out.push(
      `--- ${d}/output.log\n${await readFile(join(workDir, d, 'output.log'), 'utf8').catch(() => '(none)')}`,
    );
  }
  return out.join('\n');
}
