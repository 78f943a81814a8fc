/**
 * The `adventuretime` Python package: its own tests (unittest, with the real JAX, Orbax, torch
 * and wandb of the project's .venv), and the two ways a user installs it — the wheel `adv python
 * wheel` prints, into a fresh venv, and `pip install` of the source dir.
 */
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { latestCommitted } from '../runtime/checkpoint.js';
import { openStore } from '../runtime/store/index.js';
import { removeTree } from './helpers/io.js';
import { PYTHON, pythonAvailable } from './helpers/python/python.js';
import { waitFor } from './helpers/wait.js';

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, '..');
const ADV = join(ROOT, 'dist', 'cli', 'adv.js');
const EXEC = join(ROOT, 'dist', 'adv-exec.mjs');
const EXAMPLE = join(ROOT, 'examples', 'helper-jax', 'train.py');
/** Starting JAX, compiling, a few Orbax saves: slow on a busy CPU. */
const ATTEMPT_MS = 240_000;
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
/** Two-process JAX and torch jobs, Orbax saves, wandb: minutes on a busy machine, never hours. */
const SUITE_MS = 900_000;

const ok = pythonAvailable('the adventuretime Python package tests');
let tmp: string;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-pypkg-'));
});
afterAll(() => tmp && removeTree(tmp));

/** `cmd args` to its end: its exit code and output together (a failure shows everything). */
async function sh(
  cmd: string,
  args: string[],
  o: { cwd?: string; env?: NodeJS.ProcessEnv; timeout?: number } = {},
): Promise<{ code: number; out: string }> {
  try {
    const r = await run(cmd, args, {
      cwd: o.cwd ?? tmp,
      env: o.env ?? process.env,
      timeout: o.timeout ?? 120_000,
      maxBuffer: 64 << 20,
    });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string; message: string };
    return {
      code: typeof err.code === 'number' ? err.code : -1,
      out: `${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}`,
    };
  }
}

/** The environment of a Python that must find only what the test gives it. */
function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env = { ...process.env, ...extra };
  for (const k of Object.keys(env)) if (k.startsWith('ADV_') || k === 'PYTHONPATH') delete env[k];
  return { ...env, ...extra };
}

