import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  downloadOutput,
  listParts,
  partPrefix,
  PartExistsError,
  readOutputManifest,
  readPartManifest,
  uploadOutput,
  uploadPart,
} from './artifacts.js';
import { advExec } from './exec.js';
import { openStore } from './store/index.js';
import type { ObjectStore } from './store/types.js';

let tmp: string;
let store: ObjectStore;
let storeDir: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-parts-'));
  storeDir = join(tmp, 'store');
  store = await openStore(`file://${storeDir}`);
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

const attempt = (run: string, n: number, script: string, jobDir = join(tmp, 'jobs', `${run}-${n}`)) => {
  const lines: string[] = [];
  const done = advExec({
    run,
    attempt: n,
    argv: ['sh', '-c', script],
    store,
    jobDir,
    env: { ADV_OUTPUTS: 'rollouts', STORE_DIR: storeDir },
    log: (l) => lines.push(l),
    heartbeatSec: 0.2,
  });
  return done.then((r) => ({ ...r, lines, jobDir }));
};

/** Commits a part the way the contract says: written under a hidden name, renamed into place. */
const commitPart = (name: string, content: string) =>
  `P="$ADV_ARTIFACT_DIR/rollouts/parts"; mkdir -p "$P/.w-${name}" && printf '${content}' > "$P/.w-${name}/data.jsonl" && mv "$P/.w-${name}" "$P/${name}"`;

describe('parts of an output, across attempts', () => {
  it('ships each committed part while the run goes on, hands them to the next attempt, and lists every part in the completion manifest', async () => {
    // Attempt 1 commits a part, waits until it is in the store (shipped while running: exit 4 if
    // it never is, within a minute), then fails.
    const a1 = await attempt(
      'roll',
      1,
      `${commitPart('p1', 'one\\n')} && i=0; while [ ! -f "$STORE_DIR/${partPrefix('roll', 'rollouts', 'p1')}manifest.json" ]; do ` +
        `i=$((i+1)); [ $i -gt 1200 ] && exit 4; sleep 0.05; done; ` +
        `mkdir -p "$ADV_ARTIFACT_DIR/rollouts/parts/.half" && echo partial > "$ADV_ARTIFACT_DIR/rollouts/parts/.half/x"; exit 3`,
    );
    expect(a1.record).toMatchObject({ reason: 'Error', exitCode: 3 });
    expect(await readPartManifest(store, 'roll', 'rollouts', 'p1')).toMatchObject({
      kind: 'ArtifactPart',
      part: 'p1',
      attempt: 1,
      totalBytes: 4,
    });
    expect((await listParts(store, 'roll', 'rollouts')).map((p) => p.name)).toEqual(['p1']);
    expect(await readOutputManifest(store, 'roll', 'rollouts')).toBeUndefined();

    // Attempt 2, on a fresh job dir, finds p1 there, adds p2 and a loose file, and succeeds.
    const a2 = await attempt(
      'roll',
      2,
      `ls "$ADV_ARTIFACT_DIR/rollouts/parts" > "$ADV_JOB_DIR/seen" && cat "$ADV_ARTIFACT_DIR/rollouts/parts/p1/data.jsonl" >> "$ADV_JOB_DIR/seen" && ` +
        `${commitPart('p2', 'two\\n')} && echo summary > "$ADV_ARTIFACT_DIR/rollouts/summary.txt"`,
    );
    expect(a2.record.reason).toBe('Completed');
    expect(await readFile(join(a2.jobDir, 'seen'), 'utf8')).toBe('p1\none\n');
    expect(a2.lines.some((l) => /part p1 committed/.test(l))).toBe(false);
    expect((await readPartManifest(store, 'roll', 'rollouts', 'p1')) as { attempt: number }).toMatchObject({
      attempt: 1,
    });
    const m = await readOutputManifest(store, 'roll', 'rollouts');
    expect(m).toMatchObject({ kind: 'ArtifactManifest', totalBytes: 16 });
    expect(typeof m === 'object' && m.files.map((f) => f.path)).toEqual([
      'parts/p1/data.jsonl',
      'parts/p2/data.jsonl',
      'summary.txt',
    ]);
    // A reader of the complete output (a DAG input) gets every part, verified.
    const dest = join(tmp, 'pulled');
    await downloadOutput(store, 'roll', 'rollouts', dest);
    expect(await readFile(join(dest, 'parts', 'p1', 'data.jsonl'), 'utf8')).toBe('one\n');
    expect(await readFile(join(dest, 'parts', 'p2', 'data.jsonl'), 'utf8')).toBe('two\n');
  });

  it('never overwrites a committed part: other content under its name is refused, in the log', async () => {
    await expect(
      uploadPart(store, {
        run: 'roll',
        output: 'rollouts',
        part: 'p1',
        attempt: 9,
        dir: await dirWith('ONE\n'),
      }),
    ).rejects.toBeInstanceOf(PartExistsError);
    // The same content again is no error: nothing is uploaded.
    const same = await uploadPart(store, {
      run: 'roll',
      output: 'rollouts',
      part: 'p1',
      attempt: 9,
      dir: await dirWith('one\n'),
    });
    expect(same).toMatchObject({ uploaded: false, manifest: { attempt: 1 } });
    // A workload that commits other content under a committed name: refused, said in the log.
    const a3 = await attempt(
      'roll',
      3,
      `rm -rf "$ADV_ARTIFACT_DIR/rollouts/parts/p1" && ${commitPart('p1', 'changed\\n')}`,
    );
    expect(a3.record.reason).toBe('Completed');
    expect(
      a3.lines.some((l) =>
        /^error: part p1 of output rollouts is committed already with other content/.test(l),
      ),
    ).toBe(true);
    const p1 = await readPartManifest(store, 'roll', 'rollouts', 'p1');
    expect(p1).toMatchObject({ attempt: 1, totalBytes: 4 });
    expect(await readFile(join(storeDir, partPrefix('roll', 'rollouts', 'p1'), 'data.jsonl'), 'utf8')).toBe(
      'one\n',
    );
  });
});

