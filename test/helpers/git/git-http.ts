/**
 * A real git smart-HTTP server on loopback: `git http-backend` as a CGI behind a small Node HTTP
 * server, serving bare repos from a temporary root. Optional bearer/basic token check, and a
 * switch to make it answer 503 (a remote that is down).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { git } from '../../../controller/git/native.js';

export interface GitHttpServer {
  root: string;
  url(repo: string): string;
  /** Creates a bare repo `name.git` that accepts pushes and refuses non-fast-forwards. */
  createRepo(name: string): Promise<string>;
  /** While true, every request gets 503. */
  down: boolean;
  requests: number;
  /** The Authorization header of every request, in order ('' where none was sent). */
  authorizations: string[];
  stop(): Promise<void>;
}

export async function startGitHttp(opts: { token?: string } = {}): Promise<GitHttpServer> {
  const root = await mkdtemp(join(tmpdir(), 'adv-git-http-'));
  const state = { down: false, requests: 0 };
  const authorizations: string[] = [];
  const server: Server = createServer((req, res) => {
    state.requests++;
    authorizations.push(req.headers.authorization ?? '');
    if (state.down) {
      res.writeHead(503).end('down for maintenance');
      return;
    }
    if (opts.token) {
      const auth = req.headers.authorization ?? '';
      const basic = auth.startsWith('Basic ') ? Buffer.from(auth.slice(6), 'base64').toString() : '';
      if (auth !== `Bearer ${opts.token}` && !basic.endsWith(`:${opts.token}`)) {
        res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end('unauthorized');
        return;
      }
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const cgi = spawn('git', ['http-backend'], {
      env: {
        ...process.env,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        REQUEST_METHOD: req.method ?? 'GET',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        CONTENT_LENGTH: req.headers['content-length'] ?? '',
        HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
        GIT_PROTOCOL: (req.headers['git-protocol'] as string | undefined) ?? '',
        REMOTE_USER: 'test',
        REMOTE_ADDR: '127.0.0.1',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString().split('\r\n')) {
        const i = line.indexOf(':');
        const k = line.slice(0, i).trim();
        const v = line.slice(i + 1).trim();
        if (k.toLowerCase() === 'status') status = Number(v.split(' ')[0]);
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    cgi.stderr.resume();
    cgi.on('close', () => res.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    root,
    url: (repo) => `http://127.0.0.1:${port}/${repo}.git`,
    createRepo: async (name) => {
      const dir = join(root, `${name}.git`);
      await git(['init', '--quiet', '--bare', '-b', 'main', dir]);
      await git(['config', 'http.receivepack', 'true'], { gitdir: dir });
      await git(['config', 'receive.denyNonFastForwards', 'true'], { gitdir: dir });
      return dir;
    },
    get down() {
      return state.down;
    },
    set down(v: boolean) {
      state.down = v;
    },
    get requests() {
      return state.requests;
    },
    authorizations,
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await rm(root, { recursive: true, force: true });
    },
  };
}
