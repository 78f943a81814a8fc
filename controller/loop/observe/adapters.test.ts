import pino from 'pino';
import { describe, expect, it } from 'vitest';
import {
  ONE_HOST_TRAITS,
  type Backend,
  type BackendContext,
  type BackendDescriptor,
} from '../../backends/types.js';
import type { Backend as BackendObject } from '../../spec/schema.js';
import { BackendAdapters } from './adapters.js';

const specOf = (name: string, type: string) =>
  ({
    apiVersion: 'adventuretime.dev/v1alpha1',
    kind: 'Backend',
    metadata: { name },
    spec: { type },
  }) as unknown as BackendObject;

/** An adapter that answers nothing: only its identity matters here. */
const idle = (name: string): Backend => ({
  name,
  type: 'lazy',
  submit: async () => [],
  find: async () => undefined,
  poll: async () => [],
  cancel: async () => undefined,
  logs: async function* () {},
});

describe('backend adapters made by a create that loads its adapter first (a promise)', () => {
  const lazy: BackendDescriptor = {
    type: 'lazy',
    needsConnection: false,
    traits: ONE_HOST_TRAITS,
    create: async (spec) => {
      await Promise.resolve(); // the import() of the adapter module
      return idle(spec.metadata.name);
    },
  };
  const broken: BackendDescriptor = {
    type: 'broken',
    needsConnection: false,
    traits: ONE_HOST_TRAITS,
    create: async () => {
      throw new Error("Cannot find module './adapter.js'");
    },
  };
  const adapters = () =>
    new BackendAdapters([lazy, broken], () => ({}) as BackendContext, pino({ enabled: false }));

  it('awaits it: the adapter is there and usable once sync returns', async () => {
    const a = adapters();
    await a.sync(new Map([['b1', { obj: specOf('b1', 'lazy'), gen: '1' }]]));
    expect(a.instance('b1')?.name).toBe('b1');
    expect(typeof a.instance('b1')?.poll).toBe('function');
    expect(a.infos()).toEqual([expect.objectContaining({ name: 'b1', usable: true })]);
    const again = await a.restart('b1');
    expect(again?.name).toBe('b1');
  });

  it('a create that rejects leaves that backend unusable, saying why, and the others working', async () => {
    const a = adapters();
    await a.sync(
      new Map([
        ['ok', { obj: specOf('ok', 'lazy'), gen: '1' }],
        ['bad', { obj: specOf('bad', 'broken'), gen: '1' }],
      ]),
    );
    expect(a.instance('bad')).toBeUndefined();
    expect(a.infos().find((i) => i.name === 'bad')).toMatchObject({
      usable: false,
      why: "cannot start adapter: Cannot find module './adapter.js'",
    });
    expect(a.usable().map(([n]) => n)).toEqual(['ok']);
  });
});
