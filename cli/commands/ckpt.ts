import type { Command } from 'commander';
import { resolve } from 'node:path';
import { AdvError, ErrorCode, age, type Run } from '../../controller/index.js';
import { listCheckpoints, restoreLatest } from '../../runtime/checkpoint.js';
import { heartbeatKey, type Heartbeat } from '../../runtime/heartbeat.js';
import { collectCheckpoints, parseKeepBest, type RetentionPolicy } from '../../runtime/retention.js';
import type { ObjectStore } from '../../runtime/store/types.js';
import { progressBar } from '../../runtime/progress.js';
import { renderTable } from '../format.js';
import { checkName } from '../names.js';
import { gitToken, parseDuration, resolveRepo } from '../repo.js';
import { openSpecsWorkTree } from '../specs-writer.js';
import { openCommandStore, type StoreOpts } from '../store.js';
import { printable, type Io } from '../output.js';

/** The options that say which object store a command reads (cli/store.ts). */
export const storeOptions = (c: Command): Command =>
  c
    .option('--store <url>', 'object store (default: $ADV_STORE, else the Storage spec of the repo)')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--data-dir <dir>', "the controller's data dir (where a file store's relative path starts)");

export function registerCkpt(program: Command, io: Io): void {
  const ckpt = program
    .command('ckpt')
    .description('Checkpoints in the object store: list, download, collect garbage');
  registerCkptLs(ckpt, io);
  registerCkptPull(ckpt, io);
  registerCkptGc(ckpt, io);
}

/** `adv ckpt ls RUN`: the checkpoints of a run, newest first. */
function registerCkptLs(ckpt: Command, io: Io): void {
  storeOptions(
    ckpt
      .command('ls')
      .description('List the checkpoints of a run, newest first, with why any does not count'),
  )
    .argument('<run>', 'run name')
    .addHelpText('after', '\nExamples:\n  adv ckpt ls fork-mid-2026-01-21-001')
    .action(async (run: string, opts: StoreOpts) => {
      checkName(run);
      const store = await openCommandStore(opts, io);
      const infos = await listCheckpoints(store, run);
      if (!infos.length) return void io.stdout.write(`No checkpoints for run ${run} in ${store.url}\n`);
      const rows = infos.map((i) => [
        String(i.step),
        i.manifest && !i.problem ? 'yes' : 'no',
        i.manifest ? String(i.manifest.files.length) : '-',
        i.manifest ? mib(i.manifest.totalBytes) : '-',
        i.manifest ? String(i.manifest.attempt) : '-',
        i.manifest ? age(i.manifest.createdAt) : '-',
        i.problem ?? '',
      ]);
      io.stdout.write(renderTable(['STEP', 'COMMITTED', 'FILES', 'SIZE', 'ATTEMPT', 'AGE', 'PROBLEM'], rows));
    });
}

/** `adv ckpt pull RUN`: download and verify one checkpoint. */
function registerCkptPull(ckpt: Command, io: Io): void {
  storeOptions(
    ckpt
      .command('pull')
      .description('Download and verify a checkpoint (the newest that verifies, or --step)'),
  )
    .argument('<run>', 'run name')
    .option('--step <n>', 'this step only', (v) => parseInt(v, 10))
    .option('--to <dir>', 'where to put it (as <dir>/<step>/)', '.')
    .addHelpText(
      'after',
      '\nExamples:\n  adv ckpt pull fork-mid-2026-01-21-001 --to ./ckpt   # then load ./ckpt/<step>/ in a notebook',
    )
    .action(async (run: string, opts: StoreOpts & { step?: number; to: string }) => {
      checkName(run);
      const store = await openCommandStore(opts, io);
      const bar = io.stderr.isTTY ? progressBar(io.stderr as NodeJS.WriteStream) : undefined;
      const r = await restoreLatest(store, run, resolve(io.cwd, opts.to), {
        ...(opts.step !== undefined ? { step: opts.step } : {}),
        warn: (m) => io.stderr.write(`warning: ${m}\n`),
        ...(bar ? { onProgress: (b: number, t: number) => bar('download', b, t) } : {}),
      });
      if (!r) {
        throw new AdvError(
          ErrorCode.NotFound,
          `no committed checkpoint${opts.step !== undefined ? ` at step ${opts.step}` : ''} for run ${run} in ${store.url}`,
          {
            hint: `adv ckpt ls ${run} shows what is there`,
          },
        );
      }
      io.stdout.write(
        `checkpoint ${r.step} (${r.manifest.files.length} files, ${mib(r.manifest.totalBytes)}) verified into ${resolve(io.cwd, opts.to, String(r.step))}\n`,
      );
    });
}

/** `adv ckpt gc [RUN...]`: apply retention, delete what no manifest names. */
function registerCkptGc(ckpt: Command, io: Io): void {
  storeOptions(
    ckpt
      .command('gc')
      .description(
        "Apply each run's retention policy (policy.checkpoints, or the --keep-* flags) and delete uploads no manifest names",
      ),
  )
    .argument('[runs...]', 'runs (default: every run in the store)')
    .option('--keep-last <k>', 'keep the newest K committed checkpoints per run', intArg('--keep-last'))
    .option('--keep-every <n>', 'also keep every step that is a multiple of N', intArg('--keep-every'))
    .option('--keep-best <metric:min|max>', 'also keep the best step by a logged metric (METRIC:min[:COUNT])')
    .option('--grace <duration>', 'leave unfinished uploads younger than this alone', '1h')
    .option('--dry-run', 'print the plan (what is kept and why), delete nothing')
    .addHelpText(
      'after',
      "\nThe policy of a run is its spec's policy.checkpoints when the specs repo is there; any --keep-*\nflag replaces it for every run named. Without either, the newest 3 are kept. The newest committed\ncheckpoint, and the one a live attempt restored, are never deleted.\n\nExamples:\n  adv ckpt gc --dry-run\n  adv ckpt gc my-run --keep-last 2 --keep-every 10000\n  adv ckpt gc my-run --keep-best loss:min --dry-run",
    )
    .action(async (runs: string[], opts: GcOpts) => {
      runs.forEach((run) => checkName(run));
      const override = flagPolicy(opts);
      const specs = override ? new Map<string, RetentionPolicy | string>() : await specPolicies(opts, io);
      const store = await openCommandStore(opts, io);
      const names = runs.length
        ? runs
        : (await store.listFolders('runs/')).map((f) => f.slice('runs/'.length, -1));
      let total = 0;
      for (const run of names) {
        const policy = override ?? specs.get(run) ?? { keepLast: 3 };
        if (typeof policy === 'string') {
          io.stderr.write(
            `${printable(run)}: skipped: its spec (${policy}) is invalid, so its policy.checkpoints is unknown; fix it (adv validate) or pass --keep-last/--keep-every/--keep-best\n`,
          );
          continue;
        }
        const r = await collectCheckpoints(store, run, {
          policy,
          protect: await liveRestore(store, run),
          graceMs: parseDuration(opts.grace),
          ...(opts.dryRun ? { dryRun: true } : {}),
        });
        total += r.deleted.length;
        io.stdout.write(gcReport(run, r, Boolean(opts.dryRun)));
      }
      io.stdout.write(`${opts.dryRun ? 'would delete' : 'deleted'} ${total} objects in ${store.url}\n`);
    });
}

interface GcOpts extends StoreOpts {
  keepLast?: number;
  keepEvery?: number;
  keepBest?: string;
  grace: string;
  dryRun?: boolean;
}

const intArg = (flag: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1)
    throw new AdvError(ErrorCode.UsageError, `${flag} takes a whole number ≥ 1, not ${JSON.stringify(v)}`);
  return n;
};

