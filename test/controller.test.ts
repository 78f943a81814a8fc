/**
 * The controller end to end, against real git: local repos and a real smart-HTTP server
 * (`git http-backend`) on loopback, with the real local backend running real processes.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import { git } from '../controller/git/native.js';
import { serve, signBody } from '../controller/serve.js';
import type { RunStatusDoc } from '../controller/status/types.js';
import { startGitHttp, type GitHttpServer } from './helpers/git/git-http.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { removeTree } from './helpers/io.js';
import { Budget, HANG_GUARD_MS, repeatWithinBudget, waitFor } from './helpers/wait.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function dataDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'adv-data-'));
  cleanups.push(() => removeTree(d));
  return d;
}

async function workTree(files: Record<string, string>, remote?: string): Promise<WorkTree> {
  const wt = await makeWorkTree(files, remote, remote ? 's3cret-token' : undefined);
  cleanups.push(() => wt.cleanup());
  return wt;
}

async function controller(opts: Parameters<typeof Controller.create>[0]): Promise<Controller> {
  // Every pusher of these test repos is trusted with Backends (a remote repo must say so).
  const c = await Controller.create({
    pollIntervalMs: 100,
    fetchIntervalMs: 100,
    infra: { from: 'repo' },
    ...opts,
  });
  cleanups.push(() => c.stop());
  return c;
}

/** Runs the loop in the background until the test ends. */
function runInBackground(c: Controller): void {
  const done = c.run();
  cleanups.push(async () => {
    await c.stop();
    await done;
  });
}

async function statusAt(gitdir: string, ref: string, name: string): Promise<RunStatusDoc | undefined> {
  try {
    return parse((await git(['show', `${ref}:runs/${name}.yaml`], { gitdir })).toString()) as RunStatusDoc;
  } catch {
    return undefined;
  }
}

