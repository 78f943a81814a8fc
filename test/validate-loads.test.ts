/**
 * Validating YAML loads no adapter, observed: the compiled spec loader (`dist/controller/spec/`)
 * validates a Backend of every built-in type in a fresh Node process whose resolve hook writes
 * down every module it loads. `test/import-graph.test.ts` holds the same over the import graph;
 * this checks the graph means what the emitted JavaScript does (`verbatimModuleSyntax`, type-only
 * imports erased, `create`'s `import()` not run).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '..');

/** A resolve hook that appends each module's URL to the file `initialize` is given. */
const HOOKS = `import { appendFileSync } from 'node:fs';
let log;
export function initialize(data) { log = data.log; }
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(log, r.url + '\\n');
  return r;
}
`;

/** Loads the specs of a folder with the compiled loader and prints what it found. */
const MAIN = `import { register } from 'node:module';
const [hooks, log, spec, dir] = process.argv.slice(2);
register(hooks, { data: { log } });
const { loadSpecs, DirectorySource } = await import(spec);
const r = await loadSpecs(new DirectorySource(dir));
console.log(JSON.stringify({ names: r.objects.map((o) => o.name), diagnostics: r.diagnostics }));
`;

const backend = (name: string, body: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: Backend\nmetadata:\n  name: ${name}\nspec:\n${body}`;

/** A valid Backend of each built-in type, and a Run that names them. */
const SPECS: Record<string, string> = {
  'backends/local.yaml': backend('local', '  type: local\n'),
  'backends/ssh.yaml': backend('ssh', '  type: ssh\n  connection: {host: gpu1.example.org, user: ml}\n'),
  'backends/slurm.yaml': backend(
    'slurm',
    '  type: slurm\n  connection: {host: login.example.org, user: ml}\n  slurm: {partitions: [{name: gpu, gpuType: a100}]}\n',
  ),
  'backends/tpu.yaml': backend(
    'tpu',
    '  type: gcp-tpu\n  connection: {user: ml}\n  gcpTpu: {project: my-project-1, zone: us-central2-b, acceleratorType: v4-8}\n',
  ),
  'backends/vast.yaml': backend('vast', '  type: vastai\n  vastai: {apiKeySecret: VAST_API_KEY}\n'),
  'backends/volcano.yaml': backend(
    'volcano',
    '  type: volcano\n  volcano: {namespace: ml, image: "ghcr.io/example/train:1"}\n',
  ),
  'backends/agent.yaml': backend('agent', '  type: agent\n  agent: {tokenSecret: AGENT_TOKEN}\n'),
  'runs/train.yaml':
    'apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: train\nspec:\n  command: [python, train.py]\n',
};

describe('validating YAML, run for real', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('loads no adapter, transport, backend client or ssh2 while it validates every backend type', async () => {
    const tmp = await mkdtemp(join(tmpdir(), 'adv-validate-loads-'));
    dirs.push(tmp);
    for (const [rel, text] of Object.entries(SPECS)) {
      await writeFile(join(tmp, rel.replace('/', '-')), text);
    }
    const hooks = join(tmp, 'hooks.mjs');
    const main = join(tmp, 'main.mjs');
    const log = join(tmp, 'loaded.txt');
    await writeFile(hooks, HOOKS);
    await writeFile(main, MAIN);
    await writeFile(log, '');
    const spec = pathToFileURL(join(ROOT, 'dist', 'controller', 'spec', 'index.js')).href;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [main, pathToFileURL(hooks).href, log, spec, tmp],
      { timeout: 60_000 },
    );
    const result = JSON.parse(stdout) as { names: string[]; diagnostics: unknown[] };
    expect(result.diagnostics).toEqual([]);
    expect(result.names.sort()).toEqual([
      'agent',
      'local',
      'slurm',
      'ssh',
      'tpu',
      'train',
      'vast',
      'volcano',
    ]);

    const loaded = [...new Set((await readFile(log, 'utf8')).split('\n').filter(Boolean))];
    const ours = loaded.filter((u) => u.startsWith(pathToFileURL(join(ROOT, 'dist')).href));
    // The hook saw the loader reach the descriptors: an empty log would pass what follows.
    expect(ours.some((u) => u.endsWith('/controller/backends/ssh/index.js'))).toBe(true);
    expect(ours.some((u) => u.endsWith('/controller/backends/slurm/settings.js'))).toBe(true);
    const unwanted = loaded.filter(
      (u) =>
        /\/controller\/backends\/[^/]+\/adapter\.js$/.test(u) ||
        /\/controller\/(transport|backends\/remote)\//.test(u) ||
        /\/controller\/backends\/(vastai\/client|gcp-tpu\/gcloud|volcano\/kubectl|agent\/(hub|api))\.js$/.test(
          u,
        ) ||
        /\/node_modules\/ssh2\//.test(u),
    );
    expect(unwanted).toEqual([]);
  });
});
