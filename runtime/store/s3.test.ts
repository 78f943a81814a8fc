/**
 * The S3 store against a server that accepts connections and never answers (a stalled proxy, a
 * wedged endpoint): every request gives up once its socket has been idle for `requestIdleMs`, after
 * the SDK's attempts, instead of waiting for ever.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
});
