/**
 * SSH as a command protocol: one ssh2 connection per host, reused; channels multiplexed and bounded
 * below OpenSSH's default MaxSessions (10); keepalive; reconnect on the next command after a drop.
 * Host keys are checked against known_hosts (plain and hashed entries); a first-seen key is trusted
 * only with `hostKeyPolicy: accept-new`. Commands are argument vectors joined by `shellJoin`.
 */
import { createHmac } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import type { Duplex, Readable } from 'node:stream';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import pLimit from 'p-limit';
import { Client, type ConnectConfig } from 'ssh2';
import { AdvError, ErrorCode } from '../errors.js';
import { shellJoin } from '../internal/shell.js';

export interface SshConnection {
  host: string;
  port?: number;
  user?: string;
  identityFile?: string;
  knownHostsFile?: string;
  hostKeyPolicy?: 'strict' | 'accept-new';
  keepaliveSec?: number;
  /** `[user@]host[:port]` to hop through; default: ProxyJump from ~/.ssh/config. */
  proxyJump?: string;
}

/** The transport target of a Backend's `connection` (its fields are the same; absent ones stay absent). */
export function sshTargetOf(c: SshConnection): SshConnection {
  return {
    host: c.host,
    ...(c.port ? { port: c.port } : {}),
    ...(c.user ? { user: c.user } : {}),
    ...(c.identityFile ? { identityFile: c.identityFile } : {}),
    ...(c.knownHostsFile ? { knownHostsFile: c.knownHostsFile } : {}),
    ...(c.hostKeyPolicy ? { hostKeyPolicy: c.hostKeyPolicy } : {}),
    ...(c.keepaliveSec ? { keepaliveSec: c.keepaliveSec } : {}),
    ...(c.proxyJump ? { proxyJump: c.proxyJump } : {}),
  };
}

export interface ExecResult {
  code: number;
  stdout: Buffer;
  stderr: string;
}

const execFileP = promisify(execFile);

/** `~/x` → `<home>/x` (identity files, known_hosts). */
export const expandHome = (p: string): string => (p.startsWith('~/') ? homedir() + p.slice(1) : p);

/** The name a host has in known_hosts: `host`, or `[host]:port` off port 22. */
export const knownHostsName = (host: string, port: number): string =>
  port === 22 ? host : `[${host}]:${port}`;

/** Keys known for a host name, from known_hosts text (plain and `|1|salt|hash` entries). */
export function knownKeys(text: string, name: string): Buffer[] {
  const out: Buffer[] = [];
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t || t.startsWith('#')) continue;
    const [hosts, , key] = t.split(/\s+/);
    if (!hosts || !key) continue;
    const match = hosts.split(',').some((h) => {
      if (h.startsWith('|1|')) {
        const [, , salt, hash] = h.split('|');
        return createHmac('sha1', Buffer.from(salt!, 'base64')).update(name).digest('base64') === hash;
      }
      return h === name;
    });
    if (match) out.push(Buffer.from(key, 'base64'));
  }
  return out;
}

export class SshTransport {
  private client: Client | undefined;
  private connecting: Promise<Client> | undefined;
  private jump: SshTransport | undefined;
  private readonly slots: ReturnType<typeof pLimit>;
  private readonly port: number;
  /** Channels opened since start (tests check none leak). */
  channelsOpened = 0;
  channelsOpen = 0;

  constructor(
    readonly conn: SshConnection,
    opts: { maxChannels?: number } = {},
  ) {
    this.port = conn.port ?? 22;
    this.slots = pLimit(Math.min(opts.maxChannels ?? 8, 9));
  }

  get where(): string {
    return `${this.conn.user ? this.conn.user + '@' : ''}${this.conn.host}:${this.port}`;
  }

