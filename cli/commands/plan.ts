import type { Command } from 'commander';
import { Option } from 'commander';
import {
  AdvError,
  CommitVerifier,
  ErrorCode,
  GitTreeSource,
  SPECS_SOURCE,
  SpecsRepo,
  StatusWriter,
  TreeListingCache,
  askQuotes,
  backendInfoOf,
  backendRecords,
  checkTrustedSigners,
  childName,
  formatMoney,
  infraSourceFor,
  loadSpecs,
  nodeRunSpec,
  planChanges,
  planContextOf,
  planCosts,
  runRecords,
  storeTarget,
  verifyHead,
  type Dag,
  type InfraOption,
  type Backend,
  type PlanCost,
  type StartingRun,
  type DagStatusDoc,
  type LoadResult,
  type PlanReport,
  type Run,
  type RunSpec,
  type RunPlanItem,
  type RunStatusDoc,
  type SourceStatusDoc,
  type Sweep,
  type SweepStatusDoc,
  type Verdict,
} from '../../controller/index.js';
import { ExitCode } from '../exit.js';
import { colours, printable, safe, type Io } from '../output.js';
import { resolveRepo } from '../repo.js';
import { cacheDirFor } from '../status-reader.js';

const SIGN: Record<RunPlanItem['change'], string> = {
  start: '+',
  wait: '…',
  update: '~',
  restart: '!',
  reject: '✗',
  cancel: '-',
  noop: '=',
};

/** `adv plan`: what the controller would do if HEAD were merged, as text, Markdown or JSON. */
export function registerPlan(program: Command, io: Io): void {
  program
    .command('plan')
    .description(
      'Show what the controller would do if HEAD were merged: runs to start (and where), changes, cancellations, errors',
    )
    .option(
      '--base <ref>',
      'what HEAD is compared with (default: origin/<branch> if it exists, else <branch>)',
    )
    .option('--head <ref>', 'the change (default HEAD)', 'HEAD')
    .option('--branch <name>', 'the watched branch', 'main')
    .option('--repo <path>', 'specs repo checkout (default: the repository of the current directory)')
    .option(
      '--status-branch <name>',
      'status branch (default adventuretime/status; origin/… is used when present)',
    )
    .option('--path <dir>', 'only specs under this folder')
    .option(
      '--trusted-signers <file>',
      "the controller's allowed_signers file: also say whether it would act on HEAD (signed by a trusted key, no rollback)",
    )
    .option(
      '--infra-dir <dir>',
      "the controller's infra dir: its Backends and Storage instead of the repo's (as adv controller --infra-dir)",
    )
    .option(
      '--admin-signers <file>',
      "the controller's admin signers file: Backends and Storage as of HEAD's newest admin-signed commit",
    )
    .option(
      '--no-quotes',
      'stay offline: price Vast.ai runs by capabilities.costPerHour instead of asking for the cheapest fitting offer',
    )
    .addOption(
      new Option('-o, --output <format>', 'output format')
        .choices(['text', 'markdown', 'json'])
        .default('text'),
    )
    .addHelpText(
      'after',
      `
Exit codes: 0 the plan is made (with or without changes), 1 HEAD has invalid specs (or, with
--trusted-signers, the controller would not act on HEAD), 4 git failed.

Examples:
  adv plan                                   # this branch against main
  adv plan --base origin/main --head HEAD -o markdown > plan.md   # for a pull-request comment
  adv plan --trusted-signers allowed_signers   # would the controller act on HEAD once pushed?`,
    )
    .action((opts: PlanOpts) => planAction(io, opts));
}

interface PlanOpts {
  base?: string;
  head: string;
  branch: string;
  repo?: string;
  statusBranch?: string;
  path?: string;
  output: string;
  trustedSigners?: string;
  infraDir?: string;
  adminSigners?: string;
  /** Ask backends that quote (Vast.ai) for a price; `--no-quotes` clears it. */
  quotes: boolean;
}

type Git = SpecsRepo['git'];

