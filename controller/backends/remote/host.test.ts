import { shellQuote } from '../../internal/shell.js';
/**
 * The remote-host module over a transport that runs commands in a local `sh` (what sshd does with
 * an exec request): the real scripts — ship, find-or-launch, the bootstrap, observe, cancel — with
 * a stand-in `adv exec` that only writes its records.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { shellJoin } from '../../internal/shell.js';
import type { ExecResult } from '../../transport/ssh.js';
import type { CodeExporter, JobRequest } from '../types.js';
import { RemoteHost, type RemoteTransport } from './host.js';
import { packFiles } from './pack.js';
import { jobPids } from '../../../test/helpers/backends/job-pids.js';
import { killTree } from '../../../test/helpers/processes.js';

/** Runs each command as sshd would: the joined argv through `sh -c`. */
class ShellTransport implements RemoteTransport {
  readonly where = 'test@localhost:22';
  commands = 0;
  constructor(private readonly env: NodeJS.ProcessEnv = process.env) {}
  exec(argv: readonly string[], opts: { input?: Buffer | string } = {}): Promise<ExecResult> {
    this.commands++;
    return new Promise((resolve, reject) => {
      const p = spawn('sh', ['-c', shellJoin(argv)], { stdio: ['pipe', 'pipe', 'pipe'], env: this.env });
      const out: Buffer[] = [];
      let err = '';
      p.stdout.on('data', (b: Buffer) => out.push(b));
      p.stderr.on('data', (b: Buffer) => (err += b.toString()));
      p.on('error', reject);
      p.on('close', (code) => resolve({ code: code ?? 255, stdout: Buffer.concat(out), stderr: err }));
      p.stdin.on('error', () => undefined); // a command that reads no stdin closes it early
      p.stdin.end(opts.input ?? '');
    });
  }
  close(): void {}
}

/**
 * Stands in for the bundled `adv exec`: runs the command in its own process group, like adv exec,
 * and records exec.json once the workload has started and exit.json once it has ended — `Cancelled`
 * when the job dir says so. It lets a SIGTERM (a cancel) end the workload and records that, as adv
 * exec does. (A stand-in that died of the SIGTERM itself did not always die under load: now and then
 * Node's default handler ran and the process lived on to record its workload's death as a failure.)
 */
const FAKE_EXEC = `import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
const a = process.argv.slice(2);
const dir = a[a.indexOf('--job-dir') + 1];
const argv = a.slice(a.indexOf('--') + 1);
const startedAt = new Date().toISOString();
const child = spawn(argv[0], argv.slice(1), { stdio: 'inherit', detached: true });
process.on('SIGTERM', () => process.kill(-child.pid, 'SIGTERM'));
child.on('spawn', () => writeFileSync(dir + '/exec.json', JSON.stringify({ pid: process.pid, childPid: child.pid, startedAt })));
child.on('exit', (status) => {
  const code = status ?? 1;
  const reason = existsSync(dir + '/cancel-requested') ? 'Cancelled' : code === 0 ? 'Completed' : 'Error';
  writeFileSync(dir + '/exit.json', JSON.stringify({ exitCode: code, reason, startedAt, finishedAt: new Date().toISOString() }));
  process.exit(code);
});
`;

