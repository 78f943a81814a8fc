import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import {
  AdvError,
  Controller,
  ErrorCode,
  checkTrustedSigners,
  configuredApiToken,
  dashboardRoute,
  infraOptionFor,
  isRemoteUrl,
  serve,
  type InfraOption,
} from '../../controller/index.js';
import { makeLogger } from '../logger.js';
import type { Logger } from 'pino';
import { defaultDataDir, gitToken, parseDuration, resolveRepo } from '../repo.js';
import { printable, type Io } from '../output.js';

interface Opts {
  repo?: string;
  branch: string;
  statusBranch?: string;
  dataDir?: string;
  path?: string;
  trustedSigners?: string;
  trustFrom?: string;
  infraDir?: string;
  adminSigners?: string;
  trustRepoInfra?: boolean;
  once?: boolean;
  timeout: string;
  fetchInterval: string;
  pollInterval: string;
  resyncInterval: string;
  leaseDuration: string;
  http?: string;
  dashboard?: boolean;
  dashboardHost?: string[];
  dashboardAuth?: boolean;
  apiTokenFile?: string;
  webhookSecretEnv: string;
  watch: boolean;
  logLevel: string;
  gitReader: 'native' | 'isomorphic';
  secretsFile?: string;
  secretsDir?: string;
  secretsEnv?: string;
  gitTokenOrigin?: string[];
}

/**
 * `--http HOST:PORT` (also `:PORT`, `PORT`, `[::1]:PORT`) checked before anything starts: a port
 * outside 0-65535 is a usage error naming the flag, not a RangeError from the socket.
 */
function checkHttpAddr(addr: string): string {
  const port = addr.slice(addr.lastIndexOf(':') + 1);
  if (/^\d{1,5}$/.test(port) && Number(port) <= 65535 && !/\s/.test(addr)) return addr;
  throw new AdvError(
    ErrorCode.UsageError,
    `--http "${printable(addr)}" is not HOST:PORT with a port in 0-65535`,
    { hint: 'e.g. --http 127.0.0.1:8080, --http [::1]:8080, or --http :8080 (port 0 picks a free one)' },
  );
}

/** Flags that do nothing with `--once` (it reconciles and exits: nothing is served or watched). */
function refuseWithOnce(opts: Opts): void {
  if (!opts.once) return;
  const served =
    opts.http !== undefined
      ? '--http'
      : opts.dashboard
        ? '--dashboard'
        : opts.dashboardHost
          ? '--dashboard-host'
          : opts.dashboardAuth
            ? '--dashboard-auth'
            : opts.apiTokenFile
              ? '--api-token-file'
              : undefined;
  if (served)
    throw new AdvError(ErrorCode.UsageError, `${served} cannot be used with --once: --once serves nothing`, {
      hint: `drop ${served} to reconcile once and exit, or drop --once to keep serving`,
    });
}

/**
 * Who may change Backends and Storage (controller/loop/desired/infra-source.ts): at most one of the three
 * flags; none means the specs repo for a local one, and a usage error for a shared one.
 */
async function infraOption(opts: Opts, repo: string): Promise<InfraOption> {
  const given = [
    opts.infraDir !== undefined && '--infra-dir',
    opts.adminSigners !== undefined && '--admin-signers',
    opts.trustRepoInfra && '--trust-repo-infra',
  ].filter((f): f is string => Boolean(f));
  if (given.length > 1)
    throw new AdvError(ErrorCode.UsageError, `${given.join(' and ')} cannot be used together`, {
      hint: 'choose one place Backends and Storage come from',
    });
  let option: InfraOption | undefined;
  if (opts.infraDir !== undefined) {
    const st = await stat(opts.infraDir).catch(() => undefined);
    if (!st?.isDirectory())
      throw new AdvError(ErrorCode.UsageError, `--infra-dir ${printable(opts.infraDir)} is not a directory`, {
        hint: 'name a directory holding the Backend and Storage specs this controller may use',
      });
    option = { from: 'dir', dir: resolve(opts.infraDir) };
  } else if (opts.adminSigners !== undefined)
    option = { from: 'signed', signers: await checkTrustedSigners(opts.adminSigners, '--admin-signers') };
  else if (opts.trustRepoInfra) option = { from: 'repo' };
  return infraOptionFor(option, isRemoteUrl(repo) ? 'remote' : 'local');
}