/** `adv plan`: loads BASE and HEAD as the controller would, plans, prints; exit 1 for invalid specs. */
async function planAction(io: Io, opts: PlanOpts): Promise<void> {
  const signers = opts.trustedSigners && (await checkTrustedSigners(opts.trustedSigners));
  const infraOption = await planInfraOption(opts);
  const dir = await resolveRepo(opts.repo, io.cwd);
  const repo = await SpecsRepo.open({ repo: dir, dataDir: cacheDirFor(dir, io.env) });
  try {
    const git = repo.git;
    const { head, base, baseRef } = await planRefs(git, opts, dir);
    const listings = new TreeListingCache(git);
    // Backends and Storage from where the controller takes them (infra-source.ts).
    const infra = infraSourceFor(infraOption, { git, specsPath: opts.path ?? '' });
    await infra.prepare(head);
    const load = async (commit: string): Promise<LoadResult> =>
      loadSpecs(new GitTreeSource(git, (await git.readCommit(commit)).tree, listings, opts.path ?? ''), {
        backendNames: () => infra.backendNames(),
      });
    const [b, h] = await Promise.all([load(base), load(head)]);
    const acted = infra.take(h);
    const status = await statusOf(git, opts.statusBranch ?? 'adventuretime/status');
    // As the controller would judge HEAD pushed to the branch: against the last commit it acted on.
    const anchor = status.get<SourceStatusDoc>('Source', SPECS_SOURCE)?.status.verified?.commit;
    const verdict = signers
      ? await verifyHead(new CommitVerifier(signers, git.gitdir), head, anchor)
      : undefined;
    const runDocs = status.names('Run').map((n) => status.get<RunStatusDoc>('Run', n)!);
    // What the controller learns from the status branch: each backend's preemptions (optimize).
    const records = backendRecords(runDocs);
    const backends = [...acted.backends].map(([name, { obj }]) => {
      const record = records.get(name);
      return { ...backendInfoOf(name, obj.spec), ...(record ? { record } : {}) };
    });
    const storage = acted.storage;
    // The controller's own context builder: what adv plan cannot know (secrets, other
    // repositories' code) is left out, and such runs are planned as the controller's first pass would.
    const ctx = await planContextOf({
      now: Date.now(),
      specCommit: head,
      backends,
      git,
      remote: true,
      specs: runSpecsOf(h),
    });
    const report = planChanges({
      base: { commit: base, objects: b.objects },
      head: { commit: head, objects: h.objects, errors: planErrors(h, acted.errors) },
      runStatus: (n) => status.get<RunStatusDoc>('Run', n),
      dagStatus: (n) => status.get<DagStatusDoc>('DAG', n),
      sweepStatus: (n) => status.get<SweepStatusDoc>('Sweep', n),
      ctx,
      ...(storage ? { storeUrl: storeTarget(storage, '.', io.env).url } : {}),
    });
    const starting = startingRuns(report, h);
    const objs = new Map<string, Backend>([...acted.backends].map(([name, { obj }]) => [name, obj]));
    const quotes = opts.quotes
      ? await askQuotes(starting, objs, { secret: (n) => io.env[n], env: io.env })
      : undefined;
    const cost = planCosts(starting, {
      backends,
      status: (n) => status.get<RunStatusDoc>('Run', n),
      history: runRecords(runDocs),
      ...(quotes ? { quotes } : {}),
    });
    printPlan(io, opts, report, baseRef, verdict, cost);
  } finally {
    await repo.close();
  }
}

/** Where Backends and Storage come from, as the controller is started (`--infra-dir`, `--admin-signers`). */
async function planInfraOption(opts: PlanOpts): Promise<InfraOption> {
  if (opts.infraDir !== undefined && opts.adminSigners !== undefined)
    throw new AdvError(ErrorCode.UsageError, '--infra-dir and --admin-signers cannot be used together', {
      hint: 'pass the one the controller is started with',
    });
  return opts.infraDir !== undefined
    ? { from: 'dir', dir: opts.infraDir }
    : opts.adminSigners !== undefined
      ? { from: 'signed', signers: await checkTrustedSigners(opts.adminSigners, '--admin-signers') }
      : { from: 'repo' };
}

/** HEAD and BASE as commits; BASE defaults to origin/<branch> when the checkout has it. */
async function planRefs(
  git: Git,
  opts: PlanOpts,
  dir: string,
): Promise<{ head: string; base: string; baseRef: string }> {
  const resolve = async (ref: string, what: string) => {
    const oid = await git.resolveRef(ref);
    if (!oid)
      throw new AdvError(ErrorCode.NotFound, `${what} ${ref} does not exist in ${dir}`, {
        hint: 'fetch it first (git fetch origin), or pass --base/--head',
      });
    return oid;
  };
  const head = await resolve(opts.head, '--head');
  const baseRef =
    opts.base ??
    ((await git.resolveRef(`refs/remotes/origin/${opts.branch}`))
      ? `refs/remotes/origin/${opts.branch}`
      : opts.branch);
  return { head, base: await resolve(baseRef, '--base'), baseRef };
}

