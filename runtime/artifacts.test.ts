import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { downloadOutput, outputPrefix, readOutputManifest } from './artifacts.js';
import { advExec } from './exec.js';
import { openStore } from './store/index.js';
import type { ObjectStore } from './store/types.js';

let tmp: string;
let store: ObjectStore;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-artifacts-'));
  store = await openStore(`file://${join(tmp, 'store')}`);
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

const run = (name: string, argv: string[], env: Record<string, string>) =>
  advExec({
    run: name,
    attempt: 1,
    argv,
    store,
    jobDir: join(tmp, 'jobs', name),
    env,
    log: () => undefined,
    heartbeatSec: 60,
  });

describe('DAG outputs and inputs through adv exec', () => {
  it('publishes declared outputs (manifest last) and hands them to a reader, verified', async () => {
    const w = await run(
      'd.make',
      [
        'sh',
        '-c',
        'mkdir -p "$ADV_ARTIFACT_DIR/data/sub" && echo hi > "$ADV_ARTIFACT_DIR/data/a.txt" && echo there > "$ADV_ARTIFACT_DIR/data/sub/b.txt"',
      ],
      {
        ADV_OUTPUTS: 'data',
      },
    );
    expect(w.record.reason).toBe('Completed');
    const m = await readOutputManifest(store, 'd.make', 'data');
    expect(m).toMatchObject({ kind: 'ArtifactManifest', run: 'd.make', output: 'data', totalBytes: 9 });
    const r = await run(
      'd.read',
      ['sh', '-c', 'cat "$ADV_INPUT_IN_DIR/a.txt" "$ADV_INPUT_IN_DIR/sub/b.txt" > "$ADV_JOB_DIR/seen"'],
      {
        ADV_INPUTS: JSON.stringify({ IN: { run: 'd.make', output: 'data' } }),
      },
    );
    expect(r.record.reason).toBe('Completed');
    expect(await readFile(join(tmp, 'jobs', 'd.read', 'seen'), 'utf8')).toBe('hi\nthere\n');
  });

  it('fails the attempt, saying where to write it, when a declared output is missing', async () => {
    const r = await run('d.lazy', ['true'], { ADV_OUTPUTS: 'params' });
    expect(r.record).toMatchObject({ reason: 'Error', exitCode: 1 });
    expect(r.record.message).toMatch(
      /^declared output params not written: put it in .*\/artifacts\/params\/$/,
    );
    expect(await readOutputManifest(store, 'd.lazy', 'params')).toBeUndefined();
  });

  it('refuses an input whose bytes do not match the manifest, and an input never completed', async () => {
    await writeFile(join(tmp, 'store', outputPrefix('d.make', 'data'), 'a.txt'), 'HI\n');
    await expect(downloadOutput(store, 'd.make', 'data', join(tmp, 'x'))).rejects.toThrow(
      /a\.txt does not match its manifest/,
    );
    const r = await run('d.read2', ['true'], {
      ADV_INPUTS: JSON.stringify({ IN: { run: 'd.none', output: 'data' } }),
    });
    expect(r.record).toMatchObject({ reason: 'Error', exitCode: 1 });
    expect(r.record.message).toMatch(
      /^input IN could not be fetched: output data of d\.none is not complete \(no manifest in file:\/\//,
    );
  });
});
