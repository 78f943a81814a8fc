import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BACKENDS, descriptorFor } from '../backends/registry.js';
import type { Capacity } from '../backends/types.js';
import type { Backend, RunSpec } from '../spec/schema.js';
import type { Attempt } from '../status/types.js';
import { EndClass } from '../status/types.js';
import { freeGpus, solve, type BackendInfo } from './solver.js';

const T0 = Date.parse('2026-11-22T12:00:00Z');
/** A backend of the fleet, with its type's traits from the real descriptor. */
const b = (
  name: string,
  spec: Partial<Backend['spec']> = {},
  extra: Partial<BackendInfo> = {},
): BackendInfo => {
  const full: Backend['spec'] = { type: 'slurm', ...spec };
  return { name, spec: full, traits: descriptorFor(full.type)!.traits, usable: true, ...extra };
};
const slurmCap = (free: number, total = 16, gpuType = 'h100'): Capacity => ({
  freeGpus: free,
  partitions: [{ partition: 'gpu', gpuType, totalGpus: total, freeGpus: free }],
});
const ended = (n: number, backend: string, cls: EndClass, agoSec: number): Attempt => ({
  n,
  backend,
  jobName: `adv-r-${n}`,
  phase: cls === EndClass.Preempted ? 'Preempted' : 'Failed',
  class: cls,
  specCommit: 'c',
  startedAt: new Date(T0 - agoSec * 1000 - 60_000).toISOString(),
  finishedAt: new Date(T0 - agoSec * 1000).toISOString(),
});

const H100 = { gpus: 8, gpuTypes: ['H100'], vramGiB: 80, ramGiB: 1024, nodes: 4, cuda: true };
const A100 = { gpus: 4, gpuTypes: ['A100'], vramGiB: 40, ramGiB: 512, nodes: 8, cuda: true };
const fleet = [
  b('slurm-a', { priority: 20, cluster: 'campus', capabilities: H100 }, { capacity: slurmCap(0) }),
  b(
    'slurm-b',
    { priority: 10, cluster: 'partner', capabilities: A100 },
    { capacity: slurmCap(16, 32, 'a100') },
  ),
  b('box', {
    type: 'ssh',
    priority: 5,
    capabilities: { gpus: 2, gpuTypes: ['RTX4090'], vramGiB: 24, cuda: true },
  }),
  b('local', { type: 'local', priority: -10, maxConcurrent: 2, capabilities: { gpus: 0, cuda: false } }),
];

type Case = [string, RunSpec, readonly BackendInfo[], string | undefined, RegExp, Attempt[]?];
const run = (over: Partial<RunSpec>): RunSpec => ({ command: ['train'], ...over });

