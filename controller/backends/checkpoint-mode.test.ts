import { describe, expect, it } from 'vitest';
import { SpecLoader } from '../spec/loader.js';
import type { Backend as BackendObject, RunSpec } from '../spec/schema.js';
import { modeFor, modeRefusal, stopSignalOf } from './checkpoint-mode.js';
import { ONE_HOST_TRAITS, type BackendTraits } from './types.js';

const multi: BackendTraits = {
  ...ONE_HOST_TRAITS,
  multiNode: true,
  checkpointModes: (spec) => [...(spec.cluster === 'nfs' ? ['shared' as const] : []), 'per-process'],
  howToOffer: { shared: 'declare the mount' },
};
const spec = (mode?: NonNullable<RunSpec['checkpoint']>['mode']): RunSpec =>
  mode ? { checkpoint: { mode } } : {};
const backend = (over: Partial<BackendObject['spec']> = {}): BackendObject['spec'] => ({
  type: 'volcano',
  ...over,
});

describe('the checkpoint mode a run gets', () => {
  it.each([
    ['auto takes the first offered', undefined, ['shared', 'per-process'], false, 'shared'],
    ['auto on a one-host backend', 'auto', ['per-process'], true, 'per-process'],
    ['a declared mode that is offered', 'per-process', ['shared', 'per-process'], false, 'per-process'],
    ['a declared mode that is not', 'store', ['shared', 'per-process'], false, undefined],
    ['shared on one host: its own dir is every process’s', 'shared', ['per-process'], true, 'per-process'],
    ['shared across hosts without a shared dir', 'shared', ['store', 'per-process'], false, undefined],
    ['store on one host', 'store', ['per-process'], true, undefined],
  ] as const)('%s', (_what, mode, offered, oneProcess, want) => {
    expect(modeFor(spec(mode), offered, oneProcess)).toBe(want);
  });

  it('says why a backend cannot take a declared mode, and how the Backend would offer it', () => {
    expect(modeRefusal(spec('shared'), multi, backend())).toBe(
      'offers no shared checkpoint dir (checkpoint.mode: shared): declare the mount',
    );
    expect(modeRefusal(spec('shared'), multi, backend({ cluster: 'nfs' }))).toBeUndefined();
    expect(modeRefusal(spec('store'), multi, backend())).toBe(
      'offers no checkpoints written straight to the object store (checkpoint.mode: store): a volcano backend offers per-process; choose one of those, or another backend',
    );
    expect(modeRefusal(spec(), multi, backend())).toBeUndefined();
  });

  it('stops with SIGTERM unless the run says otherwise', () => {
    expect(stopSignalOf({})).toBe('SIGTERM');
    expect(stopSignalOf({ policy: { stopSignal: 'SIGUSR1' } })).toBe('SIGUSR1');
  });
});

describe('the spec fields', () => {
  const diagnostics = (body: string) => {
    const l = new SpecLoader();
    const text = `apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: r\nspec:\n  command: x\n${body}`;
    l.loadFile('runs/r.yaml', new TextEncoder().encode(text), '1');
    return l.result().diagnostics;
  };
  it('takes the modes and signals it knows', () => {
    expect(diagnostics('  checkpoint: {mode: shared}\n  policy: {stopSignal: SIGUSR1}\n')).toEqual([]);
  });
  it.each([
    ['a misspelt mode', '  checkpoint:\n    mode: sharde\n', 'spec.checkpoint.mode', 8, /shared/],
    [
      'a signal the workload cannot be given',
      '  policy:\n    stopSignal: SIGKILL\n',
      'spec.policy.stopSignal',
      8,
      /SIGTERM/,
    ],
  ])('refuses %s at its line, with the values it takes', (_what, body, path, line, hint) => {
    const [d, ...rest] = diagnostics(body);
    expect(rest).toEqual([]);
    expect(d).toMatchObject({ file: 'runs/r.yaml', line, path, severity: 'error' });
    expect(`${d!.message} ${d!.hint ?? ''}`).toMatch(hint);
  });
});
