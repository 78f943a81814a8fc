import type { Command } from 'commander';
import { existsSync, realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { AdvError, ErrorCode, credentialEnv, git, isRemoteUrl, runGit } from '../../controller/index.js';
import { printableDiagnostic } from '../format.js';
import { followRun } from '../follow.js';
import { checkName } from '../names.js';
import { printable, type Io } from '../output.js';
import { gitToken, resolveRepo } from '../repo.js';
import { collectSet, type SetArg } from '../set-args.js';
import { keepSnapshot, snapshotRef, snapshotWorkTree, type CodeSnapshot } from '../snapshot.js';
import { openSpecsWorkTree, type SpecsWorkTree } from '../specs-writer.js';
import { codeRepoFromRemote, nameFromCommand, stamp, submitSpecText } from '../submit-spec.js';

interface SubmitOpts {
  on?: string;
  name?: string;
  gpus?: number;
  env: Record<string, string>;
  set: SetArg[];
  file?: string;
  review?: boolean;
  follow?: boolean;
  repo?: string;
  branch: string;
  codeRemote?: string;
  store?: string;
  dataDir?: string;
}

/** Where the pinned code lives for the controller, and where its snapshot ref is pushed. */
interface CodeHome {
  /** `code.repo` (undefined: the specs repo itself). */
  repo?: string;
  /** `git push` target from the code repo: a remote name or URL, with its credentials. */
  push?: { to: string; env: NodeJS.ProcessEnv };
  /** The specs repo's URL is the code's: the snapshot ref goes in the spec's own (atomic) push. */
  together?: boolean;
}

const ZERO = '0'.repeat(40);

function gpuCount(v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || n > 1024)
    throw new AdvError(
      ErrorCode.UsageError,
      `--gpus takes a whole number from 0 to 1024, not "${printable(v)}"`,
      {
        hint: 'GPUs per node: --gpus 8',
      },
    );
  return n;
}

function collectEnv(arg: string, prev: Record<string, string> = {}): Record<string, string> {
  const eq = arg.indexOf('=');
  const key = arg.slice(0, Math.max(eq, 0));
  if (eq <= 0 || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(key) || key.startsWith('ADV_'))
    throw new AdvError(
      ErrorCode.UsageError,
      `--env ${JSON.stringify(arg)}: not NAME=VALUE with a usable name`,
      {
        hint: 'write --env LR=3e-4 (a name of letters, digits and "_", not starting with ADV_, which is reserved)',
      },
    );
  return { ...prev, [key]: arg.slice(eq + 1) };
}

/** `adv submit -- CMD…`: the Run as a spec file committed to the specs repo, the code pinned to a commit. */
/** The whole CLI, to run `adv plan` with (program.ts passes its `runCli`: it imports this file). */
export type RunCli = (argv: readonly string[], io: Io) => Promise<number>;