describe('solve', () => {
  it.each<Case>([
    [
      'priority order; a full cluster is passed over with the count',
      run({ resources: { gpus: 4 } }),
      fleet,
      'slurm-b',
      /^slurm-a: no free GPUs \(0 free, run needs 4\); slurm-b: chosen, 16 free$/,
    ],
    [
      'gpuType alternatives filter by what each backend declares',
      run({ resources: { gpus: 1, gpuType: 'A100' } }),
      fleet,
      'slurm-b',
      /slurm-a: has h100 GPUs, run accepts A100.*slurm-b: chosen/,
    ],
    [
      '"any" accepts every type',
      run({ resources: { gpus: 1, gpuType: 'B200|any' } }),
      fleet,
      'slurm-b',
      /slurm-b: chosen/,
    ],
    [
      'minVramGiB',
      run({ resources: { gpus: 1 }, backendSelector: { constraints: { minVramGiB: 48 } } }),
      fleet.slice(1),
      undefined,
      /slurm-b: has 40 GiB per GPU, run needs 48; box: has 24 GiB per GPU, run needs 48; local: has 0 GPUs per node, run needs 1$/,
    ],
    [
      'minRamGiB',
      run({ backendSelector: { constraints: { minRamGiB: 600 } } }),
      fleet,
      'slurm-a',
      /slurm-a: chosen/,
    ],
    [
      'requireCuda skips a CPU box',
      run({ backendSelector: { order: ['local', 'box'], constraints: { requireCuda: true } } }),
      fleet,
      'box',
      /^local: has no CUDA; box: chosen$/,
    ],
    [
      'preferCuda puts CUDA first without excluding the rest',
      run({ backendSelector: { order: ['local', 'box'], constraints: { preferCuda: true } } }),
      fleet,
      'box',
      /^box: chosen$/,
    ],
    [
      'clusters',
      run({ backendSelector: { constraints: { clusters: ['partner'] } } }),
      fleet,
      'slurm-b',
      /slurm-a: cluster campus is not one of partner/,
    ],
    [
      'nodes: a single host cannot take a two-node run',
      run({ resources: { nodes: 2 }, backendSelector: { order: ['local', 'slurm-b'] } }),
      fleet,
      'slurm-b',
      /^local: spans 1 node, run needs 2; slurm-b: chosen$/,
    ],
    [
      'nodes beyond what a cluster declares',
      run({ resources: { nodes: 6 }, backendSelector: { order: ['slurm-a'] } }),
      fleet,
      undefined,
      /slurm-a: spans 4 nodes, run needs 6/,
    ],
    [
      'allowed and forbidden',
      run({ backendSelector: { allowed: ['slurm-a', 'local'], forbidden: ['slurm-a'] } }),
      fleet,
      'local',
      /^local: chosen$/,
    ],
    [
      'an unknown name in order is said, not ignored',
      run({ backendSelector: { order: ['nope', 'local'] } }),
      fleet,
      'local',
      /^nope: no such Backend; local: chosen$/,
    ],
    [
      'an unusable adapter',
      run({ backendSelector: { order: ['tpu', 'local'] } }),
      [...fleet, b('tpu', { type: 'gcp-tpu' }, { usable: false, why: 'no adapter for type gcp-tpu' })],
      'local',
      /^tpu: no adapter for type gcp-tpu; local: chosen$/,
    ],
    [
      'preemptible capacity only for runs that allow it',
      run({ backendSelector: { order: ['spot', 'local'] } }),
      [b('spot', { type: 'ssh', capabilities: { preemptible: true } }), b('local', { type: 'local' })],
      'local',
      /spot: preemptible capacity \(set policy.preemptible: true to allow\)/,
    ],
    [
      'preemptible allowed',
      run({ policy: { preemptible: true }, backendSelector: { order: ['spot', 'local'] } }),
      [b('spot', { type: 'ssh', capabilities: { preemptible: true } }), b('local', { type: 'local' })],
      'spot',
      /^spot: chosen$/,
    ],
    [
      'maxConcurrent counts live attempts',
      run({ backendSelector: { order: ['local', 'box'] } }),
      [b('local', { type: 'local', maxConcurrent: 2 }, { active: 2 }), b('box', { type: 'ssh' })],
      'box',
      /^local: full \(2 of 2 running\); box: chosen$/,
    ],
    [
      'nothing free: queue on the SLURM backend with the most GPUs',
      run({ resources: { gpus: 4 } }),
      [
        b('small', { capabilities: { gpus: 4 } }, { capacity: slurmCap(0, 8) }),
        b('large', { capabilities: { gpus: 4 } }, { capacity: slurmCap(0, 64) }),
        b(
          'box',
          { type: 'ssh', capabilities: { gpus: 4 } },
          {
            capacity: {
              freeGpus: 0,
              gpus: [0, 1, 2, 3].map((i) => ({
                index: i,
                name: 'NVIDIA A100',
                memoryTotalMiB: 81920,
                memoryUsedMiB: 9000,
                busy: true,
              })),
            },
          },
        ),
      ],
      'large',
      /^box: no free GPUs \(0 free, run needs 4\); large: no free GPUs \(0 free, run needs 4\); queued there \(the most capacity: 64 GPUs\); small: no free GPUs \(0 free, run needs 4\)$/,
    ],
    [
      'nothing free and no scheduler to queue on: wait',
      run({ backendSelector: { order: ['local'] } }),
      [b('local', { type: 'local', maxConcurrent: 1 }, { active: 1 })],
      undefined,
      /^local: full \(1 of 1 running\)$/,
    ],
    [
      'a backend that just preempted this run goes after the others (eager failover)',
      run({ backendSelector: { order: ['slurm-local', 'ssh-local'] } }),
      [b('slurm-local'), b('ssh-local', { type: 'ssh' })],
      'ssh-local',
      /^slurm-local: tried after the others: cooling down: attempt 1 was preempted 30s ago; ssh-local: chosen$/,
      [ended(1, 'slurm-local', EndClass.Preempted, 30)],
    ],
    [
      'after the cool-down it is first again',
      run({ backendSelector: { order: ['slurm-local', 'ssh-local'] } }),
      [b('slurm-local'), b('ssh-local', { type: 'ssh' })],
      'slurm-local',
      /^slurm-local: chosen$/,
      [ended(1, 'slurm-local', EndClass.Preempted, 601)],
    ],
    [
      'cooling down, but the only candidate: used, and said',
      run({ backendSelector: { order: ['slurm-local'] } }),
      [b('slurm-local')],
      'slurm-local',
      /^slurm-local: chosen \(cooling down: attempt 1 was preempted 30s ago\)$/,
      [ended(1, 'slurm-local', EndClass.Preempted, 30)],
    ],
    [
      'a cancelled attempt does not cool a backend down',
      run({ backendSelector: { order: ['slurm-local', 'ssh-local'] } }),
      [b('slurm-local'), b('ssh-local', { type: 'ssh' })],
      'slurm-local',
      /^slurm-local: chosen$/,
      [ended(1, 'slurm-local', EndClass.Cancelled, 30)],
    ],
    [
      'a backend where setup failed goes after the others, past the cool-down: a host lacks what the step needs',
      run({ backendSelector: { order: ['slurm-local', 'ssh-local'] } }),
      [b('slurm-local'), b('ssh-local', { type: 'ssh' })],
      'ssh-local',
      /^slurm-local: tried after the others: setup failed here \(attempt 1\); ssh-local: chosen$/,
      [ended(1, 'slurm-local', EndClass.SetupFailed, 3600)],
    ],
    [
      'setup failed on every backend: the order is theirs again',
      run({ backendSelector: { order: ['slurm-local', 'ssh-local'] } }),
      [b('slurm-local'), b('ssh-local', { type: 'ssh' })],
      'slurm-local',
      /^slurm-local: chosen \(setup failed here \(attempt 1\)\)/,
      [
        ended(1, 'slurm-local', EndClass.SetupFailed, 3600),
        ended(2, 'ssh-local', EndClass.SetupFailed, 1800),
      ],
    ],
    [
      'a degraded backend goes after the healthy ones',
      run({}),
      [b('a', { priority: 9 }, { degraded: '3 runs failed here in a row' }), b('b')],
      'b',
      /^a: tried after the others: degraded \(3 runs failed here in a row\); b: chosen$/,
    ],
    [
      'GPU types of a host come from nvidia-smi names',
      run({ resources: { gpus: 1, gpuType: 'H100' }, backendSelector: { order: ['box'] } }),
      [
        b(
          'box',
          { type: 'ssh' },
          {
            capacity: {
              freeGpus: 1,
              gpus: [
                {
                  index: 0,
                  name: 'NVIDIA H100 80GB HBM3',
                  memoryTotalMiB: 81559,
                  memoryUsedMiB: 0,
                  busy: false,
                },
              ],
            },
          },
        ),
      ],
      'box',
      /^box: chosen, 1 free$/,
    ],
    [
      'GPUs reserved earlier in the same pass are not free any more',
      run({ resources: { gpus: 8 }, backendSelector: { order: ['slurm-b', 'slurm-a'] } }),
      [
        b('slurm-a', { capabilities: H100 }, { capacity: slurmCap(8) }),
        b('slurm-b', { capabilities: A100 }, { capacity: slurmCap(16, 32, 'a100'), reservedGpus: 12 }),
      ],
      'slurm-a',
      /^slurm-b: has 4 GPUs per node, run needs 8; slurm-a: chosen, 8 free$/,
    ],
  ])('%s', (_title, spec, backends, expected, why, history = []) => {
    const d = solve(spec, backends, history, T0);
    expect(d.backend).toBe(expected);
    expect(d.why).toMatch(why);
  });

  describe('checkpoint modes', () => {
    const kube = (name: string, volcano: Record<string, unknown> = {}, priority = 0) =>
      b(name, { type: 'volcano', priority, volcano: { namespace: 'ml', image: 'i', ...volcano } });
    const tpu = (name: string, gcpTpu: Record<string, unknown> = {}) =>
      b(name, {
        type: 'gcp-tpu',
        gcpTpu: { project: 'p-12345', zone: 'us-central2-b', acceleratorType: 'v4-16', ...gcpTpu },
      });
    const multi = (mode?: 'shared' | 'store' | 'per-process') =>
      run({ resources: { nodes: 2 }, ...(mode ? { checkpoint: { mode } } : {}) });

    it('passes over a backend that offers no shared dir, saying how to declare one', () => {
      const d = solve(
        multi('shared'),
        [kube('k8s', {}, 10), kube('k8s-rwx', { checkpointVolume: 'ckpt' })],
        [],
        T0,
      );
      expect(d.backend).toBe('k8s-rwx');
      expect(d.why).toBe(
        'k8s: offers no shared checkpoint dir (checkpoint.mode: shared): declare volcano.checkpointVolume (a ReadWriteMany PersistentVolumeClaim every pod mounts); k8s-rwx: chosen',
      );
    });

    it('waits, with the why, when no backend offers the mode', () => {
      const d = solve(multi('store'), [b('slurm-a')], [], T0);
      expect(d).toEqual({
        why: 'slurm-a: offers no checkpoints written straight to the object store (checkpoint.mode: store): a slurm backend offers shared, per-process; choose one of those, or another backend',
        wait: 'NoBackend',
      });
      const t = solve(multi('shared'), [tpu('tpu')], [], T0);
      expect(t.why).toMatch(
        /^tpu: offers no shared checkpoint dir \(checkpoint.mode: shared\): declare gcpTpu.sharedMount/,
      );
      expect(solve(multi('shared'), [tpu('tpu', { sharedMount: '/mnt/ckpt' })], [], T0).backend).toBe('tpu');
    });

    it('auto and per-process go anywhere; shared goes to a one-host backend (one process: its dir is all)', () => {
      for (const be of [kube('k8s'), tpu('tpu'), b('slurm-a')])
        for (const mode of [undefined, 'per-process'] as const)
          expect(solve(multi(mode), [be], [], T0).backend).toBe(be.name);
      const local = b('local', { type: 'local' });
      expect(solve(run({ checkpoint: { mode: 'shared' } }), [local], [], T0).backend).toBe('local');
      expect(solve(run({ checkpoint: { mode: 'store' } }), [local], [], T0).why).toMatch(
        /^local: offers no checkpoints written straight to the object store/,
      );
    });
  });

  describe('TPU type and chips', () => {
    const tpu = (name: string, acceleratorType: string, chips?: number) =>
      b(name, {
        type: 'gcp-tpu',
        gcpTpu: {
          project: 'p-12345',
          zone: 'us-central2-b',
          acceleratorType,
          ...(chips !== undefined ? { chips } : {}),
        },
      });
    const slices = [tpu('v4-32', 'v4-32'), tpu('v4-16', 'v4-16'), tpu('v5e-8', 'v5litepod-8')];
    it.each<[string, RunSpec['resources'], readonly BackendInfo[], string | undefined, RegExp]>([
      [
        'v5litepod-8 never lands on v4-32: another generation',
        { tpuType: 'v5litepod-8' },
        [tpu('big', 'v4-32')],
        undefined,
        /^big: has v4-32 \(TPU v4, 16 chips\), run needs v5litepod-8 \(TPU v5e, 8 chips\)$/,
      ],
      [
        'the type picks its slice among several',
        { tpuType: 'v5litepod-8', tpus: 8 },
        slices,
        'v5e-8',
        /^v4-16: has v4-16 \(TPU v4, 8 chips\), run needs v5litepod-8 \(TPU v5e, 8 chips\); v4-32: .*; v5e-8: chosen$/,
      ],
      [
        'same generation, other size: v4 counts cores, 2 a chip',
        { tpuType: 'v4-16' },
        [tpu('a', 'v4-32'), tpu('b', 'v4-16')],
        'b',
        /^a: has v4-32 \(TPU v4, 16 chips\), run needs v4-16 \(TPU v4, 8 chips\); b: chosen$/,
      ],
      ['v5e names an alias of v5litepod', { tpuType: 'v5e-8' }, slices, 'v5e-8', /v5e-8: chosen$/],
      [
        'chips per host: a v4 host has 4, a v5litepod-8 host 8',
        { tpus: 8 },
        slices,
        'v5e-8',
        /^v4-16: has 4 TPU chips per host \(v4-16 \(TPU v4, 8 chips\)\), run needs 8; v4-32: has 4 TPU chips per host .*; v5e-8: chosen$/,
      ],
      [
        "hosts: the slice's hosts all run the job",
        { tpus: 4, nodes: 4 },
        slices,
        'v4-32',
        /^v4-16: has 2 TPU hosts \(v4-16 \(TPU v4, 8 chips\)\), run needs 4; v4-32: chosen/,
      ],
      [
        'gcpTpu.chips overrides the chips per host',
        { tpus: 8, tpuType: 'v4-16' },
        [tpu('a', 'v4-16'), tpu('b', 'v4-16', 8)],
        'b',
        /^a: has 4 TPU chips per host \(v4-16 \(TPU v4, 8 chips\)\), run needs 8; b: chosen$/,
      ],
      [
        'a type not known here matches only itself',
        { tpuType: 'v9x-64' },
        [tpu('a', 'v4-16'), tpu('b', 'v9x-64')],
        'b',
        /^a: has v4-16 \(TPU v4, 8 chips\), run needs v9x-64 \(TPU v9x\); b: chosen$/,
      ],
      [
        'a TPU run never lands on a GPU backend',
        { tpuType: 'v5litepod-8' },
        [b('slurm-a'), tpu('v5e-8', 'v5litepod-8')],
        'v5e-8',
        /^slurm-a: has no TPUs \(type slurm\); v5e-8: chosen$/,
      ],
    ])('%s', (_title, resources, backends, expected, why) => {
      const d = solve(run({ resources: resources ?? {} }), backends, [], T0);
      expect(d.backend).toBe(expected);
      expect(d.why).toMatch(why);
    });
  });

  describe('GPU types, from each descriptor (traits.gpuTypes)', () => {
    const vast = (name: string, vastai: Record<string, unknown> = {}, caps = {}) =>
      b(name, { type: 'vastai', vastai: { apiKeySecret: 'VAST_KEY', ...vastai }, capabilities: caps });
    const kube = (name: string, nodeSelector?: Record<string, string>, caps = {}) =>
      b(name, {
        type: 'volcano',
        volcano: { namespace: 'ml', image: 'i', ...(nodeSelector ? { nodeSelector } : {}) },
        capabilities: caps,
      });
    const agent = (name: string, caps = {}) =>
      b(name, { type: 'agent', agent: { tokenSecret: 'AGENT_TOKEN' }, capabilities: caps });
    const slurm = (name: string, slurmSettings: Record<string, unknown>) =>
      b(name, { type: 'slurm', slurm: slurmSettings } as Partial<Backend['spec']>);
    it.each<[string, string, readonly BackendInfo[], string | undefined, RegExp]>([
      [
        "slurm: a partition's gpuType",
        'A100',
        [
          slurm('a', { partitions: [{ name: 'gpu', gpuType: 'h100' }] }),
          slurm('b', { partitions: [{ name: 'gpu', gpuType: 'a100' }] }),
        ],
        'b',
        /^a: has h100 GPUs, run accepts A100; b: chosen$/,
      ],
      [
        'slurm: a type gresMapping maps (default is not a type)',
        'L40S',
        [slurm('a', { gresMapping: { default: 'gpu' } }), slurm('b', { gresMapping: { L40S: 'gpu:l40s' } })],
        'b',
        /^a: declares no GPU types \(capabilities.gpuTypes\), run accepts L40S; b: chosen$/,
      ],
      [
        'vastai: gpuName limits the rentals, spelled as Vast spells it',
        'RTX4090',
        [vast('a', { gpuName: 'H100_SXM' }), vast('b', { gpuName: 'RTX_4090' })],
        'b',
        /^a: has h100_sxm\/h100 sxm GPUs, run accepts RTX4090; b: chosen$/,
      ],
      [
        'vastai: a family name covers the names Vast lists for it',
        'RTX_A6000',
        [vast('a', { gpuName: 'A6000' })],
        'a',
        /^a: chosen$/,
      ],
      [
        'vastai: without gpuName the marketplace rents what the run names',
        'H200',
        [vast('a')],
        'a',
        /^a: chosen$/,
      ],
      [
        'vastai: capabilities.gpuTypes limits it too',
        'H200',
        [vast('a', {}, { gpuTypes: ['H100'] }), vast('b')],
        'b',
        /^a: has h100 GPUs, run accepts H200; b: chosen$/,
      ],
      [
        'volcano: the GPU product a node selector pins',
        'H100',
        [
          kube('a', { 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB' }),
          kube('b', { 'cloud.google.com/gke-accelerator': 'nvidia-h100-80gb' }),
        ],
        'b',
        /^a: has nvidia-a100-sxm4-80gb GPUs, run accepts H100; b: chosen$/,
      ],
      [
        'volcano: other node labels name no GPU type',
        'H100',
        [
          kube('a', { 'node.kubernetes.io/instance-type': 'h100-box' }),
          kube('b', undefined, { gpuTypes: ['H100'] }),
        ],
        'b',
        /^a: declares no GPU types \(capabilities.gpuTypes\), run accepts H100; b: chosen$/,
      ],
      [
        'agent: its capabilities',
        'H100',
        [agent('a', { gpuTypes: ['RTX4090'] }), agent('b', { gpuTypes: ['H100'] })],
        'b',
        /^a: has rtx4090 GPUs, run accepts H100; b: chosen$/,
      ],
      [
        'ssh: its capabilities',
        '4090',
        [
          b('a', { type: 'ssh', capabilities: { gpuTypes: ['A100'] } }),
          b('b', { type: 'ssh', capabilities: { gpuTypes: ['RTX 4090'] } }),
        ],
        'b',
        /^a: has a100 GPUs, run accepts 4090; b: chosen$/,
      ],
    ])('%s', (_title, gpuType, backends, expected, why) => {
      const d = solve(run({ resources: { gpus: 1, gpuType } }), backends, [], T0);
      expect(d.backend).toBe(expected);
      expect(d.why).toMatch(why);
    });
  });

  it("never reads a backend type's own settings: its descriptor's traits say what it offers", () => {
    const source = readFileSync(new URL('./solver.ts', import.meta.url), 'utf8');
    const blocks = BACKENDS.flatMap((d) => (d.settings ? [d.settings.block] : []));
    expect(blocks).toContain('slurm');
    for (const block of blocks) expect(source).not.toMatch(new RegExp(`spec\\??\\.${block}\\b`));
  });

  it('says when no backend is defined that the selector allows', () => {
    expect(solve(run({ backendSelector: { allowed: ['x'] } }), fleet, [], T0)).toEqual({
      why: 'no backend is defined that the selector allows',
      wait: 'NoBackend',
    });
  });

  it('counts free GPUs per partition, of acceptable types, and cannot tell without nvidia-smi', () => {
    const cap: Capacity = {
      freeGpus: 6,
      partitions: [
        { partition: 'gpu', gpuType: 'h100', totalGpus: 8, freeGpus: 2 },
        { partition: 'gpu', gpuType: 'a100', totalGpus: 8, freeGpus: 4 },
        { partition: 'debug', gpuType: 'a100', totalGpus: 8, freeGpus: 6 },
      ],
    };
    expect(freeGpus(cap)).toBe(6);
    expect(freeGpus(cap, ['H100'])).toBe(2);
    expect(freeGpus(cap, ['V100'])).toBe(0);
    expect(freeGpus({ freeGpus: 0, gpus: [], note: 'nvidia-smi is not available' })).toBeUndefined();
    expect(freeGpus(undefined)).toBeUndefined();
  });

  describe('policy.optimize', () => {
    // Two backends at the same price; vast-a preempted 6 of 12 one-hour attempts in the history.
    const rec = { attempts: 12, preemptions: 6, hours: 12, startupSec: 120 };
    const pair = [
      b('vast-a', { type: 'ssh', priority: 10, capabilities: { costPerHour: 2 } }, { record: rec }),
      b('vast-b', { type: 'ssh', priority: 0, capabilities: { costPerHour: 2 } }),
    ];
    const withPolicy = (optimize: 'order' | 'cost' | 'time', extra: Partial<RunSpec> = {}) =>
      run({ policy: { optimize, checkpointIntervalSec: 3600 }, ...extra });

    it('order (the default) keeps the priority order whatever the history says', () => {
      expect(solve(withPolicy('order'), pair, [], T0).backend).toBe('vast-a');
      expect(solve(run({}), pair, [], T0).backend).toBe('vast-a');
    });

    it('cost picks the backend that preempts less at the same price, and says why', () => {
      const d = solve(withPolicy('cost'), pair, [], T0);
      expect(d.backend).toBe('vast-b');
      // Per hour of work (no step rate yet): vast-b $2, vast-a 2 × (1 + 0.5/h × (0.5 h + 2 min)).
      expect(d.why).toBe(
        'vast-b: chosen (optimize: cost) — expected $2.00/h of work vs vast-a $2.53/h of work (vast-a preempted 0.5×/h over 12 attempts)',
      );
    });

    it('time ranks by expected hours; with the run length known the figures are totals', () => {
      // The run's own attempt measured 100 steps in 1000 s: 900 steps left = 2.5 h of work.
      const own: Attempt = {
        ...ended(1, 'vast-b', EndClass.Infrastructure, 3600 * 24),
        startStep: 0,
        lastStep: 100,
      };
      own.lastStepAt = new Date(Date.parse(own.startedAt!) + 1000_000).toISOString();
      own.finishedAt = own.lastStepAt;
      const d = solve(withPolicy('time', { totalSteps: 1000 }), pair, [own], T0);
      expect(d.backend).toBe('vast-b');
      expect(d.why).toMatch(/^vast-b: chosen \(optimize: time\) — expected 2\.5 h vs vast-a 3\.\d h/);
    });

    it('a cheaper backend wins on cost even if it preempts; an unpriced one goes last', () => {
      const cheap = b('cheap', { type: 'ssh', capabilities: { costPerHour: 1 } }, { record: rec });
      const free = b('unpriced', { type: 'ssh', priority: 50 });
      const d = solve(withPolicy('cost'), [free, ...pair, cheap], [], T0);
      expect(d.backend).toBe('cheap');
      expect(d.why).toContain('unpriced no price');
    });

    it('a backend without costPerHour is ranked at the price it billed before, and says so', () => {
      const vast = (name: string, gpuHourPrice: number, r = {}) =>
        b(
          name,
          { type: 'ssh' },
          { record: { attempts: 4, preemptions: 0, hours: 4, startupSec: 0, gpuHourPrice, ...r } },
        );
      const d = solve(
        withPolicy('cost', { resources: { gpus: 2 } }),
        [vast('vast-a', 1), vast('vast-b', 0.8)],
        [],
        T0,
      );
      expect(d.backend).toBe('vast-b');
      expect(d.why).toBe(
        'vast-b: chosen (optimize: cost) — expected $1.60/h of work (at its recorded price) vs vast-a $2.00/h of work (at its recorded price)',
      );
    });

    it('a backend that cannot start now gives way to the next in the ranking', () => {
      const full = [
        b('vast-b', { type: 'ssh', capabilities: { costPerHour: 2 }, maxConcurrent: 1 }, { active: 1 }),
        pair[0]!,
      ];
      const d = solve(withPolicy('cost'), full, [], T0);
      expect(d.backend).toBe('vast-a');
      expect(d.why).toContain('vast-b: full (1 of 1 running)');
    });
  });
});
