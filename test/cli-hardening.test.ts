/**
 * The CLI on the wrong foot (issue 13): a work tree with uncommitted edits under `adv cancel` and
 * `adv retry`, flags that do not go together, names that are paths, selectors that are not
 * selectors, one file validated alone, and shell completion offered hostile names.
 */
import { spawnSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../cli/program.js';
import { git } from '../controller/git/native.js';
import { openStore } from '../runtime/store/index.js';
import { startGitHttp } from './helpers/git/git-http.js';
import { captureIo, removeTree } from './helpers/io.js';
import { LOCAL_BACKEND, makeWorkTree, runYaml, type WorkTree } from './helpers/git/specs-repo.js';

let tmp: string;
const env = { HOME: '', XDG_CACHE_HOME: '' };

async function adv(args: string[], cwd: string) {
  const io = captureIo({ ...env }, cwd);
  const code = await runCli(args, io);
  return { code, out: io.out(), err: io.err() };
}

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'adv-cli-hardening-'));
  env.HOME = tmp;
  env.XDG_CACHE_HOME = join(tmp, 'cache');
});
afterAll(() => removeTree(tmp));

/** `next` is `prev` with lines inserted and none removed or changed: returns the inserted lines. */
function insertedLines(prev: string, next: string): string[] | undefined {
  const a = prev.split('\n');
  const b = next.split('\n');
  const added: string[] = [];
  let i = 0;
  for (const line of b) {
    if (i < a.length && line === a[i]) i++;
    else added.push(line);
  }
  return i === a.length ? added : undefined;
}

// A run file as a person keeps it: comments, odd spacing, four-space indents, a trailing space.
const X_YAML = `# x: a run kept by hand
apiVersion:   adventuretime.dev/v1alpha1    # odd spacing is kept
kind: Run
metadata:
    name: x          # four spaces
    labels: {team: "ml",   size: small}
spec:
    command: [ "sh",  "-c",   "echo committed" ] ${''}
    backendSelector:
        order:
          - local    # the only one

    # the end of spec
`;

