/**
 * The S3 store against a server that accepts connections and never answers (a stalled proxy, a
 * wedged endpoint): every request gives up once its socket has been idle for `requestIdleMs`, after
 * the SDK's attempts, instead of waiting for ever.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s3OptionsFromUrl } from './index.js';
import { S3Store } from './s3.js';

let server: Server;
const sockets = new Set<Socket>();
beforeAll(async () => {
  // Reads what it is sent, answers nothing.
  server = createServer((s) => {
    sockets.add(s);
    s.on('data', () => {});
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise<void>((r) => server.close(() => r()));
});

describe('S3 store against a server that never answers', () => {
  it('a request fails once its socket has been idle for requestIdleMs, after every attempt', async () => {
    const store = new S3Store({
      bucket: 'b',
      endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      forcePathStyle: true,
      credentials: { accessKeyId: 'a', secretAccessKey: 's' },
      maxAttempts: 2,
      transferRetries: 0,
      requestIdleMs: 300,
    });
    await expect(store.put('runs/r/heartbeat.json', '{}')).rejects.toThrow(/put runs\/r\/heartbeat.json/);
    store.client.destroy();
  }, 60_000);

  it('a store URL sets it with idleTimeout=SEC, and refuses a value that is not seconds', () => {
    const env = { T_ACCESS_KEY_ID: 'a', T_SECRET_ACCESS_KEY: 's' };
    const url = 's3://b/p?endpoint=http://127.0.0.1:9&forcePathStyle=true&credentials=T';
    expect(s3OptionsFromUrl(`${url}&idleTimeout=30`, env)).toMatchObject({
      bucket: 'b',
      prefix: 'p',
      endpoint: 'http://127.0.0.1:9',
      requestIdleMs: 30_000,
    });
    expect(s3OptionsFromUrl(url, env).requestIdleMs).toBeUndefined();
    expect(() => s3OptionsFromUrl(`${url}&idleTimeout=0`, env)).toThrow(
      /idleTimeout=0 is not a number of seconds/,
    );
    expect(() => s3OptionsFromUrl(`${url}&idleTimeout=2m`, env)).toThrow(/not a number of seconds/);
  });
});
