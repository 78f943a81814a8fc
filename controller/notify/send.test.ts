import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderSpec } from '../spec/schema.js';
import type { AlertDelivery } from '../status/types.js';
import {
  buildRequest,
  EVENT_ID_HEADER,
  send,
  signature,
  SIGNATURE_HEADER,
  type OutgoingRequest,
} from './send.js';

const d: AlertDelivery = {
  event: 'RunFailed',
  object: 'run/train-1',
  attempt: 2,
  at: '2026-01-01T00:00:00.000Z',
  state: 'pending',
  tries: 0,
  phase: 'Failed',
  reason: 'Error',
  message: 'exit 3',
  specCommit: 'c0ffee',
};

const built = (spec: ProviderSpec, secret?: string): OutgoingRequest => {
  const r = buildRequest(spec, secret, 'Run/train-1/2/RunFailed', 'on-failure', d);
  if ('error' in r) throw new Error(r.error);
  return r;
};

describe('signature', () => {
  it('is HMAC-SHA256 of the body, hex (RFC 4231 test case 1)', () => {
    expect(signature('Hi There', '\x0b'.repeat(20))).toBe(
      'sha256=b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7',
    );
  });
});

describe('buildRequest', () => {
  it('webhook: the event as JSON, its id in a header, signed when a key is set', () => {
    const r = built({ type: 'webhook', address: 'https://hooks.example/x' }, 'k3y');
    expect(r.url).toBe('https://hooks.example/x');
    expect(r.headers[EVENT_ID_HEADER]).toBe('Run/train-1/2/RunFailed');
    expect(r.headers[SIGNATURE_HEADER]).toBe(signature(r.body, 'k3y'));
    expect(JSON.parse(r.body)).toMatchObject({
      id: 'Run/train-1/2/RunFailed',
      alert: 'on-failure',
      kind: 'run',
      name: 'train-1',
      event: 'RunFailed',
      attempt: 2,
      message: 'exit 3',
    });
    expect(r.body).not.toContain('k3y');
    expect(
      built({ type: 'webhook', address: 'https://hooks.example/x' }).headers[SIGNATURE_HEADER],
    ).toBeUndefined();
  });

  it('slack: {text}, to the URL the secret holds', () => {
    const r = built(
      { type: 'slack', secretRef: { name: 'SLACK_URL' } },
      'https://hooks.slack.example/T/B/s3cret',
    );
    expect(r.url).toBe('https://hooks.slack.example/T/B/s3cret');
    expect(JSON.parse(r.body)).toEqual({
      text: '[adventuretime] run/train-1 failed (attempt 2) — Error: exit 3',
    });
  });

  it('github: a commit status on the spec commit, the token as bearer, the API base configurable', () => {
    const spec: ProviderSpec = {
      type: 'github',
      address: 'https://github.com/lab/specs.git',
      apiUrl: 'http://127.0.0.1:9/api/v3/',
      secretRef: { name: 'GH' },
    };
    const r = built(spec, 'ghp_x');
    expect(r.url).toBe('http://127.0.0.1:9/api/v3/repos/lab/specs/statuses/c0ffee');
    expect(r.headers.Authorization).toBe('Bearer ghp_x');
    expect(JSON.parse(r.body)).toMatchObject({ state: 'failure', context: 'adventuretime/train-1' });
    const missing = buildRequest(spec, 'ghp_x', 'id', 'a', { ...d, specCommit: undefined });
    expect(missing).toMatchObject({
      final: true,
      error: 'run/train-1 has no spec commit to set a status on',
    });
  });
});

describe('send', () => {
  let server: Server;
  let base = '';
  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.url === '/hang') return; // never answers
        res.statusCode = Number(req.url!.slice(1));
        res.end('secret-in-body');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const req = (path: string): OutgoingRequest => ({ url: `${base}${path}`, headers: {}, body: '{}' });

  it('is done on a 2xx; retries 5xx, 429 and timeouts; gives up on other 4xx', async () => {
    expect(await send(req('/204'), 5000, undefined)).toBeUndefined();
    expect(await send(req('/500'), 5000, undefined)).toEqual({
      error: 'HTTP 500 Internal Server Error',
      final: false,
    });
    expect((await send(req('/429'), 5000, undefined))?.final).toBe(false);
    expect(await send(req('/404'), 5000, undefined)).toEqual({ error: 'HTTP 404 Not Found', final: true });
    expect(await send(req('/hang'), 200, undefined)).toEqual({
      error: 'no answer within 0.2s',
      final: false,
    });
  });

  it('never puts the secret in the error it returns', async () => {
    const r = await send({ url: 'not a url /s3cret-path', headers: {}, body: '' }, 1000, 's3cret-path');
    expect(r?.error).toBeDefined();
    expect(r!.error).not.toContain('s3cret-path');
  });
});