describe('adv cancel and adv retry edit the committed spec, not the work tree', () => {
  let wt: WorkTree;
  const show = (rev: string) => wt.git('show', `${rev}:runs/x.yaml`).then((s) => s + '\n');
  const worktreeFile = () => readFile(join(wt.dir, 'runs', 'x.yaml'), 'utf8');

  beforeAll(async () => {
    wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/x.yaml': X_YAML,
      'runs/y.yaml': runYaml('y', ['true']),
    });
  });
  afterAll(() => wt.cleanup());

  it('cancel commits one inserted line and keeps the uncommitted edit out of the commit and in the file', async () => {
    const mine = '# my note, not committed yet\n' + X_YAML.replace('echo committed', 'echo edited');
    await wt.write('runs/x.yaml', mine);
    const before = await show('main');
    expect(before).toBe(X_YAML);

    const r = await adv(['cancel', 'x'], wt.dir);
    expect(r.code, r.err).toBe(0);
    expect(await wt.git('log', '-1', '--format=%s')).toBe('cancel run/x');

    const after = await show('main');
    expect(insertedLines(before, after)).toEqual(['    suspend: true']);
    expect((parse(after) as { spec: { suspend?: boolean } }).spec.suspend).toBe(true);
    // The user's edit: not in the commit, still in the file, and not staged.
    expect(after).not.toContain('echo edited');
    const file = await worktreeFile();
    expect(file).toContain('echo edited');
    expect(file).toContain('# my note, not committed yet');
    expect(await wt.git('diff', '--cached', '--name-only')).toBe('');
    // What is left to commit is the user's own edit, not a revert of the cancel.
    const diff = await wt.git('diff', '-U0', '--', 'runs/x.yaml');
    expect(diff).toContain('+    command: [ "sh",  "-c",   "echo edited" ]');
    expect(diff).not.toContain('suspend');
    expect(r.out + r.err).toContain('runs/x.yaml has uncommitted changes');
  });

  it('retry commits when the uncommitted copy does not parse, and leaves that copy as it is', async () => {
    const broken = X_YAML.replace('spec:\n', 'spec: [unclosed\n');
    await wt.write('runs/x.yaml', broken);
    const before = await show('main');

    const r = await adv(['retry', 'x'], wt.dir);
    expect(r.code, r.err).toBe(0);
    expect(r.err).not.toContain('no Run');

    const after = await show('main');
    const added = insertedLines(before, after);
    expect(added).toHaveLength(2);
    expect(added![0]).toBe('    annotations:');
    expect(added![1]).toMatch(/^ {8}adventuretime\.dev\/retry-requested-at: \S+$/);
    expect(await worktreeFile()).toBe(broken);
    expect(r.err).toMatch(/warning: runs\/x\.yaml has uncommitted changes/);
    expect(r.err).toContain('git diff runs/x.yaml');
  });

  it('refuses when the file has staged changes, naming the file and the fix', async () => {
    await wt.write('runs/x.yaml', X_YAML.replace('echo committed', 'echo staged'));
    await wt.git('add', 'runs/x.yaml');
    const head = await wt.git('rev-parse', 'main');

    const r = await adv(['retry', 'x'], wt.dir);
    expect(r.code).toBe(2);
    expect(r.err).toContain('runs/x.yaml has staged changes');
    expect(r.err).toContain('git restore --staged runs/x.yaml');
    expect(await wt.git('rev-parse', 'main')).toBe(head);
    await wt.git('restore', '--staged', 'runs/x.yaml');
  });

  it('leaves a clean work tree clean', async () => {
    const r = await adv(['cancel', 'run', 'y'], wt.dir);
    expect(r.code, r.err).toBe(0);
    expect(await wt.git('status', '--porcelain', '--', 'runs/y.yaml')).toBe('');
    expect(await readFile(join(wt.dir, 'runs', 'y.yaml'), 'utf8')).toBe(
      await wt.git('show', 'main:runs/y.yaml').then((s) => s + '\n'),
    );
    expect(
      insertedLines(runYaml('y', ['true']), await wt.git('show', 'main:runs/y.yaml').then((s) => s + '\n')),
    ).toEqual(['  suspend: true']);
  });

  it('finds the run in the committed tree, and says so when it exists only in the work tree', async () => {
    await wt.write('runs/new.yaml', runYaml('brand-new', ['true']));
    const r = await adv(['cancel', 'brand-new'], wt.dir);
    expect(r.code).toBe(3);
    expect(r.err).toContain('runs/new.yaml');
    expect(r.err).toMatch(/not committed/);
  });
});

describe('adv cancel on a remote specs repo', () => {
  it('commits the one-line edit in a clone and pushes it', async () => {
    const server = await startGitHttp({ token: 'tok' });
    try {
      const bare = await server.createRepo('remote-cancel');
      const wt = await makeWorkTree(
        { 'backends/local.yaml': LOCAL_BACKEND, 'runs/x.yaml': X_YAML },
        server.url('remote-cancel'),
        'tok',
      );
      const io = captureIo({ ...env, ADV_GIT_TOKEN: 'tok' }, tmp);
      expect(await runCli(['cancel', 'x', '--repo', server.url('remote-cancel')], io), io.err()).toBe(0);
      const pushed = (await git(['show', 'main:runs/x.yaml'], { gitdir: bare })).toString();
      expect(insertedLines(X_YAML, pushed)).toEqual(['    suspend: true']);
      expect((await git(['log', '-1', '--format=%s', 'main'], { gitdir: bare })).toString()).toBe(
        'cancel run/x\n',
      );
      await wt.cleanup();
    } finally {
      await server.stop();
    }
  });
});

describe('adv controller refuses flags it cannot honour', () => {
  it('a port out of range is a usage error naming the flag and the range', async () => {
    const r = await adv(['controller', '--http', '127.0.0.1:99999'], tmp);
    expect(r.code).toBe(2);
    expect(r.err).toContain('--http');
    expect(r.err).toContain('0-65535');
    expect(r.err).not.toContain('internal error');
  });

  it('--http or --dashboard with --once is refused: --once serves nothing', async () => {
    for (const flag of [['--http', '127.0.0.1:0'], ['--dashboard']]) {
      const r = await adv(['controller', '--once', ...flag], tmp);
      expect(r.code, r.err).toBe(2);
      expect(r.err).toContain(`${flag[0]} cannot be used with --once`);
    }
  });
});

