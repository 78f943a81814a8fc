import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { pack } from 'tar-stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { advExec } from './exec.js';
import { openStore } from './store/index.js';
import type { ObjectStore } from './store/types.js';

let tmp: string;
let store: ObjectStore;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-exec-code-'));
  store = await openStore(`file://${join(tmp, 'store')}`);
  const tar = pack();
  const chunks: Buffer[] = [];
  tar.on('data', (b: unknown) => chunks.push(b as Buffer));
  const ended = new Promise<void>((r) => tar.on('end', () => r()));
  tar.entry({ name: 'src/', type: 'directory', mode: 0o755 });
  tar.entry({ name: 'src/hello.sh', mode: 0o755 }, '#!/bin/sh\necho "in $(pwd)" > "$ADV_JOB_DIR/said"\n');
  tar.finalize();
  await ended;
  await store.put('code/tree1.tar.gz', gzipSync(Buffer.concat(chunks)));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

const exec = (name: string, code: { key: string; workdir?: string }, argv: string[]) =>
  advExec({
    run: name,
    attempt: 1,
    argv,
    store,
    code,
    jobDir: join(tmp, 'jobs', name),
    log: () => undefined,
  });

describe('adv exec --code', () => {
  it('fetches the payload from the store, extracts it into <job dir>/work and runs in the working dir', async () => {
    const { code, record } = await exec('fetched', { key: 'code/tree1.tar.gz', workdir: 'src' }, [
      './hello.sh',
    ]);
    expect({ code, reason: record.reason }).toEqual({ code: 0, reason: 'Completed' });
    expect(await readFile(join(tmp, 'jobs', 'fetched', 'said'), 'utf8')).toBe(
      `in ${join(tmp, 'jobs', 'fetched', 'work', 'src')}\n`,
    );
  });
  it('a payload not in the store is a StartFailed exit record, in the store too; the command never runs', async () => {
    const { code, record } = await exec('missing', { key: 'code/nope.tar.gz' }, ['sh', '-c', 'touch ran']);
    expect(code).toBe(127);
    expect(record).toMatchObject({ reason: 'StartFailed' });
    expect(record.message).toMatch(/code\/nope.tar.gz is not in file:/);
    const stored = JSON.parse(
      Buffer.from((await store.get('runs/missing/attempts/1/exit.json'))!).toString(),
    );
    expect(stored.reason).toBe('StartFailed');
  });
  it('refuses a working dir outside the code', async () => {
    const { record } = await exec('escape', { key: 'code/tree1.tar.gz', workdir: '../..' }, ['true']);
    expect(record).toMatchObject({
      reason: 'StartFailed',
      message: expect.stringMatching(/no working dir \.\.\/\.\./),
    });
  });
});
