import type { Command } from 'commander';
import { Option } from 'commander';
import { stringify } from 'yaml';
import {
  AdvError,
  ErrorCode,
  age,
  attemptCost,
  formatCost,
  formatMoney,
  graphOf,
  runCost,
  runUsage,
  type Attempt,
  type DagStatusDoc,
  type RunStatusDoc,
  type StatusDoc,
} from '../../controller/index.js';
import { renderTable } from '../format.js';
import { describeMetrics } from './metrics.js';
import type { StoreOpts } from '../store.js';
import { openStatus, type StatusReader } from '../status-reader.js';
import { printable, safe, type Io } from '../output.js';
import { describeNotifications, NOTIFY_KINDS } from './notifications.js';
import { describeSweep } from './sweep.js';
import { conditionsSection, history, ownerHeader } from '../describe-sections.js';

export function registerDescribe(program: Command, io: Io): void {
  program
    .command('describe')
    .description(
      'Show one run or DAG in detail: phase, conditions, attempts or nodes, and its history from git log',
    )
    .argument('<kind>', 'run | dag | alert | provider | sweep')
    .argument('<name>', 'run or DAG name')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--status-branch <name>', 'status branch (default adventuretime/status)')
    .option('--store <url>', "object store for a run's metrics (default: $ADV_STORE, else the Storage spec)")
    .option('--data-dir <dir>', "the controller's data dir (where a file store's relative path starts)")
    .addOption(
      new Option('-o, --output <format>', 'text, or the whole status document')
        .choices(['text', 'yaml', 'json'])
        .default('text'),
    )
    .option('--metric <name>', 'sweep: show the last value of this metric per point, best first')
    .option('--mode <min|max>', 'sweep, with --metric: lower (min, default) or higher (max) is better')
    .addHelpText('after', '\nExamples:\n  adv describe run hello\n  adv describe dag pipeline')
    .addHelpText('after', '  adv describe sweep lr-search --metric loss --mode min')
    .action((kind: string, name: string, opts: DescribeOpts) => describeAction(io, kind, name, opts));
}

interface DescribeOpts {
  repo?: string;
  statusBranch?: string;
  output: string;
}

/** `adv describe KIND NAME`: the other kinds' own commands, or a run or a DAG. */
async function describeAction(io: Io, kind: string, name: string, opts: DescribeOpts): Promise<void> {
  if (NOTIFY_KINDS.test(kind)) return describeNotifications(io, kind, name, opts);
  if (/^sweeps?$/i.test(kind)) return describeSweep(io, name, opts);
  const isDag = /^dags?$/i.test(kind);
  if (!/^runs?$/i.test(kind) && !isDag)
    throw new AdvError(ErrorCode.UsageError, `cannot describe "${printable(kind)}"`, {
      hint: 'use: adv describe run NAME, or adv describe dag NAME',
    });
  const r = await openStatus(opts, io);
  try {
    if (opts.output !== 'text') {
      const doc = statusOf(r, isDag ? 'DAG' : 'Run', name);
      return void io.stdout.write(
        opts.output === 'json' ? JSON.stringify(doc, null, 2) + '\n' : stringify(doc),
      );
    }
    if (isDag) return void io.stdout.write(await describeDag(r, name));
    const doc = statusOf<RunStatusDoc>(r, 'Run', name);
    const st = doc.status;
    const out = runHeader(r, name, doc);
    out.push(...conditionsSection(st.conditions));
    out.push(...attemptsSection(st));
    const decisions = st.attempts.filter((a) => a.why);
    if (decisions.length) {
      out.push('', 'Scheduling (why each backend was chosen):');
      for (const a of decisions) out.push(safe`  #${a.n}  ${a.why}`);
    }
    out.push(...(await describeMetrics(opts as StoreOpts, io, name)));
    out.push(...(await history(r, 'run', name)));
    io.stdout.write(out.join('\n') + '\n');
  } finally {
    await r.close();
  }
}

/** A run's first lines: name, labels, owner, lineage, phase, spec, code, checkpoint, heartbeat, cost. */
function runHeader(r: StatusReader, name: string, doc: RunStatusDoc): string[] {
  const st = doc.status;
  const out: string[] = [];
  out.push(safe`Name:         ${name}`);
  if (doc.metadata.labels)
    out.push(
      safe`Labels:       ${Object.entries(doc.metadata.labels)
        .map(([k, v]) => `${k}=${v}`)
        .join(', ')}`,
    );
  if (st.owner) out.push(safe`Owner:        ${st.owner}`);
  out.push(...lineage(r, name, st));
  out.push(safe`Phase:        ${st.phase}${st.reason ? ` (${st.reason})` : ''}`);
  if (st.message) out.push(safe`Message:      ${st.message}`);
  out.push(
    safe`Spec:         ${st.specFile ?? '-'} @ ${(st.specCommit ?? '-').slice(0, 12)} (generation ${st.observedGeneration ?? '-'})`,
  );
  if (st.codeCommit)
    out.push(safe`Code:         ${st.codeCommit.slice(0, 12)}${st.codeRepo ? ` of ${st.codeRepo}` : ''}`);
  if (st.nextAttemptAfter) out.push(safe`Next attempt: not before ${st.nextAttemptAfter}`);
  if (st.checkpoint)
    out.push(
      safe`Checkpoint:   step ${st.checkpoint.step} at ${st.checkpoint.createdAt} (${st.checkpoint.uri})`,
    );
  if (st.lastHeartbeat) out.push(safe`Heartbeat:    ${st.lastHeartbeat} (${age(st.lastHeartbeat)} ago)`);
  const total = runCost(st.attempts, Date.now());
  if (total !== undefined)
    out.push(
      safe`Cost:         ${formatMoney(total)} over ${st.attempts.filter((a) => a.price).length} priced attempt(s) (hours × the backend's costPerHour)`,
    );
  const used = runUsage(doc, {}, Date.now());
  if (used.gpuHours > 0)
    out.push(
      `GPU-hours:    ${used.gpuHours.toFixed(2)} (${used.hours.toFixed(2)} h run × the GPUs it holds)`,
    );
  return out;
}