/** The status branch as the controller has it (the remote's, in a CI checkout). */
async function statusOf(git: Git, statusBranch: string): Promise<StatusWriter> {
  const statusRef = (await git.resolveRef(`refs/remotes/origin/${statusBranch}`))
    ? `refs/remotes/origin/${statusBranch}`
    : `refs/heads/${statusBranch}`;
  const status = new StatusWriter(git, statusRef, { name: 'adv', email: 'adv@localhost' });
  if (await git.resolveRef(statusRef)) await status.load();
  return status;
}

/** The run specs of HEAD's runs, DAG nodes and sweep templates: whose code refs the controller resolves. */
function runSpecsOf(h: LoadResult): RunSpec[] {
  return h.objects.flatMap((o) =>
    o.kind === 'Run'
      ? [(o.object as Run).spec]
      : o.kind === 'DAG'
        ? (o.object as Dag).spec.nodes.map((n) => nodeRunSpec(o.name, (o.object as Dag).spec, n, undefined))
        : o.kind === 'Sweep'
          ? [(o.object as Sweep).spec.template]
          : [],
  );
}

/**
 * The runs the plan would start (or restart) on a backend, with their spec where HEAD has it: a
 * Run's, or a DAG node's run spec (a Sweep point's is left out: it is priced, its hours unknown).
 */
function startingRuns(r: PlanReport, h: LoadResult): StartingRun[] {
  const runs = new Map<string, { spec: RunSpec; labels?: Record<string, string> | undefined }>();
  for (const o of h.objects) {
    if (o.kind === 'Run')
      runs.set(o.name, { spec: (o.object as Run).spec, labels: (o.object as Run).metadata.labels });
    if (o.kind !== 'DAG') continue;
    const dag = (o.object as Dag).spec;
    for (const n of dag.nodes)
      runs.set(childName(o.name, n.id), { spec: nodeRunSpec(o.name, dag, n, undefined) });
  }
  return r.runs.flatMap((x) => {
    if ((x.change !== 'start' && x.change !== 'restart') || !x.backend) return [];
    const run = x.sweep ? undefined : runs.get(x.run);
    return [{ run: x.run, backend: x.backend, spec: run?.spec, labels: run?.labels }];
  });
}

/** HEAD's load errors and the infra source's, as plan lines with their fixes. */
function planErrors(
  h: LoadResult,
  infraErrors: readonly { file: string; line: number; column: number; message: string; fix?: string }[],
): PlanReport['errors'] {
  return [
    ...h.diagnostics
      .filter((d) => d.severity === 'error')
      .map((d) => ({
        file: d.file,
        line: d.line,
        column: d.column,
        message: `${d.path ? d.path + ': ' : ''}${d.message}${d.hint ? ` (fix: ${d.hint})` : ''}`,
      })),
    ...infraErrors.map((e) => ({
      file: e.file,
      line: e.line,
      column: e.column,
      message: `${e.message}${e.fix ? ` (fix: ${e.fix})` : ''}`,
    })),
  ];
}

/** Prints the report in the asked format; a quiet exit 1 when HEAD would not be acted on or is invalid. */
function printPlan(
  io: Io,
  opts: PlanOpts,
  report: PlanReport,
  baseRef: string,
  verdict: Verdict | undefined,
  cost: PlanCost,
): void {
  const text =
    opts.output === 'json'
      ? JSON.stringify({ ...report, ...(verdict ? { verification: verdict } : {}), cost }, null, 2) + '\n'
      : opts.output === 'markdown'
        ? renderMarkdown(report, baseRef, opts.head, verdict) + costMarkdown(cost)
        : renderText(report, baseRef, opts.head, colours(io.stdout, io.env), verdict) + costText(cost);
  io.stdout.write(text);
  if (verdict && !verdict.ok)
    throw new AdvError(ErrorCode.SpecInvalid, `the controller would not act on ${opts.head}`, {
      exitCode: ExitCode.Invalid,
      quiet: true,
    });
  if (report.errors.length)
    throw new AdvError(ErrorCode.SpecInvalid, 'the plan found invalid specs', {
      exitCode: ExitCode.Invalid,
      quiet: true,
    });
}

