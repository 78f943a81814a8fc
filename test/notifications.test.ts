/**
 * Notifications end to end: a controller (the compiled CLI, a real process) runs runs that succeed
 * and fail on the local backend, and sends their events through Providers to receivers on
 * loopback: a signed webhook (HMAC checked), a Slack-shaped one, GitHub commit statuses on a fake
 * GitHub API (token checked), and a receiver that fails twice before it takes the event. The
 * controller is SIGKILLed while a delivery is in flight and restarted: what was delivered before
 * is not sent again, what was not is sent after the restart, and the receiver — deduping on the
 * event id, as docs/notifications.md tells receivers to — takes exactly one message per event.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { createHmac } from 'node:crypto';
import { chmod, mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Controller } from '../controller/controller.js';
import type { AlertStatusDoc, RunStatusDoc, SourceStatusDoc } from '../controller/status/types.js';
import { startFakeGithub, type FakeGithub } from './helpers/cloud/fake-github.js';
import { removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { passUntil, waitFor } from './helpers/wait.js';

const execFileAsync = promisify(execFile);
const ADV = [process.execPath, join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js')];
const HOOK_KEY = 'hmac-key-0123456789';
const GH_TOKEN = 'ghp_fake_token_for_tests';
const SLACK_PATH = '/slack/T000/B000/xoxsecretpath';

interface Received {
  path: string;
  id: string;
  body: string;
  signature: string | undefined;
}

/** A receiver on loopback: records every request, holds the ones `hold` says, fails `/flaky` twice. */
class Receiver {
  readonly all: Received[] = [];
  /** Event ids taken (answered 2xx), deduped as a receiver should. */
  readonly taken = new Map<string, Received>();
  hold: (r: Received) => boolean = () => false;
  private readonly held: ServerResponse[] = [];
  private flakyFailures = 0;
  private server!: Server;
  url = '';

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.handle(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Received = {
        path: req.url ?? '',
        id: String(req.headers['x-adventuretime-event-id'] ?? ''),
        body: Buffer.concat(chunks).toString('utf8'),
        signature: req.headers['x-adventuretime-signature'] as string | undefined,
      };
      this.all.push(r);
      if (r.path === '/hook') {
        const want = `sha256=${createHmac('sha256', HOOK_KEY).update(r.body).digest('hex')}`;
        if (r.signature !== want) return void res.writeHead(401).end('bad signature');
      }
      if (r.path === '/flaky' && this.flakyFailures < 2) {
        this.flakyFailures++;
        return void res.writeHead(503).end();
      }
      if (this.hold(r)) return void this.held.push(res);
      this.taken.set(`${r.path} ${r.id}`, r);
      res.writeHead(204).end();
    });
  }

  count(path: string, id: string): number {
    return this.all.filter((r) => r.path === path && r.id === id).length;
  }

  async stop(): Promise<void> {
    for (const res of this.held) res.destroy();
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

const run = (
  name: string,
  script: string,
  labels = '{notify: "yes"}',
) => `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: ${name}, labels: ${labels}}
spec:
  command: ["sh", "-c", ${JSON.stringify(script)}]
  policy: {maxAttempts: 1}
  backendSelector: {order: [local]}
`;

const provider = (name: string, spec: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: Provider\nmetadata: {name: ${name}}\nspec:\n${spec}---\n`;
const alert = (name: string, providerName: string, events: string, extra = '') =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: Alert\nmetadata: {name: ${name}}\nspec:\n  providerRef: {name: ${providerName}}\n  events: ${events}\n${extra}---\n`;

let tmp: string;
let receiver: Receiver;
let github: FakeGithub;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-notify-'));
  receiver = new Receiver();
  await receiver.start();
  github = await startFakeGithub(GH_TOKEN);
});
afterAll(async () => {
  await receiver.stop();
  await github.stop();
  await removeTree(tmp);
});

