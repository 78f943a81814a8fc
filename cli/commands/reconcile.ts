import type { Command } from 'commander';
import { join } from 'node:path';
import { API_TOKEN_FILE, AdvError, ErrorCode, RECONCILE_ANNOTATION } from '../../controller/index.js';
import { apiToken, runningController, tokenHint } from '../controller-api.js';
import { checkName } from '../names.js';
import { printable, type Io } from '../output.js';
import { defaultDataDir, resolveRepo } from '../repo.js';
import { commitSpecEdit } from '../spec-edit.js';
import type { RepoOpts } from '../specs-writer.js';

/**
 * `adv reconcile run NAME`: asks a running controller over its API (found through
 * `<data dir>/controller.json`, with the API token from $ADV_API_TOKEN or `<data dir>/api-token`);
 * with none running, commits the reconcile annotation instead.
 */
export function registerReconcile(program: Command, io: Io): void {
  program
    .command('reconcile')
    .description('Ask the controller to look at a run now (a running controller is told directly)')
    .argument('<kind>', 'run')
    .argument('<name>', 'run name')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .option('--data-dir <dir>', "the controller's data dir, to find a running controller")
    .action(async (kind: string, name: string, opts: RepoOpts & { dataDir?: string }) => {
      if (!/^runs?$/i.test(kind))
        throw new AdvError(ErrorCode.UsageError, `cannot reconcile "${printable(kind)}"`, {
          hint: 'use: adv reconcile run NAME',
        });
      checkName(name);
      const repo = await resolveRepo(opts.repo, io.cwd);
      const dataDir = opts.dataDir ?? (await defaultDataDir(repo, io.env));
      const url = await runningController(dataDir);
      if (url) {
        const tokenFile = join(dataDir, API_TOKEN_FILE);
        const token = await apiToken(io, dataDir);
        const res = await fetch(`${url}/api/v1/reconcile/run/${encodeURIComponent(name)}`, {
          method: 'POST',
          headers: token ? { authorization: `Bearer ${token}` } : {},
        });
        if (res.status === 404)
          throw new AdvError(ErrorCode.NotFound, `controller answered 404: ${(await res.text()).trim()}`, {
            hint: 'check the name (adv get runs lists them), or commit the run first',
          });
        if (!res.ok)
          throw new AdvError(
            ErrorCode.BackendError,
            `controller answered ${res.status}: ${(await res.text()).trim()}`,
            { hint: res.status === 401 ? tokenHint(tokenFile) : 'check the controller log' },
          );

        io.stdout.write(`run/${name}: reconcile requested from the controller at ${url}\n`);
        return;
      }
      // No controller to tell: leave the request in git, as Flux's requestedAt annotation does.
      await commitSpecEdit(
        io,
        'Run',
        name,
        opts,
        (set) => set(['metadata', 'annotations', RECONCILE_ANNOTATION], new Date().toISOString()),
        `reconcile run/${name}`,
      );
    });
}
