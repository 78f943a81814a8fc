import { describe, expect, it } from 'vitest';
import { urlFilePath } from './dataset-rules.js';
import { SpecLoader } from './loader.js';
import type { Diagnostic } from './diagnostic.js';

const header = (kind: string, name: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: ${kind}\nmetadata:\n  name: ${name}\nspec:\n`;
const SHA = 'a'.repeat(64);
const dataset = (name: string, version: number, source = `    store: { prefix: datasets/${name}/x/ }\n`) =>
  `${header('Dataset', name)}  version: ${version}\n  source:\n${source}`;
const run = (name: string, inputs: string) =>
  `${header('Run', name)}  command: python train.py\n  inputs:\n${inputs}`;
const input = (ds: string, as: string) => `    - { dataset: ${ds}, as: ${as} }\n`;

function load(files: Record<string, string>) {
  const loader = new SpecLoader();
  for (const [f, text] of Object.entries(files)) loader.loadFile(f, new TextEncoder().encode(text), f + text);
  return loader.result();
}
const errors = (r: ReturnType<typeof load>) =>
  r.diagnostics
    .filter((d) => d.severity === 'error')
    .map(
      (d: Diagnostic) =>
        `${d.file}:${d.line} ${d.code} ${d.path}: ${d.message}${d.hint ? ` | ${d.hint}` : ''}`,
    );

describe('Dataset references of a Run', () => {
  const sets = { 'datasets/t1.yaml': dataset('tokens', 1), 'datasets/t2.yaml': dataset('tokens', 2) };

  it('resolves a name or a pinned version; an unknown dataset or version is an error on the run with the fix', () => {
    const r = load({
      ...sets,
      'runs/a.yaml': run('a', input('tokens', 'train') + input('tokens@1', 'old')),
      'runs/b.yaml': run('b', input('tokens@3', 'train')),
      'runs/c.yaml': run('c', input('images', 'train')),
    });
    expect(errors(r)).toEqual([
      'runs/b.yaml:8 UnknownDataset spec.inputs[0].dataset: Dataset "tokens" has no version 3 (versions: 1, 2) | use "tokens@2", or "tokens" for the newest',
      'runs/c.yaml:8 UnknownDataset spec.inputs[0].dataset: Dataset "images" is not defined in this repo | add datasets/images.yaml (kind: Dataset), or run `adv dataset push DIR images`',
    ]);
    expect(r.objects.filter((o) => o.kind === 'Run').map((o) => o.name)).toEqual(['a']);
  });

  it('checks the datasets a Sweep template names', () => {
    const sweep = `${header('Sweep', 's')}  template:\n    command: x\n    inputs: [{ dataset: tokens@9, as: train }]\n  parameters:\n    grid: { lr: [1, 2] }\n`;
    expect(errors(load({ ...sets, 'sweeps/s.yaml': sweep }))).toEqual([
      'sweeps/s.yaml:8 UnknownDataset spec.template.inputs[0].dataset: Dataset "tokens" has no version 9 (versions: 1, 2) | use "tokens@2", or "tokens" for the newest',
    ]);
  });

  it('refuses a duplicate `as`, and an `as` that is also an input of the same DAG node', () => {
    const dag = `${header('DAG', 'p')}  nodes:
    - id: prep
      outputs: { shards: {} }
      run: { command: x }
    - id: train
      needs: [prep]
      inputs: { TOKENS: prep.outputs.shards }
      run:
        command: x
        inputs: [{ dataset: tokens, as: TOKENS }]
`;
    const r = load({
      ...sets,
      'runs/a.yaml': run('a', input('tokens', 'train') + input('tokens@1', 'train')),
      'dags/p.yaml': dag,
    });
    expect(errors(r)).toEqual([
      'dags/p.yaml:15 DuplicateInput spec.nodes[1].run.inputs[0].as: as "TOKENS" is also the name of an input of node "train" (inputs.TOKENS) | rename one of them: both reach the job as ADV_INPUT_<name>…',
      'runs/a.yaml:9 DuplicateInput spec.inputs[1].as: as "train" is also the name of inputs[0] | give each input its own "as": it names the directory inputs/<as>/ and ADV_INPUT_<as>_DIR',
    ]);
  });

  it('holds only the runs that name a bad Dataset; every other spec is acted on', () => {
    const r = load({
      ...sets,
      'datasets/bad.yaml': dataset(
        'imgs',
        1,
        `    store: { prefix: a/ }\n    urls: [{ url: "https://x.org/a.bin", sha256: ${SHA} }]\n`,
      ),
      'datasets/t2-copy.yaml': dataset('tokens', 2),
      'runs/a.yaml': run('a', input('imgs', 'x')),
      'runs/b.yaml': run('b', input('tokens@1', 'x')),
      'runs/c.yaml': run('c', input('tokens', 'x')),
    });
    expect(errors(r)).toEqual([
      'datasets/bad.yaml:8 DatasetSource spec.source: spec.source names store and urls: a Dataset comes from exactly one source | keep exactly one of store: {prefix}, urls: [{url, sha256}] and output: {run|dag+node, output}',
      'datasets/t2-copy.yaml:4 DuplicateName metadata.name: Dataset/tokens@2 is also defined at datasets/t2.yaml:4 | give one of them another spec.version: a name and version are unique across the repo',
      'datasets/t2.yaml:4 DuplicateName metadata.name: Dataset/tokens@2 is also defined at datasets/t2-copy.yaml:4 | give one of them another spec.version: a name and version are unique across the repo',
      'runs/a.yaml:8 DatasetInvalid spec.inputs[0].dataset: Dataset imgs@1 at datasets/bad.yaml:4 is invalid, so this run cannot start | fix the Dataset (adv validate shows its errors)',
      'runs/c.yaml:8 DatasetInvalid spec.inputs[0].dataset: Dataset tokens@2 at datasets/t2-copy.yaml:4, datasets/t2.yaml:4 is invalid, so this run cannot start | fix the Dataset (adv validate shows its errors)',
    ]);
    expect(r.objects.map((o) => `${o.kind}/${o.name}`).sort()).toEqual(['Dataset/tokens', 'Run/b']);
  });

  it('checks URL file paths: defaulted from the URL, relative, distinct', () => {
    const urls = `    urls:
      - { url: "https://x.org/d/a.bin?sig=1", sha256: ${SHA} }
      - { url: "s3://bucket/other/a.bin", sha256: ${SHA} }
      - { url: "https://x.org/b", sha256: ${SHA}, path: ../b }
      - { url: "https://x.org/%E0%A4%A", sha256: ${SHA} }
      - { url: "https://x.org/d/with%20space", sha256: ${SHA} }
`;
    expect(urlFilePath({ url: 'https://x.org/%E0%A4%A' })).toBe('%E0%A4%A');
    expect(urlFilePath({ url: 'https://x.org/d/with%20space' })).toBe('with space');
    expect(errors(load({ 'datasets/u.yaml': dataset('u', 1, urls) }))).toEqual([
      'datasets/u.yaml:10 DatasetPath spec.source.urls[1].url: file path "a.bin" is also the path of urls[0] | give one of them another path: each file of a dataset has its own',
      'datasets/u.yaml:11 DatasetPath spec.source.urls[2].path: file path "../b" is not a relative path inside the dataset | give the file a path such as "train/part-0.bin" (no "..", no leading "/")',
    ]);
  });

  it('refuses a store prefix that would leave the store', () => {
    const at = (prefix: string) =>
      errors(load({ 'datasets/p.yaml': dataset('p', 1, `    store: { prefix: "${prefix}" }\n`) }));
    expect(at('a/../../b/')).toEqual([
      'datasets/p.yaml:8 DatasetPath spec.source.store.prefix: prefix "a/../../b/" is not a path inside the store | write it relative to the store, without "." or ".." segments or "//", e.g. "datasets/tokens/3f2a…/"',
    ]);
    expect(at('a//b/')).toHaveLength(1);
    expect(at('datasets/tokens/ab12/')).toEqual([]);
  });

  it('refuses an https-less URL, a digest that is not sha256 and a store prefix without its slash, in the schema', () => {
    const bad = `${header('Dataset', 'b')}  version: 1\n  digest: md5:abc\n  source:\n    store: { prefix: datasets/b }\n`;
    const codes = errors(load({ 'datasets/b.yaml': bad })).map((e) => e.split(':')[1]);
    expect(codes).toEqual(['7 SchemaPattern spec.digest', '9 SchemaPattern spec.source.store.prefix']);
    const http = dataset('h', 1, `    urls: [{ url: "http://x.org/a", sha256: ${SHA} }]\n`);
    expect(errors(load({ 'datasets/h.yaml': http }))[0]).toContain('spec.source.urls[0].url');
  });

  it('checks that an output source names a DAG node and an output it declares', () => {
    const dag = `${header('DAG', 'pipe')}  nodes:\n    - id: prep\n      outputs: { shards: {} }\n      run: { command: x }\n`;
    const out = (o: string) => `    output: ${o}\n`;
    const r = load({
      'dags/pipe.yaml': dag,
      'runs/r.yaml': `${header('Run', 'solo')}  command: x\n  outputs: { rollouts: {} }\n`,
      'datasets/ok.yaml': dataset('ok', 1, out('{ dag: pipe, node: prep, output: shards }')),
      'datasets/ok2.yaml': dataset('ok2', 1, out('{ run: solo, output: rollouts }')),
      'datasets/ro.yaml': dataset('ro', 1, out('{ run: solo, output: rollout }')),
      'datasets/d.yaml': dataset('d', 1, out('{ dag: pipr, node: prep, output: shards }')),
      'datasets/n.yaml': dataset('n', 1, out('{ dag: pipe, node: prepp, output: shards }')),
      'datasets/o.yaml': dataset('o', 1, out('{ dag: pipe, node: prep, output: shard }')),
      'datasets/r.yaml': dataset('r', 1, out('{ run: sole, output: x }')),
      'datasets/both.yaml': dataset('both', 1, out('{ run: solo, dag: pipe, node: prep, output: rollouts }')),
    });
    expect(errors(r)).toEqual([
      'datasets/both.yaml:8 DatasetSource spec.source.output: output names both a run and a DAG node | write output: {run: NAME, output: OUT} or output: {dag: NAME, node: ID, output: OUT}',
      'datasets/d.yaml:8 UnknownDatasetSource spec.source.output: output names DAG "pipr", which is not defined in this repo (or is invalid) | did you mean "pipe"?',
      'datasets/n.yaml:8 UnknownDatasetSource spec.source.output: DAG "pipe" has no node "prepp" | did you mean "prep"?',
      'datasets/o.yaml:8 UnknownDatasetSource spec.source.output: node "prep" of DAG "pipe" declares no output "shard" | use one of: shards',
      'datasets/r.yaml:8 UnknownDatasetSource spec.source.output: output names Run "sole", which is not defined in this repo | did you mean "solo"?',
      'datasets/ro.yaml:8 UnknownDatasetSource spec.source.output: Run "solo" declares no output "rollout" | use one of: rollouts',
    ]);
  });

  it('is checked again when a load changes one file: a Dataset added, a Run an output names renamed', () => {
    const loader = new SpecLoader();
    const put = (f: string, text: string) => loader.loadFile(f, new TextEncoder().encode(text), f + text);
    const codes = () => loader.result().diagnostics.map((d) => `${d.file} ${d.code}`);
    put('datasets/t1.yaml', dataset('tokens', 1));
    put('runs/a.yaml', run('a', input('tokens@2', 'x')));
    put('runs/solo.yaml', `${header('Run', 'solo')}  command: x\n  outputs: { o: {} }\n`);
    put('datasets/out.yaml', dataset('out', 1, '    output: { run: solo, output: o }\n'));
    expect(codes()).toEqual(['runs/a.yaml UnknownDataset']);
    put('datasets/t2.yaml', dataset('tokens', 2));
    expect(codes()).toEqual([]);
    // A plain Run edited in place keeps its cross-file facts, but not when its outputs change.
    put('runs/solo.yaml', `${header('Run', 'solo')}  command: y\n  outputs: { o: {} }\n`);
    expect(codes()).toEqual([]);
    put('runs/solo.yaml', `${header('Run', 'solo')}  command: y\n`);
    expect(codes()).toEqual(['datasets/out.yaml UnknownDatasetSource']);
    put('runs/solo.yaml', `${header('Run', 'solo')}  command: y\n  outputs: { o: {} }\n`);
    expect(codes()).toEqual([]);
    put('runs/solo.yaml', `${header('Run', 'alone')}  command: y\n  outputs: { o: {} }\n`);
    expect(codes()).toEqual(['datasets/out.yaml UnknownDatasetSource']);
    loader.removeFile('datasets/t2.yaml');
    expect(codes()).toEqual(['datasets/out.yaml UnknownDatasetSource', 'runs/a.yaml UnknownDataset']);
  });
});
