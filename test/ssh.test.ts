/**
 * The SSH transport and the quoting function against a real OpenSSH sshd on loopback.
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SshTransport } from '../controller/transport/ssh.js';
import { haveSshd, sshConnection, startSshd, type Sshd } from './helpers/servers/sshd.js';
import { Budget, HANG_GUARD_MS, measureMs } from './helpers/wait.js';

const available = haveSshd();
if (!available && process.env.CI) throw new Error('sshd is required in CI: apt-get install openssh-server');
if (!available)
  console.warn('SKIPPING the ssh tests: no /usr/sbin/sshd here (apt-get install openssh-server)');

describe.runIf(available)('SSH transport on a real sshd', () => {
  let sshd: Sshd;
  let t: SshTransport;
  beforeAll(async () => {
    sshd = await startSshd();
    t = new SshTransport(sshConnection(sshd));
  });
  afterAll(async () => {
    t?.close();
    await sshd?.stop();
  });

  it('runs an argument vector, with stdin, and reports the exit code', async () => {
    const r = await t.exec(['sh', '-c', 'cat; echo err >&2; exit 3'], { input: 'from stdin' });
    expect(r).toMatchObject({ code: 3, stderr: 'err\n' });
    expect(r.stdout.toString()).toBe('from stdin');
  });

  it('passes 1,000 hostile strings through as single arguments, executing nothing else', async () => {
    const alphabet = [
      `'`,
      '"',
      '`',
      '$',
      '(',
      ')',
      ';',
      '&',
      '|',
      '\n',
      '\\',
      ' ',
      '*',
      '?',
      '~',
      '#',
      '!',
      '{',
      '}',
      '<',
      '>',
      'a',
      'é',
      '\t',
      '$(touch /tmp/adv-pwned)',
      '`id`',
    ];
    const strings: string[] = ['', "'", "''", '$(reboot)', '`reboot`', 'a\nb', '--help', '-e'];
    while (strings.length < 1000) {
      const n = 1 + (randomBytes(1)[0]! % 12);
      strings.push(Array.from({ length: n }, () => alphabet[randomBytes(1)[0]! % alphabet.length]).join(''));
    }
    writeFileSync('/tmp/adv-pwned-check', '');
    // printf prints each argument NUL-terminated: what arrives is exactly what was sent.
    for (let i = 0; i < strings.length; i += 100) {
      const batch = strings.slice(i, i + 100);
      const r = await t.exec(['printf', '%s\\0', ...batch]);
      expect(r.code).toBe(0);
      expect(r.stdout.toString('utf8').split('\0').slice(0, -1)).toEqual(batch);
    }
    const check = await t.exec(['sh', '-c', 'test -e /tmp/adv-pwned && echo PWNED || echo clean']);
    expect(check.stdout.toString()).toBe('clean\n');
  });

  it(
    'multiplexes many commands over one connection, bounded, and leaks no channel',
    async () => {
      const n = 200;
      // Each command costs sshd a fork and a shell: milliseconds on an idle box, most of a second
      // on a loaded one. The budget is that cost, measured now, times the rounds the commands need:
      // the transport runs 8 channels at once, but no more of them progress than there are cores.
      const perCommand = await new Budget('measuring one ssh command', HANG_GUARD_MS / 4).within(
        measureMs(() => t.exec(['true'])),
      );
      const budget = Budget.for(`${n} commands over one connection`, {
        perOpMs: perCommand,
        count: n,
        concurrency: Math.min(8, availableParallelism()),
      });
      const rs = await budget.within(
        Promise.all(Array.from({ length: n }, (_, i) => t.exec(['echo', String(i)]))),
      );
      expect(rs.map((r) => r.stdout.toString().trim())).toEqual(
        Array.from({ length: n }, (_, i) => String(i)),
      );
      expect(t.channelsOpen).toBe(0);
      console.log(`ssh: one command costs ${Math.round(perCommand)} ms now; ${budget}`);
    },
    HANG_GUARD_MS,
  );

  it('refuses a host whose key does not match known_hosts, and says what to do', async () => {
    const bad = `${sshd.dir}/bad_known_hosts`;
    writeFileSync(
      bad,
      `[127.0.0.1]:${sshd.port} ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n`,
    );
    const t2 = new SshTransport({
      host: sshd.host,
      port: sshd.port,
      user: sshd.user,
      identityFile: sshd.identityFile,
      knownHostsFile: bad,
    });
    await expect(t2.exec(['true'])).rejects.toThrow(/does not match .*bad_known_hosts/);
  });

  it('refuses an unknown host unless accept-new, which records the key', async () => {
    const empty = `${sshd.dir}/empty_known_hosts`;
    writeFileSync(empty, '');
    const strict = new SshTransport({
      host: sshd.host,
      port: sshd.port,
      user: sshd.user,
      identityFile: sshd.identityFile,
      knownHostsFile: empty,
    });
    await expect(strict.exec(['true'])).rejects.toThrow(
      /is not in .*empty_known_hosts: add it \(ssh-keyscan/,
    );
    const tofu = new SshTransport({
      host: sshd.host,
      port: sshd.port,
      user: sshd.user,
      identityFile: sshd.identityFile,
      knownHostsFile: empty,
      hostKeyPolicy: 'accept-new',
    });
    expect((await tofu.exec(['true'])).code).toBe(0);
    tofu.close();
    expect((await strict.exec(['true'])).code).toBe(0);
    strict.close();
  });

  it('resolves ~/.ssh/config aliases the way OpenSSH does (ssh -G)', async () => {
    const cfg = `${sshd.dir}/ssh_config`;
    writeFileSync(
      cfg,
      `Host lab-box\n  HostName 127.0.0.1\n  Port ${sshd.port}\n  User ${sshd.user}\n  IdentityFile ${sshd.identityFile}\n`,
    );
    process.env.ADV_SSH_CONFIG = cfg;
    try {
      const alias = new SshTransport({ host: 'lab-box', knownHostsFile: sshd.knownHostsFile });
      expect((await alias.exec(['echo', 'via alias'])).stdout.toString()).toBe('via alias\n');
      alias.close();
    } finally {
      delete process.env.ADV_SSH_CONFIG;
    }
  });

  it('hops through a ProxyJump host', async () => {
    const hop = new SshTransport({
      host: '127.0.0.1',
      port: sshd.port,
      user: sshd.user,
      identityFile: sshd.identityFile,
      knownHostsFile: sshd.knownHostsFile,
      proxyJump: `${sshd.user}@127.0.0.1:${sshd.port}`,
    });
    const r = await hop.exec(['sh', '-c', 'echo "$SSH_CONNECTION"']);
    // The connection arrives from the jump host's sshd (loopback here), not from us directly.
    expect(r.code).toBe(0);
    expect(r.stdout.toString()).toMatch(/^127\.0\.0\.1 \d+ 127\.0\.0\.1 \d+/);
    hop.close();
  });

  it('says clearly when auth is refused or the host is unreachable', async () => {
    const wrongKey = new SshTransport({
      host: sshd.host,
      port: sshd.port,
      user: sshd.user,
      identityFile: `${sshd.dir}/hostkey`,
      knownHostsFile: sshd.knownHostsFile,
    });
    await expect(wrongKey.exec(['true'])).rejects.toThrow(
      /authentication as .* refused by .*: check connection.identityFile/,
    );
    const nowhere = new SshTransport({
      host: '127.0.0.1',
      port: 1,
      user: sshd.user,
      identityFile: sshd.identityFile,
      knownHostsFile: sshd.knownHostsFile,
    });
    await expect(nowhere.exec(['true'])).rejects.toThrow(
      /cannot connect to .*127\.0\.0\.1:1: .*ECONNREFUSED/,
    );
  });
});
