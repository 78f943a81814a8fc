/**
 * What turns events into hints for the reconcile loop: a webhook (`POST /hooks/git`, signed like
 * GitHub's `X-Hub-Signature-256`), a watch on the local repo's branch ref (chokidar), and
 * `POST /api/v1/reconcile/<kind>/<name>` for `adv reconcile`. Events only say "look now";
 * the loop re-reads everything itself.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import chokidar from 'chokidar';
import type { Controller } from './controller.js';

export interface ServeOptions {
  /** `host:port`; port 0 picks a free one. Default: no HTTP server. */
  httpAddr?: string;
  /** Shared secret for webhook signatures and the API's bearer token. */
  webhookSecret?: string;
  /** Watch the local repo's branch ref. Default true. */
  watch?: boolean;
  /** More GET routes on the same listener (the dashboard): each says whether it answered. */
  routes?: readonly Route[];
}

/** A route handler: answers and returns true, or returns false to let the next one try. */
export type Route = (req: IncomingMessage, res: ServerResponse, path: string) => Promise<boolean>;

export interface Serving {
  url?: string;
  close(): Promise<void>;
}

/** `sha256=<hex>` of the body under the secret, as GitHub computes it. */
export function signBody(secret: string, body: string | Buffer): string {
  return 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');
}

export function verifySignature(secret: string, body: Buffer, header: string | undefined): boolean {
  if (!header) return false;
  const expected = Buffer.from(signBody(secret, body));
  const got = Buffer.from(header);
  return expected.length === got.length && timingSafeEqual(expected, got);
}

const MAX_BODY = 5 * 1024 * 1024;

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error('body too large'));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export async function serve(controller: Controller, opts: ServeOptions): Promise<Serving> {
  const closers: (() => Promise<void>)[] = [];
  let url: string | undefined;

  if (opts.watch !== false) {
    const paths = controller.repo.watchPaths();
    if (paths.length) {
      // Watch the folders (a ref file is replaced by rename, and may not exist yet when packed).
      const dirs = [...new Set(paths.map((p) => p.slice(0, p.lastIndexOf('/'))))];
      const watcher = chokidar.watch(dirs, { ignoreInitial: true, depth: 0, awaitWriteFinish: false });
      watcher.on('all', (_event, path) => {
        if (paths.includes(path)) controller.requestFetch(`ref changed: ${path}`);
      });
      await new Promise<void>((res) => watcher.once('ready', () => res()));
      closers.push(() => watcher.close());
    }
  }

  if (opts.httpAddr) {
    const [host, portText] = splitAddr(opts.httpAddr);
    const server: Server = createServer((req, res) => {
      void (async () => {
        const reply = (code: number, body: unknown) => {
          res.writeHead(code, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body) + '\n');
        };
        try {
          const path = (req.url ?? '/').split('?')[0]!;
          if (req.method === 'GET' && path === '/healthz') return reply(200, { ok: true });
          if (req.method === 'GET' && path === '/metrics') {
            res.writeHead(200, { 'content-type': controller.metrics.contentType });
            return void res.end(await controller.metrics.text());
          }
          if (req.method === 'POST' && path === '/hooks/git') {
            const body = await readBody(req);
            if (!opts.webhookSecret)
              return reply(403, {
                error: 'webhooks are disabled: start the controller with a webhook secret',
              });
            if (
              !verifySignature(
                opts.webhookSecret,
                body,
                req.headers['x-hub-signature-256'] as string | undefined,
              )
            ) {
              return reply(401, { error: 'bad or missing X-Hub-Signature-256' });
            }
            controller.requestFetch('webhook');
            return reply(202, { accepted: true });
          }
          const m = /^\/api\/v1\/reconcile\/(run)\/([a-z0-9.-]{1,253})$/.exec(path);
          if (req.method === 'POST' && m) {
            await readBody(req);
            const auth = req.headers.authorization ?? '';
            if (opts.webhookSecret && auth !== `Bearer ${opts.webhookSecret}`)
              return reply(401, { error: 'bad or missing bearer token' });
            controller.requestReconcile('Run', m[2]!);
            return reply(202, { accepted: true, kind: 'Run', name: m[2] });
          }
          for (const route of opts.routes ?? []) if (await route(req, res, path)) return;
          return reply(404, { error: `no route ${req.method} ${path}` });
        } catch (e) {
          reply(400, { error: (e as Error).message });
        }
      })();
    });
    await new Promise<void>((res, rej) => {
      server.once('error', rej);
      server.listen(Number(portText), host, () => res());
    });
    const addr = server.address() as AddressInfo;
    url = `http://${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}`;
    closers.push(() => new Promise<void>((res) => server.close(() => res())));
  }
  return {
    ...(url ? { url } : {}),
    close: async () => {
      for (const c of closers) await c();
    },
  };
}

function splitAddr(addr: string): [string, string] {
  const i = addr.lastIndexOf(':');
  if (i < 0) return ['127.0.0.1', addr];
  return [addr.slice(0, i).replace(/^\[|\]$/g, '') || '127.0.0.1', addr.slice(i + 1)];
}