function startController(
  repo: string,
  dataDir: string,
  secrets: string,
): ChildProcess & { stderrText: () => string } {
  const args = [
    ...['controller', '--repo', repo, '--data-dir', dataDir, '--secrets-file', secrets],
    ...['--poll-interval', '200ms', '--fetch-interval', '300ms', '--log-level', 'warn'],
  ];
  const proc = spawn(ADV[0]!, [...ADV.slice(1), ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (b: Buffer) => (err = (err + b.toString()).slice(-4000)));
  return Object.assign(proc, { stderrText: () => err });
}

async function adv(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(ADV[0]!, [...ADV.slice(1), ...args], {
    cwd,
    env: { ...process.env, NO_COLOR: '1' },
  });
  return stdout;
}

async function stopProcess(proc: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill(signal);
  await exited;
}

async function outbox(wt: WorkTree, name: string): Promise<AlertStatusDoc['status'] | undefined> {
  try {
    return (parse(await wt.git('show', `adventuretime/status:alerts/${name}.yaml`)) as AlertStatusDoc).status;
  } catch {
    return undefined;
  }
}

async function runStatus(wt: WorkTree, name: string): Promise<RunStatusDoc['status']> {
  return (parse(await wt.git('show', `adventuretime/status:runs/${name}.yaml`)) as RunStatusDoc).status;
}

const delivered = (st: AlertStatusDoc['status'] | undefined, id: string) =>
  st?.deliveries[id]?.state === 'delivered';

describe('notifications', () => {
  it('delivers each event once across a SIGKILL of the controller, to webhook, Slack and GitHub receivers', async () => {
    const secrets = join(tmp, 'secrets.env');
    await writeFile(
      secrets,
      `HOOK_KEY=${HOOK_KEY}\nSLACK_URL=${receiver.url}${SLACK_PATH}\nGH_TOKEN=${GH_TOKEN}\nGH_WRONG=not-the-token\n`,
    );
    await chmod(secrets, 0o600);
    const notifications =
      provider('hook', `  type: webhook\n  address: ${receiver.url}/hook\n  secretRef: {name: HOOK_KEY}\n`) +
      provider('slack', '  type: slack\n  secretRef: {name: SLACK_URL}\n') +
      provider(
        'gh',
        `  type: github\n  address: https://github.com/lab/specs\n  apiUrl: ${github.url}\n  secretRef: {name: GH_TOKEN}\n`,
      ) +
      provider(
        'gh-wrong',
        `  type: github\n  address: https://github.com/lab/specs\n  apiUrl: ${github.url}\n  secretRef: {name: GH_WRONG}\n`,
      ) +
      provider('flaky', `  type: webhook\n  address: ${receiver.url}/flaky\n`) +
      alert('runs', 'hook', '[RunSucceeded, RunFailed]', '  selector: notify=yes\n') +
      alert('failures', 'slack', '[RunFailed]') +
      alert('commits', 'gh', '[RunSucceeded, RunFailed]', '  selector: notify=yes\n') +
      alert('commits-wrong', 'gh-wrong', '[RunSucceeded]', '  selector: notify=yes\n') +
      alert('preempts', 'hook', '[RunPreempted]', '  selector: kind=preempted\n') +
      alert('retried', 'flaky', '[RunSucceeded]', '  selector: stage=after\n');
    // `held` is the event the receiver holds unanswered until the controller is killed.
    const heldId = 'Run/held/1/RunSucceeded';
    receiver.hold = (r) => r.path === '/hook' && r.id === heldId;
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'notifications/all.yaml': notifications,
      'runs/ok.yaml': run('ok', 'exit 0'),
      'runs/bad.yaml': run('bad', 'echo failing; exit 3'),
      'runs/held.yaml': run('held', 'exit 0'),
      'runs/quiet.yaml': run('quiet', 'exit 0', '{notify: "no"}'),
      // Its first attempt is preempted (adv exec takes a SIGTERM, as from a spot reclaim).
      'runs/pre.yaml': run(
        'pre',
        'if [ "$ADV_ATTEMPT" -le 1 ]; then kill -TERM $PPID; sleep 30; fi',
        '{notify: "no", kind: preempted}',
      ),
    });
    const dataDir = join(tmp, 'data');
    let proc = startController(wt.dir, dataDir, secrets);
    try {
      const exited = () => proc.exitCode !== null && `the controller exited: ${proc.stderrText()}`;
      // Before the kill: ok and bad delivered and recorded so on the status branch; held in flight.
      await waitFor(
        async () => {
          const st = await outbox(wt, 'runs');
          return (
            delivered(st, 'Run/ok/1/RunSucceeded') &&
            delivered(st, 'Run/bad/1/RunFailed') &&
            receiver.count('/hook', heldId) > 0
          );
        },
        {
          what: 'ok and bad delivered, held in flight',
          timeoutMs: 90_000,
          giveUpIf: exited,
          detail: () => receiver.all,
        },
      );
      await stopProcess(proc, 'SIGKILL');
      expect(delivered(await outbox(wt, 'runs'), heldId)).toBe(false);
      receiver.hold = () => false;

      proc = startController(wt.dir, dataDir, secrets);
      // A run pushed after the restart, for the receiver that fails twice before it takes an event.
      await wt.write('runs/after.yaml', run('after', 'exit 0', '{stage: after}'));
      await wt.commit('add a run after the restart');
      const all = await waitFor(
        async () => {
          const [runs, failures, commits, wrong, retried, preempts] = await Promise.all(
            ['runs', 'failures', 'commits', 'commits-wrong', 'retried', 'preempts'].map((n) => outbox(wt, n)),
          );
          const done =
            runs?.counts.pending === 0 &&
            runs.counts.delivered === 3 &&
            failures?.counts.delivered === 1 &&
            commits?.counts.delivered === 3 &&
            wrong?.counts.failed === 2 &&
            retried?.counts.delivered === 1 &&
            preempts?.counts.delivered === 1;
          return done ? { runs, failures, commits, wrong, retried } : undefined;
        },
        {
          what: 'every outbox to settle after the restart',
          timeoutMs: 90_000,
          giveUpIf: exited,
          detail: () => receiver.all,
        },
      );

      // The signed webhook: one message per event taken; the ones delivered before the kill were
      // not sent again; the one in flight at the kill was sent again and is deduped by its id.
      const hookIds = [...receiver.taken.keys()].filter((k) => k.startsWith('/hook ')).sort();
      expect(hookIds).toEqual([
        '/hook Run/bad/1/RunFailed',
        '/hook Run/held/1/RunSucceeded',
        '/hook Run/ok/1/RunSucceeded',
        '/hook Run/pre/1/RunPreempted',
      ]);
      expect(receiver.count('/hook', 'Run/ok/1/RunSucceeded')).toBe(1);
      expect(receiver.count('/hook', 'Run/bad/1/RunFailed')).toBe(1);
      expect(receiver.count('/hook', heldId)).toBe(2);
      expect(JSON.parse(receiver.taken.get('/hook Run/bad/1/RunFailed')!.body)).toMatchObject({
        id: 'Run/bad/1/RunFailed',
        alert: 'runs',
        kind: 'run',
        name: 'bad',
        event: 'RunFailed',
        attempt: 1,
        phase: 'Failed',
      });
      expect(JSON.parse(receiver.taken.get('/hook Run/pre/1/RunPreempted')!.body)).toMatchObject({
        alert: 'preempts',
        event: 'RunPreempted',
        attempt: 1,
        phase: 'Preempted',
      });
      // The selector: `quiet` is not labelled notify=yes.
      expect(receiver.all.some((r) => r.id.startsWith('Run/quiet/') && r.path === '/hook')).toBe(false);

      // Slack-shaped: {text}, to the URL the secret holds (`quiet` never failed: one event). Past
      // this point a repeat is possible (a kill between a send and its record), so distinct ones.
      const slack = new Set(receiver.all.filter((r) => r.path === SLACK_PATH).map((r) => r.body));
      expect([...slack].map((b) => JSON.parse(b) as unknown)).toEqual([
        { text: expect.stringContaining('run/bad failed (attempt 1)') as unknown },
      ]);

      // GitHub: a commit status per event on the run's spec commit, with the token; a wrong token
      // is refused (401) and that delivery is failed for good, with the reason, on its first try.
      const specCommit = (await runStatus(wt, 'ok')).specCommit!;
      const statuses = new Set(
        github.statuses.map((s) => `${s.context} ${s.state} ${s.owner}/${s.repo}@${s.sha}`),
      );
      expect([...statuses].sort()).toEqual(
        [
          `adventuretime/bad failure lab/specs@${specCommit}`,
          `adventuretime/held success lab/specs@${specCommit}`,
          `adventuretime/ok success lab/specs@${specCommit}`,
        ].sort(),
      );
      expect(github.unauthorized).toBeGreaterThanOrEqual(2);
      expect(all.wrong.deliveries['Run/ok/1/RunSucceeded']).toMatchObject({ state: 'failed', tries: 1 });
      expect(all.wrong.deliveries['Run/ok/1/RunSucceeded']!.lastError).toMatch(/^HTTP 401/);

      // The failing receiver: refused twice, retried with backoff, then taken once.
      expect(all.retried.deliveries['Run/after/1/RunSucceeded']).toMatchObject({
        state: 'delivered',
        tries: 3,
      });
      expect(receiver.all.filter((r) => r.path === '/flaky').map((r) => r.id)).toEqual(
        Array(3).fill('Run/after/1/RunSucceeded'),
      );

      // The event is recorded in the same status commit as the transition that made it.
      const failedAt = await wt.git(
        'log',
        '--format=%H',
        '-S',
        'phase: Failed',
        'adventuretime/status',
        '--',
        'runs/bad.yaml',
      );
      const changed = await wt.git('show', '--name-only', '--format=', failedAt.split('\n').at(-1)!);
      expect(changed.split('\n')).toEqual(
        expect.arrayContaining(['runs/bad.yaml', 'alerts/runs.yaml', 'alerts/failures.yaml']),
      );

      // What `adv get alerts` / `adv describe alert` show of the outboxes.
      const alerts = await adv(wt.dir, 'get', 'alerts');
      expect(alerts).toMatch(/^commits-wrong\s+gh-wrong\s+True\s+0\s+0\s+2\s+\S+\s+HTTP 401/m);
      expect(alerts).toMatch(/^runs\s+hook\s+True\s+0\s+3\s+0\s/m);
      expect(await adv(wt.dir, 'get', 'providers')).toMatch(/^hook\s+preempts,runs\s+0\s+4\s+0/m);
      const described = await adv(wt.dir, 'describe', 'alert', 'runs');
      expect(described).toContain('Deliveries: 0 pending, 3 delivered, 0 failed');
      expect(described).toMatch(/^runs\s+Run\/held\/1\/RunSucceeded\s+delivered\s+1\s/m);

      // No secret is written to the status branch.
      const history = await wt.git('log', '-p', 'adventuretime/status');
      for (const secret of [HOOK_KEY, GH_TOKEN, 'not-the-token', SLACK_PATH])
        expect(history).not.toContain(secret);
    } finally {
      await stopProcess(proc, 'SIGTERM');
      await wt.cleanup();
    }
  });
});

