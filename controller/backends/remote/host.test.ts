/**
 * The remote-host module over a transport that runs commands in a local `sh` (what sshd does with
 * an exec request): the real scripts — ship, find-or-launch, the bootstrap, observe, cancel — with
 * a stand-in `adv exec` that only writes its records.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { shellJoin } from '../../internal/shell.js';
import type { ExecResult } from '../ssh/transport.js';
import type { CodeExporter, JobRequest } from '../types.js';
import { RemoteHost, type RemoteTransport } from './host.js';
import { packFiles } from './pack.js';

/** Runs each command as sshd would: the joined argv through `sh -c`. */
class ShellTransport implements RemoteTransport {
  readonly where = 'test@localhost:22';
  commands = 0;
  exec(argv: readonly string[], opts: { input?: Buffer | string } = {}): Promise<ExecResult> {
    this.commands++;
    return new Promise((resolve, reject) => {
      const p = spawn('sh', ['-c', shellJoin(argv)], { stdio: ['pipe', 'pipe', 'pipe'] });
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

/** Stands in for the bundled `adv exec`: records exec.json, runs the command, records exit.json. */
const FAKE_EXEC = `import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
const a = process.argv.slice(2);
const dir = a[a.indexOf('--job-dir') + 1];
const argv = a.slice(a.indexOf('--') + 1);
const startedAt = new Date().toISOString();
writeFileSync(dir + '/exec.json', JSON.stringify({ pid: process.pid, startedAt }));
const r = spawnSync(argv[0], argv.slice(1), { stdio: 'inherit' });
const code = r.status ?? 1;
writeFileSync(dir + '/exit.json', JSON.stringify({ exitCode: code, reason: code === 0 ? 'Completed' : 'Error', startedAt, finishedAt: new Date().toISOString() }));
process.exit(code);
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
      setup: ['echo host-setup > "$ADV_JOB_DIR/setup.txt"'],
      code,
      logger: pino({ level: 'silent' }),
      bundlePath: () => join(tmp, 'fake-exec.mjs'),
    });
  });
  afterAll(() => rm(tmp, { recursive: true, force: true }));

  const job = (name: string, argv: string[], env: Record<string, string> = {}): JobRequest => ({
    jobName: name,
    run: name,
    attempt: 1,
    spec: {},
    argv,
    code: { commit: 'c1' },
    env,
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
    expect(await readFile(join(work, 'adv-ok-1', 'setup.txt'), 'utf8')).toBe('host-setup\n');
    expect(await host.findPid('adv-ok-1')).toBe(handles[0]!.jobId);
    expect(await host.findPid('adv-never-1')).toBeUndefined();
  }, 120_000);

  it('says a job dir that is not there is missing, and cancels a running job', async () => {
    const [missing] = await host.observe([{ backend: 'h', jobName: 'adv-none-1', jobId: '1' }]);
    expect(missing).toMatchObject({ state: 'Lost', reason: 'JobDirMissing' });
    const pid = await host.launch(job('adv-long-1', ['sleep', '30']));
    const h = { backend: 'h', jobName: 'adv-long-1', jobId: pid };
    // Waits on the state, not on a window: on a loaded machine the shell takes its time.
    const stateIs = (want: string[]) =>
      vi.waitFor(
        async () => {
          const s = (await host.observe([h]))[0]!.state;
          if (!want.includes(s)) throw new Error(`state ${s}, waiting for ${want.join(' or ')}`);
          return s;
        },
        { timeout: 60_000, interval: 50 },
      );
    await stateIs(['Running']);
    await host.cancel('adv-long-1');
    expect(existsSync(join(tmp, 'root', 'work', 'adv-long-1', 'cancel-requested'))).toBe(true);
    const state = await stateIs(['Lost', 'Failed']);
    // The stand-in exec dies with its process group, without an exit record: the process vanished.
    expect(state).toBe('Lost');
  }, 120_000);
});
