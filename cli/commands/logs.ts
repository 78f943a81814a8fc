import type { Command } from 'commander';
import { AdvError, ErrorCode } from '../../controller/index.js';
import { attemptPrefix, logsPrefix } from '../../runtime/checkpoint.js';
import { printNewParts } from '../follow.js';
import { checkName } from '../names.js';
import { openCommandStore, type StoreOpts } from '../store.js';
import { printable, type Io } from '../output.js';

/** `--attempt N`: a whole number from 1. */
export function attemptNumber(v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n) || n < 1)
    throw new AdvError(ErrorCode.UsageError, `--attempt takes a whole number from 1, not "${printable(v)}"`, {
      hint: 'adv describe run NAME lists the attempts',
    });
  return n;
}

/** `--worker K`: a whole number from 0. */
function workerIndex(v: string): number {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isSafeInteger(n))
    throw new AdvError(ErrorCode.UsageError, `--worker takes a whole number from 0, not "${printable(v)}"`, {
      hint: 'worker 0 is the default; a multi-host attempt (a TPU slice, a multi-node SLURM job) has one per host',
    });
  return n;
}

export function registerLogs(program: Command, io: Io): void {
  program
    .command('logs')
    .description("Print a run's output from the object store — the same on every backend")
    .argument('<run>', 'run name')
    .option('--attempt <n>', 'which attempt (default: the latest)', attemptNumber)
    .option('--worker <k>', "a multi-host attempt's process K (default 0)", workerIndex)
    .option('-f, --follow', 'keep printing new output until the attempt ends')
    .option('--store <url>', 'object store (default: $ADV_STORE, else the Storage spec of the repo)')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--data-dir <dir>', "the controller's data dir (where a file store's relative path starts)")
    .addHelpText(
      'after',
      '\nExamples:\n  adv logs hello\n  adv logs fork-mid-2026-01-21-001 -f --attempt 2\n  adv logs tpu-sweep --worker 3',
    )
    .action(
      async (run: string, opts: StoreOpts & { attempt?: number; worker?: number; follow?: boolean }) => {
        checkName(run);
        const store = await openCommandStore(opts, io);
        const folders = await store.listFolders(`runs/${run}/attempts/`);
        const ns = folders
          .map((f) => Number(f.split('/').at(-2)))
          .filter(Number.isInteger)
          .sort((a, b) => a - b);
        if (!ns.length)
          throw new AdvError(ErrorCode.NotFound, `no logs for run ${run} in ${store.url}`, {
            hint: 'adv get runs shows which runs have started',
          });
        // An attempt the store has nothing of is not "no output yet": say which attempts there are.
        if (opts.attempt !== undefined && !ns.includes(opts.attempt))
          throw new AdvError(
            ErrorCode.NotFound,
            `run ${run} has no attempt ${opts.attempt} in ${store.url} (attempts: ${ns.join(', ')})`,
            {
              hint: `pass one of those (adv logs ${run} --attempt ${ns.at(-1)}); adv describe run ${run} lists every attempt`,
            },
          );
        const attempt = opts.attempt ?? ns.at(-1)!;
        const worker = opts.worker ?? 0;
        const prefix = logsPrefix(run, attempt, worker);
        const printed = new Set<string>();
        for (;;) {
          await printNewParts(io, store, prefix, printed);
          if (!opts.follow) break;
          if (await store.head(`${attemptPrefix(run, attempt)}exit.json`)) {
            // One more look: the last part is written before the exit record.
            let more = false;
            for await (const o of store.list(prefix)) if (!printed.has(o.key)) more = true;
            if (!more) break;
            continue;
          }
          await new Promise((r) => setTimeout(r, 1000));
        }
        if (!printed.size && !opts.follow)
          io.stderr.write(
            `(no output yet for ${run} attempt ${attempt}${worker ? ` worker ${worker}` : ''})\n`,
          );
      },
    );
}
