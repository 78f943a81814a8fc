import type { Command } from 'commander';
import { Option } from 'commander';
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import {
  CROSS_FILE_CODES,
  DirectorySource,
  loadSpecs,
  AdvError,
  ErrorCode,
  type Diagnostic,
  type LoadResult,
  WorkTreeSource,
} from '../../controller/index.js';
import { printableDiagnostic } from '../format.js';
import { colours, printable, type Io } from '../output.js';

/** What validation found: every diagnostic, and the objects that passed. */
interface Checked {
  fileCount: number;
  diagnostics: Diagnostic[];
  objects: { kind: string; name: string; file: string; line: number }[];
}

/**
 * One file checked alone: the rules that need the rest of the repo (a backend defined elsewhere,
 * a name used elsewhere, a second Storage) can neither pass nor fail, so they are not reported,
 * and a document only they held back counts as valid — as `adv apply` checks a file first.
 */
function checked(result: LoadResult, oneFile: boolean): Checked {
  const objects = result.objects.map((o) => ({ kind: o.kind, name: o.name, file: o.file, line: o.line }));
  if (!oneFile) return { fileCount: result.fileCount, diagnostics: result.diagnostics, objects };
  const own = (d: Diagnostic) => !CROSS_FILE_CODES.has(d.code);
  for (const d of result.invalid)
    if (d.kind && d.name && !d.diagnostics.some(own))
      objects.push({ kind: d.kind, name: d.name, file: d.file, line: d.line });
  return { fileCount: result.fileCount, diagnostics: result.diagnostics.filter(own), objects };
}

export function registerValidate(program: Command, io: Io): void {
  program
    .command('validate')
    .description('Validate a specs repo (or one file): schema, names, references, DAG graphs, meshes')
    .argument('[path]', 'directory or file to validate', '.')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .option('--max-file-bytes <n>', 'largest spec file accepted', (v) => parseInt(v, 10))
    .option('--max-documents <n>', 'most YAML documents per file', (v) => parseInt(v, 10))
    .option('--max-alias-count <n>', 'most YAML alias expansions per document', (v) => parseInt(v, 10))
    .addHelpText(
      'after',
      `
Examples:
  adv validate specs/            # every *.yaml under specs/
  adv validate runs/train.yaml   # one file: the cross-file rules (backends defined elsewhere,
                                 # names unique across the repo, one Storage) are not checked
  adv validate -o json . | jq '.diagnostics[] | .message'

In a git work tree, a directory is checked as the controller will read it once committed: the
files git tracks or would track (ignored ones are skipped), a symlink named like a spec is an
error (git stores only its target path), submodules and links to folders are skipped with a
warning. Elsewhere every file is read and links are skipped with a warning.

Exit codes: 0 valid, 1 invalid, 3 path not found.`,
    )
    .action(
      async (
        path: string,
        opts: { output: string; maxFileBytes?: number; maxDocuments?: number; maxAliasCount?: number },
      ) => {
        const root = resolve(io.cwd, path);
        const limits = {
          ...(opts.maxFileBytes ? { maxFileBytes: opts.maxFileBytes } : {}),
          ...(opts.maxDocuments ? { maxDocuments: opts.maxDocuments } : {}),
          ...(opts.maxAliasCount ? { maxAliasCount: opts.maxAliasCount } : {}),
        };
        const oneFile = (await stat(root)).isFile();
        // In a git work tree, what the controller will read once it is committed; else every file.
        const source = (!oneFile && (await WorkTreeSource.open(root))) || new DirectorySource(root);
        const result = checked(await loadSpecs(source, { limits }), oneFile);
        const errors = result.diagnostics.filter((d) => d.severity === 'error');
        if (opts.output === 'json') {
          io.stdout.write(
            JSON.stringify(
              {
                valid: errors.length === 0,
                files: result.fileCount,
                objects: result.objects,
                diagnostics: result.diagnostics,
              },
              null,
              2,
            ) + '\n',
          );
        } else {
          const c = colours(io.stdout, io.env);
          for (const d of result.diagnostics) {
            const text = printableDiagnostic(d);
            io.stdout.write(
              (d.severity === 'error'
                ? c.red(text.split('\n')[0]!) +
                  text.slice(text.indexOf('\n') >= 0 ? text.indexOf('\n') : text.length)
                : c.yellow(text)) + '\n',
            );
          }
          const summary = `${result.fileCount} file${result.fileCount === 1 ? '' : 's'}, ${result.objects.length} valid object${result.objects.length === 1 ? '' : 's'}, ${errors.length} error${errors.length === 1 ? '' : 's'}`;
          io.stdout.write((errors.length ? c.red(summary) : c.green(summary)) + '\n');
        }
        if (result.fileCount === 0 && opts.output !== 'json') {
          io.stderr.write(`warning: no *.yaml or *.yml files under ${printable(root)}\n`);
        }
        if (errors.length > 0)
          throw new AdvError(ErrorCode.SpecInvalid, `${errors.length} error(s) in ${printable(root)}`, {
            quiet: true,
          });
      },
    );
}
