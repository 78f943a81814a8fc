import type { Command } from 'commander';
import { Option } from 'commander';
import { stringify } from 'yaml';
import { AdvError, ErrorCode } from '../../controller/index.js';
import type { BackendStatusDoc, DagStatusDoc, RunStatusDoc } from '../../controller/status/types.js';
import { age, renderTable } from '../format.js';
import { openStatus } from '../status-reader.js';
import type { Io } from '../output.js';

const KINDS: Record<string, 'runs' | 'backends' | 'dags'> = {
  run: 'runs',
  runs: 'runs',
  backend: 'backends',
  backends: 'backends',
  dag: 'dags',
  dags: 'dags',
};
const STATUS_KIND = { runs: 'Run', backends: 'Backend', dags: 'DAG' } as const;

function selectorMatches(labels: Record<string, string> | undefined, selector: string | undefined): boolean {
  if (!selector) return true;
  return selector.split(',').every((term) => {
    const [k, v] = term.split('=');
    return v === undefined ? labels?.[k!] !== undefined : labels?.[k!] === v;
  });
}

export function registerGet(program: Command, io: Io): void {
  program
    .command('get')
    .description('List runs, DAGs or backends with their status, read from the status branch')
    .argument('<kind>', 'runs | dags | backends')
    .argument('[name]', 'only this object')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--status-branch <name>', 'status branch (default adventuretime/status)')
    .addOption(
      new Option('-o, --output <format>', 'output format')
        .choices(['table', 'wide', 'yaml', 'json'])
        .default('table'),
    )
    .option('-l, --selector <key=value,...>', 'only objects with these labels')
    .addHelpText(
      'after',
      `
Examples:
  adv get runs
  adv get runs -l project=fork -o wide
  adv get run hello -o yaml
  adv get runs -l adventuretime.dev/dag=pipeline   # the child runs of one DAG
  adv get dags
  adv get backends`,
    )
    .action(
      async (
        kindArg: string,
        name: string | undefined,
        opts: { repo?: string; statusBranch?: string; output: string; selector?: string },
      ) => {
        const kind = KINDS[kindArg.toLowerCase()];
        if (!kind)
          throw new AdvError(ErrorCode.UsageError, `unknown kind "${kindArg}"`, {
            hint: 'use runs, dags or backends',
          });
        const r = await openStatus(opts, io);
        try {
          const statusKind = STATUS_KIND[kind];
          let names = r.store.names(statusKind);
          if (name) {
            if (!names.includes(name))
              throw new AdvError(ErrorCode.NotFound, `${kindArg} "${name}" has no status`, {
                hint: `adv get ${kind} lists what exists`,
              });
            names = [name];
          }
          const docs = names
            .map((n) => r.store.get(statusKind, n)!)
            .filter(
              (d) =>
                kind === 'backends' ||
                selectorMatches((d as RunStatusDoc | DagStatusDoc).metadata.labels, opts.selector),
            );
          if (opts.output === 'json')
            return void io.stdout.write(
              JSON.stringify(docs.length === 1 && name ? docs[0] : { items: docs }, null, 2) + '\n',
            );
          if (opts.output === 'yaml')
            return void io.stdout.write(docs.map((d) => stringify(d)).join('---\n'));
          if (kind === 'dags') {
            const rows = (docs as DagStatusDoc[]).map((d) => {
              const nodes = Object.values(d.status.nodes);
              const n = (p: string) => nodes.filter((x) => x.phase === p).length;
              return [
                d.metadata.name,
                d.status.phase,
                `${n('Succeeded')}/${nodes.length}`,
                String(
                  nodes.filter((x) => ['Pending', 'Scheduling', 'Queued', 'Running'].includes(x.phase))
                    .length,
                ),
                String(n('Failed')),
                age(d.status.createdAt),
                d.status.reason ?? '',
              ];
            });
            return void io.stdout.write(
              rows.length
                ? renderTable(['NAME', 'PHASE', 'SUCCEEDED', 'ACTIVE', 'FAILED', 'AGE', 'REASON'], rows)
                : 'No DAGs found.\n',
            );
          }
          if (kind === 'runs') {
            const wide = opts.output === 'wide';
            // Child runs of DAGs say whose they are.
            const owners = !wide && (docs as RunStatusDoc[]).some((d) => d.status.owner);
            const rows = (docs as RunStatusDoc[]).map((d) => {
              const a = d.status.attempts.at(-1);
              const row = [
                d.metadata.name,
                ...(owners ? [d.status.owner ? `dag/${d.status.owner}` : ''] : []),
                d.status.phase,
                a ? String(a.n) : '-',
                a?.backend ?? '-',
                a?.jobId ?? '-',
                age(d.status.createdAt ?? d.status.attempts[0]?.submittedAt),
                d.status.reason ?? '',
              ];
              if (wide)
                row.push(
                  d.status.owner ?? '',
                  (d.status.specCommit ?? '').slice(0, 10),
                  d.status.message ?? '',
                );
              return row;
            });
            const headers = [
              'NAME',
              ...(owners ? ['OWNER'] : []),
              'PHASE',
              'ATTEMPT',
              'BACKEND',
              'JOB',
              'AGE',
              'REASON',
              ...(wide ? ['OWNER', 'SPEC-COMMIT', 'MESSAGE'] : []),
            ];
            io.stdout.write(rows.length ? renderTable(headers, rows) : 'No runs found.\n');
          } else {
            const rows = (docs as BackendStatusDoc[]).map((d) => {
              const ready = d.status.conditions.find((c) => c.type === 'Ready');
              return [
                d.metadata.name,
                d.status.type,
                ready?.status ?? 'Unknown',
                String(d.status.activeAttempts),
                ready?.message ?? '',
              ];
            });
            io.stdout.write(
              rows.length
                ? renderTable(['NAME', 'TYPE', 'READY', 'ACTIVE', 'MESSAGE'], rows)
                : 'No backends found.\n',
            );
          }
        } finally {
          await r.close();
        }
      },
    );
}
