import { describe, expect, it } from 'vitest';
import { parseDatasetInputs } from '../../runtime/datasets/contract.js';
import { buildJobRequest, envSecrets } from '../loop/execute/job-request.js';
import { desiredRun } from '../reconcile/desired.js';
import { IMMUTABLE_FIELDS } from '../reconcile/run-plan-model.js';
import { DatasetIndex, datasetInputs, inputsChange, withResolvedInputs } from './datasets.js';
import { SpecLoader, type LoadedObject } from './loader.js';
import type { RunSpec } from './schema.js';

const header = (kind: string, name: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: ${kind}\nmetadata:\n  name: ${name}\nspec:\n`;
const SHA = 'b'.repeat(64);
const DIGEST = `sha256:${'c'.repeat(64)}`;

function load(files: Record<string, string>): LoadedObject[] {
  const loader = new SpecLoader();
  for (const [f, text] of Object.entries(files)) loader.loadFile(f, new TextEncoder().encode(text), f + text);
  const r = loader.result();
  expect(r.diagnostics.filter((d) => d.severity === 'error')).toEqual([]);
  return r.objects;
}

const tokens = (version: number, prefix = `datasets/tokens/v${version}/`) =>
  `${header('Dataset', 'tokens')}  version: ${version}\n  digest: "${DIGEST}"\n  source:\n    store: { prefix: ${prefix} }\n`;
const runs = {
  'runs/latest.yaml': `${header('Run', 'latest')}  command: x\n  inputs: [{ dataset: tokens, as: train }]\n`,
  'runs/pinned.yaml': `${header('Run', 'pinned')}  command: x\n  inputs: [{ dataset: tokens@1, as: train }]\n`,
  'runs/none.yaml': `${header('Run', 'none')}  command: x\n`,
};

/** The desired runs of a repo, by name, as the controller makes them. */
function desired(files: Record<string, string>) {
  const objects = load(files);
  const datasets = new DatasetIndex(objects);
  return new Map(
    objects.filter((o) => o.kind === 'Run').map((o) => [o.name, desiredRun(o, undefined, datasets)]),
  );
}

describe('a run’s datasets are part of its desired state', () => {
  it('a new version changes a run that names the dataset alone, not one pinned to a version', () => {
    const v1 = desired({ 'datasets/t1.yaml': tokens(1), ...runs });
    const v2 = desired({ 'datasets/t1.yaml': tokens(1), 'datasets/t2.yaml': tokens(2), ...runs });
    expect(v1.get('latest')!.spec.inputs![0]!.dataset).toMatch(/^tokens@1#[0-9a-f]{12}$/);
    expect(v2.get('latest')!.spec.inputs![0]!.dataset).toMatch(/^tokens@2#[0-9a-f]{12}$/);
    expect(v2.get('latest')!.generation).not.toBe(v1.get('latest')!.generation);
    expect(v2.get('pinned')!.generation).toBe(v1.get('pinned')!.generation);
    expect(v2.get('none')!.generation).toBe(v1.get('none')!.generation);
    // A change of inputs is a change of what the run computes, not one applied in place.
    expect(IMMUTABLE_FIELDS).toContain('inputs');
  });

  it('an edit of the version in use changes the runs that use it', () => {
    const a = desired({ 'datasets/t1.yaml': tokens(1), ...runs });
    const b = desired({ 'datasets/t1.yaml': tokens(1, 'datasets/tokens/moved/'), ...runs });
    expect(b.get('pinned')!.generation).not.toBe(a.get('pinned')!.generation);
  });
});

describe('ADV_DATASETS', () => {
  const dag = `${header('DAG', 'pipe')}  nodes:\n    - id: prep\n      outputs: { shards: {} }\n      run: { command: x }\n`;
  const objects = load({
    'datasets/t1.yaml': tokens(1),
    'datasets/t2.yaml': tokens(2),
    'datasets/web.yaml': `${header('Dataset', 'web')}  version: 1\n  source:\n    urls:\n      - { url: "https://x.org/d/a.bin?sig=1", sha256: ${SHA}, size: 3 }\n      - { url: "s3://b/k/c.bin", sha256: ${SHA}, path: sub/c.bin }\n`,
    'datasets/shards.yaml': `${header('Dataset', 'shards')}  version: 1\n  source:\n    output: { dag: pipe, node: prep, output: shards }\n`,
    'dags/pipe.yaml': dag,
  });
  const index = new DatasetIndex(objects);

  it('resolves every source as the worker reads it: URL paths filled in, a DAG node’s output by its run', () => {
    const spec: RunSpec = {
      command: 'x',
      inputs: [
        { dataset: 'tokens@1', as: 'old' },
        { dataset: 'tokens', as: 'new' },
        { dataset: 'web', as: 'web' },
        { dataset: 'shards', as: 'shards' },
      ],
    };
    // The desired state's `name@N#digest` form resolves the same as what the spec says.
    const { inputs, missing } = datasetInputs(withResolvedInputs(spec, index), index);
    expect(missing).toEqual([]);
    expect(inputs).toEqual([
      {
        as: 'old',
        dataset: 'tokens@1',
        digest: DIGEST,
        source: { store: { prefix: 'datasets/tokens/v1/' } },
      },
      {
        as: 'new',
        dataset: 'tokens@2',
        digest: DIGEST,
        source: { store: { prefix: 'datasets/tokens/v2/' } },
      },
      {
        as: 'web',
        dataset: 'web@1',
        source: {
          urls: [
            { url: 'https://x.org/d/a.bin?sig=1', sha256: SHA, path: 'a.bin', size: 3 },
            { url: 's3://b/k/c.bin', sha256: SHA, path: 'sub/c.bin' },
          ],
        },
      },
      { as: 'shards', dataset: 'shards@1', source: { output: { run: 'pipe.prep', output: 'shards' } } },
    ]);
  });

  it('names the inputs whose dataset is gone', () => {
    const spec: RunSpec = { command: 'x', inputs: [{ dataset: 'tokens@7#abc', as: 'a' }] };
    expect(datasetInputs(spec, index)).toEqual({ inputs: [], missing: ['tokens@7'] });
  });

  it('reaches the job as ADV_DATASETS only when the run has inputs, and the worker parses it back', () => {
    const inputs = { secrets: envSecrets({}), controllerEnv: {}, passEnv: [], store: undefined };
    const attempt = { n: 1, jobName: 'adv-r-1', codeCommit: 'abc' };
    const spec: RunSpec = { command: 'x', inputs: [{ dataset: 'tokens', as: 'train' }] };
    const datasets = datasetInputs(spec, index).inputs;
    const req = buildJobRequest('r', attempt, spec, { ...inputs, datasets });
    expect(parseDatasetInputs(req.env.ADV_DATASETS)).toEqual(datasets);
    expect(buildJobRequest('r', attempt, { command: 'x' }, inputs).env).not.toHaveProperty('ADV_DATASETS');
  });

  it("passes the Backend's datasetCache bound and verify mode to the worker, for runs with inputs", () => {
    const base = { secrets: envSecrets({}), controllerEnv: {}, passEnv: [], store: undefined };
    const inputs = {
      ...base,
      backend: { name: 'b', spec: { datasetCache: { maxGiB: 1.5, verify: 'full' as const } } },
    };
    const attempt = { n: 1, jobName: 'adv-r-1', codeCommit: 'abc' };
    const spec: RunSpec = { command: 'x', inputs: [{ dataset: 'tokens', as: 'train' }] };
    const env = buildJobRequest('r', attempt, spec, {
      ...inputs,
      datasets: datasetInputs(spec, index).inputs,
    }).env;
    expect(env).toMatchObject({ ADV_CACHE_MAX_BYTES: String(1.5 * 2 ** 30), ADV_DATASET_VERIFY: 'full' });
    expect(buildJobRequest('r', attempt, { command: 'x' }, inputs).env).not.toHaveProperty(
      'ADV_CACHE_MAX_BYTES',
    );
  });
});

describe('inputsChange, the words of adv plan', () => {
  const spec = (...inputs: [string, string][]): RunSpec => ({
    command: 'x',
    inputs: inputs.map(([as, dataset]) => ({ as, dataset })),
  });
  it.each([
    [spec(['a', 'tokens@1#x']), spec(['a', 'tokens@1#x']), undefined],
    [spec(['a', 'tokens@1#x']), spec(['a', 'tokens@2#y']), 'Dataset tokens: tokens@1 → tokens@2'],
    [spec(['a', 'tokens@1#x']), spec(['a', 'tokens@1#z']), 'Dataset tokens@1 changed'],
    [spec(['a', 'tokens@1#x']), spec(['a', 'web@1#x']), 'input a: Dataset tokens@1 → web@1'],
    [spec(), spec(['a', 'web@1#x']), 'input a added: Dataset web@1'],
    [spec(['a', 'web@1#x']), spec(), 'input a removed: Dataset web@1'],
  ])('%j → %j: %s', (from, to, words) => {
    expect(inputsChange(from, to)).toBe(words);
  });
});
