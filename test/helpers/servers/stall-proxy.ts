/**
 * A TCP proxy on loopback that can stall: `hold()` stops moving bytes both ways on every
 * connection (they stay open, the bytes wait in the kernel's buffers, as on a link that drops into
 * a black hole), and `release()` lets them through again. New connections during a hold are
 * accepted and held too.
 */
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';

export interface StallProxy {
  url: string;
  hold(): void;
  release(): void;
  stop(): Promise<void>;
}

export async function startStallProxy(targetHost: string, targetPort: number): Promise<StallProxy> {
  let held = false;
  const pairs = new Set<[Socket, Socket]>();
  const flow = ([a, b]: [Socket, Socket]) => (a.pipe(b), b.pipe(a));
  const stall = ([a, b]: [Socket, Socket]) => (a.unpipe(b), b.unpipe(a), a.pause(), b.pause());
  const server = createServer((client) => {
    const upstream = createConnection({ host: targetHost, port: targetPort });
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    if (!held) flow(pair);
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hold() {
      held = true;
      pairs.forEach(stall);
    },
    release() {
      held = false;
      pairs.forEach(flow);
    },
    async stop() {
      for (const p of pairs) p.forEach((s) => s.destroy());
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