  /**
   * What OpenSSH would use for this host (`ssh -G`): `~/.ssh/config` aliases, user, port,
   * identity files and ProxyJump. Values in the Backend spec win.
   */
  private async resolve(): Promise<{
    host: string;
    port: number;
    user: string;
    identityFile?: string;
    proxyJump?: string;
  }> {
    const cfg = new Map<string, string[]>();
    try {
      const config = process.env.ADV_SSH_CONFIG; // another config file than ~/.ssh/config
      const args = [
        '-G',
        ...(config ? ['-F', config] : []),
        ...(this.conn.port ? ['-p', String(this.conn.port)] : []),
        ...(this.conn.user ? ['-l', this.conn.user] : []),
        this.conn.host,
      ];
      const { stdout } = await execFileP('ssh', args, { timeout: 5000 });
      for (const line of stdout.split('\n')) {
        const i = line.indexOf(' ');
        if (i > 0)
          cfg.set(line.slice(0, i).toLowerCase(), [
            ...(cfg.get(line.slice(0, i).toLowerCase()) ?? []),
            line.slice(i + 1),
          ]);
      }
    } catch {
      // No ssh client here: the Backend's own fields are all there is.
    }
    const first = (k: string) => cfg.get(k)?.[0];
    const identity =
      this.conn.identityFile ??
      (process.env.SSH_AUTH_SOCK
        ? undefined
        : (cfg.get('identityfile') ?? []).map(expandHome).find((f) => existsSync(f)));
    const jump =
      this.conn.proxyJump ??
      (first('proxyjump') && first('proxyjump') !== 'none' ? first('proxyjump') : undefined);
    return {
      host: first('hostname') ?? this.conn.host,
      port: this.conn.port ?? Number(first('port') ?? 22),
      user: this.conn.user ?? first('user') ?? process.env.USER ?? 'root',
      ...(identity ? { identityFile: identity } : {}),
      ...(jump ? { proxyJump: jump } : {}),
    };
  }

  /** A TCP stream to host:port opened from this host (what ProxyJump rides on). */
  async forward(host: string, port: number): Promise<Duplex> {
    const client = await this.connect();
    return new Promise((resolve, reject) =>
      client.forwardOut('127.0.0.1', 0, host, port, (err, stream) =>
        err
          ? reject(
              new AdvError(
                ErrorCode.BackendError,
                `ProxyJump ${this.where} cannot reach ${host}:${port}: ${err.message}`,
              ),
            )
          : resolve(stream),
      ),
    );
  }

  private connect(): Promise<Client> {
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= this.resolve()
      .then(async (r) => {
        let sock: Duplex | undefined;
        if (r.proxyJump) {
          const m = /^(?:([^@]+)@)?([^:]+)(?::(\d+))?$/.exec(r.proxyJump.split(',')[0]!);
          if (!m) throw new AdvError(ErrorCode.BackendError, `cannot read ProxyJump ${r.proxyJump}`);
          this.jump ??= new SshTransport({
            host: m[2]!,
            ...(m[3] ? { port: Number(m[3]) } : {}),
            ...(m[1] ? { user: m[1] } : {}),
            ...(this.conn.identityFile ? { identityFile: this.conn.identityFile } : {}),
            ...(this.conn.knownHostsFile ? { knownHostsFile: this.conn.knownHostsFile } : {}),
            ...(this.conn.hostKeyPolicy ? { hostKeyPolicy: this.conn.hostKeyPolicy } : {}),
          });
          sock = await this.jump.forward(r.host, r.port);
        }
        return this.open(r, sock);
      })
      .finally(() => {
        this.connecting = undefined;
      });
    return this.connecting;
  }

