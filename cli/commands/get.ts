import type { Command } from 'commander';
import { Option } from 'commander';
import { stringify } from 'yaml';
import {
  AdvError,
  ErrorCode,
  age,
  SPECS_SOURCE,
  SWEEP_LABEL,
  type BackendStatusDoc,
  type DagStatusDoc,
  type RunStatusDoc,
  type SourceStatusDoc,
} from '../../controller/index.js';
import { phaseStyle, renderTable } from '../format.js';
import { colours, printable, type Io } from '../output.js';
import { parseDuration } from '../repo.js';
import { parseSelector, selectorMatches } from '../selector.js';
import { treeTable } from '../run-tree.js';
import { openStatus, type StatusReader } from '../status-reader.js';
import { getAgents } from './agent.js';
import { getNotifications, NOTIFY_KINDS } from './notifications.js';
import { getSweeps } from './sweep.js';

const KINDS: Record<string, 'runs' | 'backends' | 'dags'> = {
  run: 'runs',
  runs: 'runs',
  backend: 'backends',
  backends: 'backends',
  dag: 'dags',
  dags: 'dags',
};
const STATUS_KIND = { runs: 'Run', backends: 'Backend', dags: 'DAG' } as const;

type Kind = 'runs' | 'backends' | 'dags';
type AnyDoc = RunStatusDoc | DagStatusDoc | BackendStatusDoc;

const ACTIVE = ['Pending', 'Scheduling', 'Queued', 'Running'];

type Table = { headers: string[]; rows: string[][] };

/** The table of a kind: headers, and one row per document (first cell: its name). */
function tableOf(kind: Kind, docs: AnyDoc[], wide: boolean): Table {
  if (kind === 'dags') return dagTable(docs as DagStatusDoc[], wide);
  if (kind === 'backends') return backendTable(docs as BackendStatusDoc[]);
  return runTable(docs as RunStatusDoc[], wide);
}

function dagTable(docs: DagStatusDoc[], wide: boolean): Table {
  const rows = docs.map((d) => {
    const nodes = Object.values(d.status.nodes);
    const n = (p: string) => nodes.filter((x) => x.phase === p).length;
    return [
      d.metadata.name,
      d.status.phase,
      `${n('Succeeded')}/${nodes.length}`,
      String(nodes.filter((x) => ACTIVE.includes(x.phase)).length),
      String(n('Failed')),
      age(d.status.createdAt),
      d.status.reason ?? '',
      ...(wide ? [d.status.specFile ?? '', d.status.message ?? ''] : []),
    ];
  });
  return {
    headers: [
      'NAME',
      'PHASE',
      'SUCCEEDED',
      'ACTIVE',
      'FAILED',
      'AGE',
      'REASON',
      ...(wide ? ['FILE', 'MESSAGE'] : []),
    ],
    rows,
  };
}

function backendTable(docs: BackendStatusDoc[]): Table {
  const rows = docs.map((d) => {
    const ready = d.status.conditions.find((c) => c.type === 'Ready');
    const degraded = d.status.conditions.find((c) => c.type === 'Degraded');
    return [
      d.metadata.name,
      d.status.type,
      ready?.status ?? 'Unknown',
      degraded?.status ?? 'False',
      String(d.status.activeAttempts),
      [ready?.message, degraded?.status === 'True' ? degraded.message : ''].filter(Boolean).join('; '),
    ];
  });
  return { headers: ['NAME', 'TYPE', 'READY', 'DEGRADED', 'ACTIVE', 'MESSAGE'], rows };
}

function runTable(docs: RunStatusDoc[], wide: boolean): Table {
  // Child runs of DAGs say whose they are.
  const owners = docs.some((d) => d.status.owner);
  const rows = docs.map((d) => {
    const a = d.status.attempts.at(-1);
    const total = d.appliedSpec?.totalSteps;
    const step = d.status.checkpoint?.step;
    return [
      d.metadata.name,
      ...(owners ? [d.status.owner ? `${ownerKind(d)}/${d.status.owner}` : ''] : []),
      d.status.phase,
      a ? String(a.n) : '-',
      a?.backend ?? '-',
      a?.jobId ?? '-',
      age(d.status.createdAt ?? d.status.attempts[0]?.submittedAt),
      d.status.reason ?? '',
      ...(wide
        ? [
            step === undefined ? '-' : total ? `${step}/${total}` : String(step),
            (d.status.specCommit ?? '').slice(0, 10),
            d.status.message ?? '',
          ]
        : []),
    ];
  });
  return {
    headers: [
      'NAME',
      ...(owners ? ['OWNER'] : []),
      'PHASE',
      'ATTEMPT',
      'BACKEND',
      'JOB',
      'AGE',
      'REASON',
      ...(wide ? ['STEP', 'SPEC-COMMIT', 'MESSAGE'] : []),
    ],
    rows,
  };
}

/** `sweep` for a Sweep's point (its label names the owner), else `dag`. */
const ownerKind = (d: RunStatusDoc) =>
  d.metadata.labels?.[SWEEP_LABEL] === d.status.owner ? 'sweep' : 'dag';

