/**
 * A real S3-protocol server on loopback (s3rver, in a child process) behind a small proxy that can
 * inject faults: the next N requests answer 500 InternalError, 503 SlowDown or get their connection
 * dropped, as a struggling S3 does.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { freePort } from '../net.js';
import { stopProcess } from '../wait.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

export interface S3Server {
  /** Through the fault-injecting proxy. */
  endpoint: string;
  bucket: string;
  /** `s3://bucket/prefix?endpoint=…&forcePathStyle=true` for openStore / adv exec. */
  url(prefix: string): string;
  /** Makes the next `count` requests (matching `method`, if given) fail with `kind`. */
  fail(count: number, kind: 'InternalError' | 'SlowDown' | 'Reset', method?: string): void;
  clearFaults(): void;
  faultsServed: number;
  /** Response body bytes the proxy passed on for GETs, by object key (the path less `/<bucket>/`). */
  getBytes: Map<string, number>;
  env: Record<string, string>;
  stop(): Promise<void>;
}

/** The script of the s3rver child, started by path: a sibling of this file. */
export const S3RVER_MAIN = join(import.meta.dirname, 's3rver-main.ts');

export async function startS3(bucket = 'adv-test'): Promise<S3Server> {
  const dir = await mkdtemp(join(tmpdir(), 'adv-s3-'));
  const port = await freePort();
  const req = createRequire(import.meta.url);
  const tsx = pathToFileURL(join(req.resolve('tsx/package.json'), '..', 'dist', 'loader.mjs')).href;
  const child: ChildProcess = spawn(
    process.execPath,
    ['--openssl-legacy-provider', '--import', tsx, S3RVER_MAIN, String(port), dir, bucket],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let err = '';
  child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
  await new Promise<void>((res, rej) => {
    const t = setTimeout(() => rej(new Error(`s3rver did not start: ${err}`)), 120_000); // a hang guard
    child.stdout!.on('data', (b: Buffer) => {
      if (b.toString().includes('ready')) {
        clearTimeout(t);
        res();
      }
    });
    child.once('exit', (code) => rej(new Error(`s3rver exited ${code}: ${err}`)));
  });

  const faults: { kind: 'InternalError' | 'SlowDown' | 'Reset'; method?: string }[] = [];
  const state = { served: 0 };
  const getBytes = new Map<string, number>();
  const proxy: Server = createServer((req, res) => {
    const i = faults.findIndex((f) => !f.method || f.method === req.method);
    if (i >= 0) {
      const f = faults.splice(i, 1)[0]!;
      state.served++;
      req.resume();
      if (f.kind === 'Reset') {
        req.socket.destroy();
        return;
      }
      const status = f.kind === 'SlowDown' ? 503 : 500;
      const message =
        f.kind === 'SlowDown'
          ? 'Please reduce your request rate.'
          : 'We encountered an internal error. Please try again.';
      res.writeHead(status, { 'content-type': 'application/xml' });
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${f.kind}</Code><Message>${message}</Message></Error>`,
      );
      return;
    }
    const up = request(
      { host: '127.0.0.1', port, method: req.method, path: req.url, headers: req.headers },
      (r) => {
        res.writeHead(r.statusCode ?? 500, r.headers);
        if (req.method === 'GET') {
          const key = decodeURIComponent(new URL(req.url ?? '/', 'http://s3').pathname).replace(
            `/${bucket}/`,
            '',
          );
          r.on('data', (b: Buffer) => getBytes.set(key, (getBytes.get(key) ?? 0) + b.length));
        }
        r.pipe(res);
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
  const endpoint = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  return {
    endpoint,
    bucket,
    url: (prefix) => `s3://${bucket}/${prefix}?endpoint=${encodeURIComponent(endpoint)}&forcePathStyle=true`,
    fail: (count, kind, method) => {
      for (let i = 0; i < count; i++) faults.push({ kind, ...(method ? { method } : {}) });
    },
    clearFaults: () => {
      faults.length = 0;
    },
    get faultsServed() {
      return state.served;
    },
    getBytes,
    env: { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1' },
    stop: async () => {
      proxy.closeAllConnections();
      await new Promise<void>((r) => proxy.close(() => r()));
      await stopProcess(child, 2_000); // it closes its connections first; they are ours to cut
      await rm(dir, { recursive: true, force: true });
    },
  };
}
