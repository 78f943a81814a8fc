import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  Kubectl,
  KubectlError,
  KubectlFailure,
  ListsUnderWay,
  classifyKubectl,
  errorText,
  listsKey,
  parseServerErrors,
  type KubectlRunner,
} from './kubectl.js';

/** What the real kubectl 1.32 printed against test/helpers/k8s/fake-k8s.ts (see its report in docs). */
const ALREADY =
  'Error from server (AlreadyExists): error when creating "STDIN": jobs.batch.volcano.sh "j1" already exists';
const SECRET_ALREADY =
  'Error from server (AlreadyExists): error when creating "STDIN": secrets "j1" already exists';
const NOT_FOUND = 'Error from server (NotFound): jobs.batch.volcano.sh "nope" not found';
const CONFLICT =
  'Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled on jobs.batch.volcano.sh "lst": the object has been modified; please apply your changes to the latest version and try again';
const DENIED =
  'Error from server: error when creating "STDIN": admission webhook "validatejob.volcano.sh" denied the request: unable to find job queue: queue.scheduling.volcano.sh "q" not found;';
/** An unreachable API server: the client library's klog lines, then kubectl's own. */
const REFUSED =
  'E1124 12:08:36.757278   20626 memcache.go:265] "Unhandled Error" err="couldn\'t get current server API group list: Get \\"https://127.0.0.1:1/api?timeout=32s\\": dial tcp 127.0.0.1:1: connect: connection refused"\nE1124 12:08:36.758666   20626 memcache.go:265] "Unhandled Error" err="couldn\'t get current server API group list: Get \\"https://127.0.0.1:1/api?timeout=32s\\": dial tcp 127.0.0.1:1: connect: connection refused"\nE1124 12:08:36.760064   20626 memcache.go:265] "Unhandled Error" err="couldn\'t get current server API group list: Get \\"https://127.0.0.1:1/api?timeout=32s\\": dial tcp 127.0.0.1:1: connect: connection refused"\nE1124 12:08:36.761426   20626 memcache.go:265] "Unhandled Error" err="couldn\'t get current server API group list: Get \\"https://127.0.0.1:1/api?timeout=32s\\": dial tcp 127.0.0.1:1: connect: connection refused"\nE1124 12:08:36.762753   20626 memcache.go:265] "Unhandled Error" err="couldn\'t get current server API group list: Get \\"https://127.0.0.1:1/api?timeout=32s\\": dial tcp 127.0.0.1:1: connect: connection refused"\nThe connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?\n';
const STRICT =
  'Error from server (BadRequest): error when creating "STDIN": Job in version "v1alpha1" cannot be handled as a Job: strict decoding error: unknown field "spec.tasks[0].bogus"';

describe('kubectl output', () => {
  it('parses the server’s error lines, with the object named', () => {
    expect(parseServerErrors(`${SECRET_ALREADY}\n${ALREADY}\n`)).toEqual([
      { reason: 'AlreadyExists', message: 'secrets "j1" already exists', resource: 'secrets', name: 'j1' },
      {
        reason: 'AlreadyExists',
        message: 'jobs.batch.volcano.sh "j1" already exists',
        resource: 'jobs.batch.volcano.sh',
        name: 'j1',
      },
    ]);
  });
  it.each([
    [NOT_FOUND, KubectlFailure.NotFound],
    [ALREADY, KubectlFailure.AlreadyExists],
    [CONFLICT, KubectlFailure.Conflict],
    [DENIED, KubectlFailure.Invalid],
    [STRICT, KubectlFailure.Invalid],
    ['error: You must be logged in to the server (Unauthorized)', KubectlFailure.Auth],
    [
      'Error from server (Forbidden): jobs.batch.volcano.sh is forbidden: User "u" cannot list resource "jobs"',
      KubectlFailure.Auth,
    ],
    ['Unable to connect to the server: net/http: TLS handshake timeout', KubectlFailure.Unreachable],
    [
      'The connection to the server 127.0.0.1:6443 was refused - did you specify the right host or port?',
      KubectlFailure.Unreachable,
    ],
  ])('classifies %s', (stderr, reason) => {
    expect(classifyKubectl(stderr)).toBe(reason);
  });
});