describe.skipIf(!ok)('the adventuretime Python package', () => {
  it(
    'passes its own tests with real JAX, Orbax, torch and wandb',
    async () => {
      const r = await sh(PYTHON, ['-m', 'unittest', 'discover', '-s', 'runtime/python/tests', '-v'], {
        cwd: ROOT,
        env: cleanEnv({ PYTHONDONTWRITEBYTECODE: '1' }),
        timeout: SUITE_MS,
      });
      expect(r.code, r.out).toBe(0);
      expect(r.out).toMatch(/^OK/m);
      // Every module has its tests in the run: a file that fails to import would not be "OK".
      for (const mod of [
        'test_env',
        'test_checkpoint',
        'test_preempt',
        'test_distributed',
        'test_metrics',
        'test_package',
        'test_tracking',
      ])
        expect(r.out, mod).toContain(`(${mod}.`);
    },
    SUITE_MS + 30_000,
  );

  it('installs from the wheel adv python wheel prints, into a fresh venv', async () => {
    const out = join(tmp, 'wheel');
    const built = await sh(process.execPath, [ADV, 'python', 'wheel', '--out', out, '--python', PYTHON]);
    expect(built.code, built.out).toBe(0);
    const wheel = built.out.trim();
    expect(wheel).toBe(join(out, `adventuretime-${VERSION}-py3-none-any.whl`));
    // Asked again: the same file, not rebuilt (a missing interpreter would fail a rebuild).
    const again = await sh(process.execPath, [
      ADV,
      'python',
      'wheel',
      '--out',
      out,
      '--python',
      '/nonexistent',
    ]);
    expect(again.out.trim()).toBe(wheel);

    const venv = join(tmp, 'venv');
    const made = await sh(PYTHON, ['-m', 'venv', '--system-site-packages', venv]);
    expect(made.code, made.out).toBe(0);
    const pip = await sh(join(venv, 'bin', 'pip'), ['install', '--no-index', '--no-deps', wheel], {
      env: cleanEnv({ PIP_DISABLE_PIP_VERSION_CHECK: '1' }),
    });
    expect(pip.code, pip.out).toBe(0);
    const imported = await sh(
      join(venv, 'bin', 'python'),
      [
        '-c',
        'import adventuretime as a; print(a.__version__); print(a.__file__); print(a.RunEnv.from_env().run)',
      ],
      { env: cleanEnv() },
    );
    expect(imported.code, imported.out).toBe(0);
    const [version, file, runName] = imported.out.trim().split('\n');
    expect(version).toBe(VERSION);
    expect(file!.startsWith(join(venv, 'lib'))).toBe(true);
    expect(runName).toBe('local');
  });

  it('installs with pip from the source dir adv python path --project prints', async () => {
    const project = await sh(process.execPath, [ADV, 'python', 'path', '--project']);
    expect(project.out.trim()).toBe(join(ROOT, 'runtime', 'python'));
    // A copy: pip builds in the tree it is given, and the checkout stays clean.
    const copy = join(tmp, 'src-copy');
    await cp(project.out.trim(), copy, {
      recursive: true,
      filter: (p) => !/(__pycache__|\.egg-info|[/\\]build)$/.test(p),
    });
    const target = join(tmp, 'site');
    // No index, no build isolation: the venv's setuptools builds it, as pip would online.
    const pip = await sh(
      join(ROOT, '.venv', 'bin', 'pip'),
      ['install', '--no-index', '--no-deps', '--no-build-isolation', '--target', target, copy],
      { env: cleanEnv({ PIP_DISABLE_PIP_VERSION_CHECK: '1' }) },
    );
    expect(pip.code, pip.out).toBe(0);
    const imported = await sh(PYTHON, ['-c', 'import adventuretime as a; print(a.__version__, a.__file__)'], {
      env: cleanEnv({ PYTHONPATH: target }),
    });
    expect(imported.code, imported.out).toBe(0);
    expect(imported.out.trim()).toBe(`${VERSION} ${join(target, 'adventuretime', '__init__.py')}`);
  });

  it('imports from the source dir adv python path prints', async () => {
    const src = await sh(process.execPath, [ADV, 'python', 'path']);
    expect(src.code, src.out).toBe(0);
    const imported = await sh(PYTHON, ['-c', 'import adventuretime as a; print(a.__file__)'], {
      env: cleanEnv({ PYTHONPATH: src.out.trim() }),
    });
    expect(imported.out.trim()).toBe(join(ROOT, 'runtime', 'python', 'src', 'adventuretime', '__init__.py'));
  });

  it(
    'runs examples/helper-jax under adv exec: preempted, saved on the notice, resumed, same result',
    async () => {
      const url = `file://${join(tmp, 'store')}`;
      const store = await openStore(url);
      const hold = join(tmp, 'hold');
      await writeFile(hold, '');
      const train = ['--steps', '60', '--ckpt-every', '10', '--hold-file', hold, '--hold-at', '35'];
      const first = execAttempt(url, 1, train);
      // Step 35 is past the last periodic save (30): only the save on the notice can commit it.
      await waitFor(() => first.out().includes('holding at step 35'), {
        what: 'the first attempt to hold at step 35',
        timeoutMs: ATTEMPT_MS,
        giveUpIf: () => first.exited() && 'adv exec exited',
        detail: first.out,
      });
      first.child.kill('SIGTERM');
      const code1 = await first.code;
      expect(first.out()).toContain('stopped at step 35');
      expect(code1, first.out()).toBe(143);
      expect((await latestCommitted(store, 'helper'))?.step, first.out()).toBe(35);

      await rm(hold);
      const second = execAttempt(url, 2, train);
      expect(await second.code, second.out()).toBe(0);
      expect(second.out()).toContain('attempt 2: resumed from step 35');
      const resumed = /done at step 60: .*/.exec(second.out())?.[0];
      expect(resumed, second.out()).toBeDefined();

      // The same script alone (no adv exec, no contract): local defaults, and the same parameters.
      const alone = join(tmp, 'alone');
      await mkdir(alone);
      const r = await sh(PYTHON, [EXAMPLE, '--steps', '60', '--ckpt-every', '10'], {
        cwd: alone,
        env: cleanEnv({ PYTHONPATH: join(ROOT, 'runtime', 'python', 'src'), JAX_PLATFORMS: 'cpu' }),
        timeout: ATTEMPT_MS,
      });
      expect(r.code, r.out).toBe(0);
      expect(r.out).toContain('attempt 1: starting from scratch');
      expect(/done at step 60: .*/.exec(r.out)?.[0]).toBe(resumed);
    },
    3 * ATTEMPT_MS,
  );
});

/** One attempt of the example under the bundled adv exec, its output collected. */
function execAttempt(url: string, attempt: number, args: string[]) {
  const job = join(tmp, `job${attempt}`);
  const child = spawn(
    process.execPath,
    [
      EXEC,
      '--store',
      url,
      '--run',
      'helper',
      '--attempt',
      String(attempt),
      '--job-dir',
      job,
      '--commit-mode',
      'marker',
      '--grace',
      '120',
      '--',
      PYTHON,
      EXAMPLE,
      ...args,
    ],
    {
      cwd: tmp,
      env: cleanEnv({ PYTHONPATH: join(ROOT, 'runtime', 'python', 'src'), JAX_PLATFORMS: 'cpu' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  let exited = false;
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr.on('data', (b: Buffer) => (out += b.toString()));
  const limit = setTimeout(() => {
    out += `\n(test: no end after ${ATTEMPT_MS / 1000} s; killed)`;
    child.kill('SIGKILL');
  }, ATTEMPT_MS);
  const code = new Promise<number | null>((resolve) =>
    child.on('close', (c) => {
      exited = true;
      clearTimeout(limit);
      killWorkload(job);
      resolve(c);
    }),
  );
  return { child, code, out: () => out, exited: () => exited };
}

/** Kills what is left of a workload's process group (when adv exec died before it could). */
function killWorkload(job: string): void {
  try {
    const { childPid } = JSON.parse(readFileSync(join(job, 'exec.json'), 'utf8')) as { childPid: number };
    process.kill(-childPid, 'SIGKILL');
  } catch {
    // no record, or already gone
  }
}
