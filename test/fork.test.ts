/**
 * `adv fork` end to end: a parent run of the toy workload on the real local backend, through the
 * real controller, with a file store; `adv fork` commits the child; the controller copies the
 * checkpoint inside the store; the child's attempt restores it, continues, and ends bit-identical
 * to where the parent got from the same step. Then the copy itself on both stores (a directory
 * and a real S3-protocol server), watched so that no checkpoint byte passes through the client.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { git } from '../controller/git/native.js';
import type { RunStatus } from '../controller/status/types.js';
import { CheckpointNotFound, committedSteps, copyCheckpoint } from '../runtime/checkpoint-copy.js';
import { MANIFEST, restoreLatest, stepPrefix, uploadCheckpoint } from '../runtime/checkpoint.js';
import { FileStore, openStore, type ObjectStore } from '../runtime/store/index.js';
import { S3Store } from '../runtime/store/s3.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { captureIo, removeTree } from './helpers/io.js';
import { startS3, type S3Server } from './helpers/servers/s3.js';
import { startGitHttp } from './helpers/git/git-http.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { waitFor } from './helpers/wait.js';

const TRAIN = readFileSync(join(import.meta.dirname, '..', 'examples', 'toy-train', 'train.py'), 'utf8');
const TRAIN_CMD = ['python3', 'train.py', '--steps', '30', '--ckpt-every', '10'];
const TERMINAL = new Set(['Succeeded', 'Failed', 'Cancelled']);
/** One pass of the controller over these runs: python starts, trains 30 steps, uploads 3 checkpoints. */
const RUN_MS = 120_000;

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-fork-'));
});
afterAll(() => removeTree(tmp));

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

/** Every file of a step in the store, by path: sha256 of its bytes. */
async function stepFiles(store: ObjectStore, run: string, step: number): Promise<Record<string, string>> {
  const prefix = stepPrefix(run, step);
  const out: Record<string, string> = {};
  for await (const o of store.list(prefix))
    if (o.key !== prefix + MANIFEST) out[o.key.slice(prefix.length)] = sha((await store.get(o.key))!);
  return out;
}

/** What an attempt's workload printed, from its log parts in the store. */
async function logsOf(store: ObjectStore, run: string, attempt: number): Promise<string> {
  let text = '';
  for await (const o of store.list(`runs/${run}/attempts/${attempt}/logs/`))
    text += new TextDecoder().decode(await store.get(o.key));
  return text;
}

