import { createConnection, createServer, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { forwardPort, kubectlExecArgv, sshArgv } from './forward.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

/** An echo server on the loopback: what the session's port stands for. */
async function echo(): Promise<number> {
  const s = createServer((c) => c.pipe(c));
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return (s.address() as { port: number }).port;
}

function roundTrip(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = createConnection({ host: '127.0.0.1', port }, () => c.end(text));
    let got = '';
    c.on('data', (b: Buffer) => (got += b.toString()));
    c.on('end', () => resolve(got));
    c.on('error', reject);
  });
}

describe('forwardPort', () => {
  it('relays each connection to the remote port, and closes with its connections', async () => {
    const remote = await echo();
    const fwd = await forwardPort({ via: 'local' }, 0, remote);
    expect(fwd.localPort).not.toBe(remote);
    expect(await roundTrip(fwd.localPort, 'one')).toBe('one');
    expect(await roundTrip(fwd.localPort, 'two')).toBe('two');
    await fwd.close();
    await expect(roundTrip(fwd.localPort, 'three')).rejects.toThrow(/ECONNREFUSED/);
  });

  it('says so when the session is not there, before listening', async () => {
    const gone = await echo();
    await new Promise((r) => servers.pop()!.close(r));
    await expect(forwardPort({ via: 'local' }, 0, gone)).rejects.toThrow(/ECONNREFUSED/);
  });

  it('names a local port in use, with the fix', async () => {
    const remote = await echo();
    const taken = await echo();
    await expect(forwardPort({ via: 'local' }, taken, remote)).rejects.toThrow(
      `port ${taken} is in use on this machine`,
    );
  });
});

describe('the shell command lines', () => {
  it('ssh gets the Backend connection as options, and the remote command as one argument', () => {
    expect(
      sshArgv(
        {
          host: 'gpu1',
          port: 2222,
          user: 'ada',
          identityFile: '/k',
          knownHostsFile: '/kh',
          proxyJump: 'login',
        },
        "sh -c 'exec bash -l'",
        true,
      ),
    ).toEqual([
      '-t',
      '-p',
      '2222',
      '-l',
      'ada',
      '-i',
      '/k',
      '-o',
      'IdentitiesOnly=yes',
      '-o',
      'UserKnownHostsFile=/kh',
      '-J',
      'login',
      '-o',
      'BatchMode=yes',
      'gpu1',
      '--',
      "sh -c 'exec bash -l'",
    ]);
    expect(sshArgv({ host: 'h' }, 'x', false)[0]).toBe('-T');
  });

  it('kubectl exec gets the Backend kubeconfig, context and namespace', () => {
    expect(
      kubectlExecArgv(
        { via: 'kubectl', base: ['--context', 'c', '--namespace', 'ml'], pod: 'p-0' },
        'x',
        true,
      ),
    ).toEqual(['--context', 'c', '--namespace', 'ml', 'exec', '-it', 'p-0', '--', 'sh', '-c', 'x']);
  });
});