/** Whether the controller would act on HEAD, and if not why and what to do: first line a verdict. */
function signatureLines(v: Verdict): string[] {
  if (v.ok) return [`Signature: accepted — ${v.message}.`];
  return [
    `Signature: refused (${v.reason}) — the controller would not act on this commit.`,
    v.message,
    ...(v.fix ? [`fix: ${v.fix}`] : []),
  ];
}

function counts(r: PlanReport): string {
  const n = (c: RunPlanItem['change']) => r.runs.filter((x) => x.change === c).length;
  const parts = [
    `${n('start')} to start`,
    `${n('update')} to update`,
    `${n('restart')} to restart`,
    `${n('cancel')} to cancel`,
  ];
  if (n('reject')) parts.push(`${n('reject')} rejected`);
  if (n('wait')) parts.push(`${n('wait')} waiting`);
  if (r.errors.length) parts.push(`${r.errors.length} error${r.errors.length > 1 ? 's' : ''}`);
  return parts.join(', ');
}

function detail(x: RunPlanItem): string {
  switch (x.change) {
    case 'start':
      return `on ${x.backend}: ${x.why ?? ''}`;
    case 'update':
      return x.patch.map((op) => `${op.op} ${op.path}`).join(', ');
    case 'restart':
      return `${x.immutable.join(', ') || 'spec changed'}: cancel, then a new attempt from the last checkpoint${x.backend ? ` on ${x.backend}` : ''}`;
    default:
      return x.why ?? '';
  }
}

/** The plan for a terminal: every name, path and message from the specs is made printable. */
export function renderText(
  r: PlanReport,
  base: string,
  head: string,
  c: ReturnType<typeof colours>,
  verdict?: Verdict,
): string {
  const out = [safe`Plan: ${head} (${r.head.slice(0, 10)}) merged into ${base} (${r.base.slice(0, 10)})`, ''];
  if (verdict)
    out.push(
      ...signatureLines(verdict).map((l, i) => (verdict.ok ? c.green : c.red)(printable(i ? `  ${l}` : l))),
      '',
    );
  const colour = (x: RunPlanItem) =>
    x.change === 'start'
      ? c.green
      : x.change === 'cancel' || x.change === 'reject'
        ? c.red
        : x.change === 'noop'
          ? c.dim
          : c.yellow;
  if (r.runs.length) {
    out.push('Runs:');
    const w = Math.max(...r.runs.map((x) => printable(x.run).length));
    for (const x of r.runs)
      out.push(
        colour(x)(
          `  ${SIGN[x.change]} ${x.change.padEnd(7)} ${printable(x.run).padEnd(w)}  ${printable(detail(x))}`,
        ) + c.dim(safe`  (${x.file}${x.sweep ? `, sweep/${x.sweep}` : x.owner ? `, dag/${x.owner}` : ''})`),
      );
  } else out.push('No run changes.');
  if (r.dags.length) {
    out.push('', 'DAGs:');
    for (const d of r.dags)
      out.push(`  ${d.change.padEnd(7)} ${printable(d.summary)}  ${c.dim(safe`(${d.file})`)}`);
  }
  if (r.sweeps?.length) out.push('', 'Sweeps:', ...sweepLines(r).map((l) => `  ${l}`));
  if (r.errors.length) {
    out.push('', c.red('Errors (the controller would not act on these files):'));
    for (const e of r.errors) out.push(c.red(safe`  ${e.file}:${e.line}:${e.column}: ${e.message}`));
  }
  out.push('', `Plan: ${counts(r)}.`);
  return out.join('\n') + '\n';
}

