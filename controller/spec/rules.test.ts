import { describe, expect, it } from 'vitest';
import { findCycle } from './dag-rules.js';
import { devicesOf } from './parallelism-rules.js';
import { SpecLoader } from './loader.js';

describe('findCycle', () => {
  it.each([
    { name: 'empty', nodes: [], cycle: undefined },
    {
      name: 'chain',
      nodes: [
        { id: 'a', needs: [] },
        { id: 'b', needs: ['a'] },
        { id: 'c', needs: ['b'] },
      ],
      cycle: undefined,
    },
    {
      name: 'diamond',
      nodes: [
        { id: 'a', needs: [] },
        { id: 'b', needs: ['a'] },
        { id: 'c', needs: ['a'] },
        { id: 'd', needs: ['b', 'c'] },
      ],
      cycle: undefined,
    },
    {
      name: 'two-cycle',
      nodes: [
        { id: 'a', needs: ['b'] },
        { id: 'b', needs: ['a'] },
      ],
      cycle: ['a', 'b', 'a'],
    },
    {
      name: 'three-cycle',
      nodes: [
        { id: 'a', needs: ['c'] },
        { id: 'b', needs: ['a'] },
        { id: 'c', needs: ['b'] },
      ],
      cycle: ['a', 'b', 'c', 'a'],
    },
    {
      name: 'cycle behind a chain',
      nodes: [
        { id: 'x', needs: [] },
        { id: 'a', needs: ['x', 'b'] },
        { id: 'b', needs: ['a'] },
      ],
      cycle: ['a', 'b', 'a'],
    },
    { name: 'unknown needs are ignored here', nodes: [{ id: 'a', needs: ['zzz'] }], cycle: undefined },
  ])('$name', ({ nodes, cycle }) => {
    expect(findCycle(nodes)).toEqual(cycle);
  });

  it('handles a 10,000-node chain without recursion trouble at this depth', () => {
    const nodes = Array.from({ length: 5000 }, (_, i) => ({ id: `n${i}`, needs: i ? [`n${i - 1}`] : [] }));
    expect(findCycle(nodes)).toBeUndefined();
  });
});

describe('devicesOf', () => {
  it.each([
    [{}, 0],
    [{ gpus: 8 }, 8],
    [{ gpus: 8, nodes: 2 }, 16],
    [{ tpus: 4, nodes: 4 }, 16],
    [{ gpus: 2, tpus: 4 }, 2],
  ])('%j → %i', (r, n) => expect(devicesOf(r)).toBe(n));
});