describe('adv fork through the controller (local backend, file store)', () => {
  let wt: WorkTree;
  let dataDir: string;
  let c: Controller;
  let running: Promise<void>;
  let store: ObjectStore;
  const adv = async (...args: string[]) => {
    const io = captureIo({ HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') }, wt.dir);
    const code = await runCli(args, io);
    return { code, out: io.out(), err: io.err() };
  };
  /** The run's status once it has ended (the controller runs in the background). */
  const ended = (run: string): Promise<RunStatus> =>
    waitFor(
      () => {
        const st = c.runStatus(run)?.status;
        return st && TERMINAL.has(st.phase) ? st : undefined;
      },
      {
        what: `run ${run} to end`,
        timeoutMs: RUN_MS,
        detail: () => c.runStatus(run),
      },
    );

  beforeAll(async () => {
    // The parent holds at step 11 until the test has seen checkpoint 10 committed: adv exec ships
    // only the newest finished step, so a fast workload could supersede 10 before its upload.
    const hold = join(tmp, 'hold');
    await writeFile(hold, '');
    wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'storage.yaml': FILE_STORAGE,
      'train.py': TRAIN,
      'runs/parent.yaml':
        '# the parent: 30 steps, a checkpoint every 10\n' +
        runYaml('parent', [...TRAIN_CMD, '--hold-file', hold, '--hold-at', '11'], '  totalSteps: 30\n'),
    });
    dataDir = join(tmp, 'data');
    store = new FileStore(join(dataDir, 'store'));
    c = await Controller.create({
      repo: wt.dir,
      dataDir,
      pollIntervalMs: 100,
      fetchIntervalMs: 100,
      infra: { from: 'repo' },
    });
    running = c.run();
    await waitFor(() => store.head(stepPrefix('parent', 10) + MANIFEST), {
      what: 'checkpoint 10 of the parent committed',
      timeoutMs: RUN_MS,
      detail: () => c.runStatus('parent'),
    });
    await rm(hold);
    expect((await ended('parent')).phase).toBe('Succeeded');
  }, 2 * RUN_MS);
  afterAll(async () => {
    await c?.stop();
    await running;
    await wt?.cleanup();
  });

  it('refuses a step the parent has not committed, naming the steps it has', async () => {
    const r = await adv('fork', 'parent', '--step', '15', '--data-dir', dataDir);
    expect(r.code).toBe(3);
    expect(r.err).toContain(
      'run parent has no committed checkpoint at step 15 (nothing is stored at that step)',
    );
    expect(r.err).toContain(`its committed steps: ${(await committedSteps(store, 'parent')).join(', ')}`);
    expect(r.err).toContain('fix: pick one of them with --step');
    expect(await wt.git('ls-files', 'runs')).toBe('runs/parent.yaml');
  });

  it(
    'forks at step 10: the child restores the parent’s state at 10 bit for bit, continues, and shows its lineage',
    async () => {
      const r = await adv(
        'fork',
        'parent',
        '--step',
        '10',
        '--data-dir',
        dataDir,
        '--set',
        'policy.maxAttempts=2',
      );
      expect(r.code, r.err).toBe(0);
      expect(r.out).toContain(
        'run/parent-fork-10 forked from run/parent at step 10: runs/parent-fork-10.yaml',
      );
      // Committed on main: the parent's spec with the change and the pinned checkpoint.
      const spec = await wt.git('show', 'main:runs/parent-fork-10.yaml');
      expect(spec).toContain('# the parent: 30 steps');
      expect(spec).toContain('name: parent-fork-10');
      expect(spec).toContain('forkFrom: {run: parent, step: 10}');
      expect(spec).toContain('maxAttempts: 2');

      const st = await ended('parent-fork-10');
      expect(st.phase, JSON.stringify(st)).toBe('Succeeded');
      expect(st.forkedFrom).toEqual({ run: 'parent', step: 10 });
      expect(st.attempts).toHaveLength(1);
      expect(st.attempts[0]!.startStep).toBe(10);
      // The copy is the parent's checkpoint, byte for byte, and its manifest says where it came from.
      const parent10 = await stepFiles(store, 'parent', 10);
      expect(Object.keys(parent10).sort()).toEqual(['adv-metadata.json', 'state.json']);
      expect(await stepFiles(store, 'parent-fork-10', 10)).toEqual(parent10);
      const manifest = JSON.parse(
        new TextDecoder().decode(await store.get(stepPrefix('parent-fork-10', 10) + MANIFEST)),
      ) as unknown;
      expect(manifest).toMatchObject({
        run: 'parent-fork-10',
        forkedFrom: { run: 'parent', step: 10, attempt: 1 },
      });
      // The workload restored step 10, not scratch, and from there trained exactly as the parent did.
      const log = await logsOf(store, 'parent-fork-10', 1);
      expect(log).toContain('resumed from step 10');
      expect(log).not.toContain('starting from scratch');
      expect(await stepFiles(store, 'parent-fork-10', 30)).toEqual(await stepFiles(store, 'parent', 30));

      const child = await adv('describe', 'run', 'parent-fork-10');
      expect(child.out).toContain('Forked from:  run/parent at checkpoint step 10');
      const parent = await adv('describe', 'run', 'parent');
      expect(parent.out).toContain('Forks:        parent-fork-10 (step 10)');
    },
    2 * RUN_MS,
  );

  it(
    'forks the latest checkpoint by default, and a fork of a fork with another command; get runs --tree draws the family',
    async () => {
      const latest = await adv('fork', 'parent', '--data-dir', dataDir);
      expect(latest.code, latest.err).toBe(0);
      expect(latest.out).toContain('run/parent-fork-30 forked from run/parent at step 30');
      const more = "command=[python3, train.py, --steps, '40', --ckpt-every, '10']";
      const grandchild = await adv(
        'fork',
        'parent-fork-10',
        '--name',
        'grandchild',
        '--set',
        more,
        '--data-dir',
        dataDir,
      );
      expect(grandchild.code, grandchild.err).toBe(0);
      expect((await ended('parent-fork-30')).phase).toBe('Succeeded');
      expect(await ended('grandchild')).toMatchObject({
        phase: 'Succeeded',
        forkedFrom: { run: 'parent-fork-10', step: 30 },
      });
      const log = await logsOf(store, 'grandchild', 1);
      expect(log).toContain('resumed from step 30');
      expect(log).toContain('done: step 40');

      // adv get reads the status branch, which the controller commits to after its own view moved:
      // wait for the commits that say the forks ended, not for the view.
      const tree = await waitFor(
        async () => {
          const t = await adv('get', 'runs', '--tree');
          return t.code === 0 && !/\b(Pending|Submitting|Queued|Running)\b/.test(t.out) ? t : undefined;
        },
        { what: 'adv get runs --tree to show every run of the family ended', timeoutMs: RUN_MS },
      );
      const cells = tree.out
        .trimEnd()
        .split('\n')
        .map((l) => l.split(/ {3,}/).slice(0, 3));
      expect(cells).toEqual([
        ['NAME', 'FROM', 'PHASE'],
        ['parent', '-', 'Succeeded'],
        ['├─ parent-fork-10', 'parent@10', 'Succeeded'],
        ['│  └─ grandchild', 'parent-fork-10@30', 'Succeeded'],
        ['└─ parent-fork-30', 'parent@30', 'Succeeded'],
      ]);
    },
    2 * RUN_MS,
  );

  it(
    'a fork whose checkpoint is not in the store stalls with a condition that says which steps exist, until the spec is fixed',
    async () => {
      await wt.write('runs/lost.yaml', runYaml('lost', TRAIN_CMD, '  forkFrom: {run: parent, step: 15}\n'));
      await wt.commit('a fork of a step that was never committed');
      const stalled = await waitFor(
        () => c.runStatus('lost')?.status.conditions.find((x) => x.type === 'Stalled'),
        { what: 'run lost to stall', timeoutMs: RUN_MS, detail: () => c.runStatus('lost') },
      );
      expect(stalled).toMatchObject({ status: 'True', reason: 'ForkSourceMissing' });
      expect(stalled.message).toContain('run parent has no committed checkpoint at step 15');
      expect(stalled.message).toContain(
        `its committed steps: ${(await committedSteps(store, 'parent')).join(', ')}`,
      );
      expect(stalled.message).toContain('set spec.forkFrom.step to one of them');
      const st = c.runStatus('lost')!.status;
      expect(st.phase).toBe('Pending');
      // Nothing was started, and nothing was copied.
      expect(st.attempts.every((a) => !a.startedAt)).toBe(true);
      expect(await store.listFolders('runs/lost/')).toEqual([]);

      // The fix the condition names: a step the parent has. It applies (nothing ran), and the run starts there.
      await wt.write('runs/lost.yaml', runYaml('lost', TRAIN_CMD, '  forkFrom: {run: parent, step: 10}\n'));
      await wt.commit('fork from a step that is there');
      const fixed = await ended('lost');
      expect(fixed.phase, JSON.stringify(fixed)).toBe('Succeeded');
      expect(fixed.forkedFrom).toEqual({ run: 'parent', step: 10 });
      expect(fixed.attempts.at(-1)!.startStep).toBe(10);
    },
    2 * RUN_MS,
  );
});

