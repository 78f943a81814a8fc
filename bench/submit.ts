/**
 * `adv submit` against doing it by hand (issue 30): the same run — the same spec, the same
 * command, on the local backend of a controller watching a specs repo over smart HTTP (polling,
 * 200 ms) — started by
 *   - hand: write runs/<name>.yaml, `git add && git commit && git push`,
 *   - `adv submit` (the built CLI) from a clean work tree (code = HEAD),
 *   - `adv submit` from a dirty work tree (the snapshot commit and its push on top),
 * measured twice: until the command returns (what the user waits for at the prompt), and until the
 * job's process has started (`startedAt` in exec.json). Trials alternate between the three, so
 * the machine's load falls on each alike.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Controller } from '../controller/controller.js';
import { startGitHttp } from '../test/helpers/git/git-http.js';
import { ID, LOCAL_BACKEND, makeWorkTree } from '../test/helpers/git/specs-repo.js';
import { waitFor } from '../test/helpers/wait.js';
import { median, table } from './lib.js';

const TRIALS = Number(process.env.BENCH_TRIALS ?? 10);
const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const cli = join(root, 'dist', 'cli', 'adv.js');
if (!existsSync(cli)) throw new Error('run `npm run build` first: jobs and adv submit run the built CLI');
process.env.ADV_SELF_COMMAND = JSON.stringify([process.execPath, cli]);

const COMMAND = ['sh', '-c', 'echo started'];
const spec = (name: string, ref: string) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata:
  name: ${name}
spec:
  command: ${JSON.stringify(COMMAND)}
  code:
    ref: ${ref}
  backendSelector:
    order: [local]
`;

type Mode = 'hand' | 'submit-clean' | 'submit-dirty';
const MODES: Mode[] = ['hand', 'submit-clean', 'submit-dirty'];

async function main(): Promise<void> {
  const tmp = await mkdtemp(join(tmpdir(), 'adv-bench-submit-'));
  const server = await startGitHttp();
  await server.createRepo('specs');
  const url = server.url('specs');
  const wt = await makeWorkTree(
    { 'backends/local.yaml': LOCAL_BACKEND, 'train.py': 'print(1)\n', 'runs/README': 'runs live here\n' },
    url,
  );
  const c = await Controller.create({
    repo: url,
    infra: { from: 'repo' },
    dataDir: join(tmp, 'data'),
    fetchIntervalMs: 200,
    pollIntervalMs: 200,
  });
  const loop = c.run();
  // Asynchronous: the git server and the controller run in this process and must keep serving.
  const sh = async (cmd: string, args: string[]) =>
    (
      await promisify(execFile)(cmd, args, {
        cwd: wt.dir,
        env: { ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') },
      })
    ).stdout;
  const samples: Record<Mode, { returned: number[]; started: number[] }> = {
    hand: { returned: [], started: [] },
    'submit-clean': { returned: [], started: [] },
    'submit-dirty': { returned: [], started: [] },
  };
  const startup: number[] = [];
  try {
    for (let i = 0; i < TRIALS; i++) {
      for (const mode of MODES) {
        const name = `${mode}-${i}`;
        // The work tree each mode starts from: up to date, clean or with an edit not committed.
        await sh('git', ['checkout', '--quiet', '--', 'train.py']);
        await sh('git', ['pull', '--quiet', '--rebase', 'origin', 'main']);
        if (mode === 'submit-dirty') await writeFile(join(wt.dir, 'train.py'), `print(${i})\n`);
        const t0 = Date.now();
        if (mode === 'hand') {
          // As the docs told users before: the spec by hand, pinned to HEAD, committed and pushed.
          const head = (await sh('git', ['rev-parse', 'HEAD'])).trim();
          await writeFile(join(wt.dir, 'runs', `${name}.yaml`), spec(name, head));
          await sh('git', [...ID, 'add', `runs/${name}.yaml`]);
          await sh('git', [...ID, 'commit', '--quiet', '-m', `run ${name}`]);
          await sh('git', ['push', '--quiet', 'origin', 'main']);
        } else {
          await sh(process.execPath, [
            cli,
            'submit',
            '--repo',
            url,
            '--on',
            'local',
            '--name',
            name,
            '--',
            ...COMMAND,
          ]);
        }
        samples[mode].returned.push(Date.now() - t0);
        const exec = join(c.dataDir, 'local', 'local', 'jobs', `adv-${name}-1`, 'exec.json');
        const rec = await waitFor(
          `${name} started`,
          () =>
            existsSync(exec) ? (JSON.parse(readFileSync(exec, 'utf8')) as { startedAt: string }) : undefined,
          60_000,
          5,
        );
        samples[mode].started.push(Date.parse(rec.startedAt) - t0);
      }
      // Where adv submit's time goes: the CLI's own start-up (Node, the barrel) is part of it.
      const t0 = Date.now();
      await sh(process.execPath, [cli, '--version']);
      startup.push(Date.now() - t0);
    }
  } finally {
    await c.stop();
    await loop;
    await wt.cleanup();
    await server.stop();
    await rm(tmp, { recursive: true, force: true });
  }
  const hand = { returned: median(samples.hand.returned), started: median(samples.hand.started) };
  console.log(`\n### adv submit against git commit && git push by hand (${TRIALS} trials each, medians)\n`);
  console.log(
    table(
      ['how', 'command returns ms', 'ratio', 'job started ms', 'ratio'],
      MODES.map((m) => {
        const r = median(samples[m].returned);
        const s = median(samples[m].started);
        return [
          m === 'hand'
            ? 'by hand: write the YAML, git add, commit, push'
            : `adv submit, ${m === 'submit-clean' ? 'clean tree' : 'dirty tree (snapshot + its push)'}`,
          r,
          m === 'hand' ? '1' : (r / hand.returned).toFixed(2),
          s,
          m === 'hand' ? '1' : (s / hand.started).toFixed(2),
        ];
      }),
    ),
  );
  console.log(`\nadv --version alone (Node and the CLI's start-up): ${median(startup)} ms (median).`);
}

await main();
