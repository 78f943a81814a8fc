import type { Command } from 'commander';
import { AdvError, ErrorCode, type BackendSpec, type RunStatusDoc } from '../../controller/index.js';
import { routeTo } from '../forward.js';
import { checkName } from '../names.js';
import type { Io } from '../output.js';
import { gitToken, resolveRepo } from '../repo.js';
import { sessionKey, type SessionEndpoint } from '../../runtime/session.js';
import { openShell, shellCommand } from '../session.js';
import { openSpecsWorkTree, type RepoOpts } from '../specs-writer.js';
import { openStatus } from '../status-reader.js';
import { openCommandStore } from '../store.js';

/**
 * The job dir of a live attempt on a host reached over SSH: where the remote adapter puts it
 * (`<paths.work or paths.root/work>/<job name>`, `~` expanded on the host).
 */
export function remoteJobDir(spec: BackendSpec, jobName: string): string {
  const paths = (spec as { paths?: { root?: string; work?: string } }).paths ?? {};
  const root = paths.root ?? '~/.adventuretime';
  return `${paths.work ?? `${root}/work`}/${jobName}`;
}

/** `adv ssh RUN`: a login shell in the job dir of RUN's live attempt. */
export function registerSsh(program: Command, io: Io): void {
  program
    .command('ssh')
    .description("Open a login shell in the job dir of a run's live attempt, on its worker")
    .argument('<run>', 'the run')
    .option('--worker <k>', 'which worker of a multi-host attempt (volcano pods)', '0')
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .option('--store <url>', "the object store (default: the specs repo's Storage)")
    .addHelpText('after', '\nExamples:\n  adv ssh train-7b\n  adv ssh train-7b --worker 3')
    .action(async (run: string, opts: RepoOpts & { worker: string; store?: string }) => {
      const name = checkName(run);
      const r = await openStatus({ ...(opts.repo ? { repo: opts.repo } : {}) }, io);
      let doc: RunStatusDoc | undefined;
      try {
        doc = r.store.get<RunStatusDoc>('Run', name);
      } finally {
        await r.close();
      }
      const attempt = doc?.status.attempts.at(-1);
      if (!doc || !attempt || doc.status.phase !== 'Running')
        throw new AdvError(
          ErrorCode.NotFound,
          `run ${name} has no live attempt (${doc?.status.phase ?? 'no status'})`,
          {
            hint: 'adv get runs shows which are Running',
          },
        );
      const wt = await openSpecsWorkTree(
        await resolveRepo(opts.repo, io.cwd),
        opts.branch,
        await gitToken(io.env),
      );
      let spec: BackendSpec | undefined;
      try {
        const specs = await wt.loadCommitted(await wt.branchHead());
        const b = specs.objects.find((x) => x.kind === 'Backend' && x.name === attempt.backend);
        spec = (b?.object as { spec: BackendSpec } | undefined)?.spec;
      } finally {
        await wt.close();
      }
      if (!spec)
        throw new AdvError(ErrorCode.NotFound, `Backend ${attempt.backend} is no longer in ${opts.branch}`);
      // A session says where it is; any other job is where its backend puts job dirs.
      const store = await openCommandStore(opts, io);
      const raw = await store.get(sessionKey(name));
      const ep = raw ? (JSON.parse(Buffer.from(raw).toString('utf8')) as SessionEndpoint) : undefined;
      const session = ep?.attempt === attempt.n ? ep : undefined;
      const jobDir =
        session?.jobDir ??
        (spec.type === 'volcano'
          ? ''
          : spec.type === 'local'
            ? undefined
            : remoteJobDir(spec, attempt.jobName));
      if (jobDir === undefined)
        throw new AdvError(
          ErrorCode.UsageError,
          `run ${name} runs on the local backend: its job is on the controller's machine`,
          {
            hint: 'look in the controller data dir (jobs/), or run it as a session (adv shell)',
          },
        );
      const route = await routeTo({ name: attempt.backend, spec }, attempt, {
        env: io.env,
        worker: Number(opts.worker),
        ...(session ? { host: session.host } : {}),
      });
      process.exitCode = await openShell(route, shellCommand(jobDir, name, attempt.n, Boolean(session)), io);
    });
}
