import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SpecLoader } from './loader.js';
import { DEFAULT_LIMITS, parseFile } from './parse.js';
import { DirectorySource } from './source.js';

const run = (name: string) =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: ${name}\nspec:\n  command: echo hi\n`;

/** A directory source that records which files were read. */
class RecordingSource extends DirectorySource {
  read: string[] = [];
  override readMany(paths: readonly string[]): Promise<Uint8Array[]> {
    this.read.push(...paths);
    return super.readMany(paths);
  }
}

describe('a spec file over the size limit', () => {
  let dir: string;
  const big = 'samples:\n' + '- [0.125, 0.25, 0.5]\n'.repeat(120_000); // about 2.4 MiB
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-oversize-'));
    await mkdir(join(dir, 'runs'));
    await mkdir(join(dir, 'data'));
    await writeFile(join(dir, 'runs', 'a.yaml'), run('a'));
    await writeFile(join(dir, 'runs', 'b.yaml'), run('b'));
    await writeFile(join(dir, 'data', 'samples.yaml'), big);
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('is refused from its size, without being read, with the diagnostic the parser gives', async () => {
    const source = new RecordingSource(dir);
    const loader = new SpecLoader();
    const r = await loader.sync(source);

    expect(source.read.sort()).toEqual(['runs/a.yaml', 'runs/b.yaml']);
    expect(r.objects.map((o) => o.name).sort()).toEqual(['a', 'b']);
    expect(r.diagnostics).toHaveLength(1);
    const [d] = r.diagnostics;
    expect(d).toEqual(parseFile('data/samples.yaml', Buffer.from(big), DEFAULT_LIMITS).diagnostics[0]);
    expect(d).toMatchObject({ code: 'FileTooLarge', file: 'data/samples.yaml', line: 1, column: 1 });
    expect(d!.message).toBe(`file is ${Buffer.byteLength(big)} bytes, over the limit of 1048576`);
    expect(d!.hint).toMatch(/split it into smaller files/);
    expect(d!.hint).toMatch(/move it out of the specs folder/);
    expect(r.invalid).toEqual([{ file: 'data/samples.yaml', line: 1, diagnostics: [d] }]);
  });

  it('stays cached by its change key, and is read once it fits', async () => {
    const source = new RecordingSource(dir);
    const loader = new SpecLoader();
    await loader.sync(source);
    source.read = [];
    const again = await loader.sync(source);
    expect(source.read).toEqual([]);
    expect(again.diagnostics.map((d) => d.code)).toEqual(['FileTooLarge']);

    await writeFile(join(dir, 'data', 'samples.yaml'), run('c'));
    const fixed = await loader.sync(source);
    expect(source.read).toEqual(['data/samples.yaml']);
    expect(fixed.diagnostics).toEqual([]);
    expect(fixed.objects.map((o) => o.name).sort()).toEqual(['a', 'b', 'c']);
  });

  it('honours a configured limit', async () => {
    const source = new RecordingSource(dir);
    const r = await new SpecLoader({ limits: { maxFileBytes: 50 } }).sync(source);
    // Every file is over 50 bytes: none is read.
    expect(source.read).toEqual([]);
    expect(r.diagnostics.map((d) => [d.file, d.code])).toEqual([
      ['data/samples.yaml', 'FileTooLarge'],
      ['runs/a.yaml', 'FileTooLarge'],
      ['runs/b.yaml', 'FileTooLarge'],
    ]);
    expect(r.diagnostics[1]!.message).toBe(`file is ${run('a').length} bytes, over the limit of 50`);
  });

  it('a single-file source knows its size too', async () => {
    const file = join(dir, 'data', 'samples.yaml');
    const source = new RecordingSource(file);
    expect((await source.list())[0]?.size).toBe(Buffer.byteLength(big));
    const r = await new SpecLoader().sync(source);
    expect(source.read).toEqual([]);
    expect(r.diagnostics.map((d) => d.code)).toEqual(['FileTooLarge']);
  });
});