export function registerSubmit(program: Command, io: Io, runCli: RunCli): void {
  program
    .command('submit')
    .description(
      'Run a command of this work tree (uncommitted changes included) on a backend: commits runs/<name>.yaml to the specs repo',
    )
    .argument('[command...]', 'the command, after "--"')
    .option('--on <backend>', 'the backend to run on (default: the solver picks)')
    .option('--name <name>', 'the run name (default: from the command and the time)')
    .option('--gpus <n>', 'GPUs per node', gpuCount)
    .option('--env <NAME=VALUE>', 'an environment variable for the command (repeatable)', collectEnv, {})
    .option('--set <path=value>', 'any field of the spec, dotted from spec (repeatable)', collectSet, [])
    .option('-f, --file <run.yaml>', 'a Run to start from (its command, resources, policy…)')
    .option(
      '--review',
      'commit to a new branch adv/submit/<name> and print its plan, instead of the watched branch',
    )
    .option('--follow', 'then print phase changes and logs until the run ends; exit with its outcome')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .option(
      '--code-remote <name>',
      'the remote (its https URL) the controller fetches the code from, when it is not the specs repo',
      'origin',
    )
    .option('--store <url>', 'with --follow: the object store the logs are in (default: as adv logs)')
    .option(
      '--data-dir <dir>',
      "with --follow: the controller's data dir (where a file store's relative path starts)",
    )
    .addHelpText(
      'after',
      `
The code is this git repository as it is now: with uncommitted changes, they are committed to
refs/adventuretime/snapshots/<name> (your branch, index and files are left exactly as they are)
and the run is pinned to that commit. Exit codes: as every command; with --follow, 0 when the run
succeeds, else the command's exit code (1 when it has none).

Examples:
  adv submit --on ssh-local -- python3 train.py --steps 1000
  adv submit --on slurm-a --gpus 8 --env LR=3e-4 --follow -- python3 train.py
  adv submit -f runs/base.yaml --set policy.maxAttempts=5 --review -- python3 train.py
  adv submit --repo https://git.example.com/lab/specs.git --on slurm-a -- python3 train.py`,
    )
    .action(async (command: string[], opts: SubmitOpts) => {
      if (opts.review && opts.follow)
        throw new AdvError(ErrorCode.UsageError, '--review and --follow cannot be used together', {
          hint: 'a run under review starts when its branch is merged: follow it then with adv logs NAME -f',
        });
      if (opts.name !== undefined) checkName(opts.name, 'run', true);
      const submitted = await submit(command, opts, io, runCli);
      if (!opts.follow) return;
      const code = await followRun(io, submitted, {
        branch: opts.branch,
        ...(opts.repo ? { repo: opts.repo } : {}),
        ...(opts.store ? { store: opts.store } : {}),
        ...(opts.dataDir ? { dataDir: opts.dataDir } : {}),
      });
      if (code !== 0)
        throw new AdvError(ErrorCode.BackendError, `run ${submitted} did not succeed`, { exitCode: code });
    });
}

/** Snapshots the code, commits the spec (and pushes), prints what was done; returns the run name. */
async function submit(command: string[], opts: SubmitOpts, io: Io, runCli: RunCli): Promise<string> {
  const snap = await snapshotWorkTree(io.cwd);
  const base = opts.file
    ? { file: opts.file, text: await readFile(resolve(io.cwd, opts.file), 'utf8') }
    : undefined;
  const specsArg = await resolveRepo(opts.repo, snap.toplevel);
  const token = await gitToken(io.env);
  const home = await codeHome(snap, specsArg, opts.codeRemote ?? 'origin');
  const wt = await openSpecsWorkTree(specsArg, opts.branch, token, {
    anyBranch: true,
    ...(home.together ? { reference: snap.toplevel } : {}),
  });
  try {
    const local = !isRemoteUrl(specsArg);
    const onBranch = local && (await checkedOut(wt.dir)) === `refs/heads/${opts.branch}`;
    const parent = await wt.branchHead();
    const name = await pickName(wt, parent, command, opts, base, onBranch);
    const rel = `runs/${name}.yaml`;
    const text = await specTextFor(wt.dir, parent, { name, command, opts, base, snap, home });
    const message = `adv submit: run/${name} (code ${snap.commit.slice(0, 10)}${snap.dirty ? ', a snapshot of uncommitted changes' : ''})`;
    let made = await wt.commitOnto(rel, text, message, parent);
    await validate(wt, made.commit, rel, io);

    // The code first (or in the same atomic push): the controller must never see a spec whose
    // commit it cannot fetch.
    await keepSnapshot(snap.toplevel, name, snap.commit);
    if (home.push) await pushSnapshot(snap, name, home.push);

    const target = opts.review ? `refs/heads/adv/submit/${name}` : `refs/heads/${opts.branch}`;
    if (local)
      await landLocally(wt, { target, parent, made, message, rel, text, name, opts, onBranch, specsArg });
    else
      made = await pushSpec(wt, {
        target,
        made,
        message,
        rel,
        text,
        name,
        opts,
        snap,
        home,
        token,
        specsArg,
      });
    printSubmitted(io, { name, rel, snap, opts, commit: made.commit });
    if (opts.review)
      await printPlan(
        io,
        {
          dir: wt.dir,
          head: local ? target : made.commit,
          branch: opts.branch,
          local,
          name,
          ...(token ? { token } : {}),
        },
        runCli,
      );
    return name;
  } finally {
    await wt.close();
  }
}

