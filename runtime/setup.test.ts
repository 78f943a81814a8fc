/**
 * The setup session adv exec runs before the workload: one shell for every step and the workload,
 * the first failing step ends the attempt as SetupFailed, templating never executes a value.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../test/helpers/wait.js';
import { advExec, type ExecOptions } from './exec.js';
import { parseSetup, parseUv, type SetupItem } from './setup.js';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-setup-'));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

/** Runs `argv` under adv exec in a fresh work dir with `steps` as ADV_SETUP; the dir is the job dir too. */
async function session(name: string, steps: SetupItem[], argv: string[], more: Partial<ExecOptions> = {}) {
  const dir = join(tmp, name);
  await mkdir(dir, { recursive: true });
  const result = await advExec({
    run: name,
    attempt: 1,
    argv,
    cwd: dir,
    jobDir: dir,
    log: () => undefined,
    ...more,
    env: { ADV_SETUP: JSON.stringify(steps), ADV_CACHE_DIR: join(tmp, 'cache'), ...more.env },
  });
  return { ...result, dir, read: (f: string) => readFile(join(dir, f), 'utf8') };
}

describe('adv exec setup: one shell session', () => {
  it('an export, a sourced shell function (an Lmod-like module) and env items reach later steps and the workload', async () => {
    const dir = join(tmp, 'one-session');
    await mkdir(dir, { recursive: true });
    // What Lmod's init file does: defines `module` as a shell function that changes the shell's environment.
    await writeFile(join(dir, 'lmod.sh'), 'module() { [ "$1" = load ] && export MODULE_VAR="loaded $2"; }\n');
    const { record, read } = await session(
      'one-session',
      [
        { from: 'Backend host-a', run: 'export FROM_STEP_1=one' },
        { from: 'Environment cuda12@2', run: '. ./lmod.sh' },
        { from: 'Environment cuda12@2', run: 'module load cuda/12' },
        { from: 'Environment cuda12@2', env: { ENV_ITEM: 'item value', SEEN: 'step1 saw $FROM_STEP_1' } },
        { from: 'Run', run: 'echo "$FROM_STEP_1|$MODULE_VAR" > last-step-saw; cd /' },
      ],
      ['sh', '-c', 'echo "$FROM_STEP_1|$MODULE_VAR|$ENV_ITEM|$SEEN|$(pwd)" > workload-saw'],
    );
    expect(record).toMatchObject({ reason: 'Completed', exitCode: 0 });
    expect(await read('last-step-saw')).toBe('one|loaded cuda/12\n');
    // An env item's value is raw (no expansion); a step's `cd` does not move the workload.
    expect(await read('workload-saw')).toBe(
      `one|loaded cuda/12|item value|step1 saw $FROM_STEP_1|${join(tmp, 'one-session')}\n`,
    );
  });

  it('makes `module` available from the host Lmod init files when none is defined ($LMOD_PKG/init/sh)', async () => {
    const lmod = join(tmp, 'lmod-pkg');
    await mkdir(join(lmod, 'init'), { recursive: true });
    await writeFile(join(lmod, 'init', 'sh'), 'module() { export MODULE_VAR="host lmod $2"; }\n');
    const { record, read } = await session(
      'host-lmod',
      [{ from: 'Backend cluster', run: 'module load gcc/13' }],
      ['sh', '-c', 'echo "$MODULE_VAR" > saw'],
      { env: { LMOD_PKG: lmod } },
    );
    expect(record).toMatchObject({ reason: 'Completed' });
    expect(await read('saw')).toBe('host lmod gcc/13\n');
  });
});