describe('local specs repo', () => {
  it('takes a committed run to Succeeded and writes its history to the status branch', async () => {
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/hello.yaml': runYaml('hello', ['sh', '-c', 'echo hi from $ADV_RUN']),
    });
    const c = await controller({ repo: wt.dir, dataDir: await dataDir() });
    await c.runUntilIdle({ timeoutMs: 60_000 });
    expect(c.runStatus('hello')?.status.phase).toBe('Succeeded');

    // Readable with plain git in the repo itself.
    const log = await wt.git('log', '--format=%s%n%b%x00', 'adventuretime/status');
    const commits = log
      .split('\0')
      .map((s) => s.trim())
      .filter(Boolean);
    expect(
      commits.some(
        (m) =>
          m.startsWith('run/hello: Submitting attempt 1 to local') ||
          m.includes('- run/hello: Submitting attempt 1 to local'),
      ),
    ).toBe(true);
    expect(commits[0]).toMatch(/run\/hello: Succeeded \(attempt 1 on local, job \d+, exit 0\)/);
    const head = commits[0]!;
    expect(head).toMatch(/^Spec-Commit: [0-9a-f]{40}$/m);
    expect(head).toMatch(/^Run: hello$/m);
    expect(head).toMatch(/^Attempt: 1$/m);
    const st = parse(await wt.git('show', 'adventuretime/status:runs/hello.yaml')) as RunStatusDoc;
    expect(st.status.attempts[0]).toMatchObject({
      n: 1,
      backend: 'local',
      jobName: 'adv-hello-1',
      phase: 'Succeeded',
      exitCode: 0,
    });
    // The watched branch is never written by the controller.
    expect((await wt.git('log', '--format=%an', 'main')).split('\n')).toEqual(['Test User']);
  });

  it('marks an invalid spec Valid=False with file:line and runs the others', async () => {
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/good.yaml': runYaml('good', ['true']),
      'runs/bad.yaml': runYaml('bad', ['true'], '  resources:\n    gpus: eight\n'),
    });
    const c = await controller({ repo: wt.dir, dataDir: await dataDir() });
    await c.runUntilIdle({ timeoutMs: 60_000 });
    expect(c.runStatus('good')?.status.phase).toBe('Succeeded');
    const bad = c.runStatus('bad')!;
    expect(bad.status.attempts).toEqual([]);
    const valid = bad.status.conditions.find((x) => x.type === 'Valid')!;
    expect(valid.status).toBe('False');
    expect(valid.message).toBe(
      'runs/bad.yaml:10:11: spec.resources.gpus: expected a whole number, got string "eight" (fix: write a whole number)',
    );
  });

  it('applies spec changes by their JSON Patch: rejects immutable ones, cancels on suspend and deletion', async () => {
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/long.yaml': runYaml('long', ['sleep', '30']),
      'runs/other.yaml': runYaml('other', ['sleep', '30']),
    });
    const c = await controller({ repo: wt.dir, dataDir: await dataDir() });
    await c.init();
    await waitFor('both running', async () => {
      await c.pass();
      return (
        c.runStatus('long')?.status.phase === 'Running' && c.runStatus('other')?.status.phase === 'Running'
      );
    });
    // An immutable change (the command) to a started run is refused, naming the field.
    await wt.write('runs/long.yaml', runYaml('long', ['sleep', '31'], '  policy:\n    maxAttempts: 5\n'));
    await wt.commit('change the command and a policy');
    await c.pass();
    const long = c.runStatus('long')!;
    const rejected = long.status.conditions.find((x) => x.type === 'SpecChangeRejected')!;
    expect(rejected.message).toContain('cannot change /command/1 of a started run');
    expect(long.appliedSpec?.command).toEqual(['sleep', '30']);
    expect(long.appliedSpec?.policy?.maxAttempts).toBe(5); // the mutable part was applied
    expect(long.status.phase).toBe('Running');

    // suspend: true cancels; deleting the spec cancels with SpecDeleted and keeps the status file.
    await wt.write('runs/long.yaml', runYaml('long', ['sleep', '30'], '  suspend: true\n'));
    await wt.remove('runs/other.yaml');
    await wt.commit('suspend long, delete other');
    await c.pass();
    expect(c.runStatus('long')!.status).toMatchObject({ phase: 'Cancelled', reason: 'Suspended' });
    expect(c.runStatus('other')!.status).toMatchObject({ phase: 'Cancelled', reason: 'SpecDeleted' });
    const jobs = join(c.dataDir, 'local', 'local', 'jobs');
    await waitFor('both processes gone', async () => {
      const exits = await Promise.all(
        ['adv-long-1', 'adv-other-1'].map((j) => existsSync(join(jobs, j, 'exit.json'))),
      );
      return exits.every(Boolean);
    });
    const exit = JSON.parse(readFileSync(join(jobs, 'adv-long-1', 'exit.json'), 'utf8')) as {
      reason: string;
    };
    expect(exit.reason).toBe('Cancelled');
  });

  it('starts a run committed to a watched local repo without waiting for the fetch interval', async () => {
    const wt = await workTree({ 'backends/local.yaml': LOCAL_BACKEND });
    const c = await controller({
      repo: wt.dir,
      dataDir: await dataDir(),
      fetchIntervalMs: 600_000,
      pollIntervalMs: 100,
    });
    const serving = await serve(c, { watch: true });
    cleanups.push(() => serving.close());
    runInBackground(c);
    await waitFor('status branch', () => wt.git('rev-parse', 'adventuretime/status').catch(() => ''));
    await wt.write('runs/watched.yaml', runYaml('watched', ['true']));
    await wt.commit('add a run');
    await waitFor(
      'run submitted after the ref changed',
      () => c.runStatus('watched')?.status.attempts.length,
      60_000, // well inside the 10-minute fetch interval: only the ref watch can explain it
    );
  });
});