const SORTS: Record<string, (a: AnyDoc, b: AnyDoc) => number> = {
  name: (a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0),
  age: (a, b) => created(b).localeCompare(created(a)),
  phase: (a, b) => phaseOf(a).localeCompare(phaseOf(b)) || SORTS.name!(a, b),
};
const created = (d: AnyDoc) => ('createdAt' in d.status ? (d.status.createdAt ?? '') : '');
const phaseOf = (d: AnyDoc) => ('phase' in d.status ? d.status.phase : '');

export function registerGet(program: Command, io: Io): void {
  program
    .command('get')
    .description('List runs, DAGs or backends with their status, read from the status branch')
    .argument('<kind>', 'runs | dags | backends | agents | alerts | providers | sweeps')
    .argument('[name]', 'only this object')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--status-branch <name>', 'status branch (default adventuretime/status)')
    .addOption(
      new Option('-o, --output <format>', 'output format')
        .choices(['table', 'wide', 'yaml', 'json', 'name'])
        .default('table'),
    )
    .option(
      '-l, --selector <key=value,...>',
      'only objects with these labels: key=value, key!=value, key, !key, separated by commas',
    )
    .addOption(
      new Option('--sort-by <field>', 'order of the rows').choices(['name', 'age', 'phase']).default('name'),
    )
    .option('--tree', 'runs: each run with its forks under it (adv fork), and the step they came from')
    .option('-w, --watch', 'after the list, print each object again whenever its status changes')
    .option('--timeout <duration>', 'with --watch: stop after this long (e.g. 10m); default: until Ctrl-C')
    .option(
      '--controller <url>',
      'agents: the controller to ask (default: $ADV_CONTROLLER_URL, else the data dir’s)',
    )
    .option('--data-dir <dir>', 'agents: the controller’s data dir, to find it and its API token')
    .addHelpText(
      'after',
      `
Examples:
  adv get runs
  adv get runs -l project=fork -o wide --sort-by age
  adv get runs --watch                         # like kubectl get -w
  adv get runs --tree                          # families: each run, its forks under it
  adv get run hello -o yaml
  adv get runs -l adventuretime.dev/dag=pipeline   # the child runs of one DAG
  adv get dags
  adv get backends
  adv get agents                               # pull agents, from the running controller
  adv get alerts                               # notification outboxes: pending, delivered, failed`,
    )
    .action((kindArg: string, name: string | undefined, opts: GetOpts) => getAction(io, kindArg, name, opts));
}

/**
 * Files of the specs repo that do not load are on no run's row: say so under the table (on stderr,
 * so `-o name` and pipes stay clean), as kubectl warns beside its output.
 */
function warnLoadErrors(source: SourceStatusDoc | undefined, branch: string, io: Io): void {
  const n = source?.status.errorCount ?? 0;
  const first = source?.status.errors[0];
  if (!n || !first) return;
  io.stderr.write(
    printable(
      `warning: ${n} error${n === 1 ? '' : 's'} in the specs repo that no run shows, first ${first.file}:${first.line}: ${first.message}`,
    ) + `\n  (all of them: git show ${branch}:sources/specs.yaml, or adv validate)\n`,
  );
}

/**
 * With `--trusted-signers`, a watched-branch head the controller refused (unsigned, an unknown key,
 * a bad signature, a rollback) is on no run's row either: say which commit and why, the same way.
 */
function warnNotVerified(source: SourceStatusDoc | undefined, branch: string, io: Io): void {
  const c = source?.status.conditions.find((x) => x.type === 'Verified');
  if (!c || c.status !== 'False') return;
  io.stderr.write(
    printable(`warning: the watched branch's head is not acted on (${c.reason}): ${c.message}`) +
      `\n  (git show ${branch}:sources/specs.yaml)\n`,
  );
}

interface GetOpts {
  repo?: string;
  statusBranch?: string;
  output: string;
  selector?: string;
  sortBy: string;
  watch?: boolean;
  timeout?: string;
  tree?: boolean;
  controller?: string;
  dataDir?: string;
}

