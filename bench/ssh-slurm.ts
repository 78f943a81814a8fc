/**
 * SSH and SLURM backends (issue 5), on the real local SLURM through a real sshd, against the
 * native tools in the same run:
 *   - submit 200 trivial jobs through the slurm backend over one connection (8 at a time, as the
 *     controller does) against 200 `sbatch` calls run directly on the login node;
 *   - poll 200 jobs (one SSH command: scontrol for all);
 *   - ship a 100 MB code payload against `scp` of the same file.
 * Needs root, slurm-wlm, munge and openssh-server (as .ci/run installs).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pLimit from 'p-limit';
import pino from 'pino';
import { gitCodeExporter } from '../controller/backends/code.js';
import { SlurmBackend } from '../controller/backends/slurm/adapter.js';
import { defaultSshTransport } from '../controller/transport/ssh.js';
import { NativeGit } from '../controller/git/native.js';
import { submitOne, type JobHandle } from '../controller/backends/types.js';
import { sshConnection, startSshd } from '../test/helpers/servers/sshd.js';
import { makeWorkTree } from '../test/helpers/git/specs-repo.js';
import { table } from './lib.js';

const N = Number(process.env.BENCH_JOBS ?? 200);
const infra = join(import.meta.dirname, '..', 'test', 'infra');

async function main(): Promise<void> {
  execFileSync(join(infra, 'slurm-start.sh'), { stdio: 'ignore' });
  const sshd = await startSshd();
  const tmp = await mkdtemp(join(tmpdir(), 'adv-bench-slurm-'));
  const wt = await makeWorkTree({ 'train.sh': 'true\n' });
  const commit = (await wt.git('rev-parse', 'HEAD')).trim();
  const git = new NativeGit(join(wt.dir, '.git'));
  const backend = new SlurmBackend(
    'slurm-local',
    {
      type: 'slurm',
      connection: sshConnection(sshd),
      paths: { root: join(tmp, 'root') },
      slurm: { sbatchDefaults: { partition: 'debug' } },
    },
    {
      dataDir: tmp,
      logger: pino({ level: 'silent' }),
      now: Date.now,
      code: gitCodeExporter(git),
      ssh: defaultSshTransport,
    },
  );
  try {
    const time = async (fn: () => Promise<unknown> | unknown) => {
      const t = performance.now();
      await fn();
      return performance.now() - t;
    };
    const hold = () => execFileSync('scontrol', ['update', 'PartitionName=debug', 'State=DOWN']);
    const release = () => {
      execFileSync('scancel', ['--partition=debug']);
      execFileSync('scontrol', ['update', 'PartitionName=debug', 'State=UP']);
    };
    // Jobs queue without running (the partition is down), so only submission is measured.
    hold();
    const direct = await time(() =>
      execFileSync('sh', [
        '-c',
        `for i in $(seq ${N}); do sbatch --parsable -p debug -o /dev/null --wrap true >/dev/null; done`,
      ]),
    );
    release();
    await submitOne(backend, {
      jobName: 'adv-warm-1',
      run: 'warm',
      attempt: 1,
      spec: {},
      argv: ['true'],
      code: { commit },
      env: {},
    }); // ships code + runtime once
    hold();
    const limit = pLimit(8);
    let handles: JobHandle[] = [];
    const viaBackend = await time(async () => {
      handles = await Promise.all(
        Array.from({ length: N }, (_, i) =>
          limit(() =>
            submitOne(backend, {
              jobName: `adv-b${i}-1`,
              run: `b${i}`,
              attempt: 1,
              spec: {},
              argv: ['true'],
              code: { commit },
              env: {},
            }),
          ),
        ),
      );
    });
    const poll = await time(() => backend.poll(handles));
    release();
    hold();
    const batch = await time(async () => {
      const rs = await backend.submit(
        Array.from({ length: N }, (_, i) => ({
          jobName: `adv-m${i}-1`,
          run: `m${i}`,
          attempt: 1,
          spec: {},
          argv: ['true'],
          code: { commit },
          env: {},
        })),
      );
      if (rs.some((r) => r instanceof Error)) throw new Error('a batched submit failed');
    });
    const squeue = await time(() => execFileSync('squeue', ['-h']));
    release();

    const payload = randomBytes(100 * 2 ** 20);
    const file = join(tmp, 'payload.tar.gz');
    await writeFile(file, payload);
    const scp = await time(() =>
      execFileSync('scp', [
        '-q',
        '-P',
        String(sshd.port),
        '-i',
        sshd.identityFile,
        '-o',
        `UserKnownHostsFile=${sshd.knownHostsFile}`,
        '-o',
        'BatchMode=yes',
        file,
        `${sshd.user}@127.0.0.1:${join(tmp, 'scp-copy')}`,
      ]),
    );
    const ship = await time(() => backend.host.ship(join(tmp, 'root', 'code', 'bench.tar.gz'), payload));

    console.log(`\n### SSH and SLURM backends (real sshd, real two-node SLURM; same run)\n`);
    console.log(
      table(
        ['what', 'baseline ms', 'backend ms', 'ratio (baseline / backend)', 'target'],
        [
          [
            `submit ${N} jobs in one batch, as the controller does per pass | sbatch ×${N} on the login node`,
            direct,
            batch,
            direct / batch,
            '≥ 0.8',
          ],
          [
            `submit ${N} jobs one SSH command each, 8 at a time | sbatch ×${N}`,
            direct,
            viaBackend,
            direct / viaBackend,
            '',
          ],
          [`poll ${N} jobs (one SSH command | one local squeue)`, squeue, poll, squeue / poll, ''],
          ['ship 100 MB (exec channel + sha256 verify | scp)', scp, ship, scp / ship, '≥ 0.9'],
        ],
      ),
    );
  } finally {
    await backend.close();
    await git.close();
    await sshd.stop();
    await wt.cleanup();
    await rm(tmp, { recursive: true, force: true });
    execFileSync(join(infra, 'slurm-stop.sh'));
  }
}

await main();
