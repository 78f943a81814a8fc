/**
 * How the CLI reaches a session on a worker's loopback: a local port forwarded to it, by the
 * backend's own way in — an ssh2 channel over the Backend's connection (ssh; slurm through the
 * login node; vastai through the instance's endpoint; gcp-tpu to the node's worker, found with
 * gcloud), `kubectl port-forward` (volcano), or a plain TCP relay (local: the worker is this
 * machine). The same route opens `adv shell` / `adv ssh`'s interactive shell (`sshArgv`,
 * `kubectlExecArgv`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import {
  AdvError,
  ErrorCode,
  GcloudTpu,
  SshTransport,
  nodeNameOf,
  tpuWorkerAddresses,
  VastClient,
  podName,
  sshTargetOf,
  vastSshEndpoint,
  vcNameOf,
  type Attempt,
  type BackendSpec,
  type SshConnection,
} from '../controller/index.js';

/** A local port that leads to the session. */
export interface Forward {
  localPort: number;
  close(): Promise<void>;
}

/** Where a live attempt is, for the CLI: one of the ways in above. */
export type Route =
  { via: 'ssh'; target: SshConnection } | { via: 'kubectl'; base: string[]; pod: string } | { via: 'local' };

/**
 * The way to the worker of `attempt` (worker `worker` of a multi-host one), from its Backend.
 * `host` is the worker's host name as the session reported it (a SLURM node).
 */
export async function routeTo(
  backend: { name: string; spec: BackendSpec },
  attempt: Attempt,
  opts: { env: NodeJS.ProcessEnv; host?: string; worker?: number },
): Promise<Route> {
  const spec = backend.spec;
  const conn = spec.connection;
  switch (spec.type) {
    case 'local':
      return { via: 'local' };
    case 'ssh':
      return { via: 'ssh', target: sshTargetOf(conn as SshConnection) };
    case 'slurm': {
      // The job's node, reached from the login node (as `ssh -J login node`).
      if (!opts.host) throw notHere(backend.name, 'the session has not said which node it runs on');
      const login = conn as SshConnection;
      const jump = `${login.user ? `${login.user}@` : ''}${login.host}${login.port ? `:${login.port}` : ''}`;
      const { host: _login, port: _port, proxyJump: _jump, ...rest } = sshTargetOf(login);
      return { via: 'ssh', target: { ...rest, host: opts.host, proxyJump: jump } };
    }
    case 'vastai':
      return { via: 'ssh', target: await vastTarget(backend, attempt, opts.env) };
    case 'gcp-tpu':
      return { via: 'ssh', target: await tpuTarget(backend, attempt, opts) };
    case 'volcano': {
      const v = (spec.volcano ?? {}) as { kubeconfig?: string; context?: string; namespace?: string };
      const base = [
        ...(v.kubeconfig ? ['--kubeconfig', v.kubeconfig] : []),
        ...(v.context ? ['--context', v.context] : []),
        '--namespace',
        v.namespace ?? 'default',
      ];
      return { via: 'kubectl', base, pod: podName(vcNameOf(attempt.jobName), opts.worker ?? 0) };
    }
    default:
      throw notHere(
        backend.name,
        `a ${spec.type} backend has no way in from here yet (sessions reach ssh, slurm, gcp-tpu, vastai, volcano and local workers)`,
      );
  }
}

function notHere(backend: string, why: string): AdvError {
  return new AdvError(ErrorCode.UsageError, `cannot reach the session on ${backend}: ${why}`, {
    hint: 'see docs/sessions.md for the backends a session can be reached on',
  });
}

/** The instance's SSH endpoint, asked of Vast.ai with the API key the Backend names, from our environment. */
async function vastTarget(
  backend: { name: string; spec: BackendSpec },
  attempt: Attempt,
  env: NodeJS.ProcessEnv,
): Promise<SshConnection> {
  const settings = backend.spec.vastai as { apiKeySecret: string; apiUrl?: string } | undefined;
  const keyName = settings?.apiKeySecret ?? 'VAST_API_KEY';
  const apiKey = env[keyName];
  if (!apiKey)
    throw new AdvError(
      ErrorCode.UsageError,
      `${keyName} is not set: it is needed to find the Vast.ai instance`,
      {
        hint: `export ${keyName}=<your Vast.ai API key> (the secret Backend ${backend.name} names)`,
      },
    );
  const apiUrl = settings?.apiUrl ?? env.VAST_URL;
  const client = new VastClient({ apiKey, ...(apiUrl ? { apiUrl } : {}), retries: 3 });
  const inst = attempt.jobId ? await client.showInstance(Number(attempt.jobId)) : undefined;
  const ep = inst && (vastSshEndpoint(inst, 'direct') ?? vastSshEndpoint(inst, 'proxy'));
  if (!ep)
    throw new AdvError(
      ErrorCode.NotFound,
      `Vast.ai instance ${attempt.jobId ?? '?'} of ${attempt.jobName} has no SSH endpoint`,
    );
  return {
    user: 'root',
    ...(backend.spec.connection as Partial<SshConnection>),
    host: ep.host,
    port: ep.port,
  };
}

/**
 * Worker K of the attempt's TPU node, found with the user's own gcloud in the Backend's zones
 * (its external address when the Backend reaches workers so, as the adapter does).
 */