/** The `Attempts:` table. */
function attemptsSection(st: RunStatusDoc['status']): string[] {
  const out: string[] = [];
  out.push('', 'Attempts:');
  out.push(
    st.attempts.length
      ? renderTable(
          [
            '#',
            'BACKEND',
            'JOB',
            'PHASE',
            'SUBMITTED',
            'STARTED',
            'FINISHED',
            'EXIT',
            'CLASS',
            'STEPS',
            'LOST',
            'COST',
            'REASON',
          ],
          st.attempts.map((a) => [
            String(a.n),
            a.backend,
            a.jobId ?? '-',
            a.phase,
            a.submittedAt ?? '-',
            a.startedAt ?? '-',
            a.finishedAt ?? '-',
            a.exitCode !== undefined ? String(a.exitCode) : '-',
            a.class ?? '-',
            a.startStep !== undefined || a.lastStep !== undefined
              ? `${a.startStep ?? 0}→${a.lastStep ?? a.startStep ?? 0}`
              : '-',
            lostWork(
              a,
              st.attempts.find((x) => x.n === a.n + 1),
            ),
            costText(a),
            [a.reason, a.message].filter(Boolean).join(': '),
          ]),
        ).trimEnd()
      : '  (none)',
  );
  return out;
}

/**
 * Work an attempt lost: the time it ran past its last committed checkpoint (or from its start),
 * and the steps the next attempt had to redo when it restored an older one.
 */
export function lostWork(a: Attempt, next: Attempt | undefined): string {
  if (!a.finishedAt || a.class === 'Succeeded' || !a.startedAt) return '-';
  const from = Date.parse(a.lastStepAt ?? a.startedAt);
  const secs = Math.max(0, Math.round((Date.parse(a.finishedAt) - from) / 1000));
  const since = a.lastStep !== undefined ? `after step ${a.lastStep}` : 'no checkpoint';
  const end = a.lastStep ?? a.startStep;
  const redo =
    next?.startStep !== undefined && end !== undefined && next.startStep < end
      ? `, ${end - next.startStep} steps redone`
      : '';
  return `${duration(secs)} ${since}${redo}`;
}

/** An attempt's cost so far, or `-` when its backend has no price. */
function costText(a: Attempt): string {
  const c = attemptCost(a, Date.now());
  return c ? formatCost(c) : '-';
}

function duration(s: number): string {
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  return `${(s / 3600).toFixed(1)}h`;
}

/** `adv describe dag`: the DAG, its conditions, every node (indented by depth) and its history. */
async function describeDag(r: StatusReader, name: string): Promise<string> {
  const doc = statusOf<DagStatusDoc>(r, 'DAG', name);
  const st = doc.status;
  const out = ownerHeader(name, st);
  if (doc.appliedSpec) out.push(safe`Fail fast:    ${doc.appliedSpec.failFast ? 'yes' : 'no'}`);
  out.push(...conditionsSection(st.conditions));
  out.push('', 'Nodes:');
  const graph = doc.appliedSpec ? graphOf(doc.appliedSpec, doc) : [];
  const rows = [...graph]
    .sort((a, b) => a.depth - b.depth)
    .map((g) => {
      const n = st.nodes[g.id];
      return [
        `${'  '.repeat(g.depth)}${g.depth ? '└ ' : ''}${g.id}`,
        n?.phase ?? 'Waiting',
        n?.run ?? '-',
        n?.attempts !== undefined ? String(n.attempts) : '-',
        g.needs.join(', ') || '-',
        age(n?.since),
        [n?.reason, n?.message].filter(Boolean).join(': '),
      ];
    });
  out.push(
    rows.length
      ? renderTable(['NODE', 'PHASE', 'RUN', 'ATTEMPTS', 'NEEDS', 'AGE', 'REASON'], rows).trimEnd()
      : '  (none)',
  );
  out.push(...(await history(r, 'dag', name)));
  return out.join('\n') + '\n';
}

/** The object's status document, or a NotFound error that says where to look. */
function statusOf<T extends StatusDoc>(r: StatusReader, kind: 'Run' | 'DAG', name: string): T {
  const doc = r.store.get<T>(kind, name);
  if (!doc)
    throw new AdvError(
      ErrorCode.NotFound,
      `${kind === 'DAG' ? 'DAG' : 'run'} "${printable(name)}" has no status`,
      {
        hint: `adv get ${kind === 'DAG' ? 'dags' : 'runs'} lists what exists`,
      },
    );
  return doc;
}

/** Where the run was forked from, and the runs forked from it (`adv fork`), from their status. */
function lineage(r: StatusReader, name: string, st: RunStatusDoc['status']): string[] {
  const out: string[] = [];
  if (st.forkedFrom)
    out.push(safe`Forked from:  run/${st.forkedFrom.run} at checkpoint step ${st.forkedFrom.step}`);
  const forks = r.store
    .names('Run')
    .map((n) => r.store.get<RunStatusDoc>('Run', n)!)
    .filter((d) => d.status.forkedFrom?.run === name && d.metadata.name !== name)
    .map((d) => `${d.metadata.name} (step ${d.status.forkedFrom!.step})`);
  if (forks.length) out.push(safe`Forks:        ${forks.join(', ')}`);
  return out;
}