async function dirWith(content: string): Promise<string> {
  const d = await mkdtemp(join(tmp, 'part-'));
  await writeFile(join(d, 'data.jsonl'), content);
  return d;
}

it('puts the committed content back where a job dir kept a different copy of a part', async () => {
  const jobDir = join(tmp, 'jobs', 'stale');
  await mkdir(join(jobDir, 'artifacts', 'rollouts', 'parts', 'p2'), { recursive: true });
  await writeFile(join(jobDir, 'artifacts', 'rollouts', 'parts', 'p2', 'data.jsonl'), 'stale\n');
  const a4 = await attempt(
    'roll',
    4,
    'cat "$ADV_ARTIFACT_DIR/rollouts/parts/p2/data.jsonl" > "$ADV_JOB_DIR/seen"',
    jobDir,
  );
  expect(a4.record.reason).toBe('Completed');
  expect(await readFile(join(jobDir, 'seen'), 'utf8')).toBe('two\n');
  expect(a4.lines.some((l) => /differed from the committed part p2: replaced by it/.test(l))).toBe(true);
});

it('stops at a part whose manifest is unusable, before the workload and before calling the output complete', async () => {
  await attempt('broken', 1, `${commitPart('p0', 'x\\n')} && exit 1`);
  const key = `${partPrefix('broken', 'rollouts', 'p0')}manifest.json`;
  await writeFile(join(storeDir, key), '{not json');
  const r = await attempt('broken', 2, 'touch "$ADV_JOB_DIR/started"');
  expect(r.record).toMatchObject({ reason: 'Error', exitCode: 1 });
  expect(r.record.message).toBe(
    `committed parts could not be fetched: part p0 of output rollouts of broken: manifest is not JSON (${store.url}${key}; delete that part's prefix to go on without it)`,
  );
  expect(existsSync(join(r.jobDir, 'started'))).toBe(false);
  await expect(
    uploadOutput(store, { run: 'broken', output: 'rollouts', attempt: 3, dir: await dirWith('y\n') }),
  ).rejects.toThrow(/^part p0: manifest is not JSON/);
  expect(await readOutputManifest(store, 'broken', 'rollouts')).toBeUndefined();
});

it('does not call an output complete while a part the workload committed is not in the store', async () => {
  // A file where the part's folder would go: its upload fails at every try.
  const r = await attempt(
    'unshipped',
    1,
    `Q="$STORE_DIR/runs/unshipped/outputs/rollouts/parts"; mkdir -p "$Q" && touch "$Q/p0" && ${commitPart('p0', 'x\\n')}`,
  );
  expect(r.record).toMatchObject({ reason: 'Error', exitCode: 1 });
  expect(r.record.message).toBe(
    'output rollouts could not be published: part p0 did not reach the store (see the warnings above): the output is not complete without it',
  );
  expect(r.lines.some((l) => /^warning: output rollouts: part p0 not uploaded yet/.test(l))).toBe(true);
  expect(await readOutputManifest(store, 'unshipped', 'rollouts')).toBeUndefined();
});
