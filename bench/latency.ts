/**
 * Push-to-start latency (issue 3): from a commit (and push) of a new Run until its process has
 * started (the `startedAt` that `adv exec` records), over ≥ 50 trials each for
 *   - a local repo watched with chokidar,
 *   - a remote over smart HTTP with a webhook,
 *   - a remote over smart HTTP with polling (fetch interval 1 s),
 * against a status branch with a 5,000-commit history. Then the status write-back of 1,000 runs
 * changing phase at once: one commit, one push.
 *
 * Jobs run the built CLI (`dist/`), as they do in production: `npm run build` first.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Controller } from '../controller/controller.js';
import { git } from '../controller/git/native.js';
import { serve, signBody } from '../controller/serve.js';
import { startGitHttp } from '../test/helpers/git/git-http.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml } from '../test/helpers/git/specs-repo.js';
import { waitFor } from '../test/helpers/wait.js';
import { fastImport, statusHistory } from './git-fixtures.js';
import { percentile, table } from './lib.js';

const TRIALS = Number(process.env.BENCH_TRIALS ?? 50);
const HISTORY = Number(process.env.BENCH_HISTORY ?? 5000);
const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const cli = join(root, 'dist', 'cli', 'adv.js');
if (!existsSync(cli)) throw new Error('run `npm run build` first: jobs start the built CLI');
process.env.ADV_SELF_COMMAND = JSON.stringify([process.execPath, cli]);

interface Mode {
  name: string;
  against: string;
  samples: number[];
}

async function trials(
  c: Controller,
  commitAndNotify: (name: string) => Promise<void>,
  label: string,
): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < TRIALS; i++) {
    const name = `${label}-${i}`;
    const t0 = Date.now();
    await commitAndNotify(name);
    const exec = join(c.dataDir, 'local', 'local', 'jobs', `adv-${name}-1`, 'exec.json');
    const rec = await waitFor(
      `${name} started`,
      () =>
        existsSync(exec) ? (JSON.parse(readFileSync(exec, 'utf8')) as { startedAt: string }) : undefined,
      30_000,
      5,
    );
    out.push(Date.parse(rec.startedAt) - t0);
  }
  return out;
}

async function main(): Promise<void> {
  const tmp = await mkdtemp(join(tmpdir(), 'adv-bench-lat-'));
  const server = await startGitHttp();
  const modes: Mode[] = [];
  try {
    // Local repo, watched.
    {
      const wt = await makeWorkTree({ 'backends/local.yaml': LOCAL_BACKEND });
      await fastImport(join(wt.dir, '.git'), statusHistory(HISTORY));
      const c = await Controller.create({
        repo: wt.dir,
        dataDir: join(tmp, 'watch'),
        fetchIntervalMs: 600_000,
        pollIntervalMs: 1000,
      });
      const s = await serve(c, { watch: true });
      const loop = c.run();
      await waitFor('first pass', () => c.syncDesired().then(() => true));
      const samples = await trials(
        c,
        async (name) => {
          await wt.write(`runs/${name}.yaml`, runYaml(name, ['true']));
          await wt.commit(`add ${name}`);
        },
        'watch',
      );
      modes.push({
        name: 'local repo + watch (chokidar)',
        against: 'fetch interval 600 s (not used)',
        samples,
      });
      await s.close();
      await c.stop();
      await loop;
      await wt.cleanup();
    }
    // Remote over smart HTTP: webhook, then polling.
    for (const mode of ['webhook', 'poll'] as const) {
      const bare = await server.createRepo(mode);
      const wt = await makeWorkTree({ 'backends/local.yaml': LOCAL_BACKEND }, server.url(mode));
      await fastImport(bare, statusHistory(HISTORY));
      const fetchIntervalMs = mode === 'poll' ? 1000 : 600_000;
      const c = await Controller.create({
        repo: server.url(mode),
        infra: { from: 'repo' },
        dataDir: join(tmp, mode),
        fetchIntervalMs,
        pollIntervalMs: 1000,
      });
      const s = await serve(c, { httpAddr: '127.0.0.1:0', webhookSecret: 'bench', watch: false });
      const loop = c.run();
      await waitFor('status adopted', () => c.repo.git.resolveRef(c.repo.statusRef), 30_000);
      const samples = await trials(
        c,
        async (name) => {
          await wt.write(`runs/${name}.yaml`, runYaml(name, ['true']));
          await wt.commit(`add ${name}`);
          await wt.push();
          if (mode === 'webhook') {
            const body = JSON.stringify({ ref: 'refs/heads/main' });
            const r = await fetch(`${s.url}/hooks/git`, {
              method: 'POST',
              body,
              headers: { 'x-hub-signature-256': signBody('bench', body) },
            });
            if (r.status !== 202) throw new Error(`webhook answered ${r.status}`);
          }
        },
        mode,
      );
      modes.push({
        name: mode === 'webhook' ? 'remote (smart HTTP) + webhook' : 'remote (smart HTTP) + polling',
        against: mode === 'poll' ? `fetch interval ${fetchIntervalMs} ms` : 'fetch interval 600 s (not used)',
        samples,
      });
      await s.close();
      await c.stop();
      await loop;
      await wt.cleanup();
    }

    // Status write-back: 1,000 runs change phase in one pass.
    const bare = await server.createRepo('writeback');
    const wt = await makeWorkTree({ 'backends/local.yaml': LOCAL_BACKEND }, server.url('writeback'));
    await fastImport(bare, statusHistory(HISTORY));
    const c = await Controller.create({
      repo: server.url('writeback'),
      infra: { from: 'repo' },
      dataDir: join(tmp, 'writeback'),
      fetchIntervalMs: 0,
    });
    await c.init();
    await c.pass();
    for (let i = 0; i < 1000; i++)
      await wt.write(`runs/wb-${i}.yaml`, runYaml(`wb-${i}`, ['true'], '  suspend: true\n'));
    await wt.commit('1,000 runs');
    await wt.push();
    const before = Number(
      (await git(['rev-list', '--count', 'adventuretime/status'], { gitdir: bare })).toString(),
    );
    const t0 = performance.now();
    const stats = await c.pass();
    const total = performance.now() - t0;
    const after = Number(
      (await git(['rev-list', '--count', 'adventuretime/status'], { gitdir: bare })).toString(),
    );
    await c.stop();
    await wt.cleanup();

    console.log(`\n### Push-to-start latency (${TRIALS} trials each; status history ${HISTORY} commits)\n`);
    console.log(
      table(
        ['trigger', 'p50 ms', 'p99 ms', 'max ms', 'against'],
        modes.map((m) => [
          m.name,
          percentile(m.samples, 50),
          percentile(m.samples, 99),
          Math.max(...m.samples),
          m.against,
        ]),
      ),
    );
    console.log(
      `\n### Status write-back: 1,000 runs change phase in one pass (remote over smart HTTP, ${HISTORY}-commit history)\n`,
    );
    console.log(
      table(
        ['what', 'value'],
        [
          ['status commits that reached the remote', after - before],
          ['pass total ms (fetch + load 1,000 specs + plan + commit + push)', total],
          ['  of which load ms', stats.ms.load],
          ['  of which plan ms', stats.ms.plan],
          ['  of which commit + push ms', stats.ms.write],
        ],
      ),
    );
  } finally {
    await server.stop();
    await rm(tmp, { recursive: true, force: true });
  }
}

await main();
