import type { Command } from 'commander';
import { Option } from 'commander';
import { stringify } from 'yaml';
import { AdvError, ErrorCode } from '../../controller/index.js';
import type { BackendStatusDoc, RunStatusDoc } from '../../controller/status/types.js';
import { age, renderTable } from '../format.js';
import { openStatus } from '../status-reader.js';
import type { Io } from '../output.js';

const KINDS: Record<string, 'runs' | 'backends'> = {
  run: 'runs',
  runs: 'runs',
  backend: 'backends',
  backends: 'backends',
};

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
    .description('List runs or backends with their status, read from the status branch')
    .argument('<kind>', 'runs | backends')
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
            hint: 'use runs or backends',
          });
        const r = await openStatus(opts, io);
        try {
          const statusKind = kind === 'runs' ? 'Run' : 'Backend';
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
              (d) => kind !== 'runs' || selectorMatches((d as RunStatusDoc).metadata.labels, opts.selector),
            );
          if (opts.output === 'json')
            return void io.stdout.write(
              JSON.stringify(docs.length === 1 && name ? docs[0] : { items: docs }, null, 2) + '\n',
            );
          if (opts.output === 'yaml')
            return void io.stdout.write(docs.map((d) => stringify(d)).join('---\n'));
          if (kind === 'runs') {
            const wide = opts.output === 'wide';
            const rows = (docs as RunStatusDoc[]).map((d) => {
              const a = d.status.attempts.at(-1);
              const row = [
                d.metadata.name,
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