  private open(
    r: { host: string; port: number; user: string; identityFile?: string },
    sock?: Duplex,
  ): Promise<Client> {
    return new Promise<Client>((resolve, reject) => {
      const c = new Client();
      let hostKeyProblem: string | undefined;
      const name = knownHostsName(r.host, r.port);
      const khFile = expandHome(this.conn.knownHostsFile ?? '~/.ssh/known_hosts');
      const config: ConnectConfig = {
        host: r.host,
        port: r.port,
        username: r.user,
        ...(sock ? { sock } : {}),
        keepaliveInterval: (this.conn.keepaliveSec ?? 15) * 1000,
        keepaliveCountMax: 3,
        readyTimeout: 20_000,
        hostVerifier: (key: Buffer) => {
          const known = existsSync(khFile) ? knownKeys(readFileSync(khFile, 'utf8'), name) : [];
          if (known.some((k) => k.equals(key))) return true;
          if (known.length > 0) {
            hostKeyProblem = `the host key of ${name} does not match ${khFile}: if the host was reinstalled, remove its old line; otherwise someone may be in the middle`;
            return false;
          }
          if (this.conn.hostKeyPolicy === 'accept-new') {
            const type = key.subarray(4, 4 + key.readUInt32BE(0)).toString();
            appendFileSync(khFile, `${name} ${type} ${key.toString('base64')}\n`);
            return true;
          }
          hostKeyProblem = `${name} is not in ${khFile}: add it (ssh-keyscan -p ${r.port} ${r.host} >> ${khFile}), or set connection.hostKeyPolicy: accept-new`;
          return false;
        },
      };
      if (r.identityFile) config.privateKey = readFileSync(expandHome(r.identityFile));
      else if (process.env.SSH_AUTH_SOCK) config.agent = process.env.SSH_AUTH_SOCK;
      c.once('ready', () => {
        this.client = c;
        resolve(c);
      });
      c.once('error', (e: Error & { level?: string; code?: string }) => {
        this.client = undefined;
        const msg = hostKeyProblem
          ? hostKeyProblem
          : e.level === 'client-authentication'
            ? `authentication as ${config.username} refused by ${this.where}: check connection.identityFile or your ssh agent`
            : `cannot connect to ${this.where}: ${e.message}`;
        reject(
          new AdvError(ErrorCode.BackendError, msg, {
            unreachable: !hostKeyProblem && e.level !== 'client-authentication',
          }),
        );
      });
      c.on('close', () => {
        if (this.client === c) this.client = undefined;
      });
      c.connect(config);
    });
  }

  /** Runs an argument vector on the host; stdin from `input`. Never throws for a non-zero exit. */
  exec(
    argv: readonly string[],
    opts: { input?: Buffer | string | Readable; timeoutMs?: number } = {},
  ): Promise<ExecResult> {
    return this.slots(async () => {
      const client = await this.connect();
      return new Promise<ExecResult>((resolve, reject) => {
        client.exec(shellJoin(argv), (err, stream) => {
          if (err) {
            this.client = undefined; // a channel that cannot open: start over next time
            client.end();
            return reject(
              new AdvError(ErrorCode.BackendError, `ssh ${this.where}: ${err.message}`, {
                unreachable: true,
              }),
            );
          }
          this.channelsOpened++;
          this.channelsOpen++;
          const out: Buffer[] = [];
          const errs: Buffer[] = [];
          let timer: NodeJS.Timeout | undefined;
          if (opts.timeoutMs) {
            timer = setTimeout(() => {
              stream.close();
              reject(
                new AdvError(
                  ErrorCode.BackendError,
                  `ssh ${this.where}: ${argv[0]} timed out after ${opts.timeoutMs} ms`,
                  { unreachable: true, unknownOutcome: true },
                ),
              );
            }, opts.timeoutMs);
          }
          stream.on('data', (b: Buffer) => out.push(b));
          stream.stderr.on('data', (b: Buffer) => errs.push(b));
          stream.on('close', (code: number | null | undefined, signal?: string) => {
            this.channelsOpen--;
            if (timer) clearTimeout(timer);
            // No exit status and no signal: the connection went away under the command, which may
            // or may not have run. Callers must not treat that as the command's answer.
            if (code == null && !signal) {
              this.client = undefined;
              return reject(
                new AdvError(
                  ErrorCode.BackendError,
                  `ssh ${this.where}: the connection dropped during ${argv[0]}; its outcome is unknown`,
                  {
                    unreachable: true,
                    unknownOutcome: true,
                  },
                ),
              );
            }
            resolve({
              code: code ?? 255,
              stdout: Buffer.concat(out),
              stderr: Buffer.concat(errs).toString('utf8'),
            });
          });
          if (opts.input === undefined) stream.end();
          else if (typeof opts.input === 'string' || Buffer.isBuffer(opts.input)) stream.end(opts.input);
          else opts.input.pipe(stream);
        });
      });
    });
  }

  close(): void {
    this.client?.end();
    this.client = undefined;
    this.jump?.close();
  }
}

/** The `SshTransportFactory` the controller injects into adapters: one real ssh2 connection per target. */
export const defaultSshTransport = (target: SshConnection): SshTransport => new SshTransport(target);
