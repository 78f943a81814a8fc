/**
 * `adv artifacts ls|pull`: a run's outputs from a file store holding one complete output (with
 * parts) and one still in parts, through the real CLI entry.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureIo } from '../../test/helpers/io.js';
import { partPrefix, uploadOutput, uploadPart } from '../../runtime/artifacts.js';
import { FileStore } from '../../runtime/store/file.js';
import { runCli } from '../program.js';
import type { OutputListing } from './artifacts.js';

let tmp: string;
let store: FileStore;
let url: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-artifacts-cli-'));
  url = `file://${join(tmp, 'store')}`;
  store = new FileStore(join(tmp, 'store'));
  const dir = async (files: Record<string, string>) => {
    const d = await mkdtemp(join(tmp, 'src-'));
    for (const [p, c] of Object.entries(files)) {
      await mkdir(join(d, p, '..'), { recursive: true });
      await writeFile(join(d, p), c);
    }
    return d;
  };
  const base = { run: 'roll', attempt: 1 };
  // `samples`: two parts committed, the run still going; `model`: a part plus a loose file, complete.
  await uploadPart(store, { ...base, output: 'samples', part: 'p0', dir: await dir({ 'a.jsonl': 'a\n' }) });
  await uploadPart(store, { ...base, output: 'samples', part: 'p1', dir: await dir({ 'b.jsonl': 'bb\n' }) });
  await uploadPart(store, { ...base, output: 'model', part: 'shard-0', dir: await dir({ 'w.bin': 'w0' }) });
  await uploadOutput(store, { ...base, output: 'model', dir: await dir({ 'config.json': '{}' }) });
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

async function adv(args: string[]) {
  const io = captureIo({}, tmp);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

describe('adv artifacts ls', () => {
  it('lists every output, complete or not, with its parts, files and bytes (text and json)', async () => {
    const text = await adv(['artifacts', 'ls', 'roll', '--store', url]);
    expect(text.code, text.err).toBe(0);
    const lines = text.out.split('\n');
    expect(lines[0]).toMatch(/^OUTPUT\s+COMPLETE\s+PARTS\s+FILES\s+SIZE\s+ATTEMPT\s+AGE/);
    expect(lines[1]).toMatch(/^model\s+yes\s+1\s+2\s+0\.0 KiB\s+1\s/);
    expect(lines[2]).toMatch(/^samples\s+no\s+2\s+2\s+0\.0 KiB\s+-\s/);
    expect(text.out).toMatch(/\nsamples\s+p1\s+1\s+0\.0 KiB\s+1\s/);

    const json = await adv(['artifacts', 'ls', 'roll', '--store', url, '-o', 'json']);
    expect(json.code, json.err).toBe(0);
    const outputs = JSON.parse(json.out) as OutputListing[];
    expect(
      outputs.map((o) => [o.output, o.complete, o.files, o.totalBytes, o.parts.map((p) => p.name)]),
    ).toEqual([
      ['model', true, 2, 4, ['shard-0']],
      ['samples', false, 2, 5, ['p0', 'p1']],
    ]);
  });

  it('says so for a run without outputs', async () => {
    const r = await adv(['artifacts', 'ls', 'other', '--store', url]);
    expect(r.out).toBe(`No outputs for run other in ${store.url}\n`);
  });
});

describe('adv artifacts pull', () => {
  it('downloads a complete output, its parts included, verified', async () => {
    const r = await adv(['artifacts', 'pull', 'roll', 'model', '--store', url, '--to', 'out']);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toMatch(/^output model: complete, 2 files/);
    expect(await readFile(join(tmp, 'out', 'model', 'parts', 'shard-0', 'w.bin'), 'utf8')).toBe('w0');
    expect(await readFile(join(tmp, 'out', 'model', 'config.json'), 'utf8')).toBe('{}');
  });

  it('refuses an incomplete output without --partial, and gets its committed parts with it', async () => {
    const refused = await adv(['artifacts', 'pull', 'roll', '--store', url, '--to', 'all']);
    expect(refused.code).not.toBe(0);
    expect(refused.err).toMatch(/output samples \(2 committed parts\) of roll is not complete/);
    expect(refused.err).toMatch(/--partial/);
    const r = await adv(['artifacts', 'pull', 'roll', '--store', url, '--to', 'all', '--partial']);
    expect(r.code, r.err).toBe(0);
    expect(await readFile(join(tmp, 'all', 'samples', 'parts', 'p1', 'b.jsonl'), 'utf8')).toBe('bb\n');
    expect(await readFile(join(tmp, 'all', 'model', 'config.json'), 'utf8')).toBe('{}');
  });

  it('refuses a part whose bytes do not match its manifest, and names an output that is not there', async () => {
    await writeFile(join(tmp, 'store', partPrefix('roll', 'samples', 'p0'), 'a.jsonl'), 'A\n');
    const bad = await adv([
      'artifacts',
      'pull',
      'roll',
      'samples',
      '--store',
      url,
      '--to',
      'bad',
      '--partial',
    ]);
    expect(bad.code).not.toBe(0);
    expect(bad.err).toMatch(/part p0 of output samples of roll: a\.jsonl does not match its manifest/);
    const none = await adv(['artifacts', 'pull', 'roll', 'nope', '--store', url]);
    expect(none.err).toMatch(/run roll has no output nope in file:.* \(it has: model, samples\)/);
  });
});
