/**
 * The multi-host example jobs (examples/multihost) for integration tests: their files for a specs
 * repo, and the final parameters of an uninterrupted run of the same job, computed here by running
 * its processes directly (no adv exec), once per job and process count.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../net.js';
import { REPO } from '../paths.js';
import { PYTHON } from './python.js';

export const MULTIHOST = join(REPO, 'examples', 'multihost');
export type Job = 'train_jax.py' | 'train_torch_dcp.py';

/** The example's files, to commit at a specs repo's root (the job's code). */
export async function multihostFiles(): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const f of ['common.py', 'train_jax.py', 'train_torch_dcp.py'])
    files[f] = await readFile(join(MULTIHOST, f), 'utf8');
  return files;
}

/** `final-params <sha256>` from a job's output. */
export function finalParams(output: string): string | undefined {
  return /^final-params ([0-9a-f]{64})$/m.exec(output)?.[1];
}

const references = new Map<string, Promise<string>>();

/** The final parameters of an uninterrupted `processes`-process run of `job` with `args`. */
export function referenceParams(job: Job, processes: number, args: string[]): Promise<string> {
  const key = `${job} ${processes} ${args.join(' ')}`;
  let p = references.get(key);
  if (!p) references.set(key, (p = runDirect(job, processes, args)));
  return p;
}

async function runDirect(job: Job, processes: number, args: string[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'adv-reference-'));
  try {
    const port = await freePort();
    const outputs = await Promise.all(
      Array.from({ length: processes }, (_, k) =>
        runProcess(job, args, {
          ADV_CKPT_DIR: join(dir, 'ckpt'),
          JAX_NUM_PROCESSES: String(processes),
          JAX_PROCESS_ID: String(k),
          JAX_COORDINATOR_ADDRESS: `127.0.0.1:${port}`,
          MASTER_ADDR: '127.0.0.1',
          MASTER_PORT: String(port + 1),
          RANK: String(k),
          WORLD_SIZE: String(processes),
        }),
      ),
    );
    const params = finalParams(outputs[0]!);
    if (!params)
      throw new Error(`the uninterrupted ${job} printed no final-params:\n${outputs.join('\n---\n')}`);
    return params;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function runProcess(job: Job, args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [join(MULTIHOST, job), ...args], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.on('error', reject);
    child.on('close', (code) =>
      code === 0 ? resolve(out) : reject(new Error(`${job} exited ${code}:\n${out}`)),
    );
  });
}

/** A step's manifest in a `file://` store's directory, or undefined while it has none. */
export async function manifestAt(
  storeDir: string,
  run: string,
  step: number,
): Promise<{ processes?: number; files: { path: string }[] } | undefined> {
  const text = await readFile(
    join(storeDir, 'runs', run, 'ckpt', String(step), 'manifest.json'),
    'utf8',
  ).catch(() => undefined);
  return text ? (JSON.parse(text) as { processes?: number; files: { path: string }[] }) : undefined;
}
