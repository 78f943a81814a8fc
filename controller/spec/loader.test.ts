import { mkdtemp, rm, writeFile, mkdir, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SpecLoader, type CachedFileEntry } from './loader.js';
import { DirectorySource } from './source.js';

const run = (name: string, cmd = 'echo hi') =>
  `apiVersion: adventuretime.dev/v1alpha1\nkind: Run\nmetadata:\n  name: ${name}\nspec:\n  command: ${cmd}\n`;

describe('SpecLoader', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'adv-loader-'));
    await mkdir(join(dir, 'runs'));
    for (let i = 0; i < 20; i++) await writeFile(join(dir, 'runs', `r${i}.yaml`), run(`r${i}`));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('re-parses only the changed file on sync', async () => {
    const loader = new SpecLoader();
    const source = new DirectorySource(dir);
    const first = await loader.sync(source);
    expect(first.objects).toHaveLength(20);
    expect(loader.parsedFiles).toBe(20);

    await writeFile(join(dir, 'runs', 'r3.yaml'), run('r3', 'echo changed'));
    const second = await loader.sync(source);
    expect(loader.parsedFiles).toBe(21);
    const r3 = second.objects.find((o) => o.name === 'r3')!;
    expect((r3.object.spec as { command: string }).command).toBe('echo changed');
  });

  it('forgets removed files and picks up new ones', async () => {
    const loader = new SpecLoader();
    const source = new DirectorySource(dir);
    await loader.sync(source);
    await rm(join(dir, 'runs', 'r0.yaml'));
    await writeFile(join(dir, 'runs', 'new.yml'), run('new'));
    const r = await loader.sync(source);
    const names = r.objects.map((o) => o.name);
    expect(names).not.toContain('r0');
    expect(names).toContain('new');
    expect(r.fileCount).toBe(20);
  });

  it('re-evaluates cross-file rules when one file changes', async () => {
    const loader = new SpecLoader();
    const source = new DirectorySource(dir);
    await writeFile(join(dir, 'runs', 'dup.yaml'), run('r1'));
    let r = await loader.sync(source);
    expect(r.diagnostics.filter((d) => d.code === 'DuplicateName')).toHaveLength(2);
    expect(r.objects.map((o) => o.name)).not.toContain('r1');
    await writeFile(join(dir, 'runs', 'dup.yaml'), run('r1-copy'));
    r = await loader.sync(source);
    expect(r.diagnostics).toEqual([]);
    expect(r.objects.map((o) => o.name)).toEqual(expect.arrayContaining(['r1', 'r1-copy']));
  });

  it('skips hidden directories, and does not follow symlinks out of the repo but says it skipped them', async () => {
    await mkdir(join(dir, '.github', 'workflows'), { recursive: true });
    await writeFile(join(dir, '.github', 'workflows', 'plan.yaml'), 'on: push\n');
    const outside = await mkdtemp(join(tmpdir(), 'adv-outside-'));
    await writeFile(join(outside, 'secret.yaml'), run('outside'));
    await symlink(join(outside, 'secret.yaml'), join(dir, 'link.yaml'));
    await symlink(outside, join(dir, 'more-specs'));
    await symlink(join(outside, 'secret.yaml'), join(dir, '.github', 'link.yaml'));
    const r = await new SpecLoader().sync(new DirectorySource(dir));
    // Each skipped link is said (a warning: nothing is wrong with the repo itself), hidden ones not.
    expect(r.diagnostics.map((d) => `${d.file} ${d.severity} ${d.code}`)).toEqual([
      'link.yaml warning SymlinkSkipped',
      'more-specs warning SymlinkSkipped',
    ]);
    expect(r.invalid).toEqual([]);
    expect(r.objects.map((o) => o.name)).not.toContain('outside');
    await rm(outside, { recursive: true, force: true });
  });

  it('keeps valid documents of a file whose other document is bad', async () => {
    await writeFile(
      join(dir, 'multi.yaml'),
      run('good-one') + '---\n' + run('BAD') + '---\n' + run('good-two'),
    );
    const r = await new SpecLoader().sync(new DirectorySource(dir));
    const names = r.objects.map((o) => o.name);
    expect(names).toEqual(expect.arrayContaining(['good-one', 'good-two']));
    expect(r.invalid).toHaveLength(1);
    expect(r.invalid[0]).toMatchObject({ file: 'multi.yaml', line: 8, kind: 'Run', name: 'BAD' });
  });

  it('parses again a DAG an older cache kept without its child names, so a Run/DAG name clash is seen', async () => {
    await writeFile(
      join(dir, 'dag.yaml'),
      'apiVersion: adventuretime.dev/v1alpha1\nkind: DAG\nmetadata: {name: r1}\nspec:\n  nodes:\n    - {id: x, run: {command: y}}\n',
    );
    const first = new SpecLoader();
    await first.sync(new DirectorySource(dir));
    // As an older loader wrote it: the documents without `children`.
    const old = first.exportCache().map(([f, k, docs, diags]): CachedFileEntry => {
      return [f, k, docs.map(({ children: _, ...d }) => d), diags];
    });
    await writeFile(join(dir, 'runs', 'clash.yaml'), run('r1.x'));
    const second = new SpecLoader();
    second.importCache(old);
    const r = await second.sync(new DirectorySource(dir));
    expect(second.parsedFiles).toBe(2); // dag.yaml and the new file; the 20 runs came from the cache
    expect(r.diagnostics.map((d) => `${d.file} ${d.code}`)).toEqual([
      'dag.yaml DuplicateName',
      'runs/clash.yaml DuplicateName',
    ]);
  });
});
