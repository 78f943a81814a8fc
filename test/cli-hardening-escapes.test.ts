/**
 * Terminal escapes (issue 13): a status branch and a specs repo whose names, labels, messages and
 * file names hold ESC, CR, BEL, C1 controls, line separators and bidi overrides. Whatever the CLI
 * prints for a terminal — tables, `-o name`, describe, dag graph, plan, validate, errors quoting
 * names — carries none of them raw: `a ESC[2J b` cannot clear the screen or forge a row.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { git } from '../controller/git/native.js';
import { captureIo, removeTree } from './helpers/io.js';
import { ID, LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';

/** Every character that must never reach a terminal raw (a newline between lines is fine). */
const RAW =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]/u;

const H = 'a\u001b[2Jb\rforged row\u0007\u009b31m\u202eevil\u2028x\ny\tz';
const RUN = 'r\u001b[31mred';
const DAG = 'd\u001b]0;title\u0007';
const NODE = 'n\u001b[2J';
const BACKEND = 'b\u001b[2J';
const T = '2026-01-01T00:00:00Z';

const condition = { type: 'Ready', status: 'True', reason: H, message: H, lastTransitionTime: T };

const runDoc = {
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'RunStatus',
  metadata: { name: RUN, labels: { team: H } },
  status: {
    phase: 'Running',
    createdAt: T,
    reason: H,
    message: H,
    specFile: H,
    specCommit: H,
    owner: H,
    conditions: [condition],
    attempts: [
      {
        n: 1,
        backend: H,
        jobName: H,
        jobId: H,
        phase: 'Running',
        submittedAt: T,
        reason: H,
        message: H,
        specCommit: 'abc',
        why: H,
      },
    ],
    checkpoint: { step: 3, createdAt: T, uri: H },
  },
};

const dagDoc = {
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'DAGStatus',
  metadata: { name: DAG, labels: { team: H } },
  appliedSpec: {
    nodes: [
      { id: NODE, command: ['true'] },
      { id: 'm', command: ['true'], needs: [NODE], inputs: { [H]: `${NODE}.out` } },
    ],
  },
  status: {
    phase: 'Running',
    reason: H,
    message: H,
    createdAt: T,
    specFile: H,
    conditions: [condition],
    nodes: {
      [NODE]: { phase: 'Succeeded', run: H, attempts: 1, reason: H, message: H, since: T },
      m: { phase: 'Running', run: `${DAG}.m`, reason: H, message: H, since: T },
    },
  },
};

const backendDoc = {
  apiVersion: 'adventuretime.dev/v1alpha1',
  kind: 'BackendStatus',
  metadata: { name: BACKEND },
  status: { type: H, conditions: [condition], activeAttempts: 1 },
};

/** Writes `files` as the one commit of the status branch, with git plumbing (any file name). */
async function forgeStatusBranch(dir: string, files: Record<string, string>): Promise<void> {
  const index = join(dir, '.git', 'forged-index');
  const envIdx = { GIT_INDEX_FILE: index };
  for (const [path, content] of Object.entries(files)) {
    const oid = (await git(['hash-object', '-w', '--stdin'], { cwd: dir, input: content })).toString().trim();
    await git(['update-index', '--add', '--cacheinfo', `100644,${oid},${path}`], { cwd: dir, env: envIdx });
  }
  const tree = (await git(['write-tree'], { cwd: dir, env: envIdx })).toString().trim();
  const commit = (
    await git([...ID, 'commit-tree', tree, '-m', `run/${RUN}: ${H}\n\n- run/${RUN}: ${H}`], { cwd: dir })
  )
    .toString()
    .trim();
  await git(['update-ref', 'refs/heads/adventuretime/status', commit], { cwd: dir });
}

let tmp: string;
let wt: WorkTree;
const env = { HOME: '', XDG_CACHE_HOME: '' };

async function adv(args: string[]) {
  const io = captureIo({ ...env }, wt.dir);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-cli-escapes-'));
  env.HOME = tmp;
  env.XDG_CACHE_HOME = join(tmp, 'cache');
  wt = await makeWorkTree({
    'backends/local.yaml': LOCAL_BACKEND,
    'runs/good.yaml': runYaml('good', ['true']),
    // Spec files named and filled by someone else: a file name with escapes, a bad value.
    [`runs/e\u001b[2Jvil\r.yaml`]: runYaml('Bad-one', ['true']),
  });
  await forgeStatusBranch(wt.dir, {
    [`runs/${RUN}.yaml`]: stringify(runDoc),
    [`dags/${DAG}.yaml`]: stringify(dagDoc),
    [`backends/${BACKEND}.yaml`]: stringify(backendDoc),
  });
});
afterAll(async () => {
  await wt?.cleanup();
  await removeTree(tmp);
});

describe('nothing the CLI prints for a terminal holds a raw control character', () => {
  const cases: [string, string[]][] = [
    ['get runs', ['get', 'runs']],
    ['get runs -o wide', ['get', 'runs', '-o', 'wide']],
    ['get runs -o name', ['get', 'runs', '-o', 'name']],
    ['get runs -l', ['get', 'runs', '-l', 'team']],
    ['get dags', ['get', 'dags', '-o', 'wide']],
    ['get dags -o name', ['get', 'dags', '-o', 'name']],
    ['get backends', ['get', 'backends']],
    ['describe run', ['describe', 'run', RUN]],
    ['describe dag', ['describe', 'dag', DAG]],
    ['dag graph', ['dag', 'graph', DAG]],
    ['dag graph -o dot', ['dag', 'graph', DAG, '-o', 'dot']],
    ['plan', ['plan']],
    ['plan -o markdown', ['plan', '-o', 'markdown']],
    ['validate', ['validate', '.']],
    ['an error quoting a name', ['describe', 'run', `no\u001b[2Jpe`]],
    ['a not-found get', ['get', 'runs', `no\u001b[2Jpe`]],
    ['an invalid name', ['logs', `x\u001b[2J`, '--store', 'file:///nonexistent']],
    ['an unknown kind', ['get', `r\u001b[2Juns`]],
    ['an unknown command', [`ge\u001b[2Jt`]],
  ];
  it.each(cases)('%s', async (_what, args) => {
    const r = await adv(args);
    expect(r.out + r.err, r.err).not.toMatch(RAW);
    expect(r.err).not.toContain('internal error');
  });

  it('shows the escaped text instead, so the value can still be read', async () => {
    const get = await adv(['get', 'runs', '-o', 'name']);
    expect(get.out).toBe('run/r\\x1b[31mred\n');
    const d = await adv(['describe', 'run', RUN]);
    expect(d.code, d.err).toBe(0);
    expect(d.out).toContain('Name:         r\\x1b[31mred');
    expect(d.out).toContain('a\\x1b[2Jb\\x0dforged row\\x07\\x9b31m\\u202eevil\\u2028x\\x0ay\\x09z');
    const table = await adv(['get', 'runs']);
    expect(table.code, table.err).toBe(0);
    // One header and one row: the CR and newline in the values forge no more.
    expect(table.out.trimEnd().split('\n')).toHaveLength(2);
  });

  it('keeps JSON and YAML as the serializer writes them', async () => {
    const json = await adv(['get', 'run', RUN, '-o', 'json']);
    expect(json.code, json.err).toBe(0);
    expect((JSON.parse(json.out) as { metadata: { name: string } }).metadata.name).toBe(RUN);
  });
});
