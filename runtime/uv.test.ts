/**
 * uv projects under adv exec, with the real uv and a project whose one dependency is a local wheel
 * (test/helpers/python/uv-project.ts): synced once per host per lock, the workload in that environment,
 * uv installed when the host has none — all without the network.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildUvWheelDir,
  createUvProject,
  expectedFingerprint,
  FINGERPRINT_ENTRY,
  fingerprintSetup,
  MODULE_VAR_VALUE,
  UV_PIN,
  uvBinary,
  type UvProject,
} from '../test/helpers/python/uv-project.js';
import { advExec, argvFor } from './exec.js';
import { UV_VERSION } from './uv.js';

let tmp: string;
let project: UvProject;
/** A dir whose `uv` logs each call to `uv-calls` and runs the real uv. */
let uvShimDir: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-uv-'));
  project = createUvProject(join(tmp, 'project'));
  uvShimDir = join(tmp, 'uv-shim');
  await mkdir(uvShimDir);
  await writeFile(
    join(uvShimDir, 'uv'),
    `#!/bin/sh\nprintf '%s\\n' "$*" >> ${join(tmp, 'uv-calls')}\nexec ${uvBinary()} "$@"\n`,
  );
  await chmod(join(uvShimDir, 'uv'), 0o755);
}, 60_000);
afterAll(() => rm(tmp, { recursive: true, force: true }));

/** PATH without any uv on it. */
const pathWithoutUv = () =>
  (process.env.PATH ?? '')
    .split(delimiter)
    .filter((d) => d && !existsSync(join(d, 'uv')))
    .join(delimiter);

/** The fingerprint entry run by adv exec in the project, its line written to `<job dir>/fp`. */
async function fingerprint(name: string, attempt: number, env: NodeJS.ProcessEnv) {
  const jobDir = join(tmp, 'jobs', `${name}-${attempt}`);
  const { record } = await advExec({
    run: name,
    attempt,
    argv: ['sh', '-c', 'exec "$@" > "$ADV_JOB_DIR/fp"', 'sh', ...argvFor({ entry: FINGERPRINT_ENTRY })],
    cwd: project.dir,
    jobDir,
    log: () => undefined,
    env,
  });
  const fp = existsSync(join(jobDir, 'fp')) ? (await readFile(join(jobDir, 'fp'), 'utf8')).trim() : undefined;
  return { record, fp };
}

const syncCalls = () =>
  existsSync(join(tmp, 'uv-calls'))
    ? readFileSync(join(tmp, 'uv-calls'), 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('sync'))
    : [];

describe('adv exec with a uv project', () => {
  it('syncs once per lock on a host: the second attempt uses the cached environment; entry: runs in it', async () => {
    const env = {
      PATH: `${uvShimDir}${delimiter}${process.env.PATH}`,
      ADV_CACHE_DIR: join(tmp, 'cache-once'),
      ADV_SETUP: JSON.stringify(fingerprintSetup('exported in setup')),
    };
    const want = expectedFingerprint({ ADV_FP_VAR: 'exported in setup', MODULE_VAR: MODULE_VAR_VALUE });
    const first = await fingerprint('uv-once', 1, env);
    expect(first).toEqual({ record: expect.objectContaining({ reason: 'Completed' }), fp: want });
    expect(syncCalls()).toEqual(['sync --frozen --no-install-project']);
    const second = await fingerprint('uv-once', 2, env);
    expect(second).toEqual({ record: expect.objectContaining({ reason: 'Completed' }), fp: want });
    expect(syncCalls()).toHaveLength(1);
  });

  it('two attempts starting at once on one host sync the environment once, and both run in it', async () => {
    const env = {
      PATH: `${uvShimDir}${delimiter}${process.env.PATH}`,
      ADV_CACHE_DIR: join(tmp, 'cache-concurrent'),
    };
    const before = syncCalls().length;
    const both = await Promise.all([
      fingerprint('uv-concurrent', 1, env),
      fingerprint('uv-concurrent', 2, env),
    ]);
    for (const { record, fp } of both) {
      expect(record).toMatchObject({ reason: 'Completed' });
      expect(fp).toBe(expectedFingerprint({}));
    }
    expect(syncCalls().length - before).toBe(1);
  });

  it("a failing sync is SetupFailed from uv, the last step, with uv's own words", async () => {
    const { record, fp } = await fingerprint('uv-bad-group', 1, {
      PATH: `${uvShimDir}${delimiter}${process.env.PATH}`,
      ADV_CACHE_DIR: join(tmp, 'cache-bad'),
      ADV_UV: JSON.stringify({ groups: ['no-such-group'] }),
    });
    expect(fp).toBeUndefined();
    expect(record).toMatchObject({ reason: 'SetupFailed', setup: { step: 1, of: 1, from: 'uv' } });
    expect(record.setup!.command).toMatch(/^uv sync --frozen --no-install-project --group no-such-group/);
    expect(record.setup!.tail.join('\n')).toMatch(/no-such-group/);
  });

  it('project: off leaves the tree alone: no sync, the host python runs it', async () => {
    const { record, fp } = await fingerprint('uv-off', 1, {
      PATH: `${uvShimDir}${delimiter}${process.env.PATH}`,
      ADV_CACHE_DIR: join(tmp, 'cache-off'),
      ADV_UV: JSON.stringify({ project: 'off' }),
    });
    // The dependency is only in the synced environment.
    expect(record).toMatchObject({ reason: 'Error' });
    expect(fp).toBe('');
    expect(existsSync(join(tmp, 'cache-off'))).toBe(false);
  });

  it('installs uv at the pinned version when the host has none (pip, from a local wheel dir)', async () => {
    // The version installed by default is the one requirements/ci.txt pins for the tests.
    expect(UV_VERSION).toBe(UV_PIN);
    const wheels = buildUvWheelDir(join(tmp, 'uv-wheels'));
    const cache = join(tmp, 'cache-install');
    const { record, fp } = await fingerprint('uv-install', 1, {
      PATH: pathWithoutUv(),
      ADV_CACHE_DIR: cache,
      ADV_UV: JSON.stringify({ version: UV_PIN }),
      // Offline: pip sees only the wheel dir.
      PIP_CONFIG_FILE: '/dev/null',
      PIP_NO_INDEX: '1',
      PIP_FIND_LINKS: wheels,
    });
    expect(record).toMatchObject({ reason: 'Completed' });
    expect(fp).toBe(expectedFingerprint({}));
    const installed = join(cache, 'uv', 'bin', UV_PIN, 'uv');
    expect(execFileSync(installed, ['--version'], { encoding: 'utf8' })).toMatch(`uv ${UV_PIN}`);
  }, 120_000);
});
