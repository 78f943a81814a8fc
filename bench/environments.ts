/**
 * Environments (issue 29), against baselines measured in the same run:
 *   - the start of an attempt on ssh (real sshd) whose code is a uv project, with the host's uv
 *     environment already synced by an earlier attempt (the warm cache), against the same attempt
 *     with the uv project switched off (`ADV_UV` project off): what a cached environment costs at
 *     start. Start = from `submit` to the workload's first command.
 *   - a cold sync (empty cache) as `adv exec` does it before the workload, against `uv sync
 *     --frozen` run by hand in a copy of the project with an empty uv cache, each followed by the
 *     same one-line Python in the synced environment; and `adv exec` with the project off, its own
 *     overhead.
 * The test project is test/helpers/python/uv-project.ts's: one dependency, a local wheel (no network).
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { gitCodeExporter } from '../controller/backends/code.js';
import { SshBackend } from '../controller/backends/ssh/adapter.js';
import { defaultSshTransport } from '../controller/transport/ssh.js';
import { submitOne, type JobRequest } from '../controller/backends/types.js';
import { NativeGit } from '../controller/git/native.js';
import { sshConnection, startSshd } from '../test/helpers/servers/sshd.js';
import { makeWorkTree } from '../test/helpers/git/specs-repo.js';
import { createUvProject, uvBinary } from '../test/helpers/python/uv-project.js';
import { median, table } from './lib.js';

const REPS = Number(process.env.BENCH_REPS ?? 5);
const ROOT = join(import.meta.dirname, '..');
const VENV_BIN = join(ROOT, '.venv', 'bin');
const ADV = join(ROOT, 'dist', 'cli', 'adv.js');
// The job's PATH: the repo's .venv/bin first, for uv (the host has none of its own here).
const JOB_PATH = `${VENV_BIN}:/usr/local/bin:/usr/bin:/bin`;

const ms = (t0: number) => performance.now() - t0;

async function untilExists(path: string, what: string, limitMs = 300_000): Promise<void> {
  const t0 = Date.now();
  while (!existsSync(path)) {
    if (Date.now() - t0 > limitMs) throw new Error(`${what}: ${path} never appeared`);
    await sleep(5);
  }
}

/** Attempt start on ssh: a warm uv environment against no uv project, same run, same code. */
async function attemptStart(tmp: string): Promise<(string | number)[][]> {
  const sshd = await startSshd();
  const wt = await makeWorkTree({});
  createUvProject(wt.dir);
  await wt.git('add', '-A');
  await wt.git('commit', '-qm', 'uv project');
  const commit = (await wt.git('rev-parse', 'HEAD')).trim();
  const git = new NativeGit(join(wt.dir, '.git'));
  const backend = new SshBackend(
    'ssh-bench',
    { type: 'ssh', connection: sshConnection(sshd), paths: { root: join(tmp, 'root') } },
    {
      dataDir: tmp,
      logger: pino({ level: 'silent' }),
      now: Date.now,
      code: gitCodeExporter(git),
      ssh: defaultSshTransport,
    },
  );
  const marks = join(tmp, 'marks');
  execFileSync('mkdir', ['-p', marks]);
  const job = (name: string, uvOff: boolean): JobRequest => ({
    jobName: `adv-${name}-1`,
    run: 'env-bench',
    attempt: 1,
    spec: {},
    // The workload's first command marks its start; python then runs in whatever env it got.
    argv: ['sh', '-c', `: > "$MARK"; exec python3 -c 'import advfp_dep' 2>/dev/null || true`],
    code: { commit },
    env: { PATH: JOB_PATH, MARK: join(marks, name) },
    ...(uvOff ? { uv: { project: 'off' as const } } : {}),
  });
  const start = async (name: string, uvOff: boolean) => {
    const t0 = performance.now();
    await submitOne(backend, job(name, uvOff));
    await untilExists(join(marks, name), `job ${name}`);
    return ms(t0);
  };
  try {
    // Warm-up: ships the code and the runtime, and syncs the host's uv environment once.
    await start('warmup', false);
    const warm: number[] = [];
    const plain: number[] = [];
    for (let i = 0; i < REPS; i++) {
      plain.push(await start(`plain-${i}`, true));
      warm.push(await start(`warm-${i}`, false));
    }
    const [w, p] = [median(warm), median(plain)];
    return [
      [
        `attempt start on ssh, median of ${REPS}: uv project with a warm cache, against the same run with the uv project off`,
        p,
        w,
        p / w,
      ],
    ];
  } finally {
    await backend.close();
    await git.close();
    await sshd.stop();
    await wt.cleanup();
  }
}

/** A cold sync through adv exec against `uv sync` by hand, each then one Python line in the env. */
function coldSync(tmp: string): (string | number)[][] {
  const project = join(tmp, 'project');
  createUvProject(project);
  const env = { ...process.env, PATH: JOB_PATH, UV_PYTHON_DOWNLOADS: 'never' };
  const PY = 'import advfp_dep';
  const run = (cmd: string, args: string[], cwd: string, extra: Record<string, string> = {}) => {
    const t0 = performance.now();
    execFileSync(cmd, args, { cwd, env: { ...env, ...extra }, stdio: 'ignore' });
    return ms(t0);
  };
  const fresh = (name: string) => {
    const dir = join(tmp, name);
    cpSync(project, dir, { recursive: true });
    return dir;
  };
  const byHand: number[] = [];
  const viaAdv: number[] = [];
  const advOff: number[] = [];
  for (let i = 0; i < REPS; i++) {
    const hand = fresh(`hand-${i}`);
    byHand.push(
      run(uvBinary(), ['sync', '--frozen', '--quiet', '--python', 'python3'], hand, {
        UV_CACHE_DIR: join(tmp, `hand-cache-${i}`),
      }) + run(join(hand, '.venv', 'bin', 'python'), ['-c', PY], hand),
    );
    viaAdv.push(
      run(
        process.execPath,
        [ADV, 'exec', '--run', 'cold', '--attempt', '1', '--', 'python3', '-c', PY],
        fresh(`adv-${i}`),
        {
          ADV_CACHE_DIR: join(tmp, `adv-cache-${i}`),
        },
      ),
    );
    advOff.push(
      run(
        process.execPath,
        [ADV, 'exec', '--run', 'cold', '--attempt', '1', '--', 'python3', '-c', 'pass'],
        fresh(`off-${i}`),
        {
          ADV_CACHE_DIR: join(tmp, `off-cache-${i}`),
          ADV_UV: JSON.stringify({ project: 'off' }),
        },
      ),
    );
  }
  const [h, a, o] = [median(byHand), median(viaAdv), median(advOff)];
  return [
    [
      `cold sync + one Python line, median of ${REPS}: adv exec, against uv sync --frozen by hand`,
      h,
      a,
      h / a,
    ],
    [`adv exec with the uv project off (its own start-up: no sync)`, '—', o, '—'],
  ];
}

async function main(): Promise<void> {
  const tmp = mkdtempSync(join(tmpdir(), 'adv-bench-env-'));
  try {
    const rows = [...(await attemptStart(tmp)), ...coldSync(tmp)];
    console.log(`\n### Environments: uv projects (real sshd, real uv; same run)\n`);
    console.log(table(['what', 'baseline ms', 'adv ms', 'ratio (baseline / adv)'], rows));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

await main();
