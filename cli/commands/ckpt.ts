import type { Command } from 'commander';
import { resolve } from 'node:path';
import { AdvError, ErrorCode, age } from '../../controller/index.js';
import { gcCheckpoints, listCheckpoints, restoreLatest } from '../../runtime/checkpoint.js';
import { progressBar } from '../../runtime/progress.js';
import { renderTable } from '../format.js';
import { checkName } from '../names.js';
import { parseDuration } from '../repo.js';
import { openCommandStore, type StoreOpts } from '../store.js';
import { printable, type Io } from '../output.js';

const storeOptions = (c: Command): Command =>
  c
    .option('--store <url>', 'object store (default: $ADV_STORE, else the Storage spec of the repo)')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--data-dir <dir>', "the controller's data dir (where a file store's relative path starts)");

export function registerCkpt(program: Command, io: Io): void {
  const ckpt = program
    .command('ckpt')
    .description('Checkpoints in the object store: list, download, collect garbage');

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

  storeOptions(ckpt.command('gc').description('Apply retention and delete uploads no manifest names'))
    .argument('[runs...]', 'runs (default: every run in the store)')
    .option('--keep-last <k>', 'committed checkpoints to keep per run', (v) => parseInt(v, 10), 3)
    .option('--keep-every <n>', 'also keep every step that is a multiple of N', (v) => parseInt(v, 10))
    .option('--grace <duration>', 'leave unfinished uploads younger than this alone', '1h')
    .option('--dry-run', 'say what would be deleted, delete nothing')
    .addHelpText(
      'after',
      '\nExamples:\n  adv ckpt gc --dry-run\n  adv ckpt gc my-run --keep-last 2 --keep-every 10000',
    )
    .action(
      async (
        runs: string[],
        opts: StoreOpts & { keepLast: number; keepEvery?: number; grace: string; dryRun?: boolean },
      ) => {
        runs.forEach((run) => checkName(run));
        const store = await openCommandStore(opts, io);
        const names = runs.length
          ? runs
          : (await store.listFolders('runs/')).map((f) => f.slice('runs/'.length, -1));
        let total = 0;
        for (const run of names) {
          const r = await gcCheckpoints(store, run, {
            keepLast: opts.keepLast,
            ...(opts.keepEvery ? { keepEvery: opts.keepEvery } : {}),
            graceMs: parseDuration(opts.grace),
            ...(opts.dryRun ? { dryRun: true } : {}),
          });
          total += r.deleted.length;
          if (r.deleted.length)
            io.stdout.write(
              `${printable(run)}: ${opts.dryRun ? 'would delete' : 'deleted'} ${r.deleted.length} objects; kept steps ${r.kept.join(', ') || 'none'}\n`,
            );
        }
        io.stdout.write(`${opts.dryRun ? 'would delete' : 'deleted'} ${total} objects in ${store.url}\n`);
      },
    );
}

function mib(n: number): string {
  return n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 2 ** 20).toFixed(1)} MiB`;
}
