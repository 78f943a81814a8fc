/**
 * The streaming subresources of the fake Kubernetes API server (fake-k8s.ts): `pods/NAME/exec`
 * and `pods/NAME/portforward`, spoken the way the real API server and kubelet speak them to
 * kubectl 1.32 (KEP-4006, "Transition from SPDY to WebSockets"):
 *
 * - exec over WebSocket, subprotocol `v5.channel.k8s.io` (kubectl's default since 1.30): every
 *   binary message is one channel byte (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize, 255 close)
 *   and its data; the command's end is a `Status` on channel 3 (Success, or Failure with reason
 *   NonZeroExitCode and an ExitCode cause, from which kubectl takes its exit code), then a normal
 *   close (1000). With `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false` kubectl upgrades to SPDY/3.1
 *   instead (`v4|v5.channel.k8s.io`): one SPDY stream per channel, named by its `streamtype`
 *   header, the same Status on the `error` stream.
 * - port-forward over WebSocket with the SPDY session tunnelled inside (subprotocol
 *   `SPDY/3.1+portforward.k8s.io`: the binary messages carry SPDY's bytes; kubectl's default since
 *   1.31), or, with `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`, a plain SPDY/3.1 upgrade
 *   (`portforward.k8s.io`). Either way each forwarded connection is a pair of SPDY streams with the
 *   same `requestid`: `error` (a failure to reach the port is written there) and `data` (the bytes).
 *
 * Faithful to what kubectl checks: the handshakes (Sec-WebSocket-Accept and the subprotocol it
 * asked for; `X-Stream-Protocol-Version` and the 101 for SPDY), SPDY/3 framing with zlib header
 * compression against the SPDY/3 dictionary (one compression context per direction, as the framer
 * keeps), SYN_REPLY for every accepted stream, PING answered, WebSocket ping/pong and close codes,
 * the half-closes (stdin's close signal, a data stream's FIN), exit codes.
 * Simplified: no SPDY flow control (kubectl's spdystream does not enforce windows either), no
 * WebSocket extensions (kubectl asks for none), a `tty` exec gets a pty from `script(1)` and
 * ignores resizes, and `attach` is not served. The fake kubelet runs pods on the host's network,
 * so a pod's port P is 127.0.0.1:P; an exec'd command joins the container's mount and UTS
 * namespaces (`nsenter`) with the container's environment and working directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { constants as zc, inflateSync } from 'node:zlib';
import { constants } from 'node:os';
import { shellJoin } from '../../../runtime/shell.js';
import type { Obj } from './fake-k8s-store.js';

// ---- upgrades ----

/** What an upgrade request asks for: a WebSocket (with its subprotocols) or SPDY/3.1. */
export type UpgradeKind = { kind: 'websocket'; protocols: string[] } | { kind: 'spdy'; protocols: string[] };

/** The upgrade a request asks for, or undefined when it is not one these endpoints speak. */
export function upgradeOf(req: IncomingMessage): UpgradeKind | undefined {
  const upgrade = (req.headers.upgrade ?? '').toLowerCase();
  const list = (name: string) =>
    (req.headersDistinct[name] ?? [])
      .flatMap((v) => v.split(','))
      .map((v) => v.trim())
      .filter(Boolean);
  if (upgrade === 'websocket') return { kind: 'websocket', protocols: list('sec-websocket-protocol') };
  if (upgrade === 'spdy/3.1') return { kind: 'spdy', protocols: list('x-stream-protocol-version') };
  return undefined;
}

/** The subprotocols served, by subresource and upgrade, in the order the fake prefers them. */
const PROTOCOLS = {
  exec: {
    websocket: ['v5.channel.k8s.io', 'v4.channel.k8s.io'],
    spdy: ['v5.channel.k8s.io', 'v4.channel.k8s.io'],
  },
  portforward: { websocket: ['SPDY/3.1+portforward.k8s.io'], spdy: ['portforward.k8s.io'] },
} as const;

