/**
 * The `gcp-tpu` backend (issue 15), with the real gcloud against the fake TPU API on loopback and
 * a real sshd serving each worker address, against the native tools in the same run:
 *   - READY → every worker running: the adapter's launch on the 4 workers of a v4-32 node (code
 *     and runtime shipped, job dirs written, `adv exec` started), cold and warm, against one plain
 *     `ssh HOST true` to each worker (OpenSSH, in parallel);
 *   - one poll for 100 nodes against one `gcloud compute tpus tpu-vm list` alone: the poll that
 *     looks at every worker over SSH (the first, then one every 15 s per job), and the polls in
 *     between (one `list` per zone, then each job's exit record in the object store).
 * Needs gcloud and openssh-server.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { gitCodeExporter } from '../controller/backends/code.js';
import { TpuBackend } from '../controller/backends/gcp-tpu/adapter.js';
import type { TpuNode } from '../controller/backends/gcp-tpu/gcloud.js';
import { defaultSshTransport } from '../controller/transport/ssh.js';
import type { JobHandle, JobRequest } from '../controller/backends/types.js';
import { NativeGit } from '../controller/git/native.js';
import { openStore } from '../runtime/store/index.js';
import { jobPids } from '../test/helpers/backends/job-pids.js';
import { startFakeTpuApi } from '../test/helpers/cloud/fake-tpu-api.js';
import { killTree } from '../test/helpers/processes.js';
import { makeWorkTree } from '../test/helpers/git/specs-repo.js';
import { sshConnection, startSshd } from '../test/helpers/servers/sshd.js';
import { median, table } from './lib.js';

const run = promisify(execFile);
const PROJECT = 'adv-bench';
const ZONE = 'us-central2-b';
const WORKERS = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'];
const NODES = Number(process.env.BENCH_TPU_NODES ?? 100);

async function main(): Promise<void> {
  const sshd = await startSshd({ addresses: WORKERS });
  // Nodes of one host (v4-8) take the worker addresses in turn; a v4-32 takes all four.
  const api = await startFakeTpuApi({
    addresses: Array.from({ length: NODES + 40 }, (_, i) => WORKERS[i % 4]!),
  });
  const tmp = await mkdtemp(join(tmpdir(), 'adv-bench-tpu-'));
  const wt = await makeWorkTree({ 'train.sh': 'sleep 300\n' });
  const commit = (await wt.git('rev-parse', 'HEAD')).trim();
  const store = await openStore(`file://${join(tmp, 'store')}`);
  process.env.CLOUDSDK_CONFIG = await api.configDir(PROJECT);
  const connection: Record<string, unknown> = { ...sshConnection(sshd) };
  delete connection.host; // a gcp-tpu backend's workers are the node's
  const backend = new TpuBackend(
    'tpu',
    {
      type: 'gcp-tpu',
      gcpTpu: { project: PROJECT, zone: ZONE, acceleratorType: 'v4-32' },
      connection: connection as { port: number; user: string },
      paths: { root: join(tmp, 'root') },
    },
    {
      dataDir: tmp,
      logger: pino({ level: 'silent' }),
      now: Date.now,
      code: gitCodeExporter(new NativeGit(join(wt.dir, '.git'))),
      ssh: defaultSshTransport,
      // As the controller gives them: the object store workers write to, the requests by job name.
      objects: () => store,
      requestFor: (name) => job(name),
    },
  );
  const launchAll = (job: JobRequest, node: TpuNode): Promise<void> =>
    (backend as unknown as { launchAll(j: JobRequest, n: TpuNode): Promise<void> }).launchAll(job, node);
  const job = (name: string): JobRequest => ({
    jobName: name,
    run: name,
    attempt: 1,
    spec: {},
    argv: ['sh', 'train.sh'],
    code: { commit },
    env: {},
  });
  const describe = async (name: string): Promise<TpuNode> =>
    JSON.parse(
      (
        await run('gcloud', [
          'compute',
          'tpus',
          'tpu-vm',
          'describe',
          name,
          `--zone=${ZONE}`,
          '--format=json',
        ])
      ).stdout,
    ) as TpuNode;
  const time = async (fn: () => Promise<unknown>): Promise<number> => {
    const t = performance.now();
    await fn();
    return performance.now() - t;
  };
  try {
    // READY → every worker running, on a 4-worker node.
    const rows: (string | number)[][] = [];
    const plain = () =>
      Promise.all(
        WORKERS.map((w) =>
          run('ssh', [
            ...[
              '-p',
              String(sshd.port),
              '-i',
              sshd.identityFile,
              '-o',
              `UserKnownHostsFile=${sshd.knownHostsFile}`,
            ],
            ...['-o', 'BatchMode=yes', `${sshd.user}@${w}`, 'true'],
          ]),
        ),
      );
    const sshMs = median([await time(plain), await time(plain), await time(plain)]);
    api.seed(PROJECT, ZONE, 'adv-slice-1', {
      acceleratorType: 'v4-32',
      runtimeVersion: 'tpu-ubuntu2204-base',
    });
    const node = await describe('adv-slice-1');
    const cold = await time(() => launchAll(job('adv-slice-1'), node));
    const warm: number[] = [];
    for (let i = 2; i <= 4; i++) warm.push(await time(() => launchAll(job(`adv-slice-${i}`), node)));
    rows.push(
      ['plain `ssh HOST true` to each of 4 workers, in parallel (baseline)', Math.round(sshMs), '1.00×'],
      [
        'adv: launch on 4 workers, cold (code + runtime shipped)',
        Math.round(cold),
        `${(cold / sshMs).toFixed(2)}×`,
      ],
      [
        'adv: launch on 4 workers, warm (same code)',
        Math.round(median(warm)),
        `${(median(warm) / sshMs).toFixed(2)}×`,
      ],
    );
    console.log(table(['READY → every worker running', 'ms', 'vs baseline'], rows));

    // One poll for NODES nodes, each running a job.
    const handles: JobHandle[] = [];
    for (let i = 0; i < NODES; i++) {
      const name = `adv-poll-${i}-1`;
      api.seed(PROJECT, ZONE, name, {
        acceleratorType: 'v4-8',
        runtimeVersion: 'tpu-ubuntu2204-base',
        labels: { 'adventuretime-backend': 'tpu' },
      });
      const n = { ...node, name: `projects/${PROJECT}/locations/${ZONE}/nodes/${name}` };
      n.networkEndpoints = [node.networkEndpoints![i % 4]!];
      await launchAll(job(name), n);
      handles.push({ backend: 'tpu', jobName: name, jobId: name });
    }
    const list = () =>
      run('gcloud', ['compute', 'tpus', 'tpu-vm', 'list', `--zone=${ZONE}`, '--format=json']);
    const listMs = median([await time(list), await time(list), await time(list)]);
    let running = 0;
    const poll = () =>
      time(async () => {
        running = (await backend.poll(handles)).filter((o) => o.state === 'Running').length;
      });
    // The first poll looks at every worker over SSH; the next ones, within 15 s, read the store.
    const full = await poll();
    const between = [await poll(), await poll(), await poll()];
    console.log(
      table(
        [`one poll, ${NODES} nodes (${running} running)`, 'ms', 'vs baseline'],
        [
          ['one `gcloud compute tpus tpu-vm list` (baseline, median of 3)', Math.round(listMs), '1.00×'],
          [
            'adv poll, workers looked at over SSH (the first; then every 15 s per job)',
            Math.round(full),
            `${(full / listMs).toFixed(2)}×`,
          ],
          [
            'adv poll in between: 1 list + each exit record in the store (median of 3)',
            Math.round(median(between)),
            `${(median(between) / listMs).toFixed(2)}×`,
          ],
        ],
      ),
    );
  } finally {
    await killTree(await jobPids(join(tmp, 'root', 'work')));
    await backend.close();
    await api.stop();
    await sshd.stop();
    await wt.cleanup();
    await rm(tmp, { recursive: true, force: true });
  }
}

await main();
// Pooled SSH connections and the fake's keep-alive sockets would hold the event loop open.
process.exit(0);
