import { describe, expect, it } from 'vitest';
import { gpuTypeAlternatives, offerQuery, offerQueryBody, vastGpuNames } from './query.js';

describe('vastGpuNames', () => {
  it.each([
    ['H100', ['H100 SXM', 'H100 PCIE', 'H100 NVL']],
    ['h100', ['H100 SXM', 'H100 PCIE', 'H100 NVL']],
    ['A100', ['A100 SXM4', 'A100 PCIE', 'A100X', 'A100 SXM']],
    ['RTX4090', ['RTX 4090']],
    ['4090', ['RTX 4090']],
    ['RTX_4090', ['RTX 4090']],
    ['rtx-4090', ['RTX 4090']],
    ['L40S', ['L40S']],
    ['L40', ['L40']],
    ['A6000', ['RTX A6000']],
    ['RTX_A6000', ['RTX A6000']],
    ['V100', ['Tesla V100']],
    // Unknown names pass through as Vast spells them (underscores are spaces, as in the CLI).
    ['RTX_3060', ['RTX 3060']],
    ['RTX PRO 6000', ['RTX PRO 6000']],
    ['MI300X', ['MI300X']],
  ])('%s → %j', (type, names) => {
    expect(vastGpuNames(type)).toEqual(names);
  });
});

describe('gpuTypeAlternatives', () => {
  it.each([
    [undefined, undefined],
    ['', undefined],
    ['any', undefined],
    ['H100|any', undefined],
    [
      'H100|A100',
      [
        ['H100 SXM', 'H100 PCIE', 'H100 NVL'],
        ['A100 SXM4', 'A100 PCIE', 'A100X', 'A100 SXM'],
      ],
    ],
    [
      ['4090', 'L40S'],
      [['RTX 4090'], ['L40S']],
    ],
  ] as const)('%j → %j', (gpuType, alts) => {
    expect(gpuTypeAlternatives(gpuType)).toEqual(alts);
  });
});

describe('offerQuery', () => {
  const always = {
    rentable: { eq: true },
    rented: { eq: false },
    external: { eq: false },
    verified: { eq: true },
    reliability: { gte: 0.98 },
  };

  it('asks for rentable, verified, reliable machines, cheapest first, on demand', () => {
    expect(offerQuery({})).toEqual({
      filters: always,
      order: [['dph_total', 'asc']],
      type: 'on-demand',
      limit: 16,
    });
  });

  it.each([
    ['gpus per node', { gpus: 8 }, { num_gpus: { eq: 8 } }],
    ['no GPU count', { gpus: 0 }, {}],
    [
      'GPU types',
      { gpuType: 'H100|RTX4090' },
      { gpu_name: { in: ['H100 SXM', 'H100 PCIE', 'H100 NVL', 'RTX 4090'] } },
    ],
    ['any GPU type', { gpuType: 'A100|any' }, {}],
    ['duplicate types once', { gpuType: 'A6000|RTX_A6000' }, { gpu_name: { in: ['RTX A6000'] } }],
    // GiB × 1000 MB, the CLI's reading: a 24 GiB floor keeps an RTX 4090 (24564 MB).
    ['VRAM floor', { minVramGiB: 24 }, { gpu_ram: { gte: 24000 } }],
    ['fractional VRAM', { minVramGiB: 79.5 }, { gpu_ram: { gte: 79500 } }],
    ['host RAM floor', { minRamGiB: 64 }, { cpu_ram: { gte: 64000 } }],
    ['reliability floor', { minReliability: 0.995 }, { reliability: { gte: 0.995 } }],
    ['disk', { diskGB: 100 }, { disk_space: { gte: 100 } }],
    ['CUDA', { minCuda: 12.1 }, { cuda_max_good: { gte: 12.1 } }],
    ['price cap', { maxDollarsPerHour: 2.5 }, { dph_total: { lte: 2.5 } }],
    ['price cap of 0 is a cap', { maxDollarsPerHour: 0 }, { dph_total: { lte: 0 } }],
  ] as const)('%s', (_what, needs, extra) => {
    expect(offerQuery(needs).filters).toEqual({ ...always, ...extra });
  });

  it('may take unverified machines', () => {
    expect(offerQuery({ verifiedOnly: false }).filters).not.toHaveProperty('verified');
  });

  it('prices the disk it asks for, searches bids for interruptible runs, and honours a limit', () => {
    const q = offerQuery({ diskGB: 80, interruptible: true, limit: 3 });
    expect(q).toMatchObject({ type: 'bid', limit: 3, allocatedStorage: 80 });
  });
});

describe('offerQueryBody', () => {
  it('is the wire form of POST /api/v0/bundles/: filters beside order, type, limit, allocated_storage', () => {
    const body = offerQueryBody(offerQuery({ gpus: 8, gpuType: 'H100', minVramGiB: 80, diskGB: 5 }));
    expect(body).toEqual({
      rentable: { eq: true },
      rented: { eq: false },
      external: { eq: false },
      verified: { eq: true },
      num_gpus: { eq: 8 },
      gpu_name: { in: ['H100 SXM', 'H100 PCIE', 'H100 NVL'] },
      gpu_ram: { gte: 80000 },
      reliability: { gte: 0.98 },
      disk_space: { gte: 5 },
      order: [['dph_total', 'asc']],
      type: 'on-demand',
      limit: 16,
      allocated_storage: 5,
    });
  });

  it('defaults the type to on-demand', () => {
    expect(offerQueryBody({ filters: {} })).toEqual({ type: 'on-demand' });
  });
});