describe('kubectl error text', () => {
  it('is kubectl’s own line, not the klog lines logged on the way', () => {
    expect(errorText(REFUSED)).toBe(
      'The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?',
    );
    expect(classifyKubectl(REFUSED)).toBe(KubectlFailure.Unreachable);
  });
  it('is the last klog error, without its header, when kubectl said nothing else', () => {
    const klogOnly = REFUSED.split('\n')
      .filter((l) => l.startsWith('E'))
      .join('\n');
    expect(errorText(klogOnly)).toMatch(/^"Unhandled Error" err="couldn't get current server API group list/);
    expect(errorText('W1124 12:00:00.000000   1 warnings.go:70] v1 Endpoints is deprecated\n')).toBe(
      'kubectl failed without a message',
    );
  });
});

describe('Kubectl', () => {
  const recorder = (answer: (args: string[]) => { code: number; stdout?: string; stderr?: string }) => {
    const calls: { args: string[]; input?: string }[] = [];
    const run: KubectlRunner = async (args, opts) => {
      calls.push({ args, ...(opts.input !== undefined ? { input: opts.input } : {}) });
      const a = answer(args);
      return { code: a.code, stdout: a.stdout ?? '', stderr: a.stderr ?? '' };
    };
    return { calls, run };
  };

  it('creates a List in one call with the Backend’s kubeconfig and context; existing objects are adopted, not errors', async () => {
    const r = recorder(() => ({ code: 1, stdout: 'secret/j1\n', stderr: `${ALREADY}\n` }));
    const k = new Kubectl({ kubeconfig: '/k', context: 'lab', run: r.run });
    const res = await k.create('ml', [{ kind: 'Secret' }, { kind: 'Job' }]);
    expect(res).toEqual({
      created: ['secret/j1'],
      existing: [{ resource: 'jobs.batch.volcano.sh', name: 'j1' }],
    });
    expect(r.calls[0]!.args).toEqual([
      '--kubeconfig',
      '/k',
      '--context',
      'lab',
      '--namespace',
      'ml',
      '--request-timeout',
      '60s',
      'create',
      '-f',
      '-',
      '-o',
      'name',
    ]);
    expect(JSON.parse(r.calls[0]!.input!)).toMatchObject({
      kind: 'List',
      items: [{ kind: 'Secret' }, { kind: 'Job' }],
    });
  });
  it('throws on any other failure, with kubectl’s words and a reason', async () => {
    const k = new Kubectl({ run: recorder(() => ({ code: 1, stderr: `${DENIED}\n` })).run });
    const e = await k.create('ml', [{}]).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(KubectlError);
    expect((e as KubectlError).reason).toBe(KubectlFailure.Invalid);
    expect((e as KubectlError).message).toContain('denied the request');
  });
  it('get: undefined when NotFound; list: one call for several kinds', async () => {
    const r = recorder((args) =>
      args.includes('nope')
        ? { code: 1, stderr: NOT_FOUND }
        : {
            code: 0,
            stdout: JSON.stringify({ kind: 'List', items: [{ kind: 'Job', metadata: { name: 'a' } }] }),
          },
    );
    const k = new Kubectl({ run: r.run });
    expect(await k.get('ml', 'jobs.batch.volcano.sh', 'nope')).toBeUndefined();
    expect(await k.list('ml', ['jobs.batch.volcano.sh', 'pods'], 'a=b')).toEqual([
      { kind: 'Job', metadata: { name: 'a' } },
    ]);
    expect(r.calls[1]!.args.slice(-6)).toEqual([
      'get',
      'jobs.batch.volcano.sh,pods',
      '-l',
      'a=b',
      '-o',
      'json',
    ]);
  });
  it('never puts what kubectl printed in an error about its output (it may be a Secret)', async () => {
    const k = new Kubectl({ run: recorder(() => ({ code: 0, stdout: '{"data":{"TOKEN":"c2VjcmV0"}' })).run });
    const e = (await k.get('ml', 'secret', 's').catch((x: unknown) => x)) as Error;
    expect(e.message).not.toContain('c2VjcmV0');
  });
  it('says how to fix a missing kubectl', async () => {
    const k = new Kubectl({ run: async () => ({ code: null, stdout: '', stderr: '', missing: true }) });
    await expect(k.list('ml', ['pods'], 'a=b')).rejects.toThrow(/kubectl is not installed/);
  });
  it('a list asked while the same one is under way shares its answer; a different one, or a later one, runs', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const calls: string[][] = [];
    const k = new Kubectl({
      run: async (args) => {
        calls.push(args);
        await gate;
        return {
          code: 0,
          stdout: JSON.stringify({ items: [{ kind: 'Pod', metadata: { name: 'p' } }] }),
          stderr: '',
        };
      },
    });
    const [a, b, c] = [k.list('ml', ['pods'], 'x'), k.list('ml', ['pods'], 'x'), k.list('ml', ['pods'], 'y')];
    release();
    expect(await a).toEqual([{ kind: 'Pod', metadata: { name: 'p' } }]);
    expect(await b).toBe(await a);
    await c;
    expect(calls.map((x) => x.at(-3))).toEqual(['x', 'y']);
    await k.list('ml', ['pods'], 'x');
    expect(calls).toHaveLength(3);
  });
  it('clients given the lists under way of one environment share a list under way: one kubectl process', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'adv-kubectl-'));
    try {
      const exe = join(dir, 'kubectl');
      const count = join(dir, 'count');
      await writeFile(exe, `#!/bin/sh\necho "$*" >> "$COUNT"\necho '{"items":[]}'\n`);
      await chmod(exe, 0o755);
      const env = { ...process.env, COUNT: count };
      // What `BackendContext.shared` hands every client of this environment (same contents, same key).
      const lists = new ListsUnderWay();
      expect(listsKey({ ...env })).toBe(listsKey(env));
      expect(listsKey({ ...env, COUNT: 'elsewhere' })).not.toBe(listsKey(env));
      const one = new Kubectl({ executable: exe, env, lists });
      const two = new Kubectl({ executable: exe, env, lists });
      const other = new Kubectl({ executable: exe, env, lists, context: 'other-cluster' });
      await Promise.all([
        one.list('ml', ['pods'], 'l'),
        two.list('ml', ['pods'], 'l'),
        other.list('ml', ['pods'], 'l'),
      ]);
      const lines = (await readFile(count, 'utf8')).trim().split('\n');
      expect(lines).toHaveLength(2);
      expect(lines.filter((l) => l.includes('--context other-cluster'))).toHaveLength(1);
      // Clients given no shared lists (no `BackendContext.shared`) each make their own call.
      await Promise.all([1, 2].map(() => new Kubectl({ executable: exe, env }).list('ml', ['pods'], 'l')));
      expect((await readFile(count, 'utf8')).trim().split('\n')).toHaveLength(4);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