describe('who may change Providers and Alerts', () => {
  it("with --infra-dir, acts on the operator's and refuses those committed to the specs repo where they are written", async () => {
    const infra = join(tmp, 'infra');
    await mkdir(infra, { recursive: true });
    await writeFile(join(infra, 'local.yaml'), LOCAL_BACKEND);
    await writeFile(
      join(infra, 'ops.yaml'),
      provider('ops', `  type: webhook\n  address: ${receiver.url}/ops\n`) +
        alert('ops', 'ops', '[RunSucceeded]'),
    );
    const wt = await makeWorkTree({
      'notifications/mine.yaml':
        provider('mine', `  type: webhook\n  address: ${receiver.url}/mine\n`) +
        alert('mine', 'mine', '[RunSucceeded]'),
      'runs/ok.yaml': run('trusted-ok', 'exit 0'),
    });
    const c = await Controller.create({
      repo: wt.dir,
      dataDir: await mkdtemp(join(tmp, 'data-')),
      infra: { from: 'dir', dir: infra },
      pollIntervalMs: 100,
      fetchIntervalMs: 100,
    });
    try {
      await c.init();
      await passUntil(c, "the operator's alert delivered", async () =>
        delivered(await outbox(wt, 'ops'), 'Run/trusted-ok/1/RunSucceeded'),
      );
      expect(receiver.count('/ops', 'Run/trusted-ok/1/RunSucceeded')).toBe(1);
      const source = parse(
        await wt.git('show', 'adventuretime/status:sources/specs.yaml'),
      ) as SourceStatusDoc;
      const refused = source.status.errors.filter((e) => e.code === 'InfraNotAllowed');
      expect(refused.map((e) => `${e.file}:${e.line} ${e.kind}`).sort()).toEqual([
        'notifications/mine.yaml:1 Provider',
        'notifications/mine.yaml:8 Alert',
      ]);
      expect(await outbox(wt, 'mine')).toBeUndefined();
      expect(receiver.all.some((r) => r.path === '/mine')).toBe(false);
    } finally {
      await c.stop();
      await wt.cleanup();
    }
  });
});