describe('RemoteHost over a shell transport', () => {
  let tmp: string;
  let host: RemoteHost;
  let transport: ShellTransport;
  const payloads: string[] = [];
  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-remote-'));
    await writeFile(join(tmp, 'fake-exec.mjs'), FAKE_EXEC);
    const tarball = gzipSync(await packFiles([{ name: 'hello.txt', body: 'hi\n', mode: 0o644 }]));
    const code: CodeExporter = {
      treeOf: async () => 'tree1',
      payload: async (tree) => {
        payloads.push(tree);
        return tarball;
      },
      extractTo: async () => undefined,
    };
    transport = new ShellTransport();
    host = new RemoteHost({
      transport,
      paths: { root: join(tmp, 'root') },
      code,
      logger: pino({ level: 'silent' }),
      bundlePath: () => join(tmp, 'fake-exec.mjs'),
    });
  });
  afterAll(async () => {
    await killTree(await jobPids(join(tmp, 'root', 'work')));
    await rm(tmp, { recursive: true, force: true });
  });

  const job = (name: string, argv: string[], env: Record<string, string> = {}): JobRequest => ({
    jobName: name,
    run: name,
    attempt: 1,
    spec: {},
    argv,
    code: { commit: 'c1' },
    env,
    setup: [{ from: 'Backend h', run: 'echo host-setup > "$ADV_JOB_DIR/setup.txt"' }],
    uv: { groups: ['train'] },
  });

  it('launches a batch once, ships the code once, and reads the records back', async () => {
    const jobs = [
      job(
        'adv-ok-1',
        ['sh', '-c', 'cat hello.txt > "$ADV_JOB_DIR/seen.txt"; echo "$QUOTED" > "$ADV_JOB_DIR/env.txt"'],
        {
          QUOTED: `it's "$(not run)"`,
        },
      ),
      job('adv-fail-1', ['false']),
    ];
    const first = await host.launchMany(jobs);
    expect(first.every((r) => !(r instanceof Error) && /^\d+$/.test(r.pid) && !r.adopted)).toBe(true);
    expect(payloads).toEqual(['tree1']);
    // A second find-or-launch of the same names adopts them.
    const again = await host.launchMany(jobs);
    expect(again.map((r) => !(r instanceof Error) && r.adopted)).toEqual([true, true]);
    const handles = jobs.map((j, i) => ({
      backend: 'h',
      jobName: j.jobName,
      jobId: (first[i] as { pid: string }).pid,
    }));
    const work = join(tmp, 'root', 'work');
    for (const name of ['adv-fail-1', 'adv-ok-1'])
      await vi.waitFor(
        () => {
          if (!existsSync(join(work, name, 'exit.json'))) throw new Error(`no exit record of ${name} yet`);
        },
        { timeout: 60_000, interval: 50 },
      );
    const seen = await host.observe(handles);
    expect(seen.map((o) => [o.jobName, o.state, o.exitCode])).toEqual([
      ['adv-ok-1', 'Succeeded', 0],
      ['adv-fail-1', 'Failed', 1],
    ]);
    expect(await readFile(join(work, 'adv-ok-1', 'seen.txt'), 'utf8')).toBe('hi\n');
    expect(await readFile(join(work, 'adv-ok-1', 'env.txt'), 'utf8')).toBe(`it's "$(not run)"\n`);
    // The setup is adv exec's to run (ADV_SETUP, ADV_UV, ADV_CACHE_DIR): the bootstrap runs no step.
    expect(existsSync(join(work, 'adv-ok-1', 'setup.txt'))).toBe(false);
    const envText = await readFile(join(work, 'adv-ok-1', 'env'), 'utf8');
    expect(envText).toContain(`export ADV_SETUP=${shellQuote(JSON.stringify(jobs[0]!.setup))}\n`);
    expect(envText).toContain(`export ADV_UV='{"groups":["train"]}'\n`);
    expect(envText).toContain(`export ADV_CACHE_DIR=${shellQuote(join(tmp, 'root', 'cache'))}\n`);
    expect(await readFile(join(work, 'adv-ok-1', 'run.sh'), 'utf8')).not.toMatch(/ADV_SETUP|uv sync/);
    expect(await host.findPid('adv-ok-1')).toBe(handles[0]!.jobId);
    expect(await host.findPid('adv-never-1')).toBeUndefined();
  }, 120_000);

  /** Polls the job's observed state until it is one of `want`: on a loaded machine the shell takes its time. */
  const stateOf = (h: { backend: string; jobName: string; jobId: string }, want: string[]) =>
    vi.waitFor(
      async () => {
        const o = (await host.observe([h]))[0]!;
        if (!want.includes(o.state)) throw new Error(`state ${o.state}, waiting for ${want.join(' or ')}`);
        return o;
      },
      { timeout: 60_000, interval: 50 },
    );

  it('says a job dir that is not there is missing, and cancels a running job', async () => {
    const [missing] = await host.observe([{ backend: 'h', jobName: 'adv-none-1', jobId: '1' }]);
    expect(missing).toMatchObject({ state: 'Lost', reason: 'JobDirMissing' });
    const pid = await host.launch(job('adv-long-1', ['sleep', '30']));
    const h = { backend: 'h', jobName: 'adv-long-1', jobId: pid };
    await stateOf(h, ['Running']);
    await host.cancel('adv-long-1');
    expect(existsSync(join(tmp, 'root', 'work', 'adv-long-1', 'cancel-requested'))).toBe(true);
    expect(await stateOf(h, ['Cancelled', 'Failed', 'Succeeded', 'Lost'])).toMatchObject({
      state: 'Cancelled',
      reason: 'Cancelled',
    });
  }, 120_000);

  it('reads a job that ended between its two looks (no exit record, then a dead pid) as ended, not lost', async () => {
    // adv exec writes exit.json and exits; both land after the script found no exit.json and
    // before `kill -0`. A `cat` that, asked for the pid, writes the record first makes it certain.
    const bin = join(tmp, 'racy-bin');
    await mkdir(bin);
    await writeFile(
      join(bin, 'cat'),
      `#!/bin/sh\ncase "$1" in */pid) printf '{"exitCode":0,"reason":"Completed","startedAt":"","finishedAt":""}' > "$(dirname "$1")/exit.json";; esac\nexec /bin/cat "$@"\n`,
      { mode: 0o755 },
    );
    const dir = join(tmp, 'root', 'work', 'adv-racy-1');
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'pid'), '2147483646\n');
    const racy = new RemoteHost({
      transport: new ShellTransport({ ...process.env, PATH: `${bin}:${process.env.PATH}` }),
      paths: { root: join(tmp, 'root') },
      code: {
        treeOf: async () => 't',
        payload: async () => Buffer.alloc(0),
        extractTo: async () => undefined,
      },
      logger: pino({ level: 'silent' }),
    });
    const [o] = await racy.observe([{ backend: 'h', jobName: 'adv-racy-1', jobId: '2147483646' }]);
    expect(o).toMatchObject({ state: 'Succeeded', exitCode: 0 });
  });

  it('says a job whose processes vanished without a record is lost', async () => {
    const pid = await host.launch(job('adv-vanish-1', ['sleep', '30']));
    const h = { backend: 'h', jobName: 'adv-vanish-1', jobId: pid };
    await stateOf(h, ['Running']);
    // The stand-in's group and the workload's: nothing is left to write a record.
    const exec = JSON.parse(await readFile(join(tmp, 'root', 'work', 'adv-vanish-1', 'exec.json'), 'utf8'));
    process.kill(-Number(pid), 'SIGKILL');
    process.kill(-(exec as { childPid: number }).childPid, 'SIGKILL');
    expect(await stateOf(h, ['Cancelled', 'Failed', 'Succeeded', 'Lost'])).toMatchObject({
      state: 'Lost',
      reason: 'ProcessVanished',
    });
  }, 120_000);
});