type Made = Awaited<ReturnType<SpecsWorkTree['commitOnto']>>;

/** The Run's YAML: the base spec (or a new one) with the command, the code snapshot and the flags. */
async function specTextFor(
  dir: string,
  parent: string,
  s: {
    name: string;
    command: string[];
    opts: SubmitOpts;
    base: { file: string; text: string } | undefined;
    snap: CodeSnapshot;
    home: CodeHome;
  },
): Promise<string> {
  const { name, opts, snap } = s;
  const hasSchemas =
    (await runGit(['cat-file', '-e', `${parent}:schemas/run.schema.json`], { cwd: dir })).code === 0;
  return submitSpecText({
    name,
    command: s.command,
    ...(s.base ? { base: s.base } : {}),
    ...(opts.on ? { backend: opts.on } : {}),
    ...(opts.gpus !== undefined ? { gpus: opts.gpus } : {}),
    env: opts.env,
    sets: opts.set,
    code: { ref: snap.commit, ...(s.home.repo ? { repo: s.home.repo } : {}) },
    workingDir: snap.prefix,
    header: [
      ...(hasSchemas ? ['yaml-language-server: $schema=../schemas/run.schema.json'] : []),
      ...headerLines(snap, name),
    ],
  });
}

/** The committed spec on its way to its branch: where to, the commit, and what it holds. */
interface Landing {
  target: string;
  made: Made;
  message: string;
  rel: string;
  text: string;
  name: string;
  opts: SubmitOpts;
  specsArg: string;
}

/** A local specs repo: moves the branch (compare-and-swap) and, when it is checked out, its index and file. */
async function landLocally(
  wt: SpecsWorkTree,
  s: Landing & { parent: string; onBranch: boolean },
): Promise<void> {
  const { opts, name, made, rel } = s;
  const cas = await runGit(
    ['update-ref', '-m', s.message, s.target, made.commit, opts.review ? ZERO : s.parent],
    {
      cwd: wt.dir,
    },
  );
  if (cas.code !== 0)
    throw new AdvError(
      ErrorCode.GitError,
      opts.review
        ? `branch adv/submit/${name} already exists in ${s.specsArg}; nothing was committed`
        : `${opts.branch} moved while run/${name} was being committed; nothing was committed`,
      { hint: opts.review ? 'pick another --name' : 'run the command again' },
    );
  // The watched branch is the one checked out: its index and work tree get the new file, as
  // after a commit of it (nothing else of theirs changes); see docs/loop-submit.md.
  if (s.onBranch && !opts.review) {
    await git(['update-index', '--add', '--cacheinfo', `${made.mode},${made.blob},${rel}`], {
      cwd: wt.dir,
    });
    await wt.write(rel, s.text);
  }
}

/** A specs repo URL: pushes the commit (with the code snapshot when they share it), again on top of others'. */
async function pushSpec(
  wt: SpecsWorkTree,
  s: Landing & { snap: CodeSnapshot; home: CodeHome; token: string | undefined },
): Promise<Made> {
  const { opts } = s;
  let made = s.made;
  for (let attempt = 1; ; attempt++) {
    const code = s.home.together ? [`+${s.snap.commit}:${snapshotRef(s.name)}`] : [];
    const r = await runGit(['push', '--quiet', '--atomic', 'origin', `${made.commit}:${s.target}`, ...code], {
      cwd: wt.dir,
      env: credentialEnv(s.token),
    });
    if (r.code === 0) return made;
    if (opts.review || attempt >= 5 || !/rejected|fetch first|non-fast-forward/.test(r.stderr))
      throw new AdvError(ErrorCode.GitError, `push to ${s.specsArg} failed: ${r.stderr.trim()}`, {
        hint: opts.review
          ? 'pick another --name, or check the token'
          : 'check that the token may push to the branch',
      });
    // Someone pushed first: the same file on top of theirs.
    await git(
      [
        'fetch',
        '--quiet',
        '--update-head-ok',
        'origin',
        `+refs/heads/${opts.branch}:refs/heads/${opts.branch}`,
      ],
      {
        cwd: wt.dir,
        env: credentialEnv(s.token),
      },
    );
    made = await wt.commitOnto(s.rel, s.text, s.message, await wt.branchHead());
  }
}

