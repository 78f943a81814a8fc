import type { Command } from 'commander';
import { AdvError, ErrorCode } from '../../controller/index.js';
import { attemptPrefix } from '../../runtime/checkpoint.js';
import { openCommandStore, type StoreOpts } from '../store.js';
import type { Io } from '../output.js';

export function registerLogs(program: Command, io: Io): void {
  program
    .command('logs')
    .description("Print a run's output from the object store — the same on every backend")
    .argument('<run>', 'run name')
    .option('--attempt <n>', 'which attempt (default: the latest)', (v) => parseInt(v, 10))
    .option('-f, --follow', 'keep printing new output until the attempt ends')
    .option('--store <url>', 'object store (default: $ADV_STORE, else the Storage spec of the repo)')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--data-dir <dir>', "the controller's data dir (where a file store's relative path starts)")
    .addHelpText('after', '\nExamples:\n  adv logs hello\n  adv logs fork-mid-2026-01-21-001 -f --attempt 2')
    .action(async (run: string, opts: StoreOpts & { attempt?: number; follow?: boolean }) => {
      const store = await openCommandStore(opts, io);
      let attempt = opts.attempt;
      if (attempt === undefined) {
        const folders = await store.listFolders(`runs/${run}/attempts/`);
        const ns = folders.map((f) => Number(f.split('/').at(-2))).filter(Number.isInteger);
        if (!ns.length)
          throw new AdvError(ErrorCode.NotFound, `no logs for run ${run} in ${store.url}`, {
            hint: 'adv get runs shows which runs have started',
          });
        attempt = Math.max(...ns);
      }
      const prefix = `${attemptPrefix(run, attempt)}logs/`;
      const printed = new Set<string>();
      for (;;) {
        const parts: string[] = [];
        for await (const o of store.list(prefix)) if (!printed.has(o.key)) parts.push(o.key);
        for (const key of parts.sort()) {
          const body = await store.get(key);
          if (body) io.stdout.write(Buffer.from(body));
          printed.add(key);
        }
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
      if (!printed.size && !opts.follow) io.stderr.write(`(no output yet for ${run} attempt ${attempt})\n`);
    });
}