/** A table cell or list item: one printable line, pipes escaped. */
const md = (s: string) => printable(s.replace(/\n/g, ' ')).replace(/\|/g, '\\|');
/** Inline code: printable, and no backtick to end it early. */
const code = (s: string) => '`' + printable(s.replace(/\n/g, ' ')).replace(/`/g, "'") + '`';
/** In a table, a pipe ends the cell even inside inline code. */
const cell = (s: string) => s.replace(/\|/g, '\\|');

export function renderMarkdown(r: PlanReport, base: string, head: string, verdict?: Verdict): string {
  const out = [
    `### AdventureTime plan`,
    '',
    `${code(head)} (${r.head.slice(0, 10)}) merged into ${code(base)} (${r.base.slice(0, 10)}): **${counts(r)}**.`,
    '',
  ];
  if (verdict) {
    const [first, ...rest] = signatureLines(verdict);
    out.push(`**${md(first!)}**`, ...rest.map((l) => `- ${md(l)}`), '');
  }
  if (r.runs.length) {
    out.push('| | run | change | details | file |', '|---|---|---|---|---|');
    for (const x of r.runs)
      out.push(
        `| ${SIGN[x.change]} | ${cell(code(x.run))}${x.sweep ? ` (sweep/${md(x.sweep)})` : x.owner ? ` (dag/${md(x.owner)})` : ''} | ${x.change} | ${md(detail(x))} | ${cell(code(x.file))} |`,
      );
    const patched = r.runs.filter((x) => x.patch.length);
    if (patched.length) {
      out.push('', '<details><summary>Spec changes (JSON Patch)</summary>', '');
      for (const x of patched)
        out.push(
          `${code(x.run)}${x.immutable.length ? ' — immutable: ' + x.immutable.map(code).join(', ') : ''}`,
          '',
          '```json',
          JSON.stringify(x.patch, null, 2),
          '```',
          '',
        );
      out.push('</details>');
    }
  } else out.push('No run changes.');
  if (r.dags.length) {
    out.push('', '**DAGs**', '');
    for (const d of r.dags) out.push(`- ${d.change}: ${md(d.summary)} (${code(d.file)})`);
  }
  if (r.sweeps?.length) out.push('', '**Sweeps**', '', ...sweepLines(r).map((l) => `- ${md(l)}`));
  if (r.errors.length) {
    out.push('', '**Errors** — the controller would not act on these files:', '');
    for (const e of r.errors) out.push(`- ${code(`${e.file}:${e.line}:${e.column}`)} ${md(e.message)}`);
  }
  return out.join('\n') + '\n';
}

/** One line per sweep: `changed grid: 3 points added, 0 cancelled; sweep/grid: … (file)`. */
function sweepLines(r: PlanReport): string[] {
  return (r.sweeps ?? []).map((s) =>
    printable(
      `${s.change.padEnd(7)} ${s.sweep}: ${s.added.length} point${s.added.length === 1 ? '' : 's'} added, ${s.cancelled.length} cancelled; ${s.summary} (${s.file})`,
    ),
  );
}

/** A cost line's cells: backend, price/h, expected hours, expected cost (`unknown` said as such). */
function costCells(l: PlanCost['runs'][number]): [string, string, string, string, string] {
  const price =
    l.perHour === undefined
      ? 'no price'
      : `$${formatMoney(l.perHour)}/h${l.priceFrom === 'costPerHour' ? '' : ` (${l.priceFrom})`}`;
  const hours = l.hours === undefined ? `unknown (${l.hoursFrom})` : `${l.hours.toFixed(1)} h`;
  const cost = l.cost === undefined ? 'unknown' : `$${formatMoney(l.cost)}`;
  return [l.backend, price, hours, cost, l.priceNote ?? ''];
}

const totalLine = (c: PlanCost) =>
  `Expected cost: $${formatMoney(c.total.cost)}${c.total.unknown ? ` + ${c.total.unknown} run${c.total.unknown === 1 ? '' : 's'} of unknown cost` : ''}.`;

/** The text plan's cost section: one line per run it would start, then the total. */
function costText(c: PlanCost): string {
  if (!c.runs.length) return '';
  const w = Math.max(...c.runs.map((l) => printable(l.run).length));
  const lines = c.runs.map((l) => {
    const [backend, price, hours, cost, note] = costCells(l);
    return printable(
      `  ${l.run.padEnd(w)}  on ${backend}: ${price}, ${hours}, ${cost}${note ? `  (${note})` : ''}`,
    );
  });
  return ['', 'Cost (runs to start):', ...lines, totalLine(c), ''].join('\n');
}

/** The Markdown plan's cost table. */
function costMarkdown(c: PlanCost): string {
  if (!c.runs.length) return '';
  const rows = c.runs.map((l) => {
    const [backend, price, hours, cost, note] = costCells(l);
    return `| ${cell(code(l.run))} | ${cell(code(backend))} | ${md(price)} | ${md(hours)} | ${md(cost)} | ${md(note)} |`;
  });
  return [
    '',
    '**Cost** (runs to start)',
    '',
    '| run | backend | price | expected hours | expected cost | note |',
    '|---|---|---|---|---|---|',
    ...rows,
    '',
    `**${totalLine(c)}**`,
    '',
  ].join('\n');
}