export function registerController(program: Command, io: Io): void {
  const cmd = program
    .command('controller')
    .description('Run the controller: watch the specs repo, run what it asks for, write status to git');
  repoOptions(cmd);
  serveOptions(cmd);
  cmd
    .addHelpText(
      'after',
      `
Examples:
  adv controller --once                                  # in a specs repo made by adv init
  adv controller --repo https://git.example.com/lab/specs.git --http 127.0.0.1:8080
      # token from ADV_GIT_TOKEN (or ADV_GIT_TOKEN_FILE); webhook secret from ADV_WEBHOOK_SECRET
      # point the git host's push webhook at http://HOST:8080/hooks/git
  adv controller --dashboard                             # then open http://127.0.0.1:8080/ui/
  adv controller --trusted-signers /etc/adventuretime/allowed_signers   # signed commits only

The webhook is authenticated by its signature, the API (adv reconcile) by the API token. The
dashboard and /metrics are open to whoever reaches the port unless --dashboard-auth is given: keep
--http on loopback (reach it through an SSH tunnel) or use --dashboard-auth. Every route answers
only Host names localhost and IP addresses (a defence against DNS rebinding); --dashboard-host
adds the names a git host or a proxy uses.`,
    )
    .action((opts: Opts) => runController(io, opts));
}

/** Where the specs come from, whom to trust, how often to look. */
function repoOptions(cmd: Command): void {
  cmd
    .option('--repo <url|path>', 'specs repo (default: the repository of the current directory)')
    .option('--branch <name>', 'the watched branch', 'main')
    .option('--status-branch <name>', 'where status is written (default adventuretime/status)')
    .option('--data-dir <dir>', 'working clone and local job dirs (default: inside .git for a local repo)')
    .option('--path <dir>', 'only specs under this folder of the repo')
    .option(
      '--trusted-signers <file>',
      'OpenSSH allowed_signers file: act only on watched-branch commits signed by its keys (and never on a rollback)',
    )
    .option(
      '--trust-from <commit>',
      'with --trusted-signers and a data dir that has no last verified commit (a new machine, a standby): the signed commit to trust first',
    )
    .option(
      '--infra-dir <dir>',
      'take Backend and Storage specs from this directory of the controller host, never from the specs repo',
    )
    .option(
      '--admin-signers <file>',
      'OpenSSH allowed_signers file: Backends and Storage as of the newest watched-branch commit signed by one of its keys',
    )
    .option(
      '--trust-repo-infra',
      'everyone who can push may change Backends and Storage (the default for a local specs repo)',
    )
    .option('--once', 'reconcile until no run is in flight, then exit (for scripts and tests)')
    .option('--timeout <duration>', 'with --once: give up after this long', '10m')
    .option('--fetch-interval <duration>', 'how often to fetch the specs repo', '10s')
    .option('--poll-interval <duration>', 'how often to poll backends for live jobs', '2s')
    .option('--resync-interval <duration>', 'how often to re-examine every object', '60s')
    .option(
      '--lease-duration <duration>',
      'how long the status branch lease lasts unrenewed: a standby controller (another data dir, same repo) takes over after this long',
      '30s',
    );
}

/** What is served, and where the runs' secrets come from. */
function serveOptions(cmd: Command): void {
  cmd
    .option('--http <host:port>', 'serve the webhook and API on this address (e.g. 127.0.0.1:8080)')
    .option(
      '--dashboard',
      'serve a read-only web dashboard at /ui/ on the --http listener (127.0.0.1:8080 unless --http says otherwise)',
    )
    .option(
      '--dashboard-host <name...>',
      'Host names the --http listener answers besides localhost and IP addresses, on every route (webhook, API, /metrics, dashboard): list the public name a git host calls in its webhook URL, or a proxy forwards; * for any',
    )
    .option(
      '--dashboard-auth',
      'the dashboard and /metrics require the API token too (Authorization: Bearer, or a cookie set by opening /ui/?token=TOKEN once)',
    )
    .option(
      '--api-token-file <file>',
      'file holding the API token adv reconcile must send (mode 0600; default: $ADV_API_TOKEN, else a random token written to <data dir>/api-token)',
    )
    .option(
      '--secrets-file <file>',
      "dotenv NAME=value file the runs' secrets are read from first (mode 0600)",
    )
    .option('--secrets-dir <dir>', 'then a directory with one file per secret (a mounted Kubernetes Secret)')
    .option(
      '--git-token-origin <url...>',
      "https://host[:port] (besides the specs repo's) that ADV_GIT_TOKEN may be sent to, to fetch a run's code.repo there",
    )
    .option(
      '--secrets-env <names>',
      "then these names (comma-separated) from the controller's own environment; default $ADV_SECRETS_ENV",
    )
    .option(
      '--webhook-secret-env <name>',
      'environment variable holding the webhook secret',
      'ADV_WEBHOOK_SECRET',
    )
    .option('--no-watch', 'do not watch a local repo for ref changes')
    .option('--log-level <level>', 'trace, debug, info, warn, error', 'info')
    .option(
      '--git-reader <impl>',
      'object reader: native (git cat-file) or isomorphic (isomorphic-git)',
      'native',
    );
}