describe('names that are not names, attempts that do not exist', () => {
  let store: string;
  beforeAll(async () => {
    store = `file://${join(tmp, 'store')}`;
    const s = await openStore(store);
    await s.put('runs/one/attempts/1/logs/000000.log', 'hello from attempt 1\n');
    await s.put('runs/one/attempts/1/workers/2/logs/part-000000', 'hello from worker 2\n');
  });

  it('adv logs ../x is a usage error, not an internal one', async () => {
    const r = await adv(['logs', '../x', '--store', store], tmp);
    expect(r.code).toBe(2);
    expect(r.err).toContain('"../x" is not a valid run name');
    expect(r.err).not.toMatch(/internal error|\n\s+at /);
    const ls = await adv(['ckpt', 'ls', '../x', '--store', store], tmp);
    expect(ls.code).toBe(2);
    expect(ls.err).toContain('"../x" is not a valid run name');
  });

  it('adv logs --attempt N for an attempt that is not there names the ones that are', async () => {
    const ok = await adv(['logs', 'one', '--store', store], tmp);
    expect(ok.code, ok.err).toBe(0);
    expect(ok.out).toBe('hello from attempt 1\n');
    const r = await adv(['logs', 'one', '--attempt', '5', '--store', store], tmp);
    expect(r.code).toBe(3);
    expect(r.err).toContain('run one has no attempt 5');
    expect(r.err).toContain('attempts: 1');
    expect((await adv(['logs', 'one', '--attempt', 'two', '--store', store], tmp)).code).toBe(2);
  });

  it('adv logs --worker K prints process K of a multi-host attempt', async () => {
    const w = await adv(['logs', 'one', '--worker', '2', '--store', store], tmp);
    expect(w.code, w.err).toBe(0);
    expect(w.out).toBe('hello from worker 2\n');
    const none = await adv(['logs', 'one', '--worker', '3', '--store', store], tmp);
    expect(none.out).toBe('');
    expect(none.err).toContain('no output yet for one attempt 1 worker 3');
    const bad = await adv(['logs', 'one', '--worker', 'two', '--store', store], tmp);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--worker takes a whole number from 0');
  });
});

describe('adv get -l', () => {
  it('refuses a selector that does not parse, naming the requirement', async () => {
    for (const [selector, bad] of [
      ['team=a=b', 'team=a=b'],
      ['team=ml,', ''],
      ['Team Name=x', 'Team Name=x'],
      ['team in (a,b)', 'team in (a,b)'],
      ['=x', '=x'],
    ] as const) {
      const r = await adv(['get', 'runs', '-l', selector, '--repo', tmp], tmp);
      expect(r.code, `${selector}: ${r.err}`).toBe(2);
      expect(r.err).toContain(`-l ${JSON.stringify(selector)}`);
      expect(r.err).toContain(`"${bad}"`);
    }
  });
});

describe('adv validate of one file', () => {
  it('does not report what needs the rest of the repo', async () => {
    const wt = await makeWorkTree({
      'backends/local.yaml': LOCAL_BACKEND,
      'runs/x.yaml': runYaml('x', ['true']),
    });
    try {
      const r = await adv(['validate', 'runs/x.yaml'], wt.dir);
      expect(r.code, r.out).toBe(0);
      expect(r.out).not.toContain('UnknownBackend');
      expect(r.out).toMatch(/^1 file, 1 valid object, 0 errors$/m);
      const json = JSON.parse((await adv(['validate', 'runs/x.yaml', '-o', 'json'], wt.dir)).out) as {
        valid: boolean;
        objects: unknown[];
      };
      expect(json).toMatchObject({ valid: true, objects: [expect.objectContaining({ name: 'x' })] });
      // The whole repo still checks them.
      await wt.write('runs/z.yaml', runYaml('z', ['true']).replace('[local]', '[nowhere]'));
      const all = await adv(['validate', '.'], wt.dir);
      expect(all.code).toBe(1);
      expect(all.out).toContain('UnknownBackend');
    } finally {
      await wt.cleanup();
    }
  });
});

