import { describe, expect, it } from 'vitest';
import {
  classifyGcloudError,
  encodeDictFlag,
  GcloudError,
  GcloudTpu,
  parseGcloudError,
  TpuAlreadyExistsError,
  TpuCapacityError,
  TpuQuotaError,
  type GcloudResult,
  type GcloudRunner,
} from './gcloud.js';

// stderr as gcloud 528 printed it against the fake TPU API (test/gcp-tpu-gcloud.test.ts).
const NOT_FOUND = `ERROR: (gcloud.compute.tpus.tpu-vm.describe) NOT_FOUND: Resource 'projects/p/locations/us-central2-b/nodes/nope' was not found
- '@type': type.googleapis.com/google.rpc.ResourceInfo
  resourceName: projects/p/locations/us-central2-b/nodes/nope
`;
const CAPACITY = `Create request issued for: [n3]
Waiting for operation [projects/p/locations/us-central2-b/operations/operation-1795482315187-f1b05cbf8e32-7548bae7-3a1b2973] to complete...
.....failed.
ERROR: (gcloud.compute.tpus.tpu-vm.create) {
  "code": 8,
  "message": "There is no more capacity in the zone \\"us-central2-b\\"; you can try in another zone where Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0xea24b4073b884942]"
}
`;
const QUOTA = `ERROR: (gcloud.compute.tpus.tpu-vm.create) RESOURCE_EXHAUSTED: Quota limit 'TPUV4PerProjectPerZoneForTPUAPI' has been exceeded. Limit: 0 in zone us-central2-b.\n`;
const EXISTS = `ERROR: (gcloud.compute.tpus.tpu-vm.create) ALREADY_EXISTS: Resource 'projects/p/locations/us-central2-b/nodes/n1' already exists
- '@type': type.googleapis.com/google.rpc.ResourceInfo
  resourceName: projects/p/locations/us-central2-b/nodes/n1
`;
const NO_ACCOUNT = `ERROR: (gcloud.compute.tpus.tpu-vm.list) You do not currently have an active account selected.
Please run:

  $ gcloud auth login
`;

describe('parseGcloudError', () => {
  it.each([
    [
      'NOT_FOUND with its YAML details',
      NOT_FOUND,
      {
        line: "ERROR: (gcloud.compute.tpus.tpu-vm.describe) NOT_FOUND: Resource 'projects/p/locations/us-central2-b/nodes/nope' was not found",
        command: 'gcloud.compute.tpus.tpu-vm.describe',
        status: 'NOT_FOUND',
      },
    ],
    [
      "a failed operation's multi-line JSON",
      CAPACITY,
      {
        line: 'ERROR: (gcloud.compute.tpus.tpu-vm.create) RESOURCE_EXHAUSTED: There is no more capacity in the zone "us-central2-b"; you can try in another zone where Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) [EID: 0xea24b4073b884942]',
        status: 'RESOURCE_EXHAUSTED',
        grpcCode: 8,
      },
    ],
    [
      'a quota refusal',
      QUOTA,
      { status: 'RESOURCE_EXHAUSTED', message: expect.stringMatching(/^Quota limit /) },
    ],
    [
      'a sentence with no status',
      NO_ACCOUNT,
      {
        line: 'ERROR: (gcloud.compute.tpus.tpu-vm.list) You do not currently have an active account selected.',
        message: 'You do not currently have an active account selected.',
      },
    ],
  ])('reads %s', (_what, stderr, want) => {
    expect(parseGcloudError(stderr)).toMatchObject(want);
  });

  it('has a status only where gcloud printed one', () => {
    expect(parseGcloudError(NO_ACCOUNT)).not.toHaveProperty('status');
    expect(parseGcloudError(QUOTA)).not.toHaveProperty('grpcCode');
  });

  it('is undefined without an ERROR line', () => {
    expect(parseGcloudError('Traceback (most recent call last):\n  boom\n')).toBeUndefined();
  });
});

describe('classifyGcloudError', () => {
  it.each([
    [NOT_FOUND, 'NotFound'],
    [CAPACITY, 'Capacity'],
    [QUOTA, 'Quota'],
    [EXISTS, 'AlreadyExists'],
    [NO_ACCOUNT, 'Auth'],
    [
      'ERROR: (gcloud.compute.tpus.tpu-vm.create) INVALID_ARGUMENT: Accelerator type "v9-8" is not available\n',
      'InvalidArgument',
    ],
    [
      'ERROR: (gcloud.compute.tpus.tpu-vm.create) RESOURCE_EXHAUSTED: Maximum number of CreateNode requests per minute exceeded\n',
      'Quota',
    ],
    ['ERROR: (gcloud.compute.tpus.tpu-vm.list) UNAVAILABLE: try again\n', 'Failed'],
  ])('%#: %s → %s', (stderr, reason) => {
    expect(classifyGcloudError(parseGcloudError(stderr)!)).toBe(reason);
  });
});

