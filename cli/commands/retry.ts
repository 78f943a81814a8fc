import type { Command } from 'commander';
import { AdvError, ErrorCode, RETRY_ANNOTATION, type DagStatusDoc } from '../../controller/index.js';
import { checkName } from '../names.js';
import { printable, type Io } from '../output.js';
import { commitSpecEdit } from '../spec-edit.js';
import type { RepoOpts } from '../specs-writer.js';
import { openStatus } from '../status-reader.js';

/**
 * `adv retry [run] NAME`: commits the retry annotation; the controller starts a new attempt.
 * `adv retry dag NAME [--failed]`: the same annotation on the DAG; the DAG planner passes it to the
 * children of its failed nodes (the nodes skipped after them then run as their needs succeed).
 */
export function registerRetry(program: Command, io: Io): void {
  program
    .command('retry')
    .description(
      "Start a new attempt of a finished or failed run, from its last checkpoint, with a fresh failure budget; or re-run a DAG's failed nodes and the nodes skipped after them (commits an annotation)",
    )
    .argument('<kind-or-name>', 'run name, or the kind (run | dag) followed by the name')
    .argument('[name]', 'the name, after a kind')
    .option('--failed', "a DAG's failed nodes and what was skipped after them (the default for a DAG)")
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .addHelpText(
      'after',
      '\nExamples:\n  adv retry fork-mid-2026-01-21-001\n  adv retry dag pipeline --failed   # the succeeded nodes keep their results\n  adv get runs --watch   # see it start',
    )
    .action(async (first: string, second: string | undefined, opts: RepoOpts & { failed?: boolean }) => {
      if (second !== undefined && !/^(runs?|dags?)$/i.test(first))
        throw new AdvError(ErrorCode.UsageError, `unknown kind "${printable(first)}"`, {
          hint: 'use: adv retry NAME, adv retry run NAME or adv retry dag NAME --failed',
        });
      const kind = second !== undefined && /^dags?$/i.test(first) ? 'DAG' : 'Run';
      const name = checkName(second ?? first, kind === 'DAG' ? 'DAG' : 'run');
      if (opts.failed && kind === 'Run')
        throw new AdvError(ErrorCode.UsageError, '--failed goes with a DAG: adv retry dag NAME --failed', {
          hint: `a run is retried as a whole: adv retry ${name}`,
        });
      if (kind === 'DAG') await failedNodesOrSay(name, opts, io);
      return commitSpecEdit(
        io,
        kind,
        name,
        opts,
        (set) => set(['metadata', 'annotations', RETRY_ANNOTATION], new Date().toISOString()),
        kind === 'DAG' ? `retry dag/${name}: its failed nodes` : `retry run/${name}`,
      );
    });
}

/**
 * The DAG's failed nodes, from the status branch; an error when it has none (nothing would run).
 * Without a status branch to read (no controller yet), the request is committed as asked.
 */
async function failedNodesOrSay(name: string, opts: RepoOpts, io: Io): Promise<void> {
  let doc: DagStatusDoc | undefined;
  try {
    const status = await openStatus({ ...(opts.repo ? { repo: opts.repo } : {}), branch: opts.branch }, io);
    try {
      doc = status.store.get<DagStatusDoc>('DAG', name);
    } finally {
      await status.close();
    }
  } catch {
    return;
  }
  if (!doc) return;
  const failed = Object.entries(doc.status.nodes).filter(([, n]) => n.phase === 'Failed');
  if (failed.length) {
    io.stderr.write(`retrying ${failed.map(([id]) => id).join(', ')} of dag/${name}\n`);
    return;
  }
  throw new AdvError(
    ErrorCode.UsageError,
    `dag/${name} has no failed node to retry (it is ${doc.status.phase})`,
    {
      hint: `adv describe dag ${name} shows its nodes`,
    },
  );
}
