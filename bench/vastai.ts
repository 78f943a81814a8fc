/**
 * The `vastai` backend (issue 16): rent → workload started, against the fake Vast.ai API's own
 * provisioning delay in the same run. The fake steps a rental `null → loading → running` after a
 * fixed time (no read counts), and its instances are a real sshd on loopback. Baseline: how long
 * the fake takes from the rent request to `running` with an SSH endpoint, seen by polling it
 * directly; adv: from `submit` (search, rent) to the workload's process running on the instance
 * (code and runtime shipped, job dir written, `adv exec` started: its `exec.json` is there).
 * Needs openssh-server.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { gitCodeExporter } from '../controller/backends/code.js';
import { VastBackend } from '../controller/backends/vastai/adapter.js';
import { VastClient } from '../controller/backends/vastai/client.js';
import { defaultSshTransport } from '../controller/transport/ssh.js';
import { submitOne, type JobRequest } from '../controller/backends/types.js';
import { NativeGit } from '../controller/git/native.js';
import { jobPids } from '../test/helpers/backends/job-pids.js';
import { killTree } from '../test/helpers/processes.js';
import { startFakeVastApi } from '../test/helpers/cloud/fake-vast-api.js';
import { makeWorkTree } from '../test/helpers/git/specs-repo.js';
import { startSshd } from '../test/helpers/servers/sshd.js';
import { median, table } from './lib.js';

const HOSTS = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6'];
/** The fake's provisioning: this long `null`, then this long `loading` (real rentals take minutes). */
const STEP_MS = Number(process.env.BENCH_VAST_STEP_MS ?? 1000);
const RUNS = 3;

async function main(): Promise<void> {
  const sshd = await startSshd({ addresses: HOSTS });
  const api = await startFakeVastApi({
    sshEndpoints: HOSTS.map((host) => ({ host, port: sshd.port })),
    provisionReads: 1e9,
    loadingReads: 1e9,
    provisionMs: STEP_MS,
    loadingMs: STEP_MS,
  });
  const tmp = await mkdtemp(join(tmpdir(), 'adv-bench-vast-'));
  const wt = await makeWorkTree({ 'train.sh': 'sleep 300\n' });
  const commit = (await wt.git('rev-parse', 'HEAD')).trim();
  const client = new VastClient({ apiKey: api.apiKey, apiUrl: api.url });
  const root = join(tmp, 'root');
  const backend = new VastBackend(
    'vast',
    {
      type: 'vastai',
      vastai: { apiKeySecret: 'VAST_API_KEY', numGpus: 1 },
      connection: { identityFile: sshd.identityFile, knownHostsFile: sshd.knownHostsFile },
      paths: { root },
    },
    {
      dataDir: tmp,
      logger: pino({ level: 'silent' }),
      now: Date.now,
      code: gitCodeExporter(new NativeGit(join(wt.dir, '.git'))),
      ssh: defaultSshTransport,
    },
    client,
  );
  const job = (name: string): JobRequest => ({
    jobName: name,
    run: name,
    attempt: 1,
    spec: {},
    argv: ['sh', 'train.sh'],
    code: { commit },
    env: {},
  });
  const time = async (fn: () => Promise<unknown>): Promise<number> => {
    const t = performance.now();
    await fn();
    return performance.now() - t;
  };
  const until = async (ok: () => boolean | Promise<boolean>) => {
    while (!(await ok())) await new Promise((r) => setTimeout(r, 20));
  };
  try {
    for (let i = 0; i < RUNS * 2 + 2; i++) api.seedOffer({ dph_total: 0.3 });
    // Baseline: the fake's own delay, rent → running with an SSH endpoint, polled directly.
    const baseline: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const [offer] = await client.searchOffers({ filters: {}, order: [['dph_total', 'asc']], limit: 1 });
      let id = 0;
      baseline.push(
        await time(async () => {
          ({ id } = await client.createInstance(offer!.id, { image: 'img', label: `base-${i}`, disk: 16 }));
          await until(async () => (await client.showInstance(id))?.actual_status === 'running');
        }),
      );
      await client.destroyInstance(id);
    }
    // adv: submit → the workload running (cold: the first ships the runtime; then warm), with
    // the backend polled every 2 s as the controller does (a rental waits on those lists).
    const polling = setInterval(() => void backend.poll([]).catch(() => {}), 2000);
    const adv: number[] = [];
    for (let i = 0; i < RUNS + 1; i++) {
      const name = `adv-bench-${i}-1`;
      adv.push(
        await time(async () => {
          await submitOne(backend, job(name));
          await until(() => existsSync(join(root, 'work', name, 'exec.json')));
        }),
      );
    }
    clearInterval(polling);
    const [cold, ...warm] = adv;
    const base = median(baseline);
    console.log(
      table(
        [`rent → workload started (the fake provisions in ${(2 * STEP_MS) / 1000} s)`, 'ms', 'vs baseline'],
        [
          [
            `the fake's provisioning alone, rent → running (baseline, median of ${RUNS})`,
            Math.round(base),
            '1.00×',
          ],
          [
            'adv: search, rent, wait, ship, launch — first (runtime shipped)',
            Math.round(cold!),
            `${(cold! / base).toFixed(2)}×`,
          ],
          [
            `adv: the same, warm (median of ${RUNS})`,
            Math.round(median(warm)),
            `${(median(warm) / base).toFixed(2)}×`,
          ],
        ],
      ),
    );
  } finally {
    await killTree(await jobPids(join(root, 'work')));
    for (const r of api.billing()) await client.destroyInstance(r.instanceId);
    await backend.close();
    await api.stop();
    await sshd.stop();
    await wt.cleanup();
    await rm(tmp, { recursive: true, force: true });
  }
}

await main();
// Pooled SSH connections and keep-alive sockets would hold the event loop open.
process.exit(0);
