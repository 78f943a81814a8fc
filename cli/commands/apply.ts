import type { Command } from 'commander';
import { readFile } from 'node:fs/promises';
import { relative, resolve } from 'node:path';
import { AdvError, CROSS_FILE_CODES, ErrorCode, SpecLoader, type Kind } from '../../controller/index.js';
import { gitToken, resolveRepo } from '../repo.js';
import { openSpecsWorkTree, type RepoOpts } from '../specs-writer.js';
import { printableDiagnostic } from '../format.js';
import { printable, type Io } from '../output.js';

const DIRS: Record<Kind, string> = {
  Run: 'runs',
  DAG: 'dags',
  Backend: 'backends',
  Storage: '',
  Environment: 'environments',
  Provider: 'notifications',
  Alert: 'notifications',
  Sweep: 'sweeps',
  Dataset: 'datasets',
};

/** `adv apply -f FILE`: validates the file alone, then in the repo, and commits it (pushes for a URL). */
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
          for (const d of ownDiagnostics) io.stdout.write(printableDiagnostic(d) + '\n');
          throw new AdvError(
            ErrorCode.SpecInvalid,
            errors.length
              ? `${printable(opts.file)} is invalid; nothing was committed`
              : `${printable(opts.file)} holds no spec`,
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
          for (const d of mine) io.stdout.write(printableDiagnostic(d) + '\n');
          throw new AdvError(
            ErrorCode.SpecInvalid,
            `${printable(opts.file)} does not fit the specs repo; nothing was committed`,
            {
              quiet: true,
            },
          );
        }
        const names = docs.map((o) => `${o.kind.toLowerCase()}/${o.name}`).join(', ');
        const sha = await wt.commit([target], `apply ${names}`);
        io.stdout.write(`${names} applied as ${printable(target)} (commit ${sha.slice(0, 10)})\n`);
      } finally {
        await wt.close();
      }
    });
}