async function tpuTarget(
  backend: { name: string; spec: BackendSpec },
  attempt: Attempt,
  opts: { env: NodeJS.ProcessEnv; worker?: number },
): Promise<SshConnection> {
  const s = backend.spec.gcpTpu as { project: string; zone: string; zones?: string[]; externalIp?: boolean };
  const gcloud = new GcloudTpu({ project: s.project, env: opts.env });
  const node = attempt.jobId ?? nodeNameOf(attempt.jobName);
  for (const zone of [s.zone, ...(s.zones ?? [])]) {
    const found = await gcloud.describe(zone, node);
    if (!found) continue;
    const host = tpuWorkerAddresses(found, { internal: !s.externalIp })[opts.worker ?? 0];
    if (!host) throw notHere(backend.name, `TPU node ${node} has no worker ${opts.worker ?? 0}`);
    return { ...(backend.spec.connection as Partial<SshConnection>), host };
  }
  throw new AdvError(
    ErrorCode.NotFound,
    `TPU node ${node} of ${attempt.jobName} is in none of ${backend.name}'s zones`,
  );
}

/**
 * Listens on 127.0.0.1:`localPort` (0: any free port) and forwards every connection to port
 * `remotePort` on the worker's loopback. Never listens beyond this machine's loopback.
 */
export async function forwardPort(route: Route, localPort: number, remotePort: number): Promise<Forward> {
  if (route.via === 'kubectl') return kubectlForward(route, localPort, remotePort);
  const transport = route.via === 'ssh' ? new SshTransport(route.target) : undefined;
  const open = (): Promise<Duplex> =>
    transport
      ? transport.forward('127.0.0.1', remotePort)
      : new Promise((resolve, reject) => {
          const s = createConnection({ host: '127.0.0.1', port: remotePort }, () => resolve(s));
          s.once('error', reject);
        });
  // Checked once before anyone connects: a wrong key or host says so now, not at the first page.
  (await open()).destroy();
  const sockets = new Set<Socket | Duplex>();
  // Half-open, as TCP is: a client that has sent all it will (FIN) still gets the whole answer.
  const server: Server = createServer({ allowHalfOpen: true }, (local) => {
    sockets.add(local);
    local.on('error', () => local.destroy());
    open().then(
      (remote) => {
        if (local.destroyed) return void remote.destroy(); // the client gave up while we connected
        sockets.add(remote);
        remote.on('error', () => remote.destroy());
        // Each side ends the other's writing when it has no more (pipe); whichever closes first
        // for good takes the other with it once its data is out.
        remote.on('close', () => {
          sockets.delete(remote);
          local.end();
        });
        local.on('close', () => {
          sockets.delete(local);
          remote.destroy();
        });
        local.pipe(remote);
        remote.pipe(local);
      },
      () => {
        sockets.delete(local);
        local.destroy();
      },
    );
  });
  const port = await listen(server, localPort);
  return {
    localPort: port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      transport?.close();
    },
  };
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        e.code === 'EADDRINUSE'
          ? new AdvError(ErrorCode.UsageError, `port ${port} is in use on this machine`, {
              hint: 'pick another with --port, or leave it out for any free one',
            })
          : e,
      ),
    );
    server.listen(port, '127.0.0.1', () => resolve((server.address() as { port: number }).port));
  });
}

/** `kubectl port-forward pod/P L:R`, ready once kubectl says it is forwarding. */
async function kubectlForward(
  route: Extract<Route, { via: 'kubectl' }>,
  localPort: number,
  remotePort: number,
): Promise<Forward> {
  const child: ChildProcess = spawn(
    'kubectl',
    [
      ...route.base,
      'port-forward',
      '--address',
      '127.0.0.1',
      `pod/${route.pod}`,
      `${localPort || ''}:${remotePort}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /Forwarding from 127\.0\.0\.1:(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
    child.once('error', reject);
    child.once('exit', (code) =>
      reject(new AdvError(ErrorCode.BackendError, `kubectl port-forward exited (${code}): ${err.trim()}`)),
    );
  });
  return {
    localPort: port,
    close: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/**
 * The `ssh` command line that opens `remote` (a shell command) on the route's host: OpenSSH's own
 * client, so the terminal, agent and ~/.ssh/config work as the user expects.
 */
export function sshArgv(target: SshConnection, remote: string, tty: boolean): string[] {
  return [
    tty ? '-t' : '-T',
    ...(target.port ? ['-p', String(target.port)] : []),
    ...(target.user ? ['-l', target.user] : []),
    ...(target.identityFile ? ['-i', target.identityFile, '-o', 'IdentitiesOnly=yes'] : []),
    ...(target.knownHostsFile ? ['-o', `UserKnownHostsFile=${target.knownHostsFile}`] : []),
    ...(target.hostKeyPolicy === 'accept-new' ? ['-o', 'StrictHostKeyChecking=accept-new'] : []),
    ...(target.proxyJump ? ['-J', target.proxyJump] : []),
    '-o',
    'BatchMode=yes',
    target.host,
    '--',
    remote,
  ];
}

/** `kubectl exec -it pod -- sh -c remote`. */
export function kubectlExecArgv(
  route: Extract<Route, { via: 'kubectl' }>,
  remote: string,
  tty: boolean,
): string[] {
  return [...route.base, 'exec', tty ? '-it' : '-i', route.pod, '--', 'sh', '-c', remote];
}