/** The policy the --keep-* flags say, or undefined when none is given. */
function flagPolicy(opts: GcOpts): RetentionPolicy | undefined {
  if (opts.keepLast === undefined && opts.keepEvery === undefined && opts.keepBest === undefined)
    return undefined;
  let keepBest: RetentionPolicy['keepBest'];
  try {
    keepBest = opts.keepBest !== undefined ? parseKeepBest(opts.keepBest) : undefined;
  } catch (e) {
    throw new AdvError(ErrorCode.UsageError, (e as Error).message, { hint: 'e.g. --keep-best loss:min' });
  }
  return {
    ...(opts.keepLast !== undefined ? { keepLast: opts.keepLast } : {}),
    ...(opts.keepEvery !== undefined ? { keepEvery: opts.keepEvery } : {}),
    ...(keepBest ? { keepBest } : {}),
  };
}

/**
 * `policy.checkpoints` of every Run in the specs repo, by name (an invalid Run spec: where it is
 * wrong, so its checkpoints are not collected by a default it never asked for); empty when there
 * is no repo to read (a --store given outside one): the default then applies.
 */
async function specPolicies(opts: GcOpts, io: Io): Promise<Map<string, RetentionPolicy | string>> {
  const out = new Map<string, RetentionPolicy | string>();
  let repo: string;
  try {
    repo = await resolveRepo(opts.repo, io.cwd);
  } catch (e) {
    if (opts.repo) throw e;
    return out;
  }
  const wt = await openSpecsWorkTree(repo, opts.branch ?? 'main', await gitToken(io.env), {
    anyBranch: true,
  });
  try {
    const specs = await wt.load();
    for (const o of specs.objects) {
      const policy = o.kind === 'Run' ? (o.object as Run).spec.policy?.checkpoints : undefined;
      if (policy) out.set(o.name, policy);
    }
    for (const d of specs.invalid) if (d.kind === 'Run' && d.name) out.set(d.name, `${d.file}:${d.line}`);
  } finally {
    await wt.close();
  }
  return out;
}

/** The step the run's latest attempt restored, while that attempt has not ended (its heartbeat says). */
async function liveRestore(store: ObjectStore, run: string): Promise<number[]> {
  const attempts = (await store.listFolders(`runs/${run}/attempts/`))
    .map((f) => Number(f.slice(`runs/${run}/attempts/`.length, -1)))
    .filter((n) => Number.isSafeInteger(n) && n > 0);
  if (!attempts.length) return [];
  const latest = Math.max(...attempts);
  const [hb, exit] = await Promise.all([
    store.get(heartbeatKey(run, latest)),
    store.get(`runs/${run}/attempts/${latest}/exit.json`),
  ]);
  if (!hb || exit) return [];
  try {
    const beat = JSON.parse(Buffer.from(hb).toString('utf8')) as Heartbeat;
    return beat.restoredFrom !== undefined ? [beat.restoredFrom] : [];
  } catch {
    return [];
  }
}

function gcReport(run: string, r: Awaited<ReturnType<typeof collectCheckpoints>>, dry: boolean): string {
  const name = printable(run);
  const lines = [
    ...r.plan.keep.map((s) => `${name}: keep ${s} (${r.plan.why.get(s)})`),
    ...r.plan.delete.map((s) => `${name}: ${dry ? 'would delete' : 'deleted'} ${s} (${r.plan.why.get(s)})`),
    ...r.garbage.map(
      (s) =>
        `${name}: ${dry ? 'would delete' : 'deleted'} ${s} (no manifest that verifies: an upload that never finished)`,
    ),
  ];
  return lines.length ? lines.join('\n') + '\n' : '';
}

/** A byte count for a table: KiB below 1 MiB, else MiB. */
export function mib(n: number): string {
  return n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 2 ** 20).toFixed(1)} MiB`;
}