describe('encodeDictFlag', () => {
  it.each([
    [{ a: '1', b: 'x=y' }, 'a=1,b=x=y'],
    [{ a: '1,2', b: '3' }, '^;^a=1,2;b=3'],
    [{ a: '1,2;3', b: '|' }, '^~^a=1,2;3~b=|'],
    [{ '^a': 'b' }, '^;^^a=b'],
    [{ k: '' }, 'k='],
  ])('%j → %s', (entries, flag) => {
    expect(encodeDictFlag(entries)).toBe(flag);
  });

  it('refuses keys gcloud cannot carry', () => {
    expect(() => encodeDictFlag({ 'a=b': 'c' })).toThrow(/holding "="/);
    expect(() => encodeDictFlag({ '': 'c' })).toThrow(/empty/);
  });
});

/** A runner that answers from a table and records the argument vectors. */
function fakeRunner(answer: (args: string[]) => Partial<GcloudResult>): GcloudRunner & { calls: string[][] } {
  const calls: string[][] = [];
  const run = async (args: string[]) => {
    calls.push(args);
    return { code: 0, stdout: '', stderr: '', ...answer(args) };
  };
  return Object.assign(run, { calls });
}

const NODE = (name: string, labels: Record<string, string>) => ({
  name: `projects/p/locations/z-a/nodes/${name}`,
  state: 'READY',
  labels,
});

describe('GcloudTpu', () => {
  it('builds one argument vector per call, with project, zone, json and quiet', async () => {
    const run = fakeRunner(() => ({
      stdout: JSON.stringify({ name: 'projects/p/locations/z-a/operations/o', done: false }),
    }));
    await new GcloudTpu({ project: 'p', run }).create({
      name: 'n-1',
      zone: 'z-a',
      acceleratorType: 'v4-16',
      runtimeVersion: 'tpu-ubuntu2204-base',
      spot: true,
      labels: { run: 'r' },
      metadata: { 'startup-script': 'echo a,b' },
      async: true,
    });
    expect(run.calls).toEqual([
      [
        'compute',
        'tpus',
        'tpu-vm',
        'create',
        'n-1',
        '--accelerator-type=v4-16',
        '--version=tpu-ubuntu2204-base',
        '--spot',
        '--labels=run=r',
        '--metadata=^;^startup-script=echo a,b',
        '--async',
        '--zone=z-a',
        '--project=p',
        '--format=json',
        '--quiet',
      ],
    ]);
  });

  it('keeps only exact label matches from what gcloud printed', async () => {
    const run = fakeRunner(() => ({
      stdout: JSON.stringify([
        NODE('a', { run: 'r-1' }),
        NODE('b', { run: 'r-1-2' }),
        NODE('c', { run: 'R-1' }),
      ]),
    }));
    const nodes = await new GcloudTpu({ project: 'p', run }).list('z-a', { run: 'r-1' });
    expect(nodes.map((n) => n.name.split('/').pop())).toEqual(['a']);
    expect(run.calls[0]).toContain('--filter=labels.run=r-1');
  });

  it('throws on a failed list, never an empty list', async () => {
    const run = fakeRunner(() => ({ code: 1, stderr: NO_ACCOUNT }));
    await expect(new GcloudTpu({ project: 'p', run }).list('z-a')).rejects.toBeInstanceOf(GcloudError);
  });

  it('turns NOT_FOUND into undefined for describe and delete, and throws the typed errors', async () => {
    const tpu = (stderr: string) =>
      new GcloudTpu({ project: 'p', run: fakeRunner(() => ({ code: 1, stderr })) });
    expect(await tpu(NOT_FOUND).describe('z-a', 'nope')).toBeUndefined();
    expect(await tpu(NOT_FOUND).delete('z-a', 'nope', { async: true })).toBeUndefined();
    const create = (stderr: string) =>
      tpu(stderr).create({ name: 'n', zone: 'z-a', acceleratorType: 'v4-8', runtimeVersion: 'v' });
    await expect(create(CAPACITY)).rejects.toBeInstanceOf(TpuCapacityError);
    await expect(create(QUOTA)).rejects.toBeInstanceOf(TpuQuotaError);
    await expect(create(EXISTS)).rejects.toBeInstanceOf(TpuAlreadyExistsError);
    await expect(tpu(QUOTA).describe('z-a', 'n')).rejects.toMatchObject({
      data: { reason: 'Quota', exitCode: 1 },
    });
  });

  it('reports a missing gcloud, a timeout and a bad name without guessing', async () => {
    const missing = new GcloudTpu({ project: 'p', run: fakeRunner(() => ({ code: null, missing: true })) });
    await expect(missing.list('z-a')).rejects.toMatchObject({ data: { reason: 'NotInstalled' } });
    const slow = new GcloudTpu({ project: 'p', run: fakeRunner(() => ({ code: null, timedOut: true })) });
    await expect(slow.describe('z-a', 'n')).rejects.toMatchObject({ data: { reason: 'Timeout' } });
    const run = fakeRunner(() => ({}));
    await expect(
      new GcloudTpu({ project: 'p', run }).describe('z-a', '--impersonate-service-account=x'),
    ).rejects.toMatchObject({
      data: { reason: 'InvalidArgument' },
    });
    expect(run.calls).toEqual([]);
  });
});