describe('metrics', () => {
  it('GET /metrics is Prometheus text with runs by phase, submissions by backend and pass durations', async () => {
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/m1.yaml': runYaml('m1', ['true']),
      'runs/m2.yaml': runYaml('m2', ['sh', '-c', 'exit 3'], '  policy: {maxAttempts: 1}\n'),
    });
    const c = await controller({ repo: wt.dir, dataDir: await dataDir() });
    await c.runUntilIdle({ timeoutMs: 60_000 });
    const serving = await serve(c, { httpAddr: '127.0.0.1:0', watch: false });
    cleanups.push(() => serving.close());
    const res = await fetch(`${serving.url}/metrics`);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toMatch(/^adventuretime_runs\{phase="Succeeded"\} 1$/m);
    expect(text).toMatch(/^adventuretime_runs\{phase="Failed"\} 1$/m);
    expect(text).toMatch(/^adventuretime_submissions_total\{backend="local"\} 2$/m);
    expect(text).toMatch(/^adventuretime_attempt_ends_total\{backend="local",class="UserError"\} 1$/m);
    expect(text).toMatch(/^adventuretime_reconcile_duration_seconds_count\{step="total"\} [1-9]\d*$/m);
    expect(text).toMatch(/^adventuretime_git_fetch_duration_seconds_count [1-9]\d*$/m);
    expect(text).toMatch(/^adventuretime_workqueue_depth \d+$/m);
  });
});

describe('a backend that fails run after run', () => {
  it('is marked Degraded in its status file, the next run goes elsewhere first, and a success clears it', async () => {
    const second = LOCAL_BACKEND.replace('name: local', 'name: spare');
    const failing = (name: string) =>
      runYaml(name, ['sh', '-c', 'exit 1'], '  policy: {maxAttempts: 1}\n').replace(
        'order: [local]',
        'order: [local, spare]',
      );
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'backends/spare.yaml': second,
      'runs/f1.yaml': failing('f1'),
      'runs/f2.yaml': failing('f2'),
      'runs/f3.yaml': failing('f3'),
    });
    const c = await controller({ repo: wt.dir, dataDir: await dataDir() });
    await c.runUntilIdle({ timeoutMs: 60_000 });
    const backend = async (name: string) =>
      parse(await wt.git('show', `adventuretime/status:backends/${name}.yaml`)) as {
        status: {
          conditions: { type: string; status: string; message: string }[];
          failureStreak?: unknown[];
        };
      };
    const degraded = (await backend('local')).status.conditions.find((x) => x.type === 'Degraded')!;
    expect(degraded.status).toBe('True');
    expect(degraded.message).toMatch(
      /^3 runs failed here in a row: f\d \(UserError\), f\d \(UserError\), f\d \(UserError\)/,
    );
    expect((await backend('local')).status.failureStreak).toHaveLength(3);

    // A new run whose order starts with the degraded backend goes to the healthy one first.
    await wt.write(
      'runs/ok.yaml',
      runYaml('ok', ['true']).replace('order: [local]', 'order: [local, spare]'),
    );
    await wt.commit('add ok');
    await c.runUntilIdle({ timeoutMs: 60_000 });
    const ok = c.runStatus('ok')!.status.attempts[0]!;
    expect(ok.backend).toBe('spare');
    expect(ok.why).toMatch(
      /^local: tried after the others: degraded \(3 runs failed here in a row: .*\); spare: chosen$/,
    );

    // A run that succeeds on it clears the streak.
    await wt.write('runs/good.yaml', runYaml('good', ['true']));
    await wt.commit('add good');
    await c.runUntilIdle({ timeoutMs: 60_000 });
    expect(c.runStatus('good')!.status.attempts[0]!.backend).toBe('local');
    const after = (await backend('local')).status.conditions.find((x) => x.type === 'Degraded')!;
    expect(after).toMatchObject({ status: 'False', reason: 'Healthy' });
  });
});

