/**
 * A Run's `inputs` on the embedded default (local backend, file store): a dataset pushed with
 * `adv dataset push` into the repo's own store and recorded as a version reaches the job as
 * `ADV_DATASETS` (the job writes it out), resolved to the version, digest and store prefix; a run
 * naming a dataset that does not exist is held with the fix, and holds nothing else.
 */
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { Controller } from '../controller/controller.js';
import { parseDatasetInputs, pushedPrefix } from '../runtime/datasets/contract.js';
import { packDir } from '../cli/commands/dataset.js';
import { FILE_STORAGE } from './helpers/backends/kinds.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';
import { passUntil } from './helpers/wait.js';

/** One attempt of a run on a loaded machine (submit, run, observe, commit), never a window. */
const ATTEMPT_MS = 60_000;

let tmp: string;
let wt: WorkTree;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-run-inputs-'));
});
afterAll(async () => {
  await wt?.cleanup();
  await removeTree(tmp);
});

describe('a Run with inputs', { timeout: 3 * ATTEMPT_MS }, () => {
  it('gets ADV_DATASETS with the pushed version; a run naming an unknown dataset is held alone', async () => {
    const data = join(tmp, 'data');
    await mkdir(join(data, 'shards'), { recursive: true });
    await writeFile(join(data, 'vocab.txt'), 'a b c\n');
    await writeFile(join(data, 'shards', '0.bin'), 'shard zero\n');
    const out = join(tmp, 'seen.json');
    wt = await makeWorkTree({ 'backends/local.yaml': LOCAL_BACKEND, 'storage.yaml': FILE_STORAGE });
    const dataDir = join(tmp, 'controller');

    // Pushed into the store of the repo's Storage spec, as the controller will open it.
    const io = captureIo({ ...process.env, HOME: tmp }, wt.dir);
    const code = await runCli(
      ['dataset', 'push', data, 'tokens', '--repo', wt.dir, '--data-dir', dataDir],
      io,
    );
    expect(code, io.err()).toBe(0);
    const { digest } = await packDir(data, 'tokens');
    expect(io.out()).toContain(`tokens@1 pushed to file://${join(dataDir, 'store')}/`);

    const write = `printf '%s' "$ADV_DATASETS" > ${out}`;
    await wt.write(
      'runs/reader.yaml',
      runYaml('reader', ['sh', '-c', write], '  inputs: [{dataset: tokens, as: train}]\n'),
    );
    await wt.write('runs/lost.yaml', runYaml('lost', ['true'], '  inputs: [{dataset: tokenz, as: train}]\n'));
    await wt.commit('a run that reads tokens, one that misspells it');

    const c = await Controller.create({ repo: wt.dir, dataDir, pollIntervalMs: 100 });
    try {
      await c.runUntilIdle({ timeoutMs: 2 * ATTEMPT_MS });
      const reader = c.runStatus('reader')?.status;
      expect(reader?.phase, JSON.stringify(reader, null, 1)).toBe('Succeeded');
      expect(parseDatasetInputs(await readFile(out, 'utf8'))).toEqual([
        {
          as: 'train',
          dataset: 'tokens@1',
          digest,
          source: { store: { prefix: pushedPrefix('tokens', digest) } },
        },
      ]);
      const lost = c.runStatus('lost')?.status;
      expect(lost?.phase).not.toBe('Succeeded');
      expect(lost?.attempts ?? []).toEqual([]);
      const valid = lost?.conditions.find((x) => x.type === 'Valid');
      expect(valid).toMatchObject({ status: 'False' });
      expect(valid?.message).toContain('runs/lost.yaml');
      expect(valid?.message).toContain('Dataset "tokenz" is not defined in this repo');
      expect(valid?.message).toContain('did you mean "tokens"?');

      // The run's desired state holds the version it resolved to: a new version is a change of
      // it, which a started run without onSpecChange: Restart refuses, naming the field.
      expect(c.runStatus('reader')?.appliedSpec?.inputs?.[0]?.dataset).toMatch(/^tokens@1#[0-9a-f]{12}$/);
      await writeFile(join(data, 'vocab.txt'), 'a b c d\n');
      const again = captureIo({ ...process.env, HOME: tmp }, wt.dir);
      expect(
        await runCli(['dataset', 'push', data, 'tokens', '--repo', wt.dir, '--data-dir', dataDir], again),
      ).toBe(0);
      expect(again.out()).toContain('tokens@2 pushed');
      c.requestFetch('test');
      const rejected = () =>
        c
          .runStatus('reader')
          ?.status.conditions.find((x) => x.type === 'SpecChangeRejected' && x.status === 'True');
      await passUntil(c, 'the new version to reach reader', () => rejected() !== undefined, ATTEMPT_MS);
      expect(rejected()?.message).toContain('/inputs/0/dataset');
    } finally {
      await c.stop();
    }
  });
});