/** `adv get KIND [NAME]`: the other kinds' own commands, or the list of runs, DAGs or backends. */
async function getAction(io: Io, kindArg: string, name: string | undefined, opts: GetOpts): Promise<void> {
  if (/^agents?$/i.test(kindArg)) return getAgents(io, name, opts);
  if (NOTIFY_KINDS.test(kindArg)) return getNotifications(io, kindArg, name, opts);
  if (/^sweeps?$/i.test(kindArg)) return getSweeps(io, name, opts);
  const kind = KINDS[kindArg.toLowerCase()];
  if (!kind)
    throw new AdvError(ErrorCode.UsageError, `unknown kind "${printable(kindArg)}"`, {
      hint: 'use runs, dags or backends',
    });
  checkListOptions(kind, opts);
  const requirements = parseSelector(opts.selector ?? '');
  const r = await openStatus(opts, io);
  const statusKind = STATUS_KIND[kind];
  const select = (): AnyDoc[] => {
    let names = r.store.names(statusKind);
    if (name) {
      if (!names.includes(name))
        throw new AdvError(ErrorCode.NotFound, `${printable(kindArg)} "${printable(name)}" has no status`, {
          hint: `adv get ${kind} lists what exists`,
        });
      names = [name];
    }
    return names
      .map((n) => r.store.get<AnyDoc>(statusKind, n)!)
      .filter(
        (d) =>
          kind === 'backends' ||
          selectorMatches((d as RunStatusDoc | DagStatusDoc).metadata.labels, requirements),
      )
      .sort(SORTS[opts.sortBy]);
  };
  try {
    const table = printList(io, kind, name, opts, select());
    if (!table) return;
    const source = r.store.get<SourceStatusDoc>('Source', SPECS_SOURCE);
    warnLoadErrors(source, r.repo.statusBranch, io);
    warnNotVerified(source, r.repo.statusBranch, io);
    if (opts.watch) await watchList(io, r, kind, opts, table, select);
  } finally {
    await r.close();
  }
}

/** Options that do not go together, refused before anything is read. */
function checkListOptions(kind: Kind, opts: GetOpts): void {
  if (opts.watch && (opts.output === 'json' || opts.output === 'yaml'))
    throw new AdvError(ErrorCode.UsageError, '--watch prints tables or names', {
      hint: 'use -o table, -o wide or -o name with --watch',
    });
  if (opts.tree && (kind !== 'runs' || !['table', 'wide'].includes(opts.output)))
    throw new AdvError(ErrorCode.UsageError, '--tree draws the runs table', {
      hint: 'use adv get runs --tree, with -o table or -o wide',
    });
}

/** One name a line, made printable: a name with a newline cannot add a line. */
const nameLine = (kind: Kind, n: string) => `${kind.slice(0, -1)}/${printable(n)}\n`;

/** The table of `docs` as the options ask for it (tree, wide); `--tree` draws forks under their runs. */
function tableFor(kind: Kind, docs: AnyDoc[], opts: GetOpts): Table {
  const t = tableOf(kind, docs, opts.output === 'wide');
  return opts.tree ? treeTable(docs as RunStatusDoc[], t.headers, t.rows) : t;
}

/** Prints the list in the asked format; the table printed, when there is one to watch. */
function printList(
  io: Io,
  kind: Kind,
  name: string | undefined,
  opts: GetOpts,
  docs: AnyDoc[],
): Table | undefined {
  if (opts.output === 'json') {
    io.stdout.write(JSON.stringify(docs.length === 1 && name ? docs[0] : { items: docs }, null, 2) + '\n');
    return undefined;
  }
  if (opts.output === 'yaml') {
    io.stdout.write(docs.map((d) => stringify(d)).join('---\n'));
    return undefined;
  }
  if (opts.output === 'name' && !opts.watch) {
    io.stdout.write(docs.map((d) => nameLine(kind, d.metadata.name)).join(''));
    return undefined;
  }
  const table = tableFor(kind, docs, opts);
  if (opts.output === 'name') io.stdout.write(docs.map((d) => nameLine(kind, d.metadata.name)).join(''));
  else
    io.stdout.write(
      table.rows.length
        ? renderTable(table.headers, table.rows, phaseStyle(colours(io.stdout, io.env)))
        : `No ${kind} found.\n`,
    );
  return table;
}

/** Watch: when the status branch moves, print the objects whose row changed (kubectl -w). */
async function watchList(
  io: Io,
  r: StatusReader,
  kind: Kind,
  opts: GetOpts,
  { headers, rows }: Table,
  select: () => AnyDoc[],
): Promise<void> {
  const widths = headers.map((h, i) =>
    Math.max(h.length, ...rows.map((row) => printable(row[i] ?? '').length)),
  );
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? printable(c) : printable(c).padEnd(widths[i] ?? 0)))
      .join('   ')
      .trimEnd();
  const seen = new Map(
    rows.map((row) => [row[0]!, row.filter((_, i) => headers[i] !== 'AGE').join('\u0000')]),
  );
  const deadline = opts.timeout ? Date.now() + parseDuration(opts.timeout) : Infinity;
  let stop = false;
  const onInt = () => (stop = true);
  process.once('SIGINT', onInt);
  try {
    let head = r.store.head;
    while (!stop && Date.now() < deadline) {
      await new Promise((res) => setTimeout(res, 500));
      if (r.repo.mode === 'remote') await r.repo.refresh().catch(() => undefined);
      const now = await r.repo.git.resolveRef(r.store.ref);
      if (now === head) continue;
      head = now;
      await r.store.load();
      const t = tableFor(kind, select(), opts);
      for (const row of t.rows) {
        const key = row.filter((_, i) => t.headers[i] !== 'AGE').join('\u0000');
        if (seen.get(row[0]!) === key) continue;
        seen.set(row[0]!, key);
        io.stdout.write(opts.output === 'name' ? nameLine(kind, row[0]!) : line(row) + '\n');
      }
    }
  } finally {
    process.off('SIGINT', onInt);
  }
}
