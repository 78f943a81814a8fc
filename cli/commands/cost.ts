import type { Command } from 'commander';
import { Option } from 'commander';
import {
  AdvError,
  ErrorCode,
  formatMoney,
  usageReport,
  type RunStatusDoc,
  type Usage,
  type UsageReport,
  type UsageRow,
} from '../../controller/index.js';
import { renderTable } from '../format.js';
import { openStatus } from '../status-reader.js';
import type { Io } from '../output.js';

/** `adv cost`: money and GPU-hours per run and per label, from the status branch alone. */
export function registerCost(program: Command, io: Io): void {
  program
    .command('cost')
    .description(
      'Cost and GPU-hours per run (and per label value with --by), from the status branch: runs deleted since count too',
    )
    .option('--by <label>', 'also total per value of this label (runs without it: "(none)")')
    .option('--since <date>', 'count only attempt time from this date (ISO 8601, e.g. 2026-11-01)')
    .option('--until <date>', 'count only attempt time before this date')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--status-branch <name>', 'status branch (default adventuretime/status)')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addHelpText(
      'after',
      `
Money is each attempt's recorded price (the Backend's costPerHour × nodes, or the rate a rented
instance reported) × the hours it billed; GPU-hours are the hours it ran × resources.gpus × nodes.

Examples:
  adv cost --by team --since 2026-11-01 --until 2026-12-01   # a month, per team
  adv cost -o json`,
    )
    .action((opts: CostOpts) => costAction(io, opts));
}

interface CostOpts {
  by?: string;
  since?: string;
  until?: string;
  repo?: string;
  statusBranch?: string;
  output: string;
}

/** A date option as ms since the epoch, or a usage error that says what is wrong. */
function dateOf(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const ms = Date.parse(value);
  if (!Number.isFinite(ms))
    throw new AdvError(ErrorCode.UsageError, `${flag} ${value} is not a date`, {
      hint: 'give an ISO 8601 date or time, e.g. 2026-11-01 or 2026-11-01T12:00:00Z',
    });
  return ms;
}

async function costAction(io: Io, opts: CostOpts): Promise<void> {
  const sinceMs = dateOf(opts.since, '--since');
  const untilMs = dateOf(opts.until, '--until');
  if (sinceMs !== undefined && untilMs !== undefined && untilMs <= sinceMs)
    throw new AdvError(ErrorCode.UsageError, `--until ${opts.until} is not after --since ${opts.since}`, {
      hint: 'swap them',
    });
  const r = await openStatus(opts, io);
  try {
    const docs = r.store.names('Run').map((n) => r.store.get<RunStatusDoc>('Run', n)!);
    const report = usageReport(
      docs,
      {
        ...(sinceMs !== undefined ? { sinceMs } : {}),
        ...(untilMs !== undefined ? { untilMs } : {}),
        ...(opts.by !== undefined ? { by: opts.by } : {}),
      },
      Date.now(),
    );
    io.stdout.write(
      opts.output === 'json' ? JSON.stringify(report, null, 2) + '\n' : costText(report, opts.by),
    );
  } finally {
    await r.close();
  }
}

const cells = (u: UsageRow | (Usage & { name: string })) => [
  u.name,
  u.priced ? formatMoney(u.cost) : '-',
  u.gpuHours.toFixed(2),
  u.hours.toFixed(2),
  String(u.attempts),
];

const HEADERS = ['COST', 'GPU-HOURS', 'HOURS', 'ATTEMPTS'];

function costText(r: UsageReport, by: string | undefined): string {
  if (!r.runs.length) return 'No attempt ran in that period.\n';
  const out = [renderTable(['RUN', ...HEADERS], r.runs.map(cells)).trimEnd()];
  if (by !== undefined && r.groups)
    out.push('', renderTable([by.toUpperCase(), ...HEADERS], r.groups.map(cells)).trimEnd());
  const t = r.total;
  out.push(
    '',
    `Total: ${t.priced ? formatMoney(t.cost) : '-'} over ${t.priced} priced attempt(s); ${t.gpuHours.toFixed(2)} GPU-hours; ${r.runs.length} run(s).`,
  );
  return out.join('\n') + '\n';
}
