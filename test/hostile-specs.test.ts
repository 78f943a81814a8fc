/**
 * A specs repo as a careless or hostile user leaves it: the whole bad-input corpus, plus names that
 * are paths (`../x`), shell (`$(touch …)`) and terminal escapes, a `__proto__` key, a binary file
 * and one too large — next to one good run. A real controller reconciles it; then:
 *
 * - the good run succeeds (one bad file never blocks the others);
 * - the status branch holds only files named by valid names, and `git fsck --strict` is clean (a
 *   `..` entry used to make every status push fail on hosts that check objects);
 * - what could not be loaded is on the status branch (`sources/specs.yaml`) by file and line, and
 *   on `/metrics`; fixing the files clears it, in a commit of its own;
 * - no status commit message carries a control character.
 */
import { cp, mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import type { SourceStatusDoc } from '../controller/status/types.js';
import { captureIo, removeTree } from './helpers/io.js';
import { makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';

const BAD = join(import.meta.dirname, 'fixtures', 'bad');
const MARKER = join(tmpdir(), `adv-hostile-pwned-${process.pid}`);

const named = (name: string, extra = '') =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: ${JSON.stringify(name)}\nspec:\n  command: ["true"]\n${extra}`;

const HOSTILE: Record<string, string | Uint8Array> = {
  'hostile/dotdot.yaml': named('../x'),
  'hostile/subst.yaml': named(`$(touch ${MARKER})`),
  'hostile/escape.yaml': named('a\u001b[2Jforged\rrow'),
  'hostile/proto.yaml': `apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: proto\nspec:\n  command: ["true"]\n  __proto__: {polluted: true}\n`,
  'hostile/binary.yaml': new Uint8Array([0x6b, 0x3a, 0x20, 0x00, 0x01, 0x02, 0x0a]),
  'hostile/big.yaml': 'apiVersion: adventuretime.dev/v1alpha1\n' + '# padding\n'.repeat(150_000),
};

describe('a hostile specs repo', () => {
  let wt: WorkTree;
  let dataDir: string;
  let c: Controller;
  const git = (...args: string[]) => wt.git(...args);

  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'adv-hostile-'));
    wt = await makeWorkTree({
      'backends/zz-local.yaml':
        'apiVersion: adventuretime.dev/v1alpha1\nkind: Backend\nmetadata:\n  name: zz-local\nspec:\n  type: local\n',
      'runs/good-run.yaml': runYaml('good-run', 'true').replace('order: [local]', 'order: [zz-local]'),
    });
    for (const name of await readdir(BAD))
      await cp(join(BAD, name), join(wt.dir, 'bad', name), { recursive: true });
    for (const [file, content] of Object.entries(HOSTILE)) await wt.write(file, content as string);
    await wt.commit('a repo with every kind of bad file');
    c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
    await c.runUntilIdle({ timeoutMs: 120_000 });
  }, 180_000);

  afterAll(async () => {
    await c?.stop();
    await wt?.cleanup();
    if (dataDir) await removeTree(dataDir);
  });

  it('runs the good run', () => {
    expect(c.runStatus('good-run')?.status.phase).toBe('Succeeded');
  });

  it('keys status only by valid names, and the status branch passes git fsck --strict', async () => {
    const paths = (await git('ls-tree', '-r', '--name-only', 'adventuretime/status')).split('\n');
    for (const p of paths)
      expect(p, p).toMatch(/^(runs|dags|sweeps|alerts|backends|sources)\/[a-z0-9][a-z0-9.-]*\.yaml$/);
    expect(paths).toContain('sources/specs.yaml');
    // fsck walks every status commit and tree: a `..` entry or a bad mode anywhere fails it.
    const fsck = await git('fsck', '--strict', '--no-dangling', 'adventuretime/status');
    expect(fsck).toBe('');
    await expect(readFile(MARKER)).rejects.toThrow();
  });

  it('records every file that cannot be loaded by file and line, and counts them on /metrics', async () => {
    const doc = parse(await git('show', 'adventuretime/status:sources/specs.yaml')) as SourceStatusDoc;
    const ready = doc.status.conditions.find((x) => x.type === 'Ready')!;
    expect(ready).toMatchObject({ status: 'False', reason: 'LoadFailed' });
    const byFile = new Map(doc.status.errors.map((e) => [e.file, e]));
    for (const file of Object.keys(HOSTILE)) expect(byFile.has(file), file).toBe(true);
    expect(doc.status.errors).toContainEqual(
      expect.objectContaining({ file: 'hostile/dotdot.yaml', line: 4, code: 'SchemaPattern', kind: 'Run' }),
    );
    expect(byFile.get('hostile/big.yaml')).toMatchObject({ line: 1, code: 'FileTooLarge' });
    expect(byFile.get('hostile/binary.yaml')?.code).toBe('BinaryFile');
    expect(byFile.get('hostile/proto.yaml')?.fix).toBeTruthy();
    // Every bad case of the corpus is reported somewhere: here, or on an invalid run's (DAG's, sweep's) own status.
    for (const name of await readdir(BAD)) {
      const here = doc.status.errors.some((e) => e.file.startsWith(`bad/${name}/`));
      const onRun =
        (await git(
          'grep',
          '-l',
          '-F',
          `bad/${name}/`,
          'adventuretime/status',
          '--',
          'runs',
          'dags',
          'sweeps',
        ).catch(() => '')) !== '';
      expect(here || onRun, name).toBe(true);
    }
    const metrics = await c.metrics.text();
    expect(metrics).toContain(`adventuretime_spec_load_errors ${doc.status.errorCount}`);
    // adv get says so under its table, on stderr (stdout stays the table).
    const io = captureIo({ HOME: dataDir }, wt.dir);
    expect(await runCli(['get', 'runs', '--repo', wt.dir], io)).toBe(0);
    expect(io.err()).toContain(
      `warning: ${doc.status.errorCount} errors in the specs repo that no run shows, first `,
    );
    expect(io.err()).toContain('git show adventuretime/status:sources/specs.yaml');
    expect(io.out()).not.toContain('warning');
  });

  it('writes no control character into a status commit message', async () => {
    const log = await git('log', '--format=%B', 'adventuretime/status');
    // eslint-disable-next-line no-control-regex
    expect(log).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f]/);
  });

  it('clears the source status once the bad files are gone', async () => {
    await wt.git('rm', '-r', '-q', 'bad', 'hostile');
    await wt.commit('remove the bad files');
    await c.runUntilIdle({ timeoutMs: 60_000 });
    const doc = parse(await git('show', 'adventuretime/status:sources/specs.yaml')) as SourceStatusDoc;
    expect(doc.status.errorCount).toBe(0);
    expect(doc.status.conditions.find((x) => x.type === 'Ready')).toMatchObject({ status: 'True' });
    expect(await git('log', '-1', '--format=%B', 'adventuretime/status')).toMatch(
      /^(- )?source\/specs: every spec file loads$/m,
    );
    expect(await c.metrics.text()).toContain('adventuretime_spec_load_errors 0');
  });
});
