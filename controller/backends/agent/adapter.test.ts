import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Backend as BackendObject } from '../../spec/schema.js';
import type { BackendContext } from '../types.js';
import { AgentBackend } from './adapter.js';

describe('the agent adapter', () => {
  let dir = '';
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('says when the Backend is loaded that an enrollment token shorter than 16 characters opens nothing', async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-agent-adapter-'));
    const lines: string[] = [];
    const closers: (() => unknown)[] = [];
    const ctx: BackendContext = {
      dataDir: dir,
      logger: pino({ level: 'info' }, { write: (l: string) => void lines.push(l) }),
      now: Date.now,
      code: { treeOf: async () => 't', payload: async () => Buffer.from(''), extractTo: async () => {} },
      ssh: () => {
        throw new Error('no ssh here');
      },
      secrets: { get: (name) => (name === 'AGENT_ENROLL' ? 'ab' : undefined), where: 'a test' },
      shared: (_key, make) => {
        const v = make();
        closers.push(() => v.close?.());
        return v;
      },
    };
    const spec = {
      apiVersion: 'adventuretime.dev/v1alpha1',
      kind: 'Backend',
      metadata: { name: 'desks' },
      spec: { type: 'agent', agent: { tokenSecret: 'AGENT_ENROLL' } },
    } as BackendObject;
    const backend = new AgentBackend(spec, ctx);
    await backend.close();
    for (const c of closers) await c();
    const log = lines.join('');
    expect(log).toContain(
      'the enrollment token in AGENT_ENROLL is 2 characters: at least 16 are needed, so no agent can enroll with it',
    );
    expect(log).not.toContain('"ab"');
  });
});