async function checkedOut(dir: string): Promise<string | undefined> {
  const r = await runGit(['symbolic-ref', '--quiet', 'HEAD'], { cwd: dir });
  return r.code === 0 ? r.stdout.toString('utf8').trim() : undefined;
}

/** The spec file's header: who wrote it, from which commit, and what the snapshot holds. */
function headerLines(snap: CodeSnapshot, name: string): string[] {
  const from = `${snap.branch ? `branch ${snap.branch}` : 'a detached HEAD'} at ${snap.head.slice(0, 10)}`;
  return [
    `Written by adv submit from ${from}${snap.prefix ? `, in ${snap.prefix}/` : ''}.`,
    snap.dirty
      ? `The code is that commit plus the uncommitted changes: ${snap.commit.slice(0, 10)} (${snapshotRef(name)}).`
      : 'The code is that commit, with nothing uncommitted.',
    'A spec like any other: edit and push it, or cancel the run with adv cancel.',
  ];
}

/** Whether the code is the specs repo (no `code.repo`), else the URL the controller fetches it from. */
async function codeHome(snap: CodeSnapshot, specsArg: string, remote: string): Promise<CodeHome> {
  if (!isRemoteUrl(specsArg)) {
    const top = (await git(['rev-parse', '--show-toplevel'], { cwd: specsArg })).toString('utf8').trim();
    if (realpathSync(top) === realpathSync(snap.toplevel)) return {};
  }
  const url = await runGit(['remote', 'get-url', remote], { cwd: snap.toplevel });
  const codeUrl = url.code === 0 ? url.stdout.toString('utf8').trim() : undefined;
  if (isRemoteUrl(specsArg) && codeUrl && sameUrl(codeUrl, specsArg)) return { together: true };
  if (!codeUrl)
    throw new AdvError(
      ErrorCode.UsageError,
      `the code in ${snap.toplevel} is not the specs repo, and it has no remote "${remote}" the controller could fetch it from`,
      {
        hint: `add one (git remote add ${remote} https://…) or pass --code-remote NAME; or run adv submit in the specs repo`,
      },
    );
  // Checked before anything is written: a token in the URL must not reach even a local commit.
  return { repo: codeRepoFromRemote(remote, codeUrl), push: { to: remote, env: {} } };
}

/** The same repository, whatever the spelling: no credentials, no trailing `/` or `.git`. */
function sameUrl(a: string, b: string): boolean {
  const norm = (u: string) =>
    u
      .replace(/^([a-z+]+:\/\/)[^@/]*@/i, '$1')
      .replace(/\/+$/, '')
      .replace(/\.git$/, '')
      .toLowerCase();
  return norm(a) === norm(b);
}

async function pushSnapshot(snap: CodeSnapshot, name: string, push: { to: string; env: NodeJS.ProcessEnv }) {
  const r = await runGit(
    ['push', '--quiet', '--no-verify', push.to, `+${snap.commit}:${snapshotRef(name)}`],
    {
      cwd: snap.toplevel,
      env: push.env,
    },
  );
  if (r.code !== 0)
    throw new AdvError(
      ErrorCode.GitError,
      `cannot push the code (${snapshotRef(name)}) to ${push.to}: ${r.stderr.trim()}`,
      {
        hint: 'check that you may push to that repository (ADV_GIT_TOKEN for the specs repo); nothing was committed',
      },
    );
}