/** The client's first offered subprotocol that the fake speaks for `sub`, or undefined. */
export function negotiate(sub: 'exec' | 'portforward', how: UpgradeKind): string | undefined {
  const ours: readonly string[] = PROTOCOLS[sub][how.kind];
  return how.protocols.find((p) => ours.includes(p));
}

/** Completes a SPDY/3.1 upgrade with `protocol` and returns the session now on the socket. */
export function acceptSpdy(socket: Duplex, head: Buffer, protocol: string): SpdySession {
  socket.write(
    'HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n' +
      `X-Stream-Protocol-Version: ${protocol}\r\n\r\n`,
  );
  const session = new SpdySession((b) => socket.write(b));
  socket.on('data', (c: Buffer) => session.feed(c));
  socket.on('close', () => session.end());
  if (head.length) session.feed(head);
  return session;
}

/** Answers an upgrade request with an error `Status` (kubectl prints its message) and closes. */
export function refuseUpgrade(socket: Duplex, code: number, status: Obj): void {
  const body = JSON.stringify(status);
  socket.end(
    `HTTP/1.1 ${code} ${statusText(code)}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

const statusText = (code: number) =>
  ({
    400: 'Bad Request',
    401: 'Unauthorized',
    403: 'Forbidden',
    404: 'Not Found',
    500: 'Internal Server Error',
  })[code] ?? 'Error';

// ---- WebSocket (RFC 6455), server side ----

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const OP = { continuation: 0, text: 1, binary: 2, close: 8, ping: 9, pong: 10 } as const;

/** One server-side WebSocket connection: binary messages in and out, pings answered. */
export class WebSocketConn {
  private buf: Buffer = Buffer.alloc(0);
  private fragments: Buffer[] = [];
  private closed = false;
  onMessage: (data: Buffer) => void = () => {};
  onClose: () => void = () => {};

  /** Completes the handshake with `protocol` (one the client offered) and starts reading. */
  constructor(
    private readonly socket: Duplex,
    req: IncomingMessage,
    head: Buffer,
    protocol: string,
  ) {
    const accept = createHash('sha1')
      .update(`${String(req.headers['sec-websocket-key'])}${WS_GUID}`)
      .digest('base64');
    socket.write(
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        `Sec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: ${protocol}\r\n\r\n`,
    );
    socket.on('data', (c: Buffer) => this.feed(c));
    socket.on('close', () => this.gone());
    socket.on('error', () => this.gone());
    if (head.length) setImmediate(() => this.feed(head));
  }

  /** Sends one binary message. */
  send(data: Buffer): void {
    if (!this.closed) this.socket.write(frame(OP.binary, data));
  }

  /** A close frame with `code` (1000: normal closure, which kubectl reads as the end), then the socket ends. */
  close(code = 1000, reason = ''): void {
    if (this.closed) return;
    const payload = Buffer.alloc(2 + Buffer.byteLength(reason));
    payload.writeUInt16BE(code, 0);
    payload.write(reason, 2);
    this.socket.end(frame(OP.close, payload));
    this.gone();
  }

  private gone(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }

  private feed(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    for (;;) {
      const f = parseFrame(this.buf);
      if (!f) return;
      this.buf = this.buf.subarray(f.size);
      if (f.op === OP.ping) this.socket.write(frame(OP.pong, f.payload));
      else if (f.op === OP.close) {
        // The client's close: echo its code, as RFC 6455 §5.5.1 asks.
        this.close(f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1000);
        return;
      } else if (f.op === OP.binary || f.op === OP.text || f.op === OP.continuation) {
        this.fragments.push(f.payload);
        if (f.fin) {
          const msg = Buffer.concat(this.fragments);
          this.fragments = [];
          this.onMessage(msg);
        }
      }
    }
  }
}

/** A client frame from the front of `b` (masked, per RFC 6455 §5.3), or undefined until all of it is there. */
function parseFrame(b: Buffer): { op: number; fin: boolean; payload: Buffer; size: number } | undefined {
  if (b.length < 2) return undefined;
  let len = b[1]! & 0x7f;
  let at = 2;
  if (len === 126) {
    if (b.length < 4) return undefined;
    len = b.readUInt16BE(2);
    at = 4;
  } else if (len === 127) {
    if (b.length < 10) return undefined;
    len = Number(b.readBigUInt64BE(2));
    at = 10;
  }
  const masked = (b[1]! & 0x80) !== 0;
  const mask = masked ? b.subarray(at, at + 4) : undefined;
  if (masked) at += 4;
  if (b.length < at + len) return undefined;
  const payload = Buffer.from(b.subarray(at, at + len));
  if (mask) for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i & 3]!;
  return { op: b[0]! & 0x0f, fin: (b[0]! & 0x80) !== 0, payload, size: at + len };
}

/** A server frame (unmasked), FIN set. */
function frame(op: number, payload: Buffer): Buffer {
  const n = payload.length;
  const head = n < 126 ? Buffer.alloc(2) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  head[0] = 0x80 | op;
  if (n < 126) head[1] = n;
  else if (n < 65536) {
    head[1] = 126;
    head.writeUInt16BE(n, 2);
  } else {
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  return Buffer.concat([head, payload]);
}

// ---- SPDY/3.1, server side ----

/**
 * The SPDY/3 header compression dictionary (draft 3, §2.6.10.1): these names, each with its
 * 4-byte big-endian length, then the tail as it is. 1423 bytes.
 */
const SPDY_DICTIONARY = Buffer.concat([
  // prettier-ignore
  ...[
    'options', 'head', 'post', 'put', 'delete', 'trace', 'accept', 'accept-charset', 'accept-encoding',
    'accept-language', 'accept-ranges', 'age', 'allow', 'authorization', 'cache-control', 'connection',
    'content-base', 'content-encoding', 'content-language', 'content-length', 'content-location',
    'content-md5', 'content-range', 'content-type', 'date', 'etag', 'expect', 'expires', 'from', 'host',
    'if-match', 'if-modified-since', 'if-none-match', 'if-range', 'if-unmodified-since', 'last-modified',
    'location', 'max-forwards', 'pragma', 'proxy-authenticate', 'proxy-authorization', 'range', 'referer',
    'retry-after', 'server', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'user-agent', 'vary', 'via',
    'warning', 'www-authenticate', 'method', 'get', 'status', '200 OK', 'version', 'HTTP/1.1', 'url',
    'public', 'set-cookie', 'keep-alive', 'origin',
  ].map((w) => {
    const b = Buffer.alloc(4 + w.length);
    b.writeUInt32BE(w.length, 0);
    b.write(w, 4, 'latin1');
    return b;
  }),
  Buffer.from(
    '100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505203 ' +
      'Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized' +
      '403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service UnavailableJan ' +
      'Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, ' +
      'GMTchunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,' +
      'text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,' +
      'utf-,*,enq=0.',
    'latin1',
  ),
]);

const SPDY = {
  synStream: 1,
  synReply: 2,
  rstStream: 3,
  settings: 4,
  ping: 6,
  goAway: 7,
  headers: 8,
} as const;
const FLAG_FIN = 0x01;
/** Data frames carry at most this much (the frame length field allows 2^24-1; small keeps memory flat). */
const MAX_DATA = 32 * 1024;

/** One SPDY stream the client opened. */
export class SpdyStream {
  remoteEnded = false;
  private localEnded = false;
  onData: (b: Buffer) => void = () => {};
  /** The client's FIN: it sends no more. */
  onEnd: () => void = () => {};
  /** RST_STREAM, or the session ended: the stream is gone both ways. */
  onReset: () => void = () => {};

  constructor(
    private readonly session: SpdySession,
    readonly id: number,
    readonly headers: Record<string, string>,
  ) {}

  write(b: Buffer): void {
    if (this.localEnded) return;
    for (let i = 0; i < b.length; i += MAX_DATA)
      this.session.data(this.id, b.subarray(i, i + MAX_DATA), false);
  }

  /** Our FIN: we send no more. */
  end(): void {
    if (this.localEnded) return;
    this.localEnded = true;
    this.session.data(this.id, Buffer.alloc(0), true);
  }
}

/**
 * A SPDY/3.1 server session over a byte stream (`feed` in, `write` out): streams the client opens
 * are accepted (SYN_REPLY) and handed to `onStream`; pings answered; GOAWAY or the end of the
 * transport resets every stream.
 */
export class SpdySession {
  private buf: Buffer = Buffer.alloc(0);
  private readonly streams = new Map<number, SpdyStream>();
  /** Every compressed header byte the client sent: its zlib context spans the whole session. */
  private inflateInput: Buffer = Buffer.alloc(0);
  private inflatedLength = 0;
  private deflateStarted = false;
  private ended = false;
  onStream: (s: SpdyStream) => void = () => {};

  constructor(private readonly write: (b: Buffer) => void) {}

  feed(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    while (!this.ended && this.buf.length >= 8) {
      const len = this.buf.readUInt32BE(4) & 0xffffff;
      if (this.buf.length < 8 + len) return;
      const f = this.buf.subarray(0, 8 + len);
      this.buf = this.buf.subarray(8 + len);
      if (f[0]! & 0x80) this.control(f.readUInt16BE(2), f[4]!, f.subarray(8));
      else this.dataIn(f.readUInt32BE(0) & 0x7fffffff, f[4]!, f.subarray(8));
    }
  }

  /** The transport is gone: every stream is reset. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    for (const s of this.streams.values()) s.onReset();
    this.streams.clear();
  }

  /** A DATA frame on stream `id` (`fin`: our half-close). */
  data(id: number, payload: Buffer, fin: boolean): void {
    if (this.ended) return;
    const h = Buffer.alloc(8);
    h.writeUInt32BE(id & 0x7fffffff, 0);
    h.writeUInt32BE(((fin ? FLAG_FIN : 0) << 24) | payload.length, 4);
    this.write(Buffer.concat([h, payload]));
    const s = this.streams.get(id);
    if (fin && s?.remoteEnded) this.streams.delete(id);
  }

  private control(type: number, flags: number, body: Buffer): void {
    switch (type) {
      case SPDY.synStream: {
        const id = body.readUInt32BE(0) & 0x7fffffff;
        const s = new SpdyStream(this, id, this.headerBlock(body.subarray(10)));
        this.streams.set(id, s);
        this.controlOut(SPDY.synReply, 0, Buffer.concat([u32(id), this.compress({})]));
        this.onStream(s);
        if (flags & FLAG_FIN) this.remoteEnd(s);
        return;
      }
      case SPDY.rstStream: {
        const id = body.readUInt32BE(0) & 0x7fffffff;
        const s = this.streams.get(id);
        this.streams.delete(id);
        s?.onReset();
        return;
      }
      case SPDY.ping:
        return this.controlOut(SPDY.ping, 0, body.subarray(0, 4));
      case SPDY.goAway:
        return this.end();
      case SPDY.headers:
        this.headerBlock(body.subarray(4)); // Keeps the decompression context in step.
        if (flags & FLAG_FIN) {
          const s = this.streams.get(body.readUInt32BE(0) & 0x7fffffff);
          if (s) this.remoteEnd(s);
        }
        return;
      default:
      // SETTINGS, WINDOW_UPDATE: no flow control here, nothing to do.
    }
  }

  private dataIn(id: number, flags: number, payload: Buffer): void {
    const s = this.streams.get(id);
    if (!s) return;
    if (payload.length) s.onData(payload);
    if (flags & FLAG_FIN) this.remoteEnd(s);
  }

  private remoteEnd(s: SpdyStream): void {
    if (s.remoteEnded) return;
    s.remoteEnded = true;
    s.onEnd();
  }

  private controlOut(type: number, flags: number, body: Buffer): void {
    if (this.ended) return;
    const h = Buffer.alloc(8);
    h.writeUInt16BE(0x8003, 0);
    h.writeUInt16BE(type, 2);
    h.writeUInt32BE((flags << 24) | body.length, 4);
    this.write(Buffer.concat([h, body]));
  }

  /**
   * A compressed name/value block → lower-case names to values. The client's compressor is one
   * zlib stream for the session, sync-flushed after each block; inflating everything received so
   * far (truncated input allowed) and keeping the new tail is simple, and the blocks are small.
   */
  private headerBlock(compressed: Buffer): Record<string, string> {
    this.inflateInput = Buffer.concat([this.inflateInput, compressed]);
    const all = inflateSync(this.inflateInput, { dictionary: SPDY_DICTIONARY, finishFlush: zc.Z_SYNC_FLUSH });
    const block = all.subarray(this.inflatedLength);
    this.inflatedLength = all.length;
    const out: Record<string, string> = {};
    let at = 4;
    for (let n = block.readUInt32BE(0); n > 0; n--) {
      const nl = block.readUInt32BE(at);
      const name = block.toString('latin1', at + 4, at + 4 + nl).toLowerCase();
      at += 4 + nl;
      const vl = block.readUInt32BE(at);
      out[name] = block.toString('latin1', at + 4, at + 4 + vl);
      at += 4 + vl;
    }
    return out;
  }

  /**
   * A name/value block as our side of the zlib stream: a stored (uncompressed) deflate block, then
   * the empty stored block a sync flush ends with; Go's inflater hands out a block's bytes only
   * when it reaches the next block header, so without that marker it would read past the frame.
   * The stream's header names the SPDY dictionary (FDICT and its Adler-32), as the client's
   * decompressor requires.
   */
  private compress(headers: Record<string, string>): Buffer {
    const parts = [u32(Object.keys(headers).length)];
    for (const [k, v] of Object.entries(headers))
      parts.push(u32(Buffer.byteLength(k)), Buffer.from(k), u32(Buffer.byteLength(v)), Buffer.from(v));
    const raw = Buffer.concat(parts);
    const stored = Buffer.alloc(5);
    stored[0] = 0; // BFINAL 0, BTYPE 00 (stored); the rest of the byte is padding.
    stored.writeUInt16LE(raw.length, 1);
    stored.writeUInt16LE(~raw.length & 0xffff, 3);
    // CMF 0x78: deflate, 32 KiB window; FLG 0xbb: FDICT, and check bits making CMF·256+FLG ≡ 0 (mod 31).
    const head = this.deflateStarted ? [] : [Buffer.from([0x78, 0xbb]), u32(adler32(SPDY_DICTIONARY))];
    this.deflateStarted = true;
    return Buffer.concat([...head, stored, raw, SYNC_FLUSH_MARKER]);
  }
}

/** An empty, non-final stored block: what zlib's Z_SYNC_FLUSH writes. */
const SYNC_FLUSH_MARKER = Buffer.from([0x00, 0x00, 0x00, 0xff, 0xff]);

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0, 0);
  return b;
};

function adler32(b: Buffer): number {
  let a = 1;
  let s = 0;
  for (const x of b) {
    a = (a + x) % 65521;
    s = (s + a) % 65521;
  }
  return ((s << 16) | a) >>> 0;
}

// ---- port-forward ----

/** Where a forwarded connection goes, and what to call the pod in messages. */
export interface PortForwardTarget {
  pod: string;
  uid: string;
  /** Connections the fake holds open: ended when it closes. */
  sockets: Set<Socket>;
}

/**
 * Port-forward over a SPDY session: each `requestid`'s `error` and `data` streams make one
 * connection to 127.0.0.1:`port` (the fake's pods share the host's network); a connection that
 * fails is reported on the error stream as the kubelet words it, and kubectl prints it.
 */
export function servePortForward(session: SpdySession, target: PortForwardTarget): void {
  const pairs = new Map<string, { error?: SpdyStream; data?: SpdyStream }>();
  session.onStream = (s) => {
    const id = s.headers.requestid ?? String(s.id);
    const pair = pairs.get(id) ?? {};
    pairs.set(id, pair);
    if (s.headers.streamtype === 'error') pair.error = s;
    else if (s.headers.streamtype === 'data') pair.data = s;
    else return s.end();
    if (pair.error && pair.data) {
      pairs.delete(id);
      forward(pair.error, pair.data, target);
    }
  };
}

function forward(error: SpdyStream, data: SpdyStream, t: PortForwardTarget): void {
  const port = Number(data.headers.port);
  const sock = connect({ host: '127.0.0.1', port });
  t.sockets.add(sock);
  let connected = false;
  sock.on('connect', () => (connected = true));
  sock.on('data', (b: Buffer) => data.write(b));
  sock.on('end', () => data.end());
  sock.on('error', (e: NodeJS.ErrnoException) => {
    if (!connected)
      error.write(
        Buffer.from(
          `error forwarding port ${port} to pod ${t.pod}, uid ${t.uid}: failed to connect to localhost:${port} ` +
            `inside namespace "${t.pod}", IPv4: dial tcp4 127.0.0.1:${port}: connect: ${e.code === 'ECONNREFUSED' ? 'connection refused' : e.message}`,
        ),
      );
  });
  sock.on('close', () => {
    t.sockets.delete(sock);
    data.end();
    error.end();
  });
  data.onData = (b) => sock.write(b);
  data.onEnd = () => sock.end();
  data.onReset = () => sock.destroy();
}

// ---- exec ----

/** The container an exec joins: its main process (for its namespaces) and environment. */
export interface ExecTarget {
  pid: number;
  env: Record<string, string>;
  /** Exec'd processes the fake holds: killed when it closes. */
  processes: Set<ChildProcess>;
}

/** What the exec query asks for (`command` repeated, `stdin`, `stdout`, `stderr`, `tty`). */
export interface ExecRequest {
  command: string[];
  stdin: boolean;
  stdout: boolean;
  stderr: boolean;
  tty: boolean;
}

export function execRequestOf(q: URLSearchParams): ExecRequest {
  const flag = (n: string) => ['true', '1'].includes(q.get(n) ?? '');
  return {
    command: q.getAll('command'),
    stdin: flag('stdin'),
    stdout: flag('stdout'),
    stderr: flag('stderr'),
    tty: flag('tty'),
  };
}

/** The v4/v5 error-channel body for an exit: Success, or NonZeroExitCode with the code as its cause. */
function exitStatus(r: ExecRequest, code: number): Obj {
  if (code === 0) return { metadata: {}, status: 'Success' };
  return {
    metadata: {},
    status: 'Failure',
    message: `command terminated with non-zero exit code: error executing command [${r.command.join(' ')}], exit code ${code}`,
    reason: 'NonZeroExitCode',
    details: { causes: [{ reason: 'ExitCode', message: String(code) }] },
  };
}

/**
 * Starts the command in the container: `nsenter` into the main process's mount and UTS namespaces
 * and working directory, with the container's environment; under `script(1)` for a tty.
 */
function startExec(t: ExecTarget, r: ExecRequest): ChildProcess {
  const argv = r.tty ? ['script', '-q', '-e', '-f', '-c', shellJoin(r.command), '/dev/null'] : r.command;
  const child = spawn('nsenter', ['-t', String(t.pid), '-m', '-u', '--wd', '--', ...argv], {
    env: { ...t.env, ...(r.tty ? { TERM: t.env.TERM ?? 'xterm' } : {}) },
    stdio: [r.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    detached: true,
  });
  t.processes.add(child);
  child.on('close', () => t.processes.delete(child));
  child.stdin?.on('error', () => {}); // The command may exit before reading all its input.
  return child;
}

/** The exit code of a finished child, a signal death as 128+n (what the runtime reports). */
const exitCodeOf = (code: number | null, signal: NodeJS.Signals | null) =>
  code ?? 128 + (signal ? (constants.signals[signal] ?? 9) : 9);

/**
 * Runs one command and feeds its streams to `out` (channel 1 stdout, 2 stderr); resolves with the
 * exit code after both streams are drained, so the Status follows the last output.
 */
function runExec(
  t: ExecTarget,
  r: ExecRequest,
  out: (channel: 1 | 2, b: Buffer) => void,
): {
  child: ChildProcess;
  done: Promise<number>;
} {
  const child = startExec(t, r);
  child.stdout!.on('data', (b: Buffer) => out(1, b));
  child.stderr!.on('data', (b: Buffer) => out(r.tty ? 1 : 2, b));
  const done = new Promise<number>((resolve) => {
    child.on('error', () => resolve(126));
    child.on('close', (code, signal) => resolve(exitCodeOf(code, signal)));
  });
  return { child, done };
}

const CHANNEL = { stdin: 0, stdout: 1, stderr: 2, error: 3, resize: 4, close: 255 } as const;

/** exec over a WebSocket (`v5.channel.k8s.io`, or v4 without the close signal). */
export function serveExecWebSocket(ws: WebSocketConn, t: ExecTarget, r: ExecRequest): void {
  const { child, done } = runExec(t, r, (channel, b) => ws.send(Buffer.concat([Buffer.from([channel]), b])));
  ws.onMessage = (m) => {
    if (!m.length) return;
    if (m[0] === CHANNEL.stdin) child.stdin?.write(m.subarray(1));
    else if (m[0] === CHANNEL.close && m[1] === CHANNEL.stdin) child.stdin?.end();
  };
  ws.onClose = () => killExec(child);
  void done.then((code) => {
    ws.send(Buffer.concat([Buffer.from([CHANNEL.error]), Buffer.from(JSON.stringify(exitStatus(r, code)))]));
    ws.close(1000);
  });
}

/**
 * exec over SPDY (`v4.channel.k8s.io`/`v5`): the command starts once every stream the query asks
 * for is open (error, and stdin/stdout/stderr as asked; resize with a tty).
 */
export function serveExecSpdy(session: SpdySession, t: ExecTarget, r: ExecRequest, close: () => void): void {
  const streams: Partial<Record<string, SpdyStream>> = {};
  const want = [
    'error',
    ...(r.stdin ? ['stdin'] : []),
    ...(r.stdout ? ['stdout'] : []),
    ...(r.stderr && !r.tty ? ['stderr'] : []),
  ];
  let started = false;
  session.onStream = (s) => {
    const type = s.headers.streamtype ?? '';
    streams[type] = s;
    if (started || !want.every((w) => streams[w])) return;
    started = true;
    const { child, done } = runExec(t, r, (channel, b) =>
      (channel === 1 ? streams.stdout : streams.stderr)?.write(b),
    );
    const stdin = streams.stdin;
    if (stdin) {
      stdin.onData = (b) => child.stdin?.write(b);
      stdin.onEnd = () => child.stdin?.end();
    }
    void done.then((code) => {
      streams.error!.write(Buffer.from(JSON.stringify(exitStatus(r, code))));
      for (const x of Object.values(streams)) x?.end();
      close();
    });
    for (const x of Object.values(streams)) if (x) x.onReset = () => killExec(child);
  };
}

/** Kills an exec'd command and whatever it started (its process group), as a closed stream does. */
export function killExec(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}