describe('adv fork of a specs repo on a git host (smart HTTP, token)', () => {
  it('clones, commits the fork and pushes it; the store is --store; a name whose checkpoints exist is skipped', async () => {
    const server = await startGitHttp({ token: 'tok' });
    try {
      const bare = await server.createRepo('specs');
      const wt = await makeWorkTree(
        {
          'backends/local.yaml': LOCAL_BACKEND,
          'runs/base.yaml': runYaml('base', TRAIN_CMD),
        },
        server.url('specs'),
        'tok',
      );
      await wt.cleanup();
      const storeDir = await mkdtemp(join(tmp, 'remote-store-'));
      const store = new FileStore(storeDir);
      const src = join(tmp, 'remote-src');
      await mkdir(src, { recursive: true });
      await writeFile(join(src, 'state.json'), '{"step": 40}');
      await uploadCheckpoint(store, { run: 'base', step: 40, attempt: 1, dir: src });
      // An earlier run named base-fork-40 left checkpoints: its name is not reused.
      await uploadCheckpoint(store, { run: 'base-fork-40', step: 1, attempt: 1, dir: src });
      const io = captureIo({ HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache'), ADV_GIT_TOKEN: 'tok' }, tmp);
      const args = ['fork', 'base', '--repo', server.url('specs'), '--store', `file://${storeDir}`];
      expect(await runCli(args, io), io.err()).toBe(0);
      expect(io.out()).toContain('run/base-fork-40-2 forked from run/base at step 40');
      const pushed = (await git(['show', 'main:runs/base-fork-40-2.yaml'], { gitdir: bare })).toString();
      expect(pushed).toContain('forkFrom: {run: base, step: 40}');
      const denied = captureIo({ HOME: tmp, ADV_GIT_TOKEN: 'wrong' }, tmp);
      expect(await runCli(args, denied)).not.toBe(0);
      expect(
        (await git(['ls-tree', '--name-only', 'main', 'runs/'], { gitdir: bare }))
          .toString()
          .trim()
          .split('\n'),
      ).toEqual(['runs/base-fork-40-2.yaml', 'runs/base.yaml']);
    } finally {
      await server.stop();
    }
  }, 120_000);
});

/**
 * The store underneath, with every read or write of a checkpoint file's bytes refused: the copy
 * may list, head, copy and write the manifest, nothing else.
 */
function noBytesThrough(store: ObjectStore): { store: ObjectStore; copies: () => number } {
  const refuse = (what: string) => (key: string) => {
    if (key.endsWith(MANIFEST)) return undefined;
    throw new Error(`${what} ${key}: a checkpoint byte passed through the client`);
  };
  let copies = 0;
  const watched = Object.assign(Object.create(store) as ObjectStore, {
    get: (key: string) => refuse('get')(key) ?? store.get(key),
    getToFile: (key: string) => refuse('getToFile')(key),
    getStream: (key: string) => refuse('getStream')(key),
    putFile: (key: string) => refuse('putFile')(key),
    put: (key: string, body: Uint8Array | string) => refuse('put')(key) ?? store.put(key, body),
    copy: (src: string, dst: string) => (copies++, store.copy(src, dst)),
    list: (prefix: string) => store.list(prefix),
    listFolders: (prefix: string) => store.listFolders(prefix),
    head: (key: string) => store.head(key),
  });
  return { store: watched, copies: () => copies };
}

describe('copyCheckpoint on both stores', () => {
  let s3: S3Server;
  beforeAll(async () => {
    s3 = await startS3();
  }, 150_000);
  afterAll(() => s3?.stop());

  const stores: [string, () => Promise<ObjectStore>][] = [
    ['file', async () => openStore(`file://${await mkdtemp(join(tmp, 'store-'))}`)],
    [
      's3',
      async () =>
        new S3Store({
          bucket: s3.bucket,
          prefix: `f${Math.random().toString(36).slice(2, 8)}`,
          endpoint: s3.endpoint,
          forcePathStyle: true,
          credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
        }),
    ],
  ];

  it.each(stores)(
    '%s: files copied inside the store, manifest last; restore verifies every byte',
    async (_n, open) => {
      const store = await open();
      const src = join(tmp, `src-${_n}`);
      await mkdir(join(src, 'shards'), { recursive: true });
      await writeFile(join(src, 'state.json'), '{"step": 7}');
      await writeFile(join(src, 'shards', 'a b.bin'), Buffer.alloc(3 * 1024 * 1024, 7));
      await uploadCheckpoint(store, { run: 'p', step: 7, attempt: 2, dir: src });

      const watched = noBytesThrough(store);
      const m = await copyCheckpoint(watched.store, { from: 'p', to: 'kid', step: 7, attempt: 1 });
      expect(watched.copies()).toBe(2);
      expect(m).toMatchObject({
        run: 'kid',
        step: 7,
        attempt: 1,
        forkedFrom: { run: 'p', step: 7, attempt: 2 },
      });
      const restored = await restoreLatest(store, 'kid', join(tmp, `restore-${_n}`));
      expect(restored?.step).toBe(7);
      expect(await readFile(join(tmp, `restore-${_n}`, '7', 'shards', 'a b.bin'))).toEqual(
        await readFile(join(src, 'shards', 'a b.bin')),
      );

      // A step the parent has not committed: the error lists the ones it has, and nothing is copied.
      const err = await copyCheckpoint(store, { from: 'p', to: 'other', step: 8, attempt: 1 }).catch(
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(CheckpointNotFound);
      expect((err as CheckpointNotFound).committed).toEqual([7]);
      expect(await store.listFolders('runs/other/')).toEqual([]);
      expect(await store.copy('runs/p/ckpt/8/none', 'runs/other/x')).toBe(false);
    },
    120_000,
  );
});
