/**
 * `kubectl port-forward` and `kubectl exec` — the real kubectl 1.32 — against the fake Kubernetes
 * API server (helpers/k8s/fake-k8s-streams.ts): port-forward over kubectl's default WebSocket tunnel
 * and over plain SPDY (`KUBECTL_PORT_FORWARD_WEBSOCKETS=false`) to a pod running
 * `python3 -m http.server`; exec over WebSocket v5 and over SPDY
 * (`KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`): stdout, stderr, exit code, stdin, the container's
 * environment, hostname and working directory; the errors kubectl prints.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { k8sAvailable, startFakeK8s, type FakeK8s } from './helpers/k8s/fake-k8s.js';
import { freePort } from './helpers/net.js';
import { waitFor } from './helpers/wait.js';
import { alive } from './helpers/processes.js';

const available = k8sAvailable('the fake Kubernetes port-forward and exec tests');
const NS = 'default';

describe.runIf(available)('kubectl port-forward and exec against the fake Kubernetes API', () => {
  let fake: FakeK8s;
  let dir: string;
  let port: number;
  const body = `served from the pod ${Math.random().toString(36).slice(2)}\n`;
  /** Larger than any one SPDY frame or WebSocket message the fake sends. */
  const big = randomBytes(3 << 20);
  const forwards = new Set<ChildProcess>();
  /** The setsid'd child of the escapee test: killed here too if the fake missed it. */
  let escaped: number | undefined;

  const env = (extra: Record<string, string> = {}) => ({
    ...process.env,
    KUBECACHEDIR: join(dir, 'kube-cache'),
    ...extra,
  });

  /** Runs kubectl against the fake; never throws. */
  const kubectl = (args: string[], input = '', extra: Record<string, string> = {}) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(
        'kubectl',
        ['--kubeconfig', fake.kubeconfig, '--context', fake.context, '-n', NS, ...args],
        { env: env(extra), timeout: 60_000, maxBuffer: 16 << 20 },
        (err, stdout, stderr) =>
          resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
      );
      child.stdin?.end(input);
    });

  /** `kubectl port-forward pod/web :REMOTE`: resolves with the local port kubectl printed, and its output so far. */
  const portForward = async (remote: number, extra: Record<string, string> = {}) => {
    const child = spawn(
      'kubectl',
      [
        '--kubeconfig',
        fake.kubeconfig,
        '--context',
        fake.context,
        '-n',
        NS,
        'port-forward',
        'pod/web',
        `:${remote}`,
      ],
      { env: env(extra), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    forwards.add(child);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    const local = await waitFor(() => /Forwarding from 127\.0\.0\.1:(\d+) ->/.exec(out)?.[1], {
      what: 'kubectl port-forward to print its local port',
      timeoutMs: 60_000,
      giveUpIf: () => child.exitCode !== null && `kubectl exited ${child.exitCode}`,
      detail: () => out,
    });
    return { child, local: Number(local), output: () => out };
  };

  const stop = async (child: ChildProcess) => {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await gone;
    }
    forwards.delete(child);
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'adv-fake-k8s-fwd-'));
    const site = join(dir, 'site');
    mkdirSync(site);
    writeFileSync(join(site, 'hello.txt'), body);
    writeFileSync(join(site, 'big.bin'), big);
    port = await freePort();
    fake = await startFakeK8s({ dir: join(dir, 'k8s') });
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web' },
      spec: {
        restartPolicy: 'Never',
        containers: [
          {
            name: 'main',
            image: 'python:3.12',
            command: [
              'python3',
              '-m',
              'http.server',
              String(port),
              '--bind',
              '127.0.0.1',
              '--directory',
              site,
            ],
            workingDir: site,
            env: [{ name: 'MARKER', value: 'from-the-pod-spec' }],
          },
        ],
      },
    };
    const created = await kubectl(['create', '-f', '-'], JSON.stringify(pod));
    if (created.code !== 0) throw new Error(`kubectl create: ${created.stderr}`);
    // The server is up when its port accepts a connection (pods share the host's network here).
    await waitFor(
      () =>
        new Promise<boolean>((resolve) => {
          const s = connect({ host: '127.0.0.1', port }, () => resolve(!!s.end()));
          s.on('error', () => resolve(false));
        }),
      {
        what: 'the pod http.server to listen',
        timeoutMs: 60_000,
        detail: () => fake.object('pods', NS, 'web')?.status,
      },
    );
  }, 120_000);

  afterAll(async () => {
    if (escaped && alive(escaped)) process.kill(escaped, 'SIGKILL');
    for (const c of forwards) await stop(c);
    await fake?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const portForwardCalls = () =>
    fake.requests.filter((r) => r.path === `/api/v1/namespaces/${NS}/pods/web/portforward`);
  const execCalls = () => fake.requests.filter((r) => r.path === `/api/v1/namespaces/${NS}/pods/web/exec`);

  it('port-forwards over the WebSocket tunnel kubectl uses by default: GETs through it reach the pod', async () => {
    const before = portForwardCalls().length;
    const pf = await portForward(port);
    try {
      // Two connections over the one session: the second's headers decompress against the first's.
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`http://127.0.0.1:${pf.local}/hello.txt`);
        expect(res.status).toBe(200);
        expect(await res.text()).toBe(body);
      }
      // Connections at once, one of them megabytes long: streams multiplexed on the one session.
      const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
      const [large, ...small] = await Promise.all([
        fetch(`http://127.0.0.1:${pf.local}/big.bin`).then(async (r) => Buffer.from(await r.arrayBuffer())),
        ...Array.from({ length: 6 }, () =>
          fetch(`http://127.0.0.1:${pf.local}/hello.txt`).then((r) => r.text()),
        ),
      ]);
      expect(sha(large!)).toBe(sha(big));
      expect(small).toEqual(Array(6).fill(body));
      expect(
        portForwardCalls()
          .slice(before)
          .map((r) => r.method),
      ).toEqual(['GET']);
      expect(pf.output()).toContain('Handling connection for');
    } finally {
      await stop(pf.child);
    }
  }, 120_000);

  it('port-forwards over SPDY/3.1 with KUBECTL_PORT_FORWARD_WEBSOCKETS=false', async () => {
    const before = portForwardCalls().length;
    const pf = await portForward(port, { KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false' });
    try {
      const res = await fetch(`http://127.0.0.1:${pf.local}/hello.txt`);
      expect(await res.text()).toBe(body);
      expect(
        portForwardCalls()
          .slice(before)
          .map((r) => r.method),
      ).toEqual(['POST']);
    } finally {
      await stop(pf.child);
    }
  }, 120_000);

  it('reports a port nobody listens on as the kubelet does', async () => {
    const closed = await freePort();
    const pf = await portForward(closed);
    try {
      await expect(fetch(`http://127.0.0.1:${pf.local}/`)).rejects.toThrow();
      await waitFor(() => /connection refused/.test(pf.output()), {
        what: 'kubectl to print the forwarding error',
        detail: pf.output,
      });
      expect(pf.output()).toContain(`error forwarding port ${closed} to pod web`);
    } finally {
      await stop(pf.child);
    }
  }, 120_000);

  for (const [how, extra] of [
    ['WebSocket (v5.channel.k8s.io, the default)', {}],
    ['SPDY (KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false)', { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false' }],
  ] as const) {
    it(`exec over ${how}: stdout, stderr and the exit code, in the container's environment`, async () => {
      const before = execCalls().length;
      const r = await kubectl(
        ['exec', 'web', '--', 'sh', '-c', 'echo "$MARKER"; hostname; pwd; echo to-stderr >&2; exit 3'],
        '',
        extra,
      );
      expect(r.stdout).toBe(`from-the-pod-spec\nweb\n${join(dir, 'site')}\n`);
      expect(r.stderr).toContain('to-stderr');
      expect(r.stderr).toContain('command terminated with exit code 3');
      expect(r.code).toBe(3);
      const methods = execCalls()
        .slice(before)
        .map((c) => c.method);
      expect(methods).toEqual('KUBECTL_REMOTE_COMMAND_WEBSOCKETS' in extra ? ['POST'] : ['GET']);

      const okRun = await kubectl(['exec', 'web', '--', 'true'], '', extra);
      expect(okRun).toMatchObject({ code: 0, stdout: '' });
    }, 120_000);

    it(`exec -i over ${how}: stdin reaches the command and its end ends it`, async () => {
      const input = 'line one\nline two\n'.repeat(2000);
      const r = await kubectl(['exec', '-i', 'web', '--', 'sh', '-c', 'tr a-z A-Z; echo done'], input, extra);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toBe(`${input.toUpperCase()}done\n`);
    }, 120_000);
  }

  it('exec -it gives the command a terminal (what `adv shell` runs): kubectl on a pty from script(1)', async () => {
    const cmd = [
      'kubectl',
      ...['--kubeconfig', fake.kubeconfig, '--context', fake.context, '-n', NS],
      ...['exec', '-it', 'web', '--', 'sh', '-c', `'tty; read x; echo "got $x"; exit 4'`],
    ].join(' ');
    const child = spawn('script', ['-q', '-e', '-c', cmd, '/dev/null'], {
      env: env(),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    forwards.add(child);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', r));
    // The terminal's name comes first: the session is up, so the line typed next reaches `read`.
    await waitFor(() => /\/dev\/pts\/\d+/.test(out), {
      what: 'the exec to print its terminal',
      timeoutMs: 60_000,
      giveUpIf: () => child.exitCode !== null && `script exited ${child.exitCode}`,
      detail: () => out,
    });
    child.stdin.write('typed\r');
    expect(await exited).toBe(4);
    forwards.delete(child);
    expect(out).toContain('got typed');
  }, 120_000);

  it("ends the exec'd command when kubectl goes away", async () => {
    const child = spawn(
      'kubectl',
      [
        ...['--kubeconfig', fake.kubeconfig, '--context', fake.context, '-n', NS],
        ...['exec', 'web', '--', 'sh', '-c', 'echo "$$"; exec sleep 600'],
      ],
      { env: env(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    forwards.add(child);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const pid = Number(
      await waitFor(() => /^(\d+)\n/.exec(out)?.[1], {
        what: 'the exec to print its pid',
        timeoutMs: 60_000,
        giveUpIf: () => child.exitCode !== null && `kubectl exited ${child.exitCode}`,
      }),
    );
    expect(alive(pid)).toBe(true);
    await stop(child);
    await waitFor(() => !alive(pid), { what: `the exec'd sleep (pid ${pid}) to end`, timeoutMs: 30_000 });
  }, 120_000);

  it("kills a container's processes that left its process group when the pod goes, as its cgroup would be", async () => {
    const pidFile = join(dir, 'escaped.pid');
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'escapee' },
      spec: {
        restartPolicy: 'Never',
        terminationGracePeriodSeconds: 1,
        containers: [
          {
            name: 'main',
            image: 'busybox',
            // A child in its own session (setsid), as Jupyter's launcher makes one: out of the group.
            command: ['sh', '-c', `setsid sleep 600 & echo "$!" > ${pidFile}; exec sleep 600`],
          },
        ],
      },
    };
    expect((await kubectl(['create', '-f', '-'], JSON.stringify(pod))).code).toBe(0);
    const pid = Number(
      await waitFor(() => readFileSync(pidFile, 'utf8').trim(), {
        what: 'the escaped child pid',
        timeoutMs: 60_000,
      }),
    );
    escaped = pid;
    expect(alive(pid)).toBe(true);
    expect((await kubectl(['delete', 'pod', 'escapee', '--wait=true'])).code).toBe(0);
    await waitFor(() => !alive(pid), {
      what: `the escaped child (pid ${pid}) to be killed`,
      timeoutMs: 30_000,
    });
  }, 120_000);

  it('lists pods/exec and pods/portforward in discovery, as the real server does', async () => {
    const r = await kubectl(['get', '--raw', '/api/v1']);
    const listed = (JSON.parse(r.stdout) as { resources: { name: string; kind: string; verbs: string[] }[] })
      .resources;
    expect(listed.find((x) => x.name === 'pods/exec')).toMatchObject({
      kind: 'PodExecOptions',
      verbs: ['create', 'get'],
    });
    expect(listed.find((x) => x.name === 'pods/portforward')).toMatchObject({
      kind: 'PodPortForwardOptions',
      verbs: ['create', 'get'],
    });
  }, 60_000);

  it('refuses an exec into a container the pod does not have, or a pod that does not exist', async () => {
    const noContainer = await kubectl(['exec', 'web', '-c', 'sidecar', '--', 'true']);
    expect(noContainer.code).not.toBe(0);
    expect(noContainer.stderr).toContain('container sidecar is not valid for pod web');
    const noPod = await kubectl(['exec', 'nope', '--', 'true']);
    expect(noPod.code).not.toBe(0);
    expect(noPod.stderr).toContain('pods "nope" not found');
  }, 120_000);
});
