/**
 * The real thing, small: a 2-process JAX + Orbax job (a train state sharded over a 2 × 2 device
 * mesh spanning both processes, gloo CPU collectives) under two `adv exec` processes with one
 * shared checkpoint dir. Orbax writes every process's shards into that dir and process 0
 * finalizes; the gang commits it; the next attempt restores it on both processes and ends with
 * the same parameters as a run that was never interrupted.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleExec } from '../runtime/bundle.js';
import { latestCommitted } from '../runtime/checkpoint.js';
import { openStore } from '../runtime/store/index.js';
import { removeTree } from './helpers/io.js';
import { freePort } from './helpers/net.js';
import { PYTHON, pythonAvailable } from './helpers/python/python.js';

/** Starting JAX twice, a distributed rendezvous, compiling, a few saves: slow on a busy CPU. */
const ATTEMPT_MS = 240_000;

/** Trains STEPS steps from the latest step in ADV_CKPT_DIR, saving every EVERY; prints a hash of the final state. */
const TRAIN_PY = String.raw`
import os, sys, hashlib
n, k = int(os.environ.get("JAX_NUM_PROCESSES", "1")), int(os.environ.get("JAX_PROCESS_ID", "0"))
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_cpu_collectives_implementation", "gloo")
if n > 1:
    jax.distributed.initialize(os.environ["JAX_COORDINATOR_ADDRESS"], n, k)
import orbax.checkpoint as ocp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jax.experimental import multihost_utils
sh = NamedSharding(Mesh(np.array(jax.devices()).reshape(-1, 2), ("data", "model")), P("data", "model"))
steps, every = int(os.environ["STEPS"]), int(os.environ["EVERY"])
@jax.jit
def update(w, s):
    return w * 0.999 + jnp.sin(w + s.astype(jnp.float32) * 0.01) * 0.001
mgr = ocp.CheckpointManager(os.environ["ADV_CKPT_DIR"])
w = jax.device_put(jnp.arange(64 * 64, dtype=jnp.float32).reshape(64, 64) / 4096.0, sh)
start = mgr.latest_step() or 0
if start:
    w = mgr.restore(start, args=ocp.args.StandardRestore({"w": jax.ShapeDtypeStruct((64, 64), jnp.float32, sharding=sh)}))["w"]
print("process %d: starts at step %d" % (k, start), flush=True)
for s in range(start, steps):
    w = update(w, jnp.int32(s))
    if (s + 1) % every == 0:
        mgr.save(s + 1, args=ocp.args.StandardSave({"w": w}))
mgr.wait_until_finished()
mgr.close()
full = multihost_utils.process_allgather(w, tiled=True) if n > 1 else w
print("process %d: final %s" % (k, hashlib.sha256(np.asarray(full).tobytes()).hexdigest()[:16]), flush=True)
`;

let tmp: string;
let bundle: string;
let train: string;
const run = pythonAvailable('the JAX + Orbax multi-host checkpoint test');

beforeAll(async () => {
  if (!run) return;
  tmp = await mkdtemp(join(tmpdir(), 'adv-mh-jax-'));
  bundle = join(tmp, 'worker', 'adv-exec.mjs');
  await mkdir(join(tmp, 'worker'));
  await bundleExec(bundle);
  train = join(tmp, 'train.py');
  await writeFile(train, TRAIN_PY);
}, 120_000);
afterAll(() => tmp && removeTree(tmp));