describe('checkpoints through the controller', () => {
  it('a run of the example workload on the local backend shows its latest checkpoint in status', async () => {
    const train = readFileSync(join(import.meta.dirname, '..', 'examples', 'toy-train', 'train.py'), 'utf8');
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'storage.yaml':
        'apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: default}\nspec: {type: file, file: {path: store}}\n',
      'train.py': train,
      'runs/toy.yaml': runYaml('toy', ['python3', 'train.py', '--steps', '30', '--ckpt-every', '10']),
    });
    const c = await controller({ repo: wt.dir, dataDir: await dataDir() });
    await c.runUntilIdle({ timeoutMs: 60_000 });
    const st = c.runStatus('toy')!.status;
    expect(st.phase).toBe('Succeeded');
    expect(st.checkpoint).toMatchObject({
      step: 30,
      uri: expect.stringMatching(/^file:\/\/.*\/store\/runs\/toy\/ckpt\/30\/$/),
    });
    expect(st.attempts[0]).toMatchObject({ lastStep: 30 });
    expect(st.conditions.find((x) => x.type === 'Checkpointed')).toMatchObject({
      status: 'True',
      reason: 'Committed',
    });
    expect(existsSync(join(c.dataDir, 'store', 'runs', 'toy', 'ckpt', '30', 'manifest.json'))).toBe(true);
  });
});

describe('crash safety (exactly-once submission)', () => {
  it('after a crash between the write-ahead record and the submit, submits once; after a crash after the submit, adopts', async () => {
    const wt = await workTree({
      // Jobs inherit nothing from the controller: the backend passes COUNT_DIR on by name.
      'backends/local.yaml': LOCAL_BACKEND + '  passEnv: [COUNT_DIR]\n',
      'runs/a.yaml': runYaml('a', ['sh', '-c', 'echo started >> "$COUNT_DIR/a"']),
    });
    const counts = await dataDir();
    process.env.COUNT_DIR = counts;
    const dir = await dataDir();
    // First controller: its backend never completes a submit (the process "dies" there).
    const { localBackend } = await import('../controller/backends/local/index.js');
    const hang = {
      ...localBackend,
      create: async (spec: never, ctx: never) => ({
        ...(await localBackend.create(spec, ctx)),
        name: 'local',
        type: 'local' as const,
        find: async () => undefined,
        submit: () => new Promise<never>(() => undefined),
      }),
    };
    const first = await Controller.create({ repo: wt.dir, dataDir: dir, backends: [hang as never] });
    await first.init();
    void first.pass(); // hangs in submit, after the write-ahead commit
    await waitFor(
      'write-ahead record',
      async () =>
        (await statusAt(join(wt.dir, '.git'), 'adventuretime/status', 'a'))?.status.attempts[0]?.phase ===
        'Submitting',
    );
    // The process dies there (its data dir's lock goes with it); the restart finds no job by that
    // name and submits it, once.
    await first.stop();
    const second = await controller({ repo: wt.dir, dataDir: dir });
    await second.runUntilIdle({ timeoutMs: 60_000 });
    expect(second.runStatus('a')?.status.phase).toBe('Succeeded');
    expect(second.runStatus('a')?.status.attempts).toHaveLength(1);
    expect(readFileSync(join(counts, 'a'), 'utf8')).toBe('started\n');
  });
});

