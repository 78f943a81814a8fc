import { describe, expect, it } from 'vitest';
import type { AgentCapabilities } from '../../../runtime/agent/protocol.js';
import { globMatches, needOf, policyAllows, quantityGiB, selectorMatches, unfitBecause } from './match.js';

const cpuHost: AgentCapabilities = {
  hostname: 'h',
  cores: 8,
  ramGiB: 31.2,
  os: 'linux',
  node: 'v20',
  gpus: [],
};
const a100: AgentCapabilities = {
  ...cpuHost,
  cuda: '12.4',
  gpus: [
    { name: 'NVIDIA A100-SXM4-80GB', vramGiB: 80 },
    { name: 'NVIDIA A100-SXM4-80GB', vramGiB: 80 },
  ],
};

describe('agent matching', () => {
  it.each([
    ['a CPU run on a CPU host', {}, cpuHost, undefined],
    ['a GPU run needs CUDA', { resources: { gpus: 1 } }, cpuHost, 'has no CUDA'],
    [
      'requireCuda without GPUs needs CUDA too',
      { backendSelector: { constraints: { requireCuda: true } } },
      cpuHost,
      'has no CUDA',
    ],
    ['two A100s fit', { resources: { gpus: 2, gpuType: 'A100' } }, a100, undefined],
    ['three do not', { resources: { gpus: 3 } }, a100, 'has 2 fitting GPU(s), the run needs 3'],
    [
      'the type must match',
      { resources: { gpus: 1, gpuType: 'H100' } },
      a100,
      'has 0 fitting GPU(s), the run needs 1 of H100',
    ],
    ['any type is any', { resources: { gpus: 1, gpuType: 'H100|any' } }, a100, undefined],
    [
      'VRAM floor',
      { resources: { gpus: 1 }, backendSelector: { constraints: { minVramGiB: 90 } } },
      a100,
      'has 0 fitting GPU(s), the run needs 1 with ≥ 90 GiB',
    ],
    ['memory', { resources: { memory: '64Gi' } }, cpuHost, 'has 31.2 GiB of memory, the run needs 64'],
    ['cores', { resources: { cpus: 16 } }, cpuHost, 'has 8 cores, the run needs 16'],
  ] as const)('%s', (_t, spec, caps, why) => {
    expect(unfitBecause(needOf(spec as never), caps)).toBe(why);
  });

  it('reads Kubernetes quantities', () => {
    expect(quantityGiB('64Gi')).toBe(64);
    expect(quantityGiB('512Mi')).toBe(0.5);
    expect(quantityGiB('1Ti')).toBe(1024);
    expect(quantityGiB('nonsense')).toBeNaN();
  });

  it.each([
    ['sweep-*', 'sweep-lr-3', true],
    ['sweep-*', 'sweep-', true],
    ['sweep-*', 'ablation', false],
    ['sweep', 'sweep-1', false],
    ['*-1', 'sweep-1', true],
    ['*-1', 'sweep-12', false],
    ['a*b*c', 'a-x-b-y-c', true],
    ['a*b*c', 'a-x-b-y-c-d', false],
    ['a*b*c', 'acb', false],
    ['*b*b', 'abab', true],
    ['a**b', 'ab', true],
    ['*', '', true],
    ['', '', true],
    ['', 'a', false],
    ['a.b', 'axb', false], // a dot is literal
    ['a?c', 'abc', false], // so is a question mark
    ['a?c', 'a?c', true],
    ['x[1]', 'x[1]', true],
    ['x[1]', 'x1', false],
  ] as const)('glob %s against %s: %s', (glob, name, want) => {
    expect(globMatches(glob, name)).toBe(want);
  });

  it('matches a pattern of a thousand stars against a long name without backtracking for ever', () => {
    const name = 'fork-mid-2026-01-21-001'.repeat(10);
    expect(globMatches('*'.repeat(1000) + '!', name)).toBe(false);
    expect(globMatches('*'.repeat(1000) + '001', name)).toBe(true);
    expect(globMatches('*f'.repeat(500) + '!', name)).toBe(false);
  });

  it('applies the owner’s policy: run globs and labels, deny first', () => {
    const policy = {
      runs: ['sweep-*'],
      denyRuns: ['sweep-big-*'],
      labels: { team: 'vision' },
      denyLabels: { tier: 'low' },
    };
    expect(policyAllows(policy, 'sweep-1', { team: 'vision' })).toBe(true);
    expect(policyAllows(policy, 'sweep-big-1', { team: 'vision' })).toBe(false);
    expect(policyAllows(policy, 'other', { team: 'vision' })).toBe(false);
    expect(policyAllows(policy, 'sweep-1', {})).toBe(false);
    expect(policyAllows(policy, 'sweep-1', { team: 'vision', tier: 'low' })).toBe(false);
    expect(policyAllows(undefined, 'anything', {})).toBe(true);
  });

  it('matches a Backend’s selector against the agent’s labels', () => {
    expect(selectorMatches({ room: 'b12' }, { room: 'b12', os: 'x' })).toBe(true);
    expect(selectorMatches({ room: 'b12' }, { room: 'a1' })).toBe(false);
    expect(selectorMatches(undefined, {})).toBe(true);
  });
});