describe('bash completion', () => {
  const marker = () => join(tmp, 'pwned');
  let script: string;
  let bin: string;

  beforeAll(async () => {
    const io = captureIo({ ...env }, tmp);
    expect(await runCli(['completion', 'bash'], io)).toBe(0);
    script = join(tmp, 'adv-completion.bash');
    await writeFile(script, io.out());
    // A fake adv that lists hostile names, as a status branch someone else writes could.
    bin = join(tmp, 'bin');
    await mkdir(bin, { recursive: true });
    const m = marker();
    const names = [
      'go-train',
      `go$(touch ${m})`,
      `go\`touch ${m}\``,
      `go;touch ${m}`,
      'go*',
      'gone',
      'other',
      `$(touch ${m})`,
      '${HOME}',
    ];
    await writeFile(
      join(bin, 'adv'),
      `#!/bin/sh
case "$1 $2" in
  "get runs") for n in ${names.map((n) => `'${n.replace(/'/g, `'\\''`)}'`).join(' ')}; do printf 'run/%s\\n' "$n"; done ;;
  "get dags") printf 'dag/%s\\n' 'go-dag' '$(touch ${m})' ;;
  "get sweeps") printf 'sweep/%s\\n' 'go-sweep' '$(touch ${m})' ;;
esac
`,
    );
    await chmod(join(bin, 'adv'), 0o755);
  });

  /** Calls _adv as bash does on TAB and returns COMPREPLY, one per line. */
  function complete(words: string[]): string[] {
    const r = spawnSync(
      'bash',
      [
        '--norc',
        '--noprofile',
        '-c',
        `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=\${#COMP_LINE}; _adv; printf '%s\\n' "\${COMPREPLY[@]}"`,
        'bash',
        script,
        ...words,
      ],
      { encoding: 'utf8', cwd: tmp, env: { PATH: `${bin}:${process.env.PATH}`, HOME: tmp } },
    );
    expect(r.status, r.stderr).toBe(0);
    return r.stdout.split('\n').filter(Boolean).sort();
  }

  it('offers the names that match, and never runs what a name holds', () => {
    expect(complete(['adv', 'logs', 'go'])).toEqual(['go-train', 'gone']);
    expect(complete(['adv', 'describe', 'run', 'g'])).toEqual(['go-train', 'gone']);
    expect(complete(['adv', 'cancel', 'dag', ''])).toEqual(['go-dag']);
    expect(complete(['adv', 'describe', 'sweep', ''])).toEqual(['go-sweep']);
    expect(complete(['adv', 'get', 'sweeps', 'go'])).toEqual(['go-sweep']);
    expect(complete(['adv', 'describe', 'o'])).toEqual(['other']);
    expect(complete(['adv', 'get', 'runs', ''])).toEqual(['go-train', 'gone', 'other']);
    expect(existsSync(marker())).toBe(false);
  });

  it('still completes verbs, kinds and flags', () => {
    expect(complete(['adv', 'ca'])).toEqual(['cancel']);
    expect(complete(['adv', 'get', 'd'])).toEqual(['dags']);
    expect(complete(['adv', 'get', 's'])).toEqual(['sweeps']);
    expect(complete(['adv', 'logs', '--fol'])).toEqual(['--follow']);
    expect(complete(['adv', 'completion', 'b'])).toEqual(['bash']);
    expect(complete(['adv', 'dataset', ''])).toEqual(['ls', 'push']);
    expect(existsSync(marker())).toBe(false);
  });
});

describe('adv exec --run with a name that is not a name', () => {
  it('is a usage error without a stack trace, before anything is written', () => {
    const adv = join(import.meta.dirname, '..', 'dist', 'cli', 'adv.js');
    const r = spawnSync(
      process.execPath,
      [adv, 'exec', '--store', 'file:///nonexistent', '--run', '../x', '--', 'true'],
      {
        encoding: 'utf8',
      },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('"../x" is not a valid run name');
    expect(r.stderr).not.toMatch(/^\s+at /m);
  });
});