describe('adv exec setup: the first failing step stops it', () => {
  it('later steps and the workload never run; the exit record is SetupFailed with the step, its exit code and its last lines', async () => {
    const { record, code, dir, read } = await session(
      'fails',
      [
        { from: 'Backend slurm-a', run: 'echo backend ok' },
        // set -e inside a step: the step stops at its first failing command.
        { from: 'Environment cuda12@2', run: 'echo loading cuda\nls /no/such/dir-adv\ntouch after-ls' },
        { from: 'Run', run: 'touch later-step' },
      ],
      ['touch', 'workload-ran'],
    );
    expect(code).toBe(2);
    expect(record).toMatchObject({
      reason: 'SetupFailed',
      exitCode: 2,
      setup: { step: 2, of: 3, from: 'Environment cuda12@2', exitCode: 2 },
    });
    expect(record.setup!.command).toBe('echo loading cuda\nls /no/such/dir-adv\ntouch after-ls');
    expect(record.setup!.tail).toContain('loading cuda');
    expect(record.setup!.tail.join('\n')).toMatch(/no\/such\/dir-adv/);
    expect(record.message).toMatch(
      /^setup step 2 of 3 \(Environment cuda12@2\): echo loading cuda\nls \/no\/such\/dir-adv\ntouch after-ls exited 2; its last lines:\n[^]*loading cuda/,
    );
    for (const f of ['after-ls', 'later-step', 'workload-ran']) expect(existsSync(join(dir, f))).toBe(false);
    expect(JSON.parse(await read('exit.json'))).toMatchObject({ reason: 'SetupFailed', setup: { step: 2 } });
  });

  it('a step that ends the shell with `exit 0` still keeps the workload from starting', async () => {
    const { record, dir } = await session('exit-0', [{ from: 'Run', run: 'exit 0' }], ['touch', 'ran']);
    expect(record).toMatchObject({ reason: 'SetupFailed', exitCode: 1, setup: { step: 1, exitCode: 0 } });
    expect(existsSync(join(dir, 'ran'))).toBe(false);
  });

  it('masks secrets in the message and the tail', async () => {
    const { record } = await session(
      'masked',
      [{ from: 'Run', run: 'echo "token={{ secrets.HF_TOKEN }} redacted=$REDACTED"; exit 4' }],
      ['true'],
      { env: { HF_TOKEN: 'hf_s3cr3t_value', REDACTED: 'other-secret', ADV_REDACT: 'REDACTED' } },
    );
    expect(record).toMatchObject({ reason: 'SetupFailed', exitCode: 4 });
    expect(record.setup!.tail).toContain('token=*** redacted=***');
    expect(JSON.stringify(record)).not.toMatch(/hf_s3cr3t_value|other-secret/);
  });

  it('a stop signal during setup stops it like the workload: Preempted, the workload never starts', async () => {
    const dir = join(tmp, 'stopped');
    const ended = session('stopped', [{ from: 'Run', run: 'touch started; sleep 60' }], ['touch', 'ran']);
    await waitFor(() => existsSync(join(dir, 'started')), { what: 'the setup step to start' });
    expect(process.emit('SIGTERM' as never)).toBe(true);
    const { record } = await ended;
    expect(record).toMatchObject({ reason: 'Preempted', message: 'stopped by SIGTERM' });
    expect(existsSync(join(dir, 'ran'))).toBe(false);
  });

  it('a workload command that cannot be executed after setup is StartFailed', async () => {
    const { record } = await session('no-cmd', [{ from: 'Run', run: 'true' }], ['/no/such/command-adv']);
    expect(record).toMatchObject({ reason: 'StartFailed', exitCode: 127 });
    expect(record.message).toMatch(/cannot start "\/no\/such\/command-adv" after setup: .*not found/);
  });
});

describe('adv exec setup: templating', () => {
  it('substitutes {{ NAME }} shell-quoted in a step (never executed) and raw in an env item', async () => {
    const hostile = `it's "$(touch pwned)" \`touch pwned2\` ; touch pwned3 $HOME`;
    const { record, dir, read } = await session(
      'templated',
      [
        {
          from: 'Run',
          run: 'printf %s {{ HOSTILE }} > got; printf %s {{ADV_RUN}}/{{ secrets.API_KEY }} > got2',
        },
        { from: 'Run', env: { LABEL: 'run={{ ADV_RUN }} v={{ HOSTILE }}' } },
      ],
      ['sh', '-c', 'printf %s "$LABEL" > label'],
      { env: { HOSTILE: hostile, API_KEY: 'key-1234' } },
    );
    expect(record).toMatchObject({ reason: 'Completed' });
    expect(await read('got')).toBe(hostile);
    expect(await read('got2')).toBe('templated/key-1234');
    expect(await read('label')).toBe(`run=templated v=${hostile}`);
    for (const f of ['pwned', 'pwned2', 'pwned3']) expect(existsSync(join(dir, f))).toBe(false);
  });

  it('a name with no value fails that step as SetupFailed naming it; no step runs', async () => {
    const { record, dir } = await session(
      'unknown-name',
      [
        { from: 'Run', run: 'touch first-ran' },
        { from: 'Environment tools@1', run: 'echo {{ secrets.MISSING_TOKEN }}' },
      ],
      ['touch', 'ran'],
    );
    expect(record).toMatchObject({
      reason: 'SetupFailed',
      setup: { step: 2, of: 2, from: 'Environment tools@1' },
    });
    expect(record.message).toMatch(
      /setup step 2 of 2 \(Environment tools@1\).*\{\{ secrets\.MISSING_TOKEN \}\} names no variable/,
    );
    expect(existsSync(join(dir, 'first-ran'))).toBe(false);
    expect(existsSync(join(dir, 'ran'))).toBe(false);
  });
});

describe('ADV_SETUP and ADV_UV parsing', () => {
  it.each([
    ['[1]', /ADV_SETUP\[0\] is not an object/],
    ['{"from":"Run"}', /must be a JSON array/],
    ['[{"from":"Run"}]', /ADV_SETUP\[0\] has neither a "run" string nor an "env" object/],
    ['[{"from":"Run","env":{"1X":"v"}}]', /env "1X" that is not NAME/],
    ['not json', /ADV_SETUP is not JSON/],
  ])('rejects %s', (raw, message) => {
    expect(() => parseSetup(raw)).toThrow(message);
  });
  it('reads items and uv settings; absent is none / auto', () => {
    expect(parseSetup(undefined)).toEqual([]);
    expect(parseSetup('[{"from":"Run","run":"true"},{"from":"Run","env":{"A":"b"}}]')).toHaveLength(2);
    expect(parseUv(undefined)).toEqual({ project: 'auto' });
    expect(() => parseUv('{"groups":"train"}')).toThrow(/groups is "train"/);
    expect(() => parseUv('{"project":"on"}')).toThrow(/project is "on"/);
  });
});