/** `adv controller`: checks the command line, starts the controller, then serves it (or runs once). */
async function runController(io: Io, opts: Opts): Promise<void> {
  // The command line first: nothing is opened or started for flags that cannot work.
  refuseWithOnce(opts);
  if (opts.http !== undefined) checkHttpAddr(opts.http);
  const trustedSigners = opts.trustedSigners && (await checkTrustedSigners(opts.trustedSigners));
  if (opts.trustFrom !== undefined && !trustedSigners)
    throw new AdvError(ErrorCode.UsageError, '--trust-from needs --trusted-signers', {
      hint: 'it names the first signed commit to trust; without signed commits there is nothing to anchor',
    });
  const apiToken = opts.once ? undefined : await configuredApiToken(opts.apiTokenFile, io.env);
  const repo = await resolveRepo(opts.repo, io.cwd);
  const infra = await infraOption(opts, repo);
  const dataDir = opts.dataDir ?? (await defaultDataDir(repo, io.env));
  const logger = makeLogger(io, opts.logLevel);
  const token = await gitToken(io.env);
  const controller = await Controller.create({
    repo,
    branch: opts.branch,
    ...(opts.statusBranch ? { statusBranch: opts.statusBranch } : {}),
    dataDir,
    ...(token ? { token } : {}),
    ...(opts.path ? { specsPath: opts.path.replace(/^\/+|\/+$/g, '') } : {}),
    ...(trustedSigners ? { trustedSigners } : {}),
    ...(opts.trustFrom ? { trustFrom: opts.trustFrom } : {}),
    infra,
    reader: opts.gitReader,
    fetchIntervalMs: parseDuration(opts.fetchInterval),
    pollIntervalMs: parseDuration(opts.pollInterval),
    resyncIntervalMs: parseDuration(opts.resyncInterval),
    leaseDurationMs: parseDuration(opts.leaseDuration),
    logger,
    processMetrics: true,
    ...(opts.gitTokenOrigin ? { codeRepos: { tokenOrigins: tokenOrigins(opts.gitTokenOrigin) } } : {}),
    secrets: {
      file: opts.secretsFile,
      dir: opts.secretsDir,
      env: (opts.secretsEnv ?? io.env.ADV_SECRETS_ENV ?? '').split(',').filter(Boolean),
    },
  });
  logger.info(
    { repo: controller.repo.location, mode: controller.repo.mode, branch: opts.branch, dataDir },
    'controller starting',
  );
  if (opts.once) {
    try {
      await controller.runUntilIdle({ timeoutMs: parseDuration(opts.timeout) });
    } finally {
      await controller.stop();
    }
    return;
  }
  await serveController(io, opts, controller, apiToken, logger);
}

/** Serves the webhook, the API and the dashboard, and reconciles until SIGINT or SIGTERM. */
async function serveController(
  io: Io,
  opts: Opts,
  controller: Controller,
  apiToken: Awaited<ReturnType<typeof configuredApiToken>>,
  logger: Logger,
): Promise<void> {
  const secret = io.env[opts.webhookSecretEnv];
  const httpAddr = opts.http ?? (opts.dashboard ? '127.0.0.1:8080' : undefined);
  const serving = await serve(controller, {
    ...(httpAddr ? { httpAddr } : {}),
    ...(secret ? { webhookSecret: secret } : {}),
    ...(apiToken ? { apiToken: apiToken.token } : {}),
    ...(opts.dashboardHost ? { allowedHosts: opts.dashboardHost } : {}),
    ...(opts.dashboardAuth ? { dashboardAuth: true } : {}),
    watch: opts.watch,
    ...(opts.dashboard
      ? {
          routes: [
            dashboardRoute(controller, opts.dashboardHost ? { allowedHosts: opts.dashboardHost } : {}),
          ],
        }
      : {}),
  }).catch(async (e: unknown) => {
    // The address is taken, say: stop what was started, or the process never exits.
    await controller.stop();
    throw e;
  });
  if (serving.url && apiToken) logger.info({ apiTokenFrom: apiToken.from }, 'API token configured');
  if (serving.url) logger.info({ url: serving.url }, 'serving webhook and API');
  if (serving.url && opts.dashboard)
    logger.info({ url: `${serving.url}/ui/` }, `dashboard at ${serving.url}/ui/`);
  await controller.writeRuntimeInfo({ url: serving.url ?? null, repo: controller.repo.location });
  // Reconciling stops first (agents waiting for work are answered at once, no claim or lease
  // changes hands), then the listener drops its connections: a restart takes seconds.
  const stop = async () => {
    logger.info('stopping');
    await controller.stop();
    await serving.close();
    logger.info('stopped');
  };
  process.once('SIGINT', () => void stop());
  process.once('SIGTERM', () => void stop());
  await controller.run();
}

/** `--git-token-origin` values: each an http(s) URL, of which its scheme, host and port count. */
function tokenOrigins(values: readonly string[]): string[] {
  return values.map((v) => {
    const u = URL.canParse(v) ? new URL(v) : undefined;
    if (!u || (u.protocol !== 'https:' && u.protocol !== 'http:'))
      throw new AdvError(ErrorCode.UsageError, `--git-token-origin ${v} is not an http(s) URL`, {
        hint: 'write the scheme and host the token belongs to, e.g. https://git.example.com',
      });
    return u.origin;
  });
}