/** `--name`, else one made from the command (or the file's name) and the time, new in the specs repo. */
async function pickName(
  wt: SpecsWorkTree,
  parent: string,
  command: string[],
  opts: SubmitOpts,
  base: { file: string; text: string } | undefined,
  onBranch: boolean,
): Promise<string> {
  const specs = await wt.loadCommitted(parent);
  const taken = async (n: string) =>
    specs.objects.some((o) => o.kind === 'Run' && o.name === n) ||
    specs.invalid.some((o) => o.kind === 'Run' && o.name === n) ||
    (await runGit(['cat-file', '-e', `${parent}:runs/${n}.yaml`], { cwd: wt.dir })).code === 0 ||
    (onBranch && existsSync(join(wt.dir, 'runs', `${n}.yaml`)));
  const named = base ? (parseDocument(base.text).getIn(['metadata', 'name']) as unknown) : undefined;
  const fromFile = typeof named === 'string' ? named : undefined;
  const given = opts.name;
  if (given !== undefined) {
    checkName(given, 'run', true);
    if (await taken(given))
      throw new AdvError(
        ErrorCode.UsageError,
        `a run named ${given} already exists in ${opts.branch} (or runs/${given}.yaml does)`,
        {
          hint: `pick another --name; adv get runs ${given} shows the one there`,
        },
      );
    return given;
  }
  // A file is a template: its name starts the new one, as the command's script does.
  const start =
    command.length || !fromFile ? nameFromCommand(command) : fromFile.slice(0, 40).replace(/[-.]+$/, '');
  const stem = `${start}-${stamp(new Date())}`;
  for (let i = 1; ; i++) {
    const n = i === 1 ? stem : `${stem}-${i}`;
    if (!(await taken(n))) return n;
  }
}

/** The spec as the controller will load it, in the commit to be pushed: errors in it stop here. */
async function validate(wt: SpecsWorkTree, commit: string, rel: string, io: Io): Promise<void> {
  const loaded = await wt.loadCommitted(commit);
  const mine = loaded.diagnostics.filter((d) => d.file === rel && d.severity === 'error');
  if (!mine.length) return;
  for (const d of mine) io.stdout.write(printableDiagnostic(d) + '\n');
  throw new AdvError(
    ErrorCode.SpecInvalid,
    `the run adv submit wrote (${rel}) is invalid; nothing was committed`,
    {
      quiet: true,
    },
  );
}

function printSubmitted(
  io: Io,
  s: { name: string; rel: string; snap: CodeSnapshot; opts: SubmitOpts; commit: string },
): void {
  const repo = s.opts.repo ? ` --repo ${s.opts.repo}` : '';
  const where = s.opts.review ? `branch adv/submit/${s.name}` : s.opts.branch;
  io.stdout.write(
    `run/${s.name} submitted: ${s.rel} on ${where} (commit ${s.commit.slice(0, 10)})\n` +
      `  code: ${s.snap.commit.slice(0, 10)}${s.snap.dirty ? ` — ${s.snap.head.slice(0, 10)} plus your uncommitted changes (${snapshotRef(s.name)})` : ''}\n`,
  );
  if (s.opts.review) {
    io.stdout.write(`It starts when adv/submit/${s.name} is merged into ${s.opts.branch}.\n\n`);
    return;
  }
  if (s.opts.follow) return;
  io.stdout.write(
    `Next:\n  adv get runs ${s.name}${repo}\n  adv logs ${s.name} -f${repo}\n  adv cancel ${s.name}${repo}\n`,
  );
}

/** `adv plan` of the review branch against the watched branch, as the pull request would show it. */
async function printPlan(
  io: Io,
  at: { dir: string; head: string; branch: string; local: boolean; name: string; token?: string },
  runCli: RunCli,
): Promise<void> {
  let base = at.branch;
  if (!at.local) {
    // The clone has the branch alone: the status branch tells the plan what already runs, and
    // the snapshot is what code.ref names. Either may be missing (no controller yet): no plan
    // line depends on more than a "waiting".
    for (const ref of ['refs/heads/adventuretime/status', snapshotRef(at.name)])
      await runGit(
        [
          'fetch',
          '--quiet',
          '--depth',
          '1',
          'origin',
          `+${ref}:${ref.replace('refs/heads/', 'refs/remotes/origin/')}`,
        ],
        {
          cwd: at.dir,
          env: credentialEnv(at.token),
        },
      );
    base = `refs/heads/${at.branch}`;
  }
  await runCli(['plan', '--repo', at.dir, '--base', base, '--head', at.head, '--branch', at.branch], io);
}