const enc = (s: string) => new TextEncoder().encode(s);
const run = (name: string, spec: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: ${name}\nspec:\n${spec}`;

describe('mesh rules', () => {
  const check = (spec: string) => {
    const l = new SpecLoader();
    l.loadFile('r.yaml', enc(run('r', spec)), '1');
    return l.result().diagnostics.map((d) => d.code);
  };
  it.each([
    [
      'exact product',
      '  command: x\n  resources: {gpus: 8}\n  parallelism: {mesh: {axes: [d, m], shape: [4, 2]}}\n',
      [],
    ],
    [
      'null takes the rest',
      '  command: x\n  resources: {gpus: 8, nodes: 2}\n  parallelism: {mesh: {axes: [d, m], shape: [null, 2]}}\n',
      [],
    ],
    [
      'two nulls',
      '  command: x\n  resources: {gpus: 8}\n  parallelism: {mesh: {axes: [d, m], shape: [null, null]}}\n',
      ['MeshShape'],
    ],
    [
      'duplicate axis',
      '  command: x\n  resources: {gpus: 4}\n  parallelism: {mesh: {axes: [d, d], shape: [2, 2]}}\n',
      ['MeshAxisDuplicate'],
    ],
    [
      'pp stages inferred from null',
      '  command: x\n  resources: {gpus: 8}\n  parallelism: {mesh: {axes: [d, p], shape: [2, null]}, pp: {axis: p, stages: 4}}\n',
      [],
    ],
    [
      'tpus count as devices',
      '  command: x\n  resources: {tpus: 4, nodes: 2}\n  parallelism: {mesh: {axes: [d], shape: [8]}}\n',
      [],
    ],
  ])('%s', (_name, spec, codes) => {
    expect(check(spec)).toEqual(codes);
  });
});

describe('what no process can be given', () => {
  const codes = (spec: string) => {
    const l = new SpecLoader();
    const text = `apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: r\nspec:\n${spec}`;
    l.loadFile('r.yaml', new TextEncoder().encode(text), '1');
    return l.result().diagnostics.map((d) => `${d.code}@${d.line}`);
  };
  it.each([
    ['an ordinary command', '  command: [python, train.py]\n', []],
    ['a NUL in an argument', '  command: [python, "a\\0b"]\n', ['NulByte@6']],
    ['a NUL in an env value', '  command: x\n  env: {A: "a\\0b"}\n', ['NulByte@7']],
    ['an argument of 200 KB', `  command: [echo, "${'x'.repeat(200_000)}"]\n`, ['ArgumentTooLarge@6']],
    ['the largest argument Linux takes', `  command: [echo, "${'x'.repeat(128 * 1024 - 1)}"]\n`, []],
    [
      'many arguments, 600 KB together',
      `  command: [${Array.from({ length: 6 }, () => `"${'y'.repeat(100_000)}"`).join(', ')}]\n`,
      ['ArgumentsTooLarge@6'],
    ],
  ])('%s', (_name, spec, expected) => {
    expect(codes(spec)).toEqual(expected);
  });
});

/** Loads `files` (name → YAML) as one repo; its diagnostics as `file:line:column Code path`. */
const repo = (files: Record<string, string>) => {
  const l = new SpecLoader();
  for (const [f, text] of Object.entries(files)) l.loadFile(f, enc(text), '1');
  const r = l.result();
  return { r, where: r.diagnostics.map((d) => `${d.file}:${d.line}:${d.column} ${d.code} ${d.path}`) };
};

describe("a Run named like a DAG's child run", () => {
  const dag = (name: string, ids: string[]) =>
    `apiVersion: adventuretime.dev/v1alpha1\nkind: DAG\nmetadata: {name: ${name}}\nspec:\n  nodes:\n` +
    ids.map((id) => `    - id: ${id}\n      run: {command: x}\n`).join('');

  it("is a DuplicateName at the Run's name and at the node's id; neither is loaded", () => {
    const { r, where } = repo({
      'dags/pipe.yaml': dag('pipe', ['prep', 'train']),
      'runs/x.yaml': run('pipe.train', '  command: y\n'),
    });
    expect(where).toEqual([
      'dags/pipe.yaml:8:11 DuplicateName spec.nodes[1].id',
      'runs/x.yaml:4:9 DuplicateName metadata.name',
    ]);
    const [onDag, onRun] = r.diagnostics;
    expect(onDag!.message).toBe(
      'node "train" runs as Run/pipe.train, which is also defined at runs/x.yaml:4',
    );
    expect(onRun!.message).toBe(
      'Run/pipe.train is also the child run of node "train" of DAG/pipe at dags/pipe.yaml:8',
    );
    expect(onRun!.hint).toMatch(/rename the Run or the node/);
    expect(r.objects).toEqual([]);
    expect(r.invalid.map((d) => `${d.kind}/${d.name}`).sort()).toEqual(['DAG/pipe', 'Run/pipe.train']);
  });

  it.each([
    ['another DAG', { 'a.yaml': dag('pipe', ['train']), 'b.yaml': dag('pipe.train', ['x']) }],
    [
      'a Run of a name only alike',
      { 'a.yaml': dag('pipe', ['train']), 'b.yaml': run('pipe-train', '  command: y\n') },
    ],
    [
      'a Run named like the DAG',
      { 'a.yaml': dag('pipe', ['train']), 'b.yaml': run('pipe', '  command: y\n') },
    ],
  ])('is no clash with %s', (_name, files) => {
    expect(repo(files).where).toEqual([]);
  });
});

describe('secrets a Backend names', () => {
  const backend = (name: string, body: string) =>
    `apiVersion: adventuretime.dev/v1alpha1\nkind: Backend\nmetadata: {name: ${name}}\nspec:\n${body}`;
  const vast = (key: string) => backend('vast', `  type: vastai\n  vastai: {apiKeySecret: ${key}}\n`);
  const agent = (token: string) => backend('lab', `  type: agent\n  agent: {tokenSecret: ${token}}\n`);
  const storage = (s3: string) =>
    `apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: s}\nspec:\n  type: s3\n  s3: ${s3}\n`;
  const FILE_STORE =
    'apiVersion: adventuretime.dev/v1alpha1\nkind: Storage\nmetadata: {name: s}\nspec:\n  type: file\n  file: {path: store}\n';

  it.each([
    ['a key of its own', { 'b.yaml': vast('VAST_API_KEY') }, []],
    [
      'ADV_* as the vastai key',
      { 'b.yaml': vast('ADV_GIT_TOKEN') },
      ['b.yaml:6:26 ReservedSecret spec.vastai.apiKeySecret'],
    ],
    [
      'ADV_* as the agent token',
      { 'b.yaml': agent('ADV_WEBHOOK_SECRET') },
      ['b.yaml:6:24 ReservedSecret spec.agent.tokenSecret'],
    ],
    [
      "the store's secret key (credentialsSecret)",
      {
        'b.yaml': vast('STORE_SECRET_ACCESS_KEY'),
        's.yaml': storage('{bucket: ckpts, credentialsSecret: STORE}'),
      },
      ['b.yaml:6:26 StoreCredential spec.vastai.apiKeySecret'],
    ],
    [
      "the store's key id, as the agent token",
      {
        'b.yaml': agent('STORE_ACCESS_KEY_ID'),
        's.yaml': storage('{bucket: ckpts, credentialsSecret: STORE}'),
      },
      ['b.yaml:6:24 StoreCredential spec.agent.tokenSecret'],
    ],
    [
      "the SDK's variables, for a store without credentialsSecret",
      { 'b.yaml': vast('AWS_SECRET_ACCESS_KEY'), 's.yaml': storage('{bucket: ckpts}') },
      ['b.yaml:6:26 StoreCredential spec.vastai.apiKeySecret'],
    ],
    [
      "the SDK's variables, when the store names its own",
      {
        'b.yaml': vast('AWS_SECRET_ACCESS_KEY'),
        's.yaml': storage('{bucket: ckpts, credentialsSecret: STORE}'),
      },
      [],
    ],
    ['any name, with a file store', { 'b.yaml': vast('AWS_SECRET_ACCESS_KEY'), 's.yaml': FILE_STORE }, []],
  ])('%s', (_name, files, expected) => {
    expect(repo(files).where).toEqual(expected);
  });

  it('says whose credential it is, where, and what to do', () => {
    const { r } = repo({
      'b.yaml': vast('STORE_SECRET_ACCESS_KEY'),
      's.yaml': storage('{bucket: ckpts, credentialsSecret: STORE}'),
    });
    expect(r.diagnostics[0]).toMatchObject({
      message:
        '"STORE_SECRET_ACCESS_KEY" is a credential of the object store (Storage at s.yaml:3), which only the controller hands out: no spec may name it',
      hint: expect.stringMatching(/a secret of its own/),
    });
    expect(r.objects.map((o) => o.kind)).toEqual(['Storage']);
  });
});

describe('code from another repository (code.repo)', () => {
  const code = (body: string) => run('r', `  command: x\n  code: ${body}\n`);

  it.each([
    [
      'an https URL with a ref and a token secret',
      '{repo: "https://git.example.com/lab/mono.git", ref: main, tokenSecret: MONO_TOKEN}',
      [],
    ],
    ['an http URL (loopback servers)', '{repo: "http://127.0.0.1:8080/mono.git"}', []],
    ['ssh', '{repo: "ssh://git@example.com/lab/mono.git"}', ['r.yaml:7:16 CodeRepoInvalid spec.code.repo']],
    [
      'scp-like ssh',
      '{repo: "git@example.com:lab/mono.git"}',
      ['r.yaml:7:16 CodeRepoInvalid spec.code.repo'],
    ],
    ['file://', '{repo: "file:///etc"}', ['r.yaml:7:16 CodeRepoInvalid spec.code.repo']],
    ['ext::', '{repo: "ext::sh -c touch% /tmp/pwned"}', ['r.yaml:7:16 CodeRepoInvalid spec.code.repo']],
    ['a path', '{repo: /srv/git/mono.git}', ['r.yaml:7:16 CodeRepoInvalid spec.code.repo']],
    [
      'a token in the URL',
      '{repo: "https://x:ghp_abc@example.com/mono.git"}',
      ['r.yaml:7:16 CodeRepoInvalid spec.code.repo'],
    ],
    [
      'a token secret without a repo',
      '{tokenSecret: MONO_TOKEN}',
      ['r.yaml:7:23 TokenWithoutRepo spec.code.tokenSecret'],
    ],
    [
      "the controller's own token as the secret",
      '{repo: "https://example.com/m.git", tokenSecret: ADV_GIT_TOKEN}',
      ['r.yaml:7:58 ReservedSecret spec.code.tokenSecret'],
    ],
  ])('%s', (_what, body, expected) => {
    expect(repo({ 'r.yaml': code(body) }).where).toEqual(expected);
  });

  it('says what is wrong and how to fix it', () => {
    const { r } = repo({ 'r.yaml': code('{repo: "file:///etc/passwd"}') });
    expect(r.diagnostics[0]).toMatchObject({
      message: expect.stringMatching(
        /file:\/\/ is not fetched: the controller fetches code over HTTP\(S\) only/,
      ),
      hint: expect.stringMatching(/https:\/\/ clone URL/),
    });
  });
});

describe('outputs declared on a Run', () => {
  const node = (id: string, extra: string) => `    - id: ${id}\n${extra}`;
  const dag = (...nodes: string[]) =>
    `apiVersion: adventuretime.dev/v1alpha1\nkind: DAG\nmetadata: {name: d}\nspec:\n  nodes:\n${nodes.join('')}`;

  it("a Run's outputs load; a DAG node may read an output its source declares in its run", () => {
    const { r, where } = repo({
      'runs/roll.yaml': run('roll', '  command: x\n  outputs: {rollouts: {description: parts}}\n'),
      'dags/d.yaml': dag(
        node('gen', '      run: {command: x, outputs: {samples: {}}}\n'),
        node('eat', '      needs: [gen]\n      inputs: {S: gen.outputs.samples}\n      run: {command: x}\n'),
      ),
    });
    expect(where).toEqual([]);
    expect(r.objects.map((o) => `${o.kind}/${o.name}`).sort()).toEqual(['DAG/d', 'Run/roll']);
  });

  it('an output name that is not a name is an error at its key', () => {
    const { where } = repo({ 'runs/roll.yaml': run('roll', '  command: x\n  outputs: {"a/b": {}}\n') });
    expect(where).toHaveLength(1);
    expect(where[0]).toBe('runs/roll.yaml:7:13 BadKey spec.outputs["a/b"]');
  });
});
