import { describe, expect, it } from 'vitest';
import { parseTpuType } from './tpu-slice.js';

describe('parseTpuType: how Cloud TPU accelerator types count chips and hosts', () => {
  it.each([
    // [type, generation, chips, chips per host, hosts]
    ['v2-8', 'v2', 4, 4, 1],
    ['v3-32', 'v3', 16, 4, 4],
    ['v4-8', 'v4', 4, 4, 1],
    ['v4-16', 'v4', 8, 4, 2],
    ['v5p-128', 'v5p', 64, 4, 16],
    ['v5litepod-1', 'v5e', 1, 1, 1],
    ['v5litepod-8', 'v5e', 8, 8, 1],
    ['v5litepod-16', 'v5e', 16, 4, 4],
    ['V5E-4', 'v5e', 4, 4, 1],
    ['v6e-8', 'v6e', 8, 8, 1],
    ['v6e-256', 'v6e', 256, 4, 64],
  ] as const)('%s: %s, %i chips, %i a host, %i hosts', (type, generation, chips, chipsPerHost, hosts) => {
    expect(parseTpuType(type)).toEqual({ type: type.toLowerCase(), generation, chips, chipsPerHost, hosts });
  });

  it('keeps only the name of a type it cannot count', () => {
    expect(parseTpuType('v9x-64')).toEqual({ type: 'v9x-64', generation: 'v9x' });
    expect(parseTpuType('v4-3')).toEqual({ type: 'v4-3', generation: 'v4' });
    expect(parseTpuType('tpu')).toEqual({ type: 'tpu', generation: 'tpu' });
  });

  it('a Backend may say its chips per host', () => {
    expect(parseTpuType('v4-16', 8)).toMatchObject({ chips: 8, chipsPerHost: 8, hosts: 1 });
  });
});
