import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Agent } from './agent.js';
import { AGENT_API } from './protocol.js';

describe('adv agent', () => {
  let dir = '';
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('waits as told when the controller answers 503 while it stops, and asks again without giving up', async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-agent-503-'));
    const lines: string[] = [];
    let agent: Agent | undefined;
    const asked: string[] = [];
    const server = createServer((req, res) => {
      asked.push(`${req.method} ${req.url}`);
      if (asked.length === 1) {
        res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1' });
        return void res.end(
          JSON.stringify({ error: 'the controller is stopping: ask again in a few seconds' }),
        );
      }
      agent?.stop(); // the second ask is what this test waits for
      res.writeHead(204);
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const controller = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      await writeFile(
        join(dir, 'agent.json'),
        JSON.stringify({ name: 'desk', controller, token: 'adva_test', pools: ['desks'] }),
      );
      agent = new Agent({
        controller,
        name: 'desk',
        stateDir: dir,
        labels: {},
        policy: {},
        waitSec: 0,
        capabilities: { hostname: 'h', cores: 1, ramGiB: 1, os: 'linux', node: 'v20', gpus: [] },
        logger: pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }),
      });
      await agent.run();
      expect(asked).toEqual([`POST ${AGENT_API}/claims?wait=0`, `POST ${AGENT_API}/claims?wait=0`]);
      const log = lines.join('');
      expect(log).toContain('asking again in 1s');
      expect(log).toContain('the controller is stopping');
      expect(log).not.toContain('cannot reach the controller');
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('says at start that labels changed since enrollment are not the ones Backends match', async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-agent-labels-'));
    const lines: string[] = [];
    const server = createServer((_req, res) => {
      agent.stop();
      res.writeHead(204);
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const controller = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const saved = { name: 'desk', controller, token: 'adva_test', pools: ['desks'], labels: { room: 'a1' } };
    await writeFile(join(dir, 'agent.json'), JSON.stringify(saved));
    const agent = new Agent({
      controller,
      name: 'desk',
      stateDir: dir,
      labels: { room: 'b12' },
      policy: {},
      waitSec: 0,
      capabilities: { hostname: 'h', cores: 1, ramGiB: 1, os: 'linux', node: 'v20', gpus: [] },
      logger: pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }),
    });
    try {
      await agent.run();
    } finally {
      await new Promise((r) => server.close(r));
    }
    expect(lines.join('')).toContain('labels are fixed at enrollment');
    expect(lines.join('')).toContain('"enrolledWith":{"room":"a1"},"given":{"room":"b12"}');
  });
});
