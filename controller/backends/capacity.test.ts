import { describe, expect, it } from 'vitest';
import { parseGres, parseSinfoCapacity } from './slurm/parse.js';
import { parseNvidiaSmi } from './remote/capacity.js';

describe('GRES and sinfo parsing', () => {
  it.each([
    ['gpu:2', { any: 2 }],
    ['gpu:h100:8(S:0-1)', { h100: 8 }],
    ['gpu:a100:1(IDX:0),shard:4', { a100: 1 }],
    ['gpu:a100:2,gpu:t4:1', { a100: 2, t4: 1 }],
    ['(null)', {}],
  ])('%s', (field, expected) => {
    expect(Object.fromEntries(parseGres(field))).toEqual(expected);
  });

  it('free GPUs per partition and type; drained nodes count as none free', () => {
    const text = [
      'a1|gpu*|gpu:h100:8|gpu:h100:3(IDX:0-2)|mix|',
      'a2|gpu*|gpu:h100:8|gpu:h100:0|idle|',
      'a3|gpu*|gpu:h100:8|gpu:h100:0|drain|',
      'b1|preempt|gpu:a100:4|gpu:a100:4(IDX:0-3)|alloc|',
    ].join('\n');
    expect(parseSinfoCapacity(text)).toEqual([
      { partition: 'gpu', gpuType: 'h100', totalGpus: 24, freeGpus: 13 },
      { partition: 'preempt', gpuType: 'a100', totalGpus: 4, freeGpus: 0 },
    ]);
  });
});

describe('nvidia-smi parsing', () => {
  it('a GPU with 100 MiB or more in use is busy', () => {
    const text =
      '0, NVIDIA H100 80GB HBM3, 81559, 4\n1, NVIDIA H100 80GB HBM3, 81559, 70123\n2, NVIDIA H100 80GB HBM3, 81559, 99\n';
    expect(parseNvidiaSmi(text).map((g) => [g.index, g.busy])).toEqual([
      [0, false],
      [1, true],
      [2, false],
    ]);
  });
});
