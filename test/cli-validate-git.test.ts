/**
 * `adv validate DIR` in a git work tree checks what the controller will read once it is committed
 * (git objects, not the working tree's links and submodules), so it agrees with `adv plan`; outside
 * a work tree it reads the folder, and says which links it did not follow. Real repos, a real
 * submodule.
 */
import { copyFile, mkdtemp, rm, symlink, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-validate-git-'));
});
afterAll(() => removeTree(tmp));

async function adv(cwd: string, args: string[]) {
  const io = captureIo({ ...process.env, HOME: tmp, XDG_CACHE_HOME: join(tmp, 'cache') }, cwd);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

interface Validated {
  valid: boolean;
  objects: { kind: string; name: string; file: string }[];
  diagnostics: { severity: string; code: string; file: string; message: string; hint?: string }[];
}
const json = async (cwd: string, path = '.') =>
  JSON.parse((await adv(cwd, ['validate', path, '-o', 'json'])).out) as Validated;

describe('adv validate in a git work tree', () => {
  let wt: WorkTree;
  let sub: WorkTree;
  let outside: string;

  beforeAll(async () => {
    outside = join(tmp, 'outside');
    await mkdir(outside);
    await writeFile(join(outside, 'linked.yaml'), runYaml('linked', ['true']));
    sub = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/subrun.yaml': runYaml('subrun', ['true']),
    });
    wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/ok.yaml': runYaml('ok', ['true']),
    });
    await wt.git('checkout', '-q', '-b', 'feature');
    await symlink(join(outside, 'linked.yaml'), join(wt.dir, 'runs', 'linked.yaml'));
    await symlink(outside, join(wt.dir, 'more-runs'));
    await wt.git('-c', 'protocol.file.allow=always', 'submodule', 'add', '-q', sub.dir, 'vendor/sub');
    await wt.write('.gitignore', 'scratch.yaml\n');
    await wt.commit('a link, a link to a folder, a submodule');
    await wt.write('runs/new.yaml', runYaml('new', ['true'])); // untracked: read
    await wt.write('scratch.yaml', runYaml('scratch', ['true'])); // ignored: never committed
  });
  afterAll(async () => {
    await wt?.cleanup();
    await sub?.cleanup();
  });

  it('reports the symlink as the error the controller would meet, and the submodule and folder link it never reads', async () => {
    const r = await adv(wt.dir, ['validate', '.']);
    expect(r.code, r.out).toBe(1);
    expect(r.out).toMatch(
      /^runs\/linked\.yaml:1:1: error\[SymlinkSpec\] a symbolic link \(to ".*\/outside\/linked\.yaml"\): git stores a link as its target path, so the controller would read the text .* as this spec/m,
    );
    expect(r.out).toMatch(/^ {4}fix: commit the file itself, not a link/m);
    expect(r.out).toMatch(
      /^vendor\/sub:1:1: warning\[SubmoduleSkipped\] a git submodule: the controller reads only/m,
    );
    expect(r.out).toMatch(/^more-runs:1:1: warning\[SymlinkSkipped\] a symbolic link to a folder/m);
    expect(r.out).toMatch(/^3 files, 3 valid objects, 1 error$/m);
    const v = await json(wt.dir);
    // The submodule's run and the ignored file are not read; the untracked one is (it will be committed).
    expect(v.objects.map((o) => o.name).sort()).toEqual(['local', 'new', 'ok']);
  });

  it('agrees with adv plan, which reads the commit', async () => {
    const plan = await adv(wt.dir, ['plan', '--base', 'main']);
    expect(plan.code, plan.out + plan.err).toBe(1);
    expect(plan.out).toMatch(/runs\/linked\.yaml:1:1: /);
    expect(plan.out).not.toMatch(/subrun/);
  });

  it('is valid once the link is replaced by the file, as the fix says', async () => {
    await rm(join(wt.dir, 'runs', 'linked.yaml'));
    await copyFile(join(outside, 'linked.yaml'), join(wt.dir, 'runs', 'linked.yaml'));
    try {
      const r = await adv(wt.dir, ['validate', '.']);
      expect(r.code, r.out).toBe(0);
      expect(r.out).toMatch(/^4 files, 4 valid objects, 0 errors$/m);
      // A folder of the work tree: paths relative to it, the same files (their backend is elsewhere).
      const runs = await json(wt.dir, 'runs');
      expect(runs.diagnostics.map((d) => `${d.file} ${d.code}`)).toEqual([
        'linked.yaml UnknownBackend',
        'new.yaml UnknownBackend',
        'ok.yaml UnknownBackend',
      ]);
    } finally {
      await rm(join(wt.dir, 'runs', 'linked.yaml'));
      await symlink(join(outside, 'linked.yaml'), join(wt.dir, 'runs', 'linked.yaml'));
    }
  });
});

describe('adv validate outside a git work tree', () => {
  it('reads the folder and says which links it did not follow', async () => {
    const dir = join(tmp, 'plain');
    await mkdir(join(dir, 'runs'), { recursive: true });
    await writeFile(join(dir, 'runs', 'ok.yaml'), runYaml('ok', ['true']));
    await writeFile(join(dir, 'local.yaml'), LOCAL_BACKEND);
    await writeFile(join(tmp, 'elsewhere.yaml'), runYaml('elsewhere', ['true']));
    await symlink(join(tmp, 'elsewhere.yaml'), join(dir, 'runs', 'link.yaml'));
    const r = await adv(dir, ['validate', '.']);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/^runs\/link\.yaml:1:1: warning\[SymlinkSkipped\] a symbolic link: not followed/m);
    expect(r.out).toMatch(/^2 files, 2 valid objects, 0 errors$/m);
  });
});