/** One attempt of `processes` adv execs in shared mode; resolves to each one's output once all have exited 0. */
async function attempt(url: string, name: string, n: number, steps: number): Promise<string[]> {
  const port = await freePort();
  const shared = join(tmp, name, 'shared');
  return Promise.all(
    Array.from({ length: n }, (_, k) => {
      const args = ['--store', url, '--run', 'jax', '--attempt', name.replace(/\D/g, '') || '1'];
      const child = spawn(
        process.execPath,
        [
          bundle,
          ...args,
          '--process',
          String(k),
          '--processes',
          String(n),
          '--ckpt-mode',
          'shared',
          '--ckpt-dir',
          shared,
          '--job-dir',
          join(tmp, name, `p${k}`),
          '--',
          PYTHON,
          train,
        ],
        {
          env: {
            ...process.env,
            JAX_PLATFORMS: 'cpu',
            ADV_COORDINATOR_ADDRESS: `127.0.0.1:${port}`,
            STEPS: String(steps),
            EVERY: '5',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      child.stdout.on('data', (b: Buffer) => (out += b.toString()));
      child.stderr.on('data', (b: Buffer) => (out += b.toString()));
      // A gang that hangs (a rank waiting on one that is gone) fails the test instead of holding it.
      const job = join(tmp, name, `p${k}`);
      const limit = setTimeout(() => {
        out += `\n(test: no end after ${ATTEMPT_MS / 1000} s; killed)`;
        child.kill('SIGKILL');
        killWorkload(job);
      }, ATTEMPT_MS);
      return new Promise<string>((resolve, reject) =>
        child.on('close', (code) => {
          clearTimeout(limit);
          killWorkload(job);
          if (code === 0) resolve(out);
          else reject(new Error(`process ${k} exited ${code}:\n${out}`));
        }),
      );
    }),
  );
}

/** Kills what is left of a workload's process group (adv exec died before it could). */
function killWorkload(job: string): void {
  try {
    const { childPid } = JSON.parse(readFileSync(join(job, 'exec.json'), 'utf8')) as { childPid: number };
    process.kill(-childPid, 'SIGKILL');
  } catch {
    // no record, or already gone
  }
}

const finalOf = (out: string) => /final ([0-9a-f]{16})/.exec(out)?.[1];

describe.runIf(run)('a 2-process JAX + Orbax job in a shared checkpoint dir', () => {
  it(
    'commits every process’s shards as one checkpoint, restores it on both processes or on one, and ends bit-identical to an uninterrupted run',
    async () => {
      const root = await mkdtemp(join(tmpdir(), 'adv-mh-jax-store-'));
      const url = `file://${root}`;
      const store = await openStore(url);
      // Attempt 1 stops at step 10 (as if preempted after its save); attempt 2 goes on to 15.
      await attempt(url, 'a1', 2, 10);
      const m = (await latestCommitted(store, 'jax'))!;
      expect(m).toMatchObject({ step: 10, processes: 2 });
      expect(m.files.some((f) => f.path.includes('process_1'))).toBe(true);
      const resumed = await attempt(url, 'a2', 2, 15);
      for (const out of resumed) expect(out).toContain('starts at step 10');
      expect(finalOf(resumed[0]!)).toBe(finalOf(resumed[1]!));
      // The same 15 steps in one go, on another run.
      const ref = await mkdtemp(join(tmpdir(), 'adv-mh-jax-ref-'));
      const [straight] = await attempt(`file://${ref}`, 'ref1', 2, 15);
      expect(finalOf(straight!)).toBeDefined();
      expect(finalOf(resumed[0]!)).toBe(finalOf(straight!));
      // Resumed on ONE process from the 2-process checkpoint: Orbax reads every shard back into
      // the new sharding (a 1 × 2 mesh of this process's devices), and the result is the same as
      // 20 steps on 2 processes in one go.
      expect(await latestCommitted(store, 'jax')).toMatchObject({ step: 15, processes: 2 });
      const [alone] = await attempt(url, 'a3', 1, 20);
      expect(alone).toContain('starts at step 15');
      const ref20 = await mkdtemp(join(tmpdir(), 'adv-mh-jax-ref20-'));
      const [straight20] = await attempt(`file://${ref20}`, 'ref1', 2, 20);
      expect(finalOf(straight20!)).toBeDefined();
      expect(finalOf(alone!)).toBe(finalOf(straight20!));
      await Promise.all([removeTree(root), removeTree(ref), removeTree(ref20)]);
    },
    5 * ATTEMPT_MS,
  );
});
