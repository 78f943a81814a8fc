/**
 * Stopping the controller (probe N4): a SIGTERM used to wait for the agents' long polls while the
 * reconcile loop went on — 60 to 80 s in which it handed out claims and expired healthy jobs'
 * leases, and a restart in that window exited 6. Now reconciling stops first, waiting agents are
 * answered at once, and the listener drops its connections: the compiled controller exits while an
 * idle agent is in the middle of a 40 s long poll, the job running on another agent keeps its one
 * attempt, and a controller restarted on the same data dir carries on with it (within the default
 * lease, `staleAfterSec` 120: a restart is not a preemption).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunStatusDoc } from '../controller/status/types.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { removeTree } from './helpers/io.js';
import { freePort } from './helpers/net.js';
import { makeWorkTree, type WorkTree } from './helpers/git/specs-repo.js';
import { stopProcess, waitFor } from './helpers/wait.js';

const ADV = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');
const ENROLL = 'enroll-token-for-the-shutdown-test-0123';
const API = 'api-token-for-the-shutdown-test-0123456';

interface Proc {
  proc: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
}

function start(args: string[], env: NodeJS.ProcessEnv): Proc {
  let out = '';
  const proc = spawn(process.execPath, [ADV, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  for (const s of [proc.stdout!, proc.stderr!]) s.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return { proc, out: () => out, exited };
}

describe('stopping the controller', () => {
  let tmp: string;
  let wt: WorkTree;
  let port: number;
  const procs: Proc[] = [];

  beforeAll(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'adv-shutdown-'));
    port = await freePort();
  });
  afterAll(async () => {
    for (const p of procs) await stopProcess(p.proc);
    await wt?.cleanup();
    await removeTree(tmp);
  });

  const controllerEnv = { ...process.env, AGENT_ENROLL: ENROLL, ADV_API_TOKEN: API };
  const startController = () => {
    const c = start(
      [
        ...['controller', '--repo', wt.dir, '--data-dir', join(tmp, 'data')],
        ...['--http', `127.0.0.1:${port}`, '--poll-interval', '200ms', '--secrets-env', 'AGENT_ENROLL'],
      ],
      controllerEnv,
    );
    procs.push(c);
    return c;
  };
  const startAgent = async (name: string) => {
    const tokenFile = join(tmp, `enroll-${name}`);
    await writeFile(tokenFile, ENROLL, { mode: 0o600 });
    const a = start(
      [
        ...['agent', '--controller', `http://127.0.0.1:${port}`, '--name', name],
        ...['--state-dir', join(tmp, `agent-${name}`), '--enroll-token-file', tokenFile, '--wait', '40'],
      ],
      { PATH: process.env.PATH, HOME: tmp },
    );
    procs.push(a);
    return a;
  };
  const held = async (): Promise<RunStatusDoc | undefined> => {
    const text = await wt.git('show', 'adventuretime/status:runs/held.yaml').catch(() => undefined);
    return text === undefined ? undefined : (parse(text) as RunStatusDoc);
  };
  const agentsReady = async () => {
    const r = await fetch(`http://127.0.0.1:${port}/api/v1/agents`, {
      headers: { authorization: `Bearer ${API}` },
    }).catch(() => undefined);
    if (!r?.ok) return 0;
    const body = (await r.json()) as { agents: { state: string }[] };
    return body.agents.filter((a) => a.state === 'Ready').length;
  };

  it('answers waiting agents, exits at once, and a restart carries on with the running job', async () => {
    const flag = join(tmp, 'flag');
    const ledger = join(tmp, 'ledger');
    wt = await makeWorkTree({
      'backends/desks.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Backend
metadata: {name: desks}
spec:
  type: agent
  agent: {tokenSecret: AGENT_ENROLL}
`,
      'storage.yaml': FILE_STORAGE,
      'runs/held.yaml': `apiVersion: adventuretime.dev/v1alpha1
kind: Run
metadata: {name: held}
spec:
  command: [sh, -c, 'echo start >> ${ledger}; while [ ! -e ${flag} ]; do sleep 0.1; done']
  policy: {maxAttempts: 4}
  backendSelector: {order: [desks]}
`,
    });
    let c = startController();
    const giveUp = () => (c.proc.exitCode !== null ? `controller exited: ${c.out().slice(-2000)}` : false);
    await startAgent('busy');
    await waitFor(async () => (await held())?.status.phase === 'Running', {
      what: 'held running on the first agent',
      timeoutMs: 90_000,
      giveUpIf: giveUp,
    });
    await startAgent('idle');
    await waitFor(async () => (await agentsReady()) === 2, {
      what: 'both agents enrolled',
      giveUpIf: giveUp,
    });
    // The idle agent is now inside a long poll of up to 40 s: the controller must not wait for it.
    c.proc.kill('SIGTERM');
    const code = await waitFor(
      async () => (c.proc.exitCode !== null ? { code: c.proc.exitCode } : undefined),
      {
        what: 'the controller to exit after SIGTERM, inside the idle agent’s 40 s long poll',
        timeoutMs: 30_000,
      },
    );
    expect(code.code).toBe(0);
    expect(c.out()).toContain('"msg":"stopped"');
    const after = (await held())!.status;
    expect(after.attempts).toHaveLength(1);
    expect(after.phase).toBe('Running');

    // Restarted on the same data dir at once: no exit 6, and the job the agent kept is the one attempt.
    c = startController();
    await waitFor(async () => (await agentsReady()) === 2, {
      what: 'both agents back with the restarted controller',
      timeoutMs: 90_000,
      giveUpIf: giveUp,
    });
    await writeFile(flag, '');
    const done = await waitFor(
      async () => {
        const s = (await held())?.status;
        return s?.phase === 'Succeeded' ? s : undefined;
      },
      { what: 'held to succeed', timeoutMs: 90_000, giveUpIf: giveUp },
    );
    expect(done.attempts).toHaveLength(1);
    expect((await readFile(ledger, 'utf8')).trim().split('\n')).toEqual(['start']);
  });
});
