import type { Command } from 'commander';
import { readFile } from 'node:fs/promises';
import { relative, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { AdvError, ErrorCode, SpecLoader, formatDiagnostic, type Kind } from '../../controller/index.js';
import { CROSS_FILE_CODES } from '../../controller/spec/loader.js';
import { RECONCILE_ANNOTATION, RETRY_ANNOTATION } from '../../controller/reconcile/run-plan.js';
import { gitToken, resolveRepo } from '../repo.js';
import { openSpecsWorkTree } from '../specs-writer.js';
import type { Io } from '../output.js';

const DIRS: Record<Kind, string> = { Run: 'runs', DAG: 'dags', Backend: 'backends', Storage: '' };

interface RepoOpts {
  repo?: string;
  branch: string;
}

export function registerApply(program: Command, io: Io): void {
  program
    .command('apply')
    .description('Validate a spec file, commit it to the specs repo (and push, for a URL)')
    .requiredOption('-f, --file <path>', 'the spec file')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .addHelpText(
      'after',
      '\nExamples:\n  adv apply -f runs/sweep-3.yaml\n  adv apply -f train.yaml --repo https://git.example.com/lab/specs.git',
    )
    .action(async (opts: RepoOpts & { file: string }) => {
      const file = resolve(io.cwd, opts.file);
      const bytes = await readFile(file);
      const repo = await resolveRepo(opts.repo, io.cwd);
      const wt = await openSpecsWorkTree(repo, opts.branch, await gitToken(io.env));
      try {
        // Where it goes: where it is, when it is inside the work tree; else <kind dir>/<name>.yaml.
        const inside = relative(wt.dir, file);
        const loader = new SpecLoader();
        loader.loadFile(inside.startsWith('..') ? opts.file : inside, bytes, 'apply');
        // The file alone first (cross-file rules wait for the whole repo, below).
        const own = loader.result();
        const ownDiagnostics = own.diagnostics.filter((d) => !CROSS_FILE_CODES.has(d.code));
        const errors = ownDiagnostics.filter((d) => d.severity === 'error');
        const docs = [
          ...own.objects.map((o) => ({ kind: o.kind, name: o.name })),
          ...own.invalid.filter(
            (d) => d.kind && d.name && d.diagnostics.every((x) => CROSS_FILE_CODES.has(x.code)),
          ),
        ] as { kind: Kind; name: string }[];
        if (errors.length || docs.length === 0) {
          for (const d of ownDiagnostics) io.stdout.write(formatDiagnostic(d) + '\n');
          throw new AdvError(
            ErrorCode.SpecInvalid,
            errors.length ? `${opts.file} is invalid; nothing was committed` : `${opts.file} holds no spec`,
            { quiet: errors.length > 0 },
          );
        }
        const first = docs[0]!;
        const target = !inside.startsWith('..')
          ? inside
          : first.kind === 'Storage'
            ? 'storage.yaml'
            : `${DIRS[first.kind]}/${first.name}.yaml`;
        // Then the repo with the file in it; on failure the work tree is left as it was.
        const previous = await wt.read(target);
        await wt.write(target, bytes.toString('utf8'));
        const whole = await wt.load();
        const mine = whole.diagnostics.filter((d) => d.file === target && d.severity === 'error');
        if (mine.length) {
          if (previous === undefined) await wt.remove(target);
          else await wt.write(target, previous);
          for (const d of mine) io.stdout.write(formatDiagnostic(d) + '\n');
          throw new AdvError(
            ErrorCode.SpecInvalid,
            `${opts.file} does not fit the specs repo; nothing was committed`,
            {
              quiet: true,
            },
          );
        }
        const names = docs.map((o) => `${o.kind.toLowerCase()}/${o.name}`).join(', ');
        const sha = await wt.commit([target], `apply ${names}`);
        io.stdout.write(`${names} applied as ${target} (commit ${sha.slice(0, 10)})\n`);
      } finally {
        await wt.close();
      }
    });

  const patchSpec = async (
    kind: 'Run' | 'DAG',
    name: string,
    opts: RepoOpts,
    edit: (set: (path: string[], v: unknown) => void) => void,
    message: string,
  ) => {
    const repo = await resolveRepo(opts.repo, io.cwd);
    const wt = await openSpecsWorkTree(repo, opts.branch, await gitToken(io.env));
    try {
      const specs = await wt.load();
      const found =
        specs.objects.find((o) => o.kind === kind && o.name === name) ??
        specs.invalid.find((o) => o.kind === kind && o.name === name);
      if (!found)
        throw new AdvError(ErrorCode.NotFound, `no ${kind} "${name}" in ${repo}`, {
          hint:
            kind === 'Run' && name.includes('.')
              ? `"${name}" looks like a DAG node: cancel its DAG (adv cancel dag ${name.split('.')[0]}) or remove the node from it`
              : `adv get ${kind === 'Run' ? 'runs' : 'dags'} lists them`,
        });
      const text = (await wt.read(found.file))!;
      const docs = parseAllDocuments(text);
      const list = Array.isArray(docs) ? docs : [];
      const doc = list.find((d) => {
        const v = d.toJS() as { kind?: string; metadata?: { name?: string } } | null;
        return v?.kind === kind && v.metadata?.name === name;
      });
      if (!doc) throw new AdvError(ErrorCode.NotFound, `cannot find ${kind} "${name}" in ${found.file}`);
      edit((path, v) => doc.setIn(path, v));
      await wt.write(found.file, list.map((d) => d.toString()).join(''));
      const sha = await wt.commit([found.file], message);
      io.stdout.write(`${message} (${found.file}, commit ${sha.slice(0, 10)})\n`);
    } finally {
      await wt.close();
    }
  };

  program
    .command('cancel')
    .description('Cancel a run or a DAG (its live nodes): commits spec.suspend: true to the specs repo')
    .argument('<kind-or-name>', 'run name, or the kind (run | dag) followed by the name')
    .argument('[name]', 'the name, after a kind')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .addHelpText(
      'after',
      '\nExamples:\n  adv cancel fork-mid-2026-01-21-001\n  adv cancel dag pipeline\n  (undo: set spec.suspend: false, or delete the line, and push)',
    )
    .action((first: string, second: string | undefined, opts: RepoOpts) => {
      if (second !== undefined && !/^(runs?|dags?)$/i.test(first))
        throw new AdvError(ErrorCode.UsageError, `unknown kind "${first}"`, {
          hint: 'use: adv cancel NAME, adv cancel run NAME or adv cancel dag NAME',
        });
      const kind = second !== undefined && /^dags?$/i.test(first) ? 'DAG' : 'Run';
      const name = second ?? first;
      return patchSpec(
        kind,
        name,
        opts,
        (set) => set(['spec', 'suspend'], true),
        `cancel ${kind.toLowerCase()}/${name}`,
      );
    });

  program
    .command('retry')
    .description(
      'Start a new attempt of a finished or failed run, from its last checkpoint, with a fresh failure budget (commits an annotation)',
    )
    .argument('<name>', 'run name')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .addHelpText(
      'after',
      '\nExamples:\n  adv retry fork-mid-2026-01-21-001\n  adv get runs --watch   # see it start',
    )
    .action((name: string, opts: RepoOpts) =>
      patchSpec(
        'Run',
        name,
        opts,
        (set) => set(['metadata', 'annotations', RETRY_ANNOTATION], new Date().toISOString()),
        `retry run/${name}`,
      ),
    );

  program
    .command('reconcile')
    .description('Ask the controller to look at a run now (a running controller is told directly)')
    .argument('<kind>', 'run')
    .argument('<name>', 'run name')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .option('--data-dir <dir>', "the controller's data dir, to find a running controller")
    .action(async (kind: string, name: string, opts: RepoOpts & { dataDir?: string }) => {
      if (!/^runs?$/i.test(kind))
        throw new AdvError(ErrorCode.UsageError, `cannot reconcile "${kind}"`, {
          hint: 'use: adv reconcile run NAME',
        });
      const { defaultDataDir } = await import('../repo.js');
      const repo = await resolveRepo(opts.repo, io.cwd);
      const dataDir = opts.dataDir ?? (await defaultDataDir(repo, io.env));
      const info = await readFile(`${dataDir}/controller.json`, 'utf8')
        .then((t) => JSON.parse(t) as { url?: string | null; pid?: number })
        .catch(() => undefined);
      let alive = false;
      try {
        if (info?.pid) process.kill(info.pid, 0);
        alive = Boolean(info?.pid);
      } catch {
        alive = false;
      }
      if (alive && info?.url) {
        const secret = io.env.ADV_WEBHOOK_SECRET;
        const res = await fetch(`${info.url}/api/v1/reconcile/run/${encodeURIComponent(name)}`, {
          method: 'POST',
          headers: secret ? { authorization: `Bearer ${secret}` } : {},
        });
        if (!res.ok)
          throw new AdvError(
            ErrorCode.BackendError,
            `controller answered ${res.status}: ${(await res.text()).trim()}`,
            {
              hint:
                res.status === 401
                  ? "set ADV_WEBHOOK_SECRET to the controller's webhook secret"
                  : 'check the controller log',
            },
          );

        io.stdout.write(`run/${name}: reconcile requested from the controller at ${info.url}\n`);
        return;
      }
      // No controller to tell: leave the request in git, as Flux's requestedAt annotation does.
      await patchSpec(
        'Run',
        name,
        opts,
        (set) => set(['metadata', 'annotations', RECONCILE_ANNOTATION], new Date().toISOString()),
        `reconcile run/${name}`,
      );
    });
}
