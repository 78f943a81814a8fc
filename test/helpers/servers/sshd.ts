/**
 * A real OpenSSH sshd on loopback for tests: a fresh host key and client key in a temporary dir,
 * key-only auth, a random port, run in the foreground (-D) so the test owns its lifetime.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { freePort } from '../net.js';
import { stopProcess, waitFor } from '../wait.js';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export interface Sshd {
  host: string;
  port: number;
  user: string;
  identityFile: string;
  knownHostsFile: string;
  dir: string;
  stop(): Promise<void>;
}

/**
 * `addresses`: more loopback addresses to listen on (127.0.0.2, …), each in known_hosts too — the
 * workers of a fake TPU slice, one address per worker, served by this one sshd.
 */
export async function startSshd(opts: { addresses?: readonly string[] } = {}): Promise<Sshd> {
  const dir = await mkdtemp(join(tmpdir(), 'adv-sshd-'));
  const keygen = (file: string) => execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', file]);
  keygen(join(dir, 'hostkey'));
  keygen(join(dir, 'client'));
  writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'client.pub')));
  const port = await freePort();
  const hostPub = readFileSync(join(dir, 'hostkey.pub'), 'utf8').trim().split(' ').slice(0, 2).join(' ');
  const addresses = ['127.0.0.1', ...(opts.addresses ?? [])];
  writeFileSync(join(dir, 'known_hosts'), addresses.map((a) => `[${a}]:${port} ${hostPub}\n`).join(''));
  writeFileSync(
    join(dir, 'sshd_config'),
    [
      `Port ${port}`,
      ...addresses.map((a) => `ListenAddress ${a}`),
      `HostKey ${join(dir, 'hostkey')}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      'PermitRootLogin prohibit-password',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'StrictModes no',
      'MaxSessions 10',
      'LogLevel ERROR',
      'Subsystem sftp /usr/lib/openssh/sftp-server',
    ].join('\n') + '\n',
  );
  mkdirSync('/run/sshd', { recursive: true });
  const child: ChildProcess = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', join(dir, 'sshd_config')], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  // Up when the port accepts connections.
  await waitFor(
    () =>
      new Promise<boolean>((r) => {
        const s = connect(port, '127.0.0.1');
        s.once('connect', () => (s.destroy(), r(true)));
        s.once('error', () => r(false));
      }),
    {
      what: `sshd to listen on 127.0.0.1:${port}`,
      timeoutMs: 60_000,
      everyMs: 20,
      giveUpIf: () => child.exitCode !== null && `sshd exited with code ${child.exitCode}: ${err}`,
    },
  );
  return {
    host: '127.0.0.1',
    port,
    user: userInfo().username,
    identityFile: join(dir, 'client'),
    knownHostsFile: join(dir, 'known_hosts'),
    dir,
    stop: async () => {
      await stopProcess(child);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The Backend `connection` block (and SshTransport options) that reach this sshd. */
export function sshConnection(s: Sshd): {
  host: string;
  port: number;
  user: string;
  identityFile: string;
  knownHostsFile: string;
} {
  return {
    host: s.host,
    port: s.port,
    user: s.user,
    identityFile: s.identityFile,
    knownHostsFile: s.knownHostsFile,
  };
}

/** Whether sshd can run here (Debian openssh-server installed). */
export function haveSshd(): boolean {
  try {
    execFileSync('/usr/sbin/sshd', ['-V'], { stdio: 'ignore' });
    return true;
  } catch (e) {
    // `sshd -V` exits non-zero but prints its version when it exists.
    return (e as NodeJS.ErrnoException).code !== 'ENOENT';
  }
}