describe('remote specs repo over smart HTTP', () => {
  let server: GitHttpServer;
  beforeAll(async () => {
    server = await startGitHttp({ token: 's3cret-token' });
  });
  afterAll(() => server.stop());

  it(
    'fetches with a token, pushes status, and never rejects a user who keeps pushing',
    // The budgets inside are sized from measured push costs; vitest's timeout only guards a hang.
    { timeout: HANG_GUARD_MS },
    async () => {
      const bare = await server.createRepo('busy');
      const wt = await workTree({ 'backends/local.yaml': LOCAL_BACKEND }, server.url('busy'));
      const c = await controller({
        repo: server.url('busy'),
        dataDir: await dataDir(),
        token: 's3cret-token',
      });
      runInBackground(c);
      // The user pushes 200 commits (some add runs) while the controller writes status; held to what
      // a commit and a push through git http-backend cost on this machine now, times 200.
      const perPush = await repeatWithinBudget('200 user commits and pushes', 200, async (i) => {
        if (i % 40 === 0) await wt.write(`runs/r${i}.yaml`, runYaml(`r${i}`, ['true']));
        await wt.write(`notes/${i}.md`, `note ${i}\n`);
        await wt.commit(`user commit ${i}`);
        await wt.push(); // throws if rejected
      });
      expect(Number(await git(['rev-list', '--count', 'main'], { gitdir: bare }).then(String))).toBe(201);
      await waitFor(
        async () => {
          const docs = await Promise.all(
            [0, 40, 80, 120, 160].map((i) => statusAt(bare, 'adventuretime/status', `r${i}`)),
          );
          return docs.every((d) => d?.status.phase === 'Succeeded');
        },
        {
          what: 'all five runs Succeeded on the remote status branch',
          // Each run takes the controller a few status pushes of its own.
          budget: Budget.for('five runs to finish', { perOpMs: perPush, count: 50, minMs: 90_000 }),
          everyMs: 200,
        },
      );
      // Every status commit the controller made is on the remote, in one line of history.
      const local = (
        await git(['rev-parse', 'refs/heads/adventuretime/status'], { gitdir: c.repo.git.gitdir })
      )
        .toString()
        .trim();
      await waitFor(
        'remote has the controller head',
        async () =>
          (await git(['rev-parse', 'adventuretime/status'], { gitdir: bare })).toString().trim() === local,
      );
      expect(Number((await git(['rev-list', '--count', 'main'], { gitdir: bare })).toString())).toBe(201);
    },
  );

  it('keeps reconciling while the remote is down, queues status commits, and pushes them when it is back', async () => {
    const bare = await server.createRepo('flaky');
    // The run ends when the test says so (the remote is down by then), not after a fixed sleep.
    const release = join(await dataDir(), 'release');
    await workTree(
      {
        'backends/local.yaml': LOCAL_BACKEND,
        'runs/slow.yaml': runYaml(
          'slow',
          ['sh', '-c', 'until [ -e "$RELEASE" ]; do sleep 0.05; done'],
          `  env: {RELEASE: ${release}}\n`,
        ),
      },
      server.url('flaky'),
    );
    const c = await controller({
      repo: server.url('flaky'),
      dataDir: await dataDir(),
      token: 's3cret-token',
    });
    runInBackground(c);
    await waitFor(
      'running on the remote',
      async () => (await statusAt(bare, 'adventuretime/status', 'slow'))?.status.phase === 'Running',
      90_000, // a ceiling: each wait spans a pass, a status commit and a push
    );
    server.down = true;
    await writeFile(release, '');
    try {
      await waitFor(
        'finished while the remote is down, commit queued',
        async () => c.runStatus('slow')?.status.phase === 'Succeeded' && (await c.repo.unpublished()),
        90_000,
      );
      expect((await statusAt(bare, 'adventuretime/status', 'slow'))?.status.phase).toBe('Running');
    } finally {
      server.down = false;
    }
    await waitFor(
      'pushed once the remote is back',
      async () => (await statusAt(bare, 'adventuretime/status', 'slow'))?.status.phase === 'Succeeded',
      90_000,
    );
  });

  it('a second controller stands by while the first holds the lease, and submits nothing', async () => {
    await server.createRepo('split');
    const wt = await workTree({ 'backends/local.yaml': LOCAL_BACKEND }, server.url('split'));
    const opts = { repo: server.url('split'), token: 's3cret-token' };
    const a = await controller({ ...opts, dataDir: await dataDir() });
    const b = await controller({ ...opts, dataDir: await dataDir() });
    await a.init();
    await b.init();
    expect((await a.pass()).leader).toBe(true);
    expect((await b.pass()).leader).toBe(false); // the lease is on the remote, a's
    await wt.write('runs/once.yaml', runYaml('once', ['sleep', '1']));
    await wt.commit('add once');
    await wt.push();
    a.requestFetch('test');
    b.requestFetch('test');
    await a.pass(); // A writes the write-ahead record, pushes, submits
    expect(a.runStatus('once')?.status.attempts[0]?.jobId).toBeTruthy();
    const stats = await b.pass(); // B stands by: it plans, writes and submits nothing
    expect(stats).toMatchObject({ leader: false, actions: 0, commits: 0 });
    expect(existsSync(join(b.dataDir, 'local', 'local', 'jobs', 'adv-once-1'))).toBe(false);
    // B reads the remote's status all the same (its dashboard shows A's attempt).
    expect(b.runStatus('once')?.status.attempts[0]?.jobId).toBe(
      a.runStatus('once')?.status.attempts[0]?.jobId,
    );
  });

  it('fetches at once on a signed webhook and refuses an unsigned one', async () => {
    await server.createRepo('hooked');
    const wt = await workTree({ 'backends/local.yaml': LOCAL_BACKEND }, server.url('hooked'));
    const c = await controller({
      repo: server.url('hooked'),
      dataDir: await dataDir(),
      token: 's3cret-token',
      fetchIntervalMs: 600_000,
    });
    const serving = await serve(c, { httpAddr: '127.0.0.1:0', webhookSecret: 'hook-secret', watch: false });
    cleanups.push(() => serving.close());
    runInBackground(c);
    await waitFor('first pass done', () => c.repo.git.resolveRef(c.repo.statusRef));
    await wt.write('runs/hooked.yaml', runYaml('hooked', ['true']));
    await wt.commit('add hooked');
    await wt.push();
    const body = JSON.stringify({ ref: 'refs/heads/main' });
    const bad = await fetch(`${serving.url}/hooks/git`, {
      method: 'POST',
      body,
      headers: { 'x-hub-signature-256': signBody('wrong', body) },
    });
    expect(bad.status).toBe(401);
    // Two whole passes after the refusal (one may have been under way) and still nothing fetched.
    const passes = async () =>
      Number(
        /^adventuretime_reconcile_duration_seconds_count\{step="total"\} (\d+)$/m.exec(
          await (await fetch(`${serving.url}/metrics`)).text(),
        )?.[1] ?? 0,
      );
    const before = await passes();
    await waitFor(async () => (await passes()) >= before + 2, {
      what: 'two controller passes after the refused webhook',
    });
    expect(c.runStatus('hooked')).toBeUndefined();
    const good = await fetch(`${serving.url}/hooks/git`, {
      method: 'POST',
      body,
      headers: { 'x-hub-signature-256': signBody('hook-secret', body) },
    });
    expect(good.status).toBe(202);
    // Well inside the 10-minute fetch interval: only the webhook can explain it.
    await waitFor('run seen after the webhook', () => c.runStatus('hooked')?.status.attempts.length, 60_000);
  });

  it('says clearly when the token is wrong', async () => {
    await server.createRepo('locked');
    const c = await controller({ repo: server.url('locked'), dataDir: await dataDir(), token: 'wrong' });
    await expect(c.repo.refresh()).rejects.toThrow(
      /git fetch from http:\/\/127\.0\.0\.1:\d+\/locked\.git failed: .*Authentication failed/,
    );
  });
});

describe('job dirs', () => {
  it('leave no stray jobs behind in a data dir after a run', async () => {
    const wt = await workTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/x.yaml': runYaml('x', ['true']),
    });
    const c = await controller({ repo: wt.dir, dataDir: await dataDir() });
    await c.runUntilIdle({ timeoutMs: 60_000 });
    expect(await readdir(join(c.dataDir, 'local', 'local', 'jobs'))).toEqual(['adv-x-1']);
  });
});
